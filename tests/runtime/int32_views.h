// int32 views for the runtime tests' kernels and buffers.
#ifndef HYPER_PARALLEL_TESTS_RUNTIME_INT32_VIEWS_H_
#define HYPER_PARALLEL_TESTS_RUNTIME_INT32_VIEWS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "common/tensor_view.h"

namespace hp::runtime::testing {

// Visits every element of a 1-D or 2-D int32 view (strided), row-major.
inline void for_each_i32(const TensorView& t, const std::function<void(std::int32_t&)>& f) {
  auto* base = static_cast<std::int32_t*>(t.data());
  const std::int64_t rows = t.ndim() == 2 ? t.dim(0) : 1;
  const std::int64_t cols = t.ndim() == 2 ? t.dim(1) : t.dim(0);
  const std::int64_t row_stride = t.ndim() == 2 ? t.stride(0) : 0;
  const std::int64_t col_stride = t.ndim() == 2 ? t.stride(1) : t.stride(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) f(base[r * row_stride + c * col_stride]);
  }
}

// The whole vector as a 1-D int32 view.
inline TensorView i32(std::vector<std::int32_t>& v) {
  return TensorView(v.data(), DType::kInt32, {static_cast<std::int64_t>(v.size())});
}

}  // namespace hp::runtime::testing

#endif  // HYPER_PARALLEL_TESTS_RUNTIME_INT32_VIEWS_H_
