// ScopeStatsObserver: per-scope ring occupancy (DiagnosticsConfig::scope_stats), internal to the
// runtime. It tells how full the task window, the heap ring and the tensor map got inside each
// scope: the numbers to size OrchestratorConfig.task_ring_slots / heap_ring_bytes by.
//
// scope_stats.jsonl (one JSON object per line, streamed as the run goes):
//   line 1  { "type": "metadata", "schema_version": 1, "runtime_level": 2 | 3,
//             "rings": <rings per run>,
//             "capacities": { "task_window": <slots per ring>, "heap_bytes": <bytes per ring>,
//                             "tensormap_entries": null (the tensor map is unbounded) } }
//   then, per scope, at its begin and at its end (so nested scopes' lines sit between):
//           { "type": "scope_begin" | "scope_end", "scope": "<id>", "parent": "<id>" | null,
//             "site": "<file>:<line>" of the scope() call ("<root>" for the orchestration
//             function's scope), "depth": <d>, "ring": <min(d, 3)>,
//             "tasks": <tasks submitted in the scope itself: 0 at begin>,
//             "hwm": { "task_window": <live slots>, "heap_bytes": <bytes used>,
//                      "tensormap_entries": <entries> } }
// Scope ids count scopes in the order they opened, from "0" (the root). In a begin line "hwm"
// is the occupancy when the scope began; in an end line it is the high-water mark over the
// scope's life (its own submits and its nested scopes'), of the scope's ring for the task
// window and heap, and of the whole tensor map for its entries. Sampled after each submit
// (observer.h, on_task_submit) and whenever a submit waits for ring space (the full ring's
// state), so a ring that filled up reports its capacity even when slots were reclaimed before
// the waiting submit took one.
#ifndef HYPER_PARALLEL_RUNTIME_SCOPE_STATS_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_SCOPE_STATS_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/diagnostic_output.h"
#include "runtime/diagnostics.h"

namespace hp::runtime {

class ScopeStatsObserver final : public DiagnosticObserver {
 public:
  static constexpr int kSchemaVersion = 1;

  // Creates scope_stats.jsonl under `prefix` (IO_ERROR when it cannot).
  static Status create(const std::string& prefix, std::unique_ptr<ScopeStatsObserver>* out);

  void on_run_begin(const RunInfo& run) override;
  void on_scope_begin(const ScopeInfo& scope) override;
  void on_scope_end(const ScopeInfo& scope) override;
  void on_task_submit(const TaskInfo& task, std::span<const Dependency> deps,
                      const Occupancy& occupancy) override;
  void on_submit_blocked(const RingState& ring) override;
  Status finish() override;

 private:
  struct Frame {
    std::uint64_t id = 0;
    std::int64_t parent = -1;  // -1: none
    std::string site;
    int depth = 0;
    int ring = 0;
    std::uint64_t tasks = 0;
    int task_window = 0;
    std::size_t heap_bytes = 0;
    std::size_t tensormap_entries = 0;
  };
  ScopeStatsObserver() = default;
  void absorb(Frame& frame, const Occupancy& occupancy) const;
  void write_line(const char* type, const Frame& frame);

  std::mutex mu_;
  OutputFile file_;
  std::vector<Frame> open_;  // innermost last
  std::uint64_t next_id_ = 0;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_SCOPE_STATS_OBSERVER_H_
