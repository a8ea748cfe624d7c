/* SHMEM_THREAD_MULTIPLE: THREADS threads of every PE issue atomics, puts, gets and waits at the
 * same time; exact totals once they joined. */
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
  return hp_finish("threads");
}
