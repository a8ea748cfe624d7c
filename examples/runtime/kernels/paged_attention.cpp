// hp_example_paged_attention (paged_attention.h): the cube block of a group computes a pair's
// scores, its vector blocks the softmax and their columns of softmax . V.
#include "paged_attention.h"

#include <algorithm>
#include <cmath>

#include "kernel_checks.h"

using hp::ErrorCode;
using hp::Status;
using hp::TensorView;
using hp::examples::PagedAttentionShape;

namespace {

constexpr const char* kName = "hp_example_paged_attention";

struct Tensors {
  const float* query;
  const float* key_cache;
  const float* value_cache;
  const std::int32_t* block_table;
  const std::int32_t* context_lens;
  float* scores;
  float* out;
};

Status expect_contiguous(const TensorView& t, const char* what, hp::DType dtype, int ndim) {
  HP_RETURN_IF_ERROR(hp::examples::expect_rows(t, what, dtype, ndim));
  HP_ENSURE(t.is_contiguous(), ErrorCode::kInvalidArgument, "{} {}: must be contiguous: {}", kName,
            what, t.to_string());
  return Status::ok();
}

// Checks every layout of paged_attention.h and derives the shape from them.
Status read_args(const hp::runtime::TaskArgs& args, PagedAttentionShape* shape, Tensors* t) {
  HP_RETURN_IF_ERROR(hp::examples::expect_args(args, kName, 7, 1));
  const TensorView& q = args.tensor(0);
  const TensorView& k = args.tensor(1);
  const TensorView& v = args.tensor(2);
  const TensorView& table = args.tensor(3);
  const TensorView& lens = args.tensor(4);
  const TensorView& scores = args.tensor(5);
  const TensorView& out = args.tensor(6);
  HP_RETURN_IF_ERROR(expect_contiguous(q, "query", hp::DType::kFP32, 3));
  HP_RETURN_IF_ERROR(expect_contiguous(k, "key_cache", hp::DType::kFP32, 4));
  HP_RETURN_IF_ERROR(expect_contiguous(v, "value_cache", hp::DType::kFP32, 4));
  HP_RETURN_IF_ERROR(expect_contiguous(table, "block_table", hp::DType::kInt32, 2));
  HP_RETURN_IF_ERROR(expect_contiguous(lens, "context_lens", hp::DType::kInt32, 1));
  HP_RETURN_IF_ERROR(expect_contiguous(scores, "scores", hp::DType::kFP32, 2));
  HP_RETURN_IF_ERROR(expect_contiguous(out, "out", hp::DType::kFP32, 3));
  *shape = {.batch = q.dim(0),
            .num_heads = q.dim(1),
            .num_kv_heads = k.dim(2),
            .head_dim = q.dim(2),
            .num_pages = k.dim(0),
            .page_size = k.dim(1),
            .max_pages_per_seq = table.dim(1)};
  const PagedAttentionShape& s = *shape;
  HP_ENSURE(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0 && k.dim(3) == s.head_dim &&
                v.dim(0) == k.dim(0) && v.dim(1) == k.dim(1) && v.dim(2) == k.dim(2) &&
                v.dim(3) == k.dim(3),
            ErrorCode::kShapeMismatch,
            "{}: query {}, key_cache {}, value_cache {}: expected caches [pages, page_size, "
            "kv_heads, head_dim] alike, with num_heads a multiple of kv_heads",
            kName, q.to_string(), k.to_string(), v.to_string());
  HP_ENSURE(table.dim(0) == s.batch && lens.dim(0) == s.batch && out.dim(0) == s.batch &&
                out.dim(1) == s.num_heads && out.dim(2) == s.head_dim &&
                scores.dim(0) == s.batch * s.num_heads && scores.dim(1) >= s.max_context(),
            ErrorCode::kShapeMismatch,
            "{}: block_table {}, context_lens {}, scores {}, out {} do not match batch {}, "
            "heads {}, head_dim {}, max context {}",
            kName, table.to_string(), lens.to_string(), scores.to_string(), out.to_string(),
            s.batch, s.num_heads, s.head_dim, s.max_context());
  *t = {static_cast<const float*>(q.data()),
        static_cast<const float*>(k.data()),
        static_cast<const float*>(v.data()),
        static_cast<const std::int32_t*>(table.data()),
        static_cast<const std::int32_t*>(lens.data()),
        static_cast<float*>(scores.data()),
        static_cast<float*>(out.data())};
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int32_t len = t->context_lens[b];
    HP_ENSURE(len >= 1 && len <= s.max_context(), ErrorCode::kOutOfRange,
              "{}: context_lens[{}] = {} must be in [1, {}]", kName, b, len, s.max_context());
    for (std::int64_t p = 0; p < (len + s.page_size - 1) / s.page_size; ++p) {
      const std::int32_t page = t->block_table[b * s.max_pages_per_seq + p];
      HP_ENSURE(page >= 0 && page < s.num_pages, ErrorCode::kOutOfRange,
                "{}: block_table[{}][{}] = {} is not a page in [0, {})", kName, b, p, page,
                s.num_pages);
    }
  }
  return Status::ok();
}

// Element (token t, kv head) of a cache, found through the block table.
const float* cache_row(const float* cache, const PagedAttentionShape& s, const std::int32_t* pages,
                       std::int64_t token, std::int64_t kv_head) {
  const std::int64_t page = pages[token / s.page_size];
  return cache +
         ((page * s.page_size + token % s.page_size) * s.num_kv_heads + kv_head) * s.head_dim;
}

void cube_scores(const PagedAttentionShape& s, const Tensors& t, std::int64_t pair, float scale) {
  const std::int64_t b = pair / s.num_heads, h = pair % s.num_heads;
  const std::int64_t kv_head = h / (s.num_heads / s.num_kv_heads);
  const float* q = t.query + pair * s.head_dim;
  const std::int32_t* pages = t.block_table + b * s.max_pages_per_seq;
  float* row = t.scores + pair * (s.max_context());
  for (std::int64_t token = 0; token < t.context_lens[b]; ++token) {
    const float* k = cache_row(t.key_cache, s, pages, token, kv_head);
    float dot = 0;
    for (std::int64_t d = 0; d < s.head_dim; ++d) dot += q[d] * k[d];
    row[token] = dot * scale;
  }
}

void vector_softmax_v(const PagedAttentionShape& s, const Tensors& t, std::int64_t pair,
                      std::int64_t d_lo, std::int64_t d_hi) {
  const std::int64_t b = pair / s.num_heads, h = pair % s.num_heads;
  const std::int64_t kv_head = h / (s.num_heads / s.num_kv_heads);
  const std::int32_t* pages = t.block_table + b * s.max_pages_per_seq;
  const float* row = t.scores + pair * (s.max_context());
  const std::int64_t len = t.context_lens[b];
  const float max = *std::max_element(row, row + len);
  float* out = t.out + pair * s.head_dim;
  std::fill(out + d_lo, out + d_hi, 0.0f);
  float sum = 0;
  for (std::int64_t token = 0; token < len; ++token) {
    const float p = std::exp(row[token] - max);
    sum += p;
    const float* v = cache_row(t.value_cache, s, pages, token, kv_head);
    for (std::int64_t d = d_lo; d < d_hi; ++d) out[d] += p * v[d];
  }
  for (std::int64_t d = d_lo; d < d_hi; ++d) out[d] /= sum;
}

}  // namespace

HP_EXAMPLE_KERNEL hp_example_paged_attention(const hp::runtime::TaskArgs& args,
                                             hp::platform::BlockContext& block) {
  PagedAttentionShape shape;
  Tensors t{};
  HP_RETURN_IF_ERROR(read_args(args, &shape, &t));
  const float scale = args.scalar_as<float>(0);
  const std::int64_t pairs = shape.batch * shape.num_heads;
  const int group = block.block_idx();
  const int groups = block.block_dim();
  if (block.core_type() == hp::platform::CoreType::kCube) {
    for (std::int64_t pair = group; pair < pairs; pair += groups) {
      if (block.cancelled()) return Status::error(ErrorCode::kAborted, "{}: cancelled", kName);
      cube_scores(shape, t, pair, scale);
      HP_RETURN_IF_ERROR(block.set_flag(group));  // release: the row is written
    }
    return Status::ok();
  }
  const auto [d_lo, d_hi] =
      hp::examples::share(shape.head_dim, block.sub_block_idx(), block.sub_block_dim());
  std::uint32_t ordinal = 0;
  for (std::int64_t pair = group; pair < pairs; pair += groups) {
    HP_RETURN_IF_ERROR(block.wait_flag(group, ++ordinal));  // acquire: the pair's row
    vector_softmax_v(shape, t, pair, d_lo, d_hi);
  }
  return Status::ok();
}
