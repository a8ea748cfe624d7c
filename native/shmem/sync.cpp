// Barriers: a dissemination barrier per team over the ControlArea's per-round slots (the
// world's goes through the transport when some PE is remote, see below).
//
// In round k (distance 2^k) each member adds 1 to the round-k slot of the member 2^k after it
// and waits until its own round-k slot reaches the number of barriers it has entered on this
// team. Only one member ever adds to a given slot of a given PE (the one 2^k before it), so a
// slot counts that member's arrivals and never needs resetting: an early arrival for the next
// barrier only raises the count ahead of time. The adds are seq_cst read-modify-writes and the
// waits acquire, so everything a PE did before the barrier is visible after it everywhere.
#include <fmt/format.h>

#include "shmem/context.h"

namespace hp::shmem {

namespace {

// Whether the world's barriers go through the transport: when some PE is reachable only
// through it (then each PE has one: a PE cannot map another on a host it does not share).
// Over a network every dissemination round is an atomic that waits on the target's progress;
// the transport's own barrier is one message per round.
bool world_barrier_via_transport(const Context& ctx) {
  if (ctx.transport == nullptr) return false;
  for (int p = 0; p < ctx.n_pes; ++p) {
    if (!ctx.mapped(p)) return true;
  }
  return false;
}

Status transport_barrier(Context& ctx) {
  HP_RETURN_IF_ERROR(ctx.transport->start_barrier());
  Status status;
  HP_RETURN_IF_ERROR(ctx.wait_local(
      [&] {
        bool done = false;
        status = ctx.transport->barrier_done(&done);
        return done || !status.is_ok();
      },
      [&] { return fmt::format("barrier of every PE ({} barrier)", ctx.transport->name()); },
      Context::WaitKind::kCollective));
  return status;
}

}  // namespace

Status barrier_on(Context& ctx, int team_handle) {
  if (team_handle == kTeamWorld && world_barrier_via_transport(ctx)) return transport_barrier(ctx);
  TeamState& team = ctx.teams[team_handle];
  const int n = int(team.members.size());
  const int me = team.my_index;
  const std::uint64_t epoch = ++team.barrier_epoch;
  for (int round = 0, distance = 1; distance < n; ++round, distance <<= 1) {
    const int to = team.members[(me + distance) % n];
    const int from = team.members[(me - distance % n + n) % n];
    auto& mine = ctx.control(ctx.pe).barrier[team_handle][round].value;
    HP_RETURN_IF_ERROR(ctx.add_u64(to, ctx.segment_offset_of(&mine), 1, Context::Bell::kBarrier));
    HP_RETURN_IF_ERROR(ctx.wait_local(
        [&] { return mine.load(std::memory_order_acquire) >= epoch; },
        [&] {
          return fmt::format("barrier (team {}, round {} of epoch {}) waiting for PE {}",
                             team_handle, round, epoch, from);
        },
        Context::WaitKind::kCollective));
  }
  return Status::ok();
}

Status sync_all() {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("sync_all", &ctx));
  return barrier_on(*ctx, kTeamWorld);
}

Status barrier_all() {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("barrier_all", &ctx));
  HP_RETURN_IF_ERROR(quiet());
  return barrier_on(*ctx, kTeamWorld);
}

}  // namespace hp::shmem
