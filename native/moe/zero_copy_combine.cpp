// Buffer's zero-copy combine (buffer.h, zero_copy_combine): the expert outputs stay in each
// rank's combine rows on the symmetric heap and every source reads its pairs' rows from there.
#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/ops.h"
#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;

// Where each of this rank's pairs lands in its expert rank's combine rows: that rank's expert
// offsets (its own expert_alignment), then the rows of lower sources, then this rank's tokens
// in order, as dispatch_data expands them. Every rank sees the same counts, so all grow the
// combine rows alike (collectively) when some rank receives more rows than they hold.
Status Buffer::plan_pulls(std::uint64_t epoch, Handle* handle) {
  Handle& h = *handle;
  const std::int64_t per_rank = local_experts();
  const auto R = std::size_t(ranks_);
  h.expert_first_row.assign(std::size_t(config_.num_experts), 0);
  std::int64_t most_rows = 0;
  for (int d = 0; d < ranks_; ++d) {
    const std::int64_t alignment = status_.counts(epoch, d)[2];
    std::int64_t row = 0;
    for (std::int64_t e = d * per_rank; e < (d + 1) * per_rank; ++e) {
      std::int64_t pairs = 0;
      for (std::size_t s = 0; s < R; ++s) {
        if (s == std::size_t(rank_)) h.expert_first_row[std::size_t(e)] = row + pairs;
        pairs += status_.counts(epoch, int(s))[kCountsHeader + std::ptrdiff_t(R) + e];
      }
      row += (pairs + alignment - 1) / alignment * alignment;
    }
    most_rows = std::max(most_rows, row);
  }
  h.pair_row.assign(h.pair_expert.size(), -1);
  std::vector<std::int64_t> next = h.expert_first_row;
  for (std::size_t pair = 0; pair < h.pair_expert.size(); ++pair) {
    if (h.pair_expert[pair] >= 0) h.pair_row[pair] = next[std::size_t(h.pair_expert[pair])]++;
  }
  if (most_rows > combine_rows_.capacity()) {
    HP_RETURN_IF_ERROR(combine_rows_.allocate(
        region_shape(config_, ranks_),
        std::max(most_rows, std::int64_t(std::ceil(1.25 * double(combine_rows_.capacity()))))));
  }
  combine_rows_.planned_epoch = epoch;
  return Status::ok();
}

Status Buffer::combine_buffer(const Handle& handle, TensorView* out) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::combine_buffer: the buffer was destroyed");
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "Buffer::combine_buffer: out is null");
  HP_ENSURE(config_.zero_copy_combine, ErrorCode::kFailedPrecondition,
            "Buffer::combine_buffer: the buffer was made without BufferConfig::zero_copy_combine");
  HP_RETURN_IF_ERROR(expect_planned(handle, "Buffer::combine_buffer"));
  // A rank writes its combine rows only when nobody reads the previous combine's any more.
  HP_RETURN_IF_ERROR(wait_pulled(combine_rows_.pulled_epoch));
  *out = TensorView(combine_rows_.rows(), combine_rows_dtype(), {handle.rows, config_.hidden});
  return Status::ok();
}

// (Epoch 0: no combine read the rows yet.)
Status Buffer::wait_pulled(std::uint64_t epoch) const {
  for (int s = 0; s < ranks_ && epoch != 0; ++s) {
    HP_RETURN_IF_ERROR(
        hp::shmem::signal_wait_until(status_.flag(kPulled, s), hp::shmem::Cmp::kGe, epoch));
  }
  return Status::ok();
}

// The combine rows hold the rows of the last dispatch whose pulls were planned, only.
Status Buffer::expect_planned(const Handle& handle, const char* call) const {
  HP_ENSURE(handle.epoch == combine_rows_.planned_epoch && handle.epoch == dispatch_epoch_ &&
                handle.epoch != 0,
            ErrorCode::kInvalidArgument,
            "{}: the handle is not the last successful dispatch's (the combine rows hold that "
            "dispatch's rows only)",
            call);
  return Status::ok();
}

Status Buffer::expect_combine_rows(const TensorView& expert_out, const Handle& handle) const {
  HP_RETURN_IF_ERROR(expect_planned(handle, "combine (zero_copy_combine)"));
  HP_ENSURE(expert_out.data() == combine_rows_.rows() && expert_out.dtype() == combine_rows_dtype(),
            ErrorCode::kInvalidArgument,
            "combine: expert_out {} is not combine_buffer()'s tensor: a zero_copy_combine buffer "
            "reads the expert "
            "outputs in place, so write them into combine_buffer(handle)",
            expert_out.to_string());
  return Status::ok();
}

template <typename Comm>
Status Buffer::pull_combine_with(Comm& comm, const Status& input, const Handle& h,
                                 const TensorView& y, const float* weights) {
  const std::uint64_t epoch = ++combine_epoch_;
  const std::uint64_t previous = std::exchange(combine_rows_.pulled_epoch, epoch);
  const Status result = [&]() -> Status {
    if (!input.is_ok()) return reject_call(comm, kCombine, epoch, input);
    // The weights are rewritten: every rank must be done reading the previous combine's (two
    // combines of one dispatch need no combine_buffer between them when the rows stay).
    HP_RETURN_IF_ERROR(wait_pulled(previous));
    // Every row's weight next to the rows, then this rank's flag: its rows may be read.
    auto* row_weights =
        reinterpret_cast<float*>(combine_rows_.rows() + combine_rows_.weights_offset());
    for (std::int64_t row = 0; row < h.rows; ++row)
      row_weights[row] = weights != nullptr ? weights[row] : 1.0f;
    for (int i = 0; i < ranks_; ++i) {
      HP_RETURN_IF_ERROR(
          comm.signal(status_.flag(kCombine, rank_), epoch, (rank_ + 1 + i) % ranks_));
    }
    for (int d = 0; d < ranks_; ++d) {
      HP_RETURN_IF_ERROR(
          hp::shmem::signal_wait_until(status_.flag(kCombine, d), hp::shmem::Cmp::kGe, epoch));
    }
    HP_RETURN_IF_ERROR(check_rejections(kCombine, epoch, "combine"));
    return pull_rows(h, y);
  }();
  // Whatever happened, this rank reads none of the peers' rows any more (its gets completed).
  HP_RETURN_IF_ERROR(comm.quiet());
  for (int i = 0; i < ranks_; ++i) {
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kPulled, rank_), epoch, (rank_ + 1 + i) % ranks_));
  }
  HP_RETURN_IF_ERROR(comm.quiet());
  return result;
}
template Status Buffer::pull_combine_with(WindowComm&, const Status&, const Handle&,
                                          const TensorView&, const float*);
template Status Buffer::pull_combine_with(ShmemComm&, const Status&, const Handle&,
                                          const TensorView&, const float*);

// y[t] = sum over k of weight x row of pair (t, k), fp32 in k order, rounded once to y's dtype.
// Rows of peers whose heap is mapped are read in place; the others' runs (one per expert) are
// fetched into combine_rows_.staging first.
Status Buffer::pull_rows(const Handle& h, const TensorView& y) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, per_rank = local_experts();
  const auto R = std::size_t(ranks_), E = std::size_t(config_.num_experts);
  const DType wire = combine_rows_dtype();
  const std::size_t row_bytes = std::size_t(hidden) * dtype_size(wire);
  // Row i of pair expert e is at rows[e's rank] + (i + shift[e]) x row_bytes, its weight at
  // weights[e's rank][i + shift[e]]: a mapped rank's combine rows themselves (shift 0), or
  // staging, where the runs of unmapped ranks' experts follow one another.
  std::vector<const std::uint8_t*> mapped(R), rows(R);
  std::vector<const float*> row_weights(R);
  for (std::size_t d = 0; d < R; ++d)
    mapped[d] = static_cast<const std::uint8_t*>(hp::shmem::ptr(combine_rows_.rows(), int(d)));
  std::vector<std::int64_t> shift(E, 0);
  std::int64_t staged = 0;
  for (std::size_t e = 0; e < E; ++e) {
    if (mapped[std::size_t(std::int64_t(e) / per_rank)] != nullptr) continue;
    shift[e] = staged - h.expert_first_row[e];
    staged += h.layout.tokens_per_expert[e];
  }
  const std::size_t staged_weights = round64(std::size_t(staged) * row_bytes);
  if (staged > 0)
    combine_rows_.staging.resize(staged_weights + std::size_t(staged) * sizeof(float));
  for (std::size_t d = 0; d < R; ++d) {
    rows[d] = mapped[d] != nullptr ? mapped[d] : combine_rows_.staging.data();
    row_weights[d] = reinterpret_cast<const float*>(
        mapped[d] != nullptr ? mapped[d] + combine_rows_.weights_offset()
                             : combine_rows_.staging.data() + staged_weights);
  }
  for (std::size_t e = 0; e < E && staged > 0; ++e) {
    const int d = int(std::int64_t(e) / per_rank);
    const std::int64_t n = h.layout.tokens_per_expert[e], first = h.expert_first_row[e];
    if (n == 0 || mapped[std::size_t(d)] != nullptr) continue;
    const auto at = std::size_t(first + shift[e]);
    HP_RETURN_IF_ERROR(hp::shmem::get_nbi(combine_rows_.staging.data() + at * row_bytes,
                                          combine_rows_.rows() + std::size_t(first) * row_bytes,
                                          std::size_t(n) * row_bytes, d));
    HP_RETURN_IF_ERROR(hp::shmem::get_nbi(
        combine_rows_.staging.data() + staged_weights + at * sizeof(float),
        combine_rows_.rows() + combine_rows_.weights_offset() + std::size_t(first) * sizeof(float),
        std::size_t(n) * sizeof(float), d));
  }
  if (staged > 0) HP_RETURN_IF_ERROR(hp::shmem::quiet());
  scratch_.resize(std::size_t(share_workers(config_.chip)));
  return for_each_share(
      config_.chip, h.layout.num_tokens, [&](std::int64_t t0, std::int64_t t1, int worker) {
        const auto gather = [&](std::int64_t t, std::vector<const void*>& pair_rows,
                                std::vector<float>& weights) {
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int32_t e = h.pair_expert[std::size_t(t * topk + k)];
            if (e < 0) continue;
            const auto d = std::size_t(e / per_rank);
            const auto i =
                std::size_t(h.pair_row[std::size_t(t * topk + k)] + shift[std::size_t(e)]);
            pair_rows.push_back(rows[d] + i * row_bytes);
            weights.push_back(row_weights[d][i]);
          }
        };
        return sum_tokens_into_y(scratch_[std::size_t(worker)], wire, y, t0, t1, gather);
      });
}

}  // namespace hp::moe
