// Waiting on a 32-bit atomic word: spin briefly, yield, then sleep on a futex, always with a
// deadline. Oversubscription-safe (4 or 8 waiting threads on 2 CPUs do not starve the thread
// that will wake them) and usable across processes for words in shared memory.
//
// Wake-up protocol (no lost wake-ups): a waiter registers in `waiters` and re-reads the word
// before it sleeps, and FUTEX_WAIT itself re-checks the word. A setter changes the word, then
// wakes only when `waiters` is non-zero. Both sides use seq_cst, so either the setter sees the
// waiter registered, or the waiter sees the new value.
#ifndef HYPER_PARALLEL_PLATFORM_WAIT_H_
#define HYPER_PARALLEL_PLATFORM_WAIT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "common/api.h"
#include "common/status.h"

namespace hp::platform {

using Clock = std::chrono::steady_clock;

// A word that can be waited on, with its count of sleeping waiters. 8 bytes; callers that
// care about false sharing align it themselves.
struct WaitWord {
  std::atomic<std::uint32_t> value{0};
  std::atomic<std::uint32_t> waiters{0};
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

struct WaitPolicy {
  std::int64_t spin = 2000;  // pause iterations before yielding
  // How long to keep yielding the CPU (sched_yield) before sleeping on the futex: a waiter
  // that yields costs its waker nothing, one that sleeps costs it a wake-up system call.
  std::chrono::microseconds yield_for{50};
  bool process_shared = false;  // the word lives in memory shared between processes
  // Some notifier of the waited event uses notify_event_light(): wait_event() then issues
  // heavy_fence() between registering and its last look (see below). Only for threads of one
  // process, and only where light_notify_available().
  bool light_notifiers = false;
  // wait_event() only: while it spins or yields, it looks at ready() at most once per interval
  // (0: at every step). Each look pulls the lines the notifier writes into this CPU's cache, and
  // the notifier's next store to them waits for them to come back; x86 commits stores in order,
  // so every later store of the notifier waits too. A waiter that looks every step makes its
  // notifier pay that transfer on every notify; one that looks every interval makes it pay at
  // most once per interval, and sees the event up to an interval late. The last look before it
  // sleeps is always taken (and a true there returns). While spinning, the clock is read every
  // 16 pauses.
  std::chrono::nanoseconds poll_interval{0};
};

enum class WaitResult { kReady, kTimedOut, kCancelled };

// Waits until ready(value) holds, `cancelled()` (checked between sleeps; may be empty) holds,
// or the deadline passes. Sleeps are bounded slices, so a cancellation is seen promptly even
// when nobody wakes the word. Returns the last value read through `last`.
HP_API WaitResult wait_word(WaitWord& word, const std::function<bool(std::uint32_t)>& ready,
                            Clock::time_point deadline, const WaitPolicy& policy,
                            const std::function<bool()>& cancelled, std::uint32_t* last);

// Wakes every thread sleeping on the word (call after changing the word).
HP_API void wake_all(WaitWord& word, bool process_shared) noexcept;

// Adds `delta` to the word (release + seq_cst) and wakes sleepers. Returns the new value.
HP_API std::uint32_t add_and_wake(WaitWord& word, std::uint32_t delta,
                                  bool process_shared) noexcept;

// Eventcounts: waiting for a condition on other memory. `event` is a WaitWord that whoever
// makes ready() true bumps with notify_event() after the change. The waiter registers, reads
// the event count, re-checks ready() and sleeps only if the count is unchanged; the notifier
// changes the memory, issues a seq_cst fence and bumps + wakes only when someone is registered.
// Either the notifier sees the registration, or the waiter's re-check sees the change.
HP_API WaitResult wait_event(WaitWord& event, const std::function<bool()>& ready,
                             Clock::time_point deadline, const WaitPolicy& policy,
                             const std::function<bool()>& cancelled);
HP_API void notify_event(WaitWord& event, bool process_shared) noexcept;

// Asymmetric eventcounts, for a notifier on a hot path whose waiters rarely sleep: the notifier
// skips the seq_cst fence (it only keeps the compiler from reordering its change after its read
// of `waiters`), and each waiter, after registering and before its last look, makes every
// running thread of the process execute a full fence (heavy_fence: membarrier, an interrupt per
// CPU running one of them). Either the notifier's read of `waiters` comes after that fence and
// sees the registration, or its change came before it and the waiter's last look sees it.
// Events notified this way must be waited on with WaitPolicy::light_notifiers, by threads of
// this process. Where light_notify_available() is false (its waiters then cannot fence), and
// under ThreadSanitizer (which does not model membarrier), it is notify_event().
HP_API void notify_event_light(WaitWord& event) noexcept;
// Whether heavy_fence() works here (registers the process for it on the first call; Linux 4.14
// and later, unless a seccomp filter refuses membarrier).
HP_API bool light_notify_available() noexcept;
// Requires light_notify_available() (otherwise only this thread is fenced).
HP_API void heavy_fence() noexcept;

// Polling, for changes nobody can wake us for (RMA from another host): ready() is called
// repeatedly, spinning, then yielding, then sleeping between calls with a delay that doubles
// from 1 us to 100 us (the poller may be the one whose MPI calls make others' RMA progress).
HP_API WaitResult poll_until(const std::function<bool()>& ready, Clock::time_point deadline,
                             const WaitPolicy& policy, const std::function<bool()>& cancelled);
// What one look of a poll found: the condition holds; it does not, but the look did work for
// others (applied a message another PE sent: more may follow, and that PE may wait for this
// one's answer); or nothing.
enum class PollState { kReady, kWorked, kIdle };
// poll_until whose look says whether it worked: a look that worked starts the yielding phase
// over and resets the sleep to 1 us, so a poller that serves a stream of requests answers
// each at yielding latency instead of after a sleep of up to 100 us.
HP_API WaitResult poll_until(const std::function<PollState()>& look, Clock::time_point deadline,
                             const WaitPolicy& policy, const std::function<bool()>& cancelled);

HP_API Clock::time_point deadline_after(double seconds) noexcept;

// A full (seq_cst) fence. Under ThreadSanitizer, which does not model fences, a seq_cst
// read-modify-write of a private word instead: the same ordering for the code, and
// synchronization TSan can see.
HP_API void full_fence() noexcept;

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_WAIT_H_
