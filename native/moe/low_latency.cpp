// The low-latency mode of Buffer (buffer.h; its regions: buffer_regions.h, LowLatencyRegions).
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {
namespace {

using namespace window;  // NOLINT: the window's own constants

struct SlotMeta {
  std::int32_t token;
  float scale;
  float weight;
};

bool active(const TensorView& mask, std::int64_t t) {
  return mask.data() == nullptr || static_cast<const std::uint8_t*>(mask.data())[t] != 0;
}

}  // namespace

Status Buffer::low_latency_dispatch(const DispatchArgs& args, LowLatencyResult* out) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::low_latency_dispatch: the buffer was destroyed");
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument,
            "Buffer::low_latency_dispatch: out is null");
  HP_ENSURE(config_.low_latency, ErrorCode::kFailedPrecondition,
            "Buffer::low_latency_dispatch: the buffer has no low-latency regions (create it with "
            "BufferConfig::low_latency = true)");
  if (config_.comm == CommKind::kWindow) return low_latency_dispatch_with(window_comm_, args, out);
  return low_latency_dispatch_with(shmem_comm_, args, out);
}

template <typename Comm>
Status Buffer::low_latency_dispatch_with(Comm& comm, const DispatchArgs& a, LowLatencyResult* out) {
  const std::int64_t topk = config_.topk, experts = config_.num_experts;
  const bool quant = a.quant == Quant::kDynamicInt8;
  LowLatencyHandle h = std::move(out->handle);  // its storage is reused
  DispatchLayout layout;
  // A rank with bad inputs still writes its counts (its error code first) and its flag, so
  // every other rank returns ABORTED instead of waiting.
  const Status input = prepare_dispatch(a, &layout);
  const std::int64_t tokens = input.is_ok() ? a.x.dim(0) : 0;
  const std::size_t payload_bytes =
      std::size_t(config_.hidden) * (quant || !input.is_ok() ? 1 : a.x.element_size());
  const std::uint64_t epoch = ++low_latency_.dispatch_epoch;
  h.epoch = epoch;
  h.tokens = tokens;
  // ---- slots: each (token, expert) pair's rank among this rank's pairs for that expert -------
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(experts), 0);
  h.topk_idx.assign(std::size_t(tokens * topk), -1);
  h.pair_slot.assign(std::size_t(tokens * topk), -1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (!active(a.x_active_mask, t)) continue;
    for (std::int64_t k = 0; k < topk; ++k) {
      const std::int64_t e = topk_at(a.topk_idx, t, k);
      if (e < 0) continue;
      h.topk_idx[std::size_t(t * topk + k)] = e;
      h.pair_slot[std::size_t(t * topk + k)] = std::int32_t(pairs[std::size_t(e)]++);
    }
  }
  HP_RETURN_IF_ERROR(low_latency_send(comm, a, h, pairs, payload_bytes));
  HP_RETURN_IF_ERROR(low_latency_counts(comm, a, input, epoch, pairs));
  return low_latency_pack(a, h, payload_bytes, out);
}

// Each pair into its slot at its expert's rank; tokens split over the workers.
template <typename Comm>
Status Buffer::low_latency_send(Comm& comm, const DispatchArgs& a, const LowLatencyHandle& h,
                                const std::vector<std::int64_t>& pairs, std::size_t payload_bytes) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, experts = config_.num_experts;
  const std::int64_t local = local_experts(), tokens = h.tokens;
  const std::uint64_t epoch = h.epoch;
  const bool quant = a.quant == Quant::kDynamicInt8;
  std::vector<std::uint8_t*> dst(static_cast<std::size_t>(experts), nullptr);
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t n = pairs[std::size_t(e)];
    if (n == 0) continue;
    Status st;
    dst[std::size_t(e)] = comm.open(int(e / local), low_latency_.slot(epoch, e % local, rank_, 0),
                                    std::size_t(n) * low_latency_.slot_bytes(), &st);
    if (dst[std::size_t(e)] == nullptr) return st;
  }
  const auto* x_bytes = static_cast<const std::uint8_t*>(a.x.data());
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::uint8_t* src =
              quant ? reinterpret_cast<const std::uint8_t*>(quant_rows_.data()) + t * hidden
                    : x_bytes + std::size_t(t) * payload_bytes;
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int64_t e = h.topk_idx[std::size_t(t * topk + k)];
            if (e < 0) continue;
            std::uint8_t* slot =
                dst[std::size_t(e)] +
                std::size_t(h.pair_slot[std::size_t(t * topk + k)]) * low_latency_.slot_bytes();
            const SlotMeta meta{std::int32_t(t), quant ? quant_scales_[std::size_t(t)] : 0.0f,
                                weights[t * topk + k]};
            std::memcpy(slot, &meta, sizeof(meta));
            stream_copy(slot + kSlot, src, payload_bytes);
          }
        }
        return Status::ok();
      }));
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::size_t bytes = std::size_t(pairs[std::size_t(e)]) * low_latency_.slot_bytes();
    HP_RETURN_IF_ERROR(comm.close(int(e / local), low_latency_.slot(epoch, e % local, rank_, 0),
                                  dst[std::size_t(e)], bytes));
  }
  return Status::ok();
}

// The counts (or this rank's error code), then the flag, to every rank; then every rank's.
template <typename Comm>
Status Buffer::low_latency_counts(Comm& comm, const DispatchArgs& a, const Status& input,
                                  std::uint64_t epoch, const std::vector<std::int64_t>& pairs) {
  const std::int64_t local = local_experts();
  const bool quant = a.quant == Quant::kDynamicInt8;
  std::vector<std::int64_t> mine(std::size_t(kLowLatencyCountsHeader + local), 0);
  const std::size_t count_bytes = mine.size() * sizeof(std::int64_t);
  for (int i = 0; i < ranks_; ++i) {
    const int d = (rank_ + 1 + i) % ranks_;
    mine[0] = std::int64_t(input.code());
    mine[1] = input.is_ok() ? rows_kind(a.x.dtype(), quant) : 0;
    std::copy_n(pairs.begin() + d * local, local, mine.begin() + kLowLatencyCountsHeader);
    Status st;
    std::uint8_t* p = comm.open(d, low_latency_.counts(epoch, rank_), count_bytes, &st);
    if (p == nullptr) return st;
    std::memcpy(p, mine.data(), count_bytes);
    HP_RETURN_IF_ERROR(comm.close(d, low_latency_.counts(epoch, rank_), p, count_bytes));
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kLowLatencyDispatch, rank_), epoch, d));
  }
  for (int s = 0; s < ranks_; ++s) {
    HP_RETURN_IF_ERROR(hp::shmem::signal_wait_until(status_.flag(kLowLatencyDispatch, s),
                                                    hp::shmem::Cmp::kGe, epoch));
  }
  HP_RETURN_IF_ERROR(comm.quiet());
  if (!input.is_ok()) return input;
  for (int s = 0; s < ranks_; ++s) {
    if (low_latency_.counts(epoch, s)[0] != 0) {
      return Status::error(ErrorCode::kAborted,
                           "low_latency_dispatch: rank {} rejected its inputs ({}); see its error",
                           s, to_string(ErrorCode(low_latency_.counts(epoch, s)[0])));
    }
  }
  HP_RETURN_IF_ERROR(expect_same_rows_kind("low_latency_dispatch", ranks_, rank_, [&](int s) {
    return low_latency_.counts(epoch, s)[1];
  }));
  return Status::ok();
}

// Each local expert's rows by source, then slot, into *out (h moves into out->handle).
Status Buffer::low_latency_pack(const DispatchArgs& a, LowLatencyHandle& h,
                                std::size_t payload_bytes, LowLatencyResult* out) {
  const std::int64_t hidden = config_.hidden, local = local_experts();
  const std::int64_t tmax = config_.max_tokens_per_rank;
  const auto R = std::size_t(ranks_);
  const bool quant = a.quant == Quant::kDynamicInt8;
  const std::uint64_t epoch = h.epoch;
  LowLatencyResult& r = *out;
  const std::int64_t per_expert = std::int64_t(R) * tmax;
  r.x_dtype = quant ? DType::kInt8 : a.x.dtype();
  r.hidden = hidden;
  r.rows_per_expert = per_expert;
  r.x_bytes.resize(std::size_t(local * per_expert) * payload_bytes);
  r.x_scale.assign(quant ? std::size_t(local * per_expert) : 0, 0.0f);
  r.tokens_per_expert.assign(std::size_t(local), 0);
  r.layout_range.assign(std::size_t(local) * R * 2, 0);
  h.row_src_rank.assign(std::size_t(local * per_expert), -1);
  h.row_src_token.assign(std::size_t(local * per_expert), -1);
  for (std::int64_t le = 0; le < local; ++le) {
    std::int64_t at = 0;
    for (std::size_t s = 0; s < R; ++s) {
      const std::int64_t n = low_latency_.counts(epoch, int(s))[kLowLatencyCountsHeader + le];
      r.layout_range[(std::size_t(le) * R + s) * 2] = at;
      r.layout_range[(std::size_t(le) * R + s) * 2 + 1] = n;
      for (std::int64_t i = 0; i < n; ++i) {
        SlotMeta meta;
        std::memcpy(&meta, low_latency_.slot(epoch, le, int(s), i), sizeof(meta));
        const auto row = std::size_t(le * per_expert + at + i);
        if (quant) r.x_scale[row] = meta.scale;
        h.row_src_rank[row] = std::int32_t(s);
        h.row_src_token[row] = meta.token;
      }
      at += n;
    }
    r.tokens_per_expert[std::size_t(le)] = at;
  }
  // The payloads, (expert, source) runs split over the workers.
  HP_RETURN_IF_ERROR(for_each_share(
      config_.chip, local * std::int64_t(R), [&](std::int64_t b0, std::int64_t b1, int) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t le = b / std::int64_t(R);
          const auto s = std::size_t(b % std::int64_t(R));
          const std::int64_t first = r.layout_range[(std::size_t(le) * R + s) * 2];
          const std::int64_t n = r.layout_range[(std::size_t(le) * R + s) * 2 + 1];
          for (std::int64_t i = 0; i < n; ++i) {
            stream_copy(r.x_bytes.data() + std::size_t(le * per_expert + first + i) * payload_bytes,
                        low_latency_.slot(epoch, le, int(s), i) + kSlot, payload_bytes);
          }
        }
        return Status::ok();
      }));
  r.handle = std::move(h);
  return Status::ok();
}

Status Buffer::low_latency_combine(const TensorView& expert_out, const TensorView& topk_weights,
                                   const LowLatencyHandle& handle, const TensorView& y) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::low_latency_combine: the buffer was destroyed");
  HP_ENSURE(config_.low_latency, ErrorCode::kFailedPrecondition,
            "Buffer::low_latency_combine: the buffer has no low-latency regions (create it with "
            "BufferConfig::low_latency = true)");
  const std::int64_t local = local_experts(),
                     per_expert = std::int64_t(ranks_) * config_.max_tokens_per_rank;
  const Status input = [&]() -> Status {
    HP_ENSURE(
        std::int64_t(handle.row_src_rank.size()) == local * per_expert &&
            std::int64_t(handle.topk_idx.size()) == handle.tokens * config_.topk &&
            handle.pair_slot.size() == handle.topk_idx.size(),
        ErrorCode::kInvalidArgument,
        "Buffer::low_latency_combine: the handle is not one of this buffer's low_latency_dispatch");
    HP_RETURN_IF_ERROR(expect_float_rows(expert_out, "expert_out",
                                         {local, per_expert, config_.hidden},
                                         config_.combine_element_bytes));
    HP_RETURN_IF_ERROR(topk_weights.expect_shape("topk_weights", {handle.tokens, config_.topk}));
    HP_RETURN_IF_ERROR(topk_weights.expect_dtype("topk_weights", DType::kFP32));
    HP_RETURN_IF_ERROR(expect_contiguous(topk_weights, "topk_weights"));
    return expect_float_rows(y, "y", {handle.tokens, config_.hidden});
  }();
  const auto* w = static_cast<const float*>(topk_weights.data());
  if (config_.comm == CommKind::kWindow) {
    if (!input.is_ok())
      return reject_call(window_comm_, kLowLatencyCombine, ++low_latency_.combine_epoch, input);
    return low_latency_combine_with(window_comm_, expert_out, w, handle, y);
  }
  if (!input.is_ok())
    return reject_call(shmem_comm_, kLowLatencyCombine, ++low_latency_.combine_epoch, input);
  return low_latency_combine_with(shmem_comm_, expert_out, w, handle, y);
}

template <typename Comm>
Status Buffer::low_latency_combine_with(Comm& comm, const TensorView& expert_out,
                                        const float* weights, const LowLatencyHandle& h,
                                        const TensorView& y) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, local = local_experts();
  const std::int64_t per_expert = std::int64_t(ranks_) * config_.max_tokens_per_rank;
  const auto R = std::size_t(ranks_);
  const std::uint64_t epoch = ++low_latency_.combine_epoch;
  const DType wire = expert_out.dtype();
  const std::size_t wire_bytes = std::size_t(hidden) * dtype_size(wire);
  const auto* out_bytes = static_cast<const std::uint8_t*>(expert_out.data());
  // ---- send: the rows of (local expert, source) run back to the source's [expert][slot] -----
  // A run's rows are the source's slots 0..n-1 at that expert, in order.
  std::vector<std::int64_t> first(std::size_t(local) * R, 0), count(std::size_t(local) * R, 0);
  std::vector<std::uint8_t*> dst(std::size_t(local) * R, nullptr);
  for (std::int64_t le = 0; le < local; ++le) {
    for (std::int64_t row = 0; row < per_expert; ++row) {
      const std::int32_t s = h.row_src_rank[std::size_t(le * per_expert + row)];
      if (s < 0) break;
      const std::size_t b = std::size_t(le) * R + std::size_t(s);
      if (count[b]++ == 0) first[b] = row;
    }
  }
  for (std::size_t b = 0; b < dst.size(); ++b) {
    if (count[b] == 0) continue;
    Status st;
    const int s = int(b % R);
    const std::int64_t expert = rank_ * local + std::int64_t(b / R);
    dst[b] = comm.open(s, low_latency_.back_row(epoch, expert, 0),
                       std::size_t(count[b] - 1) * combine_row_bytes_ + wire_bytes, &st);
    if (dst[b] == nullptr) return st;
  }
  HP_RETURN_IF_ERROR(for_each_share(
      config_.chip, std::int64_t(dst.size()), [&](std::int64_t b0, std::int64_t b1, int) {
        for (auto b = std::size_t(b0); b < std::size_t(b1); ++b) {
          const std::int64_t le = std::int64_t(b / R);
          for (std::int64_t i = 0; i < count[b]; ++i) {
            stream_copy(dst[b] + std::size_t(i) * combine_row_bytes_,
                        out_bytes + std::size_t(le * per_expert + first[b] + i) * wire_bytes,
                        wire_bytes);
          }
        }
        return Status::ok();
      }));
  for (std::size_t b = 0; b < dst.size(); ++b) {
    if (count[b] == 0) continue;
    const std::int64_t expert = rank_ * local + std::int64_t(b / R);
    HP_RETURN_IF_ERROR(comm.close(int(b % R), low_latency_.back_row(epoch, expert, 0), dst[b],
                                  std::size_t(count[b] - 1) * combine_row_bytes_ + wire_bytes));
  }
  for (int i = 0; i < ranks_; ++i) {
    HP_RETURN_IF_ERROR(
        comm.signal(status_.flag(kLowLatencyCombine, rank_), epoch, (rank_ + 1 + i) % ranks_));
  }
  for (int d = 0; d < ranks_; ++d) {
    HP_RETURN_IF_ERROR(hp::shmem::signal_wait_until(status_.flag(kLowLatencyCombine, d),
                                                    hp::shmem::Cmp::kGe, epoch));
  }
  if (Status rejected = check_rejections(kLowLatencyCombine, epoch, "low_latency_combine");
      !rejected.is_ok()) {
    HP_RETURN_IF_ERROR(comm.quiet());
    return rejected;
  }
  // ---- reduce: y[t] = sum over k of w[t][k] x row of (expert, slot), in k order -------------
  scratch_.resize(std::size_t(share_workers(config_.chip)));
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, h.tokens, [&](std::int64_t t0, std::int64_t t1, int worker) {
        const auto gather = [&](std::int64_t t, std::vector<const void*>& rows,
                                std::vector<float>& row_weights) {
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int64_t e = h.topk_idx[std::size_t(t * topk + k)];
            if (e < 0) continue;
            rows.push_back(low_latency_.back_row(epoch, e, h.pair_slot[std::size_t(t * topk + k)]));
            row_weights.push_back(weights[t * topk + k]);
          }
        };
        return sum_tokens_into_y(scratch_[std::size_t(worker)], wire, y, t0, t1, gather);
      }));
  return comm.quiet();
}

}  // namespace hp::moe
