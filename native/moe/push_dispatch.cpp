// Buffer's push dispatch (buffer.h, DispatchPath::kPush): each source writes each token's
// record into every destination's records window (buffer_regions.h, PushRecords).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;  // NOLINT: the window's own constants

// The push path's data: each token once per destination, as a record in its records window;
// tokens split over the workers. Every destination's region is opened first (staging under
// ShmemComm), the workers write their tokens' records (a token's record for d comes after
// those of earlier tokens in d), then each region is sent and flagged; then it waits for every
// source's records.
template <typename Comm>
Status Buffer::push_records(Comm& comm, const DispatchArgs& a, const Handle& h) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk;
  const bool quant = a.quant == Quant::kDynamicInt8;
  const std::int64_t tokens = a.x.dim(0);
  const std::uint64_t epoch = h.epoch;
  const auto R = std::size_t(ranks_);
  const std::size_t payload_bytes = std::size_t(hidden) * (quant ? 1 : a.x.element_size());
  const auto* x_bytes = static_cast<const std::uint8_t*>(a.x.data());
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  std::vector<std::uint8_t*> dst(R, nullptr);
  std::vector<std::int64_t> first(R, 0);  // my first record in d's window
  for (std::size_t d = 0; d < R; ++d) {
    for (std::size_t s = 0; s < std::size_t(rank_); ++s) first[d] += h.tok[s * R + d];
    const std::int64_t n = h.tok[std::size_t(rank_) * R + d];
    if (n == 0) continue;
    Status st;
    dst[d] =
        comm.open(int(d), records_.record(first[d]), std::size_t(n) * records_.record_bytes(), &st);
    if (dst[d] == nullptr) return st;
  }
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
        std::vector<std::int64_t> at(R, 0);
        for (std::int64_t t = 0; t < t0; ++t) {
          for (std::size_t d = 0; d < R; ++d) at[d] += h.layout.in_rank(t, std::int64_t(d));
        }
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::uint8_t* src =
              quant ? reinterpret_cast<const std::uint8_t*>(quant_rows_.data()) + t * hidden
                    : x_bytes + std::size_t(t) * payload_bytes;
          for (std::size_t d = 0; d < R; ++d) {
            if (!h.layout.in_rank(t, std::int64_t(d))) continue;
            std::uint8_t* rec = dst[d] + std::size_t(at[d]++) * records_.record_bytes();
            PushRecords::Meta meta{std::int32_t(t), quant ? quant_scales_[std::size_t(t)] : 0.0f};
            std::memcpy(rec, &meta, sizeof(meta));
            for (std::int64_t k = 0; k < topk; ++k) {
              records_.experts(rec)[k] = std::int32_t(topk_at(a.topk_idx, t, k));
              records_.weights(rec)[k] = weights[t * topk + k];
            }
            stream_copy(records_.payload(rec), src, payload_bytes);
          }
        }
        return Status::ok();
      }));
  for (int i = 0; i < ranks_; ++i) {
    const auto d = std::size_t((rank_ + 1 + i) % ranks_);
    const std::size_t bytes =
        std::size_t(h.tok[std::size_t(rank_) * R + d]) * records_.record_bytes();
    HP_RETURN_IF_ERROR(comm.close(int(d), records_.record(first[d]), dst[d], bytes));
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kDispatch, rank_), epoch, int(d)));
  }
  for (int s = 0; s < ranks_; ++s) {
    HP_RETURN_IF_ERROR(
        hp::shmem::signal_wait_until(status_.flag(kDispatch, s), hp::shmem::Cmp::kGe, epoch));
  }
  return Status::ok();
}
template Status Buffer::push_records(WindowComm&, const DispatchArgs&, const Handle&);
template Status Buffer::push_records(ShmemComm&, const DispatchArgs&, const Handle&);

// The records window for the counts of h: every rank sees the same counts, so all grow alike
// (collectively), or all fail before any token moves.
Status Buffer::grow_records(const Handle& h) {
  const auto R = std::size_t(ranks_);
  std::int64_t needed = 0;
  for (std::size_t d = 0; d < R; ++d) {
    std::int64_t incoming = 0;
    for (std::size_t s = 0; s < R; ++s) incoming += h.tok[s * R + d];
    needed = std::max(needed, incoming);
  }
  if (needed <= records_.capacity()) return Status::ok();
  if (!config_.grow_on_overflow) {
    return Status::error(
        ErrorCode::kOutOfMemory,
        "dispatch: a rank receives {} tokens, more than the {} the capacity factor {} holds (no "
        "token was sent; raise capacity_factor or set grow_on_overflow)",
        needed, records_.capacity(), config_.capacity_factor);
  }
  const std::int64_t lossless = std::int64_t(R) * config_.max_tokens_per_rank;
  std::int64_t capacity = records_.capacity();
  while (capacity < needed)
    capacity = std::min(lossless,
                        std::max(capacity + 1, std::int64_t(std::ceil(1.25 * double(capacity)))));
  return records_.grow(capacity);
}

}  // namespace hp::moe
