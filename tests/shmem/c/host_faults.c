/* Traffic between every pair of PEs until a fault stops it: tests/python/test_host_faults.py
 * runs it across two hosts and then cuts a host's link, stops its PEs (SIGSTOP) or kills one.
 * Each round, every PE adds to a word on every other PE and puts to it with a signal; every 16
 * rounds, a barrier. PE 0 prints "running" once every PE has done a round. With an argument of
 * seconds it ends after that long and checks its words (prints "done"); without, it runs until the
 * fault ends it, which must happen with a named error within the deadline. */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0;
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* added = (long*)shmem_calloc((size_t)n, sizeof(long)); /* [pe]: what pe added here */
  long* put = (long*)shmem_calloc((size_t)n, sizeof(long));   /* [pe]: pe's last round */
  uint64_t* signals = (uint64_t*)shmem_calloc((size_t)n, sizeof(uint64_t)); /* [pe]: its puts */
  static int decided = 0, stop = 0; /* PE 0 decides; the broadcast tells every PE */
  const time_t end = time(NULL) + (time_t)seconds;
  long round;
  for (round = 1;; ++round) {
    int pe;
    for (pe = 0; pe < n; ++pe) {
      if (pe == me) continue;
      shmem_long_atomic_add(&added[me], 1, pe);
      shmem_long_put_signal(&put[me], &round, 1, &signals[me], 1, SHMEM_SIGNAL_ADD, pe);
    }
    if (round % 16 != 0) continue;
    shmem_barrier_all();
    if (round == 16 && me == 0) {
      printf("running\n");
      fflush(stdout);
    }
    if (me == 0) decided = seconds > 0 && time(NULL) >= end;
    shmem_int_broadcast(SHMEM_TEAM_WORLD, &stop, &decided, 1, 0);
    if (me == 0) stop = decided;
    if (stop) break;
  }
  shmem_barrier_all();
  {
    int pe, bad = 0;
    for (pe = 0; pe < n; ++pe) {
      if (pe != me && (added[pe] != round || put[pe] != round || signals[pe] != (uint64_t)round))
        bad = 1;
    }
    if (bad) fprintf(stderr, "PE %d: the words do not hold %ld rounds\n", me, round);
    if (me == 0 && !bad) printf("done: %ld rounds\n", round);
    shmem_free(signals);
    shmem_free(put);
    shmem_free(added);
    shmem_finalize();
    return bad;
  }
}
