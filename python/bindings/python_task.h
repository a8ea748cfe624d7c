// Python functions as task callables: a Callable whose body calls a Python function once per
// block, as fn(block, *tensors, *scalars), on the chip core that runs the block.
//
// GIL: the chip's cores run without it; the body acquires it for the call (so blocks of Python
// tasks run one at a time, except where numpy releases it) and the block's waits
// (wait_flag, sync_all) release it again. A Python exception becomes a KERNEL_FAILED status
// naming the function and the exception (the orchestrator adds the task and callable), so a
// raising task fails the run instead of hanging it.
//
// Views: tensors arrive as numpy arrays over the task's memory (INPUT ones read-only; bf16 as
// uint16), scalars as Python ints (integers and opaque 64-bit patterns) or floats. Neither the
// arrays nor the block may be kept past the call: the block refuses use afterwards, the memory
// may be reused.
#ifndef HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_TASK_H_
#define HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_TASK_H_

#include <pybind11/pybind11.h>

#include <string>

#include "common/status.h"
#include "runtime/callable.h"

namespace hp::python {

// `identity` (content address, callable.h) must determine what the function computes; the
// namespace is "python". The Callable keeps `fn` alive (released with the GIL held).
Status python_callable(pybind11::function fn, std::string name, std::string identity,
                       runtime::Callable* out);

// The numpy array over `view` (no copy; read-only when `writable` is false). The GIL is held.
pybind11::object tensor_array(const TensorView& view, bool writable);

// Registers the Block class (the BlockContext a Python task sees) in `module`.
void define_block_class(pybind11::module_& module);

}  // namespace hp::python

#endif  // HYPER_PARALLEL_PYTHON_BINDINGS_PYTHON_TASK_H_
