// The low-latency ops of the C op ABI: moe_dispatch_low_latency and moe_combine_low_latency,
// over hp::moe::Buffer's low-latency mode (a buffer created with low_latency = 1).
#include <cstdint>
#include <cstring>

#include "op_executor.h"

using hp::DType;
using hp::ErrorCode;
using hp::Status;
using hp::TensorView;
using hp::ops::check_buffer;
using hp::ops::make_executor;
using hp::ops::run_executor;
using hp::ops::view;

namespace {

// Copies the bytes of `values` into a contiguous output of `dtype` and `shape`.
template <typename T>
Status copy_out(const TensorView& out, const char* what, DType dtype,
                std::initializer_list<std::int64_t> shape, const std::vector<T>& values) {
  HP_RETURN_IF_ERROR(out.expect_shape(what, shape));
  HP_RETURN_IF_ERROR(out.expect_dtype(what, dtype));
  HP_ENSURE(out.is_contiguous(), ErrorCode::kInvalidArgument, "{} {}: expected a contiguous tensor",
            what, out.to_string());
  HP_ENSURE(std::size_t(out.numel()) * out.element_size() == values.size() * sizeof(T),
            ErrorCode::kInternal, "{}: {} bytes for {} elements", what, values.size() * sizeof(T),
            out.numel());
  if (!values.empty()) std::memcpy(out.data(), values.data(), values.size() * sizeof(T));
  return Status::ok();
}

}  // namespace

extern "C" {

hpStatus hpMoeDispatchLowLatencyGetWorkspaceSize(
    hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx, const hpTensor* topkWeights,
    const hpTensor* xActiveMask, int32_t quant, const hpTensor* recvX, const hpTensor* recvXScale,
    const hpTensor* recvCount, const hpTensor* layoutRange, const hpTensor* recvSrcInfo,
    uint64_t* workspaceSize, hpOpExecutor** executor) {
  const hp::moe::DispatchArgs args =
      hp::ops::dispatch_args(x, topkIdx, topkWeights, xActiveMask, quant, 1);
  const TensorView out_x = view(recvX), out_scale = view(recvXScale), out_count = view(recvCount),
                   out_range = view(layoutRange), out_src = view(recvSrcInfo);
  const bool has_scale = recvXScale != nullptr, has_range = layoutRange != nullptr,
             has_src = recvSrcInfo != nullptr;
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        hp::moe::LowLatencyResult& r = buffer->low_latency;
        // The collective runs whatever the outputs are (the other ranks wait for this one's
        // tokens); a bad output is then this rank's error.
        HP_RETURN_IF_ERROR(buffer->buffer->low_latency_dispatch(args, &r));
        const std::int64_t local = std::int64_t(r.tokens_per_expert.size()),
                           rows = r.rows_per_expert;
        HP_RETURN_IF_ERROR(copy_out(out_x, "recvX", r.x_dtype, {local, rows, r.hidden}, r.x_bytes));
        if (r.x_dtype == DType::kInt8) {
          HP_ENSURE(has_scale, ErrorCode::kInvalidArgument,
                    "recvXScale: required with a quantised dispatch");
          HP_RETURN_IF_ERROR(
              copy_out(out_scale, "recvXScale", DType::kFP32, {local, rows}, r.x_scale));
        } else {
          HP_ENSURE(!has_scale, ErrorCode::kInvalidArgument,
                    "recvXScale: given, but the dispatch is not quantised");
        }
        HP_RETURN_IF_ERROR(hp::ops::store_int64(out_count, "recvCount", r.tokens_per_expert));
        if (has_range) {
          HP_RETURN_IF_ERROR(copy_out(out_range, "layoutRange", DType::kInt64,
                                      {local, buffer->buffer->num_ranks(), 2}, r.layout_range));
        }
        if (has_src) {
          HP_RETURN_IF_ERROR(out_src.expect_shape("recvSrcInfo", {local, rows, 2}));
          HP_RETURN_IF_ERROR(out_src.expect_dtype("recvSrcInfo", DType::kInt32));
          auto* info = static_cast<std::int32_t*>(out_src.data());
          for (std::int64_t e = 0; e < local; ++e) {
            for (std::int64_t i = 0; i < rows; ++i) {
              const std::size_t k = std::size_t(e * rows + i);
              const std::int64_t at = e * out_src.stride(0) + i * out_src.stride(1);
              info[at] = r.handle.row_src_rank[k];
              info[at + out_src.stride(2)] = r.handle.row_src_token[k];
            }
          }
        }
        return Status::ok();
      },
      workspaceSize, executor);
}

hpStatus hpMoeDispatchLowLatency(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

hpStatus hpMoeCombineLowLatencyGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* expertOut,
                                                const hpTensor* topkWeights, const hpTensor* y,
                                                uint64_t* workspaceSize, hpOpExecutor** executor) {
  const TensorView out = view(expertOut), w = view(topkWeights), result = view(y);
  return make_executor(
      [=]() -> Status {
        HP_RETURN_IF_ERROR(check_buffer(buffer));
        return buffer->buffer->low_latency_combine(out, w, buffer->low_latency.handle, result);
      },
      workspaceSize, executor);
}

hpStatus hpMoeCombineLowLatency(void*, uint64_t, hpOpExecutor* executor) {
  return run_executor(executor);
}

}  // extern "C"
