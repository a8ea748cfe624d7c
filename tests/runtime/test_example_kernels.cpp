// The runtime examples' kernels (examples/runtime/kernels) on a chip, against plain references:
// the SPMD paged attention for several shapes and group counts (its cube -> vector flag hand-off),
// the tile GEMM with accumulation and the bias + activation epilogue on strided tiles, and
// their named argument errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/printers.h"
#include "kernels/example_kernels.h"
#include "kernels/paged_attention.h"
#include "runtime/chip_worker.h"

namespace hp::examples {
namespace {

using platform::LaunchMode;
using runtime::Callable;
using runtime::CallConfig;
using runtime::ChipWorker;
using runtime::KernelEntry;
using runtime::TaskArgs;
using ::testing::HasSubstr;

std::unique_ptr<ChipWorker> make_worker(int num_cube, int num_vector) {
  std::unique_ptr<ChipWorker> worker;
  const Status s = ChipWorker::create({.num_cube = num_cube, .num_vector = num_vector}, &worker);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return worker;
}

Status run(ChipWorker& worker, const char* name, KernelEntry entry, const TaskArgs& args,
           const CallConfig& config) {
  int slot = -1;
  HP_RETURN_IF_ERROR(worker.register_callable(Callable::from_function(name, entry, name), &slot));
  return worker.run(slot, args, config);
}

struct PagedAttentionCase {
  PagedAttentionShape shape;
  int num_cube;
  int num_vector;
  int block_num;
};

class ExamplesPagedAttention : public ::testing::TestWithParam<PagedAttentionCase> {};

TEST_P(ExamplesPagedAttention, MatchesTheReference) {
  const auto [shape_in, num_cube, num_vector, block_num] = GetParam();
  PagedAttentionShape s = shape_in;
  s.num_pages = s.batch * s.max_pages_per_seq + 2;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> q(static_cast<std::size_t>(s.batch * s.num_heads * s.head_dim));
  std::vector<float> k(
      static_cast<std::size_t>(s.num_pages * s.page_size * s.num_kv_heads * s.head_dim));
  std::vector<float> v(k.size());
  for (auto* t : {&q, &k, &v}) {
    for (float& x : *t) x = uniform(rng);
  }
  std::vector<std::int32_t> pages(static_cast<std::size_t>(s.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<std::int32_t> table(pages.begin(), pages.begin() + s.batch * s.max_pages_per_seq);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(s.batch));
  for (std::size_t b = 0; b < lens.size(); ++b) {
    // 1, short, ..., odd lengths
    lens[b] = static_cast<std::int32_t>(1 + (b * 37) % s.max_context());
  }
  lens.back() = static_cast<std::int32_t>(s.max_context());
  std::vector<float> scores(static_cast<std::size_t>(s.batch * s.num_heads * s.max_context()));
  std::vector<float> out(q.size(), NAN);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

  auto worker = make_worker(num_cube, num_vector);
  const TaskArgs args =
      TaskArgs()
          .input(TensorView(q.data(), DType::kFP32, {s.batch, s.num_heads, s.head_dim}))
          .input(TensorView(k.data(), DType::kFP32,
                            {s.num_pages, s.page_size, s.num_kv_heads, s.head_dim}))
          .input(TensorView(v.data(), DType::kFP32,
                            {s.num_pages, s.page_size, s.num_kv_heads, s.head_dim}))
          .input(TensorView(table.data(), DType::kInt32, {s.batch, s.max_pages_per_seq}))
          .input(TensorView(lens.data(), DType::kInt32, {s.batch}))
          .output_existing(
              TensorView(scores.data(), DType::kFP32, {s.batch * s.num_heads, s.max_context()}))
          .output_existing(TensorView(out.data(), DType::kFP32, {s.batch, s.num_heads, s.head_dim}))
          .scalar(scale);
  const Status status = run(*worker, "hp_example_paged_attention", hp_example_paged_attention, args,
                            {.mode = LaunchMode::kMix, .block_num = block_num});
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  const std::vector<float> golden =
      paged_attention_reference(s, q.data(), k.data(), v.data(), table.data(), lens.data(), scale);
  for (std::size_t i = 0; i < golden.size(); ++i) {
    ASSERT_NEAR(out[i], golden[i], 1e-4f * (1 + std::abs(golden[i]))) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ExamplesPagedAttention,
    ::testing::Values(
        // batch, heads, kv heads, head_dim, pages (derived), page_size, max pages per sequence
        PagedAttentionCase{{3, 4, 4, 16, 0, 4, 5}, 1, 1, 1},   // MHA, one group, ratio 1
        PagedAttentionCase{{4, 8, 2, 64, 0, 16, 8}, 2, 4, 2},  // GQA, two groups, ratio 2
        PagedAttentionCase{{5, 6, 3, 33, 0, 7, 3}, 2, 4, 1},   // odd head_dim split in two
        PagedAttentionCase{{2, 2, 1, 8, 0, 1, 9}, 3, 3, 3}));  // one token per page

TEST(ExamplesPagedAttention, RefusesAPageOutsideThePool) {
  PagedAttentionShape s{.batch = 1,
                        .num_heads = 1,
                        .num_kv_heads = 1,
                        .head_dim = 4,
                        .num_pages = 2,
                        .page_size = 2,
                        .max_pages_per_seq = 2};
  std::vector<float> q(4), k(16), v(16), scores(4), out(4);
  std::vector<std::int32_t> table = {1, 5}, lens = {4};
  auto worker = make_worker(1, 2);
  const TaskArgs args = TaskArgs()
                            .input(TensorView(q.data(), DType::kFP32, {1, 1, 4}))
                            .input(TensorView(k.data(), DType::kFP32, {2, 2, 1, 4}))
                            .input(TensorView(v.data(), DType::kFP32, {2, 2, 1, 4}))
                            .input(TensorView(table.data(), DType::kInt32, {1, 2}))
                            .input(TensorView(lens.data(), DType::kInt32, {1}))
                            .output_existing(TensorView(scores.data(), DType::kFP32, {1, 4}))
                            .output_existing(TensorView(out.data(), DType::kFP32, {1, 1, 4}))
                            .scalar(0.5f);
  const Status status = run(*worker, "hp_example_paged_attention", hp_example_paged_attention, args,
                            {.mode = LaunchMode::kMix, .block_num = 1});
  EXPECT_EQ(status.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("block_table[0][1] = 5"));
  (void)s;
}

// C[2:5, 3:9] of a 6 x 10 matrix = relu(A B + bias), the GEMM in two K chunks.
TEST(ExamplesTileKernels, GemmChunksAndEpilogueOnAStridedTile) {
  const std::int64_t m = 3, n = 6, k = 5, ld = 10;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  std::vector<float> bias(static_cast<std::size_t>(n)), c(60, 100.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) - 1;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) - 3;
  const std::int64_t tile_shape[] = {m, n}, tile_strides[] = {ld, 1};
  const TensorView tile(c.data() + 2 * ld + 3, DType::kFP32, tile_shape, tile_strides);
  auto a_chunk = [&](std::int64_t k0, std::int64_t kn) {
    const std::int64_t shape[] = {m, kn}, strides[] = {k, 1};
    return TensorView(a.data() + k0, DType::kFP32, shape, strides);
  };
  auto b_chunk = [&](std::int64_t k0, std::int64_t kn) {
    return TensorView(b.data() + k0 * n, DType::kFP32, {kn, n});
  };
  auto worker = make_worker(2, 2);
  const CallConfig cube{.mode = LaunchMode::kCube, .block_num = 2};
  Status s = run(*worker, "gemm", hp_example_tile_gemm_f32,
                 TaskArgs()
                     .input(a_chunk(0, 3))
                     .input(b_chunk(0, 3))
                     .output_existing(tile)
                     .scalar(std::int32_t{0}),
                 cube);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  s = run(*worker, "gemm", hp_example_tile_gemm_f32,
          TaskArgs().input(a_chunk(3, 2)).input(b_chunk(3, 2)).inout(tile).scalar(std::int32_t{1}),
          cube);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  s = run(*worker, "bias_act", hp_example_bias_act_f32,
          TaskArgs()
              .inout(tile)
              .input(TensorView(bias.data(), DType::kFP32, {n}))
              .scalar(static_cast<std::int32_t>(Activation::kRelu)),
          {.mode = LaunchMode::kVector, .block_num = 3});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (std::int64_t r = 0; r < 6; ++r) {
    for (std::int64_t col = 0; col < ld; ++col) {
      float expected = 100.0f;  // outside the tile: untouched
      if (r >= 2 && r < 2 + m && col >= 3 && col < 3 + n) {
        float acc = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) acc += a[(r - 2) * k + kk] * b[kk * n + (col - 3)];
        expected = activate(acc + bias[col - 3], Activation::kRelu);
      }
      EXPECT_FLOAT_EQ(c[r * ld + col], expected) << "C[" << r << ", " << col << "]";
    }
  }
}

TEST(ExamplesTileKernels, NamedErrorsForBadArguments) {
  std::vector<float> x(8), y(4);
  auto worker = make_worker(1, 2);
  Status s = run(*worker, "add", hp_example_add_f32,
                 TaskArgs()
                     .input(TensorView(x.data(), DType::kFP32, {8}))
                     .input(TensorView(x.data(), DType::kFP32, {8}))
                     .output_existing(TensorView(y.data(), DType::kFP32, {4})),
                 {});
  EXPECT_EQ(s.code(), ErrorCode::kShapeMismatch) << s.to_string();
  s = run(*worker, "bias_act", hp_example_bias_act_f32,
          TaskArgs()
              .inout(TensorView(x.data(), DType::kFP32, {2, 4}))
              .input(TensorView(y.data(), DType::kFP32, {4}))
              .scalar(std::int32_t{7}),
          {});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("activation 7"));
  s = run(*worker, "scale", hp_example_scale_f32,
          TaskArgs().input(TensorView(x.data(), DType::kFP32, {8})), {});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected 2 tensors and 1 scalars"));
}

}  // namespace
}  // namespace hp::examples
