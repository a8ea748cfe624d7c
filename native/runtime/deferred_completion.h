// Deferred completion: a task whose work goes on after its blocks return (it handed work to
// another process, or waits for a peer's notify) completes later, without holding a core.
//
// A block of a running orchestrated task defers its task's completion once:
//   - defer_completion(&done): the task completes when some thread calls done.complete(status);
//   - defer_until(word, target): the task completes when the 64-bit word (e.g. a signal word
//     on the symmetric heap that a peer adds to) holds a value >= target; the run's watcher
//     thread polls it.
// Either way the task completes only once every block of it has returned AND the deferred
// event came, with the first failure of the two (a block that fails completes the task at
// once, with its failure: the event is no longer waited for). Until then the task's successors
// wait, and its core is free for other tasks.
//
// Deadlines: the event must come within the run's wait timeout (OrchestratorConfig::
// wait_timeout_s, HP_WAIT_TIMEOUT_S) from the moment of deferral, else the task completes with
// TIMEOUT naming it and what it waited for. When the run fails, tasks waiting on a word
// complete at once with ABORTED (the peer that would notify may be the one that failed);
// tasks waiting for complete() keep waiting for it or their deadline.
//
// A DeferredCompletion may outlive its run: complete() after the task completed (by its
// deadline, or an earlier complete()) or after the run ended returns false and does nothing.
#ifndef HYPER_PARALLEL_RUNTIME_DEFERRED_COMPLETION_H_
#define HYPER_PARALLEL_RUNTIME_DEFERRED_COMPLETION_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/api.h"
#include "common/status.h"
#include "runtime/task_types.h"

namespace hp::runtime {

class DeferralRegistry;

class HP_API DeferredCompletion {
 public:
  DeferredCompletion() noexcept = default;  // empty: complete() returns false

  // Completes the task with `status` (from any thread). True when this call completed it (or
  // will, once its blocks have returned); false when it is empty, already completed, or the run
  // is over.
  bool complete(Status status = Status::ok()) noexcept;
  bool empty() const noexcept { return registry_ == nullptr; }
  TaskId task() const noexcept { return task_; }

 private:
  friend class DeferralRegistry;
  DeferredCompletion(std::shared_ptr<DeferralRegistry> registry, std::uint64_t key,
                     TaskId task) noexcept
      : registry_(std::move(registry)), key_(key), task_(task) {}

  std::shared_ptr<DeferralRegistry> registry_;
  std::uint64_t key_ = 0;
  TaskId task_ = kNoTask;
};

// From a block of a running orchestrated task: defers the task's completion to `*done`.
// FAILED_PRECONDITION outside such a block (a ChipWorker::run task has no orchestration to
// complete it later) or when the task already deferred its completion.
// `waits_for` names what completes it, for the TIMEOUT message ("chip 1 (pid 4242)").
HP_API Status defer_completion(DeferredCompletion* done, std::string_view waits_for = {});

// From a block of a running orchestrated task: the task completes once *word >= target (read
// with acquire ordering). `word` must stay valid until then (memory of the run, or the
// symmetric heap). Errors as defer_completion().
HP_API Status defer_until(const std::uint64_t* word, std::uint64_t target);

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DEFERRED_COMPLETION_H_
