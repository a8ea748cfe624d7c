/* Compile-only: <shmem.h> is clean C99 (-std=c99 -Wall -Wextra -pedantic -Werror), and its
 * constants are integer constant expressions. */
#include <shmem.h>

typedef char hp_check_cmp[SHMEM_CMP_LE - SHMEM_CMP_EQ == 5 ? 1 : -1];
typedef char hp_check_version[SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION == 6 ? 1 : -1];
/* The deprecated constants OpenSHMEM 1.5 still lists, and their leading-underscore spellings. */
typedef char hp_check_sync_sizes[SHMEM_SYNC_VALUE == 0 &&
                                         SHMEM_SYNC_SIZE >= SHMEM_BARRIER_SYNC_SIZE &&
                                         SHMEM_SYNC_SIZE >= SHMEM_BCAST_SYNC_SIZE &&
                                         SHMEM_SYNC_SIZE >= SHMEM_REDUCE_SYNC_SIZE &&
                                         SHMEM_SYNC_SIZE >= SHMEM_COLLECT_SYNC_SIZE &&
                                         SHMEM_SYNC_SIZE >= SHMEM_ALLTOALL_SYNC_SIZE &&
                                         SHMEM_SYNC_SIZE >= SHMEM_ALLTOALLS_SYNC_SIZE &&
                                         SHMEM_REDUCE_MIN_WRKDATA_SIZE > 0
                                     ? 1
                                     : -1];
typedef char hp_check_underscored
    [_SHMEM_MAJOR_VERSION == SHMEM_MAJOR_VERSION && _SHMEM_MINOR_VERSION == SHMEM_MINOR_VERSION &&
             _SHMEM_MAX_NAME_LEN == SHMEM_MAX_NAME_LEN && _SHMEM_SYNC_VALUE == SHMEM_SYNC_VALUE &&
             _SHMEM_BARRIER_SYNC_SIZE == SHMEM_BARRIER_SYNC_SIZE &&
             _SHMEM_BCAST_SYNC_SIZE == SHMEM_BCAST_SYNC_SIZE &&
             _SHMEM_REDUCE_SYNC_SIZE == SHMEM_REDUCE_SYNC_SIZE &&
             _SHMEM_COLLECT_SYNC_SIZE == SHMEM_COLLECT_SYNC_SIZE &&
             _SHMEM_REDUCE_MIN_WRKDATA_SIZE == SHMEM_REDUCE_MIN_WRKDATA_SIZE &&
             _SHMEM_CMP_EQ == SHMEM_CMP_EQ && _SHMEM_CMP_NE == SHMEM_CMP_NE &&
             _SHMEM_CMP_GT == SHMEM_CMP_GT && _SHMEM_CMP_GE == SHMEM_CMP_GE &&
             _SHMEM_CMP_LT == SHMEM_CMP_LT && _SHMEM_CMP_LE == SHMEM_CMP_LE
         ? 1
         : -1];

int hp_shmem_header_c99(void);
int hp_shmem_header_c99(void) {
  shmem_team_config_t config = {0};
  shmem_team_t team = SHMEM_TEAM_WORLD;
  return config.num_contexts + (team == SHMEM_TEAM_INVALID) + SHMEM_THREAD_MULTIPLE +
         SHMEM_SIGNAL_ADD + (int)sizeof(SHMEM_VENDOR_STRING) + (int)sizeof(_SHMEM_VENDOR_STRING);
}
