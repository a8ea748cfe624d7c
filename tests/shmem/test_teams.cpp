// Teams: strided splits (even/odd PEs, contiguous halves, nested), their queries on every PE,
// barriers on sub-teams interleaved with world barriers, handle reuse across many create/destroy
// cycles, and errors. As a threads job of 2 and 4 PEs, and under hprun -n 2 / -n 4 (shm).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "scenario.h"

namespace hp::shmem {
namespace {

using testing::run_scenario;
using testing::strided;

int index_of(const std::vector<int>& pes, int pe) {
  for (std::size_t i = 0; i < pes.size(); ++i) {
    if (pes[i] == pe) return int(i);
  }
  return -1;
}

// Checks every query of `team` on this PE against `members` (world PEs, in team order).
void expect_team(Team team, const std::vector<int>& members, const char* name) {
  SCOPED_TRACE(::testing::Message() << name << " (team " << team << ") on PE " << my_pe());
  const int me = my_pe(), n = n_pes();
  const int mine = index_of(members, me);
  if (mine < 0) {
    EXPECT_EQ(team, kTeamInvalid);
    EXPECT_EQ(team_my_pe(team), -1);
    EXPECT_EQ(team_n_pes(team), -1);
    EXPECT_EQ(team_translate_pe(kTeamWorld, me, team), -1);
    EXPECT_EQ(team_translate_pe(team, 0, kTeamWorld), -1);
    EXPECT_EQ(team_sync(team).code(), ErrorCode::kInvalidArgument);
    return;
  }
  EXPECT_NE(team, kTeamInvalid);
  EXPECT_NE(team, kTeamWorld);
  EXPECT_EQ(team_my_pe(team), mine);
  EXPECT_EQ(team_n_pes(team), int(members.size()));
  for (int pe = 0; pe < n; ++pe)
    EXPECT_EQ(team_translate_pe(kTeamWorld, pe, team), index_of(members, pe)) << pe;
  for (int i = 0; i < int(members.size()); ++i) {
    EXPECT_EQ(team_translate_pe(team, i, kTeamWorld), members[i]) << i;
    EXPECT_EQ(team_translate_pe(team, i, team), i);
  }
  EXPECT_EQ(team_translate_pe(team, -1, kTeamWorld), -1);
  EXPECT_EQ(team_translate_pe(team, int(members.size()), kTeamWorld), -1);
  EXPECT_EQ(team_translate_pe(kTeamWorld, n, team), -1);
}

// Splits `parent` and checks the result against the expected world PEs.
Status split_and_check(Team parent, int start, int stride, int size,
                       const std::vector<int>& members, const char* name, Team* out) {
  HP_EXPECT_OK(team_split_strided(parent, start, stride, size, out));
  expect_team(*out, members, name);
  return Status::ok();
}

Status destroy_if_member(Team team) {
  return team == kTeamInvalid ? Status::ok() : team_destroy(team);
}

TEST(ShmemTeams, WorldTeam) {
  run_scenario([] {
    EXPECT_EQ(team_my_pe(kTeamWorld), my_pe());
    EXPECT_EQ(team_n_pes(kTeamWorld), n_pes());
    for (int pe = 0; pe < n_pes(); ++pe)
      EXPECT_EQ(team_translate_pe(kTeamWorld, pe, kTeamWorld), pe);
    EXPECT_EQ(team_my_pe(kTeamInvalid), -1);
    EXPECT_EQ(team_n_pes(kTeamInvalid), -1);
    EXPECT_EQ(team_n_pes(12345), -1);
    EXPECT_EQ(team_translate_pe(kTeamInvalid, 0, kTeamWorld), -1);
    EXPECT_EQ(team_translate_pe(kTeamWorld, 0, kTeamInvalid), -1);
    return team_sync(kTeamWorld);
  });
}

// kTeamShared: exactly the PEs whose heaps ptr() reaches, in world order; predefined (not
// destroyable), and its barrier works.
TEST(ShmemTeams, SharedTeamIsTheMappedPes) {
  run_scenario([] {
    void* block = nullptr;
    HP_RETURN_IF_ERROR(malloc(64, &block));
    std::vector<int> mapped;
    for (int pe = 0; pe < n_pes(); ++pe) {
      if (ptr(block, pe) != nullptr) mapped.push_back(pe);
    }
    EXPECT_NE(index_of(mapped, my_pe()), -1);
    EXPECT_EQ(team_n_pes(kTeamShared), int(mapped.size()));
    EXPECT_EQ(team_my_pe(kTeamShared), index_of(mapped, my_pe()));
    for (int pe = 0; pe < n_pes(); ++pe)
      EXPECT_EQ(team_translate_pe(kTeamWorld, pe, kTeamShared), index_of(mapped, pe)) << pe;
    for (int i = 0; i < int(mapped.size()); ++i)
      EXPECT_EQ(team_translate_pe(kTeamShared, i, kTeamWorld), mapped[i]) << i;
    Status destroy = team_destroy(kTeamShared);
    EXPECT_EQ(destroy.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(destroy.message().find("shared"), std::string::npos) << destroy.message();
    HP_RETURN_IF_ERROR(team_sync(kTeamShared));
    HP_RETURN_IF_ERROR(barrier_all());
    return free(block);
  });
}

// A negative stride starts at the highest PE and numbers the members in reverse; a team of one
// PE may have any stride.
TEST(ShmemTeams, NegativeStrideReverses) {
  run_scenario([] {
    const int n = n_pes();
    std::vector<int> reversed, odd_down;
    for (int pe = n - 1; pe >= 0; --pe) reversed.push_back(pe);
    for (int pe = n - 1 - (n % 2 == 0 ? 0 : 1); pe >= 1; pe -= 2) odd_down.push_back(pe);
    Team all = kTeamInvalid, odds = kTeamInvalid, one = kTeamInvalid;
    HP_EXPECT_OK(split_and_check(kTeamWorld, n - 1, -1, n, reversed, "reversed", &all));
    if (!odd_down.empty()) {
      HP_EXPECT_OK(split_and_check(kTeamWorld, odd_down.front(), -2, int(odd_down.size()), odd_down,
                                   "odd PEs downwards", &odds));
    }
    HP_EXPECT_OK(split_and_check(kTeamWorld, n - 1, 0, 1, {n - 1}, "the last PE", &one));
    if (all != kTeamInvalid) {
      HP_RETURN_IF_ERROR(team_sync(all));
      HP_RETURN_IF_ERROR(team_destroy(all));
    }
    if (odds != kTeamInvalid) HP_RETURN_IF_ERROR(team_destroy(odds));
    if (one != kTeamInvalid) HP_RETURN_IF_ERROR(team_destroy(one));
    return barrier_all();
  });
}

TEST(ShmemTeams, EvenAndOddPes) {
  run_scenario([] {
    const int n = n_pes();
    Team evens = kTeamInvalid, odds = kTeamInvalid;
    HP_EXPECT_OK(split_and_check(kTeamWorld, 0, 2, (n + 1) / 2, strided(0, 2, (n + 1) / 2), "evens",
                                 &evens));
    HP_EXPECT_OK(split_and_check(kTeamWorld, 1, 2, n / 2, strided(1, 2, n / 2), "odds", &odds));
    // Back to the world from whichever team this PE is in.
    if (evens != kTeamInvalid) {
      EXPECT_EQ(team_translate_pe(evens, team_my_pe(evens), kTeamWorld), my_pe());
    }
    if (odds != kTeamInvalid) {
      EXPECT_EQ(team_translate_pe(odds, team_my_pe(odds), kTeamWorld), my_pe());
    }
    HP_EXPECT_OK(destroy_if_member(evens));
    HP_EXPECT_OK(destroy_if_member(odds));
    EXPECT_EQ(team_n_pes(evens), -1);  // destroyed
    return Status::ok();
  });
}

TEST(ShmemTeams, ContiguousHalves) {
  run_scenario([] {
    const int n = n_pes(), half = n / 2;
    Team low = kTeamInvalid, high = kTeamInvalid;
    HP_EXPECT_OK(split_and_check(kTeamWorld, 0, 1, half, strided(0, 1, half), "low half", &low));
    HP_EXPECT_OK(split_and_check(kTeamWorld, half, 1, n - half, strided(half, 1, n - half),
                                 "high half", &high));
    // A team of the whole world is a team of its own (not kTeamWorld).
    Team all = kTeamInvalid;
    HP_EXPECT_OK(split_and_check(kTeamWorld, 0, 1, n, strided(0, 1, n), "all", &all));
    // Between two teams of this PE: the high half's PE 0 is PE `half` of `all`.
    if (high != kTeamInvalid) {
      EXPECT_EQ(team_translate_pe(high, 0, all), half);
    }
    HP_EXPECT_OK(team_destroy(all));
    HP_EXPECT_OK(destroy_if_member(low));
    HP_EXPECT_OK(destroy_if_member(high));
    return Status::ok();
  });
}

// A split of a split: the odd PEs of a team that holds every world PE, then the last PE of the
// evens, then the first PE of that one-PE team.
TEST(ShmemTeams, NestedSplits) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    Team all = kTeamInvalid, odds = kTeamInvalid, evens = kTeamInvalid;
    HP_EXPECT_OK(split_and_check(kTeamWorld, 0, 1, n, strided(0, 1, n), "all", &all));
    HP_EXPECT_OK(split_and_check(all, 1, 2, n / 2, strided(1, 2, n / 2), "odds of all", &odds));
    HP_EXPECT_OK(split_and_check(kTeamWorld, 0, 2, (n + 1) / 2, strided(0, 2, (n + 1) / 2), "evens",
                                 &evens));
    if (evens != kTeamInvalid) {
      const int ne = team_n_pes(evens);
      Team last = kTeamInvalid, inner = kTeamInvalid;
      HP_EXPECT_OK(split_and_check(evens, ne - 1, 1, 1, {2 * (ne - 1)}, "last even", &last));
      if (last != kTeamInvalid) {
        EXPECT_EQ(team_translate_pe(last, 0, evens), ne - 1);
        HP_EXPECT_OK(split_and_check(last, 0, 5, 1, {me}, "inside last even", &inner));
        HP_EXPECT_OK(team_sync(inner));
        HP_EXPECT_OK(team_destroy(inner));
        HP_EXPECT_OK(team_destroy(last));
      }
      // Every other even PE (stride 2 inside evens = world stride 4).
      Team fours = kTeamInvalid;
      HP_EXPECT_OK(split_and_check(evens, 0, 2, (ne + 1) / 2, strided(0, 4, (ne + 1) / 2),
                                   "stride 4", &fours));
      HP_EXPECT_OK(destroy_if_member(fours));
      HP_EXPECT_OK(team_destroy(evens));
    }
    HP_EXPECT_OK(destroy_if_member(odds));
    HP_EXPECT_OK(team_destroy(all));
    return Status::ok();
  });
}

// Barriers on `mine` (the team of this PE among disjoint teams that run at the same time)
// separate rounds: each member adds to another member's counter, syncs, checks its own counter;
// interleaved with world barriers. Collective over the world (every PE is in one such team).
Status check_barriers(Team mine, int rounds) {
  const int me = my_pe();
  void* raw = nullptr;
  HP_EXPECT_OK(calloc(1, sizeof(std::int64_t), &raw));
  auto* counter = static_cast<std::int64_t*>(raw);
  const int size = team_n_pes(mine), index = team_my_pe(mine);
  EXPECT_GE(index, 0);
  for (int i = 1; i <= rounds; ++i) {
    const int next = team_translate_pe(mine, (index + i) % size, kTeamWorld);
    HP_EXPECT_OK(atomic_add(counter, std::int64_t(1), next));
    HP_EXPECT_OK(team_sync(mine));
    std::int64_t v = 0;
    HP_EXPECT_OK(atomic_fetch(counter, me, &v));
    EXPECT_EQ(v, i) << "after team_sync " << i << " on team " << mine;
    if (v != i) return Status::error(ErrorCode::kInternal, "team_sync {} did not separate", i);
    HP_EXPECT_OK(team_sync(mine));  // nobody adds for round i + 1 before everyone checked
    if (i % 7 == 0) HP_EXPECT_OK(barrier_all());
  }
  return free(raw);
}

TEST(ShmemTeams, SubTeamBarriersManyTimes) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    Team evens = kTeamInvalid, odds = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 2, (n + 1) / 2, &evens));
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 1, 2, n / 2, &odds));
    const Team mine = me % 2 == 0 ? evens : odds;
    HP_EXPECT_OK(check_barriers(mine, 200));
    // Teams of teams: the evens and the odds each split themselves at the same time. The new
    // teams' handles are chosen among their own members only, so the two may share a handle
    // (free on the evens, held by the odds' team and vice versa): their slots must not mix.
    Team inner = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(mine, 0, 1, team_n_pes(mine), &inner));
    HP_EXPECT_OK(check_barriers(inner, 100));
    HP_EXPECT_OK(check_barriers(kTeamWorld, 20));
    HP_EXPECT_OK(team_destroy(inner));
    HP_EXPECT_OK(destroy_if_member(evens));
    HP_EXPECT_OK(destroy_if_member(odds));
    return Status::ok();
  });
}

// Creates teams of the whole world until the handles run out: OUT_OF_MEMORY on every PE.
Status fill_handles(std::vector<Team>* live) {
  for (;;) {
    Team t = kTeamInvalid;
    Status s = team_split_strided(kTeamWorld, 0, 1, n_pes(), &t);
    if (s.code() == ErrorCode::kOutOfMemory) {
      EXPECT_EQ(t, kTeamInvalid);
      EXPECT_NE(s.message().find("too many teams"), std::string::npos) << s.message();
      return Status::ok();
    }
    HP_EXPECT_OK(s);
    live->push_back(t);
    if (live->size() > 4096) {
      return Status::error(ErrorCode::kInternal, "team handles never run out");
    }
  }
}

TEST(ShmemTeams, HandlesAreReusedAndRunOutCleanly) {
  run_scenario([] {
    const int n = n_pes();
    std::vector<Team> live;
    HP_EXPECT_OK(fill_handles(&live));
    const std::size_t capacity = live.size();
    EXPECT_GE(capacity, 16u);
    for (Team t : live) HP_EXPECT_OK(team_sync(t));
    for (Team t : live) HP_EXPECT_OK(team_destroy(t));
    // Many more create/destroy cycles than there are handles, in several shapes.
    for (int i = 0; i < int(3 * capacity); ++i) {
      Team t = kTeamInvalid;
      const int stride = 1 + i % 2, size = i % 2 ? (n + 1) / 2 : n;
      HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, stride, size, &t));
      if (t != kTeamInvalid) {
        HP_EXPECT_OK(team_sync(t));
        HP_EXPECT_OK(team_sync(t));
        HP_EXPECT_OK(team_destroy(t));
      }
    }
    live.clear();
    HP_EXPECT_OK(fill_handles(&live));
    EXPECT_EQ(live.size(), capacity) << "team handles leaked";
    for (Team t : live) HP_EXPECT_OK(team_destroy(t));
    return barrier_all();
  });
}

// A re-created team reuses a handle whose barrier slots counted an old team's barriers: the new
// team's barriers must still wait for every member.
TEST(ShmemTeams, RecreatedTeamBarriersStartFresh) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    void* raw = nullptr;
    HP_EXPECT_OK(calloc(1, sizeof(std::int64_t), &raw));
    auto* counter = static_cast<std::int64_t*>(raw);
    std::int64_t expected = 0;
    for (int cycle = 0; cycle < 10; ++cycle) {
      Team t = kTeamInvalid;
      HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 1, n, &t));
      for (int i = 0; i < cycle * 5; ++i) HP_EXPECT_OK(team_sync(t));  // different epochs per cycle
      // The last PE adds late; the others must not pass the barrier before it did.
      if (me == n - 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (int pe = 0; pe < n; ++pe) HP_EXPECT_OK(atomic_add(counter, std::int64_t(1), pe));
      }
      HP_EXPECT_OK(team_sync(t));
      ++expected;
      std::int64_t v = 0;
      HP_EXPECT_OK(atomic_fetch(counter, me, &v));
      EXPECT_EQ(v, expected) << "cycle " << cycle;
      HP_EXPECT_OK(team_destroy(t));
    }
    return free(raw);
  });
}

TEST(ShmemTeams, ErrorsAreNamed) {
  run_scenario([] {
    const int n = n_pes();
    Team t = 7;
    auto code = [&](int start, int stride, int size) {
      t = 7;
      Status s = team_split_strided(kTeamWorld, start, stride, size, &t);
      EXPECT_EQ(t, kTeamInvalid);
      return s.code();
    };
    EXPECT_EQ(code(-1, 1, 1), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code(n, 1, 1), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code(0, 0, 2), ErrorCode::kInvalidArgument);   // stride 0: one PE only
    EXPECT_EQ(code(0, -1, 2), ErrorCode::kInvalidArgument);  // reaches parent PE -1
    EXPECT_EQ(code(0, 1, 0), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code(0, 1, n + 1), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code(1, 1, n), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code(0, 2, n), ErrorCode::kInvalidArgument);            // reaches parent PE 2n-2
    EXPECT_EQ(code(n - 1, 1 << 30, 3), ErrorCode::kInvalidArgument);  // no int overflow
    Status s = team_split_strided(kTeamWorld, 0, 3, n, &t);
    EXPECT_NE(s.message().find("stride=3"), std::string::npos) << s.message();
    EXPECT_EQ(team_split_strided(kTeamWorld, 0, 1, 1, nullptr).code(), ErrorCode::kInvalidArgument);
    for (Team bad : {kTeamInvalid, 64, 1000}) {
      EXPECT_EQ(team_split_strided(bad, 0, 1, 1, &t).code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_EQ(team_destroy(bad).code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_EQ(team_sync(bad).code(), ErrorCode::kInvalidArgument) << bad;
    }
    Status world = team_destroy(kTeamWorld);
    EXPECT_EQ(world.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(world.message().find("world"), std::string::npos) << world.message();
    // A destroyed handle, and a handle of a team this PE is not in.
    Team gone = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 1, n, &gone));
    HP_EXPECT_OK(team_destroy(gone));
    EXPECT_EQ(team_destroy(gone).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(team_sync(gone).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(team_split_strided(gone, 0, 1, 1, &t).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(team_my_pe(gone), -1);
    // A live handle of a team this PE is not in: PE 0 alone holds `first`, and tells the others.
    Team first = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 1, 1, &first));
    void* raw = nullptr;
    HP_EXPECT_OK(calloc(1, sizeof(int), &raw));
    auto* handle = static_cast<int*>(raw);
    if (my_pe() == 0) {
      EXPECT_NE(first, kTeamInvalid);
      for (int pe = 1; pe < n; ++pe) HP_EXPECT_OK(p(handle, int(first), pe));
    }
    HP_EXPECT_OK(barrier_all());
    if (my_pe() != 0) {
      EXPECT_EQ(first, kTeamInvalid);
      const Team foreign = *handle;
      EXPECT_GT(foreign, kTeamWorld);
      EXPECT_EQ(team_sync(foreign).code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(team_destroy(foreign).code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(team_split_strided(foreign, 0, 1, 1, &t).code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(team_my_pe(foreign), -1);
    }
    HP_EXPECT_OK(destroy_if_member(first));
    HP_EXPECT_OK(free(raw));
    return barrier_all();
  });
}

}  // namespace
}  // namespace hp::shmem

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
