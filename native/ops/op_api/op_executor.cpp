#include "op_executor.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>

namespace hp::ops {
namespace {

thread_local std::string g_last_error;

const char* variant_create(LayerVariant v) {
  switch (v) {
    case LayerVariant::kW4A8:
      return "hpHyperMegaMoeW4A8CreateWithWeights";
    case LayerVariant::kShmem:
      return "hpHyperMegaMoeShmemCreateWithWeights";
    case LayerVariant::kBase:
      break;
  }
  return "hpHyperMegaMoeCreate";
}

const char* variant_op(LayerVariant v) {
  switch (v) {
    case LayerVariant::kW4A8:
      return "hpHyperMegaMoeW4A8";
    case LayerVariant::kShmem:
      return "hpHyperMegaMoeShmem";
    case LayerVariant::kBase:
      break;
  }
  return "hpHyperMegaMoe";
}

}  // namespace

hpStatus report(const Status& s) {
  if (s.is_ok()) return HP_STATUS_OK;
  g_last_error = s.to_string();
  return hpStatus(s.code());
}

const char* last_error() { return g_last_error.c_str(); }

TensorView view(const hpTensor* t) {
  if (t == nullptr) return {};
  const int ndim = std::clamp(t->ndim, 0, HP_TENSOR_MAX_DIMS + 1);  // > 8: the view rejects it
  return TensorView(t->data, DType(std::uint8_t(t->dtype)),
                    std::span<const std::int64_t>(t->shape, std::size_t(ndim)),
                    std::span<const std::int64_t>(t->strides, std::size_t(ndim)));
}

hpStatus make_executor(std::function<Status()> run, uint64_t* workspace_size,
                       hpOpExecutor** executor) {
  if (workspace_size == nullptr || executor == nullptr) {
    return report(
        Status::error(ErrorCode::kInvalidArgument, "workspaceSize and executor must not be NULL"));
  }
  *workspace_size = 0;
  *executor = new hpOpExecutor{[run = std::move(run)](void*, uint64_t) { return run(); }};
  return HP_STATUS_OK;
}

hpStatus run_executor(hpOpExecutor* executor, void* workspace, uint64_t workspace_bytes) {
  if (executor == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "executor is NULL: call the op's GetWorkspaceSize first"));
  }
  std::unique_ptr<hpOpExecutor> owned(executor);
  return report(owned->run(workspace, workspace_bytes));
}

Status check_buffer(const hpMoeBuffer* buffer) {
  HP_ENSURE(buffer != nullptr && buffer->buffer != nullptr, ErrorCode::kInvalidArgument,
            "buffer is NULL or destroyed: create one with hpMoeBufferCreate");
  return Status::ok();
}

hp::moe::DispatchArgs dispatch_args(const hpTensor* x, const hpTensor* topk_idx,
                                    const hpTensor* topk_weights, const hpTensor* mask,
                                    int32_t quant, int64_t alignment) {
  return {.x = view(x),
          .topk_idx = view(topk_idx),
          .topk_weights = view(topk_weights),
          .x_active_mask = view(mask),
          .quant = hp::moe::Quant(quant),
          .expert_alignment = alignment};
}

Status store_int64(const TensorView& out, const char* what,
                   const std::vector<std::int64_t>& values) {
  HP_RETURN_IF_ERROR(out.expect_shape(what, {std::int64_t(values.size())}));
  HP_RETURN_IF_ERROR(out.expect_dtype(what, DType::kInt64));
  for (std::size_t i = 0; i < values.size(); ++i) {
    static_cast<std::int64_t*>(out.data())[std::int64_t(i) * out.stride(0)] = values[i];
  }
  return Status::ok();
}

Status check_layer(const hpHyperMegaMoeLayer* layer, LayerVariant variant, const char* op) {
  HP_ENSURE(layer != nullptr && layer->layer != nullptr, ErrorCode::kInvalidArgument,
            "{}: layer is NULL or destroyed: create one with {}", op, variant_create(variant));
  HP_ENSURE(layer->variant == variant, ErrorCode::kFailedPrecondition,
            "{}: the layer was made by {}: run it with {}", op, variant_create(layer->variant),
            variant_op(layer->variant));
  return Status::ok();
}

hpStatus layer_forward_executor(hpHyperMegaMoeLayer* layer, LayerVariant variant, const char* op,
                                const hpTensor* x, const hpTensor* topk_idx,
                                const hpTensor* topk_weights, const hpTensor* x_active_mask,
                                const hpTensor* y, uint64_t* workspace_size,
                                hpOpExecutor** executor) {
  if (const Status ok = check_layer(layer, variant, op); !ok.is_ok()) return report(ok);
  if (workspace_size == nullptr || executor == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "{}: workspaceSize and executor must not be NULL", op));
  }
  const TensorView xv = view(x), iv = view(topk_idx), wv = view(topk_weights),
                   mv = view(x_active_mask), yv = view(y);
  hp::moe::MoeLayer* l = layer->layer.get();
  *workspace_size = l->workspace_bytes();  // the layer's workspace plan
  *executor = new hpOpExecutor{[=](void* workspace, uint64_t bytes) {
    return l->forward(xv, iv, wv, yv, workspace, bytes, mv);
  }};
  return HP_STATUS_OK;
}

hpStatus create_layer(const hpHyperMegaMoeConfig* config, const hpHyperMegaMoeWeights* weights,
                      LayerVariant variant, hpHyperMegaMoeLayer** layer) {
  if (config == nullptr || weights == nullptr || layer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "{}: config, weights and layer must not be NULL",
                                variant_create(variant)));
  }
  auto l = std::make_unique<hpHyperMegaMoeLayer>();
  l->variant = variant;
  // A bad backward mode or chip request is this rank's error, but create is collective: it goes
  // in as a config no rank can agree on (a hidden size of -1), so every rank fails.
  Status local_ok = Status::ok();
  const bool int8_grads = (config->backward & HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS) != 0;
  const std::int32_t backward = config->backward & ~HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS;
  if (backward < HP_MOE_BACKWARD_NONE || backward > HP_MOE_BACKWARD_KEEP_ACTIVATIONS ||
      (int8_grads && backward == HP_MOE_BACKWARD_NONE)) {
    local_ok = Status::error(
        ErrorCode::kInvalidArgument,
        "{}: config backward = {}: expected HP_MOE_BACKWARD_NONE (0), "
        "HP_MOE_BACKWARD_RECOMPUTE (1) or HP_MOE_BACKWARD_KEEP_ACTIVATIONS (2), the last two "
        "optionally | HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS (4)",
        variant_create(variant), config->backward);
  } else if (config->cube_cores > 0 || config->vector_cores > 0) {
    local_ok = hp::platform::Chip::create(
        {.num_cube = config->cube_cores, .num_vector = config->vector_cores}, &l->chip);
  }
  hp::moe::ExpertWeights w{.w1 = view(weights->w1),
                           .w1_scale = view(weights->w1Scale),
                           .w2 = view(weights->w2),
                           .w2_scale = view(weights->w2Scale),
                           .shared_w1 = view(weights->sharedW1),
                           .shared_w1_scale = view(weights->sharedW1Scale),
                           .shared_w2 = view(weights->sharedW2),
                           .shared_w2_scale = view(weights->sharedW2Scale),
                           .smooth1 = view(weights->smooth1),
                           .smooth2 = view(weights->smooth2),
                           .shared_smooth2 = view(weights->sharedSmooth2)};
  for (std::int64_t e = 0; e < weights->numListed; ++e) {
    for (auto [list, out] :
         {std::pair{weights->w1List, &w.w1_list}, std::pair{weights->w1ScaleList, &w.w1_scale_list},
          std::pair{weights->w2List, &w.w2_list},
          std::pair{weights->w2ScaleList, &w.w2_scale_list}}) {
      out->push_back(list == nullptr ? TensorView() : view(&list[e]));
    }
  }
  const hpStatus s = report(hp::moe::MoeLayer::create(
      {.hidden = local_ok.is_ok() ? config->hidden : -1,
       .intermediate = config->intermediate,
       .num_experts = config->num_experts,
       .topk = config->topk,
       .max_tokens_per_rank = config->max_tokens_per_rank,
       .shared_intermediate = config->shared_intermediate,
       .comm = variant == LayerVariant::kShmem ? hp::moe::CommKind::kShmem
                                               : hp::moe::CommKind(config->comm),
       .chip = l->chip.get(),
       .backward = backward != HP_MOE_BACKWARD_NONE,
       .keep_activations = backward == HP_MOE_BACKWARD_KEEP_ACTIVATIONS,
       .int8_activation_grads = int8_grads,
       .path = hp::moe::LayerPath(config->path),
       .capacity_factor = config->capacity_factor,
       .grow_on_overflow = config->no_growth == 0,
       .weights = variant == LayerVariant::kW4A8 ? hp::kernels::WeightType::kInt4
                                                 : hp::kernels::WeightType::kInt8},
      w, &l->layer));
  if (!local_ok.is_ok()) return report(local_ok);
  if (s == HP_STATUS_OK) *layer = l.release();
  return s;
}

}  // namespace hp::ops
