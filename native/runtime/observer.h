// Observer: hooks into an orchestration run, for diagnostics (dependency graphs, swimlanes,
// scope statistics, argument dumps: diagnostics_config.h) and for users' own instrumentation.
// Every hook has an empty default; pass observers in OrchestratorConfig::observers.
//
// Order, per run: on_run_begin; the root scope's on_scope_begin / on_scope_opened; per task
// on_task_submit, on_occupancy, on_task_ready, then on_task_start / on_task_end once per core
// that runs a share of its blocks, then on_task_complete (a task skipped because a predecessor
// failed goes from on_task_submit straight to on_task_complete); a task's on_task_complete
// comes before any of its successors' on_task_ready; scopes nest their tasks' submits; after
// the last task completed, on_run_end with the run's status.
//
// Threads: hooks run on the orchestration thread (run, submit, occupancy, scope,
// submit_blocked), on the core that runs a task (task_start, task_end) and on whichever thread
// changed a task's state (task_ready, task_complete), with no lock of the scheduler held. They
// may run concurrently, so an observer synchronises its own state; none may call back into the
// Orchestrator, and task_ready / task_complete should be quick (they delay the task's core, or
// its successors). `TaskInfo` (and the arguments it points to), `ScopeInfo` and the spans are
// valid only during the call.
//
// Memory: in on_task_ready every predecessor of the task has completed and no block of it has
// started; in on_task_complete every block has finished and no successor has started. So a
// hook reading the task's tensors there sees exactly their contents before / after the task
// (NO_DEP arguments excepted: the runtime does not order them).
#ifndef HYPER_PARALLEL_RUNTIME_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_OBSERVER_H_

#include <cstddef>
#include <source_location>
#include <span>
#include <string_view>

#include "common/status.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime {

struct TaskInfo {
  TaskId id = kNoTask;
  std::string_view callable;  // the callable's name
  int callable_slot = -1;
  int scope_depth = 0;
  int ring = 0;  // min(scope_depth, kMaxRing)
  CallConfig config;
  const TaskArgs* args = nullptr;  // the task's arguments (OUTPUT tensors with their memory)
};

// The run's shape: the chip's cores (core_idx: cube cores [0, num_cube), then vector cores,
// `ratio` per cluster: vector core num_cube + g * ratio + s belongs to cluster g) and capacities.
struct RunInfo {
  int num_cube = 0;
  int num_vector = 0;
  int ratio = 0;
  int num_rings = 0;                // rings per run: scope depths 0 .. num_rings - 1 (and deeper)
  int task_ring_slots = 0;          // per ring
  std::size_t heap_ring_bytes = 0;  // per ring, as usable (rounded down to 64 bytes)
};

// One ring's occupancy and the tensor map's size (entries, all rings) at one moment.
struct Occupancy {
  int ring = 0;
  int live_slots = 0;  // the task window: slots taken and not yet reclaimed
  std::size_t heap_used = 0;
  std::size_t tensor_map_entries = 0;
};

// Where a scope was opened: a file name and line. `file` must stay valid until the run ends
// (static storage, as std::source_location's; the Python binding interns its files).
struct ScopeSite {
  const char* file = "";
  std::uint32_t line = 0;

  constexpr ScopeSite() = default;
  constexpr ScopeSite(const char* file_name, std::uint32_t line_number)
      : file(file_name), line(line_number) {}
  // Implicit: scope() takes the caller's std::source_location.
  constexpr ScopeSite(const std::source_location& site)  // NOLINT(google-explicit-constructor)
      : file(site.file_name()), line(site.line()) {}
};

struct ScopeInfo {
  int depth = 0;
  int ring = 0;
  // Where scope() was called; the root scope (the orchestration function): file "" and line 0.
  ScopeSite site;
  Occupancy occupancy;  // of the scope's ring, when it begins / before it releases its tasks
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

  virtual void on_run_begin(const RunInfo& /*run*/) {}
  // Every task completed (or was skipped); `status` is what Orchestrator::run returns, before
  // the diagnostics write their files.
  virtual void on_run_end(const Status& /*status*/) {}
  // A scope opened (its depth, ring, site and its ring's occupancy) / ends, before it releases
  // its tasks.
  virtual void on_scope_begin(const ScopeInfo& /*scope*/) {}
  virtual void on_scope_end(const ScopeInfo& /*scope*/) {}
  // After the task's dependencies are known, before it can become ready. `occupancy` is its
  // ring's with the task's slot (and heap) taken and its accesses recorded in the tensor map.
  // Only the orchestration thread takes and reclaims slots (a consumed task's slot is reclaimed
  // when a submit of its ring needs room, or before a sample), so occupancy rises only at
  // submits and the maximum over these samples is exactly the high-water mark.
  virtual void on_task_submit(const TaskInfo& /*task*/, std::span<const Dependency> /*deps*/,
                              const Occupancy& /*occupancy*/) {}
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
