// DeferralRegistry: the tasks of one orchestration run whose completion is deferred
// (deferred_completion.h), internal to the runtime.
//
// Each deferral is an entry {slot, task, what it waits for, deadline} under a key. Completing a
// deferral first claims its entry (under the mutex: exactly one claimer wins, whether a
// DeferredCompletion, the watcher's word poll, its deadline or a failed block), then calls the
// scheduler's `finish` for the slot outside the lock. `active_` counts claimers inside `finish`;
// close(), at the end of the run, refuses later claims and waits until none is inside, so no
// thread touches the scheduler after it is destroyed, however long a DeferredCompletion lives.
//
// The watcher thread starts with the first deferral. It sleeps on a condition variable until
// the nearest deadline, a cancellation or close(), and is woken for a new entry only when that
// entry needs it sooner (a word to poll, or a deadline before its wake-up; deferrals made later
// have later deadlines, so a stream of them costs no wake-up each); while entries wait on words
// it polls them, slowing down from 1 us to 100 us between looks (no notifier wakes it: the
// words are written by peers' RMA).
#ifndef HYPER_PARALLEL_RUNTIME_DEFERRAL_REGISTRY_H_
#define HYPER_PARALLEL_RUNTIME_DEFERRAL_REGISTRY_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "platform/wait.h"
#include "runtime/deferred_completion.h"
#include "runtime/task_types.h"

namespace hp::runtime {

struct TaskSlot;

class DeferralRegistry : public std::enable_shared_from_this<DeferralRegistry> {
 public:
  // `finish(slot, status)` completes a claimed deferral (Scheduler::finish_deferred).
  using Finish = std::function<void(TaskSlot* slot, Status status)>;

  DeferralRegistry(double timeout_s, Finish finish);
  ~DeferralRegistry() noexcept;
  DeferralRegistry(const DeferralRegistry&) = delete;
  DeferralRegistry& operator=(const DeferralRegistry&) = delete;

  // A deferral of `slot` (task `id`, callable `name`) to a DeferredCompletion (word null) or
  // until *word >= target. Returns the entry's key.
  std::uint64_t add(TaskSlot* slot, TaskId id, std::string name, const std::uint64_t* word,
                    std::uint64_t target, std::string waits_for = {});
  DeferredCompletion handle(std::uint64_t key, TaskId id);

  // Claims the entry `key` and runs finish(slot, status). False when it was claimed before or
  // the registry is closed.
  bool complete(std::uint64_t key, Status status) noexcept;
  // The task's blocks failed: claims its entry if still there (true: the caller completes the
  // task now, nobody else will).
  bool withdraw(std::uint64_t key) noexcept;
  // Deferrals waiting (their deadlines will end them, if nothing else does).
  bool pending() noexcept;
  // The run failed: entries waiting on words complete with ABORTED (on the watcher thread).
  void cancel_words() noexcept;
  // The run is over: later claims fail; waits for claimers inside finish; stops the watcher.
  void close() noexcept;

 private:
  struct Entry {
    TaskSlot* slot = nullptr;
    TaskId id = kNoTask;
    std::string name;
    const std::uint64_t* word = nullptr;  // null: completed by a DeferredCompletion
    std::string waits_for;                // what completes it, when not a word
    std::uint64_t target = 0;
    platform::Clock::time_point deadline;
  };
  void watch() noexcept;
  // Claims `key` (mutex_ held by `lock`), then finishes it with the lock released.
  void finish_claimed(std::unique_lock<std::mutex>& lock, std::uint64_t key, Status status);
  static std::string waits_for(const Entry& e);

  const double timeout_s_;
  const Finish finish_;
  std::mutex mutex_;
  std::condition_variable changed_;  // entries, cancel_, closed_ or active_ changed
  std::map<std::uint64_t, Entry> entries_;
  std::uint64_t next_key_ = 1;
  int words_ = 0;  // entries waiting on a word
  int active_ = 0;
  // When the watcher wakes by itself (min(): it is awake; max(): never, until notified).
  platform::Clock::time_point wakes_at_ = platform::Clock::time_point::min();
  bool cancel_ = false;
  bool closed_ = false;
  std::thread watcher_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DEFERRAL_REGISTRY_H_
