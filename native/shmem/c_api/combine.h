// The element operations of the C API's reductions (reductions.cpp) and the active-set ones
// (active_set.cpp): one definition of what each operation does to each C type.
#ifndef HYPER_PARALLEL_SHMEM_C_API_COMBINE_H_
#define HYPER_PARALLEL_SHMEM_C_API_COMBINE_H_

#include <cstddef>
#include <type_traits>

namespace hp::shmem::c_api {

enum class Op { kAnd, kOr, kXor, kMax, kMin, kSum, kProd };

// Integer arithmetic in an unsigned type at least as wide as unsigned int: it wraps, where the
// promoted signed arithmetic of the C type could overflow.
template <typename T>
using Wrapping =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <Op kOp, typename T>
T apply(T a, T b) {
  if constexpr (kOp == Op::kAnd) {
    return T(a & b);
  } else if constexpr (kOp == Op::kOr) {
    return T(a | b);
  } else if constexpr (kOp == Op::kXor) {
    return T(a ^ b);
  } else if constexpr (kOp == Op::kMax) {
    return a < b ? b : a;
  } else if constexpr (kOp == Op::kMin) {
    return b < a ? b : a;
  } else if constexpr (std::is_integral_v<T>) {
    using W = Wrapping<T>;
    return kOp == Op::kSum ? T(W(a) + W(b)) : T(W(a) * W(b));
  } else {
    return kOp == Op::kSum ? a + b : a * b;
  }
}

// hp::shmem::ReduceFn of T: acc[i] = apply(acc[i], in[i]).
template <Op kOp, typename T>
void combine(void* acc, const void* in, std::size_t count, void*) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < count; ++i) a[i] = apply<kOp>(a[i], b[i]);
}

}  // namespace hp::shmem::c_api

#endif  // HYPER_PARALLEL_SHMEM_C_API_COMBINE_H_
