// Buffer's streamed combine (buffer.h): rows go back unsummed, as they are produced.
#include <cstring>

#include "kernels/ops.h"
#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;

Status Buffer::combine_stream_begin(const Handle& handle, const TensorView& expert_out,
                                    const TensorView& y) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::combine_stream_begin: the buffer was destroyed");
  HP_ENSURE(
      config_.streamed_combine, ErrorCode::kFailedPrecondition,
      "Buffer::combine_stream_begin: the buffer was made without BufferConfig::streamed_combine");
  HP_ENSURE(!stream_.open, ErrorCode::kFailedPrecondition,
            "Buffer::combine_stream_begin: the previous streamed combine was not ended "
            "(combine_stream_end)");
  stream_.open = true;
  ++stream_.epoch;
  stream_.handle = &handle;
  stream_.expert_out = expert_out;
  stream_.y = y;
  stream_.input = [&]() -> Status {
    HP_ENSURE(handle.epoch == dispatch_epoch_ && handle.epoch != 0, ErrorCode::kInvalidArgument,
              "Buffer::combine_stream_begin: the handle is not the last dispatch's");
    HP_RETURN_IF_ERROR(expect_float_rows(expert_out, "expert_out", {handle.rows, config_.hidden},
                                         config_.combine_element_bytes));
    return expect_float_rows(y, "y", {handle.layout.num_tokens, config_.hidden});
  }();
  return Status::ok();
}

Status Buffer::combine_stream_rows(std::int64_t row_begin, std::int64_t row_end) {
  HP_ENSURE(
      stream_.open, ErrorCode::kFailedPrecondition,
      "Buffer::combine_stream_rows: no streamed combine is open (combine_stream_begin first)");
  // this rank sends nothing; its end reports the error
  if (!stream_.input.is_ok()) return Status::ok();
  const Handle& h = *stream_.handle;
  HP_ENSURE(0 <= row_begin && row_begin <= row_end && row_end <= h.rows, ErrorCode::kOutOfRange,
            "Buffer::combine_stream_rows: rows [{}, {}) outside the dispatch's {}", row_begin,
            row_end, h.rows);
  if (config_.comm == CommKind::kWindow) return stream_rows_with(window_comm_, row_begin, row_end);
  return stream_rows_with(shmem_comm_, row_begin, row_end);
}

template <typename Comm>
Status Buffer::stream_rows_with(Comm& comm, std::int64_t row_begin, std::int64_t row_end) {
  const Handle& h = *stream_.handle;
  const std::size_t wire_bytes = std::size_t(config_.hidden) * stream_.expert_out.element_size();
  const auto* out = static_cast<const std::uint8_t*>(stream_.expert_out.data());
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int32_t s = h.row_src_rank[std::size_t(r)];
    if (s < 0) continue;  // a pad row
    std::uint8_t* remote = stream_.rows.row(
        stream_.epoch, std::int64_t(h.row_src_token[std::size_t(r)]) * config_.topk +
                           h.row_src_slot[std::size_t(r)]);
    Status st;
    std::uint8_t* p = comm.open(s, remote, wire_bytes, &st);
    if (p == nullptr) return st;
    stream_copy(p, out + std::size_t(r) * wire_bytes, wire_bytes);
    HP_RETURN_IF_ERROR(comm.close(s, remote, p, wire_bytes));
  }
  return Status::ok();
}

Status Buffer::combine_stream_end(const Status& caller_check, const TensorView& add) {
  HP_ENSURE(stream_.open, ErrorCode::kFailedPrecondition,
            "Buffer::combine_stream_end: no streamed combine is open (combine_stream_begin first)");
  stream_.open = false;
  // this rank's own argument: checked like the others
  if (stream_.input.is_ok() && add.data() != nullptr) {
    stream_.input = [&]() -> Status {
      HP_RETURN_IF_ERROR(
          add.expect_shape("add", {stream_.handle->layout.num_tokens, config_.hidden}));
      HP_RETURN_IF_ERROR(add.expect_dtype("add", DType::kFP32));
      HP_ENSURE(stream_.expert_out.dtype() == DType::kFP32, ErrorCode::kDTypeMismatch,
                "combine_stream_end: add is summed in fp32 with the expert rows: expert_out must "
                "be fp32, not {}",
                to_string(stream_.expert_out.dtype()));
      return expect_contiguous(add, "add");
    }();
  }
  if (config_.comm == CommKind::kWindow) return stream_end_with(window_comm_, caller_check, add);
  return stream_end_with(shmem_comm_, caller_check, add);
}

template <typename Comm>
Status Buffer::stream_end_with(Comm& comm, const Status& caller_check, const TensorView& add) {
  const std::uint64_t epoch = stream_.epoch;
  if (!stream_.input.is_ok()) return reject_call(comm, kStreamedCombine, epoch, stream_.input);
  if (!caller_check.is_ok()) return reject_call(comm, kStreamedCombine, epoch, caller_check);
  stream_fence();  // this thread's streamed rows, before the flags
  for (int i = 0; i < ranks_; ++i) {
    HP_RETURN_IF_ERROR(
        comm.signal(status_.flag(kStreamedCombine, rank_), epoch, (rank_ + 1 + i) % ranks_));
  }
  for (int d = 0; d < ranks_; ++d) {
    HP_RETURN_IF_ERROR(hp::shmem::signal_wait_until(status_.flag(kStreamedCombine, d),
                                                    hp::shmem::Cmp::kGe, epoch));
  }
  if (Status rejected = check_rejections(kStreamedCombine, epoch, "streamed combine");
      !rejected.is_ok()) {
    HP_RETURN_IF_ERROR(comm.quiet());
    return rejected;
  }
  // ---- reduce: y[t] = sum over k of the pair rows that were sent, in k order (+ add[t]) -----
  const Handle& h = *stream_.handle;
  const TensorView& y = stream_.y;
  const std::int64_t hidden = config_.hidden, topk = config_.topk;
  const DType wire = stream_.expert_out.dtype();
  scratch_.resize(std::size_t(share_workers(config_.chip)));
  HP_RETURN_IF_ERROR(for_each_share(
      config_.chip, h.layout.num_tokens, [&](std::int64_t t0, std::int64_t t1, int worker) {
        const auto gather = [&](std::int64_t t, std::vector<const void*>& rows,
                                std::vector<float>&) {
          for (std::int64_t k = 0; k < topk; ++k) {
            if (h.pair_expert[std::size_t(t * topk + k)] >= 0)
              rows.push_back(stream_.rows.row(epoch, t * topk + k));
          }
          // fp32, as the wire (checked)
          if (add.data() != nullptr && h.token_active[std::size_t(t)] != 0) {
            rows.push_back(static_cast<const float*>(add.data()) + t * hidden);
          }
        };
        return sum_tokens_into_y(scratch_[std::size_t(worker)], wire, y, t0, t1, gather);
      }));
  return comm.quiet();
}

}  // namespace hp::moe
