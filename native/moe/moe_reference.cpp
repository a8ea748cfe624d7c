#include "moe/moe_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hp::moe {
namespace {

struct Shapes {
  std::int64_t tokens, hidden, inter, experts, topk;
};

Status check(const MoeReferenceArgs& a, Shapes* s) {
  HP_RETURN_IF_ERROR(a.w1.expect_shape("w1", {-1, -1, -1}));
  s->experts = a.w1.dim(0);
  s->hidden = a.w1.dim(1);
  HP_ENSURE(a.w1.dim(2) % 2 == 0, ErrorCode::kShapeMismatch, "w1 {}: expected 2I columns",
            a.w1.to_string());
  s->inter = a.w1.dim(2) / 2;
  HP_RETURN_IF_ERROR(a.w1.expect_dtype("w1", DType::kInt8));
  HP_RETURN_IF_ERROR(a.w1_scale.expect_shape("w1_scale", {s->experts, 2 * s->inter}));
  HP_RETURN_IF_ERROR(a.w1_scale.expect_dtype("w1_scale", DType::kFP32));
  HP_RETURN_IF_ERROR(a.w2.expect_shape("w2", {s->experts, s->inter, s->hidden}));
  HP_RETURN_IF_ERROR(a.w2.expect_dtype("w2", DType::kInt8));
  HP_RETURN_IF_ERROR(a.w2_scale.expect_shape("w2_scale", {s->experts, s->hidden}));
  HP_RETURN_IF_ERROR(a.w2_scale.expect_dtype("w2_scale", DType::kFP32));
  HP_RETURN_IF_ERROR(a.x.expect_shape("x", {-1, s->hidden}));
  HP_RETURN_IF_ERROR(a.x.expect_dtype("x", DType::kFP32));
  s->tokens = a.x.dim(0);
  HP_RETURN_IF_ERROR(a.topk_idx.expect_shape("topk_idx", {s->tokens, -1}));
  HP_RETURN_IF_ERROR(a.topk_idx.expect_dtype("topk_idx", DType::kInt64));
  s->topk = a.topk_idx.dim(1);
  HP_RETURN_IF_ERROR(a.topk_weights.expect_shape("topk_weights", {s->tokens, s->topk}));
  HP_RETURN_IF_ERROR(a.topk_weights.expect_dtype("topk_weights", DType::kFP32));
  HP_RETURN_IF_ERROR(a.y.expect_shape("y", {s->tokens, s->hidden}));
  HP_RETURN_IF_ERROR(a.y.expect_dtype("y", DType::kFP32));
  for (const TensorView* t :
       {&a.w1, &a.w1_scale, &a.w2, &a.w2_scale, &a.x, &a.topk_idx, &a.topk_weights, &a.y}) {
    HP_ENSURE(t->is_contiguous(), ErrorCode::kInvalidArgument, "{}: expected contiguous",
              t->to_string());
  }
  if (a.x_active_mask.data() != nullptr)
    HP_RETURN_IF_ERROR(a.x_active_mask.expect_shape("x_active_mask", {s->tokens}));
  if (a.smooth1.data() != nullptr)
    HP_RETURN_IF_ERROR(a.smooth1.expect_shape("smooth1", {s->hidden}));
  if (a.smooth2.data() != nullptr)
    HP_RETURN_IF_ERROR(a.smooth2.expect_shape("smooth2", {s->experts, s->inter}));
  return Status::ok();
}

// x's row t times smooth1 (when given).
void smoothed_row(const MoeReferenceArgs& a, const float* x, std::int64_t t, std::int64_t H,
                  std::vector<float>* row) {
  row->assign(x + t * H, x + (t + 1) * H);
  if (a.smooth1.data() == nullptr) return;
  const auto* s1 = static_cast<const float*>(a.smooth1.data());
  for (std::int64_t j = 0; j < H; ++j) (*row)[std::size_t(j)] *= s1[j];
}

// Expert e's smooth2 row (shared: shared_smooth2), or null.
const float* smooth2_row(const MoeReferenceArgs& a, std::int64_t e, std::int64_t I, bool shared) {
  const TensorView& t = shared ? a.shared_smooth2 : a.smooth2;
  return t.data() == nullptr ? nullptr : static_cast<const float*>(t.data()) + (shared ? 0 : e * I);
}

// Per-row dynamic int8: scale = max|v| / 127, q = round-half-even(v x 127 / max|v|).
float quantize(const std::vector<float>& v, std::vector<std::int32_t>* q) {
  float amax = 0;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  q->assign(v.size(), 0);
  if (amax == 0) return 0.0f;
  const float mul = 127.0f / amax;
  for (std::size_t i = 0; i < v.size(); ++i)
    (*q)[i] = std::int32_t(std::clamp(std::nearbyint(v[i] * mul), -127.0f, 127.0f));
  return amax / 127.0f;
}

float silu(float g) { return g / (1.0f + std::exp(-g)); }

// One expert's weights: w1 [H, 2 inter] and its scales [2 inter], w2 [inter, H] and its scales
// [H], and its smooth2 row [inter] (null: none).
struct ExpertView {
  const std::int8_t* w1;
  const float* w1s;
  const std::int8_t* w2;
  const float* w2s;
  std::int64_t inter;
  const float* s2;
};

ExpertView routed_expert(const MoeReferenceArgs& a, std::int64_t e, std::int64_t H,
                         std::int64_t I) {
  return {static_cast<const std::int8_t*>(a.w1.data()) + e * H * 2 * I,
          static_cast<const float*>(a.w1_scale.data()) + e * 2 * I,
          static_cast<const std::int8_t*>(a.w2.data()) + e * I * H,
          static_cast<const float*>(a.w2_scale.data()) + e * H,
          I,
          smooth2_row(a, e, I, false)};
}

ExpertView shared_expert(const MoeReferenceArgs& a, std::int64_t shared_i) {
  return {static_cast<const std::int8_t*>(a.shared_w1.data()),
          static_cast<const float*>(a.shared_w1_scale.data()),
          static_cast<const std::int8_t*>(a.shared_w2.data()),
          static_cast<const float*>(a.shared_w2_scale.data()),
          shared_i,
          smooth2_row(a, 0, shared_i, true)};
}

// The shared expert's I (0: none), its weights' shapes checked.
Status shared_inter(const MoeReferenceArgs& a, std::int64_t H, std::int64_t* shared_i) {
  *shared_i = 0;
  if (a.shared_w1.data() == nullptr) return Status::ok();
  HP_RETURN_IF_ERROR(a.shared_w1.expect_shape("shared_w1", {1, H, -1}));
  HP_RETURN_IF_ERROR(a.shared_w1.expect_dtype("shared_w1", DType::kInt8));
  HP_ENSURE(a.shared_w1.dim(2) % 2 == 0, ErrorCode::kShapeMismatch,
            "shared_w1: expected 2Is columns");
  const std::int64_t si = a.shared_w1.dim(2) / 2;
  HP_RETURN_IF_ERROR(a.shared_w1_scale.expect_shape("shared_w1_scale", {1, 2 * si}));
  HP_RETURN_IF_ERROR(a.shared_w2.expect_shape("shared_w2", {1, si, H}));
  HP_RETURN_IF_ERROR(a.shared_w2.expect_dtype("shared_w2", DType::kInt8));
  HP_RETURN_IF_ERROR(a.shared_w2_scale.expect_shape("shared_w2_scale", {1, H}));
  *shared_i = si;
  return Status::ok();
}

// The row buffers one token's experts share.
struct TokenScratch {
  std::vector<float> row, h;
  std::vector<std::int32_t> qx, qh;
};

// One expert's output for the token in scratch.row (quantised into scratch.qx with scale sx),
// times w, added to y_row [H].
template <bool kQuantized>
void expert_forward(const ExpertView& e, std::int64_t H, float sx, float w, TokenScratch& ts,
                    float* y_row) {
  const std::int64_t ei = e.inter;
  ts.h.assign(static_cast<std::size_t>(ei), 0.0f);
  for (std::int64_t i = 0; i < ei; ++i) {
    float gate, up;
    if constexpr (kQuantized) {
      std::int32_t acc_g = 0, acc_u = 0;
      for (std::int64_t j = 0; j < H; ++j) {
        acc_g += ts.qx[std::size_t(j)] * e.w1[j * 2 * ei + i];
        acc_u += ts.qx[std::size_t(j)] * e.w1[j * 2 * ei + ei + i];
      }
      gate = float(acc_g) * e.w1s[i] * sx;
      up = float(acc_u) * e.w1s[ei + i] * sx;
    } else {
      double g = 0, u = 0;
      for (std::int64_t j = 0; j < H; ++j) {
        g += double(ts.row[std::size_t(j)]) * e.w1[j * 2 * ei + i] * e.w1s[i];
        u += double(ts.row[std::size_t(j)]) * e.w1[j * 2 * ei + ei + i] * e.w1s[ei + i];
      }
      gate = float(g);
      up = float(u);
    }
    ts.h[std::size_t(i)] = silu(gate) * up * (e.s2 != nullptr ? e.s2[i] : 1.0f);
  }
  const float sh = kQuantized ? quantize(ts.h, &ts.qh) : 0.0f;
  for (std::int64_t c = 0; c < H; ++c) {
    float out;
    if constexpr (kQuantized) {
      std::int32_t acc = 0;
      for (std::int64_t i = 0; i < ei; ++i) acc += ts.qh[std::size_t(i)] * e.w2[i * H + c];
      out = float(acc) * e.w2s[c] * sh;
    } else {
      double acc = 0;
      for (std::int64_t i = 0; i < ei; ++i)
        acc += double(ts.h[std::size_t(i)]) * e.w2[i * H + c] * e.w2s[c];
      out = float(acc);
    }
    y_row[c] += w * out;
  }
}

template <bool kQuantized>
Status reference(const MoeReferenceArgs& a) {
  Shapes s{};
  HP_RETURN_IF_ERROR(check(a, &s));
  const auto* x = static_cast<const float*>(a.x.data());
  const auto* idx = static_cast<const std::int64_t*>(a.topk_idx.data());
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  const auto* mask = static_cast<const std::uint8_t*>(a.x_active_mask.data());
  auto* y = static_cast<float*>(a.y.data());
  const std::int64_t H = s.hidden, I = s.inter;
  std::int64_t shared_i = 0;
  HP_RETURN_IF_ERROR(shared_inter(a, H, &shared_i));
  TokenScratch ts;
  ts.row.resize(static_cast<std::size_t>(H));
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    std::fill_n(y + t * H, H, 0.0f);
    if (mask != nullptr && mask[t] == 0) continue;
    smoothed_row(a, x, t, H, &ts.row);
    const float sx = kQuantized ? quantize(ts.row, &ts.qx) : 0.0f;
    for (std::int64_t k = 0; k < s.topk; ++k) {
      const std::int64_t e = idx[t * s.topk + k];
      if (e < 0) continue;
      HP_ENSURE(e < s.experts, ErrorCode::kOutOfRange, "topk_idx[{}][{}] = {}: expected < {}", t, k,
                e, s.experts);
      expert_forward<kQuantized>(routed_expert(a, e, H, I), H, sx, weights[t * s.topk + k], ts,
                                 y + t * H);
    }
    if (shared_i > 0)
      expert_forward<kQuantized>(shared_expert(a, shared_i), H, sx, 1.0f, ts, y + t * H);
  }
  return Status::ok();
}

// One expert's backward for the token in ts.qx (scale sx) with weight w and output gradient
// g_out [H]: adds into dw1 [H, 2 inter], dw2 [inter, H] and dx_row [H]; returns d w.
double expert_backward(const ExpertView& e, std::int64_t H, double sx, const float* g_out, double w,
                       float* dw1, float* dw2, TokenScratch& ts, std::vector<double>& dx_row) {
  const std::int64_t ei = e.inter;
  std::vector<double> gate(static_cast<std::size_t>(ei)), up(static_cast<std::size_t>(ei));
  ts.h.assign(static_cast<std::size_t>(ei), 0.0f);
  for (std::int64_t i = 0; i < ei; ++i) {
    std::int32_t acc_g = 0, acc_u = 0;
    for (std::int64_t j = 0; j < H; ++j) {
      acc_g += ts.qx[std::size_t(j)] * e.w1[j * 2 * ei + i];
      acc_u += ts.qx[std::size_t(j)] * e.w1[j * 2 * ei + ei + i];
    }
    gate[std::size_t(i)] = double(float(acc_g) * e.w1s[i] * float(sx));
    up[std::size_t(i)] = double(float(acc_u) * e.w1s[ei + i] * float(sx));
    ts.h[std::size_t(i)] = float(gate[std::size_t(i)] / (1 + std::exp(-gate[std::size_t(i)])) *
                                 up[std::size_t(i)] * (e.s2 != nullptr ? e.s2[i] : 1.0f));
  }
  const double sh = quantize(ts.h, &ts.qh);
  double dw = 0;
  for (std::int64_t i = 0; i < ei; ++i) {
    double grad = 0;  // (dY W2^T)_i
    for (std::int64_t c = 0; c < H; ++c) grad += double(g_out[c]) * e.w2[i * H + c] * e.w2s[c];
    const double ht = ts.qh[std::size_t(i)] * sh;
    dw += grad * ht;
    for (std::int64_t c = 0; c < H; ++c) dw2[i * H + c] += float(ht * w * g_out[c]);
    const double g = gate[std::size_t(i)], sig = 1 / (1 + std::exp(-g)),
                 dh = w * grad * (e.s2 != nullptr ? e.s2[i] : 1.0);
    const double dg = dh * up[std::size_t(i)] * sig * (1 + g * (1 - sig)), du = dh * g * sig;
    for (std::int64_t j = 0; j < H; ++j) {
      const double xt = ts.qx[std::size_t(j)] * sx;
      dw1[j * 2 * ei + i] += float(xt * dg);
      dw1[j * 2 * ei + ei + i] += float(xt * du);
      dx_row[std::size_t(j)] += double(e.w1[j * 2 * ei + i]) * e.w1s[i] * dg +
                                double(e.w1[j * 2 * ei + ei + i]) * e.w1s[ei + i] * du;
    }
  }
  return dw;
}

// The gradients' shapes and dtypes against the forward's (s); the shared expert's I.
Status check_grad(const MoeReferenceGradArgs& ga, const Shapes& s, std::int64_t shared_i) {
  const std::int64_t H = s.hidden, I = s.inter, T = s.tokens, K = s.topk;
  HP_RETURN_IF_ERROR(ga.dy.expect_shape("dy", {T, H}));
  HP_RETURN_IF_ERROR(ga.d_topk_weights.expect_shape("d_topk_weights", {T, K}));
  HP_RETURN_IF_ERROR(ga.dw1.expect_shape("dw1", {s.experts, H, 2 * I}));
  HP_RETURN_IF_ERROR(ga.dw2.expect_shape("dw2", {s.experts, I, H}));
  for (const TensorView* t : {&ga.dy, &ga.d_topk_weights, &ga.dw1, &ga.dw2}) {
    HP_RETURN_IF_ERROR(t->expect_dtype("gradient", DType::kFP32));
    HP_ENSURE(t->is_contiguous(), ErrorCode::kInvalidArgument, "{}: expected contiguous",
              t->to_string());
  }
  if (shared_i > 0) {
    HP_RETURN_IF_ERROR(ga.shared_dw1.expect_shape("shared_dw1", {1, H, 2 * shared_i}));
    HP_RETURN_IF_ERROR(ga.shared_dw2.expect_shape("shared_dw2", {1, shared_i, H}));
  }
  return Status::ok();
}

Status reference_grad(const MoeReferenceGradArgs& ga) {
  MoeReferenceArgs a = ga.forward;
  a.y = ga.dx;  // [T, H] fp32, checked with the rest
  Shapes s{};
  HP_RETURN_IF_ERROR(check(a, &s));
  const std::int64_t H = s.hidden, I = s.inter, T = s.tokens, K = s.topk;
  const std::int64_t shared_i = a.shared_w1.data() != nullptr ? a.shared_w1.dim(2) / 2 : 0;
  HP_RETURN_IF_ERROR(check_grad(ga, s, shared_i));
  const auto* x = static_cast<const float*>(a.x.data());
  const auto* dy = static_cast<const float*>(ga.dy.data());
  const auto* idx = static_cast<const std::int64_t*>(a.topk_idx.data());
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  const auto* mask = static_cast<const std::uint8_t*>(a.x_active_mask.data());
  const auto* s1 = static_cast<const float*>(a.smooth1.data());  // d(x s1)/dx = s1
  auto* dx = static_cast<float*>(ga.dx.data());
  auto* d_topk = static_cast<float*>(ga.d_topk_weights.data());
  auto* dw1 = static_cast<float*>(ga.dw1.data());
  auto* dw2 = static_cast<float*>(ga.dw2.data());
  TokenScratch ts;
  ts.row.resize(static_cast<std::size_t>(H));
  std::vector<double> dx_row(static_cast<std::size_t>(H));
  for (std::int64_t t = 0; t < T; ++t) {
    std::fill_n(d_topk + t * K, K, 0.0f);
    std::fill(dx_row.begin(), dx_row.end(), 0.0);
    if (mask == nullptr || mask[t] != 0) {
      smoothed_row(a, x, t, H, &ts.row);
      const double sx = quantize(ts.row, &ts.qx);
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t e = idx[t * K + k];
        if (e < 0) continue;
        HP_ENSURE(e < s.experts, ErrorCode::kOutOfRange, "topk_idx[{}][{}] = {}: expected < {}", t,
                  k, e, s.experts);
        d_topk[t * K + k] =
            float(expert_backward(routed_expert(a, e, H, I), H, sx, dy + t * H, weights[t * K + k],
                                  dw1 + e * H * 2 * I, dw2 + e * I * H, ts, dx_row));
      }
      if (shared_i > 0) {
        expert_backward(shared_expert(a, shared_i), H, sx, dy + t * H, 1.0,
                        static_cast<float*>(ga.shared_dw1.data()),
                        static_cast<float*>(ga.shared_dw2.data()), ts, dx_row);
      }
    }
    for (std::int64_t j = 0; j < H; ++j)
      dx[t * H + j] = float(dx_row[std::size_t(j)] * (s1 != nullptr ? s1[j] : 1.0f));
  }
  return Status::ok();
}

}  // namespace

Status moe_reference_quantized_grad(const MoeReferenceGradArgs& args) {
  return reference_grad(args);
}

Status moe_reference_quantized(const MoeReferenceArgs& args) { return reference<true>(args); }
Status moe_reference_float(const MoeReferenceArgs& args) { return reference<false>(args); }

}  // namespace hp::moe
