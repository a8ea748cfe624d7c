// hp-example-vector-add: a vector-add pipeline on the task runtime. The vectors are cut in
// chunks; per chunk, inside its own scope, t = x + y goes to a runtime-allocated OUTPUT (the heap
// ring) and z = alpha * t into the caller's z; then one task sums z. Chunks are independent,
// so their tasks overlap on the vector cores; each scale waits for its add (RAW through t) and
// the sum for every scale (RAW through z). Checked against a plain loop; exit status 1 on any
// mismatch.
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/core.h>

#include "example_common.h"

using hp::DType;
using hp::Status;
using hp::TensorView;
using hp::runtime::CallConfig;
using hp::runtime::Orchestrator;
using hp::runtime::SubmitResult;
using hp::runtime::TaskArgs;

int main(int argc, char** argv) {
  CLI::App app{"A vector-add pipeline of tasks (z = alpha (x + y) by chunks, then sum(z))."};
  hp::examples::ExampleOptions options;
  hp::examples::add_example_options(app, &options);
  std::int64_t n = 1 << 16, chunk = 4096;
  int block_dim = 2;
  float alpha = 0.5f;
  app.add_option("--n", n, "vector length")->check(CLI::PositiveNumber);
  app.add_option("--chunk", chunk, "elements per chunk")->check(CLI::PositiveNumber);
  app.add_option("--block-dim", block_dim, "blocks per task")->check(CLI::PositiveNumber);
  app.add_option("--alpha", alpha, "the scale");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<hp::runtime::ChipWorker> worker;
  int add = -1, scale = -1, sum = -1;
  Status s = hp::examples::make_worker(options, &worker);
  if (s.is_ok()) s = hp::examples::register_example_kernel(*worker, "hp_example_add_f32", &add);
  if (s.is_ok()) s = hp::examples::register_example_kernel(*worker, "hp_example_scale_f32", &scale);
  if (s.is_ok()) s = hp::examples::register_example_kernel(*worker, "hp_example_sum_f32", &sum);
  if (!s.is_ok()) return hp::examples::fail("vector-add", s);

  std::vector<float> x(static_cast<std::size_t>(n)), y(x.size()), z(x.size(), -1.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.25f;
    y[i] = 1.0f - static_cast<float>(i % 13);
  }
  float total = 0;
  int tasks = 0;
  const CallConfig vector{.block_num = block_dim};
  s = Orchestrator::run(
      *worker,
      [&](Orchestrator& o) -> Status {
        for (std::int64_t begin = 0; begin < n; begin += chunk) {
          const std::int64_t len = std::min(chunk, n - begin);
          auto scope = o.scope();  // t of this chunk is released when the scope ends
          TaskArgs add_args = TaskArgs()
                                  .input(TensorView(x.data() + begin, DType::kFP32, {len}))
                                  .input(TensorView(y.data() + begin, DType::kFP32, {len}))
                                  .output(DType::kFP32, {len});
          if (begin == 0) add_args.dump();  // --dump-args 1 captures the first chunk's add
          SubmitResult t;
          HP_RETURN_IF_ERROR(o.submit(add, add_args, vector, &t));
          HP_RETURN_IF_ERROR(
              o.submit(scale,
                       TaskArgs()
                           .input(t.outputs[0])
                           .output_existing(TensorView(z.data() + begin, DType::kFP32, {len}))
                           .scalar(alpha),
                       vector));
          tasks += 2;
        }
        ++tasks;
        return o.submit(sum, TaskArgs()
                                 .input(TensorView(z.data(), DType::kFP32, {n}))
                                 .output_existing(TensorView(&total, DType::kFP32, {1}))
                                 .dump({1}));
      },
      options.run);
  if (!s.is_ok()) return hp::examples::fail("vector-add", s);

  double golden_total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float golden = alpha * (x[i] + y[i]);
    golden_total += golden;
    if (z[i] != golden) {
      fmt::print(stderr, "vector-add: MISMATCH z[{}] = {}, expected {}\n", i, z[i], golden);
      return 1;
    }
  }
  if (std::abs(total - golden_total) > 1e-4 * (1 + std::abs(golden_total))) {
    fmt::print(stderr, "vector-add: MISMATCH sum = {}, expected {}\n", total, golden_total);
    return 1;
  }
  fmt::print("vector-add: {} elements, {} tasks, sum {}: golden check passed\n", n, tasks, total);
  hp::examples::report_diagnostics(options.run.diagnostics);
  return 0;
}
