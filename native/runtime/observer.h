// Observer: hooks into an orchestration run, for diagnostics (dependency graphs, swimlanes,
// scope statistics) and for users' own instrumentation. Every hook has an empty default.
//
// Threads: hooks run on the orchestration thread (submit, scope, submit_blocked), on the core
// that runs a task (task_start, task_end) and on whichever thread changed a task's state
// (task_ready, task_complete: with the scheduler's lock held). They may run concurrently, so an
// observer synchronises its own state; none may call back into the Orchestrator, and
// task_ready / task_complete should be quick. `TaskInfo` and the spans are valid only during
// the call.
#ifndef HYPER_PARALLEL_RUNTIME_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_OBSERVER_H_

#include <cstddef>
#include <span>
#include <string_view>

#include "../common/status.h"
#include "task_types.h"

namespace hp::runtime {

struct TaskInfo {
  TaskId id = kNoTask;
  std::string_view callable;  // the callable's name
  int callable_slot = -1;
  int scope_depth = 0;
  int ring = 0;  // min(scope_depth, kMaxRing)
  CallConfig config;
};

// A ring's occupancy, in submit_blocked and in error messages.
struct RingState {
  int ring = 0;
  int live_slots = 0;
  int slot_capacity = 0;
  std::size_t heap_used = 0;
  std::size_t heap_capacity = 0;
  TaskId oldest_task = kNoTask;  // the slot that retires next
  TaskState oldest_state = TaskState::kFree;
};

class Observer {
 public:
  virtual ~Observer() = default;

  virtual void on_scope_begin(int /*depth*/) {}
  virtual void on_scope_end(int /*depth*/) {}
  // After the task's dependencies are known, before it can become ready.
  virtual void on_task_submit(const TaskInfo& /*task*/, std::span<const Dependency> /*deps*/) {}
  virtual void on_task_ready(const TaskInfo& /*task*/) {}
  // One core begins / ends its share of the task's blocks.
  virtual void on_task_start(const TaskInfo& /*task*/, int /*core_idx*/) {}
  virtual void on_task_end(const TaskInfo& /*task*/, int /*core_idx*/) {}
  // The task finished on every core (or failed, or was skipped because a predecessor failed).
  virtual void on_task_complete(const TaskInfo& /*task*/, const Status& /*status*/) {}
  // submit() must wait for the ring to retire a task (back-pressure).
  virtual void on_submit_blocked(const RingState& /*ring*/) {}
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_OBSERVER_H_
