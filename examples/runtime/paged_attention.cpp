// hp-example-paged-attention: the SPMD paged attention on the task runtime. The KV
// cache lives in fixed-size pages of a shared pool, in shuffled order, addressed by a block
// table; sequences have different lengths. ONE mixed task (LaunchMode::kMix) over block_num
// groups computes every (sequence, head): each group's cube block the scores q.k, its vector
// blocks the softmax and softmax . V, handing rows over with cross-core flags
// (kernels/paged_attention.h). The scores workspace is a runtime-allocated OUTPUT. Checked
// against a plain reference; exit status 1 on any mismatch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <fmt/core.h>

#include "example_common.h"
#include "kernels/paged_attention.h"

using hp::DType;
using hp::Status;
using hp::TensorView;
using hp::examples::PagedAttentionShape;
using hp::platform::LaunchMode;
using hp::runtime::Orchestrator;
using hp::runtime::TaskArgs;

int main(int argc, char** argv) {
  CLI::App app{
      "SPMD paged attention: one mixed task over block_num cube+vector groups, KV "
      "cache in pages addressed by a block table."};
  hp::examples::ExampleOptions options;
  hp::examples::add_example_options(app, &options);
  PagedAttentionShape shape{.batch = 4,
                            .num_heads = 8,
                            .num_kv_heads = 2,
                            .head_dim = 64,
                            .num_pages = 0,
                            .page_size = 16,
                            .max_pages_per_seq = 8};
  int block_num = 0;
  unsigned seed = 7;
  app.add_option("--batch", shape.batch, "sequences")->check(CLI::PositiveNumber);
  app.add_option("--num-heads", shape.num_heads, "query heads")->check(CLI::PositiveNumber);
  app.add_option("--num-kv-heads", shape.num_kv_heads, "KV heads (divides num-heads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--head-dim", shape.head_dim, "head dimension")->check(CLI::PositiveNumber);
  app.add_option("--page-size", shape.page_size, "tokens per page")->check(CLI::PositiveNumber);
  app.add_option("--max-pages", shape.max_pages_per_seq, "pages per sequence at most")
      ->check(CLI::PositiveNumber);
  app.add_option("--block-num", block_num, "groups of the mixed task (default: every cube core)");
  app.add_option("--seed", seed, "seed of the random inputs");
  CLI11_PARSE(app, argc, argv);
  shape.num_pages = shape.batch * shape.max_pages_per_seq + 3;  // a pool with spare pages
  if (block_num <= 0) block_num = options.num_cube;

  std::unique_ptr<hp::runtime::ChipWorker> worker;
  int attention = -1;
  Status s = hp::examples::make_worker(options, &worker);
  if (s.is_ok())
    s = hp::examples::register_example_kernel(*worker, "hp_example_paged_attention", &attention);
  if (!s.is_ok()) return hp::examples::fail("paged-attention", s);

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::int64_t kv_elems =
      shape.num_pages * shape.page_size * shape.num_kv_heads * shape.head_dim;
  std::vector<float> query(
      static_cast<std::size_t>(shape.batch * shape.num_heads * shape.head_dim));
  std::vector<float> key_cache(static_cast<std::size_t>(kv_elems)), value_cache(key_cache.size());
  for (float& v : query) v = uniform(rng);
  for (float& v : key_cache) v = uniform(rng);
  for (float& v : value_cache) v = uniform(rng);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(shape.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);  // a sequence's pages are scattered in the pool
  std::vector<std::int32_t> block_table(
      static_cast<std::size_t>(shape.batch * shape.max_pages_per_seq));
  std::copy_n(pages.begin(), block_table.size(), block_table.begin());
  std::vector<std::int32_t> context_lens(static_cast<std::size_t>(shape.batch));
  std::uniform_int_distribution<std::int32_t> length(
      1, static_cast<std::int32_t>(shape.max_context()));
  for (auto& len : context_lens) len = length(rng);
  context_lens[0] = static_cast<std::int32_t>(shape.max_context());  // one full sequence
  std::vector<float> out(query.size(), NAN);
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));

  const auto& sh = shape;
  s = Orchestrator::run(
      *worker,
      [&](Orchestrator& o) -> Status {
        TaskArgs args =
            TaskArgs()
                .input(
                    TensorView(query.data(), DType::kFP32, {sh.batch, sh.num_heads, sh.head_dim}))
                .input(TensorView(key_cache.data(), DType::kFP32,
                                  {sh.num_pages, sh.page_size, sh.num_kv_heads, sh.head_dim}))
                .input(TensorView(value_cache.data(), DType::kFP32,
                                  {sh.num_pages, sh.page_size, sh.num_kv_heads, sh.head_dim}))
                .input(
                    TensorView(block_table.data(), DType::kInt32, {sh.batch, sh.max_pages_per_seq}))
                .input(TensorView(context_lens.data(), DType::kInt32, {sh.batch}))
                .output(DType::kFP32, {sh.batch * sh.num_heads, sh.max_context()})
                .output_existing(
                    TensorView(out.data(), DType::kFP32, {sh.batch, sh.num_heads, sh.head_dim}))
                .scalar(scale)
                .dump({3, 4, 6});  // --dump-args 1: the block table, the lengths and the result
        return o.submit(attention, args, {.mode = LaunchMode::kMix, .block_num = block_num});
      },
      options.run);
  if (!s.is_ok()) return hp::examples::fail("paged-attention", s);

  const std::vector<float> golden = hp::examples::paged_attention_reference(
      shape, query.data(), key_cache.data(), value_cache.data(), block_table.data(),
      context_lens.data(), scale);
  for (std::size_t i = 0; i < golden.size(); ++i) {
    if (!(std::abs(out[i] - golden[i]) <= 1e-4f * (1 + std::abs(golden[i])))) {
      fmt::print(stderr, "paged-attention: MISMATCH out[{}] = {}, expected {}\n", i, out[i],
                 golden[i]);
      return 1;
    }
  }
  fmt::print(
      "paged-attention: batch {}, {} heads ({} KV), head_dim {}, {} pages of {} tokens, one "
      "mixed task over {} groups: golden check passed\n",
      shape.batch, shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.num_pages,
      shape.page_size, block_num);
  hp::examples::report_diagnostics(options.run.diagnostics);
  return 0;
}
