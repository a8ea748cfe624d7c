/* RMA for every standard RMA type: a put/get ring (blocking and _nbi), p/g, strided iput/iget;
 * the fixed-size and byte routines (putSIZE/getSIZE, iputSIZE/igetSIZE, putmem/getmem); and a
 * large transfer. PE me writes to next = me + 1 and reads from it (mod n). */
#include <stdlib.h>
#include <string.h>

#include "hp_test.h"

#define N 37       /* elements per buffer */
#define STRIDED 12 /* elements moved by the strided tests: 3 * 11 < 37 and 2 * 11 < 37 */

/* The pattern of element i of PE pe's source. */
#define PATTERN(TYPE, pe, i) ((TYPE)((pe)*100 + (i) + 1))

#define RMA_TEST(TYPE, NAME)                                                                   \
  static void test_##NAME(void) {                                                              \
    TYPE* src = (TYPE*)shmem_malloc(N * sizeof(TYPE));                                         \
    TYPE* dst = (TYPE*)shmem_calloc(N, sizeof(TYPE));                                          \
    TYPE local[N];                                                                             \
    int i;                                                                                     \
    for (i = 0; i < N; ++i) src[i] = PATTERN(TYPE, me, i);                                     \
    shmem_barrier_all();                                                                       \
    /* blocking put to next, get from next */                                                  \
    shmem_##NAME##_put(dst, src, N, next);                                                     \
    shmem_##NAME##_get(local, src, N, next);                                                   \
    for (i = 0; i < N; ++i) HP_CHECK(local[i] == PATTERN(TYPE, next, i));                      \
    shmem_barrier_all();                                                                       \
    for (i = 0; i < N; ++i) HP_CHECK(dst[i] == PATTERN(TYPE, prev, i));                        \
    shmem_barrier_all();                                                                       \
    /* non-blocking the other way round, completed by quiet */                                 \
    shmem_##NAME##_put_nbi(dst, src, N - 1, prev);                                             \
    shmem_##NAME##_get_nbi(local, src + 1, N - 1, prev);                                       \
    shmem_quiet();                                                                             \
    for (i = 0; i < N - 1; ++i) HP_CHECK(local[i] == PATTERN(TYPE, prev, i + 1));              \
    shmem_barrier_all();                                                                       \
    for (i = 0; i < N - 1; ++i) HP_CHECK(dst[i] == PATTERN(TYPE, next, i));                    \
    HP_CHECK(dst[N - 1] == PATTERN(TYPE, prev, N - 1));                                        \
    shmem_barrier_all();                                                                       \
    /* single elements */                                                                      \
    shmem_##NAME##_p(&dst[5], PATTERN(TYPE, me, 50), next);                                    \
    HP_CHECK(shmem_##NAME##_g(&src[7], next) == PATTERN(TYPE, next, 7));                       \
    shmem_barrier_all();                                                                       \
    HP_CHECK(dst[5] == PATTERN(TYPE, prev, 50));                                               \
    /* strided: src element 2k -> dst element 3k on next; next's src element 3k -> local 2k */ \
    memset(dst, 0, N * sizeof(TYPE));                                                          \
    memset(local, 0, sizeof local);                                                            \
    shmem_barrier_all();                                                                       \
    shmem_##NAME##_iput(dst, src, 3, 2, STRIDED, next);                                        \
    shmem_##NAME##_iget(local, src, 2, 3, STRIDED, next);                                      \
    for (i = 0; i < N; ++i) {                                                                  \
      if (i % 2 == 0 && i / 2 < STRIDED) {                                                     \
        HP_CHECK(local[i] == PATTERN(TYPE, next, 3 * (i / 2)));                                \
      } else {                                                                                 \
        HP_CHECK(local[i] == (TYPE)0);                                                         \
      }                                                                                        \
    }                                                                                          \
    shmem_barrier_all();                                                                       \
    for (i = 0; i < N; ++i) {                                                                  \
      if (i % 3 == 0 && i / 3 < STRIDED) {                                                     \
        HP_CHECK(dst[i] == PATTERN(TYPE, prev, 2 * (i / 3)));                                  \
      } else {                                                                                 \
        HP_CHECK(dst[i] == (TYPE)0);                                                           \
      }                                                                                        \
    }                                                                                          \
    shmem_free(dst);                                                                           \
    shmem_free(src);                                                                           \
  }
HP_SHMEM_RMA_TYPES(RMA_TEST)

/* Byte j of element i of PE pe's source for element size `size`. */
static unsigned char byte_pattern(int pe, size_t i, size_t size, size_t j) {
  return (unsigned char)(pe * 31 + i * size + j + 1);
}

#define SIZE_TEST(SIZE)                                                                           \
  static void test_size##SIZE(void) {                                                             \
    const size_t size = SIZE / 8;                                                                 \
    unsigned char* src = (unsigned char*)shmem_malloc(N * size);                                  \
    unsigned char* dst = (unsigned char*)shmem_calloc(N, size);                                   \
    unsigned char local[N * 16];                                                                  \
    size_t i, j;                                                                                  \
    for (i = 0; i < N; ++i)                                                                       \
      for (j = 0; j < size; ++j) src[i * size + j] = byte_pattern(me, i, size, j);                \
    shmem_barrier_all();                                                                          \
    shmem_put##SIZE(dst, src, N, next);                                                           \
    shmem_get##SIZE(local, src, N, next);                                                         \
    for (i = 0; i < N; ++i)                                                                       \
      for (j = 0; j < size; ++j) HP_CHECK(local[i * size + j] == byte_pattern(next, i, size, j)); \
    shmem_barrier_all();                                                                          \
    for (i = 0; i < N; ++i)                                                                       \
      for (j = 0; j < size; ++j) HP_CHECK(dst[i * size + j] == byte_pattern(prev, i, size, j));   \
    shmem_barrier_all();                                                                          \
    memset(dst, 0, N* size);                                                                      \
    memset(local, 0, sizeof local);                                                               \
    shmem_barrier_all();                                                                          \
    shmem_put##SIZE##_nbi(dst, src, 1, next);                                                     \
    shmem_get##SIZE##_nbi(local, src, 1, next);                                                   \
    shmem_quiet();                                                                                \
    for (j = 0; j < size; ++j) HP_CHECK(local[j] == byte_pattern(next, 0, size, j));              \
    shmem_iput##SIZE(dst + size, src, 3, 2, STRIDED, next); /* dst element 1 + 3k */              \
    shmem_iget##SIZE(local + size, src, 2, 3, STRIDED, next);                                     \
    for (i = 0; i < STRIDED; ++i)                                                                 \
      for (j = 0; j < size; ++j)                                                                  \
        HP_CHECK(local[(1 + 2 * i) * size + j] == byte_pattern(next, 3 * i, size, j));            \
    shmem_barrier_all();                                                                          \
    for (j = 0; j < size; ++j) HP_CHECK(dst[j] == byte_pattern(prev, 0, size, j));                \
    for (i = 0; i < STRIDED; ++i)                                                                 \
      for (j = 0; j < size; ++j)                                                                  \
        HP_CHECK(dst[(1 + 3 * i) * size + j] == byte_pattern(prev, 2 * i, size, j));              \
    shmem_barrier_all();                                                                          \
    shmem_free(dst);                                                                              \
    shmem_free(src);                                                                              \
  }
HP_SHMEM_RMA_SIZES(SIZE_TEST)

/* putmem/getmem (blocking and _nbi) of 1 MiB, and of 0 bytes. */
static void test_mem(void) {
  const size_t bytes = (size_t)1 << 20;
  unsigned char* src = (unsigned char*)shmem_malloc(bytes);
  unsigned char* dst = (unsigned char*)shmem_malloc(bytes);
  unsigned char* local = (unsigned char*)malloc(bytes);
  size_t i;
  for (i = 0; i < bytes; ++i) src[i] = (unsigned char)(i * 7 + (size_t)me);
  shmem_barrier_all();
  shmem_putmem(dst, src, bytes, next);
  shmem_getmem(local, src, bytes, next);
  shmem_putmem(dst, src, 0, next);
  for (i = 0; i < bytes; ++i) HP_CHECK(local[i] == (unsigned char)(i * 7 + (size_t)next));
  shmem_barrier_all();
  for (i = 0; i < bytes; ++i) HP_CHECK(dst[i] == (unsigned char)(i * 7 + (size_t)prev));
  shmem_barrier_all();
  shmem_putmem_nbi(dst + 1, src, bytes - 1, prev);
  shmem_getmem_nbi(local, src + 1, bytes - 1, prev);
  shmem_quiet();
  for (i = 0; i + 1 < bytes; ++i) HP_CHECK(local[i] == (unsigned char)(i * 7 + 7 + (size_t)prev));
  shmem_barrier_all();
  for (i = 1; i < bytes; ++i) HP_CHECK(dst[i] == (unsigned char)((i - 1) * 7 + (size_t)next));
  shmem_barrier_all();
  free(local);
  shmem_free(dst);
  shmem_free(src);
}

int main(void) {
  hp_init();
#define RUN_RMA_TEST(TYPE, NAME) test_##NAME();
  HP_SHMEM_RMA_TYPES(RUN_RMA_TEST)
#define RUN_SIZE_TEST(SIZE) test_size##SIZE();
  HP_SHMEM_RMA_SIZES(RUN_SIZE_TEST)
  test_mem();
  return hp_finish("rma");
}
