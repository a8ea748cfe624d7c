// The op ABI tests' hpTensor of a row-major host array.
#ifndef HYPER_PARALLEL_TESTS_OPS_OP_TENSOR_H_
#define HYPER_PARALLEL_TESTS_OPS_OP_TENSOR_H_

#include <cstdint>
#include <initializer_list>

#include "hyper_parallel_op_api.h"

namespace hp::ops::testing {

inline hpTensor tensor(const void* data, int32_t dtype, std::initializer_list<std::int64_t> shape) {
  hpTensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.ndim = int32_t(shape.size());
  std::int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape.begin()[i];
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  return t;
}

}  // namespace hp::ops::testing

#endif  // HYPER_PARALLEL_TESTS_OPS_OP_TENSOR_H_
