// The MoE layer tests' expert weights: int8 (or int4 values, limit 7) with per-channel scales of
// a realistic size (the outputs keep the inputs' magnitude), made from a fixed seed so that
// every rank makes every expert's; and the relative L2 error the tests compare with.
#ifndef HYPER_PARALLEL_TESTS_MOE_LAYER_WEIGHTS_H_
#define HYPER_PARALLEL_TESTS_MOE_LAYER_WEIGHTS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace hp::moe::testing {

struct Weights {
  std::vector<std::int8_t> w1, w2;  // [E, H, 2I], [E, I, H]
  std::vector<float> s1, s2;        // [E, 2I], [E, H]
};

inline Weights make_weights(std::int64_t hidden, std::int64_t inter, std::int64_t experts,
                            std::uint32_t seed = 77, int limit = 127) {
  Weights w;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-limit - (limit == 7 ? 1 : 0), limit);
  w.w1.resize(std::size_t(experts * hidden * 2 * inter));
  w.w2.resize(std::size_t(experts * inter * hidden));
  for (auto& v : w.w1) v = std::int8_t(q(rng));
  for (auto& v : w.w2) v = std::int8_t(q(rng));
  w.s1.resize(std::size_t(experts * 2 * inter));
  w.s2.resize(std::size_t(experts * hidden));
  for (auto& v : w.s1)
    v = (0.5f + float(rng() % 100) / 100.0f) / (float(limit) * std::sqrt(float(hidden)));
  for (auto& v : w.s2)
    v = (0.5f + float(rng() % 100) / 100.0f) / (float(limit) * std::sqrt(float(inter)));
  return w;
}

// |got - want| / |want| in the L2 norm (|got - want| when want is 0).
template <typename A, typename B>
double relative_error(const A& got, const B& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (double(got[i]) - double(want[i])) * (double(got[i]) - double(want[i]));
    norm += double(want[i]) * double(want[i]);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

}  // namespace hp::moe::testing

#endif  // HYPER_PARALLEL_TESTS_MOE_LAYER_WEIGHTS_H_
