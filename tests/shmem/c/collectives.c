/* The collectives that move data, against goldens: broadcast from every root, fcollect,
 * alltoall and alltoalls on the world team for every standard RMA type (and their mem forms);
 * collect with a different count on each PE (none on some), on the world team and on a
 * strided team, and back to back; each with dest == source. (The reductions are in reductions.c.)
 */
#include <stdint.h>
#include <string.h>

#include "hp_test.h"

#define NELEMS 5

#define VALUE(TYPE, pe, i) ((TYPE)((pe)*16 + (i) + 1))

#define COLLECTIVE_TEST(TYPE, NAME)                                                       \
  static void test_##NAME(void) {                                                         \
    const size_t count = (size_t)n * NELEMS * 3; /* room for alltoalls with stride 3 */   \
    TYPE* src = (TYPE*)shmem_malloc(count * sizeof(TYPE));                                \
    TYPE* dst = (TYPE*)shmem_malloc(count * sizeof(TYPE));                                \
    int root, pe, j, i;                                                                   \
    for (i = 0; i < (int)count; ++i) src[i] = VALUE(TYPE, me, i);                         \
    for (root = 0; root < n; ++root) {                                                    \
      memset(dst, 0, count * sizeof(TYPE));                                               \
      HP_CHECK_EQ(shmem_##NAME##_broadcast(SHMEM_TEAM_WORLD, dst, src, NELEMS, root), 0); \
      for (i = 0; i < NELEMS; ++i) HP_CHECK(dst[i] == VALUE(TYPE, root, i));              \
      HP_CHECK(dst[NELEMS] == (TYPE)0);                                                   \
    }                                                                                     \
    HP_CHECK_EQ(shmem_##NAME##_fcollect(SHMEM_TEAM_WORLD, dst, src, NELEMS), 0);          \
    for (pe = 0; pe < n; ++pe)                                                            \
      for (i = 0; i < NELEMS; ++i) HP_CHECK(dst[pe * NELEMS + i] == VALUE(TYPE, pe, i));  \
    HP_CHECK_EQ(shmem_##NAME##_alltoall(SHMEM_TEAM_WORLD, dst, src, NELEMS), 0);          \
    for (pe = 0; pe < n; ++pe)                                                            \
      for (i = 0; i < NELEMS; ++i)                                                        \
        HP_CHECK(dst[pe * NELEMS + i] == VALUE(TYPE, pe, me * NELEMS + i));               \
    /* alltoalls: source stride 3, dest stride 2 */                                       \
    memset(dst, 0, count * sizeof(TYPE));                                                 \
    shmem_barrier_all();                                                                  \
    HP_CHECK_EQ(shmem_##NAME##_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 3, NELEMS), 0);   \
    for (j = 0; j < n; ++j)                                                               \
      for (i = 0; i < NELEMS; ++i) {                                                      \
        HP_CHECK(dst[(j * NELEMS + i) * 2] == VALUE(TYPE, j, (me * NELEMS + i) * 3));     \
        HP_CHECK(dst[(j * NELEMS + i) * 2 + 1] == (TYPE)0);                               \
      }                                                                                   \
    shmem_barrier_all();                                                                  \
    shmem_free(dst);                                                                      \
    shmem_free(src);                                                                      \
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
      HP_CHECK_EQ(dst[pe * bytes + i], (unsigned char)(pe * 50 + (me * (int)bytes + (int)i) * 2));
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
}

/* collect: PE pe contributes pe % 3 + 1 elements (and, in a second round, none when pe is odd),
 * packed in team order; on the world team and on the PEs with an even number. src and dst
 * have room for 3 elements per PE and one more. */
#define COLLECT_TEST(TYPE, NAME)                                                      \
  static void collect_##NAME(shmem_team_t team, int skip_odd, TYPE* src, TYPE* dst) { \
    const int size = shmem_team_n_pes(team), member = shmem_team_my_pe(team);         \
    const int mine = skip_odd && member % 2 ? 0 : member % 3 + 1;                     \
    int pe, i, at = 0;                                                                \
    for (i = 0; i < 3; ++i) src[i] = VALUE(TYPE, member, i);                          \
    for (i = 0; i < 3 * size + 1; ++i) dst[i] = (TYPE)0;                              \
    shmem_team_sync(team); /* nobody writes dst any more */                           \
    HP_CHECK_EQ(shmem_##NAME##_collect(team, dst, src, (size_t)mine), 0);             \
    for (pe = 0; pe < size; ++pe) {                                                   \
      const int count = skip_odd && pe % 2 ? 0 : pe % 3 + 1;                          \
      for (i = 0; i < count; ++i) HP_CHECK(dst[at++] == VALUE(TYPE, pe, i));          \
    }                                                                                 \
    HP_CHECK(dst[at] == (TYPE)0);                                                     \
  }                                                                                   \
  static void test_collect_##NAME(shmem_team_t evens) {                               \
    TYPE* src = (TYPE*)shmem_malloc(3 * sizeof(TYPE));                                \
    TYPE* dst = (TYPE*)shmem_malloc((size_t)(3 * n + 1) * sizeof(TYPE));              \
    collect_##NAME(SHMEM_TEAM_WORLD, 0, src, dst);                                    \
    collect_##NAME(SHMEM_TEAM_WORLD, 1, src, dst);                                    \
    if (evens != SHMEM_TEAM_INVALID) collect_##NAME(evens, 0, src, dst);              \
    shmem_barrier_all();                                                              \
    shmem_free(dst);                                                                  \
    shmem_free(src);                                                                  \
  }
HP_SHMEM_RMA_TYPES(COLLECT_TEST)

/* shmem_collectmem of 0..2 bytes per PE, back to back with no barrier between calls. */
static void test_collectmem(void) {
  unsigned char* src = (unsigned char*)shmem_malloc(2);
  unsigned char* dst = (unsigned char*)shmem_malloc((size_t)n * 2);
  int round, pe, i;
  for (round = 0; round < 50; ++round) {
    const size_t mine = (size_t)((me + round) % 3);
    size_t at = 0;
    src[0] = (unsigned char)(me + round);
    src[1] = (unsigned char)(me * round);
    HP_CHECK_EQ(shmem_collectmem(SHMEM_TEAM_WORLD, dst, src, mine), 0);
    for (pe = 0; pe < n; ++pe) {
      const int count = (pe + round) % 3;
      for (i = 0; i < count; ++i) {
        HP_CHECK_EQ(dst[at++], (unsigned char)(i == 0 ? pe + round : pe * round));
      }
    }
  }
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
}

/* dest == source for every collective that moves data, 20 rounds each with no barrier before
 * the check: a PE must not write its dest while another still reads it as a source. */
static void test_in_place(void) {
  long* buf = (long*)shmem_malloc((size_t)(4 * n) * sizeof(long));
  int round, j;
  for (round = 0; round < 20; ++round) {
    for (j = 0; j < 4 * n; ++j) buf[j] = -1;
    buf[0] = 100 * round + me;
    HP_CHECK_EQ(shmem_long_collect(SHMEM_TEAM_WORLD, buf, buf, 1), 0);
    for (j = 0; j < n; ++j) HP_CHECK_EQ(buf[j], 100 * round + j);

    buf[0] = 200 * round + me;
    HP_CHECK_EQ(shmem_long_fcollect(SHMEM_TEAM_WORLD, buf, buf, 1), 0);
    for (j = 0; j < n; ++j) HP_CHECK_EQ(buf[j], 200 * round + j);

    for (j = 0; j < n; ++j) buf[2 * j] = 1000 * me + j + round; /* block j, stride 2, to PE j */
    HP_CHECK_EQ(shmem_long_alltoalls(SHMEM_TEAM_WORLD, buf, buf, 2, 2, 1), 0);
    for (j = 0; j < n; ++j) HP_CHECK_EQ(buf[2 * j], 1000 * j + me + round);

    for (j = 0; j < n; ++j) buf[j] = 1000 * me + j + round;
    HP_CHECK_EQ(shmem_long_alltoall(SHMEM_TEAM_WORLD, buf, buf, 1), 0);
    for (j = 0; j < n; ++j) HP_CHECK_EQ(buf[j], 1000 * j + me + round);

    buf[0] = 300 * round + me;
    HP_CHECK_EQ(shmem_long_broadcast(SHMEM_TEAM_WORLD, buf, buf, 1, round % n), 0);
    HP_CHECK_EQ(buf[0], 300 * round + round % n);
  }
  shmem_barrier_all();
  shmem_free(buf);
}

int main(void) {
  hp_init();
#define RUN_COLLECTIVE_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_RMA_TYPES(RUN_COLLECTIVE_TEST)
  test_mem();
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens), 0);
#define RUN_COLLECT_TEST(TYPE, NAME) test_collect_##NAME(evens);
  HP_SHMEM_RMA_TYPES(RUN_COLLECT_TEST)
  shmem_team_destroy(evens);
  test_collectmem();
  test_in_place();
  return hp_finish("collectives");
}
