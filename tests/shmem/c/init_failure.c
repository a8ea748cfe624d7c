/* shmem_init_thread returns non-zero when the library cannot start (here: a symmetric heap too
 * small for the program's global and static variables), instead of ending the process, and
 * leaves the library uninitialized. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <shmem.h>

/* More than the heap asked for below; external, so that no compiler drops it (a static array
 * whose only element read is a constant can be folded away, leaving the segment small). */
char globals[1 << 20];

int main(void) {
  int provided = -7, initialized = -1;
  globals[0] = 1;
  setenv("HP_SHMEM_HEAP_SIZE", "64K", 1); /* read by the first shmem_init* call */
  const int rc = shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  shmem_query_initialized(&initialized);
  if (rc == 0 || provided != -7 || initialized != 0) {
    fprintf(stderr, "init_failure: FAIL: rc %d, provided %d, initialized %d\n", rc, provided,
            initialized);
    return 1;
  }
  printf("init_failure: PASS (shmem_init_thread returned %d)\n", rc);
  return globals[0] == 1 ? 0 : 1;
}
