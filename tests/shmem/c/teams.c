/* Teams: strided splits (even/odd PEs, halves, a split of a split), 2-D splits, every query
 * against the expected members, team collectives on each team against goldens, team_sync,
 * handle reuse over many create/destroy cycles, SHMEM_TEAM_SHARED, and errors. */
#include <string.h>

#include "hp_test.h"

static long *src, *dst; /* symmetric, 4 * n longs each */
static int *isrc, *idst;

static int member_index(int start, int stride, int size) {
  int i;
  for (i = 0; i < size; ++i) {
    if (start + i * stride == me) return i;
  }
  return -1;
}

/* Checks every query of `team` against the world PEs start, start + stride, ... (size). */
static void expect_team(shmem_team_t team, int start, int stride, int size) {
  const int mine = member_index(start, stride, size);
  int i;
  if (mine < 0) {
    HP_CHECK(team == SHMEM_TEAM_INVALID);
    HP_CHECK_EQ(shmem_team_my_pe(team), -1);
    HP_CHECK_EQ(shmem_team_n_pes(team), -1);
    return;
  }
  HP_CHECK(team != SHMEM_TEAM_INVALID && team != SHMEM_TEAM_WORLD);
  HP_CHECK_EQ(shmem_team_my_pe(team), mine);
  HP_CHECK_EQ(shmem_team_n_pes(team), size);
  for (i = 0; i < size; ++i) {
    HP_CHECK_EQ(shmem_team_translate_pe(team, i, SHMEM_TEAM_WORLD), start + i * stride);
    HP_CHECK_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, start + i * stride, team), i);
    HP_CHECK(shmem_team_ptr(team, src, i) == shmem_ptr(src, start + i * stride));
  }
  HP_CHECK_EQ(shmem_team_translate_pe(team, size, SHMEM_TEAM_WORLD), -1);
  HP_CHECK_EQ(shmem_team_translate_pe(team, -1, SHMEM_TEAM_WORLD), -1);
  shmem_team_config_t config;
  config.num_contexts = 99;
  HP_CHECK_EQ(shmem_team_get_config(team, SHMEM_TEAM_NUM_CONTEXTS, &config), 0);
  HP_CHECK_EQ(config.num_contexts, 0);
}

/* Collectives on `team` (call on its members only) against goldens from the team's world PEs. */
static void team_collectives(shmem_team_t team) {
  const int tn = shmem_team_n_pes(team), tme = shmem_team_my_pe(team);
  int i, j, k;
#define WORLD(i) shmem_team_translate_pe(team, (i), SHMEM_TEAM_WORLD)
  for (k = 0; k < 4 * n; ++k) src[k] = me * 10 + k;
  HP_CHECK_EQ(shmem_long_broadcast(team, dst, src, 3, tn - 1), 0);
  for (k = 0; k < 3; ++k) HP_CHECK_EQ(dst[k], WORLD(tn - 1) * 10 + k);

  src[0] = me;
  src[1] = -me;
  HP_CHECK_EQ(shmem_long_fcollect(team, dst, src, 2), 0);
  for (i = 0; i < tn; ++i) {
    HP_CHECK_EQ(dst[2 * i], WORLD(i));
    HP_CHECK_EQ(dst[2 * i + 1], -WORLD(i));
  }

  for (j = 0; j < tn; ++j) {
    for (k = 0; k < 2; ++k) src[2 * j + k] = me * 100 + j * 10 + k;
  }
  HP_CHECK_EQ(shmem_long_alltoall(team, dst, src, 2), 0);
  for (j = 0; j < tn; ++j) {
    for (k = 0; k < 2; ++k) HP_CHECK_EQ(dst[2 * j + k], WORLD(j) * 100 + tme * 10 + k);
  }

  for (k = 0; k < 4; ++k) isrc[k] = me * (k % 2 == 0 ? 1 : -1) + k;
  HP_CHECK_EQ(shmem_int_sum_reduce(team, idst, isrc, 4), 0);
  for (k = 0; k < 4; ++k) {
    int sum = 0;
    for (i = 0; i < tn; ++i) sum += WORLD(i) * (k % 2 == 0 ? 1 : -1) + k;
    HP_CHECK_EQ(idst[k], sum);
  }
  int lowest = WORLD(0), highest = WORLD(0); /* world PEs; a team may number them downwards */
  for (i = 1; i < tn; ++i) {
    if (WORLD(i) < lowest) lowest = WORLD(i);
    if (WORLD(i) > highest) highest = WORLD(i);
  }
  HP_CHECK_EQ(shmem_int_max_reduce(team, idst, isrc, 4), 0);
  HP_CHECK_EQ(idst[0], highest);
  HP_CHECK_EQ(idst[1], -lowest + 1);
  HP_CHECK_EQ(shmem_int_min_reduce(team, idst, isrc, 4), 0);
  HP_CHECK_EQ(idst[0], lowest);
  HP_CHECK_EQ(idst[1], -highest + 1);
  for (k = 0; k < 10; ++k) HP_CHECK_EQ(shmem_team_sync(team), 0);
#undef WORLD
}

static shmem_team_t split(shmem_team_t parent, int start, int stride, int size) {
  shmem_team_t team = SHMEM_TEAM_WORLD;
  HP_CHECK_EQ(shmem_team_split_strided(parent, start, stride, size, NULL, 0, &team), 0);
  return team;
}

int main(void) {
  hp_init();
  src = (long*)shmem_malloc(4 * (size_t)n * sizeof(long));
  dst = (long*)shmem_malloc(4 * (size_t)n * sizeof(long));
  isrc = (int*)shmem_malloc(4 * sizeof(int));
  idst = (int*)shmem_malloc(4 * sizeof(int));
  int i;

  /* the predefined teams: SHMEM_TEAM_SHARED is the PEs shmem_ptr reaches, in world order */
  const int shared_n = shmem_team_n_pes(SHMEM_TEAM_SHARED);
  HP_CHECK_EQ(shared_n, hp_expected_shared_pes());
  int shared_i = 0;
  for (i = 0; i < n; ++i) {
    const int index = shmem_team_translate_pe(SHMEM_TEAM_WORLD, i, SHMEM_TEAM_SHARED);
    if (shmem_ptr(src, i) == NULL) {
      HP_CHECK_EQ(index, -1);
      continue;
    }
    HP_CHECK_EQ(index, shared_i);
    HP_CHECK_EQ(shmem_team_translate_pe(SHMEM_TEAM_SHARED, shared_i, SHMEM_TEAM_WORLD), i);
    HP_CHECK(shmem_team_ptr(SHMEM_TEAM_SHARED, src, shared_i) == shmem_ptr(src, i));
    if (i == me) HP_CHECK_EQ(shmem_team_my_pe(SHMEM_TEAM_SHARED), shared_i);
    ++shared_i;
  }
  HP_CHECK_EQ(shared_i, shared_n);
  shmem_ctx_t shared_ctx = SHMEM_CTX_INVALID;
  shmem_team_t of_ctx = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_create_ctx(SHMEM_TEAM_SHARED, 0, &shared_ctx), 0);
  HP_CHECK_EQ(shmem_ctx_get_team(shared_ctx, &of_ctx), 0);
  HP_CHECK(of_ctx == SHMEM_TEAM_SHARED);
  shmem_ctx_destroy(shared_ctx);
  HP_CHECK_EQ(shmem_team_translate_pe(SHMEM_TEAM_SHARED, shared_n, SHMEM_TEAM_WORLD), -1);
  HP_CHECK_EQ(shmem_team_translate_pe(SHMEM_TEAM_INVALID, 0, SHMEM_TEAM_WORLD), -1);
  team_collectives(SHMEM_TEAM_WORLD);
  team_collectives(SHMEM_TEAM_SHARED);

  /* even and odd PEs */
  const int n_even = (n + 1) / 2, n_odd = n / 2;
  shmem_team_t even = split(SHMEM_TEAM_WORLD, 0, 2, n_even);
  expect_team(even, 0, 2, n_even);
  shmem_team_t odd = SHMEM_TEAM_INVALID;
  if (n_odd > 0) {
    odd = split(SHMEM_TEAM_WORLD, 1, 2, n_odd);
    expect_team(odd, 1, 2, n_odd);
  }
  if (even != SHMEM_TEAM_INVALID) team_collectives(even);
  if (odd != SHMEM_TEAM_INVALID) team_collectives(odd);
  shmem_barrier_all();

  /* 1.6: a negative stride starts at the highest PE and numbers the members in reverse */
  shmem_team_t reversed = split(SHMEM_TEAM_WORLD, n - 1, -1, n);
  expect_team(reversed, n - 1, -1, n);
  team_collectives(reversed);
  shmem_team_destroy(reversed);

  /* a split of a split: every other PE of the even team (world PEs 0, 4, ...) */
  if (even != SHMEM_TEAM_INVALID) {
    const int size = (n_even + 1) / 2;
    shmem_team_t quarter = split(even, 0, 2, size);
    expect_team(quarter, 0, 4, size);
    if (quarter != SHMEM_TEAM_INVALID) {
      team_collectives(quarter);
      shmem_team_destroy(quarter);
    }
  }

  /* halves, and one PE */
  shmem_team_t low = split(SHMEM_TEAM_WORLD, 0, 1, n_even);
  expect_team(low, 0, 1, n_even);
  if (low != SHMEM_TEAM_INVALID) team_collectives(low);
  shmem_team_t last = split(SHMEM_TEAM_WORLD, n - 1, 0, 1); /* stride ignored for one PE */
  expect_team(last, n - 1, 1, 1);
  if (last != SHMEM_TEAM_INVALID) team_collectives(last);

  /* 2-D: rows of 2 (x) and columns (y) */
  shmem_team_t xteam = SHMEM_TEAM_INVALID, yteam = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xteam, NULL, 0, &yteam), 0);
  expect_team(xteam, me / 2 * 2, 1, me / 2 * 2 + 1 < n ? 2 : 1);
  expect_team(yteam, me % 2, 2, (n - me % 2 + 1) / 2);
  team_collectives(xteam);
  team_collectives(yteam);

  shmem_team_destroy(xteam);
  shmem_team_destroy(yteam);
  shmem_team_destroy(last);
  shmem_team_destroy(low);
  shmem_team_destroy(odd);
  shmem_team_destroy(even);
  shmem_team_destroy(SHMEM_TEAM_INVALID); /* ignored */

  /* handles are reused: far more teams than exist at once */
  for (i = 0; i < 200; ++i) {
    shmem_team_t team = split(SHMEM_TEAM_WORLD, i % n, 1, n - i % n);
    if (team != SHMEM_TEAM_INVALID) {
      HP_CHECK_EQ(shmem_team_sync(team), 0);
      shmem_team_destroy(team);
    }
  }

  /* errors: a bad split gives SHMEM_TEAM_INVALID and non-zero on every PE */
  if (me == 0) fprintf(stderr, "teams: the next INVALID_ARGUMENT lines are expected\n");
  shmem_barrier_all();
  shmem_team_t bad = SHMEM_TEAM_WORLD;
  HP_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n + 1, NULL, 0, &bad) != 0);
  HP_CHECK(bad == SHMEM_TEAM_INVALID);
  HP_CHECK(shmem_team_sync(SHMEM_TEAM_INVALID) != 0);
  HP_CHECK(shmem_team_get_config(SHMEM_TEAM_INVALID, 0, NULL) != 0);
  HP_CHECK(shmem_int_sum_reduce(SHMEM_TEAM_INVALID, idst, isrc, 1) != 0);
  shmem_barrier_all();

  shmem_free(idst);
  shmem_free(isrc);
  shmem_free(dst);
  shmem_free(src);
  return hp_finish("teams");
}
