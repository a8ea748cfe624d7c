/* Hello world: setup and query routines, shmem_ptr stores, and the at-exit finalize (main
 * returns without shmem_finalize: the library's at-exit handler finalizes, so hprun sees a
 * clean end). */
#include <stdint.h>
#include <string.h>

#include "hp_test.h"

int main(void) {
  int provided = -1;
  HP_CHECK_EQ(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided), 0);
  HP_CHECK_EQ(provided, SHMEM_THREAD_MULTIPLE);
  provided = -1;
  shmem_query_thread(&provided);
  HP_CHECK_EQ(provided, SHMEM_THREAD_MULTIPLE);

  hp_set_pes();
  HP_CHECK(n >= 1);
  HP_CHECK(me >= 0 && me < n);
  HP_CHECK_EQ(shmem_team_my_pe(SHMEM_TEAM_WORLD), me);
  HP_CHECK_EQ(shmem_team_n_pes(SHMEM_TEAM_WORLD), n);

  int major = 0, minor = 0;
  shmem_info_get_version(&major, &minor);
  HP_CHECK_EQ(major, 1);
  HP_CHECK_EQ(minor, 6);
  HP_CHECK(SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION == 6);
  char name[SHMEM_MAX_NAME_LEN];
  memset(name, 'x', sizeof name);
  shmem_info_get_name(name);
  HP_CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0);

  for (int pe = 0; pe < n; ++pe) HP_CHECK_EQ(shmem_pe_accessible(pe), 1);
  HP_CHECK_EQ(shmem_pe_accessible(n), 0);
  HP_CHECK_EQ(shmem_pe_accessible(-1), 0);

  int* slots = (int*)shmem_calloc((size_t)n, sizeof(int));
  int private_int = 0;
  HP_CHECK(slots != NULL);
  HP_CHECK_EQ(shmem_addr_accessible(&private_int, 0), 0);
  HP_CHECK(shmem_ptr(&private_int, 0) == NULL);
  for (int pe = 0; pe < n; ++pe) {
    HP_CHECK_EQ(shmem_addr_accessible(slots, pe), 1);
    int* remote = (int*)shmem_ptr(slots, pe);
    HP_CHECK_EQ(remote != NULL, hp_mapped(pe));
    HP_CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, slots, pe) == (void*)remote);
    const int shared_pe = shmem_team_translate_pe(SHMEM_TEAM_WORLD, pe, SHMEM_TEAM_SHARED);
    if (shared_pe >= 0) {
      HP_CHECK(shmem_team_ptr(SHMEM_TEAM_SHARED, slots, shared_pe) == (void*)remote);
    }
    if (remote != NULL) {
      remote[me] = 1000 * me + pe; /* a plain store into PE pe's heap */
    } else {
      shmem_int_p(&slots[me], 1000 * me + pe, pe);
    }
  }
  HP_CHECK(shmem_ptr(slots, n) == NULL);
  HP_CHECK(shmem_ptr(slots, me) == (void*)slots);
  shmem_barrier_all();
  for (int pe = 0; pe < n; ++pe) HP_CHECK_EQ(slots[pe], 1000 * pe + me);

  printf("Hello from PE %d of %d\n", me, n);
  fflush(stdout);
  shmem_barrier_all();
  shmem_free(slots);
  return hp_report("hello");
}
