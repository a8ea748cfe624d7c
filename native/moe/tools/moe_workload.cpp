#include "moe/tools/moe_workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace hp::moe::tools {

ExpertWeightsData make_expert_weights(const WorkloadShape& s, std::int64_t first,
                                      std::int64_t count, std::int64_t intermediate) {
  ExpertWeightsData w;
  const std::int64_t H = s.hidden, I = intermediate;
  w.w1.resize(std::size_t(count * H * 2 * I));
  w.w2.resize(std::size_t(count * I * H));
  w.w1_scale.resize(std::size_t(count * 2 * I));
  w.w2_scale.resize(std::size_t(count * H));
  for (std::int64_t i = 0; i < count; ++i) {
    // per expert: any rank can remake it
    std::mt19937 rng(s.seed * 1000003u + std::uint32_t(first + i));
    std::uniform_int_distribution<int> q(-127, 127);
    for (std::int64_t j = 0; j < H * 2 * I; ++j)
      w.w1[std::size_t(i * H * 2 * I + j)] = std::int8_t(q(rng));
    for (std::int64_t j = 0; j < I * H; ++j) w.w2[std::size_t(i * I * H + j)] = std::int8_t(q(rng));
    // A uniform int8 in [-127, 127] has standard deviation ~73: scale dot products of n terms
    // back to unit variance.
    for (std::int64_t c = 0; c < 2 * I; ++c)
      w.w1_scale[std::size_t(i * 2 * I + c)] = 1.0f / (73.0f * std::sqrt(float(H)));
    for (std::int64_t c = 0; c < H; ++c)
      w.w2_scale[std::size_t(i * H + c)] = 1.0f / (73.0f * std::sqrt(float(I)));
  }
  return w;
}

RankInputs make_rank_inputs(const WorkloadShape& s, int rank) {
  const std::int64_t T = s.tokens, H = s.hidden, E = s.experts, K = s.topk;
  RankInputs in;
  std::mt19937 rng(s.seed * 7919u + 17u * std::uint32_t(rank) + 1u);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  in.x.resize(std::size_t(T * H));
  for (auto& v : in.x) v = normal(rng);
  // The router: W [H, E], the same on every rank.
  std::mt19937 router_rng(s.seed * 31u + 5u);
  std::vector<float> router(static_cast<std::size_t>(H * E));
  for (auto& v : router) v = normal(router_rng) / std::sqrt(float(H));
  in.topk_idx.resize(std::size_t(T * K));
  in.topk_weights.resize(std::size_t(T * K));
  std::vector<float> logits(static_cast<std::size_t>(E));
  std::vector<std::int64_t> order(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < T; ++t) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (std::int64_t h = 0; h < H; ++h) {
      const float xv = in.x[std::size_t(t * H + h)];
      for (std::int64_t e = 0; e < E; ++e)
        logits[std::size_t(e)] += xv * router[std::size_t(h * E + e)];
    }
    for (std::int64_t e = 0; e < E; ++e)
      logits[std::size_t(e)] += float(s.skew * double(E - e) / double(E));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](std::int64_t a, std::int64_t b) {
                        return logits[std::size_t(a)] > logits[std::size_t(b)];
                      });
    float sum = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const float p =
          std::exp(logits[std::size_t(order[std::size_t(k)])] - logits[std::size_t(order[0])]);
      in.topk_idx[std::size_t(t * K + k)] = order[std::size_t(k)];
      in.topk_weights[std::size_t(t * K + k)] = p;
      sum += p;
    }
    for (std::int64_t k = 0; k < K; ++k) in.topk_weights[std::size_t(t * K + k)] /= sum;
  }
  return in;
}

}  // namespace hp::moe::tools
