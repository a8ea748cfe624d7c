/* The _any tests and waits: a series of calls eventually returns every index that satisfies the
 * condition, not the lowest one again and again (the search starts past the last index found in
 * the same set, whatever other sets were searched in between).
 * _some returns every satisfying index at once. */
#include <stddef.h>
#include <stdint.h>

#include "hp_test.h"

#define N 5

/* Calls `call` 2N times; every index must come back. */
#define CHECK_EVERY_INDEX(call)                          \
  do {                                                   \
    int seen[N] = {0};                                   \
    for (int k = 0; k < 2 * N; ++k) {                    \
      const size_t i = (call);                           \
      HP_CHECK(i < N);                                   \
      if (i < N) seen[i] = 1;                            \
    }                                                    \
    for (int i = 0; i < N; ++i) HP_CHECK_EQ(seen[i], 1); \
  } while (0)

/* test_any (wait_until_any) of ints after one of `others`, whose only satisfying index is 3. */
static size_t test_any_after(int* others, int* ints) {
  HP_CHECK_EQ(shmem_int_test_any(others, 4, NULL, SHMEM_CMP_EQ, 1), 3);
  return shmem_int_test_any(ints, N, NULL, SHMEM_CMP_EQ, 1);
}
static size_t wait_until_any_after(int* others, int* ints) {
  HP_CHECK_EQ(shmem_int_wait_until_any(others, 4, NULL, SHMEM_CMP_EQ, 1), 3);
  return shmem_int_wait_until_any(ints, N, NULL, SHMEM_CMP_EQ, 1);
}

int main(void) {
  hp_init();
  int* ints = (int*)shmem_calloc(N, sizeof(int));
  long* longs = (long*)shmem_calloc(N, sizeof(long));
  short* shorts = (short*)shmem_calloc(N, sizeof(short));
  int cmp_values[N];
  for (int i = 0; i < N; ++i) {
    ints[i] = 1;
    longs[i] = 1;
    shorts[i] = 1;
    cmp_values[i] = 1;
  }
  shmem_barrier_all();

  CHECK_EVERY_INDEX(shmem_int_test_any(ints, N, NULL, SHMEM_CMP_EQ, 1));
  CHECK_EVERY_INDEX(shmem_long_test_any(longs, N, NULL, SHMEM_CMP_GE, 1));
  CHECK_EVERY_INDEX(shmem_short_test_any(shorts, N, NULL, SHMEM_CMP_EQ, 1));
  CHECK_EVERY_INDEX(shmem_int_test_any_vector(ints, N, NULL, SHMEM_CMP_EQ, cmp_values));
  CHECK_EVERY_INDEX(shmem_int_wait_until_any(ints, N, NULL, SHMEM_CMP_EQ, 1));
  CHECK_EVERY_INDEX(shmem_long_wait_until_any(longs, N, NULL, SHMEM_CMP_NE, 0));
  CHECK_EVERY_INDEX(shmem_short_wait_until_any(shorts, N, NULL, SHMEM_CMP_EQ, 1));
  CHECK_EVERY_INDEX(shmem_int_wait_until_any_vector(ints, N, NULL, SHMEM_CMP_EQ, cmp_values));

  /* Searches of another set between the calls do not disturb the series on this one. */
  int* others = (int*)shmem_calloc(4, sizeof(int));
  others[3] = 1;
  CHECK_EVERY_INDEX(test_any_after(others, ints));
  CHECK_EVERY_INDEX(wait_until_any_after(others, ints));

  /* The status array still excludes: index 2 never comes back. */
  const int status[N] = {0, 0, 1, 0, 0};
  for (int k = 0; k < 3 * N; ++k)
    HP_CHECK(shmem_int_test_any(ints, N, status, SHMEM_CMP_EQ, 1) != 2);

  size_t indices[N];
  HP_CHECK_EQ(shmem_int_test_some(ints, N, indices, NULL, SHMEM_CMP_EQ, 1), N);
  HP_CHECK_EQ(shmem_int_wait_until_some(ints, N, indices, status, SHMEM_CMP_EQ, 1), N - 1);

  /* A peer sets the words one at a time: a waiter that clears each index it gets sees them all. */
  shmem_barrier_all();
  for (int i = 0; i < N; ++i) ints[i] = 0;
  shmem_barrier_all();
  for (int i = 0; i < N; ++i) shmem_int_atomic_set(&ints[i], 1, next);
  int got = 0;
  for (int k = 0; k < N; ++k) {
    const size_t i = shmem_int_wait_until_any(ints, N, NULL, SHMEM_CMP_EQ, 1);
    HP_CHECK(i < N);
    if (i < N) {
      ints[i] = 2; /* handled: no longer satisfies */
      ++got;
    }
  }
  HP_CHECK_EQ(got, N);
  shmem_barrier_all();

  shmem_free(others);
  shmem_free(shorts);
  shmem_free(longs);
  shmem_free(ints);
  return hp_finish("fairness");
}
