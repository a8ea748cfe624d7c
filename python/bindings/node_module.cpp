// hyper_parallel._hp_node: the task runtime's node level (native/runtime/node) under
// hyper_parallel.runtime.Worker(level=3). It builds on _hp_runtime's classes (Callable, TaskArgs,
// CallConfig, RunConfig, Orchestrator, Block), which hyper_parallel.runtime imports first.
//
// The fork: start() forks the chips with the GIL held, through Python's own fork protocol
// (PyOS_BeforeFork / AfterFork_Parent / AfterFork_Child); a chip process then releases the GIL
// for good (its main thread stays in native code until it exits), so that Python tasks on its
// cores can take it. Python functions registered before start() are in every chip's copy of
// the interpreter; run() runs the orchestration function as ChipWorker.run() does.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
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
#include "runtime/node/node_worker.h"

namespace py = pybind11;

namespace {

using hp::python::blocking;
using hp::python::check;
using hp::python::raise;
namespace rt = hp::runtime;

rt::CallableHandle handle_of(const py::bytes& digest) {
  const std::string bytes = digest;
  rt::CallableHandle h;
  if (bytes.size() != h.digest.size()) {
    raise(hp::Status::error(hp::ErrorCode::kInvalidArgument,
                            "a callable handle's digest has 32 bytes, not {}", bytes.size()));
  }
  std::memcpy(h.digest.data(), bytes.data(), bytes.size());
  return h;
}

py::bytes digest_bytes(const rt::CallableHandle& h) {
  return py::bytes(reinterpret_cast<const char*>(h.digest.data()), h.digest.size());
}

struct PyNodeWorker;

// A symmetric tensor; its arrays are views of the chips' heaps, valid until the worker closes.
struct PySymmetricTensor {
  rt::SymmetricTensor tensor;
  std::shared_ptr<PyNodeWorker> owner;
};

// A NodeWorker, destroyed (its chips shut down and reaped) without the GIL.
struct PyNodeWorker : hp::python::ClosableNative<rt::NodeWorker> {};

// The L3 orchestration's handle: the level's Orchestrator (scopes, escape) plus the node's
// own submissions.
class PyNodeOrchestrator : public hp::python::PyOrchestrator {
 public:
  void attach_node(rt::NodeOrchestrator* node) {
    attach(&node->l3());
    node_ = node;
  }
  rt::NodeOrchestrator& node() const {
    get();  // attached, on its thread
    return *node_;
  }

 private:
  rt::NodeOrchestrator* node_ = nullptr;
};

py::tuple submitted(const rt::SubmitResult& result) {
  py::list outputs;
  for (const hp::TensorView& view : result.outputs) {
    outputs.append(hp::python::tensor_array(view, true));
  }
  return py::make_tuple(result.task, outputs);
}

rt::CollectiveOp collective_op(const std::string& op) {
  if (op == "sum") return rt::CollectiveOp::kSum;
  if (op == "max") return rt::CollectiveOp::kMax;
  raise(hp::Status::error(hp::ErrorCode::kInvalidArgument, "op '{}': expected 'sum' or 'max'", op));
}

}  // namespace

PYBIND11_MODULE(_hp_node, m) {
  m.doc() = "HyperParallel task runtime, node level (native layer of hyper_parallel.runtime)";
  py::module_::import("hyper_parallel._hp_runtime");  // the classes this module takes

  py::class_<PySymmetricTensor>(m, "SymmetricTensor")
      .def("on",
           [](const PySymmetricTensor& t, int chip) {
             const int chips = t.owner->get().chips();
             if (chip < 0 || chip >= chips) {
               raise(hp::Status::error(hp::ErrorCode::kOutOfRange,
                                       "chip {} is out of range; this node has chips 0..{}", chip,
                                       chips - 1));
             }
             return hp::python::tensor_array(t.tensor.on(chip), true);
           })
      .def_property_readonly("shape", [](const PySymmetricTensor& t) { return t.tensor.shape; })
      .def_property_readonly(
          "dtype",
          [](const PySymmetricTensor& t) { return std::string(hp::to_string(t.tensor.dtype)); })
      .def_property_readonly("nbytes", [](const PySymmetricTensor& t) { return t.tensor.bytes(); });

  py::class_<PyNodeOrchestrator, hp::python::PyOrchestrator, std::shared_ptr<PyNodeOrchestrator>>(
      m, "NodeOrchestrator")
      .def(
          "submit_next_level",
          [](PyNodeOrchestrator& o, const py::bytes& digest, const rt::TaskArgs& args,
             const rt::CallConfig& config, int chip) {
            rt::NodeOrchestrator& node = o.node();
            const rt::CallableHandle h = handle_of(digest);
            rt::SubmitResult result;
            blocking([&] { return node.submit_next_level(h, args, config, chip, &result); });
            return submitted(result);
          },
          py::arg("digest"), py::arg("args"), py::arg("config"), py::arg("chip"))
      .def(
          "submit_sub",
          [](PyNodeOrchestrator& o, const py::bytes& digest, const rt::TaskArgs& args,
             const rt::CallConfig& config) {
            rt::NodeOrchestrator& node = o.node();
            const rt::CallableHandle h = handle_of(digest);
            rt::SubmitResult result;
            blocking([&] { return node.submit_sub(h, args, config, &result); });
            return submitted(result);
          },
          py::arg("digest"), py::arg("args"), py::arg("config"))
      .def("allreduce",
           [](PyNodeOrchestrator& o, const PySymmetricTensor& t, const std::string& op) {
             rt::NodeOrchestrator& node = o.node();
             const rt::CollectiveOp reduce = collective_op(op);
             blocking([&] { return node.allreduce(t.tensor, reduce); });
           })
      .def("broadcast",
           [](PyNodeOrchestrator& o, const PySymmetricTensor& t, int root) {
             rt::NodeOrchestrator& node = o.node();
             blocking([&] { return node.broadcast(t.tensor, root); });
           })
      .def("allgather",
           [](PyNodeOrchestrator& o, const PySymmetricTensor& d, const PySymmetricTensor& s) {
             rt::NodeOrchestrator& node = o.node();
             blocking([&] { return node.allgather(d.tensor, s.tensor); });
           })
      .def("reduce_scatter",
           [](PyNodeOrchestrator& o, const PySymmetricTensor& d, const PySymmetricTensor& s,
              const std::string& op) {
             rt::NodeOrchestrator& node = o.node();
             const rt::CollectiveOp reduce = collective_op(op);
             blocking([&] { return node.reduce_scatter(d.tensor, s.tensor, reduce); });
           })
      .def("all_to_all",
           [](PyNodeOrchestrator& o, const PySymmetricTensor& d, const PySymmetricTensor& s) {
             rt::NodeOrchestrator& node = o.node();
             blocking([&] { return node.all_to_all(d.tensor, s.tensor); });
           })
      .def_property_readonly("chips", [](const PyNodeOrchestrator& o) { return o.node().chips(); });

  py::class_<PyNodeWorker, std::shared_ptr<PyNodeWorker>>(m, "NodeWorker")
      .def(py::init([](int chips, int num_cube, int num_vector, int sub_workers,
                       std::size_t heap_bytes, std::size_t tensor_bytes, std::size_t scratch_bytes,
                       std::optional<double> timeout_s, double start_timeout_s) {
             rt::NodeWorkerConfig config;
             config.chips = chips;
             config.chip.num_cube = num_cube;
             config.chip.num_vector = num_vector;
             config.sub_workers = sub_workers;
             config.heap_bytes = heap_bytes;
             config.tensor_bytes = tensor_bytes;
             config.scratch_bytes = scratch_bytes;
             config.wait_timeout_s = timeout_s;
             config.start_timeout_s = start_timeout_s;
             // start() forks with the GIL held (see the header comment).
             config.before_fork = [] { PyOS_BeforeFork(); };
             config.after_fork_parent = [] { PyOS_AfterFork_Parent(); };
             config.after_fork_child = [] {
               PyOS_AfterFork_Child();
               PyEval_SaveThread();
             };
             auto w = std::make_shared<PyNodeWorker>();
             check(rt::NodeWorker::create(config, &w->object));
             return w;
           }),
           py::arg("chips"), py::arg("num_cube"), py::arg("num_vector"), py::arg("sub_workers"),
           py::arg("heap_bytes"), py::arg("tensor_bytes"), py::arg("scratch_bytes"),
           py::arg("timeout_s"), py::arg("start_timeout_s"))
      .def("register_callable",
           [](PyNodeWorker& w, const rt::Callable& c) {
             rt::CallableHandle h;
             check(w.get().register_callable(c, &h));
             return digest_bytes(h);
           })
      .def("unregister_callable",
           [](PyNodeWorker& w, const py::bytes& digest) {
             check(w.get().unregister_callable(handle_of(digest)));
           })
      .def("callable_references",
           [](const PyNodeWorker& w, const py::bytes& digest) {
             return w.get().callable_references(handle_of(digest));
           })
      .def("start", [](PyNodeWorker& w) { check(w.get().start()); })  // with the GIL: it forks
      .def_property_readonly("started", [](const PyNodeWorker& w) { return w.get().started(); })
      .def_property_readonly("chips", [](const PyNodeWorker& w) { return w.get().chips(); })
      .def("chip_pid", [](const PyNodeWorker& w, int chip) { return w.get().chip_pid(chip); })
      .def("alloc",
           [](std::shared_ptr<PyNodeWorker> w, const std::string& dtype_name,
              std::vector<std::int64_t> shape) {
             hp::DType dtype{};
             check(hp::parse_dtype(dtype_name, &dtype));
             PySymmetricTensor t{.tensor = {}, .owner = w};
             check(w->get().alloc(dtype, shape, &t.tensor));
             return t;
           })
      .def("free",
           [](PyNodeWorker& w, const PySymmetricTensor& t) { check(w.get().free(t.tensor)); })
      .def(
          "run",
          [](PyNodeWorker& w, py::function orchestration, const rt::OrchestratorConfig& config) {
            rt::NodeWorker& worker = w.get();
            auto handle = std::make_shared<PyNodeOrchestrator>();
            hp::python::run_python(std::move(orchestration), py::cast(handle), *handle,
                                   [&](const hp::python::PythonBody& body) {
                                     return worker.run(
                                         [&](rt::NodeOrchestrator& node) {
                                           handle->attach_node(&node);
                                           return body();
                                         },
                                         config);
                                   });
          },
          py::arg("orchestration"), py::arg("config"))
      .def(
          "replay",
          [](PyNodeWorker& w, const std::string& path,
             const std::map<std::string, py::bytes>& callables,
             const std::vector<std::tuple<std::uintptr_t, std::size_t, std::uintptr_t>>& buffers,
             const rt::OrchestratorConfig& config) {
            rt::NodeReplayBindings bindings;
            for (const auto& [name, digest] : callables)
              bindings.callables[name] = handle_of(digest);
            for (const auto& [recorded, bytes, now] : buffers) {
              bindings.buffers.push_back({recorded, bytes, reinterpret_cast<void*>(now)});
            }
            rt::NodeWorker& worker = w.get();
            blocking([&] { return worker.replay(path, bindings, config); });
          },
          py::arg("path"), py::arg("callables"), py::arg("buffers"), py::arg("config"))
      .def("close", [](PyNodeWorker& w) {
        if (!w.object) return;
        hp::Status status;
        {
          py::gil_scoped_release release;
          status = w.object->close();
        }
        check(status);
      });
}
