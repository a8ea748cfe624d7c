// What the runtime examples share: the command line (the diagnostics flags and the
// chip's shape), the worker, the example kernel library's callables, and reporting.
//
//   --dump-args 0|1|2  --enable-scope-stats  --enable-dep-gen  --enable-swimlane
//   --output-prefix DIR  --cube N  --vector N
#ifndef HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_COMMON_H_
#define HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_COMMON_H_

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "runtime/chip_worker.h"
#include "runtime/orchestrator.h"

namespace hp::examples {

struct ExampleOptions {
  runtime::OrchestratorConfig run;  // .diagnostics from the flags
  int num_cube = 2;
  int num_vector = 4;
};

// Adds the diagnostics and chip flags to `app`, writing into `options`.
void add_example_options(CLI::App& app, ExampleOptions* options);

// INVALID_ARGUMENT when a diagnostic is on without --output-prefix.
Status make_worker(const ExampleOptions& options, std::unique_ptr<runtime::ChipWorker>* worker);

// Registers the entry point `symbol` of the example kernel library (found beside this
// executable: ../lib/libhyper_parallel_example_kernels.so).
Status register_example_kernel(runtime::ChipWorker& worker, const std::string& symbol, int* slot);

// Prints where the diagnostics went (when any is on).
void report_diagnostics(const runtime::DiagnosticsConfig& diagnostics);

// Prints "<example>: FAILED: <status>" to stderr and returns 1 (the process's exit status).
int fail(const char* example, const Status& status);

}  // namespace hp::examples

#endif  // HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_COMMON_H_
