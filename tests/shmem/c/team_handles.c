/* SHMEM_TEAM_INVALID and SHMEM_CTX_INVALID where OpenSHMEM allows them: a PE outside a split
 * holds SHMEM_TEAM_INVALID; the team routines given it return -1 or non-zero (no context is
 * made from it: SHMEM_CTX_INVALID), shmem_team_destroy, shmem_ctx_destroy, shmem_ctx_fence and
 * shmem_ctx_quiet do nothing. A split's configuration is kept; shmem_sync(team) is
 * shmem_team_sync. */
#include "hp_test.h"

int main(void) {
  hp_init();
  /* The even PEs, each team expecting 2 contexts. */
  shmem_team_config_t config = {0};
  config.num_contexts = 2;
  shmem_team_t even = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &config,
                                       SHMEM_TEAM_NUM_CONTEXTS, &even),
              0);
  shmem_team_config_t got = {0};
  shmem_ctx_t ctx = SHMEM_CTX_DEFAULT;
  shmem_team_t team = SHMEM_TEAM_WORLD;
  if (me % 2 == 0) {
    HP_CHECK(even != SHMEM_TEAM_INVALID);
    HP_CHECK_EQ(shmem_team_get_config(even, SHMEM_TEAM_NUM_CONTEXTS, &got), 0);
    HP_CHECK_EQ(got.num_contexts, 2);
    HP_CHECK_EQ(shmem_team_create_ctx(even, 0, &ctx), 0);
    HP_CHECK(ctx != SHMEM_CTX_INVALID);
    HP_CHECK_EQ(shmem_ctx_get_team(ctx, &team), 0);
    HP_CHECK(team == even);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    HP_CHECK_EQ(shmem_sync(even), 0);
  } else {
    HP_CHECK(even == SHMEM_TEAM_INVALID);
  }
  /* A split without the mask bit: the default configuration. */
  shmem_team_t all = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, &config, 0, &all), 0);
  got.num_contexts = 7;
  HP_CHECK_EQ(shmem_team_get_config(all, SHMEM_TEAM_NUM_CONTEXTS, &got), 0);
  HP_CHECK_EQ(got.num_contexts, 0);
  HP_CHECK_EQ(shmem_sync(all), 0);
  HP_CHECK_EQ(shmem_sync(SHMEM_TEAM_WORLD), 0);
  shmem_team_destroy(all);

  /* SHMEM_TEAM_INVALID, on every PE. */
  const shmem_team_t invalid = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_my_pe(invalid), -1);
  HP_CHECK_EQ(shmem_team_n_pes(invalid), -1);
  HP_CHECK_EQ(shmem_team_translate_pe(invalid, 0, SHMEM_TEAM_WORLD), -1);
  HP_CHECK_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 0, invalid), -1);
  HP_CHECK(shmem_team_get_config(invalid, SHMEM_TEAM_NUM_CONTEXTS, &got) != 0);
  ctx = SHMEM_CTX_DEFAULT;
  HP_CHECK(shmem_team_create_ctx(invalid, 0, &ctx) != 0);
  HP_CHECK(ctx == SHMEM_CTX_INVALID);
  shmem_team_t child = SHMEM_TEAM_WORLD;
  HP_CHECK(shmem_team_split_strided(invalid, 0, 1, 1, NULL, 0, &child) != 0);
  HP_CHECK(child == SHMEM_TEAM_INVALID);
  shmem_team_destroy(invalid);

  /* SHMEM_CTX_INVALID. */
  team = SHMEM_TEAM_WORLD;
  HP_CHECK(shmem_ctx_get_team(SHMEM_CTX_INVALID, &team) != 0);
  HP_CHECK(team == SHMEM_TEAM_INVALID);
  shmem_ctx_fence(SHMEM_CTX_INVALID);
  shmem_ctx_quiet(SHMEM_CTX_INVALID);
  shmem_ctx_destroy(SHMEM_CTX_INVALID);

  shmem_barrier_all();
  shmem_team_destroy(even); /* SHMEM_TEAM_INVALID on the odd PEs: nothing */
  return hp_finish("team_handles");
}
