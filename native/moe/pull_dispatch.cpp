// Buffer's pull dispatch (buffer.h, DispatchPath::kPull): each rank writes its tokens once into
// its own send window, before the count exchange, and every destination reads them there.
#include <cstring>

#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;

namespace {

// Where the arrays of a send half start (buffer.h: payload, scale, expert, weight, list).
struct SendOffsets {
  std::size_t scale, expert, weight, list, half;
};

SendOffsets send_offsets(const BufferConfig& c, int ranks) {
  const auto tmax = std::size_t(c.max_tokens_per_rank), pairs = tmax * std::size_t(c.topk);
  SendOffsets o{};
  o.scale = round64(tmax * std::size_t(c.hidden * c.max_element_bytes));
  o.expert = o.scale + round64(tmax * sizeof(float));
  o.weight = o.expert + round64(pairs * sizeof(std::int32_t));
  o.list = o.weight + round64(pairs * sizeof(float));
  o.half = o.list + round64(std::size_t(ranks) * tmax * sizeof(std::int32_t));
  return o;
}

}  // namespace

// (Collective: create calls it on every rank.)
Status Buffer::allocate_send_window() {
  send_half_bytes_ = send_offsets(config_, ranks_).half;
  const Status s = reallocate_symmetric(&send_, 2 * send_half_bytes_);
  if (!s.is_ok()) {
    return Status::error(
        s.code(),
        "the pull dispatch's send window of 2 x {} bytes ({}): raise HP_SHMEM_HEAP_SIZE "
        "or lower max_tokens_per_rank",
        send_half_bytes_, s.message());
  }
  return Status::ok();
}

Buffer::SendHalf Buffer::send_half(std::uint64_t epoch, int rank) const {
  const SendOffsets o = send_offsets(config_, ranks_);
  auto* half =
      static_cast<std::uint8_t*>(hp::shmem::ptr(send_ + (epoch % 2) * send_half_bytes_, rank));
  return {.payload = half,
          .scale = reinterpret_cast<float*>(half + o.scale),
          .expert = reinterpret_cast<std::int32_t*>(half + o.expert),
          .list = reinterpret_cast<std::int32_t*>(half + o.list),
          .weight = reinterpret_cast<float*>(half + o.weight)};
}

// This rank's half of `epoch` gets the tokens' experts, weights, unquantised rows (prepare_dispatch
// quantised into it already) and the list of tokens for each destination. The half's readers
// are done: they read it in dispatch n - 2, and every rank left that before entering the count
// exchange of dispatch n - 1, which this rank has passed.
Status Buffer::publish_tokens(const DispatchArgs& a, std::uint64_t epoch,
                              const DispatchLayout& layout) {
  const SendHalf mine = send_half(epoch, rank_);
  const std::int64_t tokens = layout.num_tokens, topk = config_.topk;
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < topk; ++k)
      mine.expert[t * topk + k] = std::int32_t(topk_at(a.topk_idx, t, k));
  }
  if (tokens > 0) std::memcpy(mine.weight, weights, std::size_t(tokens * topk) * sizeof(float));
  for (int d = 0; d < ranks_; ++d) {
    std::int32_t* list = mine.list + std::int64_t(d) * config_.max_tokens_per_rank;
    std::int64_t n = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      if (layout.in_rank(t, d)) list[n++] = std::int32_t(t);
    }
  }
  if (a.quant == Quant::kDynamicInt8) return Status::ok();
  const std::size_t row_bytes = std::size_t(config_.hidden) * a.x.element_size();
  const auto* x = static_cast<const std::uint8_t*>(a.x.data());
  return for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
    std::memcpy(mine.payload + std::size_t(t0) * row_bytes, x + std::size_t(t0) * row_bytes,
                std::size_t(t1 - t0) * row_bytes);
    return Status::ok();
  });
}

}  // namespace hp::moe
