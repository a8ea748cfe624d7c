// The layer benchmark's workload, defined by formulas so that every implementation (this C++
// worker, the Python peers in peers.py) builds the same weights, tokens and routing without
// sharing files. workload.py is the same definition in numpy; the two must stay equal.
//
//   mix(z)        splitmix64's finaliser of z + 0x9E3779B97F4A7C15 (uint64, wrapping)
//   hash(tag, i)  mix(mix(tag) ^ i)
//   pool(tag, n, m)  int8 values hash(tag, j) % (2m + 1) - m for j < n + kPoolSlack
//   row(tag, r, n, m)  pool(tag, n, m)[s, s + n) with s = hash(tag + 16, r) % kPoolSlack;
//     row(tag, r, n) = row(tag, r, n, 127)
// Tensors (E experts, H hidden, I intermediate, K top-k, W the weight range, 127 or 63):
//   w1 [E, H, 2I] int8   row (e H + h) = row(1, e H + h, 2I, W); columns [0, I) gate, [I, 2I) up
//   w2 [E, I, H] int8    row (e I + i) = row(2, e I + i, H, W)
//   w1_scale = 1 / (73 (W / 127) sqrt H), w2_scale = 1 / (73 (W / 127) sqrt I) for every
//     channel (a uniform int8 in [-127, 127] has standard deviation ~73: the dot products come
//     out at unit variance). W = 63 where oneDNN's int8 matmul, the unfused peer's, saturates
//     beyond (bench/common/dnnl_int8.h).
//   x [T, H] bf16        x[t] = row(3, t, H) / 64 (exact in bf16); t is the token's global
//     index: rank r's tokens are r T_rank + [0, T_rank)
//   topk_idx [T, K]      token t's k-th expert: the k-th distinct value of
//     hash(4, 64 t + a) % E for a = 0, 1, ...
//   topk_weights [T, K]  u_k = 1 + (hash(5, K t + k) % 1024) / 1024, normalised to sum 1
//   dy [T, H] bf16       the backward's output gradient, row(6, t, H) / 64
#ifndef HYPER_PARALLEL_BENCH_MOE_LAYER_WORKLOAD_H_
#define HYPER_PARALLEL_BENCH_MOE_LAYER_WORKLOAD_H_

#include <cstdint>
#include <vector>

namespace hp::bench::moe_layer {

inline constexpr std::uint64_t kPoolSlack = 1021;

struct LayerShape {
  std::int64_t hidden = 0, intermediate = 0, experts = 0, topk = 0;
  int weight_max = 127;  // W: the int8 weights are in [-W, W]
};

inline std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline std::uint64_t hash(std::uint64_t tag, std::uint64_t i) { return mix(mix(tag) ^ i); }

// The rows [first, first + count) of tensor `tag`, n values in [-max, max] each, into
// out[count * n].
void make_rows(std::uint64_t tag, std::int64_t first, std::int64_t count, std::int64_t n,
               std::int8_t* out, int max = 127);

struct Experts {
  std::vector<std::int8_t> w1, w2;        // [E_local, H, 2I], [E_local, I, H]
  std::vector<float> w1_scale, w2_scale;  // [E_local, 2I], [E_local, H]
};

// Experts [first, first + count).
Experts make_experts(const LayerShape& s, std::int64_t first, std::int64_t count);

struct Tokens {
  std::vector<std::uint16_t> x;        // bf16 [T, H]
  std::vector<std::int64_t> topk_idx;  // [T, K]
  std::vector<float> topk_weights;     // [T, K]
};

// Tokens [first, first + count) (global indices).
Tokens make_tokens(const LayerShape& s, std::int64_t first, std::int64_t count);

// dy bf16 [count, H] of tokens [first, first + count).
std::vector<std::uint16_t> make_dy(const LayerShape& s, std::int64_t first, std::int64_t count);

}  // namespace hp::bench::moe_layer

#endif  // HYPER_PARALLEL_BENCH_MOE_LAYER_WORKLOAD_H_
