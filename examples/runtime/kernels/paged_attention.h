// SPMD paged attention: decode attention of one query token per sequence over a KV
// cache kept in fixed-size pages, run as ONE mixed task (LaunchMode::kMix) over block_num
// groups of one cube and `ratio` vector blocks.
//
// Layouts (fp32 unless said otherwise, all contiguous):
//   query        [batch, num_heads, head_dim]
//   key_cache    [num_pages, page_size, num_kv_heads, head_dim]
//   value_cache  [num_pages, page_size, num_kv_heads, head_dim]
//   block_table  int32 [batch, max_pages_per_seq]: the pages of sequence b, in token order;
//                token t of sequence b is slot t % page_size of page block_table[b][t / page_size]
//   context_lens int32 [batch]: tokens of each sequence (1 .. max_pages_per_seq * page_size)
//   scores       [batch * num_heads, max_pages_per_seq * page_size]: workspace, one row per
//                (sequence, head) pair (written by the cube blocks, read by the vector blocks)
//   out          [batch, num_heads, head_dim]
// Query head h reads KV head h / (num_heads / num_kv_heads) (grouped-query attention).
// Scalar 0: softmax scale (float; typically 1/sqrt(head_dim)).
//
// Tensor arguments in this order: query, key_cache, value_cache, block_table, context_lens
// (INPUT), scores (OUTPUT or OUTPUT_EXISTING), out (OUTPUT_EXISTING).
//
// Work split: group g takes the pairs p = g, g + block_num, ... . Its cube block computes the
// scaled scores q.k of pair p (gathering keys page by page) and adds 1 to flag g; each vector
// block of the group waits for flag g to reach the pair's ordinal, then computes the softmax
// of the row and its share of the head_dim columns of out = softmax . V. Needs block_num <=
// the chip's cube cores and <= the launch's num_flags.
#ifndef HYPER_PARALLEL_EXAMPLES_RUNTIME_PAGED_ATTENTION_H_
#define HYPER_PARALLEL_EXAMPLES_RUNTIME_PAGED_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "example_kernels.h"

namespace hp::examples {

struct PagedAttentionShape {
  std::int64_t batch = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t num_pages = 0;
  std::int64_t page_size = 0;
  std::int64_t max_pages_per_seq = 0;

  std::int64_t max_context() const { return max_pages_per_seq * page_size; }
};

// The golden: the same attention computed plainly (double accumulation), token by token.
std::vector<float> paged_attention_reference(const PagedAttentionShape& shape, const float* query,
                                             const float* key_cache, const float* value_cache,
                                             const std::int32_t* block_table,
                                             const std::int32_t* context_lens, float scale);

}  // namespace hp::examples

HP_EXAMPLE_KERNEL hp_example_paged_attention(const hp::runtime::TaskArgs& args,
                                             hp::platform::BlockContext& block);

#endif  // HYPER_PARALLEL_EXAMPLES_RUNTIME_PAGED_ATTENTION_H_
