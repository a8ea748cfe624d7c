/* The reductions of Table 10, every type x operation: each PE contributes NELEMS values
 * derived from (pe, i); every PE checks the result against the same fold done locally, in
 * team order (integer sums and products wrap, so the fold is exact). On the world team and on
 * the team of even PEs; source and dest the same array once. */
#include <stddef.h>
#include <stdint.h>

#include "hp_test.h"

#define NELEMS 37

/* Small values with every sign and a few high bits, so and/or/xor/max/min all see variety;
 * products stay small enough for float types to be exact (|v| <= 3). */
#define SOURCE(TYPE, pe, i) ((TYPE)(((pe)*7 + (i)*5) % 7 - 3))
#define BITS(TYPE, pe, i) ((TYPE)((((unsigned)(pe) + 1u) * 0x9Du + (unsigned)(i)*0x35u) & 0xFFu))

#define FOLD_AND(a, b) ((a) & (b))
#define FOLD_OR(a, b) ((a) | (b))
#define FOLD_XOR(a, b) ((a) ^ (b))
#define FOLD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FOLD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FOLD_SUM(a, b) ((a) + (b))
/* 1u *: the product of two unsigned shorts is an int product after promotion, which
 * overflows (undefined); as unsigned it wraps, as the library's product in the type does. */
#define FOLD_PROD(a, b) (1u * (a) * (b))

/* Symmetric buffers with room for NELEMS of the widest type (allocated on the world team: a
 * team's members alone cannot call shmem_malloc). */
static void* g_src;
static void* g_dst;

/* reduce_<NAME>_<OP>(team, in_place): GEN gives the contributions, FOLD combines them. */
#define REDUCE_CASE(TYPE, NAME, OP, FOLD, GEN)                                         \
  static void reduce_##NAME##_##OP(shmem_team_t team, int in_place) {                  \
    TYPE* src = (TYPE*)g_src;                                                          \
    TYPE* dst = in_place ? src : (TYPE*)g_dst;                                         \
    const int size = shmem_team_n_pes(team), member = shmem_team_my_pe(team);          \
    int i, pe;                                                                         \
    for (i = 0; i < NELEMS; ++i) src[i] = GEN(TYPE, member, i);                        \
    HP_CHECK_EQ(shmem_##NAME##_##OP##_reduce(team, dst, src, NELEMS), 0);              \
    for (i = 0; i < NELEMS; ++i) {                                                     \
      TYPE expected = GEN(TYPE, 0, i);                                                 \
      for (pe = 1; pe < size; ++pe) expected = (TYPE)FOLD(expected, GEN(TYPE, pe, i)); \
      if (!(dst[i] == expected)) {                                                     \
        hp_failed(__FILE__, __LINE__, "shmem_" #NAME "_" #OP "_reduce", i, 0, 0);      \
        break;                                                                         \
      }                                                                                \
    }                                                                                  \
    shmem_team_sync(team); /* nobody reads src or dst any more */                      \
  }

#define BITWISE_CASES(TYPE, NAME)              \
  REDUCE_CASE(TYPE, NAME, and, FOLD_AND, BITS) \
  REDUCE_CASE(TYPE, NAME, or, FOLD_OR, BITS) REDUCE_CASE(TYPE, NAME, xor, FOLD_XOR, BITS)
#define MINMAX_CASES(TYPE, NAME) \
  REDUCE_CASE(TYPE, NAME, max, FOLD_MAX, SOURCE) REDUCE_CASE(TYPE, NAME, min, FOLD_MIN, SOURCE)
#define ARITH_CASES(TYPE, NAME) \
  REDUCE_CASE(TYPE, NAME, sum, FOLD_SUM, SOURCE) REDUCE_CASE(TYPE, NAME, prod, FOLD_PROD, SOURCE)
HP_SHMEM_BITWISE_REDUCE_TYPES(BITWISE_CASES)
HP_SHMEM_MINMAX_REDUCE_TYPES(MINMAX_CASES)
HP_SHMEM_ARITH_REDUCE_TYPES(ARITH_CASES)

static void run_all(shmem_team_t team, int in_place) {
#define RUN_BITWISE(TYPE, NAME)        \
  reduce_##NAME##_and(team, in_place); \
  reduce_##NAME##_or(team, in_place);  \
  reduce_##NAME##_xor(team, in_place);
#define RUN_MINMAX(TYPE, NAME)         \
  reduce_##NAME##_max(team, in_place); \
  reduce_##NAME##_min(team, in_place);
#define RUN_ARITH(TYPE, NAME)          \
  reduce_##NAME##_sum(team, in_place); \
  reduce_##NAME##_prod(team, in_place);
  HP_SHMEM_BITWISE_REDUCE_TYPES(RUN_BITWISE)
  HP_SHMEM_MINMAX_REDUCE_TYPES(RUN_MINMAX)
  HP_SHMEM_ARITH_REDUCE_TYPES(RUN_ARITH)
}

int main(void) {
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  hp_init();
  g_src = shmem_malloc(NELEMS * 2 * sizeof(long double));
  g_dst = shmem_malloc(NELEMS * 2 * sizeof(long double));
  run_all(SHMEM_TEAM_WORLD, 0);
  run_all(SHMEM_TEAM_WORLD, 1);
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens), 0);
  if (evens != SHMEM_TEAM_INVALID) run_all(evens, 0);
  shmem_barrier_all();
  if (evens != SHMEM_TEAM_INVALID) shmem_team_destroy(evens);
  shmem_free(g_dst);
  shmem_free(g_src);
  return hp_report("reductions");
}
