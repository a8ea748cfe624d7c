// MoeLayer::backward: the formulas are in moe_layer.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/bfloat16.h"
#include "kernels/ops.h"
#include "moe/moe_layer.h"
#include "moe/window_layout.h"
#include "shmem/shmem.h"

namespace hp::moe {
namespace {

using window::expect_float_rows;

float load(const TensorView& t, std::int64_t i) {
  return t.dtype() == DType::kBF16 ? bf16_to_float(static_cast<const std::uint16_t*>(t.data())[i])
                                   : static_cast<const float*>(t.data())[i];
}

// x [rows, cols] (fp32 or bf16, rows contiguous) with each expert group's columns scaled by
// that expert's per-column scales of `weights` (packed plainly: its columns are W's, cols of
// them), quantised per row into q int8 [rows, cols] and scale fp32 [rows].
Status quantize_scaled_groups(const hp::kernels::KernelTable& table, const TensorView& x,
                              const TensorView& offsets,
                              const hp::kernels::PackedWeightsHeader& weights,
                              std::vector<std::int8_t>* q, std::vector<float>* scale) {
  const std::int64_t rows = x.dim(0), cols = x.dim(1), experts = offsets.dim(0) - 1;
  const auto* off = static_cast<const std::int64_t*>(offsets.data());
  q->resize(std::size_t(rows * cols));
  scale->resize(std::size_t(rows));
  auto* base = static_cast<std::byte*>(x.data());
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t n = off[e + 1] - off[e];
    if (n == 0) continue;
    const std::int64_t shape[2] = {n, cols}, strides[2] = {x.stride(0), 1};
    HP_RETURN_IF_ERROR(hp::kernels::quantize(
        table,
        TensorView(base + std::size_t(off[e] * x.stride(0)) * x.element_size(), x.dtype(), shape,
                   strides),
        TensorView(q->data() + off[e] * cols, DType::kInt8, {n, cols}),
        TensorView(scale->data() + off[e], DType::kFP32, {n}),
        TensorView(const_cast<float*>(weights.scales(e, 0)), DType::kFP32, {cols})));
  }
  return Status::ok();
}

}  // namespace

Status MoeLayer::prepare_backward(const ExpertWeights& w, bool shared) {
  HP_RETURN_IF_ERROR(hp::kernels::pack_weights(w.w1, w.w1_scale, {.type = config_.weights},
                                               shared ? &shared_w1_plain_ : &w1_plain_));
  if (config_.int8_activation_grads) {
    // W^T [E, N, K] as a view of W [E, K, N] (strides swapped), packed with unit scales: the
    // weights' own scales (those of w1_plain_ and the forward's w2_) go to the other side's
    // columns (quantize_scaled_groups).
    auto pack_transposed = [](const TensorView& q, hp::kernels::PackedWeights* out) {
      const std::int64_t shape[3] = {q.dim(0), q.dim(2), q.dim(1)},
                         strides[3] = {q.stride(0), q.stride(2), q.stride(1)};
      std::vector<float> ones(std::size_t(q.dim(0) * q.dim(1)), 1.0f);
      return hp::kernels::pack_weights(TensorView(q.data(), DType::kInt8, shape, strides),
                                       TensorView(ones.data(), DType::kFP32, {q.dim(0), q.dim(1)}),
                                       {}, out);
    };
    HP_RETURN_IF_ERROR(pack_transposed(w.w1, shared ? &shared_w1t_q_ : &w1t_q_));
    return pack_transposed(w.w2, shared ? &shared_w2t_q_ : &w2t_q_);
  }
  // Dequantised, transposed bf16 copies: W^T[e][n][k] = int8[e][k][n] x scale[e][n] (any
  // strides in; contiguous out, so that the GEMMs by W^T read B rows). By blocks of kBlock
  // columns n: the block's kBlock output rows advance together along k, so each of their lines
  // is filled while it is in the cache (a plain k, n order writes one element per line).
  auto dequantize = [](const TensorView& q, const TensorView& scale,
                       std::vector<std::uint16_t>* out) {
    constexpr std::int64_t kBlock = 32;
    const std::int64_t E = q.dim(0), K = q.dim(1), N = q.dim(2);
    const auto* qp = static_cast<const std::int8_t*>(q.data());
    const auto* sp = static_cast<const float*>(scale.data());
    out->resize(std::size_t(E * K * N));
    for (std::int64_t e = 0; e < E; ++e) {
      for (std::int64_t n0 = 0; n0 < N; n0 += kBlock) {
        const std::int64_t n1 = std::min(N, n0 + kBlock);
        for (std::int64_t k = 0; k < K; ++k) {
          for (std::int64_t n = n0; n < n1; ++n) {
            const float v = float(qp[e * q.stride(0) + k * q.stride(1) + n * q.stride(2)]) *
                            sp[e * scale.stride(0) + n * scale.stride(1)];
            (*out)[std::size_t((e * N + n) * K + k)] = float_to_bf16(v);
          }
        }
      }
    }
  };
  // W^T in the table's panels (the act-grad GEMMs' B, the same every call), plain copies freed.
  auto pack = [&](std::vector<std::uint16_t>* plain, std::int64_t k, std::int64_t n,
                  hp::kernels::Bf16Panels* panels) {
    const std::int64_t experts = std::int64_t(plain->size()) / (k * n);
    HP_RETURN_IF_ERROR(hp::kernels::pack_bf16_panels(
        *table_, TensorView(plain->data(), DType::kBF16, {experts, k, n}), panels));
    if (!panels->empty()) std::vector<std::uint16_t>().swap(*plain);
    return Status::ok();
  };
  const std::int64_t H = config_.hidden,
                     I = shared ? config_.shared_intermediate : config_.intermediate;
  dequantize(w.w1, w.w1_scale, shared ? &shared_w1t_bf16_ : &w1t_bf16_);
  HP_RETURN_IF_ERROR(pack(shared ? &shared_w1t_bf16_ : &w1t_bf16_, 2 * I, H,
                          shared ? &shared_w1t_panels_ : &w1t_panels_));
  dequantize(w.w2, w.w2_scale, shared ? &shared_w2t_bf16_ : &w2t_bf16_);
  HP_RETURN_IF_ERROR(pack(shared ? &shared_w2t_bf16_ : &w2t_bf16_, H, I,
                          shared ? &shared_w2t_panels_ : &w2t_panels_));
  return Status::ok();
}

Status MoeLayer::check_grad_args(const MoeGradArgs& a) const {
  const std::int64_t H = config_.hidden, I = config_.intermediate, K = config_.topk;
  const std::int64_t local = config_.num_experts / buffer_->num_ranks();
  HP_RETURN_IF_ERROR(a.x.expect_shape("x", {-1, H}));
  const std::int64_t T = a.x.dim(0);
  HP_RETURN_IF_ERROR(expect_float_rows(a.dy, "dy", {T, H}));
  HP_RETURN_IF_ERROR(expect_float_rows(a.dx, "dx", {T, H}));
  HP_RETURN_IF_ERROR(a.d_topk_weights.expect_shape("d_topk_weights", {T, K}));
  HP_RETURN_IF_ERROR(a.d_topk_weights.expect_dtype("d_topk_weights", DType::kFP32));
  HP_RETURN_IF_ERROR(window::expect_contiguous(a.d_topk_weights, "d_topk_weights"));
  HP_RETURN_IF_ERROR(expect_float_rows(a.dw1, "dw1", {local, H, 2 * I}));
  HP_RETURN_IF_ERROR(expect_float_rows(a.dw2, "dw2", {local, I, H}));
  const std::int64_t si = config_.shared_intermediate;
  if (si > 0) {
    HP_RETURN_IF_ERROR(expect_float_rows(a.shared_dw1, "shared_dw1", {1, H, 2 * si}));
    HP_RETURN_IF_ERROR(expect_float_rows(a.shared_dw2, "shared_dw2", {1, si, H}));
  } else {
    HP_ENSURE(a.shared_dw1.data() == nullptr && a.shared_dw2.data() == nullptr,
              ErrorCode::kInvalidArgument,
              "shared_dw1/shared_dw2: given, but the layer has no shared expert");
  }
  if (a.x_active_mask.data() != nullptr) {
    HP_RETURN_IF_ERROR(a.x_active_mask.expect_shape("x_active_mask", {T}));
    HP_RETURN_IF_ERROR(a.x_active_mask.expect_dtype("x_active_mask", DType::kUInt8));
  }
  return Status::ok();
}

// smooth2 of the experts of p as a view [E, I] (empty without smooth quant).
TensorView MoeLayer::smooth2_view(const ExpertGrad& p) {
  if (p.smooth2 == nullptr) return {};
  return TensorView(const_cast<float*>(p.smooth2), DType::kFP32, {p.offsets.dim(0) - 1, p.inter});
}

TensorView MoeLayer::preact_view(const ExpertGrad& p) {
  return TensorView(const_cast<float*>(p.kept_a != nullptr ? p.kept_a : grad_.a.data()),
                    DType::kFP32, {p.x_q.dim(0), 2 * p.inter});
}

// a = x~ W1 (as the forward; or the forward's, kept), h = silu(g) u (x smooth2) and its int8
// quantisation (or the forward's, kept), and x~ into grad_.
Status MoeLayer::recompute_forward(const ExpertGrad& p) {
  const std::int64_t rows = p.x_q.dim(0), H = config_.hidden, I = p.inter;
  GradStorage& g = grad_;
  if (p.kept_a == nullptr) {
    g.a.resize(std::size_t(rows * 2 * I));
    HP_RETURN_IF_ERROR(run_gemm(hp::kernels::GroupedGemmProblem{
        .a = p.x_q,
        .a_scale = p.x_scale,
        .offsets = p.offsets,
        .weights = p.w1_plain->header(),
        .epilogue = hp::kernels::Epilogue::kDequant,
        .out = TensorView(g.a.data(), DType::kFP32, {rows, 2 * I})}));
  }
  if (p.kept_h_q != nullptr) {  // the forward's own requantised rows: what the below computes
    g.h_q.assign(p.kept_h_q, p.kept_h_q + rows * I);
    g.h_scale.assign(p.kept_h_scale, p.kept_h_scale + rows);
  } else {
    const TensorView a = preact_view(p);
    g.h.resize(std::size_t(rows * I));
    const TensorView h(g.h.data(), DType::kFP32, {rows, I});
    HP_RETURN_IF_ERROR(hp::kernels::swiglu(*table_, a, p.offsets, smooth2_view(p), h));
    g.h_q.resize(std::size_t(rows * I));
    g.h_scale.resize(std::size_t(rows));
    HP_RETURN_IF_ERROR(hp::kernels::quantize(*table_, h,
                                             TensorView(g.h_q.data(), DType::kInt8, {rows, I}),
                                             TensorView(g.h_scale.data(), DType::kFP32, {rows})));
  }
  g.x_bf16.resize(std::size_t(rows * H));
  return hp::kernels::dequantize(*table_, p.x_q, p.x_scale,
                                 TensorView(g.x_bf16.data(), DType::kBF16, {rows, H}));
}

template <typename FirstProblem>
Status MoeLayer::run_gemms_side_by_side(const FirstProblem& first,
                                        const hp::kernels::Bf16GemmProblem& second) {
  hp::platform::Chip& chip = *config_.chip;
  const int cubes = chip.num_cube(), split = cubes / 2;
  hp::kernels::PlanFor<FirstProblem> a;
  hp::kernels::Bf16GemmPlan b;
  HP_RETURN_IF_ERROR(hp::kernels::plan_gemm(*table_, first, split, &a));
  HP_RETURN_IF_ERROR(hp::kernels::plan_bf16_gemm(*table_, second, cubes - split, &b));
  workspaces_.resize(std::max(workspaces_.size(), std::size_t(cubes)));
  double first_s = 0, second_s = 0;
  PhaseTimer wall(this, nullptr, std::nullopt);
  HP_RETURN_IF_ERROR(chip.launch(
      {.mode = hp::platform::LaunchMode::kCube, .block_dim = cubes},
      [&](hp::platform::BlockContext& block) {
        if (block.block_idx() < split) {
          const PhaseTimer span(this, block.block_idx() == 0 ? &first_s : nullptr, std::nullopt);
          a.run(block.block_idx(), worker_workspace(block.block_idx(), a.workspace_bytes()));
        } else {
          const PhaseTimer span(this, block.block_idx() == split ? &second_s : nullptr,
                                CorePhase::kGradWeight, block.core_idx());
          b.run(block.block_idx() - split,
                worker_workspace(block.block_idx(), b.workspace_bytes()));
        }
        return Status::ok();
      }));
  // The caller's act_grad span holds the whole launch: G counts there with its own time, dW2 in
  // weight_grad, and the time the two ran at once is overlap.
  const double wall_s = wall.stop();
  grad_times_.act_grad -= wall_s - first_s;
  grad_times_.weight_grad += second_s;
  grad_times_.overlap += std::max(0.0, first_s + second_s - wall_s);
  return Status::ok();
}

// G = dY W2^T, dW2 = (w h~)^T dY, dA = [dg | du] with d w, and dX's rows, from grad_'s
// recomputed rows.
Status MoeLayer::activation_grads(const ExpertGrad& p) {
  const std::int64_t rows = p.x_q.dim(0), H = config_.hidden, I = p.inter, E = p.offsets.dim(0) - 1;
  GradStorage& g = grad_;
  const TensorView h_q(g.h_q.data(), DType::kInt8, {rows, I}),
      h_scale(g.h_scale.data(), DType::kFP32, {rows});
  // w h~ in bf16, dW2's left side: h_q dequantised with each row's scale times its weight.
  g.hw_scale.resize(std::size_t(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    g.hw_scale[std::size_t(r)] =
        g.h_scale[std::size_t(r)] * (p.row_weight != nullptr ? p.row_weight[r] : 1.0f);
  }
  g.hw_bf16.resize(std::size_t(rows * I));
  const TensorView hw(g.hw_bf16.data(), DType::kBF16, {rows, I});
  HP_RETURN_IF_ERROR(hp::kernels::dequantize(
      *table_, h_q, TensorView(g.hw_scale.data(), DType::kFP32, {rows}), hw));
  // G = dY W2^T and dW2 = (w h~)^T dY need only what is there: at once when the chip has two
  // cube cores or more (upstream: the act-grad GEMM in parallel with the w2 grad).
  g.g_dy.resize(std::size_t(rows * I));
  const TensorView g_dy(g.g_dy.data(), DType::kFP32, {rows, I});
  const bool int8 = p.w2t_q != nullptr;
  if (int8) {
    HP_RETURN_IF_ERROR(
        quantize_scaled_groups(*table_, p.dy, p.offsets, *p.w2->header(), &g.act_q, &g.act_scale));
  }
  const hp::kernels::GroupedGemmProblem g_int8{
      .a = TensorView(g.act_q.data(), DType::kInt8, {rows, H}),
      .a_scale = TensorView(g.act_scale.data(), DType::kFP32, {rows}),
      .offsets = p.offsets,
      .weights = int8 ? p.w2t_q->header() : nullptr,
      .epilogue = hp::kernels::Epilogue::kDequant,
      .out = g_dy};
  const hp::kernels::Bf16GemmProblem g_problem{
      .kind = hp::kernels::Bf16GemmKind::kInput,
      .a = p.dy,
      .offsets = p.offsets,
      .b = TensorView(const_cast<std::uint16_t*>(p.w2t_bf16), DType::kBF16, {E, H, I}),
      .out = g_dy,
      .b_panels = p.w2t_panels};
  const hp::kernels::Bf16GemmProblem dw2_problem{.kind = hp::kernels::Bf16GemmKind::kWeight,
                                                 .a = hw,
                                                 .offsets = p.offsets,
                                                 .b = p.dy,
                                                 .out = p.dw2};
  if (config_.chip != nullptr && config_.chip->num_cube() >= 2) {
    HP_RETURN_IF_ERROR(int8 ? run_gemms_side_by_side(g_int8, dw2_problem)
                            : run_gemms_side_by_side(g_problem, dw2_problem));
  } else {
    HP_RETURN_IF_ERROR(int8 ? run_gemm(g_int8) : run_gemm(g_problem));
    // dW2 runs inside the act-grad phase's span but counts as weight grad, as with a chip.
    PhaseTimer dw2(this, &grad_times_.weight_grad, CorePhase::kGradWeight);
    HP_RETURN_IF_ERROR(run_gemm(dw2_problem));
    grad_times_.act_grad -= dw2.stop();
  }
  g.da.resize(std::size_t(rows * 2 * I));
  const TensorView da(g.da.data(), DType::kBF16, {rows, 2 * I});
  HP_RETURN_IF_ERROR(hp::kernels::swiglu_grad(
      *table_,
      {.a = preact_view(p),
       .offsets = p.offsets,
       .smooth = smooth2_view(p),
       .g = g_dy,
       .h_q = h_q,
       .h_scale = h_scale,
       .row_weight = p.row_weight != nullptr
                         ? TensorView(const_cast<float*>(p.row_weight), DType::kFP32, {rows})
                         : TensorView(),
       .da = da,
       .d_row_weight = p.d_row_weight != nullptr ? TensorView(p.d_row_weight, DType::kFP32, {rows})
                                                 : TensorView()}));
  if (int8) {
    HP_RETURN_IF_ERROR(quantize_scaled_groups(*table_, da, p.offsets, *p.w1_plain->header(),
                                              &g.act_q, &g.act_scale));
    return run_gemm(hp::kernels::GroupedGemmProblem{
        .a = TensorView(g.act_q.data(), DType::kInt8, {rows, 2 * I}),
        .a_scale = TensorView(g.act_scale.data(), DType::kFP32, {rows}),
        .offsets = p.offsets,
        .weights = p.w1t_q->header(),
        .epilogue = hp::kernels::Epilogue::kDequant,
        .out = p.dx_rows});
  }
  return run_gemm(hp::kernels::Bf16GemmProblem{
      .kind = hp::kernels::Bf16GemmKind::kInput,
      .a = da,
      .offsets = p.offsets,
      .b = TensorView(const_cast<std::uint16_t*>(p.w1t_bf16), DType::kBF16, {E, 2 * I, H}),
      .out = p.dx_rows,
      .b_panels = p.w1t_panels});
}

Status MoeLayer::expert_backward(const ExpertGrad& p) {
  {
    const PhaseTimer recompute(this, &grad_times_.recompute, CorePhase::kGradRecompute);
    HP_RETURN_IF_ERROR(recompute_forward(p));
  }
  {
    const PhaseTimer act_grad(this, &grad_times_.act_grad, CorePhase::kGradActivation);
    HP_RETURN_IF_ERROR(activation_grads(p));
  }
  // ---- dW1 = x~^T dA (unless the caller runs it under the combine) ---------------------------
  if (!p.defer_dw1) {
    const PhaseTimer dw1(this, &grad_times_.weight_grad, CorePhase::kGradWeight);
    const std::int64_t rows = p.x_q.dim(0);
    HP_RETURN_IF_ERROR(run_gemm(hp::kernels::Bf16GemmProblem{
        .kind = hp::kernels::Bf16GemmKind::kWeight,
        .a = TensorView(grad_.x_bf16.data(), DType::kBF16, {rows, config_.hidden}),
        .offsets = p.offsets,
        .b = TensorView(grad_.da.data(), DType::kBF16, {rows, 2 * p.inter}),
        .out = p.dw1}));
  }
  return Status::ok();
}

Status MoeLayer::backward(const MoeGradArgs& a) {
  HP_ENSURE(buffer_ != nullptr, ErrorCode::kFailedPrecondition,
            "MoeLayer::backward: the layer was destroyed");
  HP_ENSURE(config_.backward, ErrorCode::kFailedPrecondition,
            "MoeLayer::backward: the layer was made without MoeLayerConfig::backward = true");
  grad_times_ = {};
  last_backward_kept_ = false;
  // Every check of this rank's arguments travels with the first dispatch's counts: a bad
  // argument on one rank fails every rank before anything moves.
  HP_RETURN_IF_ERROR(dispatch_for_backward(a, check_grad_args(a)));
  // The shared expert first: the routed experts' dW1 is left for last, and the two share the
  // scratch.
  if (config_.shared_intermediate > 0) HP_RETURN_IF_ERROR(shared_expert_backward(a));
  HP_RETURN_IF_ERROR(routed_experts_backward(a));
  return routed_dw1_and_communication(a);
}

Status MoeLayer::dispatch_for_backward(const MoeGradArgs& a, const Status& verdict) {
  GradStorage& g = grad_;
  const std::int64_t H = config_.hidden;
  const std::int64_t T = verdict.is_ok() ? a.x.dim(0) : 0;
  const auto* mask = static_cast<const std::uint8_t*>(a.x_active_mask.data());
  g.dy_bf16.resize(std::size_t(T * H));
  for (std::int64_t t = 0; t < T; ++t) {
    const bool active = mask == nullptr || mask[t] != 0;
    for (std::int64_t c = 0; c < H; ++c) {
      g.dy_bf16[std::size_t(t * H + c)] =
          active ? float_to_bf16(load(a.dy, t * H + c)) : std::uint16_t(0);
    }
  }
  // ---- dispatch x (int8, as the forward) and dY (bf16) with the forward's routing ----------
  const PhaseTimer dispatch(this, &grad_times_.dispatch, CorePhase::kGradDispatch);
  HP_RETURN_IF_ERROR(buffer_->dispatch({.x = a.x,
                                        .topk_idx = a.topk_idx,
                                        .topk_weights = a.topk_weights,
                                        .x_active_mask = a.x_active_mask,
                                        .quant = Quant::kDynamicInt8,
                                        .smooth = smooth1()},
                                       &g.x_recv, verdict));
  HP_RETURN_IF_ERROR(buffer_->dispatch({.x = TensorView(g.dy_bf16.data(), DType::kBF16, {T, H}),
                                        .topk_idx = a.topk_idx,
                                        .topk_weights = a.topk_weights,
                                        .x_active_mask = a.x_active_mask},
                                       &g.dy_recv));
  const Handle& handle = g.x_recv.handle;
  HP_ENSURE(g.dy_recv.expert_offsets == g.x_recv.expert_offsets &&
                g.dy_recv.handle.row_src_token == handle.row_src_token &&
                g.dy_recv.handle.row_src_rank == handle.row_src_rank,
            ErrorCode::kInternal,
            "MoeLayer::backward: dY's dispatch put its rows in another order than x's");
  return Status::ok();
}

// The shared expert, on this rank's tokens (dispatch_for_backward checked them).
Status MoeLayer::shared_expert_backward(const MoeGradArgs& a) {
  GradStorage& g = grad_;
  const std::int64_t H = config_.hidden, T = a.x.dim(0);
  g.own_q.resize(std::size_t(T * H));
  g.own_scale.resize(std::size_t(T));
  g.dx_sum.resize(std::size_t(T * H));
  const std::int64_t groups[2] = {0, T};
  const TensorView own_q(g.own_q.data(), DType::kInt8, {T, H}),
      own_scale(g.own_scale.data(), DType::kFP32, {T});
  HP_RETURN_IF_ERROR(hp::kernels::quantize(*table_, a.x, own_q, own_scale, smooth1()));
  return expert_backward(
      {.x_q = own_q,
       .x_scale = own_scale,
       .offsets = TensorView(const_cast<std::int64_t*>(groups), DType::kInt64, {2}),
       .dy = TensorView(g.dy_bf16.data(), DType::kBF16, {T, H}),
       .w1_plain = &shared_w1_plain_,
       .smooth2 = shared_smooth2_.empty() ? nullptr : shared_smooth2_.data(),
       .w1t_bf16 = shared_w1t_bf16_.data(),
       .w2t_bf16 = shared_w2t_bf16_.data(),
       .w1t_panels = &shared_w1t_panels_,
       .w2t_panels = &shared_w2t_panels_,
       .w1t_q = config_.int8_activation_grads ? &shared_w1t_q_ : nullptr,
       .w2t_q = config_.int8_activation_grads ? &shared_w2t_q_ : nullptr,
       .w2 = &shared_w2_,
       .inter = config_.shared_intermediate,
       .dw1 = a.shared_dw1,
       .dw2 = a.shared_dw2,
       .dx_rows = TensorView(g.dx_sum.data(), DType::kFP32, {T, H})});
}

// The routed experts on the dispatched rows, but for their dW1 (grad_.x_bf16, grad_.da).
Status MoeLayer::routed_experts_backward(const MoeGradArgs& a) {
  GradStorage& g = grad_;
  const std::int64_t H = config_.hidden, rows = g.x_recv.rows;
  g.dx_rows.resize(std::size_t(rows * H));
  g.d_row_weight.resize(std::size_t(rows));
  PhaseTimer match(this, &grad_times_.recompute, std::nullopt);
  const float* kept_a = kept_preact_of(g.x_recv);
  match.stop();
  last_backward_kept_ = kept_a != nullptr;
  return expert_backward({.x_q = g.x_recv.x(),
                          .x_scale = TensorView(g.x_recv.x_scale.data(), DType::kFP32, {rows}),
                          .offsets = TensorView(g.x_recv.expert_offsets.data(), DType::kInt64,
                                                {std::int64_t(g.x_recv.expert_offsets.size())}),
                          .dy = g.dy_recv.x(),
                          .row_weight = g.x_recv.topk_weights.data(),
                          .w1_plain = &w1_plain_,
                          .smooth2 = smooth2_.empty() ? nullptr : smooth2_.data(),
                          .w1t_bf16 = w1t_bf16_.data(),
                          .w2t_bf16 = w2t_bf16_.data(),
                          .w1t_panels = &w1t_panels_,
                          .w2t_panels = &w2t_panels_,
                          .w1t_q = config_.int8_activation_grads ? &w1t_q_ : nullptr,
                          .w2t_q = config_.int8_activation_grads ? &w2t_q_ : nullptr,
                          .w2 = &w2_,
                          .inter = config_.intermediate,
                          .dw1 = a.dw1,
                          .dw2 = a.dw2,
                          .dx_rows = TensorView(g.dx_rows.data(), DType::kFP32, {rows, H}),
                          .d_row_weight = g.d_row_weight.data(),
                          .defer_dw1 = true,
                          .kept_a = kept_a,
                          .kept_h_q = kept_a != nullptr ? kept_.h_q.data() : nullptr,
                          .kept_h_scale = kept_a != nullptr ? kept_.h_scale.data() : nullptr});
}

// The routed experts' dW1 and the communication: at once on a chip (its cube cores run the
// GEMM while one vector block runs the combine and the all-to-all), one after the other
// without.
Status MoeLayer::routed_dw1_and_communication(const MoeGradArgs& a) {
  GradStorage& g = grad_;
  const std::int64_t H = config_.hidden, I = config_.intermediate, rows = g.x_recv.rows;
  const TensorView offsets(g.x_recv.expert_offsets.data(), DType::kInt64,
                           {std::int64_t(g.x_recv.expert_offsets.size())});
  const hp::kernels::Bf16GemmProblem dw1{.kind = hp::kernels::Bf16GemmKind::kWeight,
                                         .a = TensorView(g.x_bf16.data(), DType::kBF16, {rows, H}),
                                         .offsets = offsets,
                                         .b = TensorView(g.da.data(), DType::kBF16, {rows, 2 * I}),
                                         .out = a.dw1};
  if (config_.chip == nullptr) {
    {
      const PhaseTimer weight(this, &grad_times_.weight_grad, CorePhase::kGradWeight);
      HP_RETURN_IF_ERROR(run_gemm(dw1));
    }
    const PhaseTimer combine(this, &grad_times_.combine, CorePhase::kGradCombine);
    return backward_communication(a);
  }
  hp::platform::Chip& chip = *config_.chip;
  hp::kernels::Bf16GemmPlan plan;
  HP_RETURN_IF_ERROR(hp::kernels::plan_bf16_gemm(*table_, dw1, chip.num_cube(), &plan));
  workspaces_.resize(std::max(workspaces_.size(), std::size_t(chip.num_cube())));
  const hp::shmem::PeBinding pe = hp::shmem::pe_binding();
  buffer_->use_chip(nullptr);  // the combine runs on one vector block, inside the launch
  double gemm_s = 0, comm_s = 0;
  PhaseTimer wall(this, nullptr, std::nullopt);
  const Status launched = chip.launch(
      {.mode = hp::platform::LaunchMode::kMix, .block_dim = chip.num_cube()},
      [&](hp::platform::BlockContext& b) -> Status {
        if (b.core_type() == hp::platform::CoreType::kCube) {
          const PhaseTimer span(this, b.block_idx() == 0 ? &gemm_s : nullptr,
                                CorePhase::kGradWeight, b.core_idx());
          plan.run(b.block_idx(), worker_workspace(b.block_idx(), plan.workspace_bytes()));
          return Status::ok();
        }
        if (b.block_idx() != 0 || b.sub_block_idx() != 0) return Status::ok();
        const PhaseTimer span(this, &comm_s, CorePhase::kGradCombine, b.core_idx());
        const hp::shmem::ThreadBinding bound(pe);
        return backward_communication(a);
      });
  const double wall_s = wall.stop();
  buffer_->use_chip(config_.chip);
  HP_RETURN_IF_ERROR(launched);
  grad_times_.weight_grad += gemm_s;
  grad_times_.combine = comm_s;
  grad_times_.overlap += std::max(0.0, gemm_s + comm_s - wall_s);
  return Status::ok();
}

Status MoeLayer::backward_communication(const MoeGradArgs& a) {
  GradStorage& g = grad_;
  const std::int64_t H = config_.hidden, K = config_.topk, T = a.x.dim(0), rows = g.x_recv.rows;
  const Handle& handle = g.x_recv.handle;
  const bool shared = config_.shared_intermediate > 0;
  // dX: the unweighted combine (+ the shared expert's rows, x smooth1); d topk_weights home.
  const TensorView dx_rows(g.dx_rows.data(), DType::kFP32, {rows, H});
  if (!shared && smooth1_.empty()) {
    HP_RETURN_IF_ERROR(buffer_->combine(dx_rows, handle, a.dx, {}, /*weighted=*/false));
  } else {
    std::vector<float>& routed = g.h;  // the recompute's scratch is free again
    routed.resize(std::size_t(T * H));
    HP_RETURN_IF_ERROR(buffer_->combine(
        dx_rows, handle, TensorView(routed.data(), DType::kFP32, {T, H}), {}, false));
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t c = 0; c < H; ++c) {
        const std::size_t i = std::size_t(t * H + c);
        const float v = (routed[i] + (shared ? g.dx_sum[i] : 0.0f)) *
                        (smooth1_.empty() ? 1.0f : smooth1_[std::size_t(c)]);
        if (a.dx.dtype() == DType::kBF16) {
          static_cast<std::uint16_t*>(a.dx.data())[i] = float_to_bf16(v);
        } else {
          static_cast<float*>(a.dx.data())[i] = v;
        }
      }
    }
  }
  // Row r of this rank's experts is slot k of token t of rank s: its d w goes to block s of the
  // all-to-all at [t][k]; each (t, k) has exactly one expert, so the blocks are summed.
  const int ranks = buffer_->num_ranks();
  const std::int64_t block = config_.max_tokens_per_rank * K;
  std::fill_n(topk_grad_send_, std::size_t(ranks * block), 0.0f);
  for (std::int64_t i = 0; i < handle.records; ++i) {
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t row = handle.record_rows[std::size_t(i * K + k)];
      if (row < 0) continue;
      const std::int64_t s = handle.row_src_rank[std::size_t(row)],
                         t = handle.row_src_token[std::size_t(row)];
      topk_grad_send_[s * block + t * K + k] = g.d_row_weight[std::size_t(row)];
    }
  }
  HP_RETURN_IF_ERROR(hp::shmem::alltoall(hp::shmem::kTeamWorld, topk_grad_recv_, topk_grad_send_,
                                         std::size_t(block) * sizeof(float)));
  auto* d_topk = static_cast<float*>(a.d_topk_weights.data());
  for (std::int64_t i = 0; i < T * K; ++i) {
    float sum = 0;
    for (int s = 0; s < ranks; ++s) sum += topk_grad_recv_[s * block + i];
    d_topk[i] = sum;
  }
  return Status::ok();
}

}  // namespace hp::moe
