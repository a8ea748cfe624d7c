/* Global and static variables are symmetric, as in classic OpenSHMEM programs: initialized
 * and zero-initialized ones keep their values through shmem_init, and serve as targets of
 * put/get, atomics, waits, signals, locks and collectives, and of shmem_ptr stores. They keep
 * their last values after shmem_finalize. */
#include <stdint.h>

#include "hp_test.h"

#define N 64

int initialized = 1234; /* .data */
static double table[4] = {0.5, 1.5, 2.5, 3.5};
static int target[N]; /* .bss */
static long counter;
static long lock;
static uint64_t signal_word;
static int flag;
static short small;
static long reduce_src[N], reduce_dst[N];
static char big[4 << 20]; /* a large .bss object */

int main(void) {
  hp_init();
  int i;
  HP_CHECK_EQ(initialized, 1234);
  HP_CHECK(table[3] == 3.5);
  HP_CHECK_EQ(shmem_addr_accessible(&target, next), 1);
  HP_CHECK_EQ(shmem_addr_accessible(&big[sizeof big - 1], next), 1);

  /* put, get, p, g */
  int src[N];
  for (i = 0; i < N; ++i) src[i] = me * 1000 + i;
  shmem_int_put(target, src, N, next);
  shmem_barrier_all();
  for (i = 0; i < N; ++i) HP_CHECK_EQ(target[i], prev * 1000 + i);
  HP_CHECK_EQ(shmem_int_g(&target[5], next), me * 1000 + 5);
  HP_CHECK(shmem_double_g(&table[2], next) == 2.5);
  shmem_char_p(&big[sizeof big - 1], (char)(me + 1), next);
  shmem_barrier_all();
  HP_CHECK_EQ(big[sizeof big - 1], prev + 1);

  /* atomics and a lock on PE 0's variables */
  for (i = 0; i < 100; ++i) {
    shmem_long_atomic_inc(&counter, 0);
    shmem_set_lock(&lock);
    shmem_int_p(&initialized, shmem_int_g(&initialized, 0) + 1, 0);
    shmem_clear_lock(&lock);
  }
  shmem_barrier_all();
  HP_CHECK_EQ(shmem_long_atomic_fetch(&counter, 0), 100 * n);
  HP_CHECK_EQ(shmem_int_g(&initialized, 0), 1234 + 100 * n);

  /* waits and signals on global words */
  shmem_int_atomic_set(&flag, me + 1, next);
  shmem_int_wait_until(&flag, SHMEM_CMP_EQ, prev + 1);
  shmem_short_p(&small, (short)(me + 7), next);
  shmem_short_wait_until(&small, SHMEM_CMP_EQ, (short)(prev + 7));
  shmem_int_put_signal(&target[0], &src[1], 1, &signal_word, 9, SHMEM_SIGNAL_SET, next);
  HP_CHECK_EQ(shmem_signal_wait_until(&signal_word, SHMEM_CMP_EQ, 9), 9);
  HP_CHECK_EQ(target[0], prev * 1000 + 1);
  HP_CHECK_EQ(shmem_signal_fetch(&signal_word), 9);

  /* shmem_ptr: a plain store into the next PE's copy (a put where it is not mapped) */
  int* remote = (int*)shmem_ptr(&target[1], next);
  HP_CHECK_EQ(remote != NULL, hp_mapped(next));
  shmem_barrier_all();
  if (remote != NULL) {
    *remote = -me;
  } else {
    shmem_int_p(&target[1], -me, next);
  }
  shmem_barrier_all();
  HP_CHECK_EQ(target[1], -prev);

  /* collectives on global arrays */
  for (i = 0; i < N; ++i) reduce_src[i] = me + i;
  HP_CHECK_EQ(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, reduce_dst, reduce_src, N), 0);
  for (i = 0; i < N; ++i) HP_CHECK_EQ(reduce_dst[i], (long)n * (n - 1) / 2 + (long)n * i);
  HP_CHECK_EQ(shmem_long_fcollect(SHMEM_TEAM_WORLD, reduce_dst, reduce_src, 1), 0);
  for (i = 0; i < n; ++i) HP_CHECK_EQ(reduce_dst[i], i);

  const int status = hp_report("globals");
  shmem_finalize();
  HP_CHECK_EQ(target[1], -prev); /* still readable after finalize */
  return status | (hp_failures != 0);
}
