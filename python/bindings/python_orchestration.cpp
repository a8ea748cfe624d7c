#include "python_orchestration.h"

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "python_task.h"
#include "raise_status.h"

namespace py = pybind11;

namespace hp::python {
namespace {

// A Python file name that lives as long as the process (a scope's site must outlive its run).
const char* interned(const std::string& file) {
  static std::mutex mutex;
  static auto& files = *new std::set<std::string>();  // never destroyed: sites may be read at exit
  const std::lock_guard lock(mutex);
  return files.insert(file).first->c_str();
}

using runtime::ArgTag;

TensorView tensor_view(const TensorSpec& spec) {
  const auto& [tag, address, dtype_name, shape, strides] = spec;
  DType dtype{};
  check(parse_dtype(dtype_name, &dtype));
  return TensorView(reinterpret_cast<void*>(address), dtype, shape, strides);
}

template <typename T>
void add_scalar(runtime::TaskArgs& args, const py::object& value, const std::string& dtype) {
  try {
    args.scalar(value.cast<T>());
  } catch (const py::cast_error&) {
    raise(Status::error(ErrorCode::kInvalidArgument, "scalar {} does not fit a {}",
                        py::repr(value).cast<std::string>(), dtype));
  }
}

}  // namespace

runtime::TaskArgs task_args(const std::vector<TensorSpec>& tensors,
                            const std::vector<ScalarSpec>& scalars,
                            const std::vector<runtime::TaskId>& dependencies, bool dump_all,
                            const std::vector<int>& dump_tensors) {
  runtime::TaskArgs args;
  for (const TensorSpec& spec : tensors) {
    const int tag = std::get<0>(spec);
    switch (static_cast<ArgTag>(tag)) {
      case ArgTag::kInput:
        args.input(tensor_view(spec));
        break;
      case ArgTag::kInOut:
        args.inout(tensor_view(spec));
        break;
      case ArgTag::kOutputExisting:
        args.output_existing(tensor_view(spec));
        break;
      case ArgTag::kNoDep:
        args.no_dep(tensor_view(spec));
        break;
      case ArgTag::kOutput: {  // dtype and shape only: the runtime gives it memory
        DType dtype{};
        check(parse_dtype(std::get<2>(spec), &dtype));
        args.output(dtype, std::get<3>(spec));
        break;
      }
      default:
        raise(Status::error(ErrorCode::kInvalidArgument, "tensor tag {}: expected 0..4", tag));
    }
  }
  for (const auto& [dtype, value] : scalars) {
    if (dtype == "int8")
      add_scalar<std::int8_t>(args, value, dtype);
    else if (dtype == "uint8")
      add_scalar<std::uint8_t>(args, value, dtype);
    else if (dtype == "int32")
      add_scalar<std::int32_t>(args, value, dtype);
    else if (dtype == "int64")
      add_scalar<std::int64_t>(args, value, dtype);
    else if (dtype == "fp32")
      add_scalar<float>(args, value, dtype);
    else if (dtype == "fp64")
      add_scalar<double>(args, value, dtype);
    else if (dtype == "bits64")
      add_scalar<std::uint64_t>(args, value, dtype);
    else {
      raise(Status::error(ErrorCode::kInvalidArgument,
                          "scalar dtype '{}': expected int8, uint8, int32, int64, fp32, fp64 or "
                          "bits64",
                          dtype));
    }
  }
  if (!dependencies.empty()) args.set_dependencies(dependencies);
  if (dump_all) args.dump();
  if (!dump_tensors.empty()) args.dump(dump_tensors);
  return args;
}

runtime::Orchestrator& PyOrchestrator::get() const {
  if (orchestrator_ == nullptr) {
    raise(Status::error(ErrorCode::kFailedPrecondition,
                        "this orchestrator's run is over: submit only from inside the "
                        "orchestration function that ChipWorker.run() is running"));
  }
  if (std::this_thread::get_id() != thread_) {
    raise(Status::error(ErrorCode::kFailedPrecondition,
                        "submit/scope called from another thread: call them from the "
                        "orchestration function's own thread"));
  }
  return *orchestrator_;
}

py::tuple PyOrchestrator::submit(int slot, const runtime::TaskArgs& args,
                                 const runtime::CallConfig& config) {
  runtime::Orchestrator& o = get();
  runtime::SubmitResult result;
  blocking([&] { return o.submit(slot, args, config, &result); });
  py::list outputs;
  for (const TensorView& view : result.outputs) outputs.append(tensor_array(view, true));
  return py::make_tuple(result.task, outputs);
}

void PyOrchestrator::begin_scope(const std::string& file, std::uint32_t line) {
  runtime::Orchestrator& o = get();
  const runtime::ScopeSite site{interned(file), line};
  py::gil_scoped_release release;  // observers sample the rings under the scheduler's lock
  // new Scope(prvalue) initialises in place: Scope can be neither copied nor moved.
  scopes_.emplace_back(new runtime::Scope(o.scope(site)));
}

void PyOrchestrator::end_scope() {
  get();
  if (scopes_.empty()) {
    raise(Status::error(ErrorCode::kFailedPrecondition,
                        "end_scope() without an open scope: use 'with runtime.scope():'"));
  }
  std::unique_ptr<runtime::Scope> scope = std::move(scopes_.back());
  scopes_.pop_back();
  py::gil_scoped_release release;
  scope.reset();
}

void PyOrchestrator::escape(const TensorSpec& output) {
  runtime::Orchestrator& o = get();
  const TensorView view = tensor_view(output);
  blocking([&] { return o.escape(view); });
}

int PyOrchestrator::scope_depth() const { return get().scope_depth(); }

void PyOrchestrator::attach(runtime::Orchestrator* orchestrator) {
  orchestrator_ = orchestrator;
  thread_ = std::this_thread::get_id();
}

void PyOrchestrator::detach() noexcept {
  while (!scopes_.empty()) scopes_.pop_back();
  orchestrator_ = nullptr;
}

void run_orchestration(runtime::ChipWorker& worker, py::function orchestration,
                       const runtime::OrchestratorConfig& config) {
  auto handle = std::make_shared<PyOrchestrator>();
  run_python(std::move(orchestration), py::cast(handle), *handle, [&](const PythonBody& body) {
    return runtime::Orchestrator::run(
        worker,
        [&](runtime::Orchestrator& o) {
          handle->attach(&o);
          return body();
        },
        config);
  });
}

void run_python(py::function orchestration, py::object handle_object, PyOrchestrator& handle,
                const std::function<Status(const PythonBody& body)>& run) {
  std::optional<py::error_already_set> raised;  // destroyed with the GIL held (after run)
  Status orchestration_status;
  Status status;
  {
    py::gil_scoped_release release;
    status = run([&]() -> Status {
      py::gil_scoped_acquire gil;
      try {
        orchestration(handle_object);
      } catch (py::error_already_set& e) {
        orchestration_status =
            Status::error(ErrorCode::kAborted, "the orchestration function raised {}",
                          py::str(e.type().attr("__name__")).cast<std::string>());
        raised.emplace(std::move(e));
      }
      {
        // Scopes left open (the function returned inside one) end here, without the GIL.
        py::gil_scoped_release release_for_scopes;
        handle.detach();
      }
      return orchestration_status;
    });
  }
  if (raised && !orchestration_status.is_ok() && status.code() == orchestration_status.code() &&
      status.message() == orchestration_status.message()) {
    raised->restore();  // no task failed: the function's own exception, as it was
    throw py::error_already_set();
  }
  check(status);
}

}  // namespace hp::python
