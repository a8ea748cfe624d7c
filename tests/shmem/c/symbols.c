/* Every routine shmem.h declares links: takes the address of each one, family by family from
 * the header's own type tables, and of every non-typed routine. Needs no PEs. */
#include <stdio.h>

#include <shmem.h>

typedef void (*routine_t)(void);
#define R(f) (routine_t)(f),

/* clang-format off */
/* Each family once per name prefix: shmem_ (default context) and shmem_ctx_. */
#define RMA_(NAME, P)                                                                          \
  R(P##NAME##_put) R(P##NAME##_get) R(P##NAME##_put_nbi) R(P##NAME##_get_nbi) R(P##NAME##_p)  \
  R(P##NAME##_g) R(P##NAME##_iput) R(P##NAME##_iget) R(P##NAME##_put_signal)                  \
  R(P##NAME##_put_signal_nbi) R(P##NAME##_ibput) R(P##NAME##_ibget)
#define RMA(TYPE, NAME)                                                                        \
  RMA_(NAME, shmem_) RMA_(NAME, shmem_ctx_) R(shmem_##NAME##_broadcast)                        \
  R(shmem_##NAME##_fcollect) R(shmem_##NAME##_collect) R(shmem_##NAME##_alltoall)              \
  R(shmem_##NAME##_alltoalls)
#define RMA_SIZE_(SIZE, P)                                                                     \
  R(P##put##SIZE) R(P##get##SIZE) R(P##put##SIZE##_nbi) R(P##get##SIZE##_nbi)                  \
  R(P##iput##SIZE) R(P##iget##SIZE) R(P##put##SIZE##_signal) R(P##put##SIZE##_signal_nbi)    \
  R(P##ibput##SIZE) R(P##ibget##SIZE)
#define RMA_SIZE(SIZE) RMA_SIZE_(SIZE, shmem_) RMA_SIZE_(SIZE, shmem_ctx_)
#define RMA_MEM(P)                                                                             \
  R(P##putmem) R(P##getmem) R(P##putmem_nbi) R(P##getmem_nbi) R(P##putmem_signal)              \
  R(P##putmem_signal_nbi)
#define AMO_EXTENDED_(NAME, P)                                                                 \
  R(P##NAME##_atomic_fetch) R(P##NAME##_atomic_set) R(P##NAME##_atomic_swap)                   \
  R(P##NAME##_atomic_fetch_nbi) R(P##NAME##_atomic_swap_nbi)
#define AMO_STANDARD_(NAME, P)                                                                 \
  AMO_EXTENDED_(NAME, P) R(P##NAME##_atomic_compare_swap) R(P##NAME##_atomic_fetch_inc)        \
  R(P##NAME##_atomic_inc) R(P##NAME##_atomic_fetch_add) R(P##NAME##_atomic_add)                \
  R(P##NAME##_atomic_compare_swap_nbi) R(P##NAME##_atomic_fetch_inc_nbi)                       \
  R(P##NAME##_atomic_fetch_add_nbi)
#define AMO_BITWISE_(NAME, P)                                                                  \
  R(P##NAME##_atomic_fetch_and) R(P##NAME##_atomic_and) R(P##NAME##_atomic_fetch_or)           \
  R(P##NAME##_atomic_or) R(P##NAME##_atomic_fetch_xor) R(P##NAME##_atomic_xor)                 \
  R(P##NAME##_atomic_fetch_and_nbi) R(P##NAME##_atomic_fetch_or_nbi)                           \
  R(P##NAME##_atomic_fetch_xor_nbi)
#define AMO_EXTENDED(TYPE, NAME) AMO_EXTENDED_(NAME, shmem_) AMO_EXTENDED_(NAME, shmem_ctx_)
#define AMO(TYPE, NAME) AMO_STANDARD_(NAME, shmem_) AMO_STANDARD_(NAME, shmem_ctx_)
#define AMO_BITWISE(TYPE, NAME) AMO_BITWISE_(NAME, shmem_) AMO_BITWISE_(NAME, shmem_ctx_)
#define SYNC(TYPE, NAME)                                                                       \
  R(shmem_##NAME##_wait_until) R(shmem_##NAME##_wait_until_all)                                \
  R(shmem_##NAME##_wait_until_any) R(shmem_##NAME##_wait_until_some)                           \
  R(shmem_##NAME##_wait_until_all_vector) R(shmem_##NAME##_wait_until_any_vector)              \
  R(shmem_##NAME##_wait_until_some_vector) R(shmem_##NAME##_test)                              \
  R(shmem_##NAME##_test_all) R(shmem_##NAME##_test_any) R(shmem_##NAME##_test_some)            \
  R(shmem_##NAME##_test_all_vector) R(shmem_##NAME##_test_any_vector)                          \
  R(shmem_##NAME##_test_some_vector)
#define BITWISE_REDUCE(TYPE, NAME)                                                             \
  R(shmem_##NAME##_and_reduce) R(shmem_##NAME##_or_reduce) R(shmem_##NAME##_xor_reduce)
#define MINMAX_REDUCE(TYPE, NAME) R(shmem_##NAME##_max_reduce) R(shmem_##NAME##_min_reduce)
#define ARITH_REDUCE(TYPE, NAME) R(shmem_##NAME##_sum_reduce) R(shmem_##NAME##_prod_reduce)   \
  R(shmem_##NAME##_sum_inscan) R(shmem_##NAME##_sum_exscan)
#define ACTIVE_SET(SIZE)                                                                       \
  R(shmem_broadcast##SIZE) R(shmem_collect##SIZE) R(shmem_fcollect##SIZE)                       \
  R(shmem_alltoall##SIZE) R(shmem_alltoalls##SIZE)
#define BITWISE_TO_ALL(TYPE, NAME)                                                             \
  R(shmem_##NAME##_and_to_all) R(shmem_##NAME##_or_to_all) R(shmem_##NAME##_xor_to_all)
#define MINMAX_TO_ALL(TYPE, NAME) R(shmem_##NAME##_max_to_all) R(shmem_##NAME##_min_to_all)
#define ARITH_TO_ALL(TYPE, NAME) R(shmem_##NAME##_sum_to_all) R(shmem_##NAME##_prod_to_all)
#define DEPRECATED_EXTENDED(TYPE, NAME)                                                        \
  R(shmem_##NAME##_fetch) R(shmem_##NAME##_set) R(shmem_##NAME##_swap)
#define DEPRECATED(TYPE, NAME)                                                                 \
  DEPRECATED_EXTENDED(TYPE, NAME) R(shmem_##NAME##_cswap) R(shmem_##NAME##_finc)               \
  R(shmem_##NAME##_inc) R(shmem_##NAME##_fadd) R(shmem_##NAME##_add) R(shmem_##NAME##_wait)

static const routine_t kRoutines[] = {
    R(shmem_init) R(shmem_init_thread) R(shmem_query_thread) R(shmem_finalize)
    R(shmem_global_exit) R(shmem_my_pe) R(shmem_n_pes) R(shmem_pe_accessible)
    R(shmem_addr_accessible) R(shmem_ptr) R(shmem_team_ptr) R(shmem_info_get_version)
    R(shmem_info_get_name) R(shmem_pcontrol) R(shmem_query_initialized)
    R(shmem_malloc) R(shmem_malloc_with_hints) R(shmem_calloc) R(shmem_align) R(shmem_realloc)
    R(shmem_free)
    R(shmem_team_my_pe) R(shmem_team_n_pes) R(shmem_team_get_config) R(shmem_team_translate_pe)
    R(shmem_team_split_strided) R(shmem_team_split_2d) R(shmem_team_destroy)
    R(shmem_ctx_create) R(shmem_team_create_ctx) R(shmem_ctx_destroy) R(shmem_ctx_get_team)
    R(shmem_ctx_fence) R(shmem_ctx_quiet) R(shmem_ctx_session_start) R(shmem_ctx_session_stop)
    RMA_MEM(shmem_) RMA_MEM(shmem_ctx_) R(shmem_signal_fetch) R(shmem_signal_wait_until)
    R(shmem_signal_add) R(shmem_signal_set) R(shmem_ctx_signal_add) R(shmem_ctx_signal_set)
    R(shmem_fence) R(shmem_quiet) R(shmem_pe_quiet) R(shmem_ctx_pe_quiet) R(shmem_barrier_all) R(shmem_sync_all) R(shmem_team_sync)
    R(shmem_set_lock) R(shmem_clear_lock) R(shmem_test_lock)
    R(shmem_broadcastmem) R(shmem_fcollectmem) R(shmem_collectmem) R(shmem_alltoallmem)
    R(shmem_alltoallsmem)
    R(shmem_swap) R(shmem_wait) R(shmem_wait_until)
    HP_SHMEM_RMA_TYPES(RMA) HP_SHMEM_RMA_SIZES(RMA_SIZE)
    HP_SHMEM_AMO_TYPES(AMO) HP_SHMEM_AMO_FLOAT_TYPES(AMO_EXTENDED)
    HP_SHMEM_AMO_BITWISE_TYPES(AMO_BITWISE) HP_SHMEM_SYNC_TYPES(SYNC)
    HP_SHMEM_BITWISE_REDUCE_TYPES(BITWISE_REDUCE) HP_SHMEM_MINMAX_REDUCE_TYPES(MINMAX_REDUCE)
    HP_SHMEM_ARITH_REDUCE_TYPES(ARITH_REDUCE)
    HP_SHMEM_DEPRECATED_TYPES(DEPRECATED) HP_SHMEM_AMO_FLOAT_TYPES(DEPRECATED_EXTENDED)
    R(shmem_barrier) R(shmem_sync) ACTIVE_SET(32) ACTIVE_SET(64)
    R(shmem_short_wait) R(start_pes) R(_my_pe) R(_num_pes) R(shmalloc) R(shfree) R(shrealloc)
    R(shmemalign) R(shmem_clear_cache_inv) R(shmem_set_cache_inv) R(shmem_clear_cache_line_inv)
    R(shmem_set_cache_line_inv) R(shmem_udcflush) R(shmem_udcflush_line)
    HP_SHMEM_TO_ALL_BITWISE_TYPES(BITWISE_TO_ALL) HP_SHMEM_TO_ALL_MINMAX_TYPES(MINMAX_TO_ALL)
    HP_SHMEM_TO_ALL_ARITH_TYPES(ARITH_TO_ALL)};
/* clang-format on */

int main(void) {
  const size_t count = sizeof kRoutines / sizeof kRoutines[0];
  size_t i, null = 0;
  for (i = 0; i < count; ++i) null += kRoutines[i] == NULL;
  printf("symbols: %zu routines link%s\n", count, null == 0 ? "" : ", some are NULL: FAIL");
  return null == 0 ? 0 : 1;
}
