// Orchestration functions written in Python: Orchestrator::run with a Python function as the
// orchestration, and the handle through which it submits tasks and opens scopes.
//
// Threads and the GIL: run() releases the GIL while the orchestrator runs; the orchestration
// thread takes it to call the Python function, and gives it up again inside every call that can
// wait (submit waits for ring space, a scope's end), so tasks that are Python functions can
// take it meanwhile. Never hangs on a raising task: its failure makes pending submits return
// ABORTED, which raises HpError in the orchestration function; run() then raises HpError with
// the first task failure (task and callable named). An exception the orchestration function
// raises by itself (no task failed) is raised again by run() as it was.
//
// Tensors cross as specs: (tag, address, dtype name, shape, strides in elements) of memory the
// Python side keeps alive for the whole run.
#ifndef HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_ORCHESTRATION_H_
#define HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_ORCHESTRATION_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/chip_worker.h"
#include "runtime/orchestrator.h"

namespace hp::python {

// (tag as runtime::ArgTag's number, address, dtype name, shape, strides in elements)
using TensorSpec = std::tuple<int, std::uintptr_t, std::string, std::vector<std::int64_t>,
                              std::vector<std::int64_t>>;
// (dtype name, or "bits64" for an opaque 64-bit pattern; the value as a Python int or float)
using ScalarSpec = std::tuple<std::string, pybind11::object>;

runtime::TaskArgs task_args(const std::vector<TensorSpec>& tensors,
                            const std::vector<ScalarSpec>& scalars,
                            const std::vector<runtime::TaskId>& dependencies, bool dump_all,
                            const std::vector<int>& dump_tensors);

// The Orchestrator of a run, as its Python function sees it; detached when the function returns.
// The node level's handle (node_module.cpp) extends it.
class PyOrchestrator {
 public:
  // (task id, OUTPUT tensors as numpy arrays over the heap ring)
  pybind11::tuple submit(int slot, const runtime::TaskArgs& args,
                         const runtime::CallConfig& config);
  void begin_scope(const std::string& file, std::uint32_t line);
  void end_scope();
  void escape(const TensorSpec& output);
  int scope_depth() const;

  void attach(runtime::Orchestrator* orchestrator);
  void detach() noexcept;  // ends the scopes still open, innermost first

 protected:
  // The attached orchestrator, on its own thread (FAILED_PRECONDITION otherwise).
  runtime::Orchestrator& get() const;

 private:
  runtime::Orchestrator* orchestrator_ = nullptr;
  std::thread::id thread_;
  std::vector<std::unique_ptr<runtime::Scope>> scopes_;
};

// Runs `orchestration(handle)` on the worker; raises as the header comment says.
void run_orchestration(runtime::ChipWorker& worker, pybind11::function orchestration,
                       const runtime::OrchestratorConfig& config);

// What run_orchestration does for any level: `run(body)` calls the runtime (without the GIL),
// whose orchestration function attaches `handle` and then calls body(), which calls
// `orchestration(handle_object)` with the GIL and ends the scopes it left open.
using PythonBody = std::function<Status()>;
void run_python(pybind11::function orchestration, pybind11::object handle_object,
                PyOrchestrator& handle, const std::function<Status(const PythonBody& body)>& run);

}  // namespace hp::python

#endif  // HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_ORCHESTRATION_H_
