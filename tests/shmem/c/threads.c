/* SHMEM_THREAD_MULTIPLE: THREADS threads of every PE issue atomics, puts, gets and waits at the
 * same time; exact totals once they joined. Then two threads of every PE run collectives at the
 * same time, each on its own team (OpenSHMEM only orders the calls on one team). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "hp_test.h"

#define THREADS 4
#define ITERS 500

static long* counter; /* on PE 0: every thread's increments */
static int* slots;    /* THREADS per PE: thread t of PE p writes slot p * THREADS + t on next */
static int* flags;    /* THREADS per PE: thread t of prev raises flag t of this PE */

static void* work(void* arg) {
  const int t = (int)(size_t)arg;
  int i;
  for (i = 0; i < ITERS; ++i) {
    shmem_long_atomic_inc(counter, 0);
    shmem_int_p(&slots[me * THREADS + t], i, next);
    HP_CHECK(shmem_int_g(&slots[me * THREADS + t], next) == i);
  }
  shmem_int_atomic_set(&flags[t], 1, next);
  shmem_int_wait_until(&flags[t], SHMEM_CMP_EQ, 1); /* from thread t of prev */
  return NULL;
}

#define COLLECTS 100

static shmem_team_t teams[2]; /* the world and a copy of it */
static long* collected[2];    /* per team k: source [0, k] and dest [2, 2 + 2n) */

/* On team k every PE gives k + 1 elements to collect (the teams' offsets differ) and one to
 * fcollect. */
static void* collect_on_team(void* arg) {
  const int k = (int)(size_t)arg;
  long* buf = collected[k];
  int round, pe, i;
  for (round = 0; round < COLLECTS; ++round) {
    for (i = 0; i <= k; ++i) buf[i] = 1000L * k + 100L * i + 10L * round + me;
    HP_CHECK_EQ(shmem_long_collect(teams[k], buf + 2, buf, (size_t)k + 1), 0);
    for (pe = 0; pe < n; ++pe) {
      for (i = 0; i <= k; ++i) {
        HP_CHECK_EQ(buf[2 + pe * (k + 1) + i], 1000L * k + 100L * i + 10L * round + pe);
      }
    }
    HP_CHECK_EQ(shmem_long_fcollect(teams[k], buf + 2, buf, 1), 0);
    for (pe = 0; pe < n; ++pe) HP_CHECK_EQ(buf[2 + pe], 1000L * k + 10L * round + pe);
  }
  return NULL;
}

static void collectives_on_two_teams(void) {
  pthread_t threads[2];
  int k;
  teams[0] = SHMEM_TEAM_WORLD;
  HP_CHECK_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &teams[1]), 0);
  for (k = 0; k < 2; ++k) collected[k] = (long*)shmem_calloc(2 + 2 * (size_t)n, sizeof(long));
  for (k = 0; k < 2; ++k) {
    HP_CHECK_EQ(pthread_create(&threads[k], NULL, collect_on_team, (void*)(size_t)k), 0);
  }
  for (k = 0; k < 2; ++k) HP_CHECK_EQ(pthread_join(threads[k], NULL), 0);
  shmem_barrier_all();
  for (k = 0; k < 2; ++k) shmem_free(collected[k]);
  shmem_team_destroy(teams[1]);
}

int main(void) {
  int provided = -1, t;
  pthread_t threads[THREADS];
  HP_CHECK_EQ(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided), 0);
  HP_CHECK_EQ(provided, SHMEM_THREAD_MULTIPLE);
  hp_set_pes();
  counter = (long*)shmem_calloc(1, sizeof(long));
  slots = (int*)shmem_calloc((size_t)n * THREADS, sizeof(int));
  flags = (int*)shmem_calloc(THREADS, sizeof(int));
  for (t = 0; t < THREADS; ++t) {
    HP_CHECK_EQ(pthread_create(&threads[t], NULL, work, (void*)(size_t)t), 0);
  }
  for (t = 0; t < THREADS; ++t) HP_CHECK_EQ(pthread_join(threads[t], NULL), 0);
  shmem_barrier_all();
  HP_CHECK_EQ(shmem_long_atomic_fetch(counter, 0), (long)n * THREADS * ITERS);
  for (t = 0; t < THREADS; ++t) HP_CHECK_EQ(slots[prev * THREADS + t], ITERS - 1);
  shmem_free(flags);
  shmem_free(slots);
  shmem_free(counter);
  collectives_on_two_teams();
  return hp_finish("threads");
}
