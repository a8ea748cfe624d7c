/* shmem_align: any power-of-two alignment that fits the symmetric heap, the same block on every
 * PE; one larger than the heap's start is aligned to is refused (NULL) on every PE. */
#include <stdint.h>

#include "hp_test.h"

int main(void) {
  hp_init();
  for (size_t alignment = 64; alignment <= ((size_t)16 << 20); alignment <<= 1) {
    char* block = (char*)shmem_align(alignment, 100);
    HP_CHECK(block != NULL);
    if (block == NULL) continue;
    HP_CHECK_EQ((uintptr_t)block % alignment, 0);
    block[99] = (char)me;
    shmem_barrier_all();
    HP_CHECK_EQ(shmem_char_g(block + 99, next), next);
    shmem_barrier_all();
    shmem_free(block);
  }
  /* Far larger than any heap this test runs with. */
  HP_CHECK(shmem_align((size_t)1 << 50, 100) == NULL);
  return hp_finish("align");
}
