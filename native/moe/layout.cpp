#include "moe/layout.h"

namespace hp::moe {

Status dispatch_layout(const TensorView& topk_idx, std::int64_t num_experts, int num_ranks,
                       DispatchLayout* out, const TensorView& x_active_mask) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "dispatch_layout: out is null");
  if (num_ranks < 1 || num_experts < 1 || num_experts % num_ranks != 0) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "num_experts = {} over {} ranks: expected a positive multiple of the number of ranks",
        num_experts, num_ranks);
  }
  HP_RETURN_IF_ERROR(topk_idx.expect_shape("topk_idx", {-1, -1}));
  if (topk_idx.dtype() != DType::kInt64 && topk_idx.dtype() != DType::kInt32) {
    return Status::error(ErrorCode::kDTypeMismatch, "topk_idx {}: expected int64 or int32",
                         topk_idx.to_string());
  }
  HP_ENSURE(topk_idx.is_contiguous(), ErrorCode::kInvalidArgument,
            "topk_idx {}: expected contiguous", topk_idx.to_string());
  const std::int64_t tokens = topk_idx.dim(0), topk = topk_idx.dim(1);
  const std::uint8_t* active = nullptr;
  if (x_active_mask.data() != nullptr) {
    HP_RETURN_IF_ERROR(x_active_mask.expect_shape("x_active_mask", {tokens}));
    HP_RETURN_IF_ERROR(x_active_mask.expect_dtype("x_active_mask (bool as uint8)", DType::kUInt8));
    HP_ENSURE(x_active_mask.is_contiguous(), ErrorCode::kInvalidArgument,
              "x_active_mask: expected contiguous");
    active = static_cast<const std::uint8_t*>(x_active_mask.data());
  }
  const std::int64_t per_rank = num_experts / num_ranks;
  DispatchLayout l;
  l.num_tokens = tokens;
  l.num_ranks = num_ranks;
  l.num_experts = num_experts;
  l.topk = topk;
  l.tokens_per_rank.assign(std::size_t(num_ranks), 0);
  l.tokens_per_expert.assign(std::size_t(num_experts), 0);
  l.is_token_in_rank.assign(std::size_t(tokens * num_ranks), 0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < topk; ++k) {
      const std::int64_t e = topk_at(topk_idx, t, k);
      if (e < -1 || e >= num_experts) {
        return Status::error(ErrorCode::kOutOfRange,
                             "topk_idx[{}][{}] = {}: expected an expert in [0, {}) or -1", t, k, e,
                             num_experts);
      }
      for (std::int64_t j = 0; j < k && e >= 0; ++j) {
        if (topk_at(topk_idx, t, j) == e) {
          return Status::error(
              ErrorCode::kInvalidArgument,
              "topk_idx[{}]: expert {} appears twice (slots {} and {}); each expert at most once",
              t, e, j, k);
        }
      }
      if (e < 0 || (active != nullptr && active[t] == 0)) continue;
      ++l.tokens_per_expert[std::size_t(e)];
      std::uint8_t& in = l.is_token_in_rank[std::size_t(t * num_ranks + e / per_rank)];
      if (!in) ++l.tokens_per_rank[std::size_t(e / per_rank)];
      in = 1;
    }
  }
  *out = std::move(l);
  return Status::ok();
}

}  // namespace hp::moe
