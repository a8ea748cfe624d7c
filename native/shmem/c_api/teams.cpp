// Teams of OpenSHMEM 1.5. These routines return an int: 0, or non-zero after printing why
// (c_api::report), except shmem_team_destroy, which has no status to return and ends the
// process on failure. (The collectives on teams are in collectives.cpp and reductions.cpp.)
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::invalid_team;
using c_api::report;
using c_api::to_handle;
using c_api::to_team;
using hp::ErrorCode;
using hp::Status;
using hp::shmem::Team;

namespace {

// Destroys the teams this PE got from a split that failed part of the way (see split_2d).
void destroy_all(const std::vector<Team>& teams) {
  for (Team team : teams) {
    if (team != hp::shmem::kTeamInvalid) (void)hp::shmem::team_destroy(team);
  }
}

// The configuration each team was made with (the members given by config_mask; the others
// default), as shmem_team_get_config returns it. A team without an entry has the defaults.
std::mutex g_configs_mutex;
std::map<Team, shmem_team_config_t> g_configs;

void remember_config(Team team, const shmem_team_config_t* config, long config_mask) {
  if (team == hp::shmem::kTeamInvalid) return;
  shmem_team_config_t stored{};
  if (config != nullptr && (config_mask & SHMEM_TEAM_NUM_CONTEXTS) != 0) stored = *config;
  const std::lock_guard lock(g_configs_mutex);
  g_configs[team] = stored;
}

void forget_config(Team team) {
  const std::lock_guard lock(g_configs_mutex);
  g_configs.erase(team);
}

// The team routines that OpenSHMEM lets be called with SHMEM_TEAM_INVALID (a PE outside a
// split holds it) return non-zero and print nothing; another handle that is no team of this
// PE is an error they report.
int not_a_team(const char* routine, shmem_team_t team, const char* which) {
  if (team == SHMEM_TEAM_INVALID) return 1;
  return report(routine, invalid_team(routine, which));
}

}  // namespace

namespace hp::shmem::c_api {

void forget_team_configs() {
  const std::lock_guard lock(g_configs_mutex);
  g_configs.clear();
}

}  // namespace hp::shmem::c_api

extern "C" {

int shmem_team_my_pe(shmem_team_t team) { return hp::shmem::team_my_pe(to_team(team)); }

int shmem_team_n_pes(shmem_team_t team) { return hp::shmem::team_n_pes(to_team(team)); }

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config) {
  const char* routine = "shmem_team_get_config";
  const Team t = to_team(team);
  if (hp::shmem::team_n_pes(t) < 0) return not_a_team(routine, team, "team");
  if (config == nullptr || (config_mask & SHMEM_TEAM_NUM_CONTEXTS) == 0) return 0;
  const std::lock_guard lock(g_configs_mutex);
  const auto it = g_configs.find(t);
  config->num_contexts = it == g_configs.end() ? 0 : it->second.num_contexts;
  return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  return hp::shmem::team_translate_pe(to_team(src_team), src_pe, to_team(dest_team));
}

// config (its num_contexts, when config_mask has SHMEM_TEAM_NUM_CONTEXTS) is kept for
// shmem_team_get_config; a context needs no reservation here (contexts.cpp).
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team) {
  const char* routine = "shmem_team_split_strided";
  if (new_team == nullptr) {
    return report(routine, Status(ErrorCode::kInvalidArgument, "new_team is NULL"));
  }
  *new_team = SHMEM_TEAM_INVALID;
  if (parent_team == SHMEM_TEAM_INVALID) return 1;  // no team is made (OpenSHMEM)
  Team team = hp::shmem::kTeamInvalid;
  const Status s = hp::shmem::team_split_strided(to_team(parent_team), start, stride, size, &team);
  if (s.is_ok()) remember_config(team, config, config_mask);
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
  const char* routine = "shmem_team_split_2d";
  if (xaxis_team == nullptr || yaxis_team == nullptr) {
    return report(routine, Status(ErrorCode::kInvalidArgument, "xaxis_team or yaxis_team is NULL"));
  }
  *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
  const Team parent = to_team(parent_team);
  const int n = hp::shmem::team_n_pes(parent);
  if (n < 0) return not_a_team(routine, parent_team, "parent_team");
  if (xrange <= 0) {
    return report(routine,
                  Status::error(ErrorCode::kInvalidArgument, "xrange {} is not positive", xrange));
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
  remember_config(x_team, xaxis_config, xaxis_mask);
  remember_config(y_team, yaxis_config, yaxis_mask);
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
  forget_config(to_team(team));
}

int shmem_team_sync(shmem_team_t team) {
  return report("shmem_team_sync", hp::shmem::team_sync(to_team(team)));
}

}  // extern "C"
