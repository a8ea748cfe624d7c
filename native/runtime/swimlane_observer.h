// SwimlaneObserver: a timeline of the run (DiagnosticsConfig::swimlane), internal to the
// runtime, in the Chrome trace event format (JSON object form), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// swimlane.json: { "traceEvents": [...], "displayTimeUnit": "ns",
//                  "otherData": { "schema": "hyper_parallel.swimlane", "schema_version": 1,
//                                 "runtime_level": 2 | 3, "begin_ns": <the run's begin> } }
// Times ("ts", "dur") are microseconds (fractional) since the run began; begin_ns is that moment
// on the monotonic clock (CLOCK_MONOTONIC, one for every process of the machine: what merges
// the files of a node's processes). Rows:
//   pid 1 "cube cores", pid 2 "vector cores": one thread per core, tid = core index
//     (observer.h, RunInfo), named "cube core 0", "vector core 2 (cluster 0)"; on it one
//     "ph": "X" span, "cat": "task", per task per core that ran a share of the task's blocks:
//     a task of block_num 1 has one span; an SPMD task one span per core of its gang (kCube /
//     kVector: min(block_num, cores of that kind), each running blocks i, i + n, ...; kMix:
//     block_num clusters of 1 cube + ratio vector cores). "name" is the callable; "args":
//     { "task": "<id>", "callable", "block_num", "mode", "status" }.
//   pid 3 "orchestrator", tid 0 "orchestration thread": "cat": "orchestrator" spans, one per
//     scope ("scope <depth> @ <site>") and one per stretch a submit waited for ring space
//     ("submit waits: ring <r> full"); and an instant ("ph": "i") per submit ("submit task <id>").
//   pid 4 "scheduler": "cat": "scheduler" spans per task, "pending task <id>" (submitted ->
//     ready: waiting for predecessors) on threads "pending <k>", and "queued task <id>" (ready
//     -> first core started) on threads "ready queue <k>" (tid 1000 + k); overlapping spans go
//     to separate threads, so every thread's spans nest.
//   Flow arrows, "cat": "dependency", "name": "dep": for each dependency edge (pred, succ) of
//     tasks that both ran, a "ph": "s" event inside pred's first span and a "ph": "f"
//     ("bp": "e") event inside succ's first span (both at the span's midpoint), same "id".
//   Metadata ("ph": "M"): process_name / process_sort_index per pid, thread_name per thread.
#ifndef HYPER_PARALLEL_RUNTIME_SWIMLANE_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_SWIMLANE_OBSERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json_file.h"
#include "runtime/diagnostics.h"

namespace hp::runtime {

class SwimlaneObserver final : public DiagnosticObserver {
 public:
  static constexpr int kSchemaVersion = 1;
  static constexpr int kCubePid = 1, kVectorPid = 2, kOrchestratorPid = 3, kSchedulerPid = 4;
  static constexpr int kQueuedTidBase = 1000;

  // Checks swimlane.json under `prefix` can be written (IO_ERROR when it cannot).
  static Status create(const std::string& prefix, std::unique_ptr<SwimlaneObserver>* out);

  void on_run_begin(const RunInfo& run) override;
  void on_run_end(const Status& status) override;
  void on_scope_begin(const ScopeInfo& scope) override;
  void on_scope_end(const ScopeInfo& scope) override;
  void on_task_submit(const TaskInfo& task, std::span<const Dependency> deps,
                      const Occupancy& occupancy) override;
  void on_task_ready(const TaskInfo& task) override;
  void on_task_start(const TaskInfo& task, int core_idx) override;
  void on_task_end(const TaskInfo& task, int core_idx) override;
  void on_task_complete(const TaskInfo& task, const Status& status) override;
  void on_submit_blocked(const RingState& ring) override;
  Status finish() override;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::int64_t kNever = -1;
  struct Task {
    std::string callable;
    int block_num = 1;
    platform::LaunchMode mode = platform::LaunchMode::kVector;
    std::int64_t submit = kNever, ready = kNever, first_start = kNever;
    std::string status;
    std::vector<TaskId> preds;  // distinct
  };
  struct Span {
    std::string name;
    std::int64_t start = 0, end = 0;  // ns since the run began
    TaskId task = kNoTask;
    int core = -1;
  };

  explicit SwimlaneObserver(std::string prefix) : prefix_(std::move(prefix)) {}
  std::int64_t now() const;
  void end_blocked(std::int64_t t);  // under mu_
  Json build_trace() const;          // under mu_

  const std::string prefix_;
  Clock::time_point t0_ = Clock::now();
  std::mutex mu_;
  RunInfo run_;
  std::unordered_map<TaskId, Task> tasks_;
  std::vector<TaskId> task_order_;          // submission order
  std::vector<std::int64_t> core_started_;  // per core: the running span's start
  std::vector<Span> core_spans_;
  std::vector<Span> orchestrator_spans_;
  std::vector<Span> open_scopes_;
  std::vector<Span> submits_;  // instants: start == end
  Span blocked_;               // the wait of the current submit, while blocked_open_
  bool blocked_open_ = false;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_SWIMLANE_OBSERVER_H_
