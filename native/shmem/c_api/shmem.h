/* shmem.h: the OpenSHMEM 1.5 C API of HyperParallel (libhyper_parallel_shmem_c).
 *
 * Compile and link:   hpcc prog.c -o prog        (or: cc -I<payload>/symmetric_memory/include
 *                     prog.c -L<payload>/symmetric_memory/lib -lhyper_parallel_shmem_c)
 * Run:                hprun -n 4 ./prog
 *
 * The routines keep the OpenSHMEM 1.5 names, arguments and semantics. What is implemented and
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
 * C11 programs also get the type-generic macros of OpenSHMEM 1.5 (shmem_put, shmem_atomic_add,
 * shmem_sum_reduce, ...), selected by the pointed-to type of the first data argument. */
#ifndef HYPER_PARALLEL_SHMEM_C_H
#define HYPER_PARALLEL_SHMEM_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants ------------------------------------------------------------------------- */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
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

/* ---- teams ----------------------------------------------------------------------------- */

/* An opaque handle. SHMEM_TEAM_SHARED (the PEs that share memory with this one) is every PE
 * here: all PEs of a job run on one host and map each other's heaps. */
typedef struct hp_shmem_team_handle* shmem_team_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t)(uintptr_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)(uintptr_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)(uintptr_t)2)

typedef struct {
  int num_contexts; /* contexts are not implemented: always 0 */
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

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

/* sum_reduce: the 32/64-bit integers and float (integer sums wrap, two's complement). */
#define HP_SHMEM_SUM_REDUCE_TYPES(X)                                                          \
  X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                      \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)                  \
  X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)                   \
  X(ptrdiff_t, ptrdiff) X(float, float) X(double, double)

/* max_reduce and min_reduce: the signed 32/64-bit integers, float and double. */
#define HP_SHMEM_MINMAX_REDUCE_TYPES(X)                                                       \
  X(int, int) X(long, long) X(long long, longlong) X(int32_t, int32) X(int64_t, int64)        \
  X(ptrdiff_t, ptrdiff) X(float, float) X(double, double)

/* The fixed-size RMA routines shmem_<op>SIZE: X(SIZE) for SIZE bits per element. */
#define HP_SHMEM_RMA_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* ---- setup, exit and query ------------------------------------------------------------- */

void shmem_init(void);
int shmem_init_thread(int requested, int* provided);
void shmem_query_thread(int* provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
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

#define HP_SHMEM_DECLARE_RMA_(TYPE, NAME)                                                     \
  void shmem_##NAME##_put(TYPE* dest, const TYPE* source, size_t nelems, int pe);             \
  void shmem_##NAME##_get(TYPE* dest, const TYPE* source, size_t nelems, int pe);             \
  void shmem_##NAME##_put_nbi(TYPE* dest, const TYPE* source, size_t nelems, int pe);         \
  void shmem_##NAME##_get_nbi(TYPE* dest, const TYPE* source, size_t nelems, int pe);         \
  void shmem_##NAME##_p(TYPE* dest, TYPE value, int pe);                                      \
  TYPE shmem_##NAME##_g(const TYPE* source, int pe);                                          \
  void shmem_##NAME##_iput(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,      \
                           size_t nelems, int pe);                                            \
  void shmem_##NAME##_iget(TYPE* dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst,      \
                           size_t nelems, int pe);                                            \
  void shmem_##NAME##_put_signal(TYPE* dest, const TYPE* source, size_t nelems,               \
                                 uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);    \
  void shmem_##NAME##_put_signal_nbi(TYPE* dest, const TYPE* source, size_t nelems,           \
                                     uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
HP_SHMEM_RMA_TYPES(HP_SHMEM_DECLARE_RMA_)
#undef HP_SHMEM_DECLARE_RMA_

#define HP_SHMEM_DECLARE_RMA_SIZE_(SIZE)                                                      \
  void shmem_put##SIZE(void* dest, const void* source, size_t nelems, int pe);                \
  void shmem_get##SIZE(void* dest, const void* source, size_t nelems, int pe);                \
  void shmem_put##SIZE##_nbi(void* dest, const void* source, size_t nelems, int pe);          \
  void shmem_get##SIZE##_nbi(void* dest, const void* source, size_t nelems, int pe);          \
  void shmem_iput##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,         \
                        size_t nelems, int pe);                                               \
  void shmem_iget##SIZE(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,         \
                        size_t nelems, int pe);                                               \
  void shmem_put##SIZE##_signal(void* dest, const void* source, size_t nelems,                \
                                uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);     \
  void shmem_put##SIZE##_signal_nbi(void* dest, const void* source, size_t nelems,            \
                                    uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
HP_SHMEM_RMA_SIZES(HP_SHMEM_DECLARE_RMA_SIZE_)
#undef HP_SHMEM_DECLARE_RMA_SIZE_

void shmem_putmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                             uint64_t signal, int sig_op, int pe);
uint64_t shmem_signal_fetch(const uint64_t* sig_addr);
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value);

/* ---- atomic memory operations (blocking forms) ----------------------------------------- */

#define HP_SHMEM_DECLARE_AMO_EXTENDED_(TYPE, NAME)                                            \
  TYPE shmem_##NAME##_atomic_fetch(const TYPE* source, int pe);                               \
  void shmem_##NAME##_atomic_set(TYPE* dest, TYPE value, int pe);                             \
  TYPE shmem_##NAME##_atomic_swap(TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_AMO_STANDARD_(TYPE, NAME)                                            \
  HP_SHMEM_DECLARE_AMO_EXTENDED_(TYPE, NAME)                                                  \
  TYPE shmem_##NAME##_atomic_compare_swap(TYPE* dest, TYPE cond, TYPE value, int pe);         \
  TYPE shmem_##NAME##_atomic_fetch_inc(TYPE* dest, int pe);                                   \
  void shmem_##NAME##_atomic_inc(TYPE* dest, int pe);                                         \
  TYPE shmem_##NAME##_atomic_fetch_add(TYPE* dest, TYPE value, int pe);                       \
  void shmem_##NAME##_atomic_add(TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_AMO_BITWISE_(TYPE, NAME)                                             \
  TYPE shmem_##NAME##_atomic_fetch_and(TYPE* dest, TYPE value, int pe);                       \
  void shmem_##NAME##_atomic_and(TYPE* dest, TYPE value, int pe);                             \
  TYPE shmem_##NAME##_atomic_fetch_or(TYPE* dest, TYPE value, int pe);                        \
  void shmem_##NAME##_atomic_or(TYPE* dest, TYPE value, int pe);                              \
  TYPE shmem_##NAME##_atomic_fetch_xor(TYPE* dest, TYPE value, int pe);                       \
  void shmem_##NAME##_atomic_xor(TYPE* dest, TYPE value, int pe);
HP_SHMEM_AMO_TYPES(HP_SHMEM_DECLARE_AMO_STANDARD_)
HP_SHMEM_AMO_FLOAT_TYPES(HP_SHMEM_DECLARE_AMO_EXTENDED_)
HP_SHMEM_AMO_BITWISE_TYPES(HP_SHMEM_DECLARE_AMO_BITWISE_)
#undef HP_SHMEM_DECLARE_AMO_EXTENDED_
#undef HP_SHMEM_DECLARE_AMO_STANDARD_
#undef HP_SHMEM_DECLARE_AMO_BITWISE_

/* ---- point-to-point synchronization ---------------------------------------------------- */

#define HP_SHMEM_DECLARE_SYNC_(TYPE, NAME)                                                    \
  void shmem_##NAME##_wait_until(TYPE* ivar, int cmp, TYPE cmp_value);                        \
  void shmem_##NAME##_wait_until_all(TYPE* ivars, size_t nelems, const int* status, int cmp,  \
                                     TYPE cmp_value);                                         \
  size_t shmem_##NAME##_wait_until_any(TYPE* ivars, size_t nelems, const int* status,         \
                                       int cmp, TYPE cmp_value);                              \
  size_t shmem_##NAME##_wait_until_some(TYPE* ivars, size_t nelems, size_t* indices,          \
                                        const int* status, int cmp, TYPE cmp_value);          \
  void shmem_##NAME##_wait_until_all_vector(TYPE* ivars, size_t nelems, const int* status,    \
                                            int cmp, TYPE* cmp_values);                       \
  size_t shmem_##NAME##_wait_until_any_vector(TYPE* ivars, size_t nelems, const int* status,  \
                                              int cmp, TYPE* cmp_values);                     \
  size_t shmem_##NAME##_wait_until_some_vector(TYPE* ivars, size_t nelems, size_t* indices,   \
                                               const int* status, int cmp,                    \
                                               TYPE* cmp_values);                             \
  int shmem_##NAME##_test(TYPE* ivar, int cmp, TYPE cmp_value);                               \
  int shmem_##NAME##_test_all(TYPE* ivars, size_t nelems, const int* status, int cmp,         \
                              TYPE cmp_value);                                                \
  size_t shmem_##NAME##_test_any(TYPE* ivars, size_t nelems, const int* status, int cmp,      \
                                 TYPE cmp_value);                                             \
  size_t shmem_##NAME##_test_some(TYPE* ivars, size_t nelems, size_t* indices,                \
                                  const int* status, int cmp, TYPE cmp_value);                \
  int shmem_##NAME##_test_all_vector(TYPE* ivars, size_t nelems, const int* status, int cmp,  \
                                     TYPE* cmp_values);                                       \
  size_t shmem_##NAME##_test_any_vector(TYPE* ivars, size_t nelems, const int* status,        \
                                        int cmp, TYPE* cmp_values);                           \
  size_t shmem_##NAME##_test_some_vector(TYPE* ivars, size_t nelems, size_t* indices,         \
                                         const int* status, int cmp, TYPE* cmp_values);
HP_SHMEM_SYNC_TYPES(HP_SHMEM_DECLARE_SYNC_)
#undef HP_SHMEM_DECLARE_SYNC_

/* ---- memory ordering and barriers ------------------------------------------------------ */

void shmem_fence(void);
void shmem_quiet(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);

/* ---- distributed locks (a symmetric long, zero before first use) ----------------------- */

void shmem_set_lock(long* lock);
void shmem_clear_lock(long* lock);
int shmem_test_lock(long* lock);

/* ---- collectives on a team (return 0 on success) --------------------------------------- */

#define HP_SHMEM_DECLARE_COLLECTIVES_(TYPE, NAME)                                             \
  int shmem_##NAME##_broadcast(shmem_team_t team, TYPE* dest, const TYPE* source,             \
                               size_t nelems, int PE_root);                                   \
  int shmem_##NAME##_fcollect(shmem_team_t team, TYPE* dest, const TYPE* source,              \
                              size_t nelems);                                                 \
  int shmem_##NAME##_alltoall(shmem_team_t team, TYPE* dest, const TYPE* source,              \
                              size_t nelems);                                                 \
  int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE* dest, const TYPE* source,             \
                               ptrdiff_t dst, ptrdiff_t sst, size_t nelems);
HP_SHMEM_RMA_TYPES(HP_SHMEM_DECLARE_COLLECTIVES_)
#undef HP_SHMEM_DECLARE_COLLECTIVES_

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root);
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

#define HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, OP)                                              \
  int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE* dest, const TYPE* source,         \
                                   size_t nreduce);
#define HP_SHMEM_DECLARE_SUM_REDUCE_(TYPE, NAME) HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, sum)
#define HP_SHMEM_DECLARE_MINMAX_REDUCE_(TYPE, NAME)                                           \
  HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, max) HP_SHMEM_DECLARE_REDUCE_(TYPE, NAME, min)
HP_SHMEM_SUM_REDUCE_TYPES(HP_SHMEM_DECLARE_SUM_REDUCE_)
HP_SHMEM_MINMAX_REDUCE_TYPES(HP_SHMEM_DECLARE_MINMAX_REDUCE_)
#undef HP_SHMEM_DECLARE_REDUCE_
#undef HP_SHMEM_DECLARE_SUM_REDUCE_
#undef HP_SHMEM_DECLARE_MINMAX_REDUCE_

/* ---- deprecated names still found in OpenSHMEM programs -------------------------------- */

/* The AMOs and waits before 1.4: int, long and long long (and float and double for fetch, set
 * and swap). */
#define HP_SHMEM_DEPRECATED_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_(TYPE, NAME)                                     \
  TYPE shmem_##NAME##_fetch(const TYPE* source, int pe);                                      \
  void shmem_##NAME##_set(TYPE* dest, TYPE value, int pe);                                    \
  TYPE shmem_##NAME##_swap(TYPE* dest, TYPE value, int pe);
#define HP_SHMEM_DECLARE_DEPRECATED_(TYPE, NAME)                                          \
  HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_(TYPE, NAME)                                           \
  TYPE shmem_##NAME##_cswap(TYPE* dest, TYPE cond, TYPE value, int pe);                       \
  TYPE shmem_##NAME##_finc(TYPE* dest, int pe);                                               \
  void shmem_##NAME##_inc(TYPE* dest, int pe);                                                \
  TYPE shmem_##NAME##_fadd(TYPE* dest, TYPE value, int pe);                                   \
  void shmem_##NAME##_add(TYPE* dest, TYPE value, int pe);                                    \
  void shmem_##NAME##_wait(TYPE* ivar, TYPE cmp_value);
HP_SHMEM_DEPRECATED_TYPES(HP_SHMEM_DECLARE_DEPRECATED_)
HP_SHMEM_AMO_FLOAT_TYPES(HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_)
#undef HP_SHMEM_DECLARE_DEPRECATED_EXTENDED_
#undef HP_SHMEM_DECLARE_DEPRECATED_
long shmem_swap(long* dest, long value, int pe);
void shmem_wait(long* ivar, long cmp_value);
/* In C11 the type-generic shmem_wait_until below hides this name (it selects the same routine
 * for a long). */
void shmem_wait_until(long* ivar, int cmp, long cmp_value);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- C11 type-generic interfaces ------------------------------------------------------- */

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L

/* The distinct standard types of each family (the <stdint.h> and <stddef.h> names are
 * typedefs of these, so they select the same routines). X(TYPE, TYPENAME, OP) */
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
  X(unsigned int, uint, OP) X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP)
#define HP_SHMEM_C11_SYNC_(X, OP)                                                             \
  X(short, short, OP) X(int, int, OP) X(long, long, OP) X(long long, longlong, OP)            \
  X(unsigned short, ushort, OP) X(unsigned int, uint, OP) X(unsigned long, ulong, OP)         \
  X(unsigned long long, ulonglong, OP)
#define HP_SHMEM_C11_SUM_REDUCE_(X, OP) HP_SHMEM_C11_AMO_(X, OP) X(float, float, OP)
#define HP_SHMEM_C11_MINMAX_REDUCE_(X, OP)                                                    \
  X(int, int, OP) X(long, long, OP) X(long long, longlong, OP) X(float, float, OP)

/* One association ", TYPE: shmem_TYPENAME_OP" of a _Generic selection. */
#define HP_SHMEM_C11_ASSOC_(TYPE, NAME, OP) , TYPE : shmem_##NAME##_##OP
/* The routine of family TABLE and operation OP for the pointed-to type of PTR (the selection is
 * on *(PTR), whose lvalue conversion drops const: const and plain pointers select alike). */
#define HP_SHMEM_C11_SELECT_(TABLE, OP, PTR) _Generic(*(PTR) TABLE(HP_SHMEM_C11_ASSOC_, OP))

#define shmem_put(dest, ...) HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, put, dest)(dest, __VA_ARGS__)
#define shmem_get(dest, ...) HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, get, dest)(dest, __VA_ARGS__)
#define shmem_put_nbi(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, put_nbi, dest)(dest, __VA_ARGS__)
#define shmem_get_nbi(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, get_nbi, dest)(dest, __VA_ARGS__)
#define shmem_p(dest, ...) HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, p, dest)(dest, __VA_ARGS__)
#define shmem_g(source, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, g, source)(source, __VA_ARGS__)
#define shmem_iput(dest, ...) HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, iput, dest)(dest, __VA_ARGS__)
#define shmem_iget(dest, ...) HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, iget, dest)(dest, __VA_ARGS__)
#define shmem_put_signal(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, put_signal, dest)(dest, __VA_ARGS__)
#define shmem_put_signal_nbi(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, put_signal_nbi, dest)(dest, __VA_ARGS__)

#define shmem_atomic_fetch(source, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_fetch, source)(source, __VA_ARGS__)
#define shmem_atomic_set(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_set, dest)(dest, __VA_ARGS__)
#define shmem_atomic_swap(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_EXTENDED_, atomic_swap, dest)(dest, __VA_ARGS__)
#define shmem_atomic_compare_swap(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_, atomic_compare_swap, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch_inc(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_, atomic_fetch_inc, dest)(dest, __VA_ARGS__)
#define shmem_atomic_inc(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_, atomic_inc, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch_add(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_, atomic_fetch_add, dest)(dest, __VA_ARGS__)
#define shmem_atomic_add(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_, atomic_add, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch_and(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_and, dest)(dest, __VA_ARGS__)
#define shmem_atomic_and(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_and, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch_or(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_or, dest)(dest, __VA_ARGS__)
#define shmem_atomic_or(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_or, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch_xor(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_fetch_xor, dest)(dest, __VA_ARGS__)
#define shmem_atomic_xor(dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_AMO_BITWISE_, atomic_xor, dest)(dest, __VA_ARGS__)

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
#define shmem_fcollect(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, fcollect, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoall(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, alltoall, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoalls(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_RMA_, alltoalls, dest)(team, dest, __VA_ARGS__)
#define shmem_sum_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_SUM_REDUCE_, sum_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_max_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_MINMAX_REDUCE_, max_reduce, dest)(team, dest, __VA_ARGS__)
#define shmem_min_reduce(team, dest, ...) \
  HP_SHMEM_C11_SELECT_(HP_SHMEM_C11_MINMAX_REDUCE_, min_reduce, dest)(team, dest, __VA_ARGS__)

#endif /* C11 */

#endif /* HYPER_PARALLEL_SHMEM_C_H */
