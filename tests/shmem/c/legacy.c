/* A program of the OpenSHMEM 1.0 era: start_pes, _my_pe/_num_pes, shmalloc and friends, the
 * untyped waits, the cache routines, _SHMEM_ constants and an active-set barrier. */
#include <stdio.h>

#include <shmem.h>

static long p_sync[_SHMEM_BARRIER_SYNC_SIZE];

int main(void) {
  int i, failures = 0;
  for (i = 0; i < _SHMEM_BARRIER_SYNC_SIZE; ++i) p_sync[i] = _SHMEM_SYNC_VALUE;
  start_pes(0);
  const int me = _my_pe(), n = _num_pes();
  short* flag = (short*)shmalloc(sizeof(short));
  long* data = (long*)shmemalign(4096, 4 * sizeof(long));
  *flag = 0;
  shmem_barrier(0, 0, n, p_sync);
  shmem_long_p(&data[0], 100 + me, (me + 1) % n);
  shmem_quiet();
  shmem_short_p(flag, 1, (me + 1) % n);
  shmem_short_wait(flag, 0);
  shmem_clear_cache_inv();
  shmem_udcflush_line(data);
  if (data[0] != 100 + (me + n - 1) % n) ++failures;
  data = (long*)shrealloc(data, 8 * sizeof(long));
  if (data == NULL || data[0] != 100 + (me + n - 1) % n) ++failures;
  shmem_barrier(0, 0, n, p_sync);
  shfree(data);
  shfree(flag);
  if (failures != 0) fprintf(stderr, "PE %d: %d failed checks\n", me, failures);
  if (me == 0 && failures == 0) printf("legacy: PASS on %d PEs\n", n);
  shmem_finalize();
  return failures != 0;
}
