#include "moe_layer/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/bfloat16.h"

namespace hp::bench::moe_layer {

void make_rows(std::uint64_t tag, std::int64_t first, std::int64_t count, std::int64_t n,
               std::int8_t* out, int max) {
  std::vector<std::int8_t> pool(std::size_t(n) + kPoolSlack);
  for (std::size_t j = 0; j < pool.size(); ++j)
    pool[j] = std::int8_t(int(hash(tag, j) % std::uint64_t(2 * max + 1)) - max);
  for (std::int64_t r = 0; r < count; ++r) {
    const std::uint64_t start = hash(tag + 16, std::uint64_t(first + r)) % kPoolSlack;
    std::memcpy(out + r * n, pool.data() + start, std::size_t(n));
  }
}

Experts make_experts(const LayerShape& s, std::int64_t first, std::int64_t count) {
  const std::int64_t H = s.hidden, I = s.intermediate;
  Experts w;
  w.w1.resize(std::size_t(count * H * 2 * I));
  w.w2.resize(std::size_t(count * I * H));
  make_rows(1, first * H, count * H, 2 * I, w.w1.data(), s.weight_max);
  make_rows(2, first * I, count * I, H, w.w2.data(), s.weight_max);
  const float sigma = 73.0f * (float(s.weight_max) / 127.0f);  // exactly 73 for W = 127
  w.w1_scale.assign(std::size_t(count * 2 * I), 1.0f / (sigma * std::sqrt(float(H))));
  w.w2_scale.assign(std::size_t(count * H), 1.0f / (sigma * std::sqrt(float(I))));
  return w;
}

namespace {

// row(tag, t, H) / 64 in bf16 for tokens [first, first + count).
std::vector<std::uint16_t> token_rows(std::uint64_t tag, std::int64_t hidden, std::int64_t first,
                                      std::int64_t count) {
  std::vector<std::int8_t> q(std::size_t(count * hidden));
  make_rows(tag, first, count, hidden, q.data());
  std::vector<std::uint16_t> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = float_to_bf16(float(q[i]) / 64.0f);
  return out;
}

}  // namespace

std::vector<std::uint16_t> make_dy(const LayerShape& s, std::int64_t first, std::int64_t count) {
  return token_rows(6, s.hidden, first, count);
}

Tokens make_tokens(const LayerShape& s, std::int64_t first, std::int64_t count) {
  const std::int64_t K = s.topk, E = s.experts;
  Tokens t;
  t.x = token_rows(3, s.hidden, first, count);
  t.topk_idx.resize(std::size_t(count * K));
  t.topk_weights.resize(t.topk_idx.size());
  for (std::int64_t i = 0; i < count; ++i) {
    const auto g = std::uint64_t(first + i);
    std::int64_t* idx = &t.topk_idx[std::size_t(i * K)];
    for (std::int64_t k = 0, a = 0; k < K; ++a) {
      const auto e = std::int64_t(hash(4, 64 * g + std::uint64_t(a)) % std::uint64_t(E));
      if (std::find(idx, idx + k, e) == idx + k) idx[k++] = e;
    }
    float* w = &t.topk_weights[std::size_t(i * K)];
    float sum = 0;
    for (std::int64_t k = 0; k < K; ++k)
      sum += w[k] = 1.0f + float(hash(5, std::uint64_t(K) * g + std::uint64_t(k)) % 1024) / 1024.0f;
    for (std::int64_t k = 0; k < K; ++k) w[k] /= sum;
  }
  return t;
}

}  // namespace hp::bench::moe_layer
