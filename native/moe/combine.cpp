// Buffer's normal combine (buffer.h): each expert rank sums its rows of a token, weighted, and
// sends that row back; each source sums its ranks' rows (the zero-copy combine, which reads
// the rows in place instead, is zero_copy_combine.cpp).
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;  // NOLINT: the window's own constants

Status Buffer::combine(const TensorView& expert_out, const Handle& handle, const TensorView& y,
                       const TensorView& weights, bool weighted) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::combine: the buffer was destroyed");
  const std::int64_t rows = std::int64_t(handle.row_src_rank.size());
  const float* w = nullptr;
  const Status input = [&]() -> Status {
    HP_RETURN_IF_ERROR(expect_float_rows(expert_out, "expert_out", {rows, config_.hidden},
                                         config_.combine_element_bytes));
    HP_RETURN_IF_ERROR(expect_float_rows(y, "y", {handle.layout.num_tokens, config_.hidden}));
    if (config_.zero_copy_combine) HP_RETURN_IF_ERROR(expect_combine_rows(expert_out, handle));
    if (weighted) {
      HP_RETURN_IF_ERROR(weights.expect_shape("weights", {rows}));
      HP_RETURN_IF_ERROR(weights.expect_dtype("weights", DType::kFP32));
      HP_RETURN_IF_ERROR(expect_contiguous(weights, "weights"));
      HP_ENSURE(
          rows == 0 || weights.data() != nullptr, ErrorCode::kInvalidArgument,
          "Buffer::combine: weighted without weights: pass the dispatch result's topk_weights");
      w = static_cast<const float*>(weights.data());
    }
    return Status::ok();
  }();
  if (config_.zero_copy_combine) {
    if (config_.comm == CommKind::kWindow)
      return pull_combine_with(window_comm_, input, handle, y, w);
    return pull_combine_with(shmem_comm_, input, handle, y, w);
  }
  if (config_.comm == CommKind::kWindow) {
    if (!input.is_ok()) return reject_call(window_comm_, kCombine, ++combine_epoch_, input);
    return combine_with(window_comm_, expert_out, handle, y, w);
  }
  if (!input.is_ok()) return reject_call(shmem_comm_, kCombine, ++combine_epoch_, input);
  return combine_with(shmem_comm_, expert_out, handle, y, w);
}

Status Buffer::sum_tokens_into_y(WorkerScratch& w, DType wire, const TensorView& y, std::int64_t t0,
                                 std::int64_t t1, const GatherRows& gather) const {
  const std::int64_t hidden = config_.hidden;
  const std::size_t y_row_bytes = std::size_t(hidden) * dtype_size(y.dtype());
  w.row.resize(std::size_t(hidden) * sizeof(float));
  w.rows.clear();
  w.weights.clear();
  if (t0 < t1) gather(t0, w.rows, w.weights);
  for (std::int64_t t = t0; t < t1; ++t) {
    w.next.clear();
    w.next_weights.clear();
    if (t + 1 < t1) gather(t + 1, w.next, w.next_weights);
    HP_RETURN_IF_ERROR(hp::kernels::row_sum(*table_, w.rows, wire, w.weights,
                                            TensorView(w.row.data(), y.dtype(), {hidden}), w.next));
    stream_copy(static_cast<std::uint8_t*>(y.data()) + std::size_t(t) * y_row_bytes, w.row.data(),
                y_row_bytes);
    std::swap(w.rows, w.next);
    std::swap(w.weights, w.next_weights);
  }
  return Status::ok();
}

template <typename Comm>
Status Buffer::combine_with(Comm& comm, const TensorView& expert_out, const Handle& h,
                            const TensorView& y, const float* weights) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk;
  const auto R = std::size_t(ranks_);
  const std::uint64_t epoch = ++combine_epoch_;
  const DType wire = expert_out.dtype();
  const std::size_t wire_bytes = std::size_t(hidden) * dtype_size(wire);
  const auto* out_bytes = static_cast<const std::uint8_t*>(expert_out.data());
  scratch_.resize(std::size_t(share_workers(config_.chip)));
  for (WorkerScratch& w : scratch_) w.row.resize(std::size_t(hidden) * sizeof(float));
  // ---- send: per received record, the weighted sum of its rows, to the record's source -------
  // Records from source s are [rec_first[s], rec_first[s + 1]) of this rank's records; their
  // rows go to s's back region after those of ranks before me, in record order.
  std::vector<std::int64_t> rec_first(R + 1, 0);
  std::vector<std::uint8_t*> dst(R, nullptr);
  std::vector<std::int64_t> slot(R, 0);  // where my rows start in s's back region
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t n = h.tok[s * R + std::size_t(rank_)];
    rec_first[s + 1] = rec_first[s] + n;
    for (std::size_t d = 0; d < std::size_t(rank_); ++d) slot[s] += h.tok[s * R + d];
    if (n == 0) continue;
    Status st;
    dst[s] = comm.open(int(s), back_.row(epoch, slot[s]),
                       std::size_t(n - 1) * combine_row_bytes_ + wire_bytes, &st);
    if (dst[s] == nullptr) return st;
  }
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, h.records, [&](std::int64_t r0, std::int64_t r1, int worker) {
        WorkerScratch& w = scratch_[std::size_t(worker)];
        std::size_t s = 0;
        for (std::int64_t i = r0; i < r1; ++i) {
          while (i >= rec_first[s + 1]) ++s;
          w.rows.clear();
          w.weights.clear();
          w.next.clear();
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int64_t row = h.record_rows[std::size_t(i * topk + k)];
            if (row >= 0) {
              w.rows.push_back(out_bytes + std::size_t(row) * wire_bytes);
              w.weights.push_back(weights ? weights[row] : 1.0f);
            }
            const std::int64_t next =
                i + 1 < r1 ? h.record_rows[std::size_t((i + 1) * topk + k)] : -1;
            if (next >= 0) w.next.push_back(out_bytes + std::size_t(next) * wire_bytes);
          }
          // Summed in cache, then streamed to the source rank's window.
          HP_RETURN_IF_ERROR(hp::kernels::row_sum(
              *table_, w.rows, wire, w.weights, TensorView(w.row.data(), wire, {hidden}), w.next));
          stream_copy(dst[s] + std::size_t(i - rec_first[s]) * combine_row_bytes_, w.row.data(),
                      wire_bytes);
        }
        return Status::ok();
      }));
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t n = rec_first[s + 1] - rec_first[s];
    const std::size_t bytes = n == 0 ? 0 : std::size_t(n - 1) * combine_row_bytes_ + wire_bytes;
    HP_RETURN_IF_ERROR(comm.close(int(s), back_.row(epoch, slot[s]), dst[s], bytes));
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kCombine, rank_), epoch, int(s)));
  }
  for (int d = 0; d < ranks_; ++d) {
    HP_RETURN_IF_ERROR(
        hp::shmem::signal_wait_until(status_.flag(kCombine, d), hp::shmem::Cmp::kGe, epoch));
  }
  if (Status rejected = check_rejections(kCombine, epoch, "combine"); !rejected.is_ok()) {
    HP_RETURN_IF_ERROR(comm.quiet());
    return rejected;
  }
  // ---- reduce: y[t] = sum over ranks d holding t of d's row, in rank order; tokens split ----
  std::vector<std::int64_t> base(R, 0);
  for (std::size_t d = 1; d < R; ++d) base[d] = base[d - 1] + h.tok[std::size_t(rank_) * R + d - 1];
  HP_RETURN_IF_ERROR(for_each_share(
      config_.chip, h.layout.num_tokens, [&](std::int64_t t0, std::int64_t t1, int worker) {
        std::vector<std::int64_t> at(R, 0);
        for (std::int64_t t = 0; t < t0; ++t) {
          for (std::size_t d = 0; d < R; ++d) at[d] += h.layout.in_rank(t, std::int64_t(d));
        }
        const auto gather = [&](std::int64_t t, std::vector<const void*>& rows,
                                std::vector<float>&) {
          for (std::size_t d = 0; d < R; ++d) {
            if (h.layout.in_rank(t, std::int64_t(d)))
              rows.push_back(back_.row(epoch, base[d] + at[d]++));
          }
        };
        return sum_tokens_into_y(scratch_[std::size_t(worker)], wire, y, t0, t1, gather);
      }));
  return comm.quiet();
}

}  // namespace hp::moe
