// hp::shmem: symmetric memory and one-sided communication between PEs (processing elements).
//
// The model is OpenSHMEM 1.5's: every PE owns a symmetric heap of the same size; an object
// allocated collectively (malloc/align/calloc) lives at the same offset in every PE's heap, so
// the local address of an object names it on every PE. put/get move bytes to/from another PE's
// copy; put_signal also updates a 64-bit signal there after the data; atomics act on another
// PE's 32/64-bit words; waits block on local words until another PE changes them.
//
// Transports, picked per job: "threads" (every PE a thread of this process, run_threads()),
// "shm" (PEs are processes of one host started by hprun; every heap is a shared mapping every
// PE maps, so RMA is a load/store), "mpi" (MPI-3 RMA for PEs on other hosts).
//
// Errors: every call returns a Status. PEER_DEAD when another PE died or the job was aborted;
// TIMEOUT when a wait passes HP_SHMEM_TIMEOUT_S (the message names the PE and address);
// NOT_SYMMETRIC for an address outside the symmetric heap; OUT_OF_RANGE for a bad PE;
// MISALIGNED for a word not aligned to its size; OUT_OF_MEMORY for a full heap; DOUBLE_FREE;
// PERMISSION_DENIED for a job another user started; CORRUPT_DATA for a job segment that is not
// one (docs/shmem.md, "Who can join a job").
//
// Threads: in a threads job each PE thread has its own current PE. In a process job the PE
// is process-wide: any thread of the process may call these functions.
#ifndef HYPER_PARALLEL_SHMEM_SHMEM_H_
#define HYPER_PARALLEL_SHMEM_SHMEM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"

namespace hp::shmem {

enum class Cmp : int { kEq = 0, kNe = 1, kGt = 2, kGe = 3, kLt = 4, kLe = 5 };
enum class SignalOp : int { kSet = 0, kAdd = 1 };
enum class ReduceOp : int { kSum = 0, kMax = 1, kMin = 2 };

HP_API std::string_view to_string(Cmp cmp) noexcept;

// `value` <cmp> `target`, as the waits evaluate it.
template <typename T>
constexpr bool satisfies(T value, Cmp cmp, T target) noexcept {
  switch (cmp) {
    case Cmp::kEq:
      return value == target;
    case Cmp::kNe:
      return value != target;
    case Cmp::kGt:
      return value > target;
    case Cmp::kGe:
      return value >= target;
    case Cmp::kLt:
      return value < target;
    case Cmp::kLe:
      return value <= target;
  }
  return false;
}

// ---- lifetime -----------------------------------------------------------------------------
// Initializes this process as a PE: from hprun's environment (HP_JOB_ID, HP_RANK,
// HP_WORLD_SIZE: the shm transport), or as the only PE of a one-PE job when neither is set.
// HP_SHMEM_TRANSPORT=mpi initializes from MPI instead (when the library is built with it).
// Idempotent calls are reference-counted: each init needs a finalize.
HP_API Status init();
// Finalizes (collective: a quiet and a barrier). Never hangs: after a failure of the job (a PE
// lost, a wait past its deadline: the job is then aborted) it returns at once without the
// barrier, and over MPI frees nothing collectively and leaves an MPI this library initialized
// unfinalized, so the launcher ends the job.
HP_API Status finalize();
HP_API bool initialized() noexcept;

struct ThreadsOptions {
  std::size_t heap_bytes = 0;  // 0: HP_SHMEM_HEAP_SIZE
  double timeout_s = 0;        // 0: HP_SHMEM_TIMEOUT_S
};
// Runs body() on n_pes threads, each the initialized PE of one in-process job (threads
// transport); finalizes each PE after its body. The first failing PE aborts the job (the
// others' blocking calls return PEER_DEAD) and its Status is returned.
HP_API Status run_threads(int n_pes, const std::function<Status()>& body,
                          const ThreadsOptions& options = {});

// Ends the whole job with `status` (OpenSHMEM shmem_global_exit): the other PEs' blocking calls
// return PEER_DEAD, and hprun exits with `status`. Does not return.
[[noreturn]] HP_API void global_exit(int status) noexcept;

// Helper threads of a PE. In a threads job each PE is a thread and other threads are no PE; a
// thread the PE hands work to (a chip's core, say) calls bind_thread with the PE's
// pe_binding() first, and bind_thread({}) when done. In a process job (hprun, mpirun) every
// thread of the process is the PE already and binding changes nothing. Calls from a PE and its
// helpers must not overlap (the MPI transport serializes them; the others are not thread-safe).
struct PeBinding {
  const void* context = nullptr;
};
HP_API PeBinding pe_binding() noexcept;
HP_API void bind_thread(PeBinding binding) noexcept;
// bind_thread for a scope: the calling thread works for `binding`'s PE until the end of it.
class ThreadBinding {
 public:
  explicit ThreadBinding(PeBinding binding) noexcept { bind_thread(binding); }
  ~ThreadBinding() { bind_thread({}); }
  ThreadBinding(const ThreadBinding&) = delete;
  ThreadBinding& operator=(const ThreadBinding&) = delete;
};

HP_API int my_pe() noexcept;  // -1 before init
HP_API int n_pes() noexcept;  // -1 before init
// How this PE reaches `pe`: "self", "threads", "shm" (load/store), "mpi" (RMA), or "" (bad pe).
HP_API std::string_view transport_name(int pe) noexcept;
HP_API std::size_t heap_size() noexcept;  // usable bytes of the symmetric heap

// ---- symmetric memory (collective: every PE calls with the same arguments, in order) ----
HP_API Status malloc(std::size_t bytes, void** out);
HP_API Status calloc(std::size_t count, std::size_t size, void** out);
HP_API Status align(std::size_t alignment, std::size_t bytes, void** out);
HP_API Status free(void* ptr);
// A load/store pointer to `addr`'s copy on `pe`, or null when that PE is not reachable by
// load/store (another host) or `addr` is not symmetric.
HP_API void* ptr(const void* addr, int pe) noexcept;
HP_API bool addr_accessible(const void* addr, int pe) noexcept;

// ---- RMA ----------------------------------------------------------------------------------
// Blocking calls return when the source buffer may be reused (put) or the data arrived (get).
// A transfer of 0 bytes moves nothing and reads no address: any dest and source are valid (the
// PE still must be one); put_signal with 0 bytes delivers only its signal.
HP_API Status put(void* dest, const void* source, std::size_t bytes, int pe);
HP_API Status get(void* dest, const void* source, std::size_t bytes, int pe);
// Non-blocking: complete at the next quiet() (or barrier).
HP_API Status put_nbi(void* dest, const void* source, std::size_t bytes, int pe);
HP_API Status get_nbi(void* dest, const void* source, std::size_t bytes, int pe);
// nblocks blocks of block_bytes: block b from source + b x source_stride (local) to dest +
// b x dest_stride on pe (byte strides), as one put (OpenSHMEM 1.6's ibput): every block is
// checked before any moves, and the target is woken once.
HP_API Status put_blocks(void* dest, const void* source, std::ptrdiff_t dest_stride,
                         std::ptrdiff_t source_stride, std::size_t block_bytes, std::size_t nblocks,
                         int pe);
// The data, then the signal (set or add), so that a PE that sees the signal sees the data.
// sig_addr must be a symmetric, 8-byte aligned uint64_t.
HP_API Status put_signal(void* dest, const void* source, std::size_t bytes, std::uint64_t* sig_addr,
                         std::uint64_t signal, SignalOp op, int pe);
HP_API Status put_signal_nbi(void* dest, const void* source, std::size_t bytes,
                             std::uint64_t* sig_addr, std::uint64_t signal, SignalOp op, int pe);
HP_API std::uint64_t signal_fetch(const std::uint64_t* sig_addr) noexcept;
// Orders puts to each PE (fence) / completes every outstanding put and get (quiet).
HP_API Status fence();
HP_API Status quiet();

// Typed single elements (shmem_<type>_p / _g). T: any trivially copyable type.
template <typename T>
Status p(T* dest, T value, int pe) {
  return put(dest, &value, sizeof(T), pe);
}
template <typename T>
Status g(const T* source, int pe, T* out) {
  return get(out, source, sizeof(T), pe);
}

// ---- waits on local symmetric words ---------------------------------------------------------
// T: std::int16_t, std::uint16_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t.
// The word is read atomically. A test (and signal_fetch) first lets the transport apply what
// other PEs sent this PE, so that a loop of tests sees their updates as a wait would.
template <typename T>
HP_API Status wait_until(T* ivar, Cmp cmp, T value);
template <typename T>
HP_API Status test(T* ivar, Cmp cmp, T value, bool* satisfied);
// Lets the transport (if any) apply RMA that targets this PE; a no-op without a job.
HP_API void progress() noexcept;
// Arrays: status[i] != 0 excludes ivars[i] (status may be null).
template <typename T>
HP_API Status wait_until_all(T* ivars, std::size_t n, const int* status, Cmp cmp, T value);
template <typename T>
HP_API Status wait_until_any(T* ivars, std::size_t n, const int* status, Cmp cmp, T value,
                             std::size_t* index);
template <typename T>
HP_API Status wait_until_some(T* ivars, std::size_t n, const int* status, Cmp cmp, T value,
                              std::size_t* indices, std::size_t* count);
// Waits until ready() holds, where ready() reads this PE's symmetric memory (which other PEs
// change with puts, signals and atomics): the deadline, abort and wake-ups of every wait here.
// `what` names the wait in a TIMEOUT message.
HP_API Status wait_for(const std::function<bool()>& ready, std::string_view what);
// Returns the value that satisfied the comparison through `value_out` (may be null).
HP_API Status signal_wait_until(std::uint64_t* sig_addr, Cmp cmp, std::uint64_t value,
                                std::uint64_t* value_out = nullptr);

// ---- atomics on another PE's word (T as for waits) -------------------------------------------
template <typename T>
HP_API Status atomic_fetch_add(T* dest, T value, int pe, T* old);
template <typename T>
HP_API Status atomic_add(T* dest, T value, int pe);
template <typename T>
HP_API Status atomic_compare_swap(T* dest, T cond, T value, int pe, T* old);
template <typename T>
HP_API Status atomic_swap(T* dest, T value, int pe, T* old);
template <typename T>
HP_API Status atomic_fetch(const T* source, int pe, T* out);
template <typename T>
HP_API Status atomic_set(T* dest, T value, int pe);

// ---- synchronization ------------------------------------------------------------------------
HP_API Status barrier_all();  // quiet, then wait for every PE
HP_API Status sync_all();     // wait for every PE (no quiet)

// ---- teams --------------------------------------------------------------------------------
// A team is an ordered subset of the world's PEs. kTeamWorld and kTeamShared always exist.
// kTeamShared is the PEs whose heaps this PE maps (ptr() gives an address for each): every PE
// of a one-host job on shared memory, the PEs of this host under mpirun, only this PE on the
// mpi transport (every other PE through RMA). Members on other hosts hold the same handle for
// their own host's team.
using Team = int;
inline constexpr Team kTeamWorld = 0;
inline constexpr Team kTeamShared = 1;
inline constexpr Team kTeamInvalid = -1;

// Collective over `parent`: the PEs start, start+stride, ... (size of them, indices in the
// parent) form a new team; PEs outside it get kTeamInvalid.
HP_API Status team_split_strided(Team parent, int start, int stride, int size, Team* out);
HP_API Status team_destroy(Team team);
HP_API int team_my_pe(Team team) noexcept;  // -1 if not a member
HP_API int team_n_pes(Team team) noexcept;  // -1 if invalid
// `pe` of `source` as a PE index of `dest`, or -1.
HP_API int team_translate_pe(Team source, int pe, Team dest) noexcept;
HP_API Status team_sync(Team team);

// ---- collectives on a team (dest and source symmetric; every member calls) ---------------
HP_API Status broadcast(Team team, void* dest, const void* source, std::size_t bytes, int root);
// dest: team size blocks of `bytes`; block i comes from team PE i.
HP_API Status fcollect(Team team, void* dest, const void* source, std::size_t bytes);
// Each member gives its own number of bytes; dest: the members' bytes in team order (member j's
// after those of members 0..j-1). dest may overlap source.
HP_API Status collect(Team team, void* dest, const void* source, std::size_t bytes);
// source and dest: team size blocks of `bytes_per_pe`; block j of PE i lands in block i of PE j.
HP_API Status alltoall(Team team, void* dest, const void* source, std::size_t bytes_per_pe);
// count elements of dtype (int32, int64, fp32, fp64; bf16 summed in fp32) reduced across the
// team.
HP_API Status allreduce(Team team, void* dest, const void* source, std::size_t count, DType dtype,
                        ReduceOp op);
// source: team size blocks of count_per_pe elements; block i of the reduction lands on PE i.
HP_API Status reduce_scatter(Team team, void* dest, const void* source, std::size_t count_per_pe,
                             DType dtype, ReduceOp op);

// Reductions of any element type with a caller's combine: combine(accumulator, in, count, user)
// folds `count` elements at `in` into as many at `accumulator` (both element_bytes apart).
// The result is member 0's elements combined with member 1's, then member 2's, ... in team
// order, so every member gets the same bits (floating point included) and a non-commutative
// combine is a left fold. `in` and `accumulator` hold whole chunks of elements, aligned as the
// source is (the accumulator to 64 bytes). dest may be source.
using ReduceFn = void (*)(void* accumulator, const void* in, std::size_t count, void* user);
HP_API Status allreduce_with(Team team, void* dest, const void* source, std::size_t count,
                             std::size_t element_bytes, ReduceFn combine, void* user);
HP_API Status reduce_scatter_with(Team team, void* dest, const void* source,
                                  std::size_t count_per_pe, std::size_t element_bytes,
                                  ReduceFn combine, void* user);
// Prefix reductions in team order (OpenSHMEM 1.6's scans): member m's dest gets the combine of
// members 0..m (inclusive) or 0..m-1 (exclusive; member 0 gets zero bytes, the sum's identity).
// dest may be source.
HP_API Status scan_with(Team team, void* dest, const void* source, std::size_t count,
                        std::size_t element_bytes, ReduceFn combine, void* user, bool inclusive);

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_SHMEM_H_
