// paged_attention_reference (paged_attention.h): the golden, token by token, in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "paged_attention.h"

namespace hp::examples {

std::vector<float> paged_attention_reference(const PagedAttentionShape& s, const float* query,
                                             const float* key_cache, const float* value_cache,
                                             const std::int32_t* block_table,
                                             const std::int32_t* context_lens, float scale) {
  std::vector<float> out(static_cast<std::size_t>(s.batch * s.num_heads * s.head_dim));
  const std::int64_t group = s.num_heads / s.num_kv_heads;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t len = context_lens[b];
    for (std::int64_t h = 0; h < s.num_heads; ++h) {
      const float* q = query + (b * s.num_heads + h) * s.head_dim;
      std::vector<double> logits(static_cast<std::size_t>(len));
      std::vector<const float*> values(static_cast<std::size_t>(len));
      double max = -std::numeric_limits<double>::infinity();
      for (std::int64_t t = 0; t < len; ++t) {
        const std::int64_t page = block_table[b * s.max_pages_per_seq + t / s.page_size];
        const std::int64_t offset =
            ((page * s.page_size + t % s.page_size) * s.num_kv_heads + h / group) * s.head_dim;
        double dot = 0;
        for (std::int64_t d = 0; d < s.head_dim; ++d) dot += double(q[d]) * key_cache[offset + d];
        logits[t] = dot * scale;
        values[t] = value_cache + offset;
        max = std::max(max, logits[t]);
      }
      double sum = 0;
      for (double& l : logits) sum += (l = std::exp(l - max));
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        double acc = 0;
        for (std::int64_t t = 0; t < len; ++t) acc += logits[t] * values[t][d];
        out[(b * s.num_heads + h) * s.head_dim + d] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace hp::examples
