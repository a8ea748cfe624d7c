// SpinLock: a lock for critical sections of a few instructions (internal to the runtime), such
// as a task slot's consumer list, where an uncontended std::mutex's cost would dominate.
// Test-and-test-and-set; after a short spin it yields the CPU, so a holder that was preempted
// on an oversubscribed machine gets to run. Meets BasicLockable (std::lock_guard works).
#ifndef HYPER_PARALLEL_RUNTIME_SPIN_LOCK_H_
#define HYPER_PARALLEL_RUNTIME_SPIN_LOCK_H_

#include <sched.h>

#include <immintrin.h>
#include <atomic>

namespace hp::runtime {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          _mm_pause();
        } else {
          sched_yield();
        }
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_SPIN_LOCK_H_
