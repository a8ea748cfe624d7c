// Remote memory access: put/get (blocking, _nbi, single elements, strided), put with signal,
// signal reads and waits, fence and quiet. Every typed family is defined once per type table
// of shmem.h; the strided forms are loops of single-element puts and gets.
#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::check;
using hp::Status;

namespace {

enum class Op { kPut, kGet, kPutNbi, kGetNbi };

Status transfer(Op op, void* dest, const void* source, std::size_t bytes, int pe) {
  switch (op) {
    case Op::kPut:
      return hp::shmem::put(dest, source, bytes, pe);
    case Op::kGet:
      return hp::shmem::get(dest, source, bytes, pe);
    case Op::kPutNbi:
      return hp::shmem::put_nbi(dest, source, bytes, pe);
    case Op::kGetNbi:
      return hp::shmem::get_nbi(dest, source, bytes, pe);
  }
  return Status::ok();
}

void contiguous(const char* routine, Op op, void* dest, const void* source, std::size_t nelems,
                std::size_t size, int pe) {
  std::size_t bytes = 0;
  check(routine, c_api::checked_bytes(routine, nelems, size, &bytes));
  check(routine, transfer(op, c_api::sym(dest), c_api::sym(source), bytes, pe));
}

// Element i of source (stride sst elements) to element i of dest (stride dst elements).
void strided(const char* routine, Op op, void* dest, const void* source, std::ptrdiff_t dst,
             std::ptrdiff_t sst, std::size_t nelems, std::size_t size, int pe) {
  if (dst == 1 && sst == 1) return contiguous(routine, op, dest, source, nelems, size, pe);
  auto* out = static_cast<char*>(c_api::sym(dest));
  const auto* in = static_cast<const char*>(c_api::sym(source));
  const auto step_out = dst * std::ptrdiff_t(size), step_in = sst * std::ptrdiff_t(size);
  for (std::size_t i = 0; i < nelems; ++i) {
    const auto k = std::ptrdiff_t(i);
    check(routine, transfer(op, out + k * step_out, in + k * step_in, size, pe));
  }
}

// Block b (bsize contiguous elements) of source, starting at element b x sst, to block b of dest,
// starting at element b x dst (OpenSHMEM 1.6's ibput/ibget).
void blocked(const char* routine, Op op, void* dest, const void* source, std::ptrdiff_t dst,
             std::ptrdiff_t sst, std::size_t bsize, std::size_t nblocks, std::size_t size, int pe) {
  if (nblocks == 1 || bsize == 0) {
    return contiguous(routine, op, dest, source, nblocks == 0 ? 0 : bsize, size, pe);
  }
  // A put of every block at once: the target is woken once (hp::shmem::put_blocks).
  std::size_t block_bytes = 0;
  check(routine, c_api::checked_bytes(routine, bsize, size, &block_bytes));
  if (op == Op::kPut || op == Op::kPutNbi) {
    check(routine,
          hp::shmem::put_blocks(c_api::sym(dest), c_api::sym(source), dst * std::ptrdiff_t(size),
                                sst * std::ptrdiff_t(size), block_bytes, nblocks, pe));
    return;
  }
  auto* out = static_cast<char*>(dest);
  const auto* in = static_cast<const char*>(source);
  const auto step_out = dst * std::ptrdiff_t(size), step_in = sst * std::ptrdiff_t(size);
  for (std::size_t b = 0; b < nblocks; ++b) {
    const auto k = std::ptrdiff_t(b);
    contiguous(routine, op, out + k * step_out, in + k * step_in, bsize, size, pe);
  }
}

void signal_update(const char* routine, std::uint64_t* sig_addr, std::uint64_t signal, bool add,
                   int pe) {
  sig_addr = c_api::sym(sig_addr);
  check(routine, add ? hp::shmem::atomic_add(sig_addr, signal, pe)
                     : hp::shmem::atomic_set(sig_addr, signal, pe));
}

void put_signal(const char* routine, bool nbi, void* dest, const void* source, std::size_t nelems,
                std::size_t size, std::uint64_t* sig_addr, std::uint64_t signal, int sig_op,
                int pe) {
  std::size_t bytes = 0;
  check(routine, c_api::checked_bytes(routine, nelems, size, &bytes));
  const auto op = hp::shmem::SignalOp(sig_op);  // validated by put_signal
  dest = c_api::sym(dest);
  source = c_api::sym(source);
  sig_addr = c_api::sym(sig_addr);
  check(routine, nbi ? hp::shmem::put_signal_nbi(dest, source, bytes, sig_addr, signal, op, pe)
                     : hp::shmem::put_signal(dest, source, bytes, sig_addr, signal, op, pe));
}

}  // namespace

extern "C" {

#define HP_C_RMA(TYPE, NAME)                                                                      \
  void shmem_##NAME##_put(TYPE* dest, const TYPE* source, size_t nelems, int pe) {                \
    contiguous("shmem_" #NAME "_put", Op::kPut, dest, source, nelems, sizeof(TYPE), pe);          \
  }                                                                                               \
  void shmem_##NAME##_get(TYPE* dest, const TYPE* source, size_t nelems, int pe) {                \
    contiguous("shmem_" #NAME "_get", Op::kGet, dest, source, nelems, sizeof(TYPE), pe);          \
  }                                                                                               \
  void shmem_##NAME##_put_nbi(TYPE* dest, const TYPE* source, size_t nelems, int pe) {            \
    contiguous("shmem_" #NAME "_put_nbi", Op::kPutNbi, dest, source, nelems, sizeof(TYPE), pe);   \
  }                                                                                               \
  void shmem_##NAME##_get_nbi(TYPE* dest, const TYPE* source, size_t nelems, int pe) {            \
    contiguous("shmem_" #NAME "_get_nbi", Op::kGetNbi, dest, source, nelems, sizeof(TYPE), pe);   \
  }                                                                                               \
  void shmem_##NAME##_p(TYPE* dest, TYPE value, int pe) {                                         \
    check("shmem_" #NAME "_p", hp::shmem::put(c_api::sym(dest), &value, sizeof(TYPE), pe));       \
  }                                                                                               \
  TYPE shmem_##NAME##_g(const TYPE* source, int pe) {                                             \
    TYPE value{};                                                                                 \
    check("shmem_" #NAME "_g", hp::shmem::get(&value, c_api::sym(source), sizeof(TYPE), pe));     \
    return value;                                                                                 \
  }                                                                                               \
  void shmem_##NAME##_iput(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,          \
                           size_t nelems, int pe) {                                               \
    strided("shmem_" #NAME "_iput", Op::kPut, dest, source, dst, sst, nelems, sizeof(TYPE), pe);  \
  }                                                                                               \
  void shmem_##NAME##_iget(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,          \
                           size_t nelems, int pe) {                                               \
    strided("shmem_" #NAME "_iget", Op::kGet, dest, source, dst, sst, nelems, sizeof(TYPE), pe);  \
  }                                                                                               \
  void shmem_##NAME##_ibput(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,         \
                            size_t bsize, size_t nblocks, int pe) {                               \
    blocked("shmem_" #NAME "_ibput", Op::kPut, dest, source, dst, sst, bsize, nblocks,            \
            sizeof(TYPE), pe);                                                                    \
  }                                                                                               \
  void shmem_##NAME##_ibget(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,         \
                            size_t bsize, size_t nblocks, int pe) {                               \
    blocked("shmem_" #NAME "_ibget", Op::kGet, dest, source, dst, sst, bsize, nblocks,            \
            sizeof(TYPE), pe);                                                                    \
  }                                                                                               \
  void shmem_##NAME##_put_signal(TYPE* dest, const TYPE* source, size_t nelems,                   \
                                 uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {       \
    put_signal("shmem_" #NAME "_put_signal", false, dest, source, nelems, sizeof(TYPE), sig_addr, \
               signal, sig_op, pe);                                                               \
  }                                                                                               \
  void shmem_##NAME##_put_signal_nbi(TYPE* dest, const TYPE* source, size_t nelems,               \
                                     uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {   \
    put_signal("shmem_" #NAME "_put_signal_nbi", true, dest, source, nelems, sizeof(TYPE),        \
               sig_addr, signal, sig_op, pe);                                                     \
  }
HP_SHMEM_RMA_TYPES(HP_C_RMA)
#undef HP_C_RMA

#define HP_C_RMA_SIZE(SIZE)                                                                        \
  void shmem_put##SIZE(void* dest, const void* source, size_t nelems, int pe) {                    \
    contiguous("shmem_put" #SIZE, Op::kPut, dest, source, nelems, SIZE / 8, pe);                   \
  }                                                                                                \
  void shmem_get##SIZE(void* dest, const void* source, size_t nelems, int pe) {                    \
    contiguous("shmem_get" #SIZE, Op::kGet, dest, source, nelems, SIZE / 8, pe);                   \
  }                                                                                                \
  void shmem_put##SIZE##_nbi(void* dest, const void* source, size_t nelems, int pe) {              \
    contiguous("shmem_put" #SIZE "_nbi", Op::kPutNbi, dest, source, nelems, SIZE / 8, pe);         \
  }                                                                                                \
  void shmem_get##SIZE##_nbi(void* dest, const void* source, size_t nelems, int pe) {              \
    contiguous("shmem_get" #SIZE "_nbi", Op::kGetNbi, dest, source, nelems, SIZE / 8, pe);         \
  }                                                                                                \
  void shmem_iput##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,              \
                        size_t nelems, int pe) {                                                   \
    strided("shmem_iput" #SIZE, Op::kPut, dest, source, dst, sst, nelems, SIZE / 8, pe);           \
  }                                                                                                \
  void shmem_iget##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,              \
                        size_t nelems, int pe) {                                                   \
    strided("shmem_iget" #SIZE, Op::kGet, dest, source, dst, sst, nelems, SIZE / 8, pe);           \
  }                                                                                                \
  void shmem_ibput##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,             \
                         size_t bsize, size_t nblocks, int pe) {                                   \
    blocked("shmem_ibput" #SIZE, Op::kPut, dest, source, dst, sst, bsize, nblocks, SIZE / 8, pe);  \
  }                                                                                                \
  void shmem_ibget##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,             \
                         size_t bsize, size_t nblocks, int pe) {                                   \
    blocked("shmem_ibget" #SIZE, Op::kGet, dest, source, dst, sst, bsize, nblocks, SIZE / 8, pe);  \
  }                                                                                                \
  void shmem_put##SIZE##_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr, \
                                uint64_t signal, int sig_op, int pe) {                             \
    put_signal("shmem_put" #SIZE "_signal", false, dest, source, nelems, SIZE / 8, sig_addr,       \
               signal, sig_op, pe);                                                                \
  }                                                                                                \
  void shmem_put##SIZE##_signal_nbi(void* dest, const void* source, size_t nelems,                 \
                                    uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {     \
    put_signal("shmem_put" #SIZE "_signal_nbi", true, dest, source, nelems, SIZE / 8, sig_addr,    \
               signal, sig_op, pe);                                                                \
  }
HP_SHMEM_RMA_SIZES(HP_C_RMA_SIZE)
#undef HP_C_RMA_SIZE

void shmem_putmem(void* dest, const void* source, size_t nelems, int pe) {
  contiguous("shmem_putmem", Op::kPut, dest, source, nelems, 1, pe);
}

void shmem_getmem(void* dest, const void* source, size_t nelems, int pe) {
  contiguous("shmem_getmem", Op::kGet, dest, source, nelems, 1, pe);
}

void shmem_putmem_nbi(void* dest, const void* source, size_t nelems, int pe) {
  contiguous("shmem_putmem_nbi", Op::kPutNbi, dest, source, nelems, 1, pe);
}

void shmem_getmem_nbi(void* dest, const void* source, size_t nelems, int pe) {
  contiguous("shmem_getmem_nbi", Op::kGetNbi, dest, source, nelems, 1, pe);
}

void shmem_putmem_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                         uint64_t signal, int sig_op, int pe) {
  put_signal("shmem_putmem_signal", false, dest, source, nelems, 1, sig_addr, signal, sig_op, pe);
}

void shmem_putmem_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                             uint64_t signal, int sig_op, int pe) {
  put_signal("shmem_putmem_signal_nbi", true, dest, source, nelems, 1, sig_addr, signal, sig_op,
             pe);
}

uint64_t shmem_signal_fetch(const uint64_t* sig_addr) {
  sig_addr = c_api::sym(sig_addr);
  check("shmem_signal_fetch",
        c_api::check_local_words("shmem_signal_fetch", sig_addr, 1, sizeof(uint64_t)));
  return hp::shmem::signal_fetch(sig_addr);
}

uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value) {
  const char* routine = "shmem_signal_wait_until";
  hp::shmem::Cmp c{};
  check(routine, c_api::to_cmp(routine, cmp, &c));
  uint64_t seen = 0;
  check(routine, hp::shmem::signal_wait_until(c_api::sym(sig_addr), c, cmp_value, &seen));
  return seen;
}

void shmem_signal_add(uint64_t* sig_addr, uint64_t signal, int pe) {
  signal_update("shmem_signal_add", sig_addr, signal, true, pe);
}

void shmem_signal_set(uint64_t* sig_addr, uint64_t signal, int pe) {
  signal_update("shmem_signal_set", sig_addr, signal, false, pe);
}

void shmem_fence(void) { check("shmem_fence", hp::shmem::fence()); }

void shmem_quiet(void) { check("shmem_quiet", hp::shmem::quiet()); }

// Every PE named must be one; then all of this PE's operations complete (more than asked).
void shmem_pe_quiet(const int* target_pes, size_t npes) {
  const char* routine = "shmem_pe_quiet";
  const int n = hp::shmem::n_pes();
  for (std::size_t i = 0; i < npes; ++i) {
    if (target_pes[i] < 0 || target_pes[i] >= n) {
      c_api::fail(routine,
                  Status::error(hp::ErrorCode::kOutOfRange, "target_pes[{}] = {} is no PE (0..{})",
                                i, target_pes[i], n - 1));
    }
  }
  check(routine, hp::shmem::quiet());
}

}  // extern "C"
