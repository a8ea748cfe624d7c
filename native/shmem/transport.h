// A transport for PEs this process cannot reach by load/store (internal header).
//
// The threads and shm transports map every PE's segment, so RMA on them is a copy (see
// rma.cpp). A RemoteTransport carries RMA to the PEs whose segment is not mapped here: the
// MPI transport (transport_mpi.cpp, built as the plugin libhyper_parallel_shmem_mpi.so and
// loaded only when HP_SHMEM_TRANSPORT asks for it). Offsets are segment offsets (the
// ControlArea included), the same on every PE.
#ifndef HYPER_PARALLEL_SHMEM_TRANSPORT_H_
#define HYPER_PARALLEL_SHMEM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/settings.h"
#include "common/status.h"

namespace hp::shmem {

// kSet and kAdd fetch nothing; the others return the word's old value.
enum class AtomicOp { kFetch, kSet, kAdd, kSwap, kCompareSwap, kFetchAdd };

class RemoteTransport {
 public:
  virtual ~RemoteTransport() = default;
  virtual std::string_view name() const noexcept = 0;

  // Returns when `source` may be reused (remote completion at the next flush/quiet).
  virtual Status put(int pe, std::size_t offset, const void* source, std::size_t bytes) = 0;
  // nblocks blocks of block_bytes, block b from source + b x source_stride to offset + b x
  // dest_stride (byte strides), as one put: returns and completes as put does.
  virtual Status put_blocks(int pe, std::size_t offset, const void* source,
                            std::ptrdiff_t dest_stride, std::ptrdiff_t source_stride,
                            std::size_t block_bytes, std::size_t nblocks) = 0;
  // Returns when the data arrived.
  virtual Status get(int pe, std::size_t offset, void* dest, std::size_t bytes) = 0;
  // A 4- or 8-byte atomic on `pe`'s word. A fetching one (kFetch, kSwap, kCompareSwap,
  // kFetchAdd) is complete (remotely) on return and `result` receives the word's old value. A
  // non-fetching one (kSet, kAdd) to another PE completes, like a put, at the next flush of
  // that PE or quiet (OpenSHMEM's non-fetching atomics and signal updates), but it arrives
  // without either, by the target's progress; to this PE itself it is complete on return.
  // Atomics from this PE to one word apply in the order they were issued; a put or get of a
  // word after a non-fetching atomic on it is not ordered with it without a flush or quiet
  // between (as OpenSHMEM requires a fence or quiet there).
  virtual Status atomic(int pe, std::size_t offset, AtomicOp op, std::size_t width,
                        const void* operand, const void* compare, void* result) = 0;
  // put() of `bytes` (0: none) and, once they are delivered, the signal update `op` (kSet or
  // kAdd) of the 8-byte word at signal_offset of `pe`; returns and completes as put does.
  virtual Status put_signal(int pe, std::size_t offset, const void* source, std::size_t bytes,
                            std::size_t signal_offset, std::uint64_t signal, AtomicOp op) = 0;
  // Remote completion of this PE's puts to `pe` / to every PE.
  virtual Status flush(int pe) = 0;
  virtual Status quiet() = 0;
  // Lets RMA that targets this PE land and become visible to its loads (called while waiting).
  // Returns whether it applied or answered something another PE sent (more may follow).
  virtual bool progress() noexcept = 0;
  // A barrier of every PE, in the transport's own messages (every PE calls it, in the same
  // order as its other world barriers): start_barrier() enters it; barrier_done() (called while
  // waiting, it makes progress) sets *done once every PE has entered, after which this PE's
  // loads see what the others' RMA completed before they entered. It orders nothing by itself:
  // barrier_all quiets first.
  virtual Status start_barrier() = 0;
  virtual Status barrier_done(bool* done) = 0;
  // True when atomics must go through the transport even for mapped PEs (and this PE):
  // the transport's atomics are not atomic with respect to the CPU's.
  virtual bool owns_atomics() const noexcept = 0;
  // The first PEER_DEAD or TIMEOUT a call returned (a PE was lost, or did not answer within
  // the deadline; the job cannot synchronize again), OK while there was none.
  virtual Status failure() const = 0;
  // The job failed: the destructor then makes no call that needs the other PEs (no window or
  // communicator is freed, no send awaited) and MPI, if this library initialized it, is not
  // finalized at exit; what it holds is left to the process's end. finalize() calls it
  // before destroying the transport of an aborted job.
  virtual void abandon() noexcept = 0;
};

// What the MPI plugin's bootstrap returns.
struct MpiStart {
  int pe = -1;
  int n_pes = 0;
  // Each PE's segment in this address space, null where it is reachable only through the
  // transport. [pe] is this PE's own segment (zeroed).
  std::vector<std::byte*> segments;
  std::unique_ptr<RemoteTransport> transport;
};

// The plugin's entry point (looked up with dlsym): initializes MPI unless the program did,
// allocates this PE's segment of `segment_bytes` in an MPI window, placed so that segment +
// heap_offset is heap_alignment()-aligned (segment_map.h), and returns the job. all_remote:
// every other PE through RMA (HP_SHMEM_TRANSPORT=mpi); otherwise PEs on this host are mapped
// (MPI_Win_allocate_shared) and only the others go through RMA. timeout_s (> 0): the deadline
// of every MPI call the transport makes (mpi_call_deadline.h). messages: to which PEs it carries
// atomics and put_signal by message (HP_SHMEM_MPI_MESSAGES).
using MpiStartFn = Status (*)(std::size_t segment_bytes, std::size_t heap_offset, bool all_remote,
                              double timeout_s, MpiMessagePath messages, MpiStart* out);
inline constexpr const char* kMpiStartSymbol = "hp_shmem_mpi_start";
inline constexpr const char* kMpiPluginName = "libhyper_parallel_shmem_mpi.so";

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_TRANSPORT_H_
