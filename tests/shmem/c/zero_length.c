/* A zero-length transfer is a no-op: no address is dereferenced, so any pointer is valid, NULL
 * and memory outside the symmetric heap included; put with signal and no elements still
 * delivers its signal. */
#include <stddef.h>
#include <stdint.h>

#include "hp_test.h"

static long dest[4]; /* a global: symmetric */

int main(void) {
  hp_init();
  long local[4] = {1, 2, 3, 4}; /* on the stack: not symmetric */
  uint64_t* sig = (uint64_t*)shmem_calloc(1, sizeof(uint64_t));
  shmem_barrier_all();

  shmem_putmem(NULL, NULL, 0, next);
  shmem_getmem(NULL, NULL, 0, next);
  shmem_putmem_nbi(NULL, NULL, 0, next);
  shmem_getmem_nbi(NULL, NULL, 0, next);
  shmem_long_put(NULL, NULL, 0, next);
  shmem_long_get(NULL, NULL, 0, next);
  shmem_long_put_nbi(local, local, 0, next);
  shmem_long_get_nbi(local, local, 0, next);
  shmem_long_iput(NULL, NULL, 1, 1, 0, next);
  shmem_long_iget(NULL, NULL, 1, 1, 0, next);
  shmem_long_iput(local, NULL, 2, 3, 0, next);
  shmem_long_iget(NULL, local, 3, 2, 0, next);
  shmem_put64(NULL, NULL, 0, next);
  shmem_get32(NULL, NULL, 0, next);
  shmem_iput128(NULL, NULL, 1, 1, 0, next);
  shmem_ctx_putmem(SHMEM_CTX_DEFAULT, NULL, NULL, 0, next);
  shmem_ctx_long_get(SHMEM_CTX_DEFAULT, local, NULL, 0, next);
  shmem_quiet();

  /* The signal alone. */
  shmem_putmem_signal(NULL, NULL, 0, sig, 7, SHMEM_SIGNAL_SET, next);
  shmem_uint64_wait_until(sig, SHMEM_CMP_EQ, 7);
  HP_CHECK_EQ(shmem_signal_fetch(sig), 7);
  shmem_barrier_all();
  shmem_long_put_signal_nbi(local, NULL, 0, sig, 2, SHMEM_SIGNAL_ADD, next);
  shmem_quiet();
  shmem_uint64_wait_until(sig, SHMEM_CMP_EQ, 9);
  HP_CHECK_EQ(shmem_signal_fetch(sig), 9);

  /* Nothing was written anywhere. */
  shmem_barrier_all();
  for (int i = 0; i < 4; ++i) {
    HP_CHECK_EQ(dest[i], 0);
    HP_CHECK_EQ(local[i], i + 1);
  }
  shmem_free(sig);
  return hp_finish("zero_length");
}
