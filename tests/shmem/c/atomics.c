/* Atomics under contention, with exact totals: every PE hammers words on PE 0 (fetch_add, add,
 * inc, fetch_inc; a compare_swap spin lock guarding a get/put counter; swap conservation;
 * bitwise or/and/xor on per-PE bits), for every type of its table; float/double fetch, set and
 * swap; the deprecated names; and shmem_set_lock/test_lock/clear_lock. */
#include <stdint.h>

#include "hp_test.h"

/* Per PE, type and operation: enough to interleave every PE's updates on PE 0 (each is a
 * remote round trip, across hosts a TCP one: the hosts runs take most of this test's time). */
#define ITERS 64

#define AMO_TEST(TYPE, NAME)                                                                     \
  static void test_##NAME(void) {                                                                \
    TYPE* words = (TYPE*)shmem_calloc(4, sizeof(TYPE)); /* counter, lock, guarded, swapped */    \
    TYPE* slots = (TYPE*)shmem_calloc((size_t)n, sizeof(TYPE));                                  \
    TYPE returned = 0, inserted = 0, expected;                                                   \
    int i;                                                                                       \
    shmem_barrier_all();                                                                         \
    for (i = 0; i < ITERS; ++i) {                                                                \
      const TYPE old = shmem_##NAME##_atomic_fetch_add(&words[0], (TYPE)3, 0);                   \
      HP_CHECK(old < (TYPE)(7 * ITERS * n));                                                     \
      shmem_##NAME##_atomic_add(&words[0], (TYPE)2, 0);                                          \
      shmem_##NAME##_atomic_inc(&words[0], 0);                                                   \
      HP_CHECK(shmem_##NAME##_atomic_fetch_inc(&words[0], 0) < (TYPE)(7 * ITERS * n));           \
    }                                                                                            \
    /* a spin lock by compare_swap guards a counter updated by get and put */                    \
    for (i = 0; i < ITERS; ++i) {                                                                \
      while (shmem_##NAME##_atomic_compare_swap(&words[1], (TYPE)0, (TYPE)(me + 1), 0) != 0) {   \
      }                                                                                          \
      shmem_##NAME##_p(&words[2], shmem_##NAME##_g(&words[2], 0) + 1, 0);                        \
      shmem_quiet();                                                                             \
      HP_CHECK(shmem_##NAME##_atomic_swap(&words[1], (TYPE)0, 0) == (TYPE)(me + 1));             \
    }                                                                                            \
    /* swap conserves: initial + inserted == final + returned */                                 \
    for (i = 0; i < ITERS; ++i) {                                                                \
      const TYPE value = (TYPE)(me * ITERS + i + 1);                                             \
      inserted += value;                                                                         \
      returned += shmem_##NAME##_atomic_swap(&words[3], value, 0);                               \
    }                                                                                            \
    shmem_##NAME##_atomic_set(&slots[me], (TYPE)(me + 40), 0);                                   \
    shmem_##NAME##_atomic_add(&slots[me], returned - inserted, 0); /* collect the balance */     \
    shmem_barrier_all();                                                                         \
    HP_CHECK(shmem_##NAME##_atomic_fetch(&words[0], 0) == (TYPE)(7 * ITERS * n));                \
    HP_CHECK(shmem_##NAME##_atomic_fetch(&words[2], 0) == (TYPE)(ITERS * n));                    \
    if (me == 0) {                                                                               \
      TYPE balance = words[3];                                                                   \
      for (i = 0; i < n; ++i) balance += (TYPE)(slots[i] - (TYPE)(i + 40));                      \
      HP_CHECK(balance == 0);                                                                    \
    }                                                                                            \
    shmem_barrier_all();                                                                         \
    expected = (TYPE)(7 * ITERS * n);                                                            \
    if (me == n - 1) {                                                                           \
      HP_CHECK(shmem_##NAME##_atomic_compare_swap(&words[0], (TYPE)1, (TYPE)2, 0) == expected);  \
      HP_CHECK(shmem_##NAME##_atomic_compare_swap(&words[0], expected, (TYPE)1, 0) == expected); \
      HP_CHECK(shmem_##NAME##_atomic_fetch(&words[0], 0) == (TYPE)1);                            \
    }                                                                                            \
    shmem_barrier_all();                                                                         \
    shmem_free(slots);                                                                           \
    shmem_free(words);                                                                           \
  }
HP_SHMEM_AMO_TYPES(AMO_TEST)

/* Bit b of PE 0's word belongs to PE b % n; each PE toggles, sets and clears only its bits. */
#define BITWISE_TEST(TYPE, NAME)                                                      \
  static void test_bitwise_##NAME(void) {                                             \
    TYPE* word = (TYPE*)shmem_calloc(1, sizeof(TYPE));                                \
    TYPE mine = 0, all = 0;                                                           \
    int b, i;                                                                         \
    for (b = 0; b < 31; ++b) { /* bit 31 would overflow int32_t */                    \
      all |= (TYPE)((TYPE)1 << b);                                                    \
      if (b % n == me) mine |= (TYPE)((TYPE)1 << b);                                  \
    }                                                                                 \
    shmem_barrier_all();                                                              \
    for (i = 0; i < ITERS; ++i) {                                                     \
      const TYPE old = shmem_##NAME##_atomic_fetch_xor(word, mine, 0);                \
      HP_CHECK((old & mine) == (i % 2 == 0 ? (TYPE)0 : mine));                        \
    }                                                                                 \
    shmem_##NAME##_atomic_xor(word, mine, 0);                                         \
    shmem_##NAME##_atomic_xor(word, mine, 0); /* ITERS + 2 toggles: clear */          \
    HP_CHECK((shmem_##NAME##_atomic_fetch_or(word, mine, 0) & mine) == 0);            \
    shmem_barrier_all();                                                              \
    HP_CHECK(shmem_##NAME##_atomic_fetch(word, 0) == all);                            \
    shmem_barrier_all();                                                              \
    HP_CHECK((shmem_##NAME##_atomic_fetch_and(word, (TYPE)~mine, 0) & mine) == mine); \
    shmem_##NAME##_atomic_or(word, mine, 0);                                          \
    shmem_##NAME##_atomic_and(word, (TYPE)~mine, 0);                                  \
    shmem_barrier_all();                                                              \
    HP_CHECK(shmem_##NAME##_atomic_fetch(word, 0) == 0);                              \
    shmem_barrier_all();                                                              \
    shmem_free(word);                                                                 \
  }
HP_SHMEM_AMO_BITWISE_TYPES(BITWISE_TEST)

/* fetch, set and swap move float and double values exactly. */
#define FLOAT_TEST(TYPE, NAME)                                                                   \
  static void test_##NAME(void) {                                                                \
    TYPE* slots = (TYPE*)shmem_calloc((size_t)n, sizeof(TYPE));                                  \
    const int next = (me + 1) % n;                                                               \
    shmem_barrier_all();                                                                         \
    shmem_##NAME##_atomic_set(&slots[me], (TYPE)me + (TYPE)0.25, next);                          \
    shmem_barrier_all();                                                                         \
    HP_CHECK(shmem_##NAME##_atomic_fetch(&slots[me], next) == (TYPE)me + (TYPE)0.25);            \
    HP_CHECK(shmem_##NAME##_atomic_swap(&slots[me], (TYPE)-1.5, next) == (TYPE)me + (TYPE)0.25); \
    HP_CHECK(shmem_##NAME##_fetch(&slots[me], next) == (TYPE)-1.5);                              \
    shmem_##NAME##_set(&slots[me], (TYPE)2.5, next);                                             \
    HP_CHECK(shmem_##NAME##_swap(&slots[me], (TYPE)0, next) == (TYPE)2.5);                       \
    shmem_barrier_all();                                                                         \
    shmem_free(slots);                                                                           \
  }
HP_SHMEM_AMO_FLOAT_TYPES(FLOAT_TEST)

/* The pre-1.4 names on PE 0's counter: exact total. */
#define DEPRECATED_TEST(TYPE, NAME)                                                   \
  static void test_deprecated_##NAME(void) {                                          \
    TYPE* word = (TYPE*)shmem_calloc(2, sizeof(TYPE));                                \
    int i;                                                                            \
    shmem_barrier_all();                                                              \
    for (i = 0; i < ITERS; ++i) {                                                     \
      (void)shmem_##NAME##_fadd(&word[0], (TYPE)2, 0);                                \
      (void)shmem_##NAME##_finc(&word[0], 0);                                         \
      shmem_##NAME##_add(&word[0], (TYPE)3, 0);                                       \
      shmem_##NAME##_inc(&word[0], 0);                                                \
    }                                                                                 \
    while (shmem_##NAME##_cswap(&word[1], (TYPE)me, (TYPE)(me + 1), 0) != (TYPE)me) { \
    } /* PEs pass the word on in order */                                             \
    shmem_barrier_all();                                                              \
    HP_CHECK(shmem_##NAME##_fetch(&word[0], 0) == (TYPE)(7 * ITERS * n));             \
    HP_CHECK(shmem_##NAME##_fetch(&word[1], 0) == (TYPE)n);                           \
    shmem_barrier_all();                                                              \
    if (me == 0) HP_CHECK(shmem_##NAME##_swap(&word[1], (TYPE)0, 0) == (TYPE)n);      \
    shmem_barrier_all();                                                              \
    shmem_##NAME##_set(&word[1], (TYPE)5, 0);                                         \
    shmem_barrier_all();                                                              \
    HP_CHECK(shmem_##NAME##_fetch(&word[1], 0) == (TYPE)5);                           \
    shmem_barrier_all();                                                              \
    shmem_free(word);                                                                 \
  }
HP_SHMEM_DEPRECATED_TYPES(DEPRECATED_TEST)

/* shmem_set_lock and shmem_test_lock guard a counter updated by get and put. */
static void test_locks(void) {
  long* lock = (long*)shmem_calloc(1, sizeof(long));
  int* counter = (int*)shmem_calloc(1, sizeof(int));
  long* swapped = (long*)shmem_calloc(1, sizeof(long));
  int i;
  shmem_barrier_all();
  for (i = 0; i < ITERS; ++i) {
    if (i % 2 == 0) {
      shmem_set_lock(lock);
    } else {
      while (shmem_test_lock(lock) != 0) {
      }
    }
    shmem_int_p(counter, shmem_int_g(counter, 0) + 1, 0);
    shmem_clear_lock(lock);
  }
  (void)shmem_swap(swapped, (long)me + 1, 0);
  shmem_barrier_all();
  HP_CHECK_EQ(shmem_int_g(counter, 0), ITERS * n);
  HP_CHECK(shmem_long_g(swapped, 0) >= 1 && shmem_long_g(swapped, 0) <= n);
  if (me == 0) HP_CHECK_EQ(shmem_test_lock(lock), 0); /* free: PE 0 takes it */
  shmem_barrier_all();
  if (me != 0) HP_CHECK_EQ(shmem_test_lock(lock), 1); /* held by PE 0 */
  shmem_barrier_all();
  if (me == 0) shmem_clear_lock(lock);
  shmem_barrier_all();
  /* The holder tests its own lock (1, and nothing changes) while the others queue up behind it:
   * its clear must still hand the lock to each of them in turn. */
  if (me == 0) shmem_set_lock(lock);
  shmem_barrier_all();
  if (me == 0) {
    shmem_int_wait_until(counter, SHMEM_CMP_EQ, ITERS * n + n - 1); /* every other PE is queuing */
    for (i = 0; i < 2000; ++i) HP_CHECK_EQ(shmem_test_lock(lock), 1);
  } else {
    shmem_int_atomic_inc(counter, 0);
    shmem_set_lock(lock);
  }
  shmem_clear_lock(lock);
  shmem_barrier_all();
  /* The lock's home takes it by test_lock alone while the others pass it around: its polling
   * must let their operations on its words (the tail) progress. */
  for (i = 0; i < 8; ++i) {
    if (me == 0) {
      while (shmem_test_lock(lock) != 0) {
      }
    } else {
      shmem_set_lock(lock);
    }
    shmem_clear_lock(lock);
  }
  shmem_barrier_all();
  shmem_free(swapped);
  shmem_free(counter);
  shmem_free(lock);
}

int main(void) {
  hp_init();
#define RUN_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_AMO_TYPES(RUN_TEST)
  HP_SHMEM_AMO_FLOAT_TYPES(RUN_TEST)
#define RUN_BITWISE_TEST(TYPE, NAME) test_bitwise_##NAME();
  HP_SHMEM_AMO_BITWISE_TYPES(RUN_BITWISE_TEST)
#define RUN_DEPRECATED_TEST(TYPE, NAME) test_deprecated_##NAME();
  HP_SHMEM_DEPRECATED_TYPES(RUN_DEPRECATED_TEST)
  test_locks();
  return hp_finish("atomics");
}
