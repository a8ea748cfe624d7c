/* Symmetric memory: malloc/calloc/align/malloc_with_hints/realloc/free, sizes from 1 byte to
 * 8 MiB, alignment, zeroing, contents kept by realloc, NULL for size 0 and for a request larger
 * than the heap (the heap stays usable, and every PE passed the barrier it ends with), and many
 * allocate/free cycles. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "hp_test.h"

/* Puts this PE's number into next's block and checks prev's in its own. */
static void exchange(int* block, size_t count) {
  shmem_barrier_all();
  shmem_int_p(&block[count - 1], me + 1, next);
  shmem_barrier_all();
  HP_CHECK_EQ(block[count - 1], prev + 1);
}

int main(void) {
  hp_init();

  size_t size;
  for (size = 1; size <= ((size_t)8 << 20); size *= 4) {
    unsigned char* block = (unsigned char*)shmem_malloc(size);
    HP_CHECK(block != NULL);
    HP_CHECK((uintptr_t)block % 16 == 0); /* suitable for any type */
    memset(block, me, size);
    shmem_barrier_all();
    HP_CHECK_EQ(shmem_uint8_g(&block[size - 1], next), next);
    shmem_barrier_all();
    shmem_free(block);
  }

  int* zeroed = (int*)shmem_calloc(1000, sizeof(int));
  int i, zeros = 0;
  for (i = 0; i < 1000; ++i) zeros += zeroed[i] == 0;
  HP_CHECK_EQ(zeros, 1000);
  exchange(zeroed, 1000);

  size_t alignment;
  for (alignment = 8; alignment <= 65536; alignment *= 8) {
    int* aligned = (int*)shmem_align(alignment, 100 * sizeof(int));
    HP_CHECK(aligned != NULL && (uintptr_t)aligned % alignment == 0);
    exchange(aligned, 100);
    shmem_free(aligned);
  }
  int* hinted = (int*)shmem_malloc_with_hints(64 * sizeof(int), SHMEM_MALLOC_ATOMICS_REMOTE);
  HP_CHECK(hinted != NULL);
  exchange(hinted, 64);
  shmem_free(hinted);

  /* realloc keeps min(old, new) bytes on every PE, and the new block is symmetric */
  int* grown = (int*)shmem_malloc(100 * sizeof(int));
  for (i = 0; i < 100; ++i) grown[i] = me * 1000 + i;
  grown = (int*)shmem_realloc(grown, 100000 * sizeof(int));
  HP_CHECK(grown != NULL);
  for (i = 0; i < 100; ++i) HP_CHECK_EQ(grown[i], me * 1000 + i);
  exchange(grown, 100000);
  int* shrunk = (int*)shmem_realloc(grown, 10 * sizeof(int));
  for (i = 0; i < 10; ++i) HP_CHECK_EQ(shrunk[i], me * 1000 + i);
  exchange(shrunk, 10);
  HP_CHECK(shmem_realloc(shrunk, 0) == NULL);               /* frees */
  int* fresh = (int*)shmem_realloc(NULL, 10 * sizeof(int)); /* allocates */
  exchange(fresh, 10);
  shmem_free(fresh);

  /* no block: NULL everywhere, and the heap stays usable */
  HP_CHECK(shmem_malloc(0) == NULL);
  HP_CHECK(shmem_calloc(0, 8) == NULL);
  HP_CHECK(shmem_align(64, 0) == NULL);
  shmem_free(NULL);
  if (me == 0) fprintf(stderr, "memory: the next OUT_OF_MEMORY lines are expected\n");
  shmem_barrier_all();
  HP_CHECK(shmem_malloc((size_t)1 << 50) == NULL);
  int* kept = (int*)shmem_malloc(sizeof(int));
  HP_CHECK(shmem_realloc(kept, (size_t)1 << 50) == NULL); /* kept stays */
  exchange(kept, 1);

  /* A failed allocation still ends with a barrier: what prev put before its (late) call has
   * arrived when this PE's call returns. */
  size_t k;
  for (k = 0; k < 4; ++k) {
    *kept = 0;
    shmem_barrier_all();
    if (me != 0) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL); /* PE 0 waits */
    shmem_int_p(kept, (int)k + 1, next);
    shmem_quiet();
    void* failed = k == 0   ? shmem_malloc((size_t)1 << 50)
                   : k == 1 ? shmem_calloc((size_t)1 << 25, (size_t)1 << 25)
                   : k == 2 ? shmem_align(64, (size_t)1 << 50)
                            : shmem_malloc_with_hints((size_t)1 << 50, 0);
    HP_CHECK(failed == NULL);
    HP_CHECK_EQ(*kept, (int)k + 1);
  }
  shmem_free(kept);

  /* allocate/free cycles in a pattern that fragments, then one large block */
  int round;
  for (round = 0; round < 200; ++round) {
    void* a = shmem_malloc((size_t)(round % 7 + 1) * 1000);
    void* b = shmem_calloc((size_t)(round % 5 + 1), 4096);
    void* c = shmem_align(256, 300);
    HP_CHECK(a != NULL && b != NULL && c != NULL);
    shmem_free(b);
    shmem_free(a);
    shmem_free(c);
  }
  int* large = (int*)shmem_malloc((size_t)32 << 20);
  HP_CHECK(large != NULL);
  exchange(large, ((size_t)32 << 20) / sizeof(int));
  shmem_free(large);

  return hp_finish("memory");
}
