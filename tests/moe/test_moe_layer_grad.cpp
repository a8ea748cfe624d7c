// MoeLayer::backward on every rank of a threads, shm or mpi job, against the plain fp64
// gradient of the quantised reference (moe_reference_quantized_grad), which is itself checked
// against finite differences of the float reference. Every rank makes every rank's tokens
// (routing_inputs.h) and every expert's weights from seeds, so each computes the reference of
// the weights' gradients (a sum over all ranks' tokens) alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "common/bfloat16.h"
#include "moe/layer_weights.h"
#include "moe/moe_layer.h"
#include "moe/moe_reference.h"
#include "moe/routing_inputs.h"
#include "shmem/scenario.h"

namespace hp::moe {
namespace {

using hp::moe::testing::all_mapped;
using hp::moe::testing::Case;
using hp::moe::testing::Inputs;
using hp::moe::testing::make_inputs;
using hp::moe::testing::make_weights;
using hp::moe::testing::relative_error;
using hp::moe::testing::Routing;
using hp::moe::testing::Weights;
using hp::shmem::testing::run_scenario;

std::vector<float> make_dy(std::int64_t tokens, std::int64_t hidden, int rank) {
  std::mt19937 rng(4242u + std::uint32_t(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dy(std::size_t(tokens * hidden));
  for (auto& v : dy) v = normal(rng);
  return dy;
}

TensorView view(const std::vector<float>& v, std::initializer_list<std::int64_t> shape) {
  return TensorView(const_cast<float*>(v.data()), DType::kFP32, shape);
}
template <typename T>
TensorView view(const std::vector<T>& v, DType type, std::initializer_list<std::int64_t> shape) {
  return TensorView(const_cast<T*>(v.data()), type, shape);
}

// Rank `me`'s `local` experts of every expert's weights `w`.
ExpertWeights rank_experts(const Weights& w, int me, std::int64_t local, std::int64_t H,
                           std::int64_t I) {
  return {.w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()) + me * local * H * 2 * I,
                           DType::kInt8, {local, H, 2 * I}),
          .w1_scale = TensorView(const_cast<float*>(w.s1.data()) + me * local * 2 * I, DType::kFP32,
                                 {local, 2 * I}),
          .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()) + me * local * I * H, DType::kInt8,
                           {local, I, H}),
          .w2_scale = TensorView(const_cast<float*>(w.s2.data()) + me * local * H, DType::kFP32,
                                 {local, H})};
}

struct GradShape {
  Case c;
  std::int64_t inter = 48, experts_per_rank = 2, shared_inter = 0;
  bool bf16 = false;  // dy, dx, dw1 and dw2 in bf16
  int vector_cores = 0;
  bool smooth = false;  // smooth-quant scales
  int cube_cores = 1;
  bool int8_act = false;  // MoeLayerConfig::int8_activation_grads
};

// The reference's arguments for rank r's tokens (weights of every expert; gradients into `out`).
struct Reference {
  std::vector<float> dx, d_topk, dw1, dw2, shared_dw1, shared_dw2;
};

Status check_backward(const GradShape& g, CommKind comm) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  if (comm == CommKind::kWindow && !all_mapped()) return Status::ok();
  Case c = g.c;
  c.experts = g.experts_per_rank * ranks;
  const std::int64_t H = c.hidden, I = g.inter, K = c.topk, E = c.experts,
                     local = g.experts_per_rank;
  const std::int64_t si = g.shared_inter, Is = std::max<std::int64_t>(si, 1);
  const Weights w = make_weights(H, I, E), sw = make_weights(H, Is, 1, 78);
  auto shared_view = [&](const auto& v, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? view(v, type, shape) : TensorView();
  };
  // Smooth-quant scales in [0.5, 2): smooth1 [H], smooth2 [E, I], the shared expert's [1, Is].
  std::vector<float> s1(static_cast<std::size_t>(H)), s2(static_cast<std::size_t>(E * I)),
      ss2(static_cast<std::size_t>(Is));
  std::mt19937 smooth_rng(31);
  for (auto* v : {&s1, &s2, &ss2}) {
    for (auto& x : *v) x = 0.5f + 1.5f * float(smooth_rng() % 1000) / 1000.0f;
  }
  auto smooth_view = [&](const std::vector<float>& v, std::int64_t offset,
                         std::initializer_list<std::int64_t> shape) {
    return g.smooth ? TensorView(const_cast<float*>(v.data()) + offset, DType::kFP32, shape)
                    : TensorView();
  };
  std::unique_ptr<hp::platform::Chip> chip;
  if (g.vector_cores > 0) {
    HP_EXPECT_OK(hp::platform::Chip::create(
        {.num_cube = g.cube_cores, .num_vector = g.vector_cores}, &chip));
  }
  const ExpertWeights mine = rank_experts(w, me, local, H, I);
  std::unique_ptr<MoeLayer> layer;
  HP_RETURN_IF_ERROR(
      MoeLayer::create({.hidden = H,
                        .intermediate = I,
                        .num_experts = E,
                        .topk = K,
                        .max_tokens_per_rank = c.tokens + ranks,
                        .shared_intermediate = si,
                        .comm = comm,
                        .chip = chip.get(),
                        .backward = true,
                        .int8_activation_grads = g.int8_act},
                       {.w1 = mine.w1,
                        .w1_scale = mine.w1_scale,
                        .w2 = mine.w2,
                        .w2_scale = mine.w2_scale,
                        .shared_w1 = shared_view(sw.w1, DType::kInt8, {1, H, 2 * si}),
                        .shared_w1_scale = shared_view(sw.s1, DType::kFP32, {1, 2 * si}),
                        .shared_w2 = shared_view(sw.w2, DType::kInt8, {1, si, H}),
                        .shared_w2_scale = shared_view(sw.s2, DType::kFP32, {1, H}),
                        .smooth1 = smooth_view(s1, 0, {H}),
                        .smooth2 = smooth_view(s2, me * local * I, {local, I}),
                        .shared_smooth2 = si > 0 ? smooth_view(ss2, 0, {1, si}) : TensorView()},
                       &layer));
  // The reference: this rank's dx and d topk_weights; the weights' gradients over every rank's
  // tokens (the shared expert's over this rank's only: its weights are replicated per rank).
  Reference ref;
  ref.dw1.assign(std::size_t(E * H * 2 * I), 0.0f);
  ref.dw2.assign(std::size_t(E * I * H), 0.0f);
  ref.shared_dw1.assign(std::size_t(H * 2 * Is), 0.0f);
  ref.shared_dw2.assign(std::size_t(Is * H), 0.0f);
  std::vector<float> scratch_dw1(std::size_t(H * 2 * Is)), scratch_dw2(std::size_t(Is * H));
  for (int r = 0; r < ranks; ++r) {
    const Inputs in = make_inputs(c, r, ranks);
    const std::int64_t T = in.tokens;
    const std::vector<float> dy = make_dy(T, H, r);
    std::vector<float> dx(std::size_t(T * H)), d_topk(std::size_t(T * K));
    std::fill(scratch_dw1.begin(), scratch_dw1.end(), 0.0f);
    std::fill(scratch_dw2.begin(), scratch_dw2.end(), 0.0f);
    HP_RETURN_IF_ERROR(moe_reference_quantized_grad(
        {.forward = {.w1 = view(w.w1, DType::kInt8, {E, H, 2 * I}),
                     .w1_scale = view(w.s1, {E, 2 * I}),
                     .w2 = view(w.w2, DType::kInt8, {E, I, H}),
                     .w2_scale = view(w.s2, {E, H}),
                     .shared_w1 = shared_view(sw.w1, DType::kInt8, {1, H, 2 * si}),
                     .shared_w1_scale = shared_view(sw.s1, DType::kFP32, {1, 2 * si}),
                     .shared_w2 = shared_view(sw.w2, DType::kInt8, {1, si, H}),
                     .shared_w2_scale = shared_view(sw.s2, DType::kFP32, {1, H}),
                     .x = view(in.x, {T, H}),
                     .topk_idx = view(in.idx, DType::kInt64, {T, K}),
                     .topk_weights = view(in.weights, {T, K}),
                     .x_active_mask = c.masked ? view(in.active, DType::kUInt8, {T}) : TensorView(),
                     .smooth1 = smooth_view(s1, 0, {H}),
                     .smooth2 = smooth_view(s2, 0, {E, I}),
                     .shared_smooth2 = si > 0 ? smooth_view(ss2, 0, {1, si}) : TensorView()},
         .dy = view(dy, {T, H}),
         .dx = view(dx, {T, H}),
         .d_topk_weights = view(d_topk, {T, K}),
         .dw1 = view(ref.dw1, {E, H, 2 * I}),
         .dw2 = view(ref.dw2, {E, I, H}),
         .shared_dw1 = shared_view(scratch_dw1, DType::kFP32, {1, H, 2 * si}),
         .shared_dw2 = shared_view(scratch_dw2, DType::kFP32, {1, si, H})}));
    if (r == me) {
      ref.dx = dx;
      ref.d_topk = d_topk;
      ref.shared_dw1 = scratch_dw1;
      ref.shared_dw2 = scratch_dw2;
    }
  }
  // The layer, twice (its storage is reused), with outputs poisoned first.
  const Inputs in = make_inputs(c, me, ranks);
  const std::int64_t T = in.tokens;
  const std::vector<float> dy = make_dy(T, H, me);
  const DType grad_type = g.bf16 ? DType::kBF16 : DType::kFP32;
  std::vector<std::uint16_t> dy16(dy.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy16[i] = float_to_bf16(dy[i]);
  const std::size_t elem = dtype_size(grad_type);
  std::vector<std::uint8_t> dx(std::size_t(T * H) * elem),
      dw1(std::size_t(local * H * 2 * I) * elem), dw2(std::size_t(local * I * H) * elem),
      sdw1(std::size_t(H * 2 * Is) * elem), sdw2(std::size_t(Is * H) * elem);
  std::vector<float> d_topk(std::size_t(T * K));
  for (int call = 0; call < 2; ++call) {
    for (auto* v : {&dx, &dw1, &dw2, &sdw1, &sdw2}) std::fill(v->begin(), v->end(), 0xA5);
    std::fill(d_topk.begin(), d_topk.end(), -7.0f);
    const auto start = std::chrono::steady_clock::now();
    HP_RETURN_IF_ERROR(layer->backward(
        {.x = view(in.x, {T, H}),
         .topk_idx = view(in.idx, DType::kInt64, {T, K}),
         .topk_weights = view(in.weights, {T, K}),
         .x_active_mask = c.masked ? view(in.active, DType::kUInt8, {T}) : TensorView(),
         .dy = g.bf16 ? view(dy16, DType::kBF16, {T, H}) : view(dy, {T, H}),
         .dx = view(dx, grad_type, {T, H}),
         .d_topk_weights = view(d_topk, {T, K}),
         .dw1 = view(dw1, grad_type, {local, H, 2 * I}),
         .dw2 = view(dw2, grad_type, {local, I, H}),
         .shared_dw1 = shared_view(sdw1, grad_type, {1, H, 2 * si}),
         .shared_dw2 = shared_view(sdw2, grad_type, {1, si, H})}));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The stages are parts of the call, apart from one another but where overlap says two ran
    // at once: their sum minus overlap cannot exceed the call.
    const MoeGradStageTimes& t = layer->last_grad_times();
    for (const double s :
         {t.dispatch, t.recompute, t.act_grad, t.weight_grad, t.combine, t.overlap})
      EXPECT_GE(s, 0.0) << "rank " << me;
    EXPECT_LE(t.dispatch + t.recompute + t.act_grad + t.weight_grad + t.combine - t.overlap, wall)
        << "rank " << me << ": dispatch " << t.dispatch << " recompute " << t.recompute
        << " act_grad " << t.act_grad << " weight_grad " << t.weight_grad << " combine "
        << t.combine << " overlap " << t.overlap << " in a call of " << wall << " s";
  }
  auto as_float = [&](const std::vector<std::uint8_t>& bytes) {
    std::vector<float> out(bytes.size() / elem);
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = g.bf16 ? bf16_to_float(reinterpret_cast<const std::uint16_t*>(bytes.data())[i])
                      : reinterpret_cast<const float*>(bytes.data())[i];
    }
    return out;
  };
  auto slice = [&](const std::vector<float>& global, std::int64_t per_expert) {
    return std::vector<float>(global.begin() + me * local * per_expert,
                              global.begin() + (me + 1) * local * per_expert);
  };
  // bf16 GEMM inputs (x~, h~, dY, dA and the weights rounded to bf16) against fp64: about 1%;
  // with int8 activation gradients, dY and dA rounded to int8 per row instead: about 1-2%.
  const double tol = 3e-2;
  EXPECT_LT(relative_error(as_float(dx), ref.dx), tol) << "dx, rank " << me;
  EXPECT_LT(relative_error(d_topk, ref.d_topk), tol) << "d_topk_weights, rank " << me;
  EXPECT_LT(relative_error(as_float(dw1), slice(ref.dw1, H * 2 * I)), tol) << "dw1, rank " << me;
  EXPECT_LT(relative_error(as_float(dw2), slice(ref.dw2, I * H)), tol) << "dw2, rank " << me;
  if (si > 0) {
    EXPECT_LT(relative_error(as_float(sdw1), ref.shared_dw1), tol) << "shared_dw1, rank " << me;
    EXPECT_LT(relative_error(as_float(sdw2), ref.shared_dw2), tol) << "shared_dw2, rank " << me;
  }
  // Exact zeros: slots without an expert and inactive tokens.
  const std::vector<float> dxf = as_float(dx);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t k = 0; k < K; ++k) {
      if (in.idx[std::size_t(t * K + k)] < 0 || (c.masked && in.active[std::size_t(t)] == 0)) {
        EXPECT_EQ(d_topk[std::size_t(t * K + k)], 0.0f) << "token " << t << " slot " << k;
      }
    }
    if (c.masked && in.active[std::size_t(t)] == 0) {
      for (std::int64_t j = 0; j < H; ++j)
        EXPECT_EQ(dxf[std::size_t(t * H + j)], 0.0f) << "token " << t;
    }
  }
  return layer->destroy();
}

class MoeLayerGradTest : public ::testing::TestWithParam<CommKind> {};

TEST_P(MoeLayerGradTest, SeveralExpertsPerRank) {
  run_scenario(
      [&] { return check_backward(GradShape{.c = {.tokens = 12, .topk = 3}}, GetParam()); });
}
TEST_P(MoeLayerGradTest, MaskedWithASharedExpertInBf16) {
  run_scenario([&] {
    return check_backward(
        GradShape{.c = {.tokens = 12, .topk = 3, .masked = true}, .shared_inter = 40, .bf16 = true},
        GetParam());
  });
}
TEST_P(MoeLayerGradTest, SmoothQuantWithASharedExpert) {
  run_scenario([&] {
    return check_backward(
        GradShape{.c = {.tokens = 12, .topk = 3}, .shared_inter = 40, .smooth = true}, GetParam());
  });
}
TEST_P(MoeLayerGradTest, AllTokensToOneExpert) {  // the other experts' weight gradients are zero
  run_scenario([&] {
    return check_backward(
        GradShape{.c = {.tokens = 10, .topk = 2, .routing = Routing::kAllToExpert0}}, GetParam());
  });
}
TEST_P(MoeLayerGradTest, SomeRanksWithoutTokensOnAChip) {
  run_scenario([&] {
    return check_backward(
        GradShape{
            .c = {.hidden = 128, .tokens = 10, .topk = 2, .routing = Routing::kSomeRanksEmpty},
            .inter = 64,
            .experts_per_rank = 1,
            .vector_cores = 2},
        GetParam());
  });
}

// Two cube cores: G = dY W2^T and dW2 run side by side, dW1 under the combine.
TEST_P(MoeLayerGradTest, OnTwoCubeCoresWithASharedExpert) {
  run_scenario([&] {
    return check_backward(
        GradShape{
            .c = {.tokens = 12, .topk = 3}, .shared_inter = 40, .vector_cores = 4, .cube_cores = 2},
        GetParam());
  });
}

// A bad gradient argument on one rank fails every rank; a layer made without backward refuses.
TEST_P(MoeLayerGradTest, BadArgumentsFailEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const std::int64_t H = 64, I = 32, K = 2, T = 6, local = 1;
    const Weights w = make_weights(H, I, local);
    const ExpertWeights weights{.w1 = view(w.w1, DType::kInt8, {local, H, 2 * I}),
                                .w1_scale = view(w.s1, {local, 2 * I}),
                                .w2 = view(w.w2, DType::kInt8, {local, I, H}),
                                .w2_scale = view(w.s2, {local, H})};
    MoeLayerConfig config{.hidden = H,
                          .intermediate = I,
                          .num_experts = ranks * local,
                          .topk = K,
                          .max_tokens_per_rank = T,
                          .comm = GetParam()};
    std::vector<float> x(std::size_t(T * H), 0.5f), wts(std::size_t(T * K), 0.5f),
        dy(x.size(), 1.0f), dx(x.size()), d_topk(std::size_t(T * K)), dw1(w.w1.size()),
        dw2(w.w2.size());
    std::vector<std::int64_t> idx(std::size_t(T * K));
    for (std::int64_t i = 0; i < T * K; ++i) idx[std::size_t(i)] = i % 2 == 0 ? 0 : ranks - 1;
    if (ranks == 1) std::fill(idx.begin() + 1, idx.end(), -1);
    MoeGradArgs args{.x = view(x, {T, H}),
                     .topk_idx = view(idx, DType::kInt64, {T, K}),
                     .topk_weights = view(wts, {T, K}),
                     .dy = view(dy, {T, H}),
                     .dx = view(dx, {T, H}),
                     .d_topk_weights = view(d_topk, {T, K}),
                     .dw1 = view(dw1, {local, H, 2 * I}),
                     .dw2 = view(dw2, {local, I, H})};
    {
      std::unique_ptr<MoeLayer> layer;
      HP_RETURN_IF_ERROR(MoeLayer::create(config, weights, &layer));
      const Status st = layer->backward(args);
      EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition) << st.to_string();
      HP_RETURN_IF_ERROR(layer->destroy());
    }
    config.backward = true;
    std::unique_ptr<MoeLayer> layer;
    HP_RETURN_IF_ERROR(MoeLayer::create(config, weights, &layer));
    HP_RETURN_IF_ERROR(layer->backward(args));
    MoeGradArgs bad = args;
    if (me == 0) bad.dw2 = view(dw2, {local, H, I});  // transposed
    Status st = layer->backward(bad);
    EXPECT_EQ(st.code(), me == 0 ? ErrorCode::kShapeMismatch : ErrorCode::kAborted)
        << st.to_string();
    bad = args;
    if (me == ranks - 1) bad.dy = view(dy, {T, H - 1});
    st = layer->backward(bad);
    EXPECT_EQ(st.code(), me == ranks - 1 ? ErrorCode::kShapeMismatch : ErrorCode::kAborted)
        << st.to_string();
    HP_RETURN_IF_ERROR(layer->backward(args));  // the layer still works
    return layer->destroy();
  });
}

// The reference's gradient is the gradient: against central differences of the float
// reference (which differs from the quantised one by the quantisation error, a few percent)
// along random directions in x, topk_weights and the weights' scales.
TEST(MoeReferenceGrad, MatchesFiniteDifferencesOfTheFloatReference) {
  const std::int64_t H = 32, I = 24, E = 3, K = 2, T = 5;
  Weights w = make_weights(H, I, E);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(T * H)), wts(std::size_t(T * K)), dy = make_dy(T, H, 0);
  for (auto& v : x) v = normal(rng);
  for (auto& v : wts) v = 0.3f + 0.4f * float(rng() % 100) / 100.0f;
  std::vector<std::int64_t> idx = {0, 2, 1, -1, 2, 1, 0, 1, 2, 0};
  std::vector<float> dx(x.size()), d_topk(wts.size()), dw1(w.w1.size(), 0.0f),
      dw2(w.w2.size(), 0.0f);
  auto forward_args = [&]() {
    return MoeReferenceArgs{.w1 = view(w.w1, DType::kInt8, {E, H, 2 * I}),
                            .w1_scale = view(w.s1, {E, 2 * I}),
                            .w2 = view(w.w2, DType::kInt8, {E, I, H}),
                            .w2_scale = view(w.s2, {E, H}),
                            .x = view(x, {T, H}),
                            .topk_idx = view(idx, DType::kInt64, {T, K}),
                            .topk_weights = view(wts, {T, K})};
  };
  const Status st = moe_reference_quantized_grad({.forward = forward_args(),
                                                  .dy = view(dy, {T, H}),
                                                  .dx = view(dx, {T, H}),
                                                  .d_topk_weights = view(d_topk, {T, K}),
                                                  .dw1 = view(dw1, {E, H, 2 * I}),
                                                  .dw2 = view(dw2, {E, I, H})});
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  auto loss = [&](bool quantized) {  // <dy, y>
    std::vector<float> y(x.size());
    MoeReferenceArgs a = forward_args();
    a.y = view(y, {T, H});
    EXPECT_TRUE((quantized ? moe_reference_quantized(a) : moe_reference_float(a)).is_ok());
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += double(dy[i]) * y[i];
    return l;
  };
  // Perturb `values` along a random direction (relative: scaled by each value); compare the
  // slope with grad_dot(direction), the analytic derivative along it. y is linear in the
  // top-k weights, also when quantised: there the slope is exact (up to fp32 rounding).
  auto check = [&](const char* what, std::vector<float>& values, bool relative,
                   const std::function<double(const std::vector<float>&)>& grad_dot) {
    const bool exact = &values == &wts;
    std::vector<float> dir(values.size());
    for (auto& v : dir) v = normal(rng);
    const std::vector<float> base = values;
    for (std::size_t i = 0; i < dir.size(); ++i) dir[i] *= relative ? base[i] : 1.0f;
    const double eps = 1e-3;
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(base[i] + eps * dir[i]);
    const double up = loss(exact);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(base[i] - eps * dir[i]);
    const double down = loss(exact);
    values = base;
    const double numeric = (up - down) / (2 * eps), analytic = grad_dot(dir);
    EXPECT_NEAR(analytic, numeric, (exact ? 2e-3 : 0.08) * std::fabs(numeric) + 1e-4) << what;
  };
  check("x", x, false, [&](const std::vector<float>& d) {
    double s = 0;
    for (std::size_t i = 0; i < d.size(); ++i) s += double(dx[i]) * d[i];
    return s;
  });
  check("topk_weights", wts, false, [&](const std::vector<float>& d) {
    double s = 0;
    for (std::size_t i = 0; i < d.size(); ++i) s += idx[i] < 0 ? 0.0 : double(d_topk[i]) * d[i];
    return s;
  });
  // Scaling w1_scale[e][n] by (1 + d) moves W1[e][:, n] by d W1[e][:, n].
  check("w1_scale", w.s1, true, [&](const std::vector<float>& d) {
    double s = 0;
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t k = 0; k < H; ++k)
        for (std::int64_t n = 0; n < 2 * I; ++n) {
          const std::size_t at = std::size_t((e * H + k) * 2 * I + n),
                            col = std::size_t(e * 2 * I + n);
          s += double(dw1[at]) * w.w1[at] * d[col];
        }
    return s;
  });
  check("w2_scale", w.s2, true, [&](const std::vector<float>& d) {
    double s = 0;
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t k = 0; k < I; ++k)
        for (std::int64_t n = 0; n < H; ++n) {
          const std::size_t at = std::size_t((e * I + k) * H + n), col = std::size_t(e * H + n);
          s += double(dw2[at]) * w.w2[at] * d[col];
        }
    return s;
  });
}

// int8 activation gradients: the same gradients as the fp64 reference within its tolerance, on
// the calling thread and on two cube cores (G beside dW2), with a shared expert and smooth quant.
TEST_P(MoeLayerGradTest, Int8ActivationGradsWithASharedExpertAndSmoothQuant) {
  run_scenario([&] {
    return check_backward(
        GradShape{
            .c = {.tokens = 12, .topk = 3}, .shared_inter = 40, .smooth = true, .int8_act = true},
        GetParam());
  });
}
TEST_P(MoeLayerGradTest, Int8ActivationGradsOnTwoCubeCoresInBf16) {
  run_scenario([&] {
    return check_backward(GradShape{.c = {.tokens = 12, .topk = 3, .masked = true},
                                    .shared_inter = 40,
                                    .bf16 = true,
                                    .vector_cores = 4,
                                    .cube_cores = 2,
                                    .int8_act = true},
                          GetParam());
  });
}

TEST_P(MoeLayerGradTest, Int8ActivationGradsWithSomeRanksWithoutTokens) {
  run_scenario([&] {
    return check_backward(
        GradShape{
            .c = {.hidden = 128, .tokens = 10, .topk = 2, .routing = Routing::kSomeRanksEmpty},
            .inter = 64,
            .experts_per_rank = 1,
            .int8_act = true},
        GetParam());
  });
}

// keep_activations: the backward after a forward of the same x takes GMM1's output from it and
// gives the same bits as a layer that recomputes; after a forward of another x (the same
// routing), or with no forward since create, it recomputes. On the staged path and on the deep
// one (a 1:2 chip), with a shared expert (which recomputes either way) and smooth quant.
Status check_kept_activations(bool deep, CommKind comm) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  if (comm == CommKind::kWindow && !all_mapped()) return Status::ok();
  const Case c{.tokens = 12, .experts = 2 * ranks, .topk = 3};
  const std::int64_t H = c.hidden, I = 48, si = 40, K = c.topk, E = c.experts, local = 2;
  const Weights w = make_weights(H, I, E), sw = make_weights(H, si, 1, 78);
  std::vector<float> s1(std::size_t(H), 1.25f), s2(std::size_t(local * I));
  for (std::size_t i = 0; i < s2.size(); ++i) s2[i] = 0.5f + float(i % 7) / 5.0f;
  const ExpertWeights mine = rank_experts(w, me, local, H, I);
  const ExpertWeights weights{.w1 = mine.w1,
                              .w1_scale = mine.w1_scale,
                              .w2 = mine.w2,
                              .w2_scale = mine.w2_scale,
                              .shared_w1 = view(sw.w1, DType::kInt8, {1, H, 2 * si}),
                              .shared_w1_scale = view(sw.s1, {1, 2 * si}),
                              .shared_w2 = view(sw.w2, DType::kInt8, {1, si, H}),
                              .shared_w2_scale = view(sw.s2, {1, H}),
                              .smooth1 = view(s1, {H}),
                              .smooth2 = view(s2, {local, I})};
  std::unique_ptr<hp::platform::Chip> chip;
  if (deep) HP_RETURN_IF_ERROR(hp::platform::Chip::create({.num_cube = 1, .num_vector = 2}, &chip));
  MoeLayerConfig config{.hidden = H,
                        .intermediate = I,
                        .num_experts = E,
                        .topk = K,
                        .max_tokens_per_rank = c.tokens + ranks,
                        .shared_intermediate = si,
                        .comm = comm,
                        .chip = chip.get(),
                        .backward = true};
  std::unique_ptr<MoeLayer> recomputes, keeps;
  HP_RETURN_IF_ERROR(MoeLayer::create(config, weights, &recomputes));
  config.keep_activations = true;
  HP_RETURN_IF_ERROR(MoeLayer::create(config, weights, &keeps));
  EXPECT_EQ(keeps->deep(), deep);
  const Inputs in = make_inputs(c, me, ranks);
  const std::int64_t T = in.tokens;
  std::vector<float> other_x = in.x;  // another x, the same routing
  for (std::size_t i = 0; i < other_x.size(); ++i) other_x[i] += float(i % 5) * 0.25f;
  const std::vector<float> dy = make_dy(T, H, me);
  std::vector<float> y(std::size_t(T * H));
  struct Grads {
    std::vector<float> dx, d_topk, dw1, dw2, sdw1, sdw2;
    bool operator==(const Grads&) const = default;
  };
  auto forward = [&](MoeLayer& layer, const std::vector<float>& x) {
    return layer.forward(view(x, {T, H}), view(in.idx, DType::kInt64, {T, K}),
                         view(in.weights, {T, K}), view(y, {T, H}));
  };
  auto backward = [&](MoeLayer& layer, Grads* out) {
    *out = {std::vector<float>(std::size_t(T * H), -1.0f),
            std::vector<float>(std::size_t(T * K), -1.0f),
            std::vector<float>(std::size_t(local * H * 2 * I), -1.0f),
            std::vector<float>(std::size_t(local * I * H), -1.0f),
            std::vector<float>(std::size_t(H * 2 * si), -1.0f),
            std::vector<float>(std::size_t(si * H), -1.0f)};
    return layer.backward({.x = view(in.x, {T, H}),
                           .topk_idx = view(in.idx, DType::kInt64, {T, K}),
                           .topk_weights = view(in.weights, {T, K}),
                           .dy = view(dy, {T, H}),
                           .dx = view(out->dx, {T, H}),
                           .d_topk_weights = view(out->d_topk, {T, K}),
                           .dw1 = view(out->dw1, {local, H, 2 * I}),
                           .dw2 = view(out->dw2, {local, I, H}),
                           .shared_dw1 = view(out->sdw1, {1, H, 2 * si}),
                           .shared_dw2 = view(out->sdw2, {1, si, H})});
  };
  Grads want, got;
  HP_RETURN_IF_ERROR(backward(*recomputes, &want));
  EXPECT_FALSE(recomputes->last_backward_kept());
  HP_RETURN_IF_ERROR(backward(*keeps, &got));
  EXPECT_FALSE(keeps->last_backward_kept()) << "rank " << me << ": no forward yet";
  EXPECT_TRUE(got == want) << "rank " << me << ": before any forward";
  HP_RETURN_IF_ERROR(forward(*keeps, in.x));
  HP_RETURN_IF_ERROR(backward(*keeps, &got));
  EXPECT_TRUE(keeps->last_backward_kept()) << "rank " << me;
  EXPECT_TRUE(got == want) << "rank " << me << ": from the kept pre-activation";
  HP_RETURN_IF_ERROR(forward(*keeps, other_x));
  HP_RETURN_IF_ERROR(backward(*keeps, &got));
  EXPECT_FALSE(keeps->last_backward_kept()) << "rank " << me << ": another x's forward";
  EXPECT_TRUE(got == want) << "rank " << me << ": after a forward of another x";
  HP_RETURN_IF_ERROR(recomputes->destroy());
  return keeps->destroy();
}

TEST_P(MoeLayerGradTest, KeptActivationsGiveTheRecomputedGradients) {
  run_scenario([&] { return check_kept_activations(false, GetParam()); });
}
TEST_P(MoeLayerGradTest, KeptActivationsOnTheDeepPath) {
  run_scenario([&] { return check_kept_activations(true, GetParam()); });
}

// keep_activations and int8_activation_grads without backward are refused.
TEST(MoeLayerBackwardOptions, NeedBackward) {
  run_scenario([&]() -> Status {
    const std::int64_t H = 64, I = 32, local = 1;
    const Weights w = make_weights(H, I, local);
    for (const bool keep : {true, false}) {
      std::unique_ptr<MoeLayer> layer;
      const Status st = MoeLayer::create({.hidden = H,
                                          .intermediate = I,
                                          .num_experts = hp::shmem::n_pes() * local,
                                          .topk = 1,
                                          .max_tokens_per_rank = 4,
                                          .keep_activations = keep,
                                          .int8_activation_grads = !keep},
                                         {.w1 = view(w.w1, DType::kInt8, {local, H, 2 * I}),
                                          .w1_scale = view(w.s1, {local, 2 * I}),
                                          .w2 = view(w.w2, DType::kInt8, {local, I, H}),
                                          .w2_scale = view(w.s2, {local, H})},
                                         &layer);
      EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
      EXPECT_THAT(st.message(),
                  ::testing::HasSubstr(keep ? "keep_activations" : "int8_activation_grads"));
    }
    return Status::ok();
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, MoeLayerGradTest,
                         ::testing::Values(CommKind::kShmem, CommKind::kWindow),
                         [](const auto& info) {
                           return info.param == CommKind::kShmem ? "shmem" : "window";
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
