/* A PE that dies (SIGKILL) right after shmem_init while the others wait for it in a barrier:
 * tests/python/test_rank_death.py runs it under hprun and under mpirun and checks that the job
 * ends within the deadline with a non-zero status naming the dead rank. */
#include <shmem.h>
#include <signal.h>
#include <stdio.h>

int main(void) {
  shmem_init();
  if (shmem_my_pe() == 1) raise(SIGKILL);
  shmem_barrier_all(); /* never completes: a PEER_DEAD, or the launcher ends the job */
  printf("PE %d: the barrier completed without PE 1\n", shmem_my_pe());
  shmem_finalize();
  return 0;
}
