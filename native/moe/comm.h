// Communication contexts of dispatch and combine: how bytes reach another rank's window and how
// it learns they arrived. A template parameter of the dispatch/combine code (no virtual call in
// the hot loop). Both see the same windows (one symmetric allocation, window_layout.h) and the
// same status slots (64-bit words 64 bytes apart, written with an epoch number):
//
//   Comm::open(dest, remote, bytes) -> a pointer to write `bytes` that end up at `remote` (a
//       symmetric address) on rank dest, or null with *status set;
//   Comm::close(dest, remote, written, bytes) -> sends what was written (if it was staged);
//   Comm::signal(flag, value, dest) -> sets dest's status word after everything before it to
//       dest is visible there;
//   Comm::quiet() -> every staged write is complete (their staging may be reused).
//
// WindowComm: the peer's window is mapped here (hp::shmem::ptr); writes are plain stores into
// it and open() returns the peer's memory itself, so quantised rows are written in place. On
// one node only: a rank it cannot map is UNSUPPORTED, naming ShmemComm.
// ShmemComm: a peer whose heap this process maps (hp::shmem::ptr: the threads and shm
// transports) is written in place, as OpenSHMEM's shmem_ptr allows; for any other, writes are
// staged in a local buffer and sent with put_nbi, a region followed by its rank's signal as one
// put_signal_nbi (otherwise fence + atomic set); quiet is hp::shmem::quiet. Works on every
// transport, MPI across machines too.
// Waiting is the same for both: hp::shmem::signal_wait_until on the local status word (its
// deadline is HP_SHMEM_TIMEOUT_S; a dead rank is an error there, not a hang).
#ifndef HYPER_PARALLEL_MOE_COMM_H_
#define HYPER_PARALLEL_MOE_COMM_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common/status.h"
#include "moe/stream_copy.h"
#include "shmem/shmem.h"

namespace hp::moe {

enum class CommKind : std::int32_t { kWindow = 0, kShmem = 1 };

class WindowComm {
 public:
  static constexpr CommKind kKind = CommKind::kWindow;
  static constexpr const char* kName = "window";

  std::uint8_t* open(int dest, void* remote, std::size_t /*bytes*/, Status* status) {
    auto* p = static_cast<std::uint8_t*>(hp::shmem::ptr(remote, dest));
    if (p == nullptr) {
      *status = Status::error(
          ErrorCode::kUnsupported,
          "the window comm context maps peers' windows, and rank {} is not on this node "
          "({} transport): use CommKind::kShmem",
          dest, hp::shmem::transport_name(dest));
    }
    return p;
  }
  Status close(int, void*, const std::uint8_t*, std::size_t) { return Status::ok(); }
  Status signal(std::uint64_t* flag, std::uint64_t value, int dest) {
    stream_fence();  // streamed (non-temporal) stores are not ordered by a release fence
    std::atomic_thread_fence(std::memory_order_release);
    return hp::shmem::atomic_set<std::uint64_t>(flag, value, dest);
  }
  Status quiet() { return Status::ok(); }
};

class ShmemComm {
 public:
  static constexpr CommKind kKind = CommKind::kShmem;
  static constexpr const char* kName = "shmem";

  // Staging grows to what one call between quiet()s used, so a steady stream of same-sized
  // calls allocates (and faults pages) once; until then batches overflow into extra buffers
  // kept until the next quiet().
  std::uint8_t* open(int dest, void* remote, std::size_t bytes, Status*) {
    if (auto* mapped = static_cast<std::uint8_t*>(hp::shmem::ptr(remote, dest))) return mapped;
    const std::size_t padded = (bytes + 63) & ~std::size_t(63);
    if (used_ + padded > staging_.size()) {
      staged_.push_back(std::move(staging_));
      staging_.assign(std::max<std::size_t>(padded, 1 << 20), 0);
      used_ = 0;
    }
    std::uint8_t* p = staging_.data() + used_;
    used_ += padded;
    total_ += padded;
    return p;
  }
  // The last region closed is held back so that the next signal to its rank goes with it as
  // one put_signal_nbi (the data, then the flag); a signal after other puts to that rank
  // fences first, as OpenSHMEM orders only the put-with-signal's own data before its signal.
  Status close(int dest, void* remote, const std::uint8_t* written, std::size_t bytes) {
    if (bytes == 0 || written == hp::shmem::ptr(remote, dest)) return Status::ok();  // in place
    HP_RETURN_IF_ERROR(flush());
    held_ = Held{dest, remote, written, bytes};
    return Status::ok();
  }
  Status signal(std::uint64_t* flag, std::uint64_t value, int dest) {
    stream_fence();  // in-place (streamed) writes before the flag, as WindowComm
    std::atomic_thread_fence(std::memory_order_release);
    if (held_.bytes != 0 && held_.dest == dest && puts_since_signal_ == 0) {
      const Held h = std::exchange(held_, Held{});
      return hp::shmem::put_signal_nbi(h.remote, h.written, h.bytes, flag, value,
                                       hp::shmem::SignalOp::kSet, dest);
    }
    HP_RETURN_IF_ERROR(flush());
    HP_RETURN_IF_ERROR(hp::shmem::fence());
    puts_since_signal_ = 0;
    return hp::shmem::atomic_set<std::uint64_t>(flag, value, dest);
  }
  Status quiet() {
    HP_RETURN_IF_ERROR(flush());
    puts_since_signal_ = 0;
    HP_RETURN_IF_ERROR(hp::shmem::quiet());
    if (!staged_.empty()) {
      staged_.clear();
      staging_.assign(total_, 0);
    }
    used_ = total_ = 0;
    return Status::ok();
  }

 private:
  struct Held {
    int dest = -1;
    void* remote = nullptr;
    const std::uint8_t* written = nullptr;
    std::size_t bytes = 0;
  };
  // Sends the held region as a plain put.
  Status flush() {
    if (held_.bytes == 0) return Status::ok();
    const Held h = std::exchange(held_, Held{});
    ++puts_since_signal_;
    return hp::shmem::put_nbi(h.remote, h.written, h.bytes, h.dest);
  }

  std::vector<std::uint8_t> staging_;
  std::vector<std::vector<std::uint8_t>> staged_;  // full buffers with puts in flight
  std::size_t used_ = 0, total_ = 0;
  Held held_;
  int puts_since_signal_ = 0;  // plain puts (to any rank) since the last signal
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_COMM_H_
