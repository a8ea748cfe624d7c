// The deprecated active-set collectives OpenSHMEM 1.5 still specifies, for programs written
// before teams: shmem_barrier, shmem_sync, shmem_broadcast/collect/fcollect/alltoall(s)32/64
// and shmem_TYPENAME_OP_to_all. Failures end the process (the routines return nothing).
//
// An active set is PE_size PEs, PE_start + k x 2^logPE_stride. Synchronization uses pSync[0]
// and pSync[1] (SHMEM_SYNC_VALUE, 0, before and after every call): every member adds 1 to
// pSync[0] on the set's first PE, which waits until it reads PE_size, resets it to 0 and then
// sets pSync[1] to 1 on every other member; each waits for that and resets it to 0. So both
// words are 0 again before any PE returns its last use of them, and the next call may reuse
// pSync at once. shmem_collect passes the members' offsets along the set in pSync[2] (the
// offset + 1; reset by its receiver). Data moves with puts between two synchronizations (the
// first: every destination is free; the second, after a quiet: every put arrived); the
// reductions read the members' sources with gets between two synchronizations and write dest
// after the second (dest may be source).
#include <cstring>
#include <vector>

#include "shmem/c_api/c_api.h"
#include "shmem/c_api/combine.h"

namespace c_api = hp::shmem::c_api;
using c_api::check;
using c_api::Op;
using hp::ErrorCode;
using hp::Status;

namespace {

struct ActiveSet {
  int start = 0, stride = 1, size = 0;
  int me = -1;  // this PE's index in the set
  int pe(int k) const { return start + k * stride; }
};

ActiveSet active_set(const char* routine, int start, int log_stride, int size) {
  const int n = hp::shmem::n_pes();
  const bool shape_ok = size >= 1 && start >= 0 && log_stride >= 0 && log_stride < 31;
  ActiveSet set{start, shape_ok ? 1 << log_stride : 1, size};
  if (!shape_ok || std::int64_t(start) + std::int64_t(size - 1) * set.stride >= n) {
    c_api::fail(routine, Status::error(ErrorCode::kInvalidArgument,
                                       "the active set PE_start {}, logPE_stride {}, PE_size {} "
                                       "is not inside the {} PEs",
                                       start, log_stride, size, n));
  }
  const int me = hp::shmem::my_pe();
  if ((me - start) % set.stride == 0 && me >= start && (me - start) / set.stride < size) {
    set.me = (me - start) / set.stride;
  } else {
    c_api::fail(routine, Status::error(ErrorCode::kInvalidArgument,
                                       "PE {} is not in the active set PE_start {}, stride {}, "
                                       "PE_size {}",
                                       me, start, set.stride, size));
  }
  return set;
}

void synchronize(const char* routine, const ActiveSet& set, long* p_sync, bool quiet) {
  auto* words = reinterpret_cast<std::int64_t*>(c_api::sym(p_sync));
  static_assert(sizeof(long) == sizeof(std::int64_t));
  if (quiet) check(routine, hp::shmem::quiet());
  if (set.size == 1) return;
  const int first = set.pe(0);
  check(routine, hp::shmem::atomic_add(&words[0], std::int64_t(1), first));
  if (set.me == 0) {
    check(routine, hp::shmem::wait_until(&words[0], hp::shmem::Cmp::kEq, std::int64_t(set.size)));
    check(routine, hp::shmem::atomic_set(&words[0], std::int64_t(0), first));
    for (int k = 1; k < set.size; ++k) {
      check(routine, hp::shmem::atomic_set(&words[1], std::int64_t(1), set.pe(k)));
    }
  } else {
    check(routine, hp::shmem::wait_until(&words[1], hp::shmem::Cmp::kEq, std::int64_t(1)));
    check(routine, hp::shmem::atomic_set(&words[1], std::int64_t(0), hp::shmem::my_pe()));
  }
}

std::size_t bytes_of(const char* routine, std::size_t nelems, std::size_t size) {
  std::size_t bytes = 0;
  check(routine, c_api::checked_bytes(routine, nelems, size, &bytes));
  return bytes;
}

void put(const char* routine, void* dest, const void* source, std::size_t bytes, int pe) {
  if (bytes > 0) check(routine, hp::shmem::put(dest, source, bytes, pe));
}

void broadcast(const char* routine, void* dest, const void* source, std::size_t nelems,
               std::size_t size, int root, const ActiveSet& set, long* p_sync) {
  if (root < 0 || root >= set.size) {
    c_api::fail(routine, Status::error(ErrorCode::kInvalidArgument,
                                       "PE_root {} is not an index of the {} PEs of the set", root,
                                       set.size));
  }
  const std::size_t bytes = bytes_of(routine, nelems, size);
  synchronize(routine, set, p_sync, false);
  if (set.me == root) {
    for (int k = 0; k < set.size; ++k) {
      if (k != root) put(routine, c_api::sym(dest), c_api::sym(source), bytes, set.pe(k));
    }
  }
  synchronize(routine, set, p_sync, true);
}

// fcollect (every member's nelems the same) and collect (each its own): member k's elements
// land after those of members < k in every member's dest.
void collect(const char* routine, bool fixed, void* dest, const void* source, std::size_t nelems,
             std::size_t size, const ActiveSet& set, long* p_sync) {
  const std::size_t bytes = bytes_of(routine, nelems, size);
  std::size_t offset = fixed ? std::size_t(set.me) * bytes : 0;
  if (!fixed) {
    auto* words = reinterpret_cast<std::int64_t*>(c_api::sym(p_sync));
    if (set.me > 0) {
      check(routine, hp::shmem::wait_until(&words[2], hp::shmem::Cmp::kGt, std::int64_t(0)));
      offset = std::size_t(c_api::load(&words[2]) - 1);
      check(routine, hp::shmem::atomic_set(&words[2], std::int64_t(0), hp::shmem::my_pe()));
    }
    if (set.me + 1 < set.size) {
      check(routine,
            hp::shmem::atomic_set(&words[2], std::int64_t(offset + bytes + 1), set.pe(set.me + 1)));
    }
  }
  synchronize(routine, set, p_sync, false);
  auto* out = static_cast<char*>(c_api::sym(dest));
  for (int j = 0; j < set.size; ++j) {
    const int k = (set.me + j) % set.size;  // start at a different PE on each PE
    put(routine, out + offset, c_api::sym(source), bytes, set.pe(k));
  }
  synchronize(routine, set, p_sync, true);
}

// Block j of source (nelems elements, element stride sst) to block me of member j's dest
// (element stride dst).
void alltoall(const char* routine, void* dest, const void* source, std::ptrdiff_t dst,
              std::ptrdiff_t sst, std::size_t nelems, std::size_t size, const ActiveSet& set,
              long* p_sync) {
  const std::size_t bytes = bytes_of(routine, nelems, size);
  synchronize(routine, set, p_sync, false);
  auto* out = static_cast<char*>(c_api::sym(dest));
  const auto* in = static_cast<const char*>(c_api::sym(source));
  const auto elem = std::ptrdiff_t(size), count = std::ptrdiff_t(nelems);
  for (int j0 = 0; j0 < set.size; ++j0) {
    const int j = (set.me + j0) % set.size;
    if (dst == 1 && sst == 1) {
      put(routine, out + std::ptrdiff_t(set.me) * count * elem, in + j * count * elem, bytes,
          set.pe(j));
      continue;
    }
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      put(routine, out + (std::ptrdiff_t(set.me) * count + i) * dst * elem,
          in + (j * count + i) * sst * elem, size, set.pe(j));
    }
  }
  synchronize(routine, set, p_sync, true);
}

template <Op kOp, typename T>
void to_all(const char* routine, T* dest, const T* source, int nreduce, const ActiveSet& set,
            long* p_sync) {
  if (nreduce < 0) {
    c_api::fail(routine,
                Status::error(ErrorCode::kInvalidArgument, "nreduce {} is negative", nreduce));
  }
  const std::size_t count = std::size_t(nreduce), bytes = bytes_of(routine, count, sizeof(T));
  synchronize(routine, set, p_sync, false);
  std::vector<T> sum(count), part(count);
  const T* src = c_api::sym(source);
  for (int k = 0; k < set.size && count > 0; ++k) {
    T* in = k == 0 ? sum.data() : part.data();
    check(routine, hp::shmem::get(in, src, bytes, set.pe(k)));
    if (k > 0) c_api::combine<kOp, T>(sum.data(), part.data(), count, nullptr);
  }
  synchronize(routine, set, p_sync, false);
  if (count > 0) std::memcpy(c_api::sym(dest), sum.data(), bytes);
}

}  // namespace

extern "C" {

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  const char* routine = "shmem_barrier";
  synchronize(routine, active_set(routine, PE_start, logPE_stride, PE_size), pSync, true);
}

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  const char* routine = "shmem_sync";
  synchronize(routine, active_set(routine, PE_start, logPE_stride, PE_size), pSync, false);
}

#define HP_C_ACTIVE_SET(SIZE)                                                              \
  void shmem_broadcast##SIZE(void* dest, const void* source, size_t nelems, int PE_root,   \
                             int PE_start, int logPE_stride, int PE_size, long* pSync) {   \
    const char* routine = "shmem_broadcast" #SIZE;                                         \
    broadcast(routine, dest, source, nelems, SIZE / 8, PE_root,                            \
              active_set(routine, PE_start, logPE_stride, PE_size), pSync);                \
  }                                                                                        \
  void shmem_collect##SIZE(void* dest, const void* source, size_t nelems, int PE_start,    \
                           int logPE_stride, int PE_size, long* pSync) {                   \
    const char* routine = "shmem_collect" #SIZE;                                           \
    collect(routine, false, dest, source, nelems, SIZE / 8,                                \
            active_set(routine, PE_start, logPE_stride, PE_size), pSync);                  \
  }                                                                                        \
  void shmem_fcollect##SIZE(void* dest, const void* source, size_t nelems, int PE_start,   \
                            int logPE_stride, int PE_size, long* pSync) {                  \
    const char* routine = "shmem_fcollect" #SIZE;                                          \
    collect(routine, true, dest, source, nelems, SIZE / 8,                                 \
            active_set(routine, PE_start, logPE_stride, PE_size), pSync);                  \
  }                                                                                        \
  void shmem_alltoall##SIZE(void* dest, const void* source, size_t nelems, int PE_start,   \
                            int logPE_stride, int PE_size, long* pSync) {                  \
    const char* routine = "shmem_alltoall" #SIZE;                                          \
    alltoall(routine, dest, source, 1, 1, nelems, SIZE / 8,                                \
             active_set(routine, PE_start, logPE_stride, PE_size), pSync);                 \
  }                                                                                        \
  void shmem_alltoalls##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,   \
                             long* pSync) {                                                \
    const char* routine = "shmem_alltoalls" #SIZE;                                         \
    alltoall(routine, dest, source, dst, sst, nelems, SIZE / 8,                            \
             active_set(routine, PE_start, logPE_stride, PE_size), pSync);                 \
  }
HP_C_ACTIVE_SET(32)
HP_C_ACTIVE_SET(64)
#undef HP_C_ACTIVE_SET

#define HP_C_TO_ALL(TYPE, NAME, OP, KIND)                                                      \
  void shmem_##NAME##_##OP##_to_all(TYPE* dest, const TYPE* source, int nreduce, int PE_start, \
                                    int logPE_stride, int PE_size, TYPE* pWrk, long* pSync) {  \
    (void)pWrk;                                                                                \
    const char* routine = "shmem_" #NAME "_" #OP "_to_all";                                    \
    to_all<Op::KIND>(routine, dest, source, nreduce,                                           \
                     active_set(routine, PE_start, logPE_stride, PE_size), pSync);             \
  }
#define HP_C_BITWISE_TO_ALL(TYPE, NAME) \
  HP_C_TO_ALL(TYPE, NAME, and, kAnd)    \
  HP_C_TO_ALL(TYPE, NAME, or, kOr) HP_C_TO_ALL(TYPE, NAME, xor, kXor)
#define HP_C_MINMAX_TO_ALL(TYPE, NAME) \
  HP_C_TO_ALL(TYPE, NAME, max, kMax) HP_C_TO_ALL(TYPE, NAME, min, kMin)
#define HP_C_ARITH_TO_ALL(TYPE, NAME) \
  HP_C_TO_ALL(TYPE, NAME, sum, kSum) HP_C_TO_ALL(TYPE, NAME, prod, kProd)
HP_SHMEM_TO_ALL_BITWISE_TYPES(HP_C_BITWISE_TO_ALL)
HP_SHMEM_TO_ALL_MINMAX_TYPES(HP_C_MINMAX_TO_ALL)
HP_SHMEM_TO_ALL_ARITH_TYPES(HP_C_ARITH_TO_ALL)
#undef HP_C_TO_ALL
#undef HP_C_BITWISE_TO_ALL
#undef HP_C_MINMAX_TO_ALL
#undef HP_C_ARITH_TO_ALL

}  // extern "C"
