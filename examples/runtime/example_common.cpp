#include "example_common.h"

#include <filesystem>
#include <system_error>

#include <fmt/core.h>

#include "kernels/example_kernels.h"
#include "runtime/callable.h"

namespace hp::examples {

void add_example_options(CLI::App& app, ExampleOptions* options) {
  runtime::DiagnosticsConfig& d = options->run.diagnostics;
  app.add_option("--dump-args", d.dump_args,
                 "argument dumps: 0 off, 1 the marked arguments, 2 every argument "
                 "(tensor_dump.json + tensor_dump.bin)")
      ->check(CLI::Range(0, 2));
  app.add_flag("--enable-scope-stats", d.scope_stats,
               "per-scope ring high-water marks (scope_stats.jsonl)");
  app.add_flag("--enable-dep-gen", d.dep_gen, "the dependency graph (deps.json)");
  app.add_flag("--enable-swimlane", d.swimlane,
               "a Chrome trace of the run (swimlane.json; opens in Perfetto)");
  app.add_option("--output-prefix", d.output_prefix, "the directory the diagnostics go to");
  app.add_option("--cube", options->num_cube, "cube cores of the chip")->check(CLI::PositiveNumber);
  app.add_option("--vector", options->num_vector, "vector cores of the chip (1 or 2 per cube core)")
      ->check(CLI::PositiveNumber);
}

Status make_worker(const ExampleOptions& options, std::unique_ptr<runtime::ChipWorker>* worker) {
  HP_ENSURE(!options.run.diagnostics.any() || !options.run.diagnostics.output_prefix.empty(),
            ErrorCode::kInvalidArgument,
            "a diagnostic is on but no --output-prefix DIR says where its files go");
  return runtime::ChipWorker::create(
      {.num_cube = options.num_cube, .num_vector = options.num_vector}, worker);
}

Status register_example_kernel(runtime::ChipWorker& worker, const std::string& symbol, int* slot) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  HP_ENSURE(!ec, ErrorCode::kSystemError, "reading /proc/self/exe: {}", ec.message());
  const std::filesystem::path library =
      exe.parent_path().parent_path() / "lib" / kExampleKernelsLibrary;
  runtime::Callable callable;
  HP_RETURN_IF_ERROR(runtime::Callable::from_library(library.string(), symbol, &callable));
  return worker.register_callable(callable, slot);
}

void report_diagnostics(const runtime::DiagnosticsConfig& diagnostics) {
  if (!diagnostics.any()) return;
  fmt::print("diagnostics in {}:", diagnostics.output_prefix);
  if (diagnostics.dump_args != 0) {
    fmt::print(" {} {} (level {})", runtime::kTensorDumpJsonFile, runtime::kTensorDumpBinFile,
               diagnostics.dump_args);
  }
  if (diagnostics.scope_stats) fmt::print(" {}", runtime::kScopeStatsFile);
  if (diagnostics.dep_gen) fmt::print(" {}", runtime::kDepsFile);
  if (diagnostics.swimlane) fmt::print(" {}", runtime::kSwimlaneFile);
  fmt::print("\n");
}

int fail(const char* example, const Status& status) {
  fmt::print(stderr, "{}: FAILED: {}\n", example, status.to_string());
  return 1;
}

}  // namespace hp::examples
