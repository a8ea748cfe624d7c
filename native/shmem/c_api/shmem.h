/* shmem.h: the OpenSHMEM 1.6 C API of HyperParallel (libhyper_parallel_shmem_c).
 *
 * Compile and link:   hpcc prog.c -o prog        (or: cc -I<payload>/symmetric_memory/include
 *                     prog.c -L<payload>/symmetric_memory/lib -lhyper_parallel_shmem_c)
 * Run:                hprun -n 4 ./prog
 *
 * The routines keep the OpenSHMEM 1.6 names, arguments and semantics. What is implemented and
 * what is absent (absent routines are not declared here: using one is a compile or link error,
 * never a silent no-op) is listed in COVERAGE.md next to this header in the sources.
 *
 * Errors: a routine that fails (a PE out of range, an address outside the symmetric heap, a
 * wait past HP_SHMEM_TIMEOUT_S, a PE that died, ...) prints one line
 *     hp shmem: <routine>: <CODE> (<number>): <message>
 * to stderr and ends the process with status 1 (hprun then ends the job). Routines that return
 * an int status (collectives, team routines, shmem_init_thread) print the same line and return
 * non-zero instead; shmem_malloc and friends print it and return NULL.
 *
 * The type-specific families are declared once per type table below (HP_SHMEM_*_TYPES): the
 * routine shmem_<TYPENAME>_<op> exists for every (TYPE, TYPENAME) pair of its family's table.
 * C11 programs also get the type-generic macros of OpenSHMEM 1.6 (shmem_put, shmem_atomic_add,
 * shmem_sum_reduce, ...), selected by the pointed-to type of the first data argument. */
#ifndef HYPER_PARALLEL_SHMEM_C_H
#define HYPER_PARALLEL_SHMEM_C_H

#include <stddef.h>
#include <stdint.h>

/* The complex types of the sum and product reductions: C99's _Complex, or in C++ the
 * std::complex of the same layout. */
#ifdef __cplusplus
#include <complex>
#define HP_SHMEM_COMPLEXD_ std::complex<double>
#define HP_SHMEM_COMPLEXF_ std::complex<float>
#else
#define HP_SHMEM_COMPLEXD_ double _Complex
#define HP_SHMEM_COMPLEXF_ float _Complex
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants ------------------------------------------------------------------------- */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 6
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "HyperParallel"

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

/* The values of hp::shmem::Cmp and hp::shmem::SignalOp. */
#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* Hints of shmem_malloc_with_hints (accepted and ignored: every block is equally fast here). */
#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE (1L << 1)

/* The work arrays of the deprecated active-set collectives, which OpenSHMEM 1.5 still lists
 * (declared below, under "the deprecated active-set collectives"): pSync arrays of
 * SHMEM_*_SYNC_SIZE longs, each element initialised to SHMEM_SYNC_VALUE, and pWrk arrays of at
 * least SHMEM_REDUCE_MIN_WRKDATA_SIZE elements (accepted and unused). */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_BARRIER_SYNC_SIZE 64
#define SHMEM_BCAST_SYNC_SIZE 64
#define SHMEM_REDUCE_SYNC_SIZE 64
#define SHMEM_COLLECT_SYNC_SIZE 64
#define SHMEM_ALLTOALL_SYNC_SIZE 64
#define SHMEM_ALLTOALLS_SYNC_SIZE 64
#define SHMEM_SYNC_SIZE 64 /* the largest of the above */
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 64

/* The deprecated spellings with a leading underscore. */
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

/* ---- teams ----------------------------------------------------------------------------- */

/* An opaque handle. SHMEM_TEAM_SHARED is the PEs whose heaps this PE maps (shmem_ptr gives an
 * address for each): every PE under hprun, the PEs of this host under mpirun, only this PE on
 * the mpi transport (HP_SHMEM_TRANSPORT=mpi). */
typedef struct hp_shmem_team_handle* shmem_team_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t)(uintptr_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)(uintptr_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)(uintptr_t)2)

typedef struct {
  /* Kept as given to the split (when config_mask has SHMEM_TEAM_NUM_CONTEXTS; 0 otherwise) and
   * returned by shmem_team_get_config. It reserves nothing: a context needs no reservation. */
  int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

/* ---- communication contexts ------------------------------------------------------------ */

/* An opaque handle. Every context issues its operations as the default one does: they
 * complete at shmem_ctx_quiet, shmem_quiet or a barrier alike, and shmem_ctx_fence and
 * shmem_ctx_quiet order or complete every operation of the PE. A context made from a team
 * (shmem_team_create_ctx) numbers PEs as that team does; the others as SHMEM_TEAM_WORLD. The
 * options are accepted and ignored. */
typedef struct hp_shmem_ctx_handle* shmem_ctx_t;
#define SHMEM_CTX_INVALID ((shmem_ctx_t)(uintptr_t)0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)(uintptr_t)1)
#define SHMEM_CTX_PRIVATE (1L << 0)
#define SHMEM_CTX_SERIALIZED (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)

/* clang-format off */
/* ---- type tables: X(TYPE, TYPENAME) ---------------------------------------------------- */

/* OpenSHMEM 1.5 Table 5, the standard RMA types (RMA, signals, broadcast/fcollect/alltoall). */
#define HP_SHMEM_RMA_TYPES(X)                                                                 \
  X(float, float) X(double, double) X(long double, longdouble) X(char, char)                  \
  X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)      \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                     \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16)  \
  X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)                   \
  X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)

/* Table 6, the standard AMO types (fetch, set, compare_swap, swap, inc, add and fetch forms). */
#define HP_SHMEM_AMO_TYPES(X)                                                                 \
  X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                      \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)                  \
  X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)                   \
  X(ptrdiff_t, ptrdiff)

/* The extended AMO types beyond Table 6: fetch, set and swap only. */
#define HP_SHMEM_AMO_FLOAT_TYPES(X) X(float, float) X(double, double)

/* Table 7, the bitwise AMO types (and, or, xor and their fetch forms). */
#define HP_SHMEM_AMO_BITWISE_TYPES(X)                                                         \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)              \
  X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

/* Table 9, the point-to-point synchronization types (wait_until and test families). */
#define HP_SHMEM_SYNC_TYPES(X)                                                                \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) X(unsigned short, ushort)   \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)              \
  X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
  X(ptrdiff_t, ptrdiff)

/* Table 10, the reduction types, by operation. and_reduce, or_reduce, xor_reduce: */
#define HP_SHMEM_BITWISE_REDUCE_TYPES(X)                                                      \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                     \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16)  \
  X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)                   \
  X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
/* max_reduce and min_reduce: */
#define HP_SHMEM_MINMAX_REDUCE_TYPES(X)                                                       \
  X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)               \
  X(long long, longlong) X(ptrdiff_t, ptrdiff) HP_SHMEM_BITWISE_REDUCE_TYPES(X)               \
  X(float, float) X(double, double) X(long double, longdouble)
/* sum_reduce and prod_reduce (integer sums and products wrap, two's complement): */
#define HP_SHMEM_ARITH_REDUCE_TYPES(X)                                                        \
  HP_SHMEM_MINMAX_REDUCE_TYPES(X) X(HP_SHMEM_COMPLEXD_, complexd) X(HP_SHMEM_COMPLEXF_, complexf)

/* The deprecated active-set reductions shmem_TYPENAME_OP_to_all, by operation: and, or, xor; */
#define HP_SHMEM_TO_ALL_BITWISE_TYPES(X)                                                     \
  X(short, short) X(int, int) X(long, long) X(long long, longlong)
/* max, min; */
#define HP_SHMEM_TO_ALL_MINMAX_TYPES(X)                                                       \
  HP_SHMEM_TO_ALL_BITWISE_TYPES(X) X(float, float) X(double, double) X(long double, longdouble)
/* sum, prod. */
#define HP_SHMEM_TO_ALL_ARITH_TYPES(X)                                                        \
  HP_SHMEM_TO_ALL_MINMAX_TYPES(X) X(HP_SHMEM_COMPLEXD_, complexd) X(HP_SHMEM_COMPLEXF_, complexf)

/* The fixed-size RMA routines shmem_<op>SIZE: X(SIZE) for SIZE bits per element. */
#define HP_SHMEM_RMA_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* clang-format on */
/* ---- setup, exit and query ------------------------------------------------------------- */

void shmem_init(void);
int shmem_init_thread(int requested, int* provided);
void shmem_query_thread(int* provided);
/* 1.6: non-zero between a shmem_init and its matching shmem_finalize (calls nest). */
void shmem_query_initialized(int* initialized);
void shmem_finalize(void);
/* Never returns: _Noreturn in C11 (as OpenSHMEM's C11 synopsis), [[noreturn]] in C++11. */
#if defined(__cplusplus) && __cplusplus >= 201103L
[[noreturn]] void shmem_global_exit(int status);
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Noreturn void shmem_global_exit(int status);
#else
void shmem_global_exit(int status);
#endif
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void* addr, int pe);
void* shmem_ptr(const void* dest, int pe);
void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe);
void shmem_info_get_version(int* major, int* minor);
void shmem_info_get_name(char* name);

/* ---- symmetric memory (collective over the world team) --------------------------------- */

void* shmem_malloc(size_t size);
void* shmem_malloc_with_hints(size_t size, long hints);
void* shmem_calloc(size_t count, size_t size);
void* shmem_align(size_t alignment, size_t size);
void* shmem_realloc(void* ptr, size_t size);
void shmem_free(void* ptr);

/* ---- teams ----------------------------------------------------------------------------- */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                        long yaxis_mask, shmem_team_t* yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* ---- RMA ------------------------------------------------------------------------------- */

/* Each RMA and AMO routine has a form on the default context (shmem_...) and one on a given
 * context (shmem_ctx_..., with a leading shmem_ctx_t): the macros below take the name prefix
 * PRE and the leading parameter CTX (empty, or HP_SHMEM_CTX_). */
#define HP_SHMEM_CTX_ shmem_ctx_t ctx,

#define HP_SHMEM_DECLARE_RMA_(TYPE, NAME, PRE, CTX)                                        \
  void PRE##NAME##_put(CTX TYPE* dest, const TYPE* source, size_t nelems, int pe);         \
  void PRE##NAME##_get(CTX TYPE* dest, const TYPE* source, size_t nelems, int pe);         \
  void PRE##NAME##_put_nbi(CTX TYPE* dest, const TYPE* source, size_t nelems, int pe);     \
  void PRE##NAME##_get_nbi(CTX TYPE* dest, const TYPE* source, size_t nelems, int pe);     \
  void PRE##NAME##_p(CTX TYPE* dest, TYPE value, int pe);                                  \
  TYPE PRE##NAME##_g(CTX const TYPE* source, int pe);                                      \
  void PRE##NAME##_iput(CTX TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,  \
                        size_t nelems, int pe);                                            \
  void PRE##NAME##_iget(CTX TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,  \
                        size_t nelems, int pe);                                            \
  void PRE##NAME##_ibput(CTX TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst, \
                         size_t bsize, size_t nblocks, int pe);                            \
  void PRE##NAME##_ibget(CTX TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst, \
                         size_t bsize, size_t nblocks, int pe);                            \
  void PRE##NAME##_put_signal(CTX TYPE* dest, const TYPE* source, size_t nelems,           \
                              uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);    \
  void PRE##NAME##_put_signal_nbi(CTX TYPE* dest, const TYPE* source, size_t nelems,       \
                                  uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
#define HP_SHMEM_DECLARE_RMA_FORMS_(TYPE, NAME) \
  HP_SHMEM_DECLARE_RMA_(TYPE, NAME, shmem_, )   \
  HP_SHMEM_DECLARE_RMA_(TYPE, NAME, shmem_ctx_, HP_SHMEM_CTX_)
HP_SHMEM_RMA_TYPES(HP_SHMEM_DECLARE_RMA_FORMS_)
#undef HP_SHMEM_DECLARE_RMA_FORMS_
#undef HP_SHMEM_DECLARE_RMA_

#define HP_SHMEM_DECLARE_RMA_SIZE_(SIZE, PRE, CTX)                                        \
  void PRE##put##SIZE(CTX void* dest, const void* source, size_t nelems, int pe);         \
  void PRE##get##SIZE(CTX void* dest, const void* source, size_t nelems, int pe);         \
  void PRE##put##SIZE##_nbi(CTX void* dest, const void* source, size_t nelems, int pe);   \
  void PRE##get##SIZE##_nbi(CTX void* dest, const void* source, size_t nelems, int pe);   \
  void PRE##iput##SIZE(CTX void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,  \
                       size_t nelems, int pe);                                            \
  void PRE##iget##SIZE(CTX void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,  \
                       size_t nelems, int pe);                                            \
  void PRE##ibput##SIZE(CTX void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, \
                        size_t bsize, size_t nblocks, int pe);                            \
  void PRE##ibget##SIZE(CTX void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, \
                        size_t bsize, size_t nblocks, int pe);                            \
  void PRE##put##SIZE##_signal(CTX void* dest, const void* source, size_t nelems,         \
                               uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);  \
  void PRE##put##SIZE##_signal_nbi(CTX void* dest, const void* source, size_t nelems,     \
                                   uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
#define HP_SHMEM_DECLARE_RMA_SIZE_FORMS_(SIZE) \
  HP_SHMEM_DECLARE_RMA_SIZE_(SIZE, shmem_, )   \
  HP_SHMEM_DECLARE_RMA_SIZE_(SIZE, shmem_ctx_, HP_SHMEM_CTX_)
HP_SHMEM_RMA_SIZES(HP_SHMEM_DECLARE_RMA_SIZE_FORMS_)
#undef HP_SHMEM_DECLARE_RMA_SIZE_FORMS_
#undef HP_SHMEM_DECLARE_RMA_SIZE_

#define HP_SHMEM_DECLARE_RMA_MEM_(PRE, CTX)                                                      \
  void PRE##putmem(CTX void* dest, const void* source, size_t nelems, int pe);                   \
  void PRE##getmem(CTX void* dest, const void* source, size_t nelems, int pe);                   \
  void PRE##putmem_nbi(CTX void* dest, const void* source, size_t nelems, int pe);               \
  void PRE##getmem_nbi(CTX void* dest, const void* source, size_t nelems, int pe);               \
  void PRE##putmem_signal(CTX void* dest, const void* source, size_t nelems, uint64_t* sig_addr, \
                          uint64_t signal, int sig_op, int pe);                                  \
  void PRE##putmem_signal_nbi(CTX void* dest, const void* source, size_t nelems,                 \
                              uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
HP_SHMEM_DECLARE_RMA_MEM_(shmem_, )
HP_SHMEM_DECLARE_RMA_MEM_(shmem_ctx_, HP_SHMEM_CTX_)
#undef HP_SHMEM_DECLARE_RMA_MEM_
uint64_t shmem_signal_fetch(const uint64_t* sig_addr);
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value);
/* 1.6: the signal alone, atomically as put with signal updates it. */
void shmem_signal_add(uint64_t* sig_addr, uint64_t signal, int pe);
void shmem_signal_set(uint64_t* sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_add(shmem_ctx_t ctx, uint64_t* sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_set(shmem_ctx_t ctx, uint64_t* sig_addr, uint64_t signal, int pe);

/* ---- atomic memory operations --------------------------------------------------------- */

/* The _nbi forms store the fetched value at `fetch` (a local address) by the next quiet. */
#define HP_SHMEM_DECLARE_AMO_EXTENDED_(TYPE, NAME, PRE, CTX)                      \
  TYPE PRE##NAME##_atomic_fetch(CTX const TYPE* source, int pe);                  \
  void PRE##NAME##_atomic_set(CTX TYPE* dest, TYPE value, int pe);                \
  TYPE PRE##NAME##_atomic_swap(CTX TYPE* dest, TYPE value, int pe);               \
  void PRE##NAME##_atomic_fetch_nbi(CTX TYPE* fetch, const TYPE* source, int pe); \
  void PRE##NAME##_atomic_swap_nbi(CTX TYPE* fetch, TYPE* dest, TYPE value, int pe);
/* (Beyond the extended ones: CTX cannot be handed on to another macro.) */
#define HP_SHMEM_DECLARE_AMO_STANDARD_(TYPE, NAME, PRE, CTX)                                   \
  TYPE PRE##NAME##_atomic_compare_swap(CTX TYPE* dest, TYPE cond, TYPE value, int pe);         \
  TYPE PRE##NAME##_atomic_fetch_inc(CTX TYPE* dest, int pe);                                   \
  void PRE##NAME##_atomic_inc(CTX TYPE* dest, int pe);                                         \
  TYPE PRE##NAME##_atomic_fetch_add(CTX TYPE* dest, TYPE value, int pe);                       \
  void PRE##NAME##_atomic_add(CTX TYPE* dest, TYPE value, int pe);                             \
  void PRE##NAME##_atomic_compare_swap_nbi(CTX TYPE* fetch, TYPE* dest, TYPE cond, TYPE value, \
                                           int pe);                                            \
  void PRE##NAME##_atomic_fetch_inc_nbi(CTX TYPE* fetch, TYPE* dest, int pe);                  \
  void PRE##NAME##_atomic_fetch_add_nbi(CTX TYPE* fetch, TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_AMO_BITWISE_(TYPE, NAME, PRE, CTX)                               \
  TYPE PRE##NAME##_atomic_fetch_and(CTX TYPE* dest, TYPE value, int pe);                  \
  void PRE##NAME##_atomic_and(CTX TYPE* dest, TYPE value, int pe);                        \
  TYPE PRE##NAME##_atomic_fetch_or(CTX TYPE* dest, TYPE value, int pe);                   \
  void PRE##NAME##_atomic_or(CTX TYPE* dest, TYPE value, int pe);                         \
  TYPE PRE##NAME##_atomic_fetch_xor(CTX TYPE* dest, TYPE value, int pe);                  \
  void PRE##NAME##_atomic_xor(CTX TYPE* dest, TYPE value, int pe);                        \
  void PRE##NAME##_atomic_fetch_and_nbi(CTX TYPE* fetch, TYPE* dest, TYPE value, int pe); \
  void PRE##NAME##_atomic_fetch_or_nbi(CTX TYPE* fetch, TYPE* dest, TYPE value, int pe);  \
  void PRE##NAME##_atomic_fetch_xor_nbi(CTX TYPE* fetch, TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_AMO_FORMS_(TYPE, NAME, FAMILY)  \
  HP_SHMEM_DECLARE_AMO_##FAMILY##_(TYPE, NAME, shmem_, ) \
      HP_SHMEM_DECLARE_AMO_##FAMILY##_(TYPE, NAME, shmem_ctx_, HP_SHMEM_CTX_)
#define HP_SHMEM_DECLARE_AMO_STANDARD_FORMS_(TYPE, NAME) \
  HP_SHMEM_DECLARE_AMO_FORMS_(TYPE, NAME, EXTENDED)      \
  HP_SHMEM_DECLARE_AMO_FORMS_(TYPE, NAME, STANDARD)
#define HP_SHMEM_DECLARE_AMO_EXTENDED_FORMS_(TYPE, NAME) \
  HP_SHMEM_DECLARE_AMO_FORMS_(TYPE, NAME, EXTENDED)
#define HP_SHMEM_DECLARE_AMO_BITWISE_FORMS_(TYPE, NAME) \
  HP_SHMEM_DECLARE_AMO_FORMS_(TYPE, NAME, BITWISE)
HP_SHMEM_AMO_TYPES(HP_SHMEM_DECLARE_AMO_STANDARD_FORMS_)
HP_SHMEM_AMO_FLOAT_TYPES(HP_SHMEM_DECLARE_AMO_EXTENDED_FORMS_)
HP_SHMEM_AMO_BITWISE_TYPES(HP_SHMEM_DECLARE_AMO_BITWISE_FORMS_)
#undef HP_SHMEM_DECLARE_AMO_STANDARD_FORMS_
#undef HP_SHMEM_DECLARE_AMO_EXTENDED_FORMS_
#undef HP_SHMEM_DECLARE_AMO_BITWISE_FORMS_
#undef HP_SHMEM_DECLARE_AMO_FORMS_
#undef HP_SHMEM_DECLARE_AMO_EXTENDED_
#undef HP_SHMEM_DECLARE_AMO_STANDARD_
#undef HP_SHMEM_DECLARE_AMO_BITWISE_

/* ---- contexts -------------------------------------------------------------------------- */

/* Return 0, or non-zero with *ctx = SHMEM_CTX_INVALID (a team this PE is not in, or no more
 * contexts: at most 1024 exist at once). */
int shmem_ctx_create(long options, shmem_ctx_t* ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx);
/* Completes the context's operations; SHMEM_CTX_INVALID is ignored. */
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);
/* 1.6: hints that a run of operations on ctx follows, and ends (they complete as always). */
void shmem_ctx_session_start(shmem_ctx_t ctx);
void shmem_ctx_session_stop(shmem_ctx_t ctx);

/* ---- point-to-point synchronization ---------------------------------------------------- */

#define HP_SHMEM_DECLARE_SYNC_(TYPE, NAME)                                                        \
  void shmem_##NAME##_wait_until(TYPE* ivar, int cmp, TYPE cmp_value);                            \
  void shmem_##NAME##_wait_until_all(TYPE* ivars, size_t nelems, const int* status, int cmp,      \
                                     TYPE cmp_value);                                             \
  size_t shmem_##NAME##_wait_until_any(TYPE* ivars, size_t nelems, const int* status, int cmp,    \
                                       TYPE cmp_value);                                           \
  size_t shmem_##NAME##_wait_until_some(TYPE* ivars, size_t nelems, size_t* indices,              \
                                        const int* status, int cmp, TYPE cmp_value);              \
  void shmem_##NAME##_wait_until_all_vector(TYPE* ivars, size_t nelems, const int* status,        \
                                            int cmp, TYPE* cmp_values);                           \
  size_t shmem_##NAME##_wait_until_any_vector(TYPE* ivars, size_t nelems, const int* status,      \
                                              int cmp, TYPE* cmp_values);                         \
  size_t shmem_##NAME##_wait_until_some_vector(TYPE* ivars, size_t nelems, size_t* indices,       \
                                               const int* status, int cmp, TYPE* cmp_values);     \
  int shmem_##NAME##_test(TYPE* ivar, int cmp, TYPE cmp_value);                                   \
  int shmem_##NAME##_test_all(TYPE* ivars, size_t nelems, const int* status, int cmp,             \
                              TYPE cmp_value);                                                    \
  size_t shmem_##NAME##_test_any(TYPE* ivars, size_t nelems, const int* status, int cmp,          \
                                 TYPE cmp_value);                                                 \
  size_t shmem_##NAME##_test_some(TYPE* ivars, size_t nelems, size_t* indices, const int* status, \
                                  int cmp, TYPE cmp_value);                                       \
  int shmem_##NAME##_test_all_vector(TYPE* ivars, size_t nelems, const int* status, int cmp,      \
                                     TYPE* cmp_values);                                           \
  size_t shmem_##NAME##_test_any_vector(TYPE* ivars, size_t nelems, const int* status, int cmp,   \
                                        TYPE* cmp_values);                                        \
  size_t shmem_##NAME##_test_some_vector(TYPE* ivars, size_t nelems, size_t* indices,             \
                                         const int* status, int cmp, TYPE* cmp_values);
HP_SHMEM_SYNC_TYPES(HP_SHMEM_DECLARE_SYNC_)
#undef HP_SHMEM_DECLARE_SYNC_

/* ---- memory ordering and barriers ------------------------------------------------------ */

void shmem_fence(void);
void shmem_quiet(void);
/* 1.6: completes the operations to the given PEs (here: every operation, as shmem_quiet). */
void shmem_pe_quiet(const int* target_pes, size_t npes);
void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int* target_pes, size_t npes);
void shmem_barrier_all(void);
void shmem_sync_all(void);
/* C11 and C++ also name it shmem_sync(team) (below). */
int shmem_team_sync(shmem_team_t team);

/* ---- profiling --------------------------------------------------------------------------- */

/* The profiling level (0: off, 1: the default, 2: full; others are the profiler's) for a
 * profiling library interposed on the shmem_ routines. Without one it changes nothing. */
void shmem_pcontrol(const int level, ...);

/* ---- distributed locks (a symmetric long, zero before first use) ----------------------- */

void shmem_set_lock(long* lock);
void shmem_clear_lock(long* lock);
int shmem_test_lock(long* lock);

/* ---- collectives on a team (return 0 on success) --------------------------------------- */

#define HP_SHMEM_DECLARE_COLLECTIVES_(TYPE, NAME)                                                \
  int shmem_##NAME##_broadcast(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems, \
                               int PE_root);                                                     \
  int shmem_##NAME##_fcollect(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems); \
  int shmem_##NAME##_alltoall(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems); \
  int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE* dest, const TYPE* source, ptrdiff_t dst, \
                               ptrdiff_t sst, size_t nelems);                                    \
  int shmem_##NAME##_collect(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems);
HP_SHMEM_RMA_TYPES(HP_SHMEM_DECLARE_COLLECTIVES_)
#undef HP_SHMEM_DECLARE_COLLECTIVES_

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root);
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
/* collect: each member's nelems (they may differ) are packed in team order into dest. */
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

#define HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, OP)                                      \
  int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE* dest, const TYPE* source, \
                                   size_t nreduce);
#define HP_SHMEM_DECLARE_BITWISE_REDUCE_(TYPE, NAME) \
  HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, and)          \
  HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, or) HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, xor)
#define HP_SHMEM_DECLARE_MINMAX_REDUCE_(TYPE, NAME) \
  HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, max) HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, min)
#define HP_SHMEM_DECLARE_ARITH_REDUCE_(TYPE, NAME) \
  HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, sum) HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, prod)
HP_SHMEM_BITWISE_REDUCE_TYPES(HP_SHMEM_DECLARE_BITWISE_REDUCE_)
HP_SHMEM_MINMAX_REDUCE_TYPES(HP_SHMEM_DECLARE_MINMAX_REDUCE_)
HP_SHMEM_ARITH_REDUCE_TYPES(HP_SHMEM_DECLARE_ARITH_REDUCE_)
#undef HP_SHMEM_DECLARE_REDUCE_
#undef HP_SHMEM_DECLARE_BITWISE_REDUCE_
#undef HP_SHMEM_DECLARE_MINMAX_REDUCE_
#undef HP_SHMEM_DECLARE_ARITH_REDUCE_

/* 1.6 scans over a team, in team order: dest[i] on member m is the sum of source[i] of the
 * members 0..m (inscan) or 0..m-1 (exscan; 0 on member 0). dest may be source. */
#define HP_SHMEM_DECLARE_SCAN_(TYPE, NAME)                                                         \
  int shmem_##NAME##_sum_inscan(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems); \
  int shmem_##NAME##_sum_exscan(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems);
HP_SHMEM_ARITH_REDUCE_TYPES(HP_SHMEM_DECLARE_SCAN_)
#undef HP_SHMEM_DECLARE_SCAN_

/* ---- the deprecated active-set collectives --------------------------------------------- */

/* The active set is PE_size PEs, PE_start + k x 2^logPE_stride (k = 0 .. PE_size - 1); every
 * member calls with the same arguments. pSync: a symmetric long array of SHMEM_*_SYNC_SIZE
 * elements, each SHMEM_SYNC_VALUE before the first call (every call leaves it so); pWrk is
 * accepted and unused. PE_root is a member's index in the set. The root's dest is not written
 * by shmem_broadcast32/64. (C11 and C++ also take shmem_sync(team), shmem_team_sync.) */
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync);
#define HP_SHMEM_DECLARE_ACTIVE_SET_(SIZE)                                                 \
  void shmem_broadcast##SIZE(void* dest, const void* source, size_t nelems, int PE_root,   \
                             int PE_start, int logPE_stride, int PE_size, long* pSync);    \
  void shmem_collect##SIZE(void* dest, const void* source, size_t nelems, int PE_start,    \
                           int logPE_stride, int PE_size, long* pSync);                    \
  void shmem_fcollect##SIZE(void* dest, const void* source, size_t nelems, int PE_start,   \
                            int logPE_stride, int PE_size, long* pSync);                   \
  void shmem_alltoall##SIZE(void* dest, const void* source, size_t nelems, int PE_start,   \
                            int logPE_stride, int PE_size, long* pSync);                   \
  void shmem_alltoalls##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,   \
                             long* pSync);
HP_SHMEM_DECLARE_ACTIVE_SET_(32)
HP_SHMEM_DECLARE_ACTIVE_SET_(64)
#undef HP_SHMEM_DECLARE_ACTIVE_SET_
#define HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, OP)                                               \
  void shmem_##NAME##_##OP##_to_all(TYPE* dest, const TYPE* source, int nreduce, int PE_start, \
                                    int logPE_stride, int PE_size, TYPE* pWrk, long* pSync);
#define HP_SHMEM_DECLARE_BITWISE_TO_ALL_(TYPE, NAME) \
  HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, and)          \
  HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, or) HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, xor)
#define HP_SHMEM_DECLARE_MINMAX_TO_ALL_(TYPE, NAME) \
  HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, max) HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, min)
#define HP_SHMEM_DECLARE_ARITH_TO_ALL_(TYPE, NAME) \
  HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, sum) HP_SHMEM_DECLARE_TO_ALL_(TYPE, NAME, prod)
HP_SHMEM_TO_ALL_BITWISE_TYPES(HP_SHMEM_DECLARE_BITWISE_TO_ALL_)
HP_SHMEM_TO_ALL_MINMAX_TYPES(HP_SHMEM_DECLARE_MINMAX_TO_ALL_)
HP_SHMEM_TO_ALL_ARITH_TYPES(HP_SHMEM_DECLARE_ARITH_TO_ALL_)
#undef HP_SHMEM_DECLARE_TO_ALL_
#undef HP_SHMEM_DECLARE_BITWISE_TO_ALL_
#undef HP_SHMEM_DECLARE_MINMAX_TO_ALL_
#undef HP_SHMEM_DECLARE_ARITH_TO_ALL_

/* ---- deprecated names still found in OpenSHMEM programs -------------------------------- */

/* The AMOs and waits before 1.4: int, long and long long (and float and double for fetch, set
 * and swap). */
#define HP_SHMEM_DEPRECATED_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_(TYPE, NAME)  \
  TYPE shmem_##NAME##_fetch(const TYPE* source, int pe);   \
  void shmem_##NAME##_set(TYPE* dest, TYPE value, int pe); \
  TYPE shmem_##NAME##_swap(TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_DEPRECATED_(TYPE, NAME)                        \
  HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_(TYPE, NAME)                     \
  TYPE shmem_##NAME##_cswap(TYPE* dest, TYPE cond, TYPE value, int pe); \
  TYPE shmem_##NAME##_finc(TYPE* dest, int pe);                         \
  void shmem_##NAME##_inc(TYPE* dest, int pe);                          \
  TYPE shmem_##NAME##_fadd(TYPE* dest, TYPE value, int pe);             \
  void shmem_##NAME##_add(TYPE* dest, TYPE value, int pe);              \
  void shmem_##NAME##_wait(TYPE* ivar, TYPE cmp_value);
HP_SHMEM_DEPRECATED_TYPES(HP_SHMEM_DECLARE_DEPRECATED_)
HP_SHMEM_AMO_FLOAT_TYPES(HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_)
#undef HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_
#undef HP_SHMEM_DECLARE_DEPRECATED_
/* In C11 the type-generic shmem_swap below hides this name (it selects the same routine for a
 * long). */
long shmem_swap(long* dest, long value, int pe);
void shmem_wait(long* ivar, long cmp_value);
/* In C11 the type-generic shmem_wait_until below hides this name (it selects the same routine
 * for a long). */
void shmem_wait_until(long* ivar, int cmp, long cmp_value);
void shmem_short_wait(short* ivar, short cmp_value);

/* The names before OpenSHMEM 1.2: start_pes(npes) is shmem_init (npes is ignored, as 1.2 says),
 * _my_pe and _num_pes are shmem_my_pe and shmem_n_pes, shmalloc, shfree, shrealloc and
 * shmemalign the allocation routines. The cache routines have nothing to do on a cache-coherent
 * machine (OpenSHMEM makes them no-ops there). */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void* shmalloc(size_t size);
void shfree(void* ptr);
void* shrealloc(void* ptr, size_t size);
void* shmemalign(size_t alignment, size_t size);
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void* dest);
void shmem_set_cache_line_inv(void* dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void* dest);

#ifdef __cplusplus
} /* extern "C" */
inline int shmem_sync(shmem_team_t team) { return shmem_team_sync(team); }
#endif

/* clang-format off */
/* ---- C11 type-generic interfaces ------------------------------------------------------- */

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L

/* The distinct standard types of each family (the <stdint.h> and <stddef.h> names are
 * typedefs of these, so they select the same routines; a family that has intN_t but not the
 * standard signed types lists those typedefs). X(TYPE, TYPENAME, OP) */
#define HP_SHMEM_C11_RMA_(X, OP)                                                              \
  X(float, float, OP) X(double, double, OP) X(long double, longdouble, OP) X(char, char, OP)  \
  X(signed char, schar, OP) X(short, short, OP) X(int, int, OP) X(long, long, OP)             \
  X(long long, longlong, OP) X(unsigned char, uchar, OP) X(unsigned short, ushort, OP)        \
  X(unsigned int, uint, OP) X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP)
#define HP_SHMEM_C11_AMO_(X, OP)                                                              \
  X(int, int, OP) X(long, long, OP) X(long long, longlong, OP) X(unsigned int, uint, OP)      \
  X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP)
#define HP_SHMEM_C11_AMO_EXTENDED_(X, OP)                                                     \
  HP_SHMEM_C11_AMO_(X, OP) X(float, float, OP) X(double, double, OP)
#define HP_SHMEM_C11_AMO_BITWISE_(X, OP)                                                      \
  X(unsigned int, uint, OP) X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP)  \
  X(int32_t, int32, OP) X(int64_t, int64, OP)
#define HP_SHMEM_C11_SYNC_(X, OP)                                                             \
  X(short, short, OP) X(int, int, OP) X(long, long, OP) X(long long, longlong, OP)            \
  X(unsigned short, ushort, OP) X(unsigned int, uint, OP) X(unsigned long, ulong, OP)         \
  X(unsigned long long, ulonglong, OP)
#define HP_SHMEM_C11_BITWISE_REDUCE_(X, OP)                                                   \
  X(unsigned char, uchar, OP) X(unsigned short, ushort, OP) X(unsigned int, uint, OP)         \
  X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP) X(int8_t, int8, OP)        \
  X(int16_t, int16, OP) X(int32_t, int32, OP) X(int64_t, int64, OP)
#define HP_SHMEM_C11_MINMAX_REDUCE_(X, OP) HP_SHMEM_C11_RMA_(X, OP)
#define HP_SHMEM_C11_ARITH_REDUCE_(X, OP)                                                     \
  HP_SHMEM_C11_RMA_(X, OP) X(double _Complex, complexd, OP) X(float _Complex, complexf, OP)

/* One association ", TYPE: shmem_TYPENAME_OP" of a _Generic selection. */
#define HP_SHMEM_C11_ASSOC_(TYPE, NAME, OP) , TYPE : shmem_##NAME##_##OP
#define HP_SHMEM_C11_CTX_ASSOC_(TYPE, NAME, OP) , TYPE : shmem_ctx_##NAME##_##OP
/* The routine of family TABLE and operation OP for the pointed-to type of PTR (the selection is
 * on *(PTR), whose lvalue conversion drops const: const and plain pointers select alike). */
#define HP_SHMEM_C11_SELECT_(TABLE, OP, PTR) _Generic(*(PTR) TABLE(HP_SHMEM_C11_ASSOC_, OP))

/* The routines that also have a form on a context: a call whose first argument is a
 * shmem_ctx_t selects shmem_ctx_TYPENAME_OP by the pointed-to type of its second argument, any
 * other call shmem_TYPENAME_OP by that of its first. (Every association of a _Generic must be
 * a valid expression, selected or not: both selections look at the data pointer, DATA_.) */
#define HP_SHMEM_C11_ARG0_(a, ...) a
#define HP_SHMEM_C11_ARG1_(a, b, ...) b
#define HP_SHMEM_C11_DATA_(...)                                                               \
  _Generic((HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0)),                                             \
           shmem_ctx_t: HP_SHMEM_C11_ARG1_(__VA_ARGS__, 0),                                   \
           default: HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0))
#define HP_SHMEM_C11_SELECT_CTX_(TABLE, OP, ...)                                              \
  _Generic((HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0)),                                             \
           shmem_ctx_t: _Generic(*(HP_SHMEM_C11_DATA_(__VA_ARGS__))                           \
                                     TABLE(HP_SHMEM_C11_CTX_ASSOC_, OP)),                     \
           default: _Generic(*(HP_SHMEM_C11_DATA_(__VA_ARGS__)) TABLE(HP_SHMEM_C11_ASSOC_, OP)))
#define HP_SHMEM_C11_CALL_CTX_(TABLE, OP, ...)                                                \
  HP_SHMEM_C11_SELECT_CTX_(TABLE, OP, __VA_ARGS__)(__VA_ARGS__)

#define shmem_put(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, put, __VA_ARGS__)
#define shmem_get(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, get, __VA_ARGS__)
#define shmem_put_nbi(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, put_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, get_nbi, __VA_ARGS__)
#define shmem_p(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, p, __VA_ARGS__)
#define shmem_g(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, g, __VA_ARGS__)
#define shmem_iput(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, iput, __VA_ARGS__)
#define shmem_iget(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, iget, __VA_ARGS__)
#define shmem_ibput(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, ibput, __VA_ARGS__)
#define shmem_ibget(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, ibget, __VA_ARGS__)
#define shmem_put_signal(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, put_signal, __VA_ARGS__)
#define shmem_put_signal_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_RMA_, put_signal_nbi, __VA_ARGS__)

#define shmem_atomic_fetch(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_fetch, __VA_ARGS__)
#define shmem_atomic_set(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_set, __VA_ARGS__)
#define shmem_atomic_swap(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_swap, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_inc, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_add(...) HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_add, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_, atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_and(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_and, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_or(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_or, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_xor, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) \
  HP_SHMEM_C11_CALL_CTX_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_xor_nbi, __VA_ARGS__)

#define shmem_wait_until(ivar, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until, ivar)(ivar, __VA_ARGS__)
#define shmem_wait_until_all(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_all, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_any(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_any, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_some(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_some, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_all_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_all_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_any_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_any_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_some_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, wait_until_some_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test(ivar, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test, ivar)(ivar, __VA_ARGS__)
#define shmem_test_all(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_all, ivars)(ivars, __VA_ARGS__)
#define shmem_test_any(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_any, ivars)(ivars, __VA_ARGS__)
#define shmem_test_some(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_some, ivars)(ivars, __VA_ARGS__)
#define shmem_test_all_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_all_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test_any_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_any_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test_some_vector(ivars, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SYNC_, test_some_vector, ivars)(ivars, __VA_ARGS__)

#define shmem_broadcast(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, broadcast, dest)(team, dest, __VA_ARGS__)
#define shmem_collect(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, collect, dest)(team, dest, __VA_ARGS__)
#define shmem_fcollect(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, fcollect, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoall(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, alltoall, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoalls(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, alltoalls, dest)(team, dest, __VA_ARGS__)
#define shmem_and_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_BITWISE_REDUCE_, and_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_or_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_BITWISE_REDUCE_, or_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_xor_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_BITWISE_REDUCE_, xor_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_max_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_MINMAX_REDUCE_, max_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_min_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_MINMAX_REDUCE_, min_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_sum_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_ARITH_REDUCE_, sum_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_prod_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_ARITH_REDUCE_, prod_reduce, dest)(team, dest, __VA_ARGS__)

#define shmem_sum_inscan(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_ARITH_REDUCE_, sum_inscan, dest)(team, dest, __VA_ARGS__)
#define shmem_sum_exscan(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_ARITH_REDUCE_, sum_exscan, dest)(team, dest, __VA_ARGS__)

/* 1.6: shmem_signal_add/set(ctx, sig_addr, signal, pe) are the shmem_ctx_ forms. */
#define shmem_signal_add(...)                                                              \
  _Generic((HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0)), shmem_ctx_t: shmem_ctx_signal_add,         \
           default: (shmem_signal_add))(__VA_ARGS__)
#define shmem_signal_set(...)                                                              \
  _Generic((HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0)), shmem_ctx_t: shmem_ctx_signal_set,         \
           default: (shmem_signal_set))(__VA_ARGS__)

/* The deprecated generic AMO names (before 1.4), which 1.5 still lists: int, long and long long,
 * and float and double for fetch, set and swap. No context forms. */
#define HP_SHMEM_C11_DEPRECATED_(X, OP) X(int, int, OP) X(long, long, OP) X(long long, longlong, OP)
#define HP_SHMEM_C11_DEPRECATED_EXTENDED_(X, OP) \
  HP_SHMEM_C11_DEPRECATED_(X, OP) X(float, float, OP) X(double, double, OP)
#define shmem_fetch(source, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_EXTENDED_, fetch, source)(source, __VA_ARGS__)
#define shmem_set(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_EXTENDED_, set, dest)(dest, __VA_ARGS__)
#define shmem_swap(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_EXTENDED_, swap, dest)(dest, __VA_ARGS__)
#define shmem_cswap(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_, cswap, dest)(dest, __VA_ARGS__)
#define shmem_finc(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_, finc, dest)(dest, __VA_ARGS__)
#define shmem_inc(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_, inc, dest)(dest, __VA_ARGS__)
#define shmem_fadd(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_, fadd, dest)(dest, __VA_ARGS__)
#define shmem_add(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_DEPRECATED_, add, dest)(dest, __VA_ARGS__)

/* shmem_sync(team) is shmem_team_sync; shmem_sync(PE_start, ...) the active-set routine. */
#define shmem_sync(...)                                                                    \
  _Generic((HP_SHMEM_C11_ARG0_(__VA_ARGS__, 0)), shmem_team_t: shmem_team_sync,             \
           default: (shmem_sync))(__VA_ARGS__)

#endif /* C11 */

/* clang-format on */
#endif /* HYPER_PARALLEL_SHMEM_C_H */
