// DiagnosticsConfig: the diagnostics (DFX) an orchestration run records, chosen in
// OrchestratorConfig::diagnostics before any task is dispatched, and the files they write into
// the directory `output_prefix` (created when missing; files of an earlier run are replaced):
//
//   dump_args 1 | 2   tensor_dump.json + tensor_dump.bin   the arguments' values before and after
//                                                           each task (tensor_dump_observer.h)
//   scope_stats       scope_stats.jsonl                     per-scope ring high-water marks
//                                                           (scope_stats_observer.h)
//   dep_gen           deps.json                             tasks, tensors and dependency edges
//                                                           (dep_graph_observer.h)
//   swimlane          swimlane.json                         a Chrome trace of cores, scheduler
//                                                           and orchestrator (swimlane_observer.h)
//
// docs/runtime.md describes every format. Errors, before anything runs: a diagnostic on with
// an empty output_prefix, or dump_args outside 0..2, is INVALID_ARGUMENT; a prefix that cannot
// be created or written is IO_ERROR. A failure writing the files after the run is IO_ERROR too
// (the run's own failure, if any, wins).
#ifndef HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_CONFIG_H_
#define HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_CONFIG_H_

#include <string>
#include <string_view>

namespace hp::runtime {

struct DiagnosticsConfig {
  std::string output_prefix;  // the directory the files go to
  // 0: off; 1: only the arguments marked with TaskArgs::dump(); 2: every argument of every task
  // (tensors and scalars).
  int dump_args = 0;
  bool scope_stats = false;
  bool dep_gen = false;
  bool swimlane = false;
  // The level whose tasks the files describe, written in each file's header ("runtime_level"):
  // 2, a chip's tasks; 3, a node's (NodeWorker sets it, and 2 for its chips' files).
  int runtime_level = 2;

  bool any() const noexcept { return dump_args != 0 || scope_stats || dep_gen || swimlane; }
};

inline constexpr std::string_view kTensorDumpJsonFile = "tensor_dump.json";
inline constexpr std::string_view kTensorDumpBinFile = "tensor_dump.bin";
inline constexpr std::string_view kScopeStatsFile = "scope_stats.jsonl";
inline constexpr std::string_view kDepsFile = "deps.json";
inline constexpr std::string_view kSwimlaneFile = "swimlane.json";

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_CONFIG_H_
