// The C op ABI of the MoE communication ops (hyper_parallel_moe_op_api.h) over hp::moe.
// The library is built with hidden visibility: the ABI's declarations are exported.
#pragma GCC visibility push(default)
#include "hyper_parallel_moe_op_api.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/tensor_view.h"
#include "moe/buffer.h"
#include "moe/layout.h"
#include "moe/moe_layer.h"

// A buffer and the handle of its last notify/dispatch (what the next dispatch/combine continue).
struct hpMoeBuffer {
  std::unique_ptr<hp::moe::Buffer> buffer;
  hp::moe::Handle handle;
};

struct hpHyperMegaMoeLayer {
  std::unique_ptr<hp::platform::Chip> chip;  // the config's cores (outlives the layer)
  std::unique_ptr<hp::moe::MoeLayer> layer;
};

// What an op runs, given the caller's workspace.
struct hpOpExecutor {
  std::function<hp::Status(void* workspace, uint64_t workspace_bytes)> run;
};

namespace {

using hp::DType;
using hp::ErrorCode;
using hp::Status;
using hp::TensorView;

thread_local std::string g_last_error;

hpStatus report(const Status& s) {
  if (s.is_ok()) return HP_STATUS_OK;
  g_last_error = s.to_string();
  return hpStatus(s.code());
}

// An hpTensor as a view (null: an empty view). Not validated here: the op's checks name it.
TensorView view(const hpTensor* t) {
  if (t == nullptr) return {};
  const int ndim = std::clamp(t->ndim, 0, HP_TENSOR_MAX_DIMS + 1);  // > 8: the view rejects it
  return TensorView(t->data, DType(std::uint8_t(t->dtype)), std::span<const std::int64_t>(t->shape, std::size_t(ndim)),
                    std::span<const std::int64_t>(t->strides, std::size_t(ndim)));
}

// An executor of an op without workspace (the communication ops work in the buffer's own
// symmetric memory): size 0.
hpStatus make_executor(std::function<Status()> run, uint64_t* workspace_size, hpOpExecutor** executor) {
  if (workspace_size == nullptr || executor == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "workspaceSize and executor must not be NULL"));
  }
  *workspace_size = 0;
  *executor = new hpOpExecutor{[run = std::move(run)](void*, uint64_t) { return run(); }};
  return HP_STATUS_OK;
}

hpStatus run_executor(hpOpExecutor* executor, void* workspace = nullptr, uint64_t workspace_bytes = 0) {
  if (executor == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "executor is NULL: call the op's GetWorkspaceSize first"));
  }
  std::unique_ptr<hpOpExecutor> owned(executor);
  return report(owned->run(workspace, workspace_bytes));
}

Status check_buffer(const hpMoeBuffer* buffer) {
  HP_ENSURE(buffer != nullptr && buffer->buffer != nullptr, ErrorCode::kInvalidArgument,
            "buffer is NULL or destroyed: create one with hpMoeBufferCreate");
  return Status::ok();
}

hp::moe::DispatchArgs dispatch_args(const hpTensor* x, const hpTensor* topk_idx, const hpTensor* topk_weights,
                                    const hpTensor* mask, int32_t quant, int64_t alignment) {
  return {.x = view(x),
          .topk_idx = view(topk_idx),
          .topk_weights = view(topk_weights),
          .x_active_mask = view(mask),
          .quant = hp::moe::Quant(quant),
          .expert_alignment = alignment};
}

// Copies n int64 values into an int64 [n] output.
Status store_int64(const TensorView& out, const char* what, const std::vector<std::int64_t>& values) {
  HP_RETURN_IF_ERROR(out.expect_shape(what, {std::int64_t(values.size())}));
  HP_RETURN_IF_ERROR(out.expect_dtype(what, DType::kInt64));
  for (std::size_t i = 0; i < values.size(); ++i) {
    static_cast<std::int64_t*>(out.data())[std::int64_t(i) * out.stride(0)] = values[i];
  }
  return Status::ok();
}

}  // namespace

extern "C" {

const char* hpGetLastErrorMessage(void) { return g_last_error.c_str(); }

hpStatus hpMoeBufferCreate(const hpMoeBufferConfig* config, hpMoeBuffer** buffer) {
  if (config == nullptr || buffer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "hpMoeBufferCreate: config and buffer must not be NULL"));
  }
  auto b = std::make_unique<hpMoeBuffer>();
  const hp::moe::BufferConfig c{.hidden = config->hidden,
                                .max_tokens_per_rank = config->max_tokens_per_rank,
                                .num_experts = config->num_experts,
                                .topk = config->topk,
                                .max_element_bytes = config->max_element_bytes,
                                .combine_element_bytes = config->combine_element_bytes,
                                .comm = hp::moe::CommKind(config->comm),
                                .capacity_factor = config->capacity_factor,
                                .grow_on_overflow = config->grow_on_overflow != 0};
  const hpStatus s = report(hp::moe::Buffer::create(c, &b->buffer));
  if (s == HP_STATUS_OK) *buffer = b.release();
  return s;
}

hpStatus hpMoeBufferDestroy(hpMoeBuffer* buffer) {
  if (buffer == nullptr) return HP_STATUS_OK;
  std::unique_ptr<hpMoeBuffer> owned(buffer);
  return owned->buffer ? report(owned->buffer->destroy()) : HP_STATUS_OK;
}

void hpOpExecutorDestroy(hpOpExecutor* executor) { delete executor; }

// ---- dispatch_layout (local) ---------------------------------------------------------------
hpStatus hpDispatchLayoutGetWorkspaceSize(const hpTensor* topkIdx, int64_t numExperts, int64_t numRanks,
                                          const hpTensor* tokensPerRank, const hpTensor* tokensPerExpert,
                                          const hpTensor* isTokenInRank, uint64_t* workspaceSize,
                                          hpOpExecutor** executor) {
  const TensorView idx = view(topkIdx), per_rank = view(tokensPerRank), per_expert = view(tokensPerExpert),
                   in_rank = view(isTokenInRank);
  const Status checks = [&]() -> Status {
    HP_RETURN_IF_ERROR(idx.expect_shape("topkIdx", {-1, -1}));
    HP_ENSURE(numRanks >= 1 && numRanks <= (1 << 20), ErrorCode::kInvalidArgument, "numRanks = {}: expected >= 1",
              numRanks);
    HP_RETURN_IF_ERROR(per_rank.expect_shape("tokensPerRank", {numRanks}));
    HP_RETURN_IF_ERROR(per_rank.expect_dtype("tokensPerRank", DType::kInt64));
    HP_RETURN_IF_ERROR(per_expert.expect_shape("tokensPerExpert", {numExperts}));
    HP_RETURN_IF_ERROR(per_expert.expect_dtype("tokensPerExpert", DType::kInt64));
    HP_RETURN_IF_ERROR(in_rank.expect_shape("isTokenInRank", {idx.dim(0), numRanks}));
    return in_rank.expect_dtype("isTokenInRank", DType::kUInt8);
  }();
  if (!checks.is_ok()) return report(checks);
  return make_executor(
      [=]() -> Status {
        hp::moe::DispatchLayout layout;
        HP_RETURN_IF_ERROR(hp::moe::dispatch_layout(idx, numExperts, int(numRanks), &layout));
        HP_RETURN_IF_ERROR(store_int64(per_rank, "tokensPerRank", layout.tokens_per_rank));
        HP_RETURN_IF_ERROR(store_int64(per_expert, "tokensPerExpert", layout.tokens_per_expert));
        for (std::int64_t t = 0; t < layout.num_tokens; ++t) {
          for (std::int64_t r = 0; r < numRanks; ++r) {
            static_cast<std::uint8_t*>(in_rank.data())[t * in_rank.stride(0) + r * in_rank.stride(1)] =
                layout.is_token_in_rank[std::size_t(t * numRanks + r)];
          }
        }
        return Status::ok();
      },
      workspaceSize, executor);
}

hpStatus hpDispatchLayout(void*, uint64_t, hpOpExecutor* executor) { return run_executor(executor); }

// ---- notify_dispatch (collective) ----------------------------------------------------------
hpStatus hpNotifyDispatchGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx,
                                          const hpTensor* topkWeights, const hpTensor* xActiveMask, int32_t quant,
                                          int64_t expertAlignment, const hpTensor* recvTokensPerExpert,
                                          const hpTensor* recvExpertOffsets, uint64_t* workspaceSize,
                                          hpOpExecutor** executor) {
  const hp::moe::DispatchArgs args = dispatch_args(x, topkIdx, topkWeights, xActiveMask, quant, expertAlignment);
  const TensorView per_expert = view(recvTokensPerExpert), offsets = view(recvExpertOffsets);
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        const std::int64_t local = buffer->buffer->local_experts();
        // The outputs are checked before the exchange: a bad one fails every rank alike.
        const Status outputs = [&]() -> Status {
          HP_RETURN_IF_ERROR(per_expert.expect_shape("recvTokensPerExpert", {local}));
          HP_RETURN_IF_ERROR(per_expert.expect_dtype("recvTokensPerExpert", DType::kInt64));
          HP_RETURN_IF_ERROR(offsets.expect_shape("recvExpertOffsets", {local + 1}));
          return offsets.expect_dtype("recvExpertOffsets", DType::kInt64);
        }();
        HP_RETURN_IF_ERROR(buffer->buffer->notify_dispatch(args, &buffer->handle, outputs));
        HP_RETURN_IF_ERROR(store_int64(per_expert, "recvTokensPerExpert", buffer->handle.tokens_per_expert));
        return store_int64(offsets, "recvExpertOffsets", buffer->handle.expert_offsets);
      },
      workspaceSize, executor);
}

hpStatus hpNotifyDispatch(void*, uint64_t, hpOpExecutor* executor) { return run_executor(executor); }

// ---- moe_dispatch_normal (collective) ------------------------------------------------------
hpStatus hpMoeDispatchNormalGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx,
                                             const hpTensor* topkWeights, const hpTensor* xActiveMask,
                                             int32_t quant, int64_t expertAlignment, const hpTensor* recvX,
                                             const hpTensor* recvXScale, const hpTensor* recvTopkWeights,
                                             const hpTensor* recvSrcInfo, uint64_t* workspaceSize,
                                             hpOpExecutor** executor) {
  const hp::moe::DispatchArgs args = dispatch_args(x, topkIdx, topkWeights, xActiveMask, quant, expertAlignment);
  const hp::moe::DispatchOutputs outputs{
      .x = view(recvX), .x_scale = view(recvXScale), .topk_weights = view(recvTopkWeights)};
  const TensorView src_info = view(recvSrcInfo);
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        hp::moe::Handle& h = buffer->handle;
        const Status src_ok = [&]() -> Status {
          if (recvSrcInfo == nullptr) return Status::ok();
          HP_RETURN_IF_ERROR(src_info.expect_shape("recvSrcInfo", {h.rows, 2}));
          return src_info.expect_dtype("recvSrcInfo", DType::kInt32);
        }();
        // A bad recvSrcInfo still sends this rank's tokens (the others wait for them); the
        // rows are then not written.
        HP_RETURN_IF_ERROR(buffer->buffer->dispatch_data(args, &h, src_ok.is_ok() ? outputs : hp::moe::DispatchOutputs{}));
        if (!src_ok.is_ok()) return src_ok;
        if (recvSrcInfo != nullptr) {
          auto* info = static_cast<std::int32_t*>(src_info.data());
          for (std::int64_t r = 0; r < h.rows; ++r) {
            info[r * src_info.stride(0)] = h.row_src_rank[std::size_t(r)];
            info[r * src_info.stride(0) + src_info.stride(1)] = h.row_src_token[std::size_t(r)];
          }
        }
        return Status::ok();
      },
      workspaceSize, executor);
}

hpStatus hpMoeDispatchNormal(void*, uint64_t, hpOpExecutor* executor) { return run_executor(executor); }

// ---- moe_combine_normal (collective) -------------------------------------------------------
hpStatus hpMoeCombineNormalGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* expertOut, const hpTensor* weights,
                                            const hpTensor* y, uint64_t* workspaceSize, hpOpExecutor** executor) {
  const TensorView out = view(expertOut), w = view(weights), result = view(y);
  const bool weighted = weights != nullptr;
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        return buffer->buffer->combine(out, buffer->handle, result, w, weighted);
      },
      workspaceSize, executor);
}

hpStatus hpMoeCombineNormal(void*, uint64_t, hpOpExecutor* executor) { return run_executor(executor); }

// ---- HyperMegaMoe (collective) ----------------------------------------------------------------
hpStatus hpHyperMegaMoeCreate(const hpHyperMegaMoeConfig* config, const hpTensor* w1, const hpTensor* w1Scale,
                              const hpTensor* w2, const hpTensor* w2Scale, const hpTensor* sharedW1,
                              const hpTensor* sharedW1Scale, const hpTensor* sharedW2, const hpTensor* sharedW2Scale,
                              hpHyperMegaMoeLayer** layer) {
  const hpHyperMegaMoeWeights weights{.w1 = w1, .w1Scale = w1Scale, .w2 = w2, .w2Scale = w2Scale,
                                      .sharedW1 = sharedW1, .sharedW1Scale = sharedW1Scale, .sharedW2 = sharedW2,
                                      .sharedW2Scale = sharedW2Scale};
  return hpHyperMegaMoeCreateWithWeights(config, &weights, layer);
}

hpStatus hpHyperMegaMoeCreateWithWeights(const hpHyperMegaMoeConfig* config, const hpHyperMegaMoeWeights* weights,
                                         hpHyperMegaMoeLayer** layer) {
  if (config == nullptr || weights == nullptr || layer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "hpHyperMegaMoeCreate: config, weights and layer must not be NULL"));
  }
  auto l = std::make_unique<hpHyperMegaMoeLayer>();
  // A bad chip request is this rank's error, but create is collective: it goes in as a config
  // no rank can agree on (a hidden size of -1), so every rank fails.
  Status chip_made = Status::ok();
  if (config->cube_cores > 0 || config->vector_cores > 0) {
    chip_made = hp::platform::Chip::create({.num_cube = config->cube_cores, .num_vector = config->vector_cores}, &l->chip);
  }
  hp::moe::ExpertWeights w{.w1 = view(weights->w1), .w1_scale = view(weights->w1Scale), .w2 = view(weights->w2),
                           .w2_scale = view(weights->w2Scale), .shared_w1 = view(weights->sharedW1),
                           .shared_w1_scale = view(weights->sharedW1Scale), .shared_w2 = view(weights->sharedW2),
                           .shared_w2_scale = view(weights->sharedW2Scale), .smooth1 = view(weights->smooth1),
                           .smooth2 = view(weights->smooth2), .shared_smooth2 = view(weights->sharedSmooth2)};
  for (std::int64_t e = 0; e < weights->numListed; ++e) {
    for (auto [list, out] : {std::pair{weights->w1List, &w.w1_list}, std::pair{weights->w1ScaleList, &w.w1_scale_list},
                             std::pair{weights->w2List, &w.w2_list}, std::pair{weights->w2ScaleList, &w.w2_scale_list}}) {
      out->push_back(list == nullptr ? TensorView() : view(&list[e]));
    }
  }
  const hpStatus s = report(hp::moe::MoeLayer::create(
      {.hidden = chip_made.is_ok() ? config->hidden : -1,
       .intermediate = config->intermediate,
       .num_experts = config->num_experts,
       .topk = config->topk,
       .max_tokens_per_rank = config->max_tokens_per_rank,
       .shared_intermediate = config->shared_intermediate,
       .comm = hp::moe::CommKind(config->comm),
       .chip = l->chip.get(),
       .backward = config->backward != 0,
       .path = hp::moe::LayerPath(config->path),
       .capacity_factor = config->capacity_factor,
       .grow_on_overflow = config->no_growth == 0},
      w, &l->layer));
  if (!chip_made.is_ok()) return report(chip_made);
  if (s == HP_STATUS_OK) *layer = l.release();
  return s;
}

hpStatus hpHyperMegaMoeDestroy(hpHyperMegaMoeLayer* layer) {
  if (layer == nullptr) return HP_STATUS_OK;
  std::unique_ptr<hpHyperMegaMoeLayer> owned(layer);
  return owned->layer ? report(owned->layer->destroy()) : HP_STATUS_OK;
}

hpStatus hpHyperMegaMoeGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x, const hpTensor* topkIdx,
                                        const hpTensor* topkWeights, const hpTensor* xActiveMask, const hpTensor* y,
                                        uint64_t* workspaceSize, hpOpExecutor** executor) {
  if (layer == nullptr || layer->layer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "layer is NULL or destroyed: create one with "
                                                             "hpHyperMegaMoeCreate"));
  }
  if (workspaceSize == nullptr || executor == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "workspaceSize and executor must not be NULL"));
  }
  const TensorView xv = view(x), iv = view(topkIdx), wv = view(topkWeights), mv = view(xActiveMask), yv = view(y);
  hp::moe::MoeLayer* l = layer->layer.get();
  *workspaceSize = l->workspace_bytes();  // the plan of seed 002 §6 for this layer
  *executor = new hpOpExecutor{[=](void* workspace, uint64_t bytes) {
    return l->forward(xv, iv, wv, yv, workspace, bytes, mv);
  }};
  return HP_STATUS_OK;
}

hpStatus hpHyperMegaMoe(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor) {
  return run_executor(executor, workspace, workspaceSize);
}

hpStatus hpHyperMegaMoeGradGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x, const hpTensor* topkIdx,
                                            const hpTensor* topkWeights, const hpTensor* xActiveMask,
                                            const hpTensor* dy, const hpTensor* dx, const hpTensor* dTopkWeights,
                                            const hpTensor* dw1, const hpTensor* dw2, const hpTensor* sharedDw1,
                                            const hpTensor* sharedDw2, uint64_t* workspaceSize,
                                            hpOpExecutor** executor) {
  if (layer == nullptr || layer->layer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument, "layer is NULL or destroyed: create one with "
                                                             "hpHyperMegaMoeCreate"));
  }
  const hp::moe::MoeGradArgs args{.x = view(x), .topk_idx = view(topkIdx), .topk_weights = view(topkWeights),
                                  .x_active_mask = view(xActiveMask), .dy = view(dy), .dx = view(dx),
                                  .d_topk_weights = view(dTopkWeights), .dw1 = view(dw1), .dw2 = view(dw2),
                                  .shared_dw1 = view(sharedDw1), .shared_dw2 = view(sharedDw2)};
  hp::moe::MoeLayer* l = layer->layer.get();
  return make_executor([=] { return l->backward(args); }, workspaceSize, executor);
}

hpStatus hpHyperMegaMoeGrad(void*, uint64_t, hpOpExecutor* executor) { return run_executor(executor); }

}  // extern "C"
