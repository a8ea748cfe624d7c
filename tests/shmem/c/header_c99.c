/* Compile-only: <shmem.h> is clean C99 (-std=c99 -Wall -Wextra -pedantic -Werror), and its
 * constants are integer constant expressions. */
#include <shmem.h>

typedef char hp_check_cmp[SHMEM_CMP_LE - SHMEM_CMP_EQ == 5 ? 1 : -1];
typedef char hp_check_version[SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION == 5 ? 1 : -1];

int hp_shmem_header_c99(void);
int hp_shmem_header_c99(void) {
  shmem_team_config_t config = {0};
  shmem_team_t team = SHMEM_TEAM_WORLD;
  return config.num_contexts + (team == SHMEM_TEAM_INVALID) + SHMEM_THREAD_MULTIPLE +
         SHMEM_SIGNAL_ADD + (int)sizeof(SHMEM_VENDOR_STRING);
}
