// Argument checks and work splitting shared by the example kernels.
#ifndef HYPER_PARALLEL_EXAMPLES_RUNTIME_KERNEL_CHECKS_H_
#define HYPER_PARALLEL_EXAMPLES_RUNTIME_KERNEL_CHECKS_H_

#include <cstdint>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "common/tensor_view.h"
#include "runtime/task_args.h"

namespace hp::examples {

// Tensors and scalars a kernel needs, checked before it touches memory.
inline Status expect_args(const runtime::TaskArgs& args, std::string_view kernel, int tensors,
                          int scalars) {
  HP_ENSURE(args.num_tensors() == tensors && args.num_scalars() == scalars,
            ErrorCode::kInvalidArgument, "{}: expected {} tensors and {} scalars, got {} and {}",
            kernel, tensors, scalars, args.num_tensors(), args.num_scalars());
  return Status::ok();
}

// A tensor of `dtype` and rank `ndim` whose innermost dimension is contiguous.
inline Status expect_rows(const TensorView& t, std::string_view what, DType dtype, int ndim) {
  HP_RETURN_IF_ERROR(t.validate(what));
  HP_RETURN_IF_ERROR(t.expect_dtype(what, dtype));
  HP_ENSURE(t.ndim() == ndim, ErrorCode::kShapeMismatch, "{}: expected {} dims, got {}", what, ndim,
            t.to_string());
  HP_ENSURE(t.numel() == 0 || t.dim(ndim - 1) == 1 || t.stride(ndim - 1) == 1,
            ErrorCode::kInvalidArgument, "{}: rows must be contiguous (innermost stride 1): {}",
            what, t.to_string());
  return Status::ok();
}

// Block `idx` of `dim` takes [first, second) of n items.
inline std::pair<std::int64_t, std::int64_t> share(std::int64_t n, int idx, int dim) {
  return {n * idx / dim, n * (idx + 1) / dim};
}

}  // namespace hp::examples

#endif  // HYPER_PARALLEL_EXAMPLES_RUNTIME_KERNEL_CHECKS_H_
