// The workload of `hp moe`: seeded weights of every expert (any rank can remake any expert's),
// each rank's tokens, and a random softmax router with optional skew.
#ifndef HYPER_PARALLEL_MOE_TOOLS_MOE_WORKLOAD_H_
#define HYPER_PARALLEL_MOE_TOOLS_MOE_WORKLOAD_H_

#include <cstdint>
#include <vector>

namespace hp::moe::tools {

struct WorkloadShape {
  std::int64_t tokens = 256, hidden = 2048, intermediate = 768, experts = 32, topk = 8;
  std::int64_t shared_intermediate = 0;  // > 0: a shared expert of this I (weights: expert id E)
  double skew = 0.0;  // > 0: the router prefers low expert ids (logit + skew x (E - e) / E)
  std::uint32_t seed = 1;
};

// Experts [first, first + count): int8 weights with per-channel scales of a realistic size
// (outputs of unit variance for unit-variance inputs).
struct ExpertWeightsData {
  std::vector<std::int8_t> w1, w2;        // [count, H, 2I], [count, I, H]
  std::vector<float> w1_scale, w2_scale;  // [count, 2I], [count, H]
};
// intermediate: the experts' I (s.intermediate, or the shared expert's).
ExpertWeightsData make_expert_weights(const WorkloadShape& s, std::int64_t first,
                                      std::int64_t count, std::int64_t intermediate);

struct RankInputs {
  std::vector<float> x;                // [T, H]
  std::vector<std::int64_t> topk_idx;  // [T, K]
  std::vector<float> topk_weights;     // [T, K]: softmax over the chosen experts
};
RankInputs make_rank_inputs(const WorkloadShape& s, int rank);

}  // namespace hp::moe::tools

#endif  // HYPER_PARALLEL_MOE_TOOLS_MOE_WORKLOAD_H_
