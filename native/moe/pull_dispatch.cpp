// Buffer's pull dispatch (buffer.h, DispatchPath::kPull): each rank writes its tokens once into
// its own send window, before the count exchange, and every destination reads them there.
#include <cstring>

#include "moe/buffer.h"
#include "moe/shares.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;

// This rank's half of `epoch` gets the tokens' experts, weights, unquantised rows (prepare_dispatch
// quantised into it already) and the list of tokens for each destination. The half's readers
// are done: they read it in dispatch n - 2, and every rank left that before entering the count
// exchange of dispatch n - 1, which this rank has passed.
Status Buffer::publish_tokens(const DispatchArgs& a, std::uint64_t epoch,
                              const DispatchLayout& layout) {
  const SendWindow::Half mine = send_.half(epoch, rank_);
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
  // Quantised tokens are published by the quantiser; no tokens, nothing (x may be null).
  if (a.quant == Quant::kDynamicInt8 || tokens == 0) return Status::ok();
  const std::size_t row_bytes = std::size_t(config_.hidden) * a.x.element_size();
  const auto* x = static_cast<const std::uint8_t*>(a.x.data());
  return for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
    std::memcpy(mine.payload + std::size_t(t0) * row_bytes, x + std::size_t(t0) * row_bytes,
                std::size_t(t1 - t0) * row_bytes);
    return Status::ok();
  });
}

}  // namespace hp::moe
