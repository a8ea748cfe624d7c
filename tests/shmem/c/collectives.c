/* Collectives on the world team against goldens: broadcast from every root, fcollect,
 * alltoall and alltoalls for every standard RMA type (and their mem forms); sum, max and min
 * reductions for every type they exist for, including wrapping unsigned sums, in place, and
 * longer than one reduction chunk. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "hp_test.h"

#define NELEMS 5
#define LONG_COUNT 10007

#define VALUE(TYPE, pe, i) ((TYPE)((pe) * 16 + (i) + 1))

#define COLLECTIVE_TEST(TYPE, NAME)                                                            \
  static void test_##NAME(void) {                                                              \
    const size_t count = (size_t)n * NELEMS * 3; /* room for alltoalls with stride 3 */        \
    TYPE* src = (TYPE*)shmem_malloc(count * sizeof(TYPE));                                     \
    TYPE* dst = (TYPE*)shmem_malloc(count * sizeof(TYPE));                                     \
    int root, pe, j, i;                                                                        \
    for (i = 0; i < (int)count; ++i) src[i] = VALUE(TYPE, me, i);                              \
    for (root = 0; root < n; ++root) {                                                         \
      memset(dst, 0, count * sizeof(TYPE));                                                    \
      HP_CHECK_EQ(shmem_##NAME##_broadcast(SHMEM_TEAM_WORLD, dst, src, NELEMS, root), 0);      \
      for (i = 0; i < NELEMS; ++i) HP_CHECK(dst[i] == VALUE(TYPE, root, i));                   \
      HP_CHECK(dst[NELEMS] == (TYPE)0);                                                        \
    }                                                                                          \
    HP_CHECK_EQ(shmem_##NAME##_fcollect(SHMEM_TEAM_WORLD, dst, src, NELEMS), 0);               \
    for (pe = 0; pe < n; ++pe)                                                                 \
      for (i = 0; i < NELEMS; ++i) HP_CHECK(dst[pe * NELEMS + i] == VALUE(TYPE, pe, i));       \
    HP_CHECK_EQ(shmem_##NAME##_alltoall(SHMEM_TEAM_WORLD, dst, src, NELEMS), 0);               \
    for (pe = 0; pe < n; ++pe)                                                                 \
      for (i = 0; i < NELEMS; ++i)                                                             \
        HP_CHECK(dst[pe * NELEMS + i] == VALUE(TYPE, pe, me * NELEMS + i));                    \
    /* alltoalls: source stride 3, dest stride 2 */                                            \
    memset(dst, 0, count * sizeof(TYPE));                                                      \
    shmem_barrier_all();                                                                       \
    HP_CHECK_EQ(shmem_##NAME##_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 3, NELEMS), 0);        \
    for (j = 0; j < n; ++j)                                                                    \
      for (i = 0; i < NELEMS; ++i) {                                                           \
        HP_CHECK(dst[(j * NELEMS + i) * 2] == VALUE(TYPE, j, (me * NELEMS + i) * 3));          \
        HP_CHECK(dst[(j * NELEMS + i) * 2 + 1] == (TYPE)0);                                    \
      }                                                                                        \
    shmem_barrier_all();                                                                       \
    shmem_free(dst);                                                                           \
    shmem_free(src);                                                                           \
  }
HP_SHMEM_RMA_TYPES(COLLECTIVE_TEST)

static void test_mem(void) {
  const size_t bytes = 3;
  unsigned char* src = (unsigned char*)shmem_malloc((size_t)n * bytes * 2);
  unsigned char* dst = (unsigned char*)shmem_malloc((size_t)n * bytes * 2);
  size_t i;
  int pe;
  for (i = 0; i < (size_t)n * bytes * 2; ++i) src[i] = (unsigned char)(me * 50 + (int)i);
  HP_CHECK_EQ(shmem_broadcastmem(SHMEM_TEAM_WORLD, dst, src, bytes, n - 1), 0);
  for (i = 0; i < bytes; ++i) HP_CHECK_EQ(dst[i], (unsigned char)((n - 1) * 50 + (int)i));
  HP_CHECK_EQ(shmem_fcollectmem(SHMEM_TEAM_WORLD, dst, src, bytes), 0);
  for (pe = 0; pe < n; ++pe)
    for (i = 0; i < bytes; ++i) HP_CHECK_EQ(dst[pe * bytes + i], (unsigned char)(pe * 50 + (int)i));
  HP_CHECK_EQ(shmem_alltoallmem(SHMEM_TEAM_WORLD, dst, src, bytes), 0);
  for (pe = 0; pe < n; ++pe)
    for (i = 0; i < bytes; ++i)
      HP_CHECK_EQ(dst[pe * bytes + i], (unsigned char)(pe * 50 + me * (int)bytes + (int)i));
  HP_CHECK_EQ(shmem_alltoallsmem(SHMEM_TEAM_WORLD, dst, src, 1, 2, bytes), 0);
  for (pe = 0; pe < n; ++pe)
    for (i = 0; i < bytes; ++i)
      HP_CHECK_EQ(dst[pe * bytes + i],
                  (unsigned char)(pe * 50 + (me * (int)bytes + (int)i) * 2));
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
}

/* Element k of PE pe's source: for sums, values near the top of the type's range, so that
 * unsigned sums wrap; signs alternate for the signed min/max. */
#define SOURCE(TYPE, pe, k) ((TYPE)(((pe) * 37 + (k) * 11) % 101) * (TYPE)((k) % 2 == 0 ? 1 : -1))

#define SUM_TEST(TYPE, NAME)                                                                   \
  static void test_sum_##NAME(void) {                                                          \
    TYPE* src = (TYPE*)shmem_malloc(LONG_COUNT * sizeof(TYPE));                                \
    TYPE* dst = (TYPE*)shmem_malloc(LONG_COUNT * sizeof(TYPE));                                \
    int k, pe;                                                                                 \
    for (k = 0; k < LONG_COUNT; ++k) src[k] = SOURCE(TYPE, me, k);                             \
    HP_CHECK_EQ(shmem_##NAME##_sum_reduce(SHMEM_TEAM_WORLD, dst, src, LONG_COUNT), 0);         \
    for (k = 0; k < LONG_COUNT; ++k) {                                                         \
      TYPE golden = 0;                                                                         \
      for (pe = 0; pe < n; ++pe) golden += SOURCE(TYPE, pe, k);                                \
      HP_CHECK(dst[k] == golden);                                                              \
    }                                                                                          \
    /* in place */                                                                             \
    HP_CHECK_EQ(shmem_##NAME##_sum_reduce(SHMEM_TEAM_WORLD, src, src, 3), 0);                  \
    for (k = 0; k < 3; ++k) HP_CHECK(src[k] == dst[k]);                                        \
    shmem_barrier_all();                                                                       \
    shmem_free(dst);                                                                           \
    shmem_free(src);                                                                           \
  }
HP_SHMEM_SUM_REDUCE_TYPES(SUM_TEST)

#define MINMAX_TEST(TYPE, NAME)                                                                \
  static void test_minmax_##NAME(void) {                                                       \
    TYPE* src = (TYPE*)shmem_malloc(LONG_COUNT * sizeof(TYPE));                                \
    TYPE* dst = (TYPE*)shmem_malloc(LONG_COUNT * sizeof(TYPE));                                \
    int k, pe;                                                                                 \
    for (k = 0; k < LONG_COUNT; ++k) src[k] = SOURCE(TYPE, me, k);                             \
    HP_CHECK_EQ(shmem_##NAME##_max_reduce(SHMEM_TEAM_WORLD, dst, src, LONG_COUNT), 0);         \
    for (k = 0; k < LONG_COUNT; ++k) {                                                         \
      TYPE golden = SOURCE(TYPE, 0, k);                                                        \
      for (pe = 1; pe < n; ++pe)                                                               \
        if (SOURCE(TYPE, pe, k) > golden) golden = SOURCE(TYPE, pe, k);                        \
      HP_CHECK(dst[k] == golden);                                                              \
    }                                                                                          \
    HP_CHECK_EQ(shmem_##NAME##_min_reduce(SHMEM_TEAM_WORLD, dst, src, LONG_COUNT), 0);         \
    for (k = 0; k < LONG_COUNT; ++k) {                                                         \
      TYPE golden = SOURCE(TYPE, 0, k);                                                        \
      for (pe = 1; pe < n; ++pe)                                                               \
        if (SOURCE(TYPE, pe, k) < golden) golden = SOURCE(TYPE, pe, k);                        \
      HP_CHECK(dst[k] == golden);                                                              \
    }                                                                                          \
    shmem_barrier_all();                                                                       \
    shmem_free(dst);                                                                           \
    shmem_free(src);                                                                           \
  }
HP_SHMEM_MINMAX_REDUCE_TYPES(MINMAX_TEST)

int main(void) {
  hp_init();
#define RUN_COLLECTIVE_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_RMA_TYPES(RUN_COLLECTIVE_TEST)
  test_mem();
#define RUN_SUM_TEST(TYPE, NAME) test_sum_##NAME();
  HP_SHMEM_SUM_REDUCE_TYPES(RUN_SUM_TEST)
#define RUN_MINMAX_TEST(TYPE, NAME) test_minmax_##NAME();
  HP_SHMEM_MINMAX_REDUCE_TYPES(RUN_MINMAX_TEST)
  return hp_finish("collectives");
}
