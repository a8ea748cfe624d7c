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
// ShmemComm: writes are staged in a local buffer and sent with put_nbi; signal is fence +
// atomic set; quiet is hp::shmem::quiet. Works on every transport, MPI across machines too.
// Waiting is the same for both: hp::shmem::signal_wait_until on the local status word (its
// deadline is HP_SHMEM_TIMEOUT_S; a dead rank is an error there, not a hang).
#ifndef HYPER_PARALLEL_MOE_COMM_H_
#define HYPER_PARALLEL_MOE_COMM_H_

#include <atomic>
#include <cstdint>
#include <cstring>
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
      *status = Status::error(ErrorCode::kUnsupported,
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
  std::uint8_t* open(int /*dest*/, void* /*remote*/, std::size_t bytes, Status*) {
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
  Status close(int dest, void* remote, const std::uint8_t* written, std::size_t bytes) {
    return bytes == 0 ? Status::ok() : hp::shmem::put_nbi(remote, written, bytes, dest);
  }
  Status signal(std::uint64_t* flag, std::uint64_t value, int dest) {
    HP_RETURN_IF_ERROR(hp::shmem::fence());
    return hp::shmem::atomic_set<std::uint64_t>(flag, value, dest);
  }
  Status quiet() {
    HP_RETURN_IF_ERROR(hp::shmem::quiet());
    if (!staged_.empty()) {
      staged_.clear();
      staging_.assign(total_, 0);
    }
    used_ = total_ = 0;
    return Status::ok();
  }

 private:
  std::vector<std::uint8_t> staging_;
  std::vector<std::vector<std::uint8_t>> staged_;  // full buffers with puts in flight
  std::size_t used_ = 0, total_ = 0;
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_COMM_H_
