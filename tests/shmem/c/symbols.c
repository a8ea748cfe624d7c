/* Every routine shmem.h declares links: takes the address of each one, family by family from
 * the header's own type tables, and of every non-typed routine. Needs no PEs. */
#include <stdio.h>

#include <shmem.h>

typedef void (*routine_t)(void);
#define R(f) (routine_t)(f),

#define RMA(TYPE, NAME)                                                                        \
  R(shmem_##NAME##_put) R(shmem_##NAME##_get) R(shmem_##NAME##_put_nbi)                        \
  R(shmem_##NAME##_get_nbi) R(shmem_##NAME##_p) R(shmem_##NAME##_g) R(shmem_##NAME##_iput)     \
  R(shmem_##NAME##_iget) R(shmem_##NAME##_put_signal) R(shmem_##NAME##_put_signal_nbi)         \
  R(shmem_##NAME##_broadcast) R(shmem_##NAME##_fcollect) R(shmem_##NAME##_alltoall)            \
  R(shmem_##NAME##_alltoalls)
#define RMA_SIZE(SIZE)                                                                         \
  R(shmem_put##SIZE) R(shmem_get##SIZE) R(shmem_put##SIZE##_nbi) R(shmem_get##SIZE##_nbi)      \
  R(shmem_iput##SIZE) R(shmem_iget##SIZE) R(shmem_put##SIZE##_signal)                          \
  R(shmem_put##SIZE##_signal_nbi)
#define AMO_EXTENDED(TYPE, NAME)                                                               \
  R(shmem_##NAME##_atomic_fetch) R(shmem_##NAME##_atomic_set) R(shmem_##NAME##_atomic_swap)
#define AMO(TYPE, NAME)                                                                        \
  AMO_EXTENDED(TYPE, NAME) R(shmem_##NAME##_atomic_compare_swap)                               \
  R(shmem_##NAME##_atomic_fetch_inc) R(shmem_##NAME##_atomic_inc)                              \
  R(shmem_##NAME##_atomic_fetch_add) R(shmem_##NAME##_atomic_add)
#define AMO_BITWISE(TYPE, NAME)                                                                \
  R(shmem_##NAME##_atomic_fetch_and) R(shmem_##NAME##_atomic_and)                              \
  R(shmem_##NAME##_atomic_fetch_or) R(shmem_##NAME##_atomic_or)                                \
  R(shmem_##NAME##_atomic_fetch_xor) R(shmem_##NAME##_atomic_xor)
#define SYNC(TYPE, NAME)                                                                       \
  R(shmem_##NAME##_wait_until) R(shmem_##NAME##_wait_until_all)                                \
  R(shmem_##NAME##_wait_until_any) R(shmem_##NAME##_wait_until_some)                           \
  R(shmem_##NAME##_wait_until_all_vector) R(shmem_##NAME##_wait_until_any_vector)              \
  R(shmem_##NAME##_wait_until_some_vector) R(shmem_##NAME##_test)                              \
  R(shmem_##NAME##_test_all) R(shmem_##NAME##_test_any) R(shmem_##NAME##_test_some)            \
  R(shmem_##NAME##_test_all_vector) R(shmem_##NAME##_test_any_vector)                          \
  R(shmem_##NAME##_test_some_vector)
#define SUM_REDUCE(TYPE, NAME) R(shmem_##NAME##_sum_reduce)
#define MINMAX_REDUCE(TYPE, NAME) R(shmem_##NAME##_max_reduce) R(shmem_##NAME##_min_reduce)
#define DEPRECATED_EXTENDED(TYPE, NAME)                                                        \
  R(shmem_##NAME##_fetch) R(shmem_##NAME##_set) R(shmem_##NAME##_swap)
#define DEPRECATED(TYPE, NAME)                                                                 \
  DEPRECATED_EXTENDED(TYPE, NAME) R(shmem_##NAME##_cswap) R(shmem_##NAME##_finc)               \
  R(shmem_##NAME##_inc) R(shmem_##NAME##_fadd) R(shmem_##NAME##_add) R(shmem_##NAME##_wait)

static const routine_t kRoutines[] = {
    R(shmem_init) R(shmem_init_thread) R(shmem_query_thread) R(shmem_finalize)
    R(shmem_global_exit) R(shmem_my_pe) R(shmem_n_pes) R(shmem_pe_accessible)
    R(shmem_addr_accessible) R(shmem_ptr) R(shmem_team_ptr) R(shmem_info_get_version)
    R(shmem_info_get_name) R(shmem_malloc) R(shmem_malloc_with_hints) R(shmem_calloc)
    R(shmem_align) R(shmem_realloc) R(shmem_free) R(shmem_team_my_pe) R(shmem_team_n_pes)
    R(shmem_team_get_config) R(shmem_team_translate_pe) R(shmem_team_split_strided)
    R(shmem_team_split_2d) R(shmem_team_destroy) R(shmem_putmem) R(shmem_getmem)
    R(shmem_putmem_nbi) R(shmem_getmem_nbi) R(shmem_putmem_signal) R(shmem_putmem_signal_nbi)
    R(shmem_signal_fetch) R(shmem_signal_wait_until) R(shmem_fence) R(shmem_quiet)
    R(shmem_barrier_all) R(shmem_sync_all) R(shmem_team_sync) R(shmem_set_lock)
    R(shmem_clear_lock) R(shmem_test_lock) R(shmem_broadcastmem) R(shmem_fcollectmem)
    R(shmem_alltoallmem) R(shmem_alltoallsmem) R(shmem_swap) R(shmem_wait) R(shmem_wait_until)
    HP_SHMEM_RMA_TYPES(RMA) HP_SHMEM_RMA_SIZES(RMA_SIZE) HP_SHMEM_AMO_TYPES(AMO)
    HP_SHMEM_AMO_FLOAT_TYPES(AMO_EXTENDED) HP_SHMEM_AMO_BITWISE_TYPES(AMO_BITWISE)
    HP_SHMEM_SYNC_TYPES(SYNC) HP_SHMEM_SUM_REDUCE_TYPES(SUM_REDUCE)
    HP_SHMEM_MINMAX_REDUCE_TYPES(MINMAX_REDUCE) HP_SHMEM_DEPRECATED_TYPES(DEPRECATED)
    HP_SHMEM_AMO_FLOAT_TYPES(DEPRECATED_EXTENDED)};

int main(void) {
  const size_t count = sizeof kRoutines / sizeof kRoutines[0];
  size_t i, null = 0;
  for (i = 0; i < count; ++i) null += kRoutines[i] == NULL;
  printf("symbols: %zu routines link%s\n", count, null == 0 ? "" : ", some are NULL: FAIL");
  return null == 0 ? 0 : 1;
}
