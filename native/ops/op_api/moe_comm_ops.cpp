// The communication ops of the C op ABI: the buffer, dispatch_layout, notify_dispatch,
// moe_dispatch_normal and moe_combine_normal, over hp::moe::Buffer.
#include <cstdint>
#include <memory>

#include "moe/layout.h"
#include "op_executor.h"

using hp::DType;
using hp::ErrorCode;
using hp::Status;
using hp::TensorView;
using hp::ops::check_buffer;
using hp::ops::make_executor;
using hp::ops::report;
using hp::ops::run_executor;
using hp::ops::store_int64;
using hp::ops::view;

extern "C" {

const char* hpGetLastErrorMessage(void) { return hp::ops::last_error(); }

hpStatus hpMoeBufferCreate(const hpMoeBufferConfig* config, hpMoeBuffer** buffer) {
  if (config == nullptr || buffer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "hpMoeBufferCreate: config and buffer must not be NULL"));
  }
  auto b = std::make_unique<hpMoeBuffer>();
  const hp::moe::BufferConfig c{.hidden = config->hidden,
                                .max_tokens_per_rank = config->max_tokens_per_rank,
                                .num_experts = config->num_experts,
                                .topk = config->topk,
                                .max_element_bytes = config->max_element_bytes,
                                .combine_element_bytes = config->combine_element_bytes,
                                .comm = hp::moe::CommKind(config->comm),
                                .low_latency = config->low_latency != 0,
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
hpStatus hpDispatchLayoutGetWorkspaceSize(const hpTensor* topkIdx, int64_t numExperts,
                                          int64_t numRanks, const hpTensor* tokensPerRank,
                                          const hpTensor* tokensPerExpert,
                                          const hpTensor* isTokenInRank, uint64_t* workspaceSize,
                                          hpOpExecutor** executor) {
  const TensorView idx = view(topkIdx), per_rank = view(tokensPerRank),
                   per_expert = view(tokensPerExpert), in_rank = view(isTokenInRank);
  const Status checks = [&]() -> Status {
    HP_RETURN_IF_ERROR(idx.expect_shape("topkIdx", {-1, -1}));
    HP_ENSURE(numRanks >= 1 && numRanks <= (1 << 20), ErrorCode::kInvalidArgument,
              "numRanks = {}: expected >= 1", numRanks);
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
            static_cast<std::uint8_t*>(
                in_rank.data())[t * in_rank.stride(0) + r * in_rank.stride(1)] =
                layout.is_token_in_rank[std::size_t(t * numRanks + r)];
          }
        }
        return Status::ok();
      },
      workspaceSize, executor);
}

hpStatus hpDispatchLayout(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

// ---- notify_dispatch (collective) ----------------------------------------------------------
hpStatus hpNotifyDispatchGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* x,
                                          const hpTensor* topkIdx, const hpTensor* topkWeights,
                                          const hpTensor* xActiveMask, int32_t quant,
                                          int64_t expertAlignment,
                                          const hpTensor* recvTokensPerExpert,
                                          const hpTensor* recvExpertOffsets,
                                          uint64_t* workspaceSize, hpOpExecutor** executor) {
  const hp::moe::DispatchArgs args =
      hp::ops::dispatch_args(x, topkIdx, topkWeights, xActiveMask, quant, expertAlignment);
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
        HP_RETURN_IF_ERROR(
            store_int64(per_expert, "recvTokensPerExpert", buffer->handle.tokens_per_expert));
        return store_int64(offsets, "recvExpertOffsets", buffer->handle.expert_offsets);
      },
      workspaceSize, executor);
}

hpStatus hpNotifyDispatch(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

// ---- moe_dispatch_normal (collective) ------------------------------------------------------
hpStatus hpMoeDispatchNormalGetWorkspaceSize(
    hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx, const hpTensor* topkWeights,
    const hpTensor* xActiveMask, int32_t quant, int64_t expertAlignment, const hpTensor* recvX,
    const hpTensor* recvXScale, const hpTensor* recvTopkWeights, const hpTensor* recvSrcInfo,
    uint64_t* workspaceSize, hpOpExecutor** executor) {
  const hp::moe::DispatchArgs args =
      hp::ops::dispatch_args(x, topkIdx, topkWeights, xActiveMask, quant, expertAlignment);
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
        HP_RETURN_IF_ERROR(buffer->buffer->dispatch_data(
            args, &h, src_ok.is_ok() ? outputs : hp::moe::DispatchOutputs{}));
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

hpStatus hpMoeDispatchNormal(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

// ---- moe_combine_normal (collective) -------------------------------------------------------
hpStatus hpMoeCombineNormalGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* expertOut,
                                            const hpTensor* weights, const hpTensor* y,
                                            uint64_t* workspaceSize, hpOpExecutor** executor) {
  const TensorView out = view(expertOut), w = view(weights), result = view(y);
  const bool weighted = weights != nullptr;
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        return buffer->buffer->combine(out, buffer->handle, result, w, weighted);
      },
      workspaceSize, executor);
}

hpStatus hpMoeCombineNormal(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

}  // extern "C"
