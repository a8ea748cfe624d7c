// hyper_parallel._hp_runtime: the task runtime (native/runtime) that hyper_parallel.runtime
// builds on: chip workers, callables (Python functions and kernel-library symbols), and runs of
// orchestration functions written in Python (python_orchestration.h says how the GIL is
// handled). Errors raise HpError with the native code, after the GIL is back.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "closable_native.h"
#include "python_orchestration.h"
#include "python_task.h"
#include "raise_status.h"
#include "runtime/callable.h"
#include "runtime/chip_worker.h"
#include "runtime/orchestrator.h"
#include "runtime/replay.h"

namespace py = pybind11;

namespace {

using hp::python::blocking;
using hp::python::check;
using hp::python::raise;
namespace rt = hp::runtime;

// A ChipWorker, destroyed (its cores joined) without the GIL.
using PyChipWorker = hp::python::ClosableNative<rt::ChipWorker>;

hp::platform::LaunchMode parse_mode(const std::string& mode) {
  if (mode == "cube") return hp::platform::LaunchMode::kCube;
  if (mode == "vector") return hp::platform::LaunchMode::kVector;
  if (mode == "mix") return hp::platform::LaunchMode::kMix;
  raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                          "mode '{}': expected 'cube', 'vector' or 'mix'", mode));
}

rt::CallConfig call_config(const std::string& mode, int block_dim, int num_flags,
                           std::optional<double> timeout_s) {
  return {.mode = parse_mode(mode),
          .block_num = block_dim,
          .num_flags = num_flags,
          .wait_timeout_s = timeout_s};
}

rt::OrchestratorConfig run_config(int task_ring_slots, std::size_t heap_ring_bytes,
                                  std::optional<double> timeout_s, const std::string& output_prefix,
                                  int dump_args, bool scope_stats, bool dep_gen, bool swimlane) {
  rt::OrchestratorConfig config;
  config.task_ring_slots = task_ring_slots;
  config.heap_ring_bytes = heap_ring_bytes;
  config.wait_timeout_s = timeout_s;
  config.diagnostics = {.output_prefix = output_prefix,
                        .dump_args = dump_args,
                        .scope_stats = scope_stats,
                        .dep_gen = dep_gen,
                        .swimlane = swimlane};
  return config;
}

std::string identity_string(const py::bytes& identity) { return std::string(identity); }

}  // namespace

PYBIND11_MODULE(_hp_runtime, m) {
  m.doc() = "HyperParallel task runtime (native layer of hyper_parallel.runtime)";
  hp::python::define_block_class(m);

  py::class_<rt::Callable>(m, "Callable")
      .def_static(
          "from_function",
          [](py::function fn, std::string name, py::bytes identity) {
            rt::Callable out;
            check(hp::python::python_callable(std::move(fn), std::move(name),
                                              identity_string(identity), &out));
            return out;
          },
          py::arg("fn"), py::arg("name"), py::arg("identity"))
      .def_static(
          "from_library",
          [](const std::string& path, const std::string& symbol,
             std::optional<py::bytes> identity) {
            rt::Callable out;
            const std::string bytes = identity ? identity_string(*identity) : std::string();
            const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
            check(rt::Callable::from_library(path, symbol, &out, {}, {data, bytes.size()}));
            return out;
          },
          py::arg("path"), py::arg("symbol"), py::arg("identity") = py::none())
      .def_property_readonly("name", &rt::Callable::name)
      .def_property_readonly(
          "kind", [](const rt::Callable& c) { return std::string(rt::to_string(c.kind())); })
      .def_property_readonly("name_space", &rt::Callable::name_space)
      .def_property_readonly("hashid", [](const rt::Callable& c) { return c.handle().hashid(); });

  py::class_<rt::TaskArgs>(m, "TaskArgs")
      .def(py::init(&hp::python::task_args), py::arg("tensors"), py::arg("scalars"),
           py::arg("dependencies"), py::arg("dump_all"), py::arg("dump_tensors"))
      .def("validate", [](const rt::TaskArgs& a) { check(a.validate("TaskArgs")); })
      .def_property_readonly("num_tensors", &rt::TaskArgs::num_tensors)
      .def_property_readonly("num_scalars", &rt::TaskArgs::num_scalars)
      .def("dump_marked", &rt::TaskArgs::dump_marked);

  py::class_<rt::CallConfig>(m, "CallConfig")
      .def(py::init(&call_config), py::arg("mode"), py::arg("block_dim"), py::arg("num_flags"),
           py::arg("timeout_s"));

  py::class_<rt::OrchestratorConfig>(m, "RunConfig")
      .def(py::init(&run_config), py::arg("task_ring_slots"), py::arg("heap_ring_bytes"),
           py::arg("timeout_s"), py::arg("output_prefix"), py::arg("dump_args"),
           py::arg("scope_stats"), py::arg("dep_gen"), py::arg("swimlane"));

  using hp::python::PyOrchestrator;
  py::class_<PyOrchestrator, std::shared_ptr<PyOrchestrator>>(m, "Orchestrator")
      .def("submit", &PyOrchestrator::submit, py::arg("slot"), py::arg("args"), py::arg("config"))
      .def("begin_scope", &PyOrchestrator::begin_scope, py::arg("file"), py::arg("line"))
      .def("end_scope", &PyOrchestrator::end_scope)
      .def("escape", &PyOrchestrator::escape, py::arg("output"))
      .def_property_readonly("scope_depth", &PyOrchestrator::scope_depth);

  py::class_<PyChipWorker>(m, "ChipWorker")
      .def(py::init([](int num_cube, int num_vector, std::vector<int> cpus,
                       std::optional<double> timeout_s) {
             auto w = std::make_unique<PyChipWorker>();
             hp::platform::ChipConfig config{.num_cube = num_cube,
                                             .num_vector = num_vector,
                                             .cpus = std::move(cpus),
                                             .wait_timeout_s = timeout_s};
             blocking([&] { return rt::ChipWorker::create(config, &w->object); });
             return w;
           }),
           py::arg("num_cube"), py::arg("num_vector"), py::arg("cpus"), py::arg("timeout_s"))
      .def("register_callable",
           [](PyChipWorker& w, const rt::Callable& c) {
             int slot = -1;
             check(w.get().register_callable(c, &slot));
             return slot;
           })
      .def("unregister_callable",
           [](PyChipWorker& w, int slot) {
             // The last reference to a Python function is released with the GIL (python_task.h).
             check(w.get().unregister_callable(slot));
           })
      .def("callable_references",
           [](const PyChipWorker& w, int slot) { return w.get().callable_references(slot); })
      .def("callable_name",
           [](const PyChipWorker& w, int slot) {
             std::shared_ptr<const rt::Callable> c;
             check(w.get().callable(slot, &c));
             return c->name();
           })
      .def_property_readonly("num_cube",
                             [](const PyChipWorker& w) { return w.get().chip().num_cube(); })
      .def_property_readonly("num_vector",
                             [](const PyChipWorker& w) { return w.get().chip().num_vector(); })
      .def_property_readonly("ratio", [](const PyChipWorker& w) { return w.get().chip().ratio(); })
      .def_property_readonly("cpus",
                             [](const PyChipWorker& w) {
                               auto cpus = w.get().chip().cpus();
                               return std::vector<int>(cpus.begin(), cpus.end());
                             })
      .def(
          "run",
          [](PyChipWorker& w, py::function orchestration, const rt::OrchestratorConfig& config) {
            hp::python::run_orchestration(w.get(), std::move(orchestration), config);
          },
          py::arg("orchestration"), py::arg("config"))
      .def("close", [](PyChipWorker& w) {
        py::gil_scoped_release release;
        w.object.reset();
      });

  m.def(
      "replay",
      [](PyChipWorker& w, const std::string& path, std::map<std::string, int> callables,
         const std::vector<std::tuple<std::uintptr_t, std::size_t, std::uintptr_t>>& buffers,
         const rt::OrchestratorConfig& config) {
        rt::ReplayBindings bindings;
        bindings.callables = std::move(callables);
        for (const auto& [recorded, bytes, now] : buffers) {
          bindings.buffers.push_back({recorded, bytes, reinterpret_cast<void*>(now)});
        }
        rt::ChipWorker& worker = w.get();
        blocking([&] { return rt::replay(worker, path, bindings, config); });
      },
      py::arg("worker"), py::arg("path"), py::arg("callables"), py::arg("buffers"),
      py::arg("config"));
}
