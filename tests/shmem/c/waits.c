/* Point-to-point synchronization for every type of Table 9: wait_until and test with each
 * comparison, the _all/_any/_some forms (one word excluded by status), their _vector forms,
 * the deprecated waits, and loops of tests that must see other PEs' writes. PE me waits on words
 * that prev = me - 1 writes (mod n); a barrier separates the phases, so a word is written only
 * after its owner reset it. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include "hp_test.h"

/* Lets the waiter block before the writer writes. */
static void pause_briefly(void) {
  const struct timespec t = {0, 2000000};
  nanosleep(&t, NULL);
}

struct Case {
  int cmp;
  int initial, target, written;
};
/* Non-negative values: the same cases serve the unsigned types. */
static const struct Case kCases[] = {
    {SHMEM_CMP_EQ, 0, 5, 5},   {SHMEM_CMP_NE, 0, 0, 7},     {SHMEM_CMP_GT, 0, 10, 11},
    {SHMEM_CMP_GE, 0, 10, 10}, {SHMEM_CMP_LT, 100, 60, 50}, {SHMEM_CMP_LE, 100, 60, 60},
};
#define N_CASES (sizeof kCases / sizeof kCases[0])

#define WAIT_TEST(TYPE, NAME)                                                                     \
  static void test_##NAME(void) {                                                                 \
    TYPE* word = (TYPE*)shmem_calloc(1, sizeof(TYPE));                                            \
    TYPE* ivars = (TYPE*)shmem_calloc(4, sizeof(TYPE));                                           \
    const int skip_2[4] = {0, 0, 1, 0};                                                           \
    size_t indices[4], k;                                                                         \
    TYPE values[4] = {(TYPE)3, (TYPE)4, (TYPE)99, (TYPE)6};                                       \
    for (k = 0; k < N_CASES; ++k) {                                                               \
      const struct Case c = kCases[k];                                                            \
      *word = (TYPE)c.initial;                                                                    \
      HP_CHECK_EQ(shmem_##NAME##_test(word, c.cmp, (TYPE)c.target), 0);                           \
      shmem_barrier_all();                                                                        \
      pause_briefly();                                                                            \
      shmem_##NAME##_p(word, (TYPE)c.written, next);                                              \
      shmem_##NAME##_wait_until(word, c.cmp, (TYPE)c.target);                                     \
      HP_CHECK_EQ(*word, c.written);                                                              \
      HP_CHECK_EQ(shmem_##NAME##_test(word, c.cmp, (TYPE)c.target), 1);                           \
      shmem_barrier_all();                                                                        \
    }                                                                                             \
    /* arrays: word 2 is excluded and never written */                                            \
    HP_CHECK_EQ(shmem_##NAME##_test_any(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1), SIZE_MAX);      \
    HP_CHECK_EQ(shmem_##NAME##_test_some(ivars, 4, indices, skip_2, SHMEM_CMP_EQ, (TYPE)1), 0);   \
    HP_CHECK_EQ(shmem_##NAME##_test_all(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1), 0);             \
    HP_CHECK_EQ(shmem_##NAME##_test_all(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)0), 1);             \
    shmem_barrier_all();                                                                          \
    pause_briefly();                                                                              \
    shmem_##NAME##_p(&ivars[3], (TYPE)1, next);                                                   \
    HP_CHECK_EQ(shmem_##NAME##_wait_until_any(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1), 3);       \
    HP_CHECK_EQ(shmem_##NAME##_test_any(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1), 3);             \
    shmem_barrier_all();                                                                          \
    pause_briefly();                                                                              \
    shmem_##NAME##_p(&ivars[1], (TYPE)1, next);                                                   \
    shmem_##NAME##_p(&ivars[0], (TYPE)1, next);                                                   \
    {                                                                                             \
      const size_t count =                                                                        \
          shmem_##NAME##_wait_until_some(ivars, 4, indices, skip_2, SHMEM_CMP_EQ, (TYPE)1);       \
      HP_CHECK(count >= 1 && count <= 3); /* word 3, maybe 1 and 0 */                             \
      for (k = 0; k < count; ++k) HP_CHECK(indices[k] != 2);                                      \
    }                                                                                             \
    shmem_##NAME##_wait_until_all(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1);                       \
    HP_CHECK_EQ(shmem_##NAME##_test_all(ivars, 4, skip_2, SHMEM_CMP_EQ, (TYPE)1), 1);             \
    HP_CHECK_EQ(shmem_##NAME##_test_some(ivars, 4, indices, skip_2, SHMEM_CMP_EQ, (TYPE)1), 3);   \
    HP_CHECK_EQ(shmem_##NAME##_test_all(ivars, 4, NULL, SHMEM_CMP_EQ, (TYPE)1), 0);               \
    shmem_##NAME##_wait_until_all(ivars, 0, NULL, SHMEM_CMP_EQ, (TYPE)1);                         \
    HP_CHECK_EQ(shmem_##NAME##_wait_until_any(ivars, 0, NULL, SHMEM_CMP_EQ, (TYPE)1), SIZE_MAX);  \
    /* _vector forms: a comparison value per word (ivars are 1 1 0 1) */                          \
    HP_CHECK_EQ(shmem_##NAME##_test_all_vector(ivars, 4, skip_2, SHMEM_CMP_LT, values), 1);       \
    HP_CHECK_EQ(shmem_##NAME##_test_any_vector(ivars, 4, NULL, SHMEM_CMP_GT, values), SIZE_MAX);  \
    HP_CHECK_EQ(shmem_##NAME##_test_some_vector(ivars, 4, indices, NULL, SHMEM_CMP_LT, values),   \
                4);                                                                               \
    shmem_barrier_all();                                                                          \
    pause_briefly();                                                                              \
    shmem_##NAME##_p(&ivars[0], (TYPE)3, next);                                                   \
    shmem_##NAME##_p(&ivars[3], (TYPE)7, next);                                                   \
    HP_CHECK_EQ(shmem_##NAME##_wait_until_any_vector(ivars, 4, (const int[]){1, 1, 1, 0},         \
                                                     SHMEM_CMP_GT, values),                       \
                3);                                                                               \
    shmem_##NAME##_wait_until_all_vector(ivars, 4, (const int[]){0, 1, 1, 0}, SHMEM_CMP_GE,       \
                                         values);                                                 \
    HP_CHECK_EQ(                                                                                  \
        shmem_##NAME##_wait_until_some_vector(ivars, 4, indices, NULL, SHMEM_CMP_EQ, values), 1); \
    HP_CHECK_EQ(indices[0], 0);                                                                   \
    shmem_barrier_all();                                                                          \
    shmem_free(ivars);                                                                            \
    shmem_free(word);                                                                             \
  }
HP_SHMEM_SYNC_TYPES(WAIT_TEST)

/* shmem_<TYPENAME>_wait, shmem_wait and shmem_wait_until (deprecated). */
#define DEPRECATED_WAIT_TEST(TYPE, NAME)               \
  static void test_deprecated_##NAME(void) {           \
    TYPE* word = (TYPE*)shmem_calloc(1, sizeof(TYPE)); \
    shmem_barrier_all();                               \
    shmem_##NAME##_p(word, (TYPE)9, next);             \
    shmem_##NAME##_wait(word, (TYPE)0);                \
    HP_CHECK_EQ(*word, 9);                             \
    shmem_barrier_all();                               \
    shmem_free(word);                                  \
  }
HP_SHMEM_DEPRECATED_TYPES(DEPRECATED_WAIT_TEST)

/* Loops of tests, with no wait, must see what other PEs write: where this PE applies their RMA
 * itself (MPI over TCP), each test lets it progress. PE 0 polls while every other PE adds to
 * its word, then puts with a signal. The loops end after 30 s, so that a test that never sees
 * the writes fails instead of spinning. */
static void test_polling_progresses(void) {
  int* word = (int*)shmem_calloc(1, sizeof(int));
  int* slots = (int*)shmem_calloc((size_t)n, sizeof(int));
  uint64_t* signal = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));
  shmem_barrier_all();
  if (me == 0) {
    const time_t end = time(NULL) + 30;
    while (!shmem_int_test(word, SHMEM_CMP_EQ, n - 1) && time(NULL) < end) {
    }
    HP_CHECK_EQ(*word, n - 1);
    while (shmem_signal_fetch(signal) != (uint64_t)(n - 1) && time(NULL) < end) {
    }
    HP_CHECK_EQ(shmem_signal_fetch(signal), n - 1);
    for (int i = 1; i < n; ++i) HP_CHECK_EQ(slots[i], i);
  } else {
    pause_briefly();
    shmem_int_atomic_add(word, 1, 0);
    shmem_putmem_signal(&slots[me], &me, sizeof(int), signal, 1, SHMEM_SIGNAL_ADD, 0);
  }
  shmem_barrier_all();
  shmem_free(signal);
  shmem_free(slots);
  shmem_free(word);
}

static void test_deprecated_long_names(void) {
  long* word = (long*)shmem_calloc(1, sizeof(long));
  shmem_barrier_all();
  shmem_long_p(word, 4, next);
  shmem_wait(word, 0);
  shmem_wait_until(word, SHMEM_CMP_GE, 4);
  HP_CHECK_EQ(*word, 4);
  shmem_barrier_all();
  shmem_free(word);
}

int main(void) {
  hp_init();
#define RUN_WAIT_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_SYNC_TYPES(RUN_WAIT_TEST)
#define RUN_DEPRECATED_WAIT_TEST(TYPE, NAME) test_deprecated_##NAME();
  HP_SHMEM_DEPRECATED_TYPES(RUN_DEPRECATED_WAIT_TEST)
  test_deprecated_long_names();
  test_polling_progresses();
  return hp_finish("waits");
}
