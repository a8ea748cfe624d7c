#include "moe/moe_layer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/targets.h"
#include "moe/buffer_config.h"

namespace hp::moe {
namespace {

// The per-expert tensors of a TENSOR_LIST stacked into one [E, rows, cols] (or [E, cols] when
// rows is 0) buffer of `type` (checked: count, shape, dtype).
Status stack(const std::vector<TensorView>& list, const char* what, std::int64_t experts,
             std::int64_t rows, std::int64_t cols, DType type, std::vector<std::uint8_t>* storage,
             TensorView* out) {
  HP_ENSURE(std::int64_t(list.size()) == experts, ErrorCode::kShapeMismatch,
            "{}: {} tensors for {} local experts", what, list.size(), experts);
  const std::size_t elem = dtype_size(type),
                    per = std::size_t(std::max<std::int64_t>(rows, 1) * cols) * elem;
  storage->resize(per * std::size_t(experts));
  for (std::size_t e = 0; e < list.size(); ++e) {
    const TensorView& t = list[e];
    if (rows > 0) {
      HP_RETURN_IF_ERROR(t.expect_shape(what, {rows, cols}));
    } else {
      HP_RETURN_IF_ERROR(t.expect_shape(what, {cols}));
    }
    HP_RETURN_IF_ERROR(t.expect_dtype(what, type));
    HP_ENSURE(t.is_contiguous(), ErrorCode::kInvalidArgument, "{}[{}] {}: expected contiguous",
              what, e, t.to_string());
    std::memcpy(storage->data() + e * per, t.data(), per);
  }
  *out = rows > 0 ? TensorView(storage->data(), type, {experts, rows, cols})
                  : TensorView(storage->data(), type, {experts, cols});
  return Status::ok();
}

// An optional smooth-quant scale (empty view: none) checked and copied into `out`.
Status copy_smooth(const TensorView& t, const char* what, std::initializer_list<std::int64_t> shape,
                   std::vector<float>* out) {
  out->clear();
  if (t.data() == nullptr) return Status::ok();
  HP_RETURN_IF_ERROR(t.expect_shape(what, shape));
  HP_RETURN_IF_ERROR(t.expect_dtype(what, DType::kFP32));
  HP_ENSURE(t.is_contiguous(), ErrorCode::kInvalidArgument, "{} {}: expected contiguous", what,
            t.to_string());
  const auto* p = static_cast<const float*>(t.data());
  out->assign(p, p + t.numel());
  for (float v : *out) {
    HP_ENSURE(std::isfinite(v), ErrorCode::kInvalidArgument, "{}: a value {} is not finite", what,
              v);
  }
  return Status::ok();
}

}  // namespace

// This rank's routed experts' weights (stacked or TENSOR_LIST), packed, with their smooth
// scales and, for backward, their transposed copies.
Status MoeLayer::load_weights(const ExpertWeights& weights) {
  const MoeLayerConfig& config = config_;
  // Sizes first: every shape below is computed from them (the buffer checks the rest).
  HP_ENSURE(config.intermediate >= 1 && config.intermediate <= kMaxIntermediate,
            ErrorCode::kInvalidArgument, "MoeLayerConfig intermediate = {}: expected 1..{}",
            config.intermediate, kMaxIntermediate);
  HP_ENSURE(config.hidden >= 1 && config.hidden <= kMaxHidden, ErrorCode::kInvalidArgument,
            "MoeLayerConfig hidden = {}: expected 1..{}", config.hidden, kMaxHidden);
  HP_ENSURE(config.shared_intermediate >= 0 && config.shared_intermediate <= kMaxIntermediate,
            ErrorCode::kInvalidArgument, "MoeLayerConfig shared_intermediate = {}: expected 0..{}",
            config.shared_intermediate, kMaxIntermediate);
  HP_ENSURE(hp::shmem::initialized() && config.num_experts % std::max(1, hp::shmem::n_pes()) == 0,
            ErrorCode::kInvalidArgument,
            "MoeLayerConfig num_experts = {}: expected a multiple of the ranks",
            config.num_experts);
  HP_ENSURE(config.backward || !config.keep_activations, ErrorCode::kInvalidArgument,
            "MoeLayerConfig keep_activations: kept for the backward, which this layer does not "
            "have (set backward too, or leave keep_activations false)");
  HP_ENSURE(config.backward || !config.int8_activation_grads, ErrorCode::kInvalidArgument,
            "MoeLayerConfig int8_activation_grads: a choice for the backward, which this layer "
            "does not have (set backward too, or leave int8_activation_grads false)");
  const std::int64_t local = config.num_experts / hp::shmem::n_pes();
  ExpertWeights stacked_lists;
  std::vector<std::uint8_t> w1_store, w1s_store, w2_store, w2s_store;
  const bool listed = !weights.w1_list.empty();
  if (listed) {  // TENSOR_LIST: stacked here, then packed like stacked weights
    const std::int64_t H = config.hidden, I = config.intermediate;
    HP_RETURN_IF_ERROR(stack(weights.w1_list, "w1_list", local, H, 2 * I, DType::kInt8, &w1_store,
                             &stacked_lists.w1));
    HP_RETURN_IF_ERROR(stack(weights.w1_scale_list, "w1_scale_list", local, 0, 2 * I, DType::kFP32,
                             &w1s_store, &stacked_lists.w1_scale));
    HP_RETURN_IF_ERROR(
        stack(weights.w2_list, "w2_list", local, I, H, DType::kInt8, &w2_store, &stacked_lists.w2));
    HP_RETURN_IF_ERROR(stack(weights.w2_scale_list, "w2_scale_list", local, 0, H, DType::kFP32,
                             &w2s_store, &stacked_lists.w2_scale));
  }
  const ExpertWeights& routed = listed ? stacked_lists : weights;
  HP_RETURN_IF_ERROR(routed.w1.expect_shape("w1", {local, config.hidden, 2 * config.intermediate}));
  HP_RETURN_IF_ERROR(routed.w2.expect_shape("w2", {local, config.intermediate, config.hidden}));
  HP_RETURN_IF_ERROR(routed.w1_scale.expect_shape("w1_scale", {local, 2 * config.intermediate}));
  HP_RETURN_IF_ERROR(routed.w2_scale.expect_shape("w2_scale", {local, config.hidden}));
  const hp::kernels::WeightType type = config.weights;
  HP_ENSURE(type == hp::kernels::WeightType::kInt8 || type == hp::kernels::WeightType::kInt4,
            ErrorCode::kInvalidArgument,
            "MoeLayerConfig weights = {}: expected int8 (0) or int4 (1)", int(type));
  HP_RETURN_IF_ERROR(hp::kernels::pack_weights(
      routed.w1, routed.w1_scale, {.type = type, .layout = hp::kernels::PackLayout::kSwigluHalves},
      &w1_));
  HP_RETURN_IF_ERROR(hp::kernels::pack_weights(routed.w2, routed.w2_scale, {.type = type}, &w2_));
  if (config.backward) HP_RETURN_IF_ERROR(prepare_backward(routed, false));
  HP_RETURN_IF_ERROR(copy_smooth(weights.smooth1, "smooth1", {config.hidden}, &smooth1_));
  HP_RETURN_IF_ERROR(
      copy_smooth(weights.smooth2, "smooth2", {local, config.intermediate}, &smooth2_));
  return Status::ok();
}

// The shared expert's weights (or the check that none were given without one).
Status MoeLayer::load_shared_weights(const ExpertWeights& weights) {
  const MoeLayerConfig& config = config_;
  const hp::kernels::WeightType type = config.weights;
  HP_ENSURE(config.shared_intermediate >= 0, ErrorCode::kInvalidArgument,
            "MoeLayerConfig shared_intermediate = {}: expected >= 0", config.shared_intermediate);
  if (config.shared_intermediate == 0) {
    HP_ENSURE(weights.shared_smooth2.data() == nullptr, ErrorCode::kInvalidArgument,
              "shared_smooth2: given, but the layer has no shared expert");
    return Status::ok();
  }
  const std::int64_t si = config.shared_intermediate;
  HP_RETURN_IF_ERROR(
      copy_smooth(weights.shared_smooth2, "shared_smooth2", {1, si}, &shared_smooth2_));
  HP_RETURN_IF_ERROR(weights.shared_w1.expect_shape("shared_w1", {1, config.hidden, 2 * si}));
  HP_RETURN_IF_ERROR(weights.shared_w1_scale.expect_shape("shared_w1_scale", {1, 2 * si}));
  HP_RETURN_IF_ERROR(weights.shared_w2.expect_shape("shared_w2", {1, si, config.hidden}));
  HP_RETURN_IF_ERROR(weights.shared_w2_scale.expect_shape("shared_w2_scale", {1, config.hidden}));
  HP_RETURN_IF_ERROR(hp::kernels::pack_weights(
      weights.shared_w1, weights.shared_w1_scale,
      {.type = type, .layout = hp::kernels::PackLayout::kSwigluHalves}, &shared_w1_));
  if (config.backward) {
    ExpertWeights shared{.w1 = weights.shared_w1,
                         .w1_scale = weights.shared_w1_scale,
                         .w2 = weights.shared_w2,
                         .w2_scale = weights.shared_w2_scale};
    HP_RETURN_IF_ERROR(prepare_backward(shared, true));
  }
  return hp::kernels::pack_weights(weights.shared_w2, weights.shared_w2_scale, {.type = type},
                                   &shared_w2_);
}

Status MoeLayer::create(const MoeLayerConfig& config, const ExpertWeights& weights,
                        std::unique_ptr<MoeLayer>* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "MoeLayer::create: out is null");
  std::unique_ptr<MoeLayer> layer(new MoeLayer());
  layer->config_ = config;
  // The weights are checked before the collective buffer is made, and their verdict is shared
  // through it: a rank with bad weights passes an impossible hidden size, so every rank fails.
  const Status packed = [&]() -> Status {
    HP_RETURN_IF_ERROR(hp::kernels::selected_target(&layer->table_));
    HP_RETURN_IF_ERROR(layer->load_weights(weights));
    return layer->load_shared_weights(weights);
  }();
  // The path (a precondition of this rank's chip; ranks disagreeing fail the buffer's create).
  const std::int64_t local =
      hp::shmem::initialized() ? config.num_experts / std::max(1, hp::shmem::n_pes()) : 0;
  const bool deep_chip = config.chip != nullptr && config.chip->ratio() == 2;
  const Status path_ok = [&]() -> Status {
    HP_ENSURE(config.path == LayerPath::kAuto || config.path == LayerPath::kStaged ||
                  config.path == LayerPath::kDeep,
              ErrorCode::kInvalidArgument, "MoeLayerConfig path = {}: unknown", int(config.path));
    HP_ENSURE(config.path != LayerPath::kDeep || deep_chip, ErrorCode::kFailedPrecondition,
              "MoeLayerConfig path = deep: the deep-fuse path runs on a chip with 2 vector cores "
              "per cube core "
              "(ChipConfig num_vector = 2 x num_cube); use path = staged or auto without one");
    return Status::ok();
  }();
  layer->deep_ = config.path == LayerPath::kDeep ||
                 (config.path == LayerPath::kAuto && deep_chip && local > 1);
  // This rank's verdict on its weights and path goes to every rank through the buffer's
  // config check: an impossible hidden size makes every rank fail.
  const Status made =
      Buffer::create({.hidden = packed.is_ok() && path_ok.is_ok() ? config.hidden : -1,
                      .max_tokens_per_rank = config.max_tokens_per_rank,
                      .num_experts = config.num_experts,
                      .topk = config.topk,
                      .max_element_bytes = config.backward ? 2 : 1,  // bf16 dY
                      .combine_element_bytes = 4,
                      .comm = config.comm,
                      .capacity_factor = config.capacity_factor,
                      .grow_on_overflow = config.grow_on_overflow,
                      .chip = config.chip,
                      .streamed_combine = layer->deep_,
                      .zero_copy_combine = !layer->deep_ && !config.backward},
                     &layer->buffer_);
  HP_RETURN_IF_ERROR(packed);
  HP_RETURN_IF_ERROR(path_ok);
  HP_RETURN_IF_ERROR(made);
  // The workspace: the planned regions for this problem (lossless receive rows), reuse mode.
  HP_RETURN_IF_ERROR(
      plan_moe({.tokens = config.max_tokens_per_rank,
                .hidden = config.hidden,
                .intermediate = config.intermediate,
                .topk = config.topk,
                .experts = config.num_experts,
                .ranks = hp::shmem::n_pes(),
                .shared_intermediate = config.shared_intermediate,
                .tensor_list = !weights.w1_list.empty(),
                .smooth_quant = !layer->smooth1_.empty() || !layer->smooth2_.empty()},
               &layer->plan_));
  if (config.backward) {  // collective: every rank got here (the buffer was made on all)
    const std::size_t block =
        std::size_t(hp::shmem::n_pes() * config.max_tokens_per_rank * config.topk) * sizeof(float);
    void* blocks = nullptr;
    HP_RETURN_IF_ERROR(hp::shmem::malloc(2 * std::max<std::size_t>(block, 64), &blocks));
    layer->topk_grad_send_ = static_cast<float*>(blocks);
    layer->topk_grad_recv_ =
        layer->topk_grad_send_ + std::max<std::size_t>(block, 64) / sizeof(float);
  }
  *out = std::move(layer);
  return Status::ok();
}

const char* to_string(CorePhase phase) noexcept {
  static constexpr const char* kNames[] = {
      "dispatch",     "GMM1+SwiGLU",   "GMM2",         "combine",         "shared expert",
      "bwd dispatch", "bwd recompute", "bwd act grad", "bwd weight grad", "bwd combine"};
  const auto i = std::size_t(phase);
  return i < std::size(kNames) ? kNames[i] : "?";
}

void MoeLayer::add_span(std::int32_t core, CorePhase phase,
                        std::chrono::steady_clock::time_point begin) {
  const auto seconds = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  const double end = seconds(std::chrono::steady_clock::now());
  const std::lock_guard lock(spans_mutex_);
  spans_.push_back({core, phase, seconds(begin), end});
}

std::vector<CoreSpan> MoeLayer::last_spans() const {
  const std::lock_guard lock(spans_mutex_);
  return spans_;
}

MoeLayer::~MoeLayer() { (void)destroy(); }

Status MoeLayer::destroy() {
  if (buffer_ == nullptr) return Status::ok();
  Status s = buffer_->destroy();
  buffer_.reset();
  if (topk_grad_send_ != nullptr) {
    const Status freed = hp::shmem::free(topk_grad_send_);
    topk_grad_send_ = topk_grad_recv_ = nullptr;
    if (s.is_ok()) s = freed;
  }
  return s;
}

void* MoeLayer::worker_workspace(int worker, std::uint64_t bytes) {
  AlignedVector<std::uint8_t>& w = workspaces_[std::size_t(worker)];
  if (w.size() < bytes) w.resize(bytes);
  return w.data();
}

template <typename Plan>
Status MoeLayer::run_plan(const Plan& plan) {
  hp::platform::Chip* chip = config_.chip;
  workspaces_.resize(std::max(workspaces_.size(), std::size_t(plan.workers())));
  if (chip == nullptr) {
    plan.run(0, worker_workspace(0, plan.workspace_bytes()));
    return Status::ok();
  }
  return chip->launch({.mode = hp::platform::LaunchMode::kCube, .block_dim = plan.workers()},
                      [&](hp::platform::BlockContext& block) {
                        plan.run(block.block_idx(),
                                 worker_workspace(block.block_idx(), plan.workspace_bytes()));
                        return Status::ok();
                      });
}

template <typename Problem>
Status MoeLayer::plan_and_run(const Problem& problem) {
  hp::kernels::PlanFor<Problem> plan;
  HP_RETURN_IF_ERROR(
      hp::kernels::plan_gemm(*table_, problem, config_.chip ? config_.chip->num_cube() : 1, &plan));
  return run_plan(plan);
}
template Status MoeLayer::plan_and_run(const hp::kernels::GroupedGemmProblem&);
template Status MoeLayer::plan_and_run(const hp::kernels::Bf16GemmProblem&);

Status MoeLayer::forward(const TensorView& x, const TensorView& topk_idx,
                         const TensorView& topk_weights, const TensorView& y,
                         const TensorView& x_active_mask) {
  HP_ENSURE(buffer_ != nullptr, ErrorCode::kFailedPrecondition,
            "MoeLayer::forward: the layer was destroyed");
  own_workspace_.resize(std::size_t(plan_.total_bytes));
  return forward(x, topk_idx, topk_weights, y, own_workspace_.data(),
                 std::uint64_t(plan_.total_bytes), x_active_mask);
}

Status MoeLayer::forward(const TensorView& x, const TensorView& topk_idx,
                         const TensorView& topk_weights, const TensorView& y, void* workspace,
                         std::uint64_t workspace_bytes, const TensorView& x_active_mask) {
  HP_ENSURE(buffer_ != nullptr, ErrorCode::kFailedPrecondition,
            "MoeLayer::forward: the layer was destroyed");
  auto* ws = static_cast<std::uint8_t*>(workspace);
  // A workspace too small (or misaligned) on one rank fails every rank: the count exchange
  // carries the verdict.
  const Status workspace_ok = [&]() -> Status {
    HP_ENSURE(workspace_bytes >= std::uint64_t(plan_.total_bytes) && ws != nullptr,
              ErrorCode::kInvalidArgument,
              "MoeLayer::forward: a workspace of {} bytes; this layer needs {} (workspace_bytes())",
              workspace_bytes, plan_.total_bytes);
    HP_ENSURE(reinterpret_cast<std::uintptr_t>(ws) % 64 == 0, ErrorCode::kMisaligned,
              "MoeLayer::forward: the workspace must be 64-byte aligned");
    HP_RETURN_IF_ERROR(y.expect_dtype("y", DType::kFP32));
    return Status::ok();
  }();
  const DispatchArgs args{.x = x,
                          .topk_idx = topk_idx,
                          .topk_weights = topk_weights,
                          .x_active_mask = x_active_mask,
                          .quant = Quant::kDynamicInt8,
                          .smooth = smooth1()};
  times_ = {};
  kept_.offsets.clear();
  {
    const std::lock_guard lock(spans_mutex_);
    spans_.clear();
  }
  // (The deep path runs the shared expert inside its first launch, under the dispatch.)
  if (deep_) return forward_deep(args, y, ws, workspace_ok);
  return forward_staged(args, y, ws, workspace_ok);
}

Status MoeLayer::forward_staged(const DispatchArgs& args, const TensorView& y, std::uint8_t* ws,
                                const Status& workspace_ok) {
  const std::int64_t inter = config_.intermediate, hidden = config_.hidden;
  const WorkspaceOffsets& at = plan_.offsets;
  const TensorView& x = args.x;
  const TensorView& x_active_mask = args.x_active_mask;
  // The shared expert first: its regions are free again before the routed
  // experts use theirs. Its error (a bad x) travels with the dispatch's counts like the
  // workspace's, to every rank.
  const Status verdict = !workspace_ok.is_ok() || config_.shared_intermediate == 0
                             ? workspace_ok
                             : run_shared_expert(x, ws);
  // ---- phase 0: dispatch into x1Token / x1Scale ---------------------------------------------
  PhaseTimer dispatch(this, &times_.dispatch, CorePhase::kDispatch);
  HP_RETURN_IF_ERROR(buffer_->notify_dispatch(args, &handle_, verdict));
  const std::int64_t rows = handle_.rows, local = std::int64_t(handle_.expert_offsets.size()) - 1;
  HP_ENSURE(rows <= plan_.max_recv_rows, ErrorCode::kInternal,
            "MoeLayer: {} rows past the plan's {}", rows, plan_.max_recv_rows);
  rows_ = rows;
  recv_weights_.resize(std::size_t(rows));
  const TensorView x1(ws + at.x1_token, DType::kInt8, {rows, hidden});
  const TensorView x1_scale(ws + at.x1_scale, DType::kFP32, {rows});
  HP_RETURN_IF_ERROR(buffer_->dispatch_data(
      args, &handle_,
      {.x = x1,
       .x_scale = x1_scale,
       .topk_weights = TensorView(recv_weights_.data(), DType::kFP32, {rows})}));
  dispatch.stop();
  const TensorView offsets(handle_.expert_offsets.data(), DType::kInt64, {local + 1});
  // ---- phase 1: GMM1 + SwiGLU + requantisation into the SwiGLU region ---------------------
  // (The plan's reuse mode shares x2 with x1: the requantised rows move to x2 only in phase 2,
  // once GMM1 no longer reads x1.)
  PhaseTimer gmm1(this, &times_.gmm1, CorePhase::kGmm1);
  std::uint8_t* h = ws + at.swiglu;
  auto* h_scale = reinterpret_cast<float*>(h + ((rows * inter + 63) & ~std::int64_t(63)));
  HP_RETURN_IF_ERROR(run_gemm({.a = x1,
                               .a_scale = x1_scale,
                               .offsets = offsets,
                               .weights = w1_.header(),
                               .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
                               .out = TensorView(h, DType::kInt8, {rows, inter}),
                               .out_scale = TensorView(h_scale, DType::kFP32, {rows}),
                               .smooth = smooth2(),
                               .preact = kept_preact(rows)}));
  keep_rows(ws + at.x1_token, reinterpret_cast<const float*>(ws + at.x1_scale), h, h_scale,
            handle_.expert_offsets);
  gmm1.stop();
  // ---- phase 2: into x2Token / x2Scale; phase 3: GMM2 into swap ----------------------------
  // (Phase 2 moves the rows before GMM2 starts: swap, which GMM2 writes, shares its bytes
  // with the SwiGLU region.)
  PhaseTimer gmm2(this, &times_.gmm2, CorePhase::kGmm2);
  std::memcpy(ws + at.x2_token, h, std::size_t(rows * inter));
  std::memcpy(ws + at.x2_scale, h_scale, std::size_t(rows) * sizeof(float));
  // GMM2 writes its rows where the combine reads them: the buffer's combine rows on the
  // symmetric heap (zero-copy, forward-only layers), else swap.
  TensorView out(ws + at.swap_space, DType::kFP32, {rows, hidden});
  if (buffer_->config().zero_copy_combine)
    HP_RETURN_IF_ERROR(buffer_->combine_buffer(handle_, &out));
  HP_RETURN_IF_ERROR(
      run_gemm({.a = TensorView(ws + at.x2_token, DType::kInt8, {rows, inter}),
                .a_scale = TensorView(ws + at.x2_scale, DType::kFP32, {rows}),
                .offsets = offsets,
                .weights = w2_.header(),
                .epilogue = hp::kernels::Epilogue::kDequantScale,
                .out = out,
                .row_factor = TensorView(recv_weights_.data(), DType::kFP32, {rows})}));
  gmm2.stop();
  // ---- phase 4: combine (the top-k weights were applied by GMM2's epilogue) ----------------
  {
    const PhaseTimer combine(this, &times_.combine, CorePhase::kCombine);
    HP_RETURN_IF_ERROR(buffer_->combine(out, handle_, y, {}, /*weighted=*/false));
  }
  // y (fp32, [T, H] as the combine checked) += the shared rows of active tokens
  if (config_.shared_intermediate > 0) {
    const PhaseTimer add_shared(this, &times_.combine, std::nullopt);
    const std::int64_t tokens = x.dim(0);
    auto* yp = static_cast<float*>(y.data());
    const auto* mask = static_cast<const std::uint8_t*>(x_active_mask.data());
    for (std::int64_t t = 0; t < tokens; ++t) {
      if (mask != nullptr && mask[t] == 0) continue;
      for (std::int64_t c = 0; c < hidden; ++c)
        yp[t * hidden + c] += shared_out_[std::size_t(t * hidden + c)];
    }
  }
  return Status::ok();
}

TensorView MoeLayer::kept_preact(std::int64_t rows) {
  if (!config_.keep_activations) return {};
  kept_.a.resize(std::size_t(rows * 2 * config_.intermediate));
  return TensorView(kept_.a.data(), DType::kFP32, {rows, 2 * config_.intermediate});
}

void MoeLayer::keep_rows(const std::uint8_t* x1, const float* x1_scale, const std::uint8_t* h,
                         const float* h_scale, const std::vector<std::int64_t>& offsets) {
  if (!config_.keep_activations) return;
  const std::size_t rows = std::size_t(offsets.back());
  kept_.x_q.assign(reinterpret_cast<const std::int8_t*>(x1),
                   reinterpret_cast<const std::int8_t*>(x1) + rows * std::size_t(config_.hidden));
  kept_.x_scale.assign(x1_scale, x1_scale + rows);
  kept_.h_q.assign(
      reinterpret_cast<const std::int8_t*>(h),
      reinterpret_cast<const std::int8_t*>(h) + rows * std::size_t(config_.intermediate));
  kept_.h_scale.assign(h_scale, h_scale + rows);
  kept_.offsets = offsets;
}

const float* MoeLayer::kept_preact_of(const DispatchResult& recv) const {
  if (recv.expert_offsets != kept_.offsets || recv.x_dtype != DType::kInt8 ||
      recv.x_scale != kept_.x_scale || recv.x_bytes.size() < kept_.x_q.size() ||
      std::memcmp(recv.x_bytes.data(), kept_.x_q.data(), kept_.x_q.size()) != 0) {
    return nullptr;
  }
  return kept_.a.data();
}

Status MoeLayer::run_shared_expert(const TensorView& x, std::uint8_t* ws) {
  const PhaseTimer whole(this, nullptr, CorePhase::kSharedExpert);
  const WorkspaceOffsets& at = plan_.offsets;
  const std::int64_t tokens = x.dim(0), hidden = config_.hidden, si = config_.shared_intermediate;
  const std::int64_t groups[2] = {0, tokens};
  const TensorView offsets(const_cast<std::int64_t*>(groups), DType::kInt64, {2});
  PhaseTimer quantize(this, &times_.dispatch, std::nullopt);
  const TensorView share_x1(ws + at.share_x1_token, DType::kInt8, {tokens, hidden});
  const TensorView share_x1_scale(ws + at.share_x1_scale, DType::kFP32, {tokens});
  HP_RETURN_IF_ERROR(hp::kernels::quantize(*table_, x, share_x1, share_x1_scale, smooth1()));
  quantize.stop();
  PhaseTimer gmm1(this, &times_.gmm1, std::nullopt);
  std::uint8_t* h = ws + at.share_swiglu;
  auto* h_scale = reinterpret_cast<float*>(h + ((tokens * si + 63) & ~std::int64_t(63)));
  HP_RETURN_IF_ERROR(run_gemm({.a = share_x1,
                               .a_scale = share_x1_scale,
                               .offsets = offsets,
                               .weights = shared_w1_.header(),
                               .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
                               .out = TensorView(h, DType::kInt8, {tokens, si}),
                               .out_scale = TensorView(h_scale, DType::kFP32, {tokens}),
                               .smooth = shared_smooth2()}));
  gmm1.stop();
  const PhaseTimer gmm2(this, &times_.gmm2, std::nullopt);
  std::memcpy(ws + at.share_x2_token, h, std::size_t(tokens * si));
  std::memcpy(ws + at.share_x2_scale, h_scale, std::size_t(tokens) * sizeof(float));
  shared_out_.resize(std::size_t(tokens * hidden));
  // The shared expert's weight is 1: the plain dequant epilogue.
  HP_RETURN_IF_ERROR(
      run_gemm({.a = TensorView(ws + at.share_x2_token, DType::kInt8, {tokens, si}),
                .a_scale = TensorView(ws + at.share_x2_scale, DType::kFP32, {tokens}),
                .offsets = offsets,
                .weights = shared_w2_.header(),
                .epilogue = hp::kernels::Epilogue::kDequant,
                .out = TensorView(shared_out_.data(), DType::kFP32, {tokens, hidden})}));
  return Status::ok();
}

}  // namespace hp::moe
