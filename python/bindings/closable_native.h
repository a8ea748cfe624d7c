// A native object a Python class owns whose destruction may wait (it joins threads, or reaps
// processes): destroyed without the GIL, so that threads that take it can finish; get() refuses
// (FAILED_PRECONDITION) once it was closed.
#ifndef HYPER_PARALLEL_PYTHON_BINDINGS_CLOSABLE_NATIVE_H_
#define HYPER_PARALLEL_PYTHON_BINDINGS_CLOSABLE_NATIVE_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "raise_status.h"

namespace hp::python {

template <typename T>
struct ClosableNative {
  std::unique_ptr<T> object;

  ~ClosableNative() {
    pybind11::gil_scoped_release release;
    object.reset();
  }
  T& get() const {
    if (!object) raise(Status::error(ErrorCode::kFailedPrecondition, "the worker was closed"));
    return *object;
  }
};

}  // namespace hp::python

#endif  // HYPER_PARALLEL_PYTHON_BINDINGS_CLOSABLE_NATIVE_H_
