/* Ordering: puts before shmem_fence are seen before puts after it (same target PE); puts
 * completed by shmem_quiet are seen before a later flag; and loops of shmem_barrier_all,
 * shmem_sync_all and shmem_team_sync keep every PE in step. */
#include "hp_test.h"

#define ROUNDS 300
#define WORDS 64

/* Round r: WORDS puts of r into next's data (fence or quiet after them), then the flag r + 1;
 * the reader waits for the flag and must see all the data, then acknowledges. */
static void test_flag_after_data(int use_quiet) {
  int* data = (int*)shmem_calloc(WORDS, sizeof(int));
  int* flags = (int*)shmem_calloc(2, sizeof(int)); /* [0] data ready, [1] ack */
  int r, i;
  shmem_barrier_all();
  for (r = 0; r < ROUNDS; ++r) {
    for (i = 0; i < WORDS; ++i) {
      if (i % 2 == 0) {
        shmem_int_p(&data[i], r, next);
      } else {
        shmem_int_put_nbi(&data[i], &r, 1, next);
      }
    }
    if (use_quiet) {
      shmem_quiet();
      shmem_int_atomic_set(&flags[0], r + 1, next);
    } else {
      shmem_fence();
      shmem_int_p(&flags[0], r + 1, next);
    }
    shmem_int_wait_until(&flags[0], SHMEM_CMP_EQ, r + 1);
    for (i = 0; i < WORDS; ++i) HP_CHECK_EQ(data[i], r);
    shmem_int_atomic_inc(&flags[1], prev);
    shmem_int_wait_until(&flags[1], SHMEM_CMP_GE, r + 1);
    shmem_quiet(); /* r, the source of put_nbi, changes next */
  }
  shmem_barrier_all();
  shmem_free(flags);
  shmem_free(data);
}

/* Round r: put r into next's slot, a barrier, check prev's r, a barrier (nobody overwrites a
 * slot before its owner read it). Alternates the three barrier routines. */
static void test_barrier_loops(void) {
  int* slot = (int*)shmem_calloc(1, sizeof(int));
  int r;
  shmem_barrier_all();
  for (r = 0; r < ROUNDS; ++r) {
    shmem_int_p(slot, r, next);
    switch (r % 3) {
      case 0:
        shmem_barrier_all();
        break;
      case 1:
        shmem_quiet();
        shmem_sync_all();
        break;
      default:
        shmem_quiet();
        HP_CHECK_EQ(shmem_team_sync(SHMEM_TEAM_WORLD), 0);
        break;
    }
    HP_CHECK_EQ(*slot, r);
    if (r % 2 == 0) {
      shmem_sync_all();
    } else {
      shmem_barrier_all();
    }
  }
  shmem_free(slot);
}

int main(void) {
  hp_init();
  test_flag_after_data(0);
  test_flag_after_data(1);
  test_barrier_loops();
  return hp_finish("ordering");
}
