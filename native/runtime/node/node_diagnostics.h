// The diagnostics of a node-level run, joined across levels (internal to the node runtime).
//
// During the run each level records its own files: the node level (its tasks: next-level
// tasks' dispatches and sub tasks) under the output prefix, each chip (the tasks it ran, a run
// of its own) under <prefix>/chip<i>, with "runtime_level" 3 and 2 in their headers; a chip also
// writes chip<i>/spawned.json, which of its tasks each next-level task became:
//   { "runtime_level": 2, "chip": <i>, "spawned": [ { "task": "<its id>", "l3_task": "<id>" } ] }
// After the run, merge_node_diagnostics() joins them:
//   deps.json      the node level's graph, plus
//                  "chips": [ { "chip": i, "pid": <its process>, "deps": "chip<i>/deps.json" } ],
//                  "spawned": [ { "l3_task": "<id>", "chip": i, "task": "<its id>" } ]
//                  (each next-level task's edge to the chip task it spawned);
//   swimlane.json  one Chrome trace: the node's rows (pids 1-4, named "node: dispatcher",
//                  "node: sub-workers", "node: orchestrator", "node: scheduler") and each chip's
//                  (pid 100 (i + 1) + its own pid, named "chip i: cube cores", ...), all on one
//                  time base (the earliest file's begin_ns: each file's own is where it sits on
//                  it), flow ids kept apart per file, and a
//                  "spawn" flow arrow ("cat": "spawn") from each next-level task's dispatch span
//                  to the first span of the chip task it became.
// Scope stats and argument dumps stay per level (a level's rings and arguments are its own).
#ifndef HYPER_PARALLEL_RUNTIME_NODE_NODE_DIAGNOSTICS_H_
#define HYPER_PARALLEL_RUNTIME_NODE_NODE_DIAGNOSTICS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/diagnostics_config.h"

namespace hp::runtime {

inline constexpr std::string_view kSpawnedFile = "spawned.json";

// The chip's diagnostics directory under `prefix`.
std::string chip_output_prefix(const std::string& prefix, int chip);

// Joins the files as described above; `pids`: each chip's process.
Status merge_node_diagnostics(const DiagnosticsConfig& config, const std::vector<int>& pids);

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_NODE_NODE_DIAGNOSTICS_H_
