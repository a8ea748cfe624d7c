#include "python_task.h"

#include <pybind11/numpy.h>

#include <memory>
#include <utility>
#include <vector>

#include "raise_status.h"

namespace py = pybind11;

namespace hp::python {
namespace {

using platform::BlockContext;
using platform::CoreType;

// The BlockContext of one call of a Python task; detached when the call returns.
class Block {
 public:
  explicit Block(BlockContext* context) : context_(context) {}
  void detach() noexcept { context_ = nullptr; }

  BlockContext& get() const {
    if (context_ == nullptr) {
      raise(Status::error(ErrorCode::kFailedPrecondition,
                          "this Block belonged to a finished task call: use the block a task "
                          "function receives only during that call"));
    }
    return *context_;
  }

 private:
  BlockContext* context_;
};

// The function a Python task runs, released only with the GIL held.
struct PythonFunction {
  py::function fn;
  std::string name;
};

std::shared_ptr<PythonFunction> hold(py::function fn, std::string name) {
  return std::shared_ptr<PythonFunction>(new PythonFunction{std::move(fn), std::move(name)},
                                         [](PythonFunction* f) {
                                           if (!Py_IsInitialized())
                                             return;  // interpreter gone: leak rather than crash
                                           py::gil_scoped_acquire gil;
                                           delete f;
                                         });
}

const char* numpy_type(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBF16:
      return "uint16";  // numpy has no bfloat16: the bits
    case DType::kFP16:
      return "float16";
    case DType::kFP32:
      return "float32";
    case DType::kFP64:
      return "float64";
    case DType::kCount:
      break;
  }
  return nullptr;
}

py::object scalar_value(const runtime::TaskArgs& args, int i) {
  const std::optional<DType> dtype = args.scalar_dtype(i);
  if (!dtype) return py::int_(args.scalar_bits(i));
  switch (*dtype) {
    case DType::kInt8:
      return py::int_(args.scalar_as<std::int8_t>(i));
    case DType::kUInt8:
      return py::int_(args.scalar_as<std::uint8_t>(i));
    case DType::kInt32:
      return py::int_(args.scalar_as<std::int32_t>(i));
    case DType::kInt64:
      return py::int_(args.scalar_as<std::int64_t>(i));
    case DType::kFP32:
      return py::float_(args.scalar_as<float>(i));
    case DType::kFP64:
      return py::float_(args.scalar_as<double>(i));
    default:
      return py::int_(args.scalar_bits(i));
  }
}

// "ValueError: bad tile (at kernels.py:12 in add)"; the GIL is held.
std::string describe_exception(const py::error_already_set& e) {
  std::string text = py::str(e.type().attr("__name__")).cast<std::string>();
  const std::string value = py::str(e.value()).cast<std::string>();
  if (!value.empty()) text += ": " + value;
  try {
    if (e.trace()) {
      py::list frames = py::module_::import("traceback").attr("extract_tb")(e.trace());
      if (!frames.empty()) {
        py::object last = frames[frames.size() - 1];
        text += " (at " + py::str(last.attr("filename")).cast<std::string>() + ":" +
                py::str(last.attr("lineno")).cast<std::string>() + " in " +
                py::str(last.attr("name")).cast<std::string>() + ")";
      }
    }
  } catch (const py::error_already_set&) {
    // No traceback module at shutdown: the exception's own text is enough.
  }
  return text;
}

Status call_block(const PythonFunction& f, const runtime::TaskArgs& args, BlockContext& context) {
  py::gil_scoped_acquire gil;
  auto block = std::make_shared<Block>(&context);
  try {
    py::tuple call_args(1 + args.num_tensors() + args.num_scalars());
    call_args[0] = py::cast(block);
    for (int i = 0; i < args.num_tensors(); ++i) {
      call_args[1 + i] = tensor_array(args.tensor(i), args.tag(i) != runtime::ArgTag::kInput);
    }
    for (int i = 0; i < args.num_scalars(); ++i) {
      call_args[1 + args.num_tensors() + i] = scalar_value(args, i);
    }
    f.fn(*call_args);
    block->detach();
    return Status::ok();
  } catch (const py::error_already_set& e) {
    block->detach();
    return Status::error(ErrorCode::kKernelFailed, "Python function '{}' raised {}", f.name,
                         describe_exception(e));
  } catch (const std::exception& e) {
    block->detach();
    return Status::error(ErrorCode::kKernelFailed, "Python function '{}' failed: {}", f.name,
                         e.what());
  }
}

}  // namespace

py::object tensor_array(const TensorView& view, bool writable) {
  const char* type = numpy_type(view.dtype());
  if (type == nullptr) {
    raise(
        Status::error(ErrorCode::kDTypeMismatch, "tensor {} has no numpy dtype", view.to_string()));
  }
  std::vector<py::ssize_t> shape(view.shape().begin(), view.shape().end());
  std::vector<py::ssize_t> strides;
  for (std::int64_t s : view.strides()) {
    strides.push_back(static_cast<py::ssize_t>(s * static_cast<std::int64_t>(view.element_size())));
  }
  // A base object keeps pybind11 from copying; the memory is the task's, not Python's.
  py::array array(py::dtype(type), std::move(shape), std::move(strides), view.data(), py::none());
  if (!writable) array.attr("flags").attr("writeable") = false;
  return array;
}

Status python_callable(py::function fn, std::string name, std::string identity,
                       runtime::Callable* out) {
  std::shared_ptr<PythonFunction> f = hold(std::move(fn), name);
  runtime::TaskFunction body = [f](const runtime::TaskArgs& args, BlockContext& block) {
    return call_block(*f, args, block);
  };
  *out = runtime::Callable::from_function(std::move(name), std::move(body), identity, "python");
  return Status::ok();
}

void define_block_class(py::module_& m) {
  py::class_<Block, std::shared_ptr<Block>>(m, "Block",
                                            "What a block of a Python task knows about itself, "
                                            "and its cross-core flags (platform/chip.h)")
      .def_property_readonly("block_idx", [](const Block& b) { return b.get().block_idx(); })
      .def_property_readonly("block_dim", [](const Block& b) { return b.get().block_dim(); })
      .def_property_readonly(
          "core_type",
          [](const Block& b) { return std::string(platform::to_string(b.get().core_type())); })
      .def_property_readonly("sub_block_idx",
                             [](const Block& b) { return b.get().sub_block_idx(); })
      .def_property_readonly("sub_block_dim",
                             [](const Block& b) { return b.get().sub_block_dim(); })
      .def_property_readonly("core_idx", [](const Block& b) { return b.get().core_idx(); })
      .def_property_readonly("cancelled", [](const Block& b) { return b.get().cancelled(); })
      .def(
          "set_flag",
          [](const Block& b, int id, std::uint32_t delta) { check(b.get().set_flag(id, delta)); },
          py::arg("id"), py::arg("delta") = 1)
      .def("flag_value", [](const Block& b, int id) { return b.get().flag_value(id); })
      .def(
          "wait_flag",
          [](const Block& b, int id, std::uint32_t target) {
            BlockContext& context = b.get();
            blocking([&] { return context.wait_flag(id, target); });
          },
          py::arg("id"), py::arg("target"))
      .def("sync_all",
           [](const Block& b) {
             BlockContext& context = b.get();
             blocking([&] { return context.sync_all(); });
           })
      .def("__repr__", [](const Block& b) { return "<Block " + b.get().describe() + ">"; });
}

}  // namespace hp::python
