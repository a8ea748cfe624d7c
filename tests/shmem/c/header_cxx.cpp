// Compile-only: <shmem.h> compiles as C++ (C++11, -Wall -Wextra -pedantic -Werror), with C
// linkage for its routines.
#include <shmem.h>

#include <type_traits>

static_assert(
    std::is_same<decltype(&shmem_long_atomic_fetch_add), long (*)(long*, long, int)>::value,
    "shmem_long_atomic_fetch_add keeps its OpenSHMEM signature");

extern "C" int hp_shmem_header_cxx() {
  shmem_team_t team = SHMEM_TEAM_SHARED;
  shmem_team_config_t config = {0};
  return config.num_contexts + (team == SHMEM_TEAM_WORLD ? 1 : 0) + SHMEM_CMP_GE;
}
