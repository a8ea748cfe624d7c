/* Negative test: shmem_int_p to a PE outside the job must end the process with a non-zero
 * status after naming OUT_OF_RANGE on stderr (expect_failure.sh checks both). */
#include "hp_test.h"

int main(void) {
  shmem_init();
  int* x = (int*)shmem_calloc(1, sizeof(int));
  shmem_barrier_all();
  if (shmem_my_pe() == 0) {
    shmem_int_p(x, 1, shmem_n_pes()); /* never returns */
    fprintf(stderr, "out_of_range: shmem_int_p returned\n");
  }
  shmem_barrier_all(); /* the other PEs see PE 0 die (PEER_DEAD) or are ended by hprun */
  shmem_free(x);
  shmem_finalize();
  return 0;
}
