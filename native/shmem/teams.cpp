// Teams: ordered subsets of the world's PEs, each with its own handle, barrier slots and scratch
// words in the ControlArea (barrier[handle][round], scratch[handle][k]).
//
// Handles. Every PE keeps its own table (Context::teams); a handle names the same team on every
// member, and only members hold it (a non-member's entry for that handle may be free or name
// another team whose members are disjoint from this one). team_split_strided picks the handle
// collectively over the parent: each parent member publishes the mask of its free handles in
// its scratch[parent][0], a barrier, everyone ANDs all the parent members' masks and takes the
// lowest set bit, a barrier (before anyone reuses the scratch word). A handle free on every
// parent member is free on every member of the new team; every member computes the same mask,
// so every member gets the same handle, or the same OUT_OF_MEMORY when none is left.
//
// Slots. A handle's barrier slots on PE p are only ever incremented by members of a team with
// that handle that p belongs to. p clears its own slots of a handle
//   - when it destroys the team, after the team's final barrier: p passed it, so every member
//     has already made all its adds to p's slots (one per round per barrier), and none follows;
//   - when it joins a new team with the handle, between the two barriers of the split: the new
//     team's members add to p's slots only after the second barrier, which p reaches after
//     clearing them; the handle was free on p, so no older team still adds to them.
// So a new team's barrier epochs start at 0 on zeroed slots on every member.
//
// A strided split's members are an arithmetic progression of parent PEs, in the order of the
// stride: a negative stride (OpenSHMEM 1.6) starts at the highest and numbers them in reverse.
// Lookups of a world PE bisect the team's by_world index.
#include <algorithm>
#include <bit>
#include <cstdint>

#include <mutex>

#include "shmem/context.h"

namespace hp::shmem {

static_assert(kMaxTeams <= 64, "team handles are agreed through one 64-bit mask of free handles");

// Shared with collectives.cpp: the team `team` of this PE, or INVALID_ARGUMENT naming `what`
// when the handle is out of range, was destroyed, or this PE is not a member.
Status member_team(Context& ctx, Team team, std::string_view what, TeamState** out) {
  HP_ENSURE(team >= 0 && team < kMaxTeams && ctx.teams[team].valid, ErrorCode::kInvalidArgument,
            "{}: team {} is not a team of PE {} (never created, destroyed, kTeamInvalid, or this "
            "PE is not one of its members)",
            what, team, ctx.pe);
  *out = &ctx.teams[team];
  return Status::ok();
}

namespace {

// The team of the calling PE, or null (before init, bad or foreign handle).
const TeamState* find_team(Team team) noexcept {
  const Context* ctx = current();
  if (ctx == nullptr || team < 0 || team >= kMaxTeams || !ctx->teams[team].valid) return nullptr;
  return &ctx->teams[team];
}

std::uint64_t free_handles(const Context& ctx) {
  std::uint64_t mask = 0;
  for (int h = 0; h < kMaxTeams; ++h) {
    if (!ctx.teams[h].valid) mask |= std::uint64_t(1) << h;
  }
  return mask;
}

// Zeroes this PE's own barrier and scratch slots of `handle` (see the file comment for when
// nobody can be adding to them).
void clear_own_slots(Context& ctx, Team handle) {
  ControlArea& mine = ctx.control(ctx.pe);
  for (SyncSlot& slot : mine.barrier[handle]) slot.value.store(0, std::memory_order_relaxed);
  for (SyncSlot& slot : mine.scratch[handle]) slot.value.store(0, std::memory_order_relaxed);
}

Status check_split(const TeamState& parent, int start, int stride, int size, Team* out) {
  const int n = int(parent.members.size());
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "team_split_strided: out is null");
  HP_ENSURE(size >= 1, ErrorCode::kInvalidArgument,
            "team_split_strided: size={} must be at least 1", size);
  HP_ENSURE(stride != 0 || size == 1, ErrorCode::kInvalidArgument,
            "team_split_strided: stride=0 with size={}: only a team of one PE may have stride 0",
            size);
  HP_ENSURE(start >= 0 && start < n, ErrorCode::kInvalidArgument,
            "team_split_strided: start={} is not a PE of the parent team (PEs 0..{})", start,
            n - 1);
  const std::int64_t last = std::int64_t(start) + std::int64_t(size - 1) * stride;
  HP_ENSURE(last >= 0 && last < n, ErrorCode::kInvalidArgument,
            "team_split_strided: start={} stride={} size={} reaches parent PE {}, but the parent "
            "team has PEs 0..{}",
            start, stride, size, last, n - 1);
  return Status::ok();
}

}  // namespace

Status team_split_strided(Team parent, int start, int stride, int size, Team* out) {
  if (out != nullptr) *out = kTeamInvalid;
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("team_split_strided", &ctx));
  std::lock_guard lock(ctx->team_mutex);  // one team change at a time per PE
  TeamState* parent_team = nullptr;
  HP_RETURN_IF_ERROR(member_team(*ctx, parent, "team_split_strided parent", &parent_team));
  HP_RETURN_IF_ERROR(check_split(*parent_team, start, stride, size, out));

  // Publish my free handles; after the barrier every parent member's mask is there.
  auto& my_mask = ctx->control(ctx->pe).scratch[parent][0].value;
  my_mask.store(free_handles(*ctx), std::memory_order_relaxed);
  HP_RETURN_IF_ERROR(barrier_on(*ctx, parent));
  std::uint64_t common = ~std::uint64_t(0);
  for (int pe : parent_team->members) {
    std::uint64_t mask = 0;
    HP_RETURN_IF_ERROR(ctx->load_u64(pe, ctx->segment_offset_of(&my_mask), &mask));
    common &= mask;
  }
  const int handle = common == 0 ? kTeamInvalid : std::countr_zero(common);
  const int my_parent_index = parent_team->my_index;
  // This PE is member k = (index - start) / stride, when that divides and 0 <= k < size.
  const int step = stride == 0 ? 1 : stride;  // size 1: only start itself
  const int from_start = my_parent_index - start;
  const bool joins = from_start % step == 0 && from_start / step >= 0 && from_start / step < size;
  if (handle != kTeamInvalid && joins) clear_own_slots(*ctx, handle);
  // Nobody reuses its mask word (and nobody adds to the new team's slots) before all read.
  HP_RETURN_IF_ERROR(barrier_on(*ctx, parent));
  HP_ENSURE(handle != kTeamInvalid, ErrorCode::kOutOfMemory,
            "team_split_strided: too many teams: all {} team handles are in use on some PE of "
            "parent team {}; destroy some (team_destroy)",
            kMaxTeams, parent);
  if (!joins) return Status::ok();

  TeamState& team = ctx->teams[handle];  // free here, so not the parent's entry
  team = TeamState{};
  team.valid = true;
  team.members.reserve(std::size_t(size));
  for (int k = 0; k < size; ++k)
    team.members.push_back(parent_team->members[std::size_t(start + k * step)]);
  team.my_index = from_start / step;
  team.index_members();
  *out = handle;
  return Status::ok();
}

Status team_destroy(Team team) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("team_destroy", &ctx));
  std::lock_guard lock(ctx->team_mutex);
  HP_ENSURE(team != kTeamWorld && team != kTeamShared, ErrorCode::kInvalidArgument,
            "team_destroy: the world team (kTeamWorld) and the shared team (kTeamShared) cannot be "
            "destroyed");
  TeamState* state = nullptr;
  HP_RETURN_IF_ERROR(member_team(*ctx, team, "team_destroy", &state));
  platform::full_fence();  // quiet: this PE's stores are done
  HP_RETURN_IF_ERROR(barrier_on(*ctx, team));
  clear_own_slots(*ctx, team);
  *state = TeamState{};
  return Status::ok();
}

int team_my_pe(Team team) noexcept {
  const TeamState* state = find_team(team);
  return state ? state->my_index : -1;
}

int team_n_pes(Team team) noexcept {
  const TeamState* state = find_team(team);
  return state ? int(state->members.size()) : -1;
}

int team_translate_pe(Team source, int pe, Team dest) noexcept {
  const TeamState* from = find_team(source);
  const TeamState* to = find_team(dest);
  if (from == nullptr || to == nullptr || pe < 0 || pe >= int(from->members.size())) return -1;
  const int world_pe = from->members[std::size_t(pe)];
  const auto it =
      std::lower_bound(to->by_world.begin(), to->by_world.end(), std::pair<int, int>(world_pe, -1));
  return it != to->by_world.end() && it->first == world_pe ? it->second : -1;
}

Status team_sync(Team team) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("team_sync", &ctx));
  TeamState* state = nullptr;
  HP_RETURN_IF_ERROR(member_team(*ctx, team, "team_sync", &state));
  return barrier_on(*ctx, team);
}

}  // namespace hp::shmem
