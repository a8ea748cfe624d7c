/* The routines OpenSHMEM 1.6 adds: blocked strided RMA (ibput/ibget, typed, sized and on a
 * context), the signal alone (signal_add/set), shmem_pe_quiet, the sum scans, nested
 * init/finalize with shmem_query_initialized, and context sessions. */
#include <stdint.h>

#include "hp_test.h"

#define BLOCKS 3
#define BSIZE 4

static int initialized(void) {
  int value = -1;
  shmem_query_initialized(&value);
  return value;
}

int main(void) {
  HP_CHECK_EQ(initialized(), 0);
  hp_init();
  shmem_init(); /* nested: one more shmem_finalize */
  HP_CHECK_EQ(initialized(), 1);

  /* ibput: block b of source (every 5th element on) to block b of dest (every 6th) on next. */
  int* dest = (int*)shmem_calloc(6 * BLOCKS, sizeof(int));
  int source[5 * BLOCKS];
  for (int i = 0; i < 5 * BLOCKS; ++i) source[i] = 100 * me + i;
  shmem_barrier_all();
  shmem_int_ibput(dest, source, 6, 5, BSIZE, BLOCKS, next);
  shmem_barrier_all();
  for (int b = 0; b < BLOCKS; ++b) {
    for (int i = 0; i < 6; ++i) {
      HP_CHECK_EQ(dest[6 * b + i], i < BSIZE ? 100 * prev + 5 * b + i : 0);
    }
  }
  /* ibget: the blocks back from next's dest, packed 4 apart. */
  int got[BSIZE * BLOCKS] = {0};
  shmem_int_ibget(got, dest, BSIZE, 6, BSIZE, BLOCKS, next);
  for (int b = 0; b < BLOCKS; ++b) {
    for (int i = 0; i < BSIZE; ++i) HP_CHECK_EQ(got[BSIZE * b + i], 100 * me + 5 * b + i);
  }
  /* Sized and context forms, and no blocks at all. */
  uint32_t* words = (uint32_t*)shmem_calloc(8, sizeof(uint32_t));
  const uint32_t mine[4] = {1u + (uint32_t)me, 2u, 3u, 4u};
  shmem_barrier_all();
  shmem_ibput32(words, mine, 4, 2, 2, 2, next); /* [0,1] <- [0,1], [4,5] <- [2,3] */
  shmem_ctx_int_ibput(SHMEM_CTX_DEFAULT, NULL, NULL, 1, 1, 0, 0, next);
  shmem_barrier_all();
  HP_CHECK_EQ(words[0], 1 + prev);
  HP_CHECK_EQ(words[1], 2);
  HP_CHECK_EQ(words[2], 0);
  HP_CHECK_EQ(words[4], 3);
  HP_CHECK_EQ(words[5], 4);

  /* signal_set, signal_add (and their context forms) on next's signal word. */
  uint64_t* sig = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));
  shmem_barrier_all();
  shmem_signal_set(sig, 40, next);
  shmem_signal_add(sig, 1, next);
  shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, sig, 1, next);
  HP_CHECK_EQ(shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 42), 42);
  shmem_barrier_all();
  shmem_ctx_signal_set(SHMEM_CTX_DEFAULT, sig, 7, next);
  HP_CHECK_EQ(shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 7), 7);

  /* pe_quiet: the put to next is complete, as after shmem_quiet. */
  const int targets[2] = {next, prev};
  shmem_int_p(&dest[0], -1, next);
  shmem_pe_quiet(targets, 2);
  shmem_ctx_pe_quiet(SHMEM_CTX_DEFAULT, targets, 1);
  shmem_pe_quiet(NULL, 0);
  shmem_barrier_all();
  HP_CHECK_EQ(dest[0], -1);

  /* Scans over the world and over the even PEs; in place too. */
  long* values = (long*)shmem_malloc(2 * sizeof(long));
  long* scanned = (long*)shmem_malloc(2 * sizeof(long));
  values[0] = me + 1;
  values[1] = 10 * (me + 1);
  shmem_barrier_all();
  HP_CHECK_EQ(shmem_long_sum_inscan(SHMEM_TEAM_WORLD, scanned, values, 2), 0);
  HP_CHECK_EQ(scanned[0], (long)(me + 1) * (me + 2) / 2);
  HP_CHECK_EQ(scanned[1], 10L * (me + 1) * (me + 2) / 2);
  HP_CHECK_EQ(shmem_long_sum_exscan(SHMEM_TEAM_WORLD, scanned, values, 2), 0);
  HP_CHECK_EQ(scanned[0], (long)me * (me + 1) / 2);
  HP_CHECK_EQ(scanned[1], 10L * me * (me + 1) / 2);
  HP_CHECK_EQ(shmem_long_sum_inscan(SHMEM_TEAM_WORLD, values, values, 1), 0);
  HP_CHECK_EQ(values[0], (long)(me + 1) * (me + 2) / 2);
  double* reals = (double*)shmem_malloc(sizeof(double));
  *reals = 0.5;
  shmem_team_t even = SHMEM_TEAM_INVALID;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &even), 0);
  if (even != SHMEM_TEAM_INVALID) {
    HP_CHECK_EQ(shmem_double_sum_inscan(even, reals, reals, 1), 0);
    HP_CHECK(*reals == 0.5 * (shmem_team_my_pe(even) + 1));
  }
  HP_CHECK(shmem_long_sum_inscan(SHMEM_TEAM_INVALID, scanned, values, 1) != 0);

  /* Sessions are hints: operations in one complete as always. */
  shmem_ctx_t ctx = SHMEM_CTX_INVALID;
  HP_CHECK_EQ(shmem_ctx_create(0, &ctx), 0);
  shmem_ctx_session_start(ctx);
  shmem_ctx_int_p(ctx, &dest[1], 5, next);
  shmem_ctx_session_stop(ctx);
  shmem_ctx_quiet(ctx);
  shmem_ctx_session_start(SHMEM_CTX_INVALID);
  shmem_ctx_session_stop(SHMEM_CTX_INVALID);
  shmem_ctx_destroy(ctx);
  shmem_barrier_all();
  HP_CHECK_EQ(dest[1], 5);

  shmem_barrier_all();
  shmem_team_destroy(even);
  shmem_free(reals);
  shmem_free(scanned);
  shmem_free(values);
  shmem_free(sig);
  shmem_free(words);
  shmem_free(dest);
  shmem_finalize(); /* the nested one */
  HP_CHECK_EQ(initialized(), 1);
  const int status = hp_report("spec16");
  shmem_finalize();
  HP_CHECK_EQ(initialized(), 0);
  return status | (hp_failures != 0);
}
