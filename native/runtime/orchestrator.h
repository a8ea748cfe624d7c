// Orchestrator: runs orchestration code (a C++ function) that submits tasks to one chip.
//
//   Status s = Orchestrator::run(worker, [&](Orchestrator& o) -> Status {
//     SubmitResult a;
//     HP_RETURN_IF_ERROR(o.submit(scale, TaskArgs().input(x).output(DType::kFP32, {n}), &a));
//     auto s = o.scope();  // outputs made in here are released at its end unless escaped
//     return o.submit(add, TaskArgs().input(a.outputs[0]).inout(y), {.block_num = 4});
//   });
//
// Dependencies are inferred from the tensor arguments (tensor_map.h: RAW, WAW and WAR over
// overlapping memory, tensor_region.h: the overlap test) plus TaskArgs::set_dependencies;
// independent tasks run at once on the chip's cores (scheduler.h). Submission never blocks on
// execution except for ring space.
//
// Rings: one task ring and one heap ring (for OUTPUT tensors) per scope depth 0, 1, 2, >= 3
// (the orchestration function runs in the root scope, depth 0). Every task is held by the
// scope it was submitted in until that scope ends (escape() hands an output's task to the
// enclosing scope), by each consumer that reads its OUTPUT memory until that consumer
// completes, and until it completes itself; then its slot and memory are reclaimed, in
// submission order. When its ring is full, submit() waits for a reclaim (back-pressure); when
// nothing in the ring can ever be reclaimed because the oldest task is held by a scope that
// is still open, it fails at once with OUT_OF_MEMORY ("deadlock: ...", naming the ring's
// state). Every wait ends after wait_timeout_s without any task completing (TIMEOUT).
// Dependency cycles cannot be formed: predecessors are always earlier tasks (an explicit
// dependency on a task not yet submitted is INVALID_ARGUMENT).
//
// Failure: a task whose block returns an error or throws fails the run; its dependents and
// every task not yet started are skipped (ABORTED, naming the failed predecessor); submit()
// then returns ABORTED, and run() returns the first failure, naming the task and callable.
//
// Diagnostics and observers: OrchestratorConfig::diagnostics selects the built-in diagnostics
// (diagnostics_config.h: argument dumps, scope stats, deps.json, swimlane), written under its
// output prefix when the run ends; OrchestratorConfig::observers adds the caller's own
// (observer.h). Both are fixed before the first task is dispatched.
//
// Threads: the orchestration function runs on a thread of the runtime (the calling thread
// opens the chip launch whose cores run the tasks); submit/scope/escape must be called from it.
#ifndef HYPER_PARALLEL_RUNTIME_ORCHESTRATOR_H_
#define HYPER_PARALLEL_RUNTIME_ORCHESTRATOR_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "runtime/chip_worker.h"
#include "runtime/diagnostics_config.h"
#include "runtime/observer.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime {

struct OrchestratorConfig {
  int task_ring_slots = 1024;               // per ring
  std::size_t heap_ring_bytes = 16u << 20;  // per ring; allocated on the ring's first OUTPUT
  std::optional<double> wait_timeout_s;     // empty: HP_WAIT_TIMEOUT_S
  std::vector<Observer*> observers;         // not owned; must outlive the run
  DiagnosticsConfig diagnostics;            // off by default
};

struct SubmitResult {
  TaskId task = kNoTask;
  std::vector<TensorView> outputs;  // the OUTPUT arguments' tensors, in argument order
};

class Orchestrator;
using Orchestration = std::function<Status(Orchestrator& orchestrator)>;

// A nested scope, ended by its destructor (orchestrator.h explains what scopes hold).
class HP_API [[nodiscard]] Scope {
 public:
  ~Scope() noexcept;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  int depth() const noexcept { return depth_; }

 private:
  friend class Orchestrator;
  Scope(Orchestrator& orchestrator, ScopeSite site);
  Orchestrator& orchestrator_;
  int depth_;
};

class HP_API Orchestrator {
 public:
  static constexpr int kMaxRing = 3;

  // Runs `orchestration` and waits for every task it submitted. Returns the first task failure,
  // else the orchestration's own status.
  static Status run(ChipWorker& worker, const Orchestration& orchestration,
                    const OrchestratorConfig& config = {});

  Status submit(int callable_slot, const TaskArgs& args, const CallConfig& config,
                SubmitResult* result = nullptr);
  Status submit(int callable_slot, const TaskArgs& args, SubmitResult* result = nullptr) {
    return submit(callable_slot, args, CallConfig{}, result);
  }
  // `site` (where scope() is called, or a ScopeSite of another language's caller) names the
  // scope in scope stats and swimlanes.
  Scope scope(ScopeSite site = std::source_location::current()) { return Scope(*this, site); }
  // Keeps the OUTPUT tensor starting at output.data(), made by a task of the current scope,
  // alive until the enclosing scope ends. INVALID_ARGUMENT in the root scope, NOT_FOUND when no
  // task of the current scope made it.
  Status escape(const TensorView& output);
  int scope_depth() const noexcept;

  ~Orchestrator() noexcept;
  Orchestrator(const Orchestrator&) = delete;
  Orchestrator& operator=(const Orchestrator&) = delete;

 private:
  friend class Scope;
  struct Impl;
  Orchestrator(ChipWorker& worker, const OrchestratorConfig& config, double wait_timeout_s);
  Status execute(const Orchestration& orchestration);
  Status orchestrate(const Orchestration& orchestration);
  int begin_scope(ScopeSite site);
  void end_scope() noexcept;

  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_ORCHESTRATOR_H_
