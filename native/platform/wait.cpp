#include "platform/wait.h"

#include "common/sanitizers.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <immintrin.h>
#include <algorithm>
#include <ctime>

namespace hp::platform {
namespace {

// Longest single futex sleep when a cancellation can happen: bounds how late it is noticed
// (a cancellation does not wake sleepers reliably: it may race with the sleep).
constexpr auto kMaxSleepSlice = std::chrono::milliseconds(20);

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                std::chrono::nanoseconds timeout, bool process_shared) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  const int op = process_shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again".
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, expected, &ts, nullptr, 0);
}

}  // namespace

Clock::time_point deadline_after(double seconds) noexcept {
  const auto span = std::chrono::duration<double>(seconds);
  // Clamp absurd values instead of overflowing the clock.
  if (span > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(span);
}

WaitResult wait_word(WaitWord& word, const std::function<bool(std::uint32_t)>& ready,
                     Clock::time_point deadline, const WaitPolicy& policy,
                     const std::function<bool()>& cancelled, std::uint32_t* last) {
  std::uint32_t v = word.value.load(std::memory_order_acquire);
  for (std::int64_t i = 0; i < policy.spin; ++i) {
    if (ready(v)) return *last = v, WaitResult::kReady;
    if ((i & 1023) == 1023) {  // a long spin still honours the deadline and cancellation
      if (cancelled && cancelled()) return *last = v, WaitResult::kCancelled;
      if (Clock::now() >= deadline) return *last = v, WaitResult::kTimedOut;
    }
    _mm_pause();
    v = word.value.load(std::memory_order_acquire);
  }
  // Yield for a while, then sleep; after every wake-up that did not satisfy the wait, yield
  // again before sleeping: more changes are likely to follow, and a yielding waiter costs its
  // wakers nothing (a sleeping one costs each of them a system call).
  for (;;) {
    for (const auto stop_yielding = Clock::now() + policy.yield_for;;) {
      if (ready(v)) return *last = v, WaitResult::kReady;
      if (cancelled && cancelled()) return *last = v, WaitResult::kCancelled;
      const auto now = Clock::now();
      if (now >= deadline) return *last = v, WaitResult::kTimedOut;
      if (now >= stop_yielding) break;
      sched_yield();
      v = word.value.load(std::memory_order_acquire);
    }
    const auto now = Clock::now();
    // Without a cancellation to notice, sleep until the deadline (in day-long steps).
    const auto slice = std::min<Clock::duration>(
        deadline - now, cancelled ? Clock::duration(kMaxSleepSlice) : std::chrono::hours(24));
    word.waiters.fetch_add(1, std::memory_order_seq_cst);
    v = word.value.load(std::memory_order_seq_cst);
    if (!ready(v)) futex_wait(&word.value, v, slice, policy.process_shared);
    word.waiters.fetch_sub(1, std::memory_order_seq_cst);
    v = word.value.load(std::memory_order_acquire);
  }
}

namespace {
// Whether a waiter with this poll interval may look now (WaitPolicy::poll_interval).
class PollTimer {
 public:
  explicit PollTimer(std::chrono::nanoseconds interval) : interval_(interval) {}
  bool due() {
    if (interval_.count() == 0) return true;
    const Clock::time_point now = Clock::now();
    if (now < next_) return false;
    next_ = now + interval_;
    return true;
  }

 private:
  std::chrono::nanoseconds interval_;
  Clock::time_point next_{};
};
}  // namespace

WaitResult wait_event(WaitWord& event, const std::function<bool()>& ready,
                      Clock::time_point deadline, const WaitPolicy& policy,
                      const std::function<bool()>& cancelled) {
  PollTimer poll(policy.poll_interval);
  const bool every_step = policy.poll_interval.count() == 0;
  for (std::int64_t i = 0; i < policy.spin; ++i) {
    // With an interval, the clock is read every 16 pauses, not at each.
    if ((every_step || ((i & 15) == 0 && poll.due())) && ready()) return WaitResult::kReady;
    if ((i & 1023) == 1023) {
      if (cancelled && cancelled()) return WaitResult::kCancelled;
      if (Clock::now() >= deadline) return WaitResult::kTimedOut;
    }
    _mm_pause();
  }
  // As wait_word: yield, sleep, and yield again after every wake-up.
  for (;;) {
    for (const auto stop_yielding = Clock::now() + policy.yield_for;;) {
      if (poll.due() && ready()) return WaitResult::kReady;
      if (cancelled && cancelled()) return WaitResult::kCancelled;
      const auto now = Clock::now();
      if (now >= deadline) return WaitResult::kTimedOut;
      if (now >= stop_yielding) break;
      sched_yield();
    }
    const auto now = Clock::now();
    const auto slice = std::min<Clock::duration>(
        deadline - now, cancelled ? Clock::duration(kMaxSleepSlice) : std::chrono::hours(24));
    event.waiters.fetch_add(1, std::memory_order_seq_cst);
    if (policy.light_notifiers) heavy_fence();
    const std::uint32_t count = event.value.load(std::memory_order_seq_cst);
    const bool is_ready = ready();  // the last look: taken whatever the poll interval
    if (!is_ready) futex_wait(&event.value, count, slice, policy.process_shared);
    event.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (is_ready) return WaitResult::kReady;
  }
}

WaitResult poll_until(const std::function<bool()>& ready, Clock::time_point deadline,
                      const WaitPolicy& policy, const std::function<bool()>& cancelled) {
  return poll_until([&] { return ready() ? PollState::kReady : PollState::kIdle; }, deadline,
                    policy, cancelled);
}

WaitResult poll_until(const std::function<PollState()>& look, Clock::time_point deadline,
                      const WaitPolicy& policy, const std::function<bool()>& cancelled) {
  for (std::int64_t i = 0; i < policy.spin; ++i) {
    if (look() == PollState::kReady) return WaitResult::kReady;
    if ((i & 1023) == 1023 && Clock::now() >= deadline) return WaitResult::kTimedOut;
    _mm_pause();
  }
  auto stop_yielding = Clock::now() + policy.yield_for;
  auto delay = std::chrono::microseconds(1);
  for (;;) {
    const PollState state = look();
    if (state == PollState::kReady) return WaitResult::kReady;
    if (cancelled && cancelled()) return WaitResult::kCancelled;
    const auto now = Clock::now();
    if (now >= deadline) return WaitResult::kTimedOut;
    if (state == PollState::kWorked) {
      stop_yielding = now + policy.yield_for;
      delay = std::chrono::microseconds(1);
    }
    if (now < stop_yielding) {
      sched_yield();
    } else {
      timespec ts{0, long(std::chrono::nanoseconds(delay).count())};
      nanosleep(&ts, nullptr);
      delay = std::min(delay * 2, std::chrono::microseconds(100));
    }
  }
}

void full_fence() noexcept {
#if HP_THREAD_SANITIZER
  static std::atomic<std::uint32_t> word{0};
  word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void notify_event(WaitWord& event, bool process_shared) noexcept {
#if HP_THREAD_SANITIZER
  // An RMW on the waiters word itself: ordered against the waiters' registration in its
  // modification order, which TSan models (it does not model fences).
  if (event.waiters.fetch_add(0, std::memory_order_seq_cst) == 0) return;
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (event.waiters.load(std::memory_order_relaxed) == 0) return;
#endif
  event.value.fetch_add(1, std::memory_order_seq_cst);
  const int op = process_shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&event.value), op, INT32_MAX, nullptr,
          nullptr, 0);
}

void notify_event_light(WaitWord& event) noexcept {
#if HP_THREAD_SANITIZER
  notify_event(event, false);
#else
  if (!light_notify_available()) return notify_event(event, false);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (event.waiters.load(std::memory_order_relaxed) == 0) return;
  add_and_wake(event, 1, false);
#endif
}

bool light_notify_available() noexcept {
  static const bool available =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return available;
}

void heavy_fence() noexcept {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  // Not registered: a child of fork() whose kernel did not carry the registration over.
  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

void wake_all(WaitWord& word, bool process_shared) noexcept {
  if (word.waiters.load(std::memory_order_seq_cst) == 0) return;
  const int op = process_shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word.value), op, INT32_MAX, nullptr, nullptr,
          0);
}

std::uint32_t add_and_wake(WaitWord& word, std::uint32_t delta, bool process_shared) noexcept {
  const std::uint32_t now = word.value.fetch_add(delta, std::memory_order_seq_cst) + delta;
  wake_all(word, process_shared);
  return now;
}

}  // namespace hp::platform
