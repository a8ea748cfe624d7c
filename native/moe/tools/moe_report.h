// What `hp moe` records of each timed iteration and how rank 0 reports it: per phase the
// slowest rank's time, median over iterations, and its rate, as a table or one JSON object,
// and with --trace a Chrome trace of every rank's and core's spans.
#ifndef HYPER_PARALLEL_MOE_TOOLS_MOE_REPORT_H_
#define HYPER_PARALLEL_MOE_TOOLS_MOE_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "moe/tools/moe_checks.h"
#include "moe/tools/moe_workload.h"

namespace hp::moe::tools {

inline constexpr int kPhases = 4;  // dispatch, GMM1, GMM2, combine
inline constexpr const char* kPhaseNames[kPhases] = {"dispatch", "GMM1+SwiGLU", "GMM2", "combine"};
inline constexpr int kGradPhases = 5;  // MoeGradStageTimes
inline constexpr const char* kGradPhaseNames[kGradPhases] = {
    "bwd dispatch", "bwd recompute", "bwd act grad", "bwd weight grad", "bwd combine"};
// Per timed iteration and rank: start (s since the first barrier), the forward's phases, its
// expert rows, the backward's phases (0 without --backward), the forward's and the backward's
// overlap.
inline constexpr std::size_t kRecord = 4 + kPhases + kGradPhases;
// --trace: per timed iteration and rank, kMaxSpans spans of kSpanFields doubles (core, phase,
// begin, end; s since the first barrier), the rest padded with core -2.
inline constexpr std::size_t kSpanFields = 4, kMaxSpans = 512;

// What the report says of the run besides its records.
struct RunFacts {
  WorkloadShape shape;
  int ranks = 0, iterations = 0, warmup = 0;
  std::int64_t check_tokens = 0;
  bool check = false, backward = false;
  bool keep_activations = false;       // the backward takes GMM1's output from the forward
  bool int8_activation_grads = false;  // its activation-gradient GEMMs are int8
  std::string grad_dtype;              // of dX and the weight gradients
  bool json = false;
  bool deep = false;  // the layer took the deep-fuse path
  std::string transport, layer_path, planned_path, trace;
  int cube_cores = 0, vector_cores = 0;  // each rank's chip (0 and 0: none)
};

// all_records: kRecord doubles per iteration, rank by rank; all_spans likewise (--trace).
Status report(const RunFacts& run, const CheckVerdict& check,
              const std::vector<double>& all_records, const std::vector<double>& all_spans);

}  // namespace hp::moe::tools

#endif  // HYPER_PARALLEL_MOE_TOOLS_MOE_REPORT_H_
