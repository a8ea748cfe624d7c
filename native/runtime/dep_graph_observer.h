// DepGraphObserver: the dependency graph of a run (DiagnosticsConfig::dep_gen), internal to the
// runtime: every task, every distinct tensor argument, and every edge the orchestrator found.
//
// deps.json (ids are decimal strings, addresses hex strings: diagnostic_output.h):
//   { "schema_version": 1, "runtime_level": 2 | 3 (a chip's tasks, a node's: DiagnosticsConfig),
//     "tasks":   [ { "id", "callable", "scope": "<scope id>", "scope_depth": <d>,
//                    "block_num": <n>, "mode": "cube" | "vector" | "mix", "num_flags": <n>,
//                    "args": [ { "tensor": "<tensor id>", "tag": "INPUT" | ... } ],
//                    "scalars": [ { "bits": "0x<64-bit pattern>",
//                                   "dtype": "int32" | ... | "bits64" } ] } ],
//     "tensors": [ { "id", "buffer": "0x<data pointer>", "dtype", "shape": [...],
//                    "strides": [...] (elements), "span_bytes": <first to last byte + 1> } ],
//     "edges":   [ { "pred": "<task id>", "succ": "<task id>", "retired": <bool>,
//                    "arg": <succ's tensor argument index; -1 for explicit edges>,
//                    "source": "explicit" | "creator" | "tensormap",
//                    "kind": "RAW" | "WAW" | "WAR" | "ORDER" (explicit edges),
//                    "overlap": { "pred_arg": <pred's tensor argument index>,
//                                 "lo": "0x...", "hi": "0x...", "exact": <bool> } | null } ],
//     "scopes":  [ { "id", "parent": "<id>" | null, "depth",
//                    "site": "<file>:<line>" | "<root>" } ] }
// Edges are the whole run's: the runtime forgets a task once it retired (its entries leave the
// tensor map, and later tasks need no edge to it), so the observer infers again over every
// task's accesses with a tensor map of its own that forgets nothing, the same rules, and each
// OUTPUT's heap-ring memory named apart from earlier OUTPUTs at the same address. An edge the
// runtime did not need (its predecessor had retired before the successor was submitted) has
// "retired": true; every other edge has "retired": false. So the edges are exactly what a
// replay (replay.h) must keep, whatever the recorded run's timing.
// A tensor is one distinct view (data pointer, dtype, shape, strides); tasks passing the same
// view share its id. An edge's overlap names the predecessor argument whose region overlaps the
// successor's argument (a writer for RAW / WAW, a reader for WAR, the OUTPUT for creator edges)
// and the intersection [lo, hi) of the two arguments' byte ranges; `exact` is false when the
// overlap test was conservative (tensor_region.h). Explicit edges have no overlap. Edges are in
// submission order of their successor.
#ifndef HYPER_PARALLEL_RUNTIME_DEP_GRAPH_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_DEP_GRAPH_OBSERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/json_file.h"
#include "runtime/diagnostics.h"
#include "runtime/tensor_map.h"
#include "runtime/tensor_region.h"

namespace hp::runtime {

class DepGraphObserver final : public DiagnosticObserver {
 public:
  static constexpr int kSchemaVersion = 1;

  // Checks deps.json under `prefix` can be written (IO_ERROR when it cannot).
  static Status create(const std::string& prefix, std::unique_ptr<DepGraphObserver>* out);

  void on_scope_begin(const ScopeInfo& scope) override;
  void on_scope_end(const ScopeInfo& scope) override;
  void on_task_submit(const TaskInfo& task, std::span<const Dependency> deps,
                      const Occupancy& occupancy) override;
  Status finish() override;

 private:
  struct Access {
    TensorRegion region;
    ArgTag tag;
  };
  using TensorKey =
      std::tuple<std::uintptr_t, int, std::vector<std::int64_t>, std::vector<std::int64_t>>;

  explicit DepGraphObserver(std::string prefix) : prefix_(std::move(prefix)) {}
  std::uint64_t tensor_id(const TensorView& view);
  Json overlap(TaskId pred, const TensorRegion& succ_region, const Dependency& dep) const;

  const std::string prefix_;
  std::mutex mu_;
  Json tasks_ = Json::array();
  Json tensors_ = Json::array();
  Json edges_ = Json::array();
  Json scopes_ = Json::array();
  std::vector<std::uint64_t> open_scopes_;
  std::uint64_t next_scope_ = 0;
  std::map<TensorKey, std::uint64_t> tensor_ids_;
  std::unordered_map<TaskId, std::vector<Access>> accesses_;  // every task's tensor arguments

  // The whole run's inference (see above): a tensor map that keeps every task's entries, over
  // accesses whose OUTPUT memory is renamed per OUTPUT (heap-ring memory is reused).
  TensorView renamed(const TensorView& view, ArgTag tag);
  TensorMap history_;
  std::map<std::uintptr_t, std::pair<std::uintptr_t, std::uintptr_t>> outputs_;  // lo -> hi, name
  std::uintptr_t next_name_ = std::uintptr_t(1) << 62;
  std::vector<TensorAccess> history_accesses_;
  std::vector<FoundDependency> history_found_;
  std::vector<std::uint32_t> history_handles_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DEP_GRAPH_OBSERVER_H_
