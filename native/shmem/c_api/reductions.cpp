// The reductions of OpenSHMEM 1.5 §9.9.7 on teams: shmem_TYPENAME_{and,or,xor,max,min,sum,
// prod}_reduce for the types of Table 10. They return 0, or non-zero after printing why
// (c_api::report).
//
// Sums of the 32/64-bit integers, float and double, and maxima and minima of the signed 32/64-bit
// integers, float and double go to hp::shmem::allreduce's vectorized kernels; every other type x
// operation is one instantiation of combine<Op, T> for hp::shmem::allreduce_with. Either way the
// members are combined in team order, so every member gets the same bits. Integer sums and
// products wrap (two's complement); max and min compare as the C type does (char as the
// platform's char, unsigned types as unsigned).
//
// The scans of OpenSHMEM 1.6, shmem_TYPENAME_sum_inscan and _sum_exscan (the sum types), are
// hp::shmem::scan_with with the same sums.
#include <complex>
#include <type_traits>

#include "shmem/c_api/c_api.h"
#include "shmem/c_api/combine.h"

namespace c_api = hp::shmem::c_api;
using hp::DType;
using hp::Status;
using hp::shmem::ReduceOp;
using hp::shmem::c_api::apply;
using hp::shmem::c_api::combine;
using hp::shmem::c_api::Op;

namespace {

template <typename T>
inline constexpr bool kWord = std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);
template <typename T>
inline constexpr bool kFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Whether hp::shmem::allreduce has a kernel for T and kOp (its integers are signed: an unsigned
// sum is the signed one, an unsigned max is not).
template <Op kOp, typename T>
inline constexpr bool kNative = (kOp == Op::kSum && (kWord<T> || kFloat<T>)) ||
                                ((kOp == Op::kMax || kOp == Op::kMin) &&
                                 ((kWord<T> && std::is_signed_v<T>) || kFloat<T>));

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFP32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::kFP64;
  } else {
    return sizeof(T) == 4 ? DType::kInt32 : DType::kInt64;
  }
}

template <Op kOp, typename T>
int reduce(const char* routine, shmem_team_t team, T* dest, const T* source, std::size_t nreduce) {
  const hp::shmem::Team t = c_api::to_team(team);
  Status s;
  if constexpr (kNative<kOp, T>) {
    constexpr ReduceOp op = kOp == Op::kSum   ? ReduceOp::kSum
                            : kOp == Op::kMax ? ReduceOp::kMax
                                              : ReduceOp::kMin;
    s = hp::shmem::allreduce(t, c_api::sym(dest), c_api::sym(source), nreduce, dtype_of<T>(), op);
  } else {
    s = hp::shmem::allreduce_with(t, c_api::sym(dest), c_api::sym(source), nreduce, sizeof(T),
                                  &combine<kOp, T>, nullptr);
  }
  return c_api::report(routine, s);
}

template <typename T>
int scan(const char* routine, shmem_team_t team, T* dest, const T* source, std::size_t nelems,
         bool inclusive) {
  return c_api::report(
      routine, hp::shmem::scan_with(c_api::to_team(team), c_api::sym(dest), c_api::sym(source),
                                    nelems, sizeof(T), &combine<Op::kSum, T>, nullptr, inclusive));
}

}  // namespace

extern "C" {

#define HP_C_REDUCE(TYPE, NAME, OP, KIND)                                                   \
  int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE* dest, const TYPE* source,       \
                                   size_t nreduce) {                                        \
    return reduce<Op::KIND>("shmem_" #NAME "_" #OP "_reduce", team, dest, source, nreduce); \
  }
#define HP_C_BITWISE_REDUCE(TYPE, NAME) \
  HP_C_REDUCE(TYPE, NAME, and, kAnd)    \
  HP_C_REDUCE(TYPE, NAME, or, kOr) HP_C_REDUCE(TYPE, NAME, xor, kXor)
#define HP_C_MINMAX_REDUCE(TYPE, NAME) \
  HP_C_REDUCE(TYPE, NAME, max, kMax) HP_C_REDUCE(TYPE, NAME, min, kMin)
#define HP_C_ARITH_REDUCE(TYPE, NAME) \
  HP_C_REDUCE(TYPE, NAME, sum, kSum) HP_C_REDUCE(TYPE, NAME, prod, kProd)
HP_SHMEM_BITWISE_REDUCE_TYPES(HP_C_BITWISE_REDUCE)
HP_SHMEM_MINMAX_REDUCE_TYPES(HP_C_MINMAX_REDUCE)
HP_SHMEM_ARITH_REDUCE_TYPES(HP_C_ARITH_REDUCE)
#define HP_C_SCAN(TYPE, NAME)                                                      \
  int shmem_##NAME##_sum_inscan(shmem_team_t team, TYPE* dest, const TYPE* source, \
                                size_t nelems) {                                   \
    return scan("shmem_" #NAME "_sum_inscan", team, dest, source, nelems, true);   \
  }                                                                                \
  int shmem_##NAME##_sum_exscan(shmem_team_t team, TYPE* dest, const TYPE* source, \
                                size_t nelems) {                                   \
    return scan("shmem_" #NAME "_sum_exscan", team, dest, source, nelems, false);  \
  }
HP_SHMEM_ARITH_REDUCE_TYPES(HP_C_SCAN)
#undef HP_C_SCAN
#undef HP_C_REDUCE
#undef HP_C_BITWISE_REDUCE
#undef HP_C_MINMAX_REDUCE
#undef HP_C_ARITH_REDUCE

}  // extern "C"
