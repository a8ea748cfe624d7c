// Teams and the team-based collectives of OpenSHMEM 1.5. These routines return an int: 0, or
// non-zero after printing why (c_api::report), except shmem_team_destroy, which has no status
// to return and ends the process on failure.
#include <algorithm>
#include <vector>

#include "c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::report;
using c_api::to_handle;
using c_api::to_team;
using hp::DType;
using hp::ErrorCode;
using hp::Status;
using hp::shmem::ReduceOp;
using hp::shmem::Team;

namespace {

Status invalid_team(const char* routine, const char* which) {
  return Status::error(ErrorCode::kInvalidArgument,
                       "{}: {} is SHMEM_TEAM_INVALID or not a team of PE {}", routine, which,
                       hp::shmem::my_pe());
}

// Destroys the teams this PE got from a split that failed part of the way (see split_2d).
void destroy_all(const std::vector<Team>& teams) {
  for (Team team : teams) {
    if (team != hp::shmem::kTeamInvalid) (void)hp::shmem::team_destroy(team);
  }
}

int broadcast(const char* routine, shmem_team_t team, void* dest, const void* source,
              std::size_t nelems, std::size_t size, int root) {
  std::size_t bytes = 0;
  Status s = c_api::checked_bytes(routine, nelems, size, &bytes);
  if (s.is_ok()) {
    s = hp::shmem::broadcast(to_team(team), c_api::sym(dest), c_api::sym(source), bytes, root);
  }
  return report(routine, s);
}

// fcollect and alltoall: `nelems` elements of `size` bytes from (alltoall: to) every member.
using Bytewise = Status (*)(Team, void*, const void*, std::size_t);
int bytewise(const char* routine, Bytewise collective, shmem_team_t team, void* dest,
             const void* source, std::size_t nelems, std::size_t size) {
  std::size_t bytes = 0;
  Status s = c_api::checked_bytes(routine, nelems, size, &bytes);
  if (s.is_ok()) s = collective(to_team(team), c_api::sym(dest), c_api::sym(source), bytes);
  return report(routine, s);
}

// Element i of block j of this PE's source (element stride sst) lands in element i of block
// `me` of team PE j's dest (element stride dst): puts between two syncs of the team.
Status strided_alltoall(Team team, char* dest, const char* source, std::ptrdiff_t dst,
                        std::ptrdiff_t sst, std::size_t nelems, std::size_t size) {
  const int n = hp::shmem::team_n_pes(team), me = hp::shmem::team_my_pe(team);
  HP_RETURN_IF_ERROR(hp::shmem::team_sync(team));  // every dest is ready
  const auto elem = std::ptrdiff_t(size), count = std::ptrdiff_t(nelems);
  for (int k = 0; k < n; ++k) {
    const int j = (me + k) % n;  // start at a different PE on each PE
    const int pe = hp::shmem::team_translate_pe(team, j, hp::shmem::kTeamWorld);
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      HP_RETURN_IF_ERROR(hp::shmem::put(dest + (me * count + i) * dst * elem,
                                        source + (j * count + i) * sst * elem, size, pe));
    }
  }
  HP_RETURN_IF_ERROR(hp::shmem::quiet());
  return hp::shmem::team_sync(team);  // every block arrived
}

int alltoalls(const char* routine, shmem_team_t team, void* dest, const void* source,
              std::ptrdiff_t dst, std::ptrdiff_t sst, std::size_t nelems, std::size_t size) {
  if (dst == 1 && sst == 1) {
    return bytewise(routine, hp::shmem::alltoall, team, dest, source, nelems, size);
  }
  const Team t = to_team(team);
  if (hp::shmem::team_my_pe(t) < 0) return report(routine, invalid_team(routine, "team"));
  return report(routine, strided_alltoall(t, static_cast<char*>(c_api::sym(dest)),
                                          static_cast<const char*>(c_api::sym(source)), dst, sst,
                                          nelems, size));
}

// The allreduce dtype of T: integers by size (sums wrap, so unsigned sums are the signed ones),
// float as fp32, double as fp64.
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFP32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::kFP64;
  } else {
    static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
    return sizeof(T) == 4 ? DType::kInt32 : DType::kInt64;
  }
}

template <ReduceOp kOp, typename T>
int reduce(const char* routine, shmem_team_t team, T* dest, const T* source, std::size_t nreduce) {
  static_assert(kOp == ReduceOp::kSum || !std::is_unsigned_v<T>,
                "max/min would compare unsigned words as signed ones");
  return report(routine,
                hp::shmem::allreduce(to_team(team), c_api::sym(dest), c_api::sym(source), nreduce,
                                     dtype_of<T>(), kOp));
}

}  // namespace

extern "C" {

int shmem_team_my_pe(shmem_team_t team) { return hp::shmem::team_my_pe(to_team(team)); }

int shmem_team_n_pes(shmem_team_t team) { return hp::shmem::team_n_pes(to_team(team)); }

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config) {
  const char* routine = "shmem_team_get_config";
  if (hp::shmem::team_n_pes(to_team(team)) < 0) {
    return report(routine, invalid_team(routine, "team"));
  }
  if (config != nullptr && (config_mask & SHMEM_TEAM_NUM_CONTEXTS) != 0) config->num_contexts = 0;
  return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  return hp::shmem::team_translate_pe(to_team(src_team), src_pe, to_team(dest_team));
}

// config and config_mask are accepted and ignored (they only carry a number of contexts).
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team) {
  (void)config;
  (void)config_mask;
  const char* routine = "shmem_team_split_strided";
  if (new_team == nullptr) {
    return report(routine, Status(ErrorCode::kInvalidArgument, "new_team is NULL"));
  }
  Team team = hp::shmem::kTeamInvalid;
  if (size == 1) stride = 1;  // one PE: the stride does not matter
  const Status s =
      hp::shmem::team_split_strided(to_team(parent_team), start, stride, size, &team);
  *new_team = to_handle(team);
  return report(routine, s);
}

// The x-axis teams are the rows of the parent seen as a grid xrange PEs wide (parent PE p at
// x = p % xrange, y = p / xrange), the y-axis teams its columns: one strided split of the parent
// per row and per column, each taking a team handle (at most 64 teams exist at once).
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                        long yaxis_mask, shmem_team_t* yaxis_team) {
  (void)xaxis_config;
  (void)xaxis_mask;
  (void)yaxis_config;
  (void)yaxis_mask;
  const char* routine = "shmem_team_split_2d";
  if (xaxis_team == nullptr || yaxis_team == nullptr) {
    return report(routine, Status(ErrorCode::kInvalidArgument, "xaxis_team or yaxis_team is NULL"));
  }
  *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
  const Team parent = to_team(parent_team);
  const int n = hp::shmem::team_n_pes(parent);
  if (n < 0) return report(routine, invalid_team(routine, "parent_team"));
  if (xrange <= 0) {
    return report(routine, Status::error(ErrorCode::kInvalidArgument,
                                         "xrange {} is not positive", xrange));
  }
  xrange = std::min(xrange, n);
  std::vector<Team> mine;  // the teams this PE joined, for clean-up
  Team x_team = hp::shmem::kTeamInvalid, y_team = hp::shmem::kTeamInvalid;
  Status s;
  for (int row = 0; s.is_ok() && row * xrange < n; ++row) {
    Team t = hp::shmem::kTeamInvalid;
    const int size = std::min(xrange, n - row * xrange);
    s = hp::shmem::team_split_strided(parent, row * xrange, 1, size, &t);
    if (t != hp::shmem::kTeamInvalid) mine.push_back(x_team = t);
  }
  for (int column = 0; s.is_ok() && column < xrange; ++column) {
    Team t = hp::shmem::kTeamInvalid;
    const int size = (n - column + xrange - 1) / xrange;
    s = hp::shmem::team_split_strided(parent, column, xrange, size, &t);
    if (t != hp::shmem::kTeamInvalid) mine.push_back(y_team = t);
  }
  if (!s.is_ok()) {
    destroy_all(mine);
    return report(routine, s);
  }
  *xaxis_team = to_handle(x_team);
  *yaxis_team = to_handle(y_team);
  return 0;
}

// SHMEM_TEAM_INVALID is ignored (PEs outside a split may destroy what they got).
void shmem_team_destroy(shmem_team_t team) {
  const char* routine = "shmem_team_destroy";
  if (team == SHMEM_TEAM_INVALID) return;
  if (team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED) {
    c_api::fail(routine, Status(ErrorCode::kInvalidArgument,
                                "SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED cannot be destroyed"));
  }
  c_api::check(routine, hp::shmem::team_destroy(to_team(team)));
}

int shmem_team_sync(shmem_team_t team) {
  return report("shmem_team_sync", hp::shmem::team_sync(to_team(team)));
}

// ---- collectives ----------------------------------------------------------------------------

#define HP_C_COLLECTIVES(TYPE, NAME)                                                             \
  int shmem_##NAME##_broadcast(shmem_team_t team, TYPE* dest, const TYPE* source,                \
                               size_t nelems, int PE_root) {                                     \
    return broadcast("shmem_" #NAME "_broadcast", team, dest, source, nelems, sizeof(TYPE),      \
                     PE_root);                                                                   \
  }                                                                                              \
  int shmem_##NAME##_fcollect(shmem_team_t team, TYPE* dest, const TYPE* source,                 \
                              size_t nelems) {                                                   \
    return bytewise("shmem_" #NAME "_fcollect", hp::shmem::fcollect, team, dest, source, nelems, \
                    sizeof(TYPE));                                                               \
  }                                                                                              \
  int shmem_##NAME##_alltoall(shmem_team_t team, TYPE* dest, const TYPE* source,                 \
                              size_t nelems) {                                                   \
    return bytewise("shmem_" #NAME "_alltoall", hp::shmem::alltoall, team, dest, source, nelems, \
                    sizeof(TYPE));                                                               \
  }                                                                                              \
  int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE* dest, const TYPE* source,                \
                               ptrdiff_t dst, ptrdiff_t sst, size_t nelems) {                    \
    return alltoalls("shmem_" #NAME "_alltoalls", team, dest, source, dst, sst, nelems,          \
                     sizeof(TYPE));                                                              \
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

int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return bytewise("shmem_alltoallmem", hp::shmem::alltoall, team, dest, source, nelems, 1);
}

int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems) {
  return alltoalls("shmem_alltoallsmem", team, dest, source, dst, sst, nelems, 1);
}

#define HP_C_REDUCE(TYPE, NAME, OP, KIND)                                                        \
  int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE* dest, const TYPE* source,            \
                                   size_t nreduce) {                                             \
    return reduce<ReduceOp::KIND>("shmem_" #NAME "_" #OP "_reduce", team, dest, source, nreduce); \
  }
#define HP_C_SUM_REDUCE(TYPE, NAME) HP_C_REDUCE(TYPE, NAME, sum, kSum)
#define HP_C_MINMAX_REDUCE(TYPE, NAME)                                                           \
  HP_C_REDUCE(TYPE, NAME, max, kMax) HP_C_REDUCE(TYPE, NAME, min, kMin)
HP_SHMEM_SUM_REDUCE_TYPES(HP_C_SUM_REDUCE)
HP_SHMEM_MINMAX_REDUCE_TYPES(HP_C_MINMAX_REDUCE)
#undef HP_C_REDUCE
#undef HP_C_SUM_REDUCE
#undef HP_C_MINMAX_REDUCE

}  // extern "C"
