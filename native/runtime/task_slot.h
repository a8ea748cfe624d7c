// TaskSlot: one entry of a task ring (internal to the runtime).
//
// Ownership: while a slot is FREE only the orchestration thread touches it; it fills the
// "set at submit" fields, then publishes the task under the scheduler lock, after which those
// fields are read-only until the slot is reclaimed. The "scheduler" fields change only under
// the scheduler lock.
#ifndef HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
#define HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/status.h"
#include "../platform/chip.h"
#include "callable.h"
#include "observer.h"
#include "task_args.h"
#include "task_types.h"

namespace hp::runtime {

// What a task's blocks run: shared by the slot and the launch's kernel closure.
struct TaskBody {
  std::shared_ptr<const Callable> callable;
  TaskArgs args;
};

struct TaskSlot {
  // Set at submit.
  TaskId id = kNoTask;
  TaskInfo info;  // info.callable views body->callable->name()
  std::shared_ptr<TaskBody> body;
  std::unique_ptr<platform::BlockLaunch> launch;
  std::uint64_t heap_mark = 0;  // release the heap ring to here when the slot is reclaimed

  // Scheduler (under the lock).
  TaskState state = TaskState::kFree;
  // Predecessors not completed yet, plus 1 while submit() is still adding edges.
  int fanin = 0;
  // Reasons the task cannot be consumed: 1 until it completes, 1 while a scope holds it, 1 per
  // consumer that keeps its memory alive until that consumer completes.
  int refs = 0;
  bool scope_held = false;
  std::vector<TaskSlot*> consumers;   // successors ordered after this task
  std::vector<TaskSlot*> kept_alive;  // predecessors whose memory this task holds
  int cores_outstanding = 0;
  Status status;  // why it failed or was skipped
  bool skip = false;  // complete without running (a predecessor failed)

  void reset() {
    id = kNoTask;
    info = {};
    body.reset();
    launch.reset();
    heap_mark = 0;
    fanin = refs = cores_outstanding = 0;
    scope_held = skip = false;
    consumers.clear();
    kept_alive.clear();
    status = Status::ok();
  }
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
