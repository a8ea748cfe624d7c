/* Negative test: shmem_global_exit(3) on PE 0 while the others wait in a barrier ends the whole
 * job; hprun reports PE 0's status 3 (expect_failure.sh checks that it fails and says so). */
#include "hp_test.h"

int main(void) {
  shmem_init();
  if (shmem_my_pe() == 0) shmem_global_exit(3);
  shmem_barrier_all(); /* the others stop here: PEER_DEAD, or ended by hprun */
  fprintf(stderr, "global_exit: PE %d passed the barrier\n", shmem_my_pe());
  shmem_finalize();
  return 0;
}
