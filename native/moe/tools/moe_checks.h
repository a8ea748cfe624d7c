// What `hp moe` checks its layer against: the forward's first tokens of every rank against the
// quantised and the float references, the backward's against the fp64 gradient reference, and
// the tolerances each must meet.
#ifndef HYPER_PARALLEL_MOE_TOOLS_MOE_CHECKS_H_
#define HYPER_PARALLEL_MOE_TOOLS_MOE_CHECKS_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "moe/moe_layer.h"
#include "moe/tools/moe_workload.h"

namespace hp::moe::tools {

// Quantising the activations twice costs about a percent against the float reference; the
// same quantised math differs only by rounding order (and the odd requantisation flip). The
// gradients: bf16 GEMM inputs against fp64, about a percent.
inline constexpr double kQuantizedTolerance = 5e-3, kFloatTolerance = 6e-2, kGradTolerance = 3e-2;
inline constexpr int kGrads = 4;
inline constexpr const char* kGradNames[kGrads] = {"dx", "d_topk_weights", "dw1", "dw2"};
// Each rank's errors, in this order: quantised, float, then the kGrads gradients.
inline constexpr std::size_t kErrorsPerRank = 2 + kGrads;

// The seeded dY of `rank`'s tokens [T, H].
std::vector<float> make_dy(const WorkloadShape& s, int rank);

// This rank's first check_tokens tokens of y against both references: {quantised, float}
// relative errors.
Status check_against_references(const WorkloadShape& s, std::int64_t check_tokens,
                                const RankInputs& in, const std::vector<float>& y,
                                std::vector<double>* errors);

// The backward with dY only on the first check_tokens tokens of every rank, against the fp64
// gradient reference over those tokens of every rank: {dx, d topk_weights, dW1, dW2} errors
// (the shared expert's weights' gradients are checked with dW1/dW2's). Collective.
Status check_gradients(const WorkloadShape& s, std::int64_t check_tokens, MoeLayer& layer,
                       std::vector<double>* errors);

// The worst error of every kind over the ranks (all_errors: kErrorsPerRank per rank).
struct CheckVerdict {
  double quantized = 0, floating = 0;
  double grads[kGrads] = {0, 0, 0, 0};
  bool passed = true;  // every worst error under its tolerance (true when nothing was checked)
};
CheckVerdict judge(const std::vector<double>& all_errors, int ranks, bool checked);

}  // namespace hp::moe::tools

#endif  // HYPER_PARALLEL_MOE_TOOLS_MOE_CHECKS_H_
