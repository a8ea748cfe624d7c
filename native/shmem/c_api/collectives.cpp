// The collectives of OpenSHMEM 1.5 on teams that move data: broadcast, collect, fcollect,
// alltoall, alltoalls (the reductions are in reductions.cpp). They return 0, or non-zero after
// printing why (c_api::report).
#include <cstring>
#include <vector>

#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::report;
using c_api::to_team;
using hp::ErrorCode;
using hp::Status;
using hp::shmem::Team;

namespace {

int broadcast(const char* routine, shmem_team_t team, void* dest, const void* source,
              std::size_t nelems, std::size_t size, int root) {
  std::size_t bytes = 0;
  Status s = c_api::checked_bytes(routine, nelems, size, &bytes);
  if (s.is_ok()) {
    s = hp::shmem::broadcast(to_team(team), c_api::sym(dest), c_api::sym(source), bytes, root);
  }
  return report(routine, s);
}

// fcollect, collect and alltoall: `nelems` elements of `size` bytes from (alltoall: to) every
// member (collect: each member its own nelems).
using Bytewise = Status (*)(Team, void*, const void*, std::size_t);
int bytewise(const char* routine, Bytewise collective, shmem_team_t team, void* dest,
             const void* source, std::size_t nelems, std::size_t size) {
  std::size_t bytes = 0;
  Status s = c_api::checked_bytes(routine, nelems, size, &bytes);
  if (s.is_ok()) s = collective(to_team(team), c_api::sym(dest), c_api::sym(source), bytes);
  return report(routine, s);
}

// Element i of block `me` of team PE j's source (element stride sst) lands in element i of
// block j of this PE's dest (element stride dst). Gets between two syncs of the team into a
// private buffer, copied into dest after the second: no PE writes its dest while another may
// still read it, so dest may be (or overlap) source.
Status strided_alltoall(Team team, char* dest, const char* source, std::ptrdiff_t dst,
                        std::ptrdiff_t sst, std::size_t nelems, std::size_t size) {
  const int n = hp::shmem::team_n_pes(team), me = hp::shmem::team_my_pe(team);
  const auto elem = std::ptrdiff_t(size), count = std::ptrdiff_t(nelems);
  std::vector<char> staged(std::size_t(n) * nelems * size);
  HP_RETURN_IF_ERROR(hp::shmem::team_sync(team));  // every source is ready
  for (int k = 0; k < n; ++k) {
    const int j = (me + k) % n;  // start at a different PE on each PE
    const int pe = hp::shmem::team_translate_pe(team, j, hp::shmem::kTeamWorld);
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      HP_RETURN_IF_ERROR(hp::shmem::get(staged.data() + (j * count + i) * elem,
                                        source + (me * count + i) * sst * elem, size, pe));
    }
  }
  HP_RETURN_IF_ERROR(hp::shmem::team_sync(team));  // every PE read what it needs
  for (std::ptrdiff_t b = 0; b < std::ptrdiff_t(n) * count; ++b) {
    std::memcpy(dest + b * dst * elem, staged.data() + b * elem, size);
  }
  return Status::ok();
}

int alltoalls(const char* routine, shmem_team_t team, void* dest, const void* source,
              std::ptrdiff_t dst, std::ptrdiff_t sst, std::size_t nelems, std::size_t size) {
  if (dst == 1 && sst == 1) {
    return bytewise(routine, hp::shmem::alltoall, team, dest, source, nelems, size);
  }
  const Team t = to_team(team);
  if (hp::shmem::team_my_pe(t) < 0) return report(routine, c_api::invalid_team(routine, "team"));
  return report(routine, strided_alltoall(t, static_cast<char*>(c_api::sym(dest)),
                                          static_cast<const char*>(c_api::sym(source)), dst, sst,
                                          nelems, size));
}

}  // namespace

extern "C" {

#define HP_C_COLLECTIVES(TYPE, NAME)                                                              \
  int shmem_##NAME##_broadcast(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems,  \
                               int PE_root) {                                                     \
    return broadcast("shmem_" #NAME "_broadcast", team, dest, source, nelems, sizeof(TYPE),       \
                     PE_root);                                                                    \
  }                                                                                               \
  int shmem_##NAME##_fcollect(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems) { \
    return bytewise("shmem_" #NAME "_fcollect", hp::shmem::fcollect, team, dest, source, nelems,  \
                    sizeof(TYPE));                                                                \
  }                                                                                               \
  int shmem_##NAME##_alltoall(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems) { \
    return bytewise("shmem_" #NAME "_alltoall", hp::shmem::alltoall, team, dest, source, nelems,  \
                    sizeof(TYPE));                                                                \
  }                                                                                               \
  int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE* dest, const TYPE* source, ptrdiff_t dst,  \
                               ptrdiff_t sst, size_t nelems) {                                    \
    return alltoalls("shmem_" #NAME "_alltoalls", team, dest, source, dst, sst, nelems,           \
                     sizeof(TYPE));                                                               \
  }                                                                                               \
  int shmem_##NAME##_collect(shmem_team_t team, TYPE* dest, const TYPE* source, size_t nelems) {  \
    return bytewise("shmem_" #NAME "_collect", hp::shmem::collect, team, dest, source, nelems,    \
                    sizeof(TYPE));                                                                \
  }
HP_SHMEM_RMA_TYPES(HP_C_COLLECTIVES)
#undef HP_C_COLLECTIVES

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root) {
  return broadcast("shmem_broadcastmem", team, dest, source, nelems, 1, PE_root);
}

int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return bytewise("shmem_fcollectmem", hp::shmem::fcollect, team, dest, source, nelems, 1);
}

int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return bytewise("shmem_collectmem", hp::shmem::collect, team, dest, source, nelems, 1);
}

int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return bytewise("shmem_alltoallmem", hp::shmem::alltoall, team, dest, source, nelems, 1);
}

int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems) {
  return alltoalls("shmem_alltoallsmem", team, dest, source, dst, sst, nelems, 1);
}

}  // extern "C"
