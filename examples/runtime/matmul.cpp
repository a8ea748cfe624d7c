// hp-example-matmul: C = act(A B + bias) as a DAG of tile tasks. Per tile (i, j) of C, one GEMM
// task per K chunk on the cube cores (the first writes the tile, OUTPUT_EXISTING; the others
// accumulate into it, INOUT: a RAW/WAW chain), then a bias + activation task on the vector
// cores (INOUT, after the last chunk). Tiles are strided views of C, so tiles never depend on
// each other and run at once. The GEMM is a plain C++ tile kernel (kernels/tile_gemm_kernels.cpp:
// native/kernels' GEMMs are in the multicore component, which the core cannot link). Checked
// against a plain triple loop; exit status 1 on any mismatch.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "example_common.h"
#include "kernels/example_kernels.h"

using hp::DType;
using hp::Status;
using hp::TensorView;
using hp::examples::Activation;
using hp::platform::LaunchMode;
using hp::runtime::Orchestrator;
using hp::runtime::TaskArgs;

namespace {

// A [rows, cols] window at (r, c) of a row-major fp32 matrix with `ld` columns.
TensorView window(std::vector<float>& m, std::int64_t ld, std::int64_t r, std::int64_t c,
                  std::int64_t rows, std::int64_t cols) {
  const std::int64_t shape[] = {rows, cols};
  const std::int64_t strides[] = {ld, 1};
  return TensorView(m.data() + r * ld + c, DType::kFP32, shape, strides);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A tiled matmul + bias + activation DAG of tasks: C = act(A B + bias)."};
  hp::examples::ExampleOptions options;
  hp::examples::add_example_options(app, &options);
  std::int64_t m = 192, n = 160, k = 256, tile_m = 64, tile_n = 64, tile_k = 128;
  int gemm_blocks = 1, epilogue_blocks = 2;
  std::string activation_name = "gelu";
  app.add_option("--m", m, "rows of A and C")->check(CLI::PositiveNumber);
  app.add_option("--n", n, "columns of B and C")->check(CLI::PositiveNumber);
  app.add_option("--k", k, "columns of A, rows of B")->check(CLI::PositiveNumber);
  app.add_option("--tile-m", tile_m, "tile rows")->check(CLI::PositiveNumber);
  app.add_option("--tile-n", tile_n, "tile columns")->check(CLI::PositiveNumber);
  app.add_option("--tile-k", tile_k, "K chunk per GEMM task")->check(CLI::PositiveNumber);
  app.add_option("--gemm-blocks", gemm_blocks, "blocks per GEMM task (cube)")
      ->check(CLI::PositiveNumber);
  app.add_option("--epilogue-blocks", epilogue_blocks, "blocks per bias+activation task (vector)")
      ->check(CLI::PositiveNumber);
  app.add_option("--activation", activation_name, "none, relu or gelu")
      ->check(CLI::IsMember({"none", "relu", "gelu"}));
  CLI11_PARSE(app, argc, argv);
  const Activation activation = std::map<std::string, Activation>{
      {"none", Activation::kNone},
      {"relu", Activation::kRelu},
      {"gelu", Activation::kGelu}}.at(activation_name);

  std::unique_ptr<hp::runtime::ChipWorker> worker;
  int gemm = -1, bias_act = -1;
  Status s = hp::examples::make_worker(options, &worker);
  if (s.is_ok())
    s = hp::examples::register_example_kernel(*worker, "hp_example_tile_gemm_f32", &gemm);
  if (s.is_ok())
    s = hp::examples::register_example_kernel(*worker, "hp_example_bias_act_f32", &bias_act);
  if (!s.is_ok()) return hp::examples::fail("matmul", s);

  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  std::vector<float> bias(static_cast<std::size_t>(n)), c(static_cast<std::size_t>(m * n), NAN);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 16;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>(static_cast<int>(i % 11) - 5) / 8;
  for (std::size_t i = 0; i < bias.size(); ++i)
    bias[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 4;

  int tasks = 0;
  s = Orchestrator::run(
      *worker,
      [&](Orchestrator& o) -> Status {
        for (std::int64_t i = 0; i < m; i += tile_m) {
          auto row_scope = o.scope();  // one scope per row of tiles
          const std::int64_t tm = std::min(tile_m, m - i);
          for (std::int64_t j = 0; j < n; j += tile_n) {
            const std::int64_t tn = std::min(tile_n, n - j);
            const TensorView c_tile = window(c, n, i, j, tm, tn);
            for (std::int64_t kc = 0; kc < k; kc += tile_k) {
              const std::int64_t tk = std::min(tile_k, k - kc);
              TaskArgs args =
                  TaskArgs().input(window(a, k, i, kc, tm, tk)).input(window(b, n, kc, j, tk, tn));
              if (kc == 0)
                args.output_existing(c_tile);
              else
                args.inout(c_tile);
              args.scalar(static_cast<std::int32_t>(kc != 0));
              HP_RETURN_IF_ERROR(
                  o.submit(gemm, args, {.mode = LaunchMode::kCube, .block_num = gemm_blocks}));
              ++tasks;
            }
            TaskArgs epilogue = TaskArgs()
                                    .inout(c_tile)
                                    .input(TensorView(bias.data() + j, DType::kFP32, {tn}))
                                    .scalar(static_cast<std::int32_t>(activation));
            if (i == 0 && j == 0)
              epilogue.dump();  // --dump-args 1 captures the first tile's epilogue
            HP_RETURN_IF_ERROR(o.submit(
                bias_act, epilogue, {.mode = LaunchMode::kVector, .block_num = epilogue_blocks}));
            ++tasks;
          }
        }
        return Status::ok();
      },
      options.run);
  if (!s.is_ok()) return hp::examples::fail("matmul", s);

  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t kk = 0; kk < k; ++kk) acc += double(a[i * k + kk]) * b[kk * n + j];
      const float golden = hp::examples::activate(static_cast<float>(acc) + bias[j], activation);
      if (!(std::abs(c[i * n + j] - golden) <= 1e-4f * (1 + std::abs(golden)))) {
        fmt::print(stderr, "matmul: MISMATCH C[{}, {}] = {}, expected {}\n", i, j, c[i * n + j],
                   golden);
        return 1;
      }
    }
  }
  fmt::print("matmul: C[{}, {}] = {}(A[{}, {}] B + bias), {} tasks: golden check passed\n", m, n,
             activation_name, m, k, tasks);
  hp::examples::report_diagnostics(options.run.diagnostics);
  return 0;
}
