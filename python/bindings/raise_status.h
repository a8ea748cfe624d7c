// The one place where a native Status becomes a Python exception:
// hyper_parallel.errors.HpError(code, name, message). Call with the GIL held (blocking()
// releases it around the native call itself).
#ifndef HYPER_PARALLEL_PYTHON_BINDINGS_RAISE_STATUS_H_
#define HYPER_PARALLEL_PYTHON_BINDINGS_RAISE_STATUS_H_

#include <pybind11/pybind11.h>

#include <string>

#include "common/status.h"

namespace hp::python {

[[noreturn]] inline void raise(const Status& status) {
  namespace py = pybind11;
  // Leaked on purpose: destroying a Python object after the interpreter is gone would crash.
  static py::object& error_class =
      *new py::object(py::module_::import("hyper_parallel.errors").attr("HpError"));
  PyErr_SetObject(error_class.ptr(),
                  error_class(static_cast<std::uint32_t>(status.code()),
                              std::string(hp::to_string(status.code())), status.message())
                      .ptr());
  throw py::error_already_set();
}

inline void check(const Status& status) {
  if (!status.is_ok()) raise(status);
}

// Runs a native call that may block without the GIL, then raises its error with the GIL.
template <typename F>
void blocking(F&& call) {
  Status status;
  {
    pybind11::gil_scoped_release release;
    status = call();
  }
  check(status);
}

}  // namespace hp::python

#endif  // HYPER_PARALLEL_PYTHON_BINDINGS_RAISE_STATUS_H_
