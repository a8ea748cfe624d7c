/* put with signal: a PE that sees the signal sees the data. Ping-pong rounds of putmem_signal
 * (SET) with an acknowledgement back; every PE adding into PE 0's signal (ADD) with data in
 * its own slot; and each typed and sized put_signal (_nbi) form once. */
#include <stdint.h>
#include <string.h>

#include "hp_test.h"

#define ROUNDS 200
#define BYTES 4096

static unsigned char pattern(int round, int pe, size_t i) {
  return (unsigned char)(round * 13 + pe * 7 + (int)i);
}

/* Round r: fill, putmem_signal(r + 1) to next, wait for prev's signal r + 1, check its data,
 * acknowledge to prev; wait for next's acknowledgement before refilling. */
static void test_rounds(void) {
  unsigned char* src = (unsigned char*)shmem_malloc(BYTES);
  unsigned char* dst = (unsigned char*)shmem_calloc(BYTES, 1);
  uint64_t* sig = (uint64_t*)shmem_calloc(2, sizeof(uint64_t)); /* [0] data, [1] ack */
  int r;
  size_t i;
  shmem_barrier_all();
  for (r = 0; r < ROUNDS; ++r) {
    for (i = 0; i < BYTES; ++i) src[i] = pattern(r, me, i);
    if (r % 2 == 0) {
      shmem_putmem_signal(dst, src, BYTES, &sig[0], (uint64_t)r + 1, SHMEM_SIGNAL_SET, next);
    } else {
      shmem_putmem_signal_nbi(dst, src, BYTES, &sig[0], (uint64_t)r + 1, SHMEM_SIGNAL_SET, next);
    }
    HP_CHECK_EQ(shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, (uint64_t)r + 1), r + 1);
    HP_CHECK_EQ(shmem_signal_fetch(&sig[0]), r + 1);
    for (i = 0; i < BYTES; ++i) HP_CHECK(dst[i] == pattern(r, prev, i));
    shmem_uint64_atomic_add(&sig[1], 1, prev);
    shmem_quiet();
    shmem_uint64_wait_until(&sig[1], SHMEM_CMP_GE, (uint64_t)r + 1);
  }
  shmem_barrier_all();
  shmem_free(sig);
  shmem_free(dst);
  shmem_free(src);
}

/* Every PE puts ROUNDS values into its slot on PE 0, each adding 1 to PE 0's signal; PE 0 waits
 * for all of them and checks the last value of each slot. */
static void test_signal_add(void) {
  long* slots = (long*)shmem_calloc((size_t)n, sizeof(long));
  uint64_t* sig = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));
  long value;
  int r, pe;
  shmem_barrier_all();
  for (r = 0; r < ROUNDS; ++r) {
    value = (long)me * 1000 + r;
    shmem_long_put_signal(&slots[me], &value, 1, sig, 1, SHMEM_SIGNAL_ADD, 0);
  }
  if (me == 0) {
    const uint64_t total = (uint64_t)ROUNDS * (uint64_t)n;
    HP_CHECK_EQ(shmem_signal_wait_until(sig, SHMEM_CMP_GE, total), total);
    for (pe = 0; pe < n; ++pe) HP_CHECK_EQ(slots[pe], (long)pe * 1000 + ROUNDS - 1);
  }
  shmem_barrier_all();
  shmem_free(sig);
  shmem_free(slots);
}

/* Each typed put_signal and put_signal_nbi once: 3 elements to next, then signal 1 or 2. */
#define TYPED_TEST(TYPE, NAME)                                                      \
  static void test_##NAME(void) {                                                   \
    TYPE* dst = (TYPE*)shmem_calloc(3, sizeof(TYPE));                               \
    uint64_t* sig = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));                   \
    TYPE src[3];                                                                    \
    int i;                                                                          \
    for (i = 0; i < 3; ++i) src[i] = (TYPE)(me * 10 + i + 1);                       \
    shmem_barrier_all();                                                            \
    shmem_##NAME##_put_signal(dst, src, 3, sig, 1, SHMEM_SIGNAL_SET, next);         \
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 1);                                  \
    for (i = 0; i < 3; ++i) HP_CHECK(dst[i] == (TYPE)(prev * 10 + i + 1));          \
    shmem_barrier_all();                                                            \
    shmem_##NAME##_put_signal_nbi(dst, src + 1, 2, sig, 1, SHMEM_SIGNAL_ADD, next); \
    shmem_quiet();                                                                  \
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 2);                                  \
    for (i = 0; i < 2; ++i) HP_CHECK(dst[i] == (TYPE)(prev * 10 + i + 2));          \
    shmem_barrier_all();                                                            \
    shmem_free(sig);                                                                \
    shmem_free(dst);                                                                \
  }
HP_SHMEM_RMA_TYPES(TYPED_TEST)

#define SIZED_TEST(SIZE)                                                                  \
  static void test_size##SIZE(void) {                                                     \
    unsigned char* dst = (unsigned char*)shmem_calloc(2, SIZE / 8);                       \
    uint64_t* sig = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));                         \
    unsigned char src[2 * 16];                                                            \
    memset(src, me + 1, sizeof src);                                                      \
    shmem_barrier_all();                                                                  \
    shmem_put##SIZE##_signal(dst, src, 1, sig, 5, SHMEM_SIGNAL_SET, next);                \
    shmem_put##SIZE##_signal_nbi(dst + SIZE / 8, src, 1, sig, 1, SHMEM_SIGNAL_ADD, next); \
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 6);                                        \
    HP_CHECK(dst[0] == prev + 1 && dst[2 * (SIZE / 8) - 1] == prev + 1);                  \
    shmem_barrier_all();                                                                  \
    shmem_free(sig);                                                                      \
    shmem_free(dst);                                                                      \
  }
HP_SHMEM_RMA_SIZES(SIZED_TEST)

int main(void) {
  hp_init();
  test_rounds();
  test_signal_add();
#define RUN_TYPED_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_RMA_TYPES(RUN_TYPED_TEST)
#define RUN_SIZED_TEST(SIZE) test_size##SIZE();
  HP_SHMEM_RMA_SIZES(RUN_SIZED_TEST)
  return hp_finish("signal");
}
