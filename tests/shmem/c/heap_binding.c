/* The symmetric heap's NUMA binding: a PE's heap segment is bound to the nodes of its
 * HP_MEM_NODES (unset or empty: the kernel's default policy), and the policy belongs to the
 * segment, so every PE sees a peer's heap (through shmem_ptr) bound where that peer bound it.
 * Each PE prints "pe <me> heap bound to <nodes>" or "pe <me> heap unbound". */
#define _GNU_SOURCE
#include <linux/mempolicy.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hp_test.h"

/* Nodes 0..63 as bits; the binding of the page at `addr` (0: not MPOL_BIND). */
static unsigned long bound_nodes(const void* addr) {
  unsigned long mask[16];
  int mode = 0;
  memset(mask, 0, sizeof mask);
  if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 64 + 1, addr, MPOL_F_ADDR) != 0) return ~0ul;
  return (mode & ~MPOL_MODE_FLAGS) == MPOL_BIND ? mask[0] : 0;
}

/* "0", "0,2", "1-3" (nodes below 64) as bits; unset or empty: 0. */
static unsigned long listed_nodes(const char* text) {
  unsigned long bits = 0;
  while (text != NULL && *text != '\0') {
    char* end = NULL;
    const long lo = strtol(text, &end, 10);
    long hi = lo;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long node = lo; node <= hi && node < 64; ++node) bits |= 1ul << node;
    text = *end == ',' ? end + 1 : end;
  }
  return bits;
}

int main(void) {
  long* heap;
  unsigned long* expected;
  unsigned long mine;
  int pe;
  hp_init();
  heap = (long*)shmem_malloc(1 << 16);
  expected = (unsigned long*)shmem_malloc(sizeof(unsigned long));
  heap[0] = me;
  *expected = listed_nodes(getenv("HP_MEM_NODES"));
  shmem_barrier_all();
  mine = bound_nodes(heap);
  HP_CHECK_EQ(mine, *expected);
  for (pe = 0; pe < n; ++pe) {
    const long* peer = (const long*)shmem_ptr(heap, pe);
    HP_CHECK_EQ(peer != NULL, hp_mapped(pe));
    if (peer != NULL) HP_CHECK_EQ(bound_nodes(peer), shmem_ulong_g(expected, pe));
  }
  if (mine == 0) {
    printf("pe %d heap unbound\n", me);
  } else {
    printf("pe %d heap bound to mask 0x%lx\n", me, mine);
  }
  fflush(stdout);
  shmem_barrier_all();
  shmem_free(expected);
  shmem_free(heap);
  return hp_finish("heap_binding");
}
