/* shmem_init after shmem_finalize starts the library again (on every transport: an MPI this
 * library initialized stays up until the process exits), with a fresh heap and the same PEs;
 * finalizing released the contexts a round left alive. */
#include "hp_test.h"

static int initialized(void) {
  int value = -1;
  shmem_query_initialized(&value);
  return value;
}

int main(void) {
  for (int round = 0; round < 3; ++round) {
    HP_CHECK_EQ(initialized(), 0);
    hp_init();
    HP_CHECK_EQ(initialized(), 1);
    int* x = (int*)shmem_malloc(sizeof(int));
    *x = 10 * round + me;
    shmem_barrier_all();
    HP_CHECK_EQ(shmem_int_g(x, next), 10 * round + next);
    shmem_barrier_all();
    shmem_free(x);
    /* Most of the 1024 contexts that may exist at once, never destroyed. */
    for (int k = 0; k < 1000; ++k) {
      shmem_ctx_t ctx = SHMEM_CTX_INVALID;
      HP_CHECK_EQ(shmem_ctx_create(0, &ctx), 0);
    }
    if (round < 2) shmem_finalize();
  }
  return hp_finish("reinit");
}
