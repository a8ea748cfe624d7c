// dispatch_layout: where each token goes (DeepEP's get_dispatch_layout). Expert e lives on
// rank e / (E / R); a token goes to a rank once however many of its top-k experts live there.
#ifndef HYPER_PARALLEL_MOE_LAYOUT_H_
#define HYPER_PARALLEL_MOE_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"

namespace hp::moe {

struct DispatchLayout {
  std::int64_t num_tokens = 0, num_ranks = 0, num_experts = 0, topk = 0;
  std::vector<std::int64_t> tokens_per_rank;    // [R]: tokens with an expert on rank r
  std::vector<std::int64_t> tokens_per_expert;  // [E]: (token, expert) pairs per expert
  std::vector<std::uint8_t> is_token_in_rank;   // [T, R]: 1 when token t goes to rank r

  bool in_rank(std::int64_t t, std::int64_t r) const {
    return is_token_in_rank[std::size_t(t * num_ranks + r)] != 0;
  }
};

// topk_idx: int64 or int32 [T, K], contiguous; -1 = no expert. x_active_mask: optional uint8
// [T] (bool); an inactive token goes nowhere. Errors: OUT_OF_RANGE for an id outside
// [-1, num_experts); INVALID_ARGUMENT for an expert twice in one token's top-k, or
// num_experts not a positive multiple of num_ranks; SHAPE/DTYPE_MISMATCH for the tensors.
HP_API Status dispatch_layout(const TensorView& topk_idx, std::int64_t num_experts, int num_ranks,
                              DispatchLayout* out, const TensorView& x_active_mask = {});

// The expert id at token t, slot k of a validated topk_idx (int32 or int64).
inline std::int64_t topk_at(const TensorView& topk_idx, std::int64_t t, std::int64_t k) {
  const std::int64_t i = t * topk_idx.dim(1) + k;
  if (topk_idx.dtype() == DType::kInt32)
    return static_cast<const std::int32_t*>(topk_idx.data())[i];
  return static_cast<const std::int64_t*>(topk_idx.data())[i];
}

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_LAYOUT_H_
