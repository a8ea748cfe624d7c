#include "moe/moe_layer.h"

#include <chrono>

#include "kernels/ops.h"
#include "kernels/targets.h"

namespace hp::moe {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status MoeLayer::create(const MoeLayerConfig& config, const ExpertWeights& weights, std::unique_ptr<MoeLayer>* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "MoeLayer::create: out is null");
  std::unique_ptr<MoeLayer> layer(new MoeLayer());
  layer->config_ = config;
  // The weights are checked before the collective buffer is made, and their verdict is shared
  // through it: a rank with bad weights passes an impossible hidden size, so every rank fails.
  const Status packed = [&]() -> Status {
    HP_RETURN_IF_ERROR(hp::kernels::selected_target(&layer->table_));
    HP_ENSURE(config.intermediate >= 1, ErrorCode::kInvalidArgument, "MoeLayerConfig intermediate = {}: expected >= 1",
              config.intermediate);
    HP_ENSURE(hp::shmem::initialized() && config.num_experts % std::max(1, hp::shmem::n_pes()) == 0,
              ErrorCode::kInvalidArgument, "MoeLayerConfig num_experts = {}: expected a multiple of the ranks",
              config.num_experts);
    const std::int64_t local = config.num_experts / hp::shmem::n_pes();
    HP_RETURN_IF_ERROR(weights.w1.expect_shape("w1", {local, config.hidden, 2 * config.intermediate}));
    HP_RETURN_IF_ERROR(weights.w2.expect_shape("w2", {local, config.intermediate, config.hidden}));
    HP_RETURN_IF_ERROR(weights.w1_scale.expect_shape("w1_scale", {local, 2 * config.intermediate}));
    HP_RETURN_IF_ERROR(weights.w2_scale.expect_shape("w2_scale", {local, config.hidden}));
    HP_RETURN_IF_ERROR(hp::kernels::pack_weights(weights.w1, weights.w1_scale,
                                                 {.layout = hp::kernels::PackLayout::kSwigluHalves}, &layer->w1_));
    return hp::kernels::pack_weights(weights.w2, weights.w2_scale, {}, &layer->w2_);
  }();
  const Status made = Buffer::create({.hidden = packed.is_ok() ? config.hidden : -1,
                                      .max_tokens_per_rank = config.max_tokens_per_rank,
                                      .num_experts = config.num_experts,
                                      .topk = config.topk,
                                      .max_element_bytes = 1,
                                      .combine_element_bytes = 4,
                                      .comm = config.comm,
                                      .chip = config.chip},
                                     &layer->buffer_);
  HP_RETURN_IF_ERROR(packed);
  HP_RETURN_IF_ERROR(made);
  *out = std::move(layer);
  return Status::ok();
}

MoeLayer::~MoeLayer() { (void)destroy(); }

Status MoeLayer::destroy() {
  if (buffer_ == nullptr) return Status::ok();
  const Status s = buffer_->destroy();
  buffer_.reset();
  return s;
}

Status MoeLayer::run_gemm(const hp::kernels::GroupedGemmProblem& problem) {
  hp::platform::Chip* chip = config_.chip;
  const int workers = chip == nullptr ? 1 : chip->num_cube();
  hp::kernels::GroupedGemmPlan plan;
  HP_RETURN_IF_ERROR(hp::kernels::plan_grouped_gemm(*table_, problem, workers, &plan));
  workspaces_.resize(std::size_t(workers));
  for (auto& w : workspaces_) w.resize(plan.workspace_bytes() + 64);
  auto aligned = [](std::vector<std::uint8_t>& w) {
    return reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(w.data()) + 63) & ~std::uintptr_t(63));
  };
  if (chip == nullptr) {
    plan.run(0, aligned(workspaces_[0]));
    return Status::ok();
  }
  return chip->launch({.mode = hp::platform::LaunchMode::kCube, .block_dim = workers},
                      [&](hp::platform::BlockContext& block) {
                        plan.run(block.block_idx(), aligned(workspaces_[std::size_t(block.block_idx())]));
                        return Status::ok();
                      });
}

Status MoeLayer::forward(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                         const TensorView& y, const TensorView& x_active_mask) {
  HP_ENSURE(buffer_ != nullptr, ErrorCode::kFailedPrecondition, "MoeLayer::forward: the layer was destroyed");
  const std::int64_t inter = config_.intermediate, hidden = config_.hidden;
  auto start = std::chrono::steady_clock::now();
  // Inputs are checked by the dispatch (collectively: a bad input fails every rank).
  HP_RETURN_IF_ERROR(buffer_->dispatch({.x = x,
                                        .topk_idx = topk_idx,
                                        .topk_weights = topk_weights,
                                        .x_active_mask = x_active_mask,
                                        .quant = Quant::kDynamicInt8},
                                       &dispatched_));
  times_.dispatch = seconds_since(start);
  DispatchResult& r = dispatched_;
  const std::int64_t rows = r.rows, local = std::int64_t(r.expert_offsets.size()) - 1;
  rows_ = rows;
  h_.resize(std::size_t(rows * inter));
  h_scale_.resize(std::size_t(rows));
  out_.resize(std::size_t(rows * hidden));
  const TensorView offsets(r.expert_offsets.data(), DType::kInt64, {local + 1});
  start = std::chrono::steady_clock::now();
  HP_RETURN_IF_ERROR(run_gemm({.a = r.x(),
                               .a_scale = TensorView(r.x_scale.data(), DType::kFP32, {rows}),
                               .offsets = offsets,
                               .weights = w1_.header(),
                               .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
                               .out = TensorView(h_.data(), DType::kInt8, {rows, inter}),
                               .out_scale = TensorView(h_scale_.data(), DType::kFP32, {rows})}));
  times_.gmm1 = seconds_since(start);
  start = std::chrono::steady_clock::now();
  HP_RETURN_IF_ERROR(run_gemm({.a = TensorView(h_.data(), DType::kInt8, {rows, inter}),
                               .a_scale = TensorView(h_scale_.data(), DType::kFP32, {rows}),
                               .offsets = offsets,
                               .weights = w2_.header(),
                               .epilogue = hp::kernels::Epilogue::kDequantScale,
                               .out = TensorView(out_.data(), DType::kFP32, {rows, hidden}),
                               .row_factor = TensorView(r.topk_weights.data(), DType::kFP32, {rows})}));
  times_.gmm2 = seconds_since(start);
  start = std::chrono::steady_clock::now();
  // The top-k weights were applied by GMM2's epilogue: combine sums plainly.
  HP_RETURN_IF_ERROR(buffer_->combine(TensorView(out_.data(), DType::kFP32, {rows, hidden}), r.handle, y, {},
                                      /*weighted=*/false));
  times_.combine = seconds_since(start);
  return Status::ok();
}

}  // namespace hp::moe
