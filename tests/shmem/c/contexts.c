/* Communication contexts: shmem_ctx_create and shmem_team_create_ctx, PE numbering of a
 * team's context, the shmem_ctx_ RMA/AMO forms (blocking and _nbi, completed by
 * shmem_ctx_quiet), shmem_ctx_get_team, destroy, and the invalid cases. */
#include <stdint.h>

#include "hp_test.h"

/* A default-numbered context: every PE puts into next's slot, fetch-adds on PE 0, and the
 * non-blocking fetch lands at the quiet. */
static void test_world_context(void) {
  long* slots = (long*)shmem_calloc(2, sizeof(long));
  long value = 100 + me, fetched = -1;
  shmem_ctx_t ctx = SHMEM_CTX_INVALID;
  shmem_team_t team = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx), 0);
  HP_CHECK(ctx != SHMEM_CTX_INVALID && ctx != SHMEM_CTX_DEFAULT);
  HP_CHECK_EQ(shmem_ctx_get_team(ctx, &team), 0);
  HP_CHECK(team == SHMEM_TEAM_WORLD);
  HP_CHECK_EQ(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &team), 0);
  HP_CHECK(team == SHMEM_TEAM_WORLD);
  shmem_barrier_all();
  shmem_ctx_long_put(ctx, &slots[0], &value, 1, next);
  shmem_ctx_long_atomic_fetch_add_nbi(ctx, &fetched, &slots[1], 1, 0);
  shmem_ctx_quiet(ctx);
  HP_CHECK(fetched >= 0 && fetched < n);
  shmem_barrier_all();
  HP_CHECK_EQ(slots[0], 100 + prev);
  if (me == 0) HP_CHECK_EQ(slots[1], n);
  HP_CHECK_EQ(shmem_ctx_long_g(ctx, &slots[0], next), 100 + me);
  shmem_ctx_destroy(ctx);
  shmem_barrier_all();
  shmem_free(slots);
}

/* A context of the team of even PEs numbers PEs as that team: member i writes to member i + 1
 * (mod size), addressed by team index, and the odd PEs get SHMEM_CTX_INVALID. */
static void test_team_context(void) {
  int* slot = (int*)shmem_calloc(1, sizeof(int));
  shmem_team_t evens = SHMEM_TEAM_INVALID, team = SHMEM_TEAM_INVALID;
  shmem_ctx_t ctx = SHMEM_CTX_DEFAULT;
  const int size = (n + 1) / 2;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, size, NULL, 0, &evens), 0);
  if (me % 2 == 0) {
    const int index = shmem_team_my_pe(evens);
    HP_CHECK_EQ(shmem_team_create_ctx(evens, 0, &ctx), 0);
    HP_CHECK_EQ(shmem_ctx_get_team(ctx, &team), 0);
    HP_CHECK(team == evens);
    shmem_team_sync(evens);
    shmem_ctx_int_p(ctx, slot, 1000 + index, (index + 1) % size);
    shmem_ctx_quiet(ctx);
    shmem_team_sync(evens);
    HP_CHECK_EQ(*slot, 1000 + (index + size - 1) % size);
    shmem_ctx_destroy(ctx);
  } else {
    HP_CHECK(shmem_team_create_ctx(evens, 0, &ctx) != 0);
    HP_CHECK(ctx == SHMEM_CTX_INVALID);
    HP_CHECK_EQ(*slot, 0);
  }
  shmem_ctx_destroy(SHMEM_CTX_INVALID); /* ignored */
  shmem_barrier_all();
  if (evens != SHMEM_TEAM_INVALID) shmem_team_destroy(evens);
  shmem_free(slot);
}

/* Many contexts at once, each used once and destroyed: slots are reused. */
static void test_many_contexts(void) {
  enum { kCount = 64 };
  shmem_ctx_t ctx[kCount];
  int* counter = (int*)shmem_calloc(1, sizeof(int));
  int i, rounds;
  shmem_barrier_all();
  for (rounds = 0; rounds < 40; ++rounds) {
    for (i = 0; i < kCount; ++i) HP_CHECK_EQ(shmem_ctx_create(0, &ctx[i]), 0);
    for (i = 0; i < kCount; ++i) shmem_ctx_int_atomic_inc(ctx[i], counter, next);
    for (i = 0; i < kCount; ++i) shmem_ctx_destroy(ctx[i]);
  }
  shmem_barrier_all();
  HP_CHECK_EQ(*counter, 40 * kCount);
  shmem_free(counter);
}

int main(void) {
  hp_init();
  test_world_context();
  test_team_context();
  test_many_contexts();
  return hp_report("contexts");
}
