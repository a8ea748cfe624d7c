#include "shmem/context.h"

#include <algorithm>
#include <cstring>

#include "platform/cpu_affinity.h"

#include <mutex>

namespace hp::shmem {
namespace {

thread_local Context* t_thread_context = nullptr;

}  // namespace

Context* g_process_context = nullptr;  // shared with init_process.cpp

Context* current() noexcept { return t_thread_context ? t_thread_context : g_process_context; }

void set_thread_context(Context* ctx) noexcept { t_thread_context = ctx; }

Status require_context(std::string_view what, Context** ctx) {
  *ctx = current();
  HP_ENSURE(*ctx != nullptr, ErrorCode::kFailedPrecondition,
            "{} called before hp::shmem::init (or shmem_init)", what);
  return Status::ok();
}

Status Context::check_pe(int target, std::string_view what) const {
  HP_ENSURE(target >= 0 && target < n_pes, ErrorCode::kOutOfRange,
            "{}: PE {} is out of range; this job has PEs 0..{}", what, target, n_pes - 1);
  return Status::ok();
}

Status Context::heap_offset(const void* addr, std::size_t bytes, std::string_view what,
                            std::size_t* offset) const {
  const auto* p = static_cast<const std::byte*>(addr);
  const std::byte* begin = heap_base(pe);
  const std::byte* end = segments[pe] + segment_bytes;
  HP_ENSURE(p >= begin && p <= end && bytes <= std::size_t(end - p), ErrorCode::kNotSymmetric,
            "{}: [{}, +{} bytes) is not inside PE {}'s symmetric heap [{}, {}); use memory "
            "from hp::shmem::malloc (shmem_malloc)",
            what, addr, bytes, pe, static_cast<const void*>(begin), static_cast<const void*>(end));
  *offset = std::size_t(p - begin);
  return Status::ok();
}

platform::WaitWord& Context::bell_of(int pe, Bell bell) const noexcept {
  PeSlot& slot = job->pe(pe);
  return bell == Bell::kData ? slot.doorbell : slot.barrier_bell;
}

void Context::notify(int target, Bell bell) const noexcept {
  platform::notify_event(bell_of(target, bell), job->is_shared());
}

Status Context::read(int target, std::size_t offset, void* out, std::size_t bytes) const {
  if (!mapped(target)) return transport->get(target, offset, out, bytes);
  std::memcpy(out, segments[target] + offset, bytes);
  return Status::ok();
}

Status Context::add_u64(int target, std::size_t offset, std::uint64_t value, Bell bell) const {
  if (atomics_via_transport(target)) {
    return transport->atomic(target, offset, AtomicOp::kAdd, 8, &value, nullptr, nullptr);
  }
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(segments[target] + offset))
      .fetch_add(value, std::memory_order_seq_cst);
  notify(target, bell);
  return Status::ok();
}

Status Context::load_u64(int target, std::size_t offset, std::uint64_t* out) const {
  if (atomics_via_transport(target)) {
    return transport->atomic(target, offset, AtomicOp::kFetch, 8, nullptr, nullptr, out);
  }
  *out =
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(segments[target] + offset))
          .load(std::memory_order_acquire);
  return Status::ok();
}

Status Context::aborted_status() const {
  return Status::error(ErrorCode::kPeerDead, "the job was aborted ({}); PE {} stops waiting",
                       job->abort_message(), pe);
}

Status Context::job_alive() const {
  if (transport != nullptr && !job->aborted()) {
    if (Status failure = transport->failure(); !failure.is_ok()) {
      job->abort(pe, failure.to_string());
    }
  }
  return job->aborted() ? aborted_status() : Status::ok();
}

Status Context::wait_local(const std::function<bool()>& ready,
                           const std::function<std::string()>& describe, WaitKind kind) const {
  HP_RETURN_IF_ERROR(job_alive());
  const auto deadline = platform::deadline_after(timeout_s);
  const platform::WaitPolicy& how = kind == WaitKind::kCollective ? collective_policy : policy;
  auto aborted = [this] { return job->aborted(); };
  platform::WaitResult r = platform::WaitResult::kTimedOut;
  if (transport != nullptr) {
    // Remote writers cannot wake this PE: poll, letting the transport make progress (while
    // other PEs' messages keep arriving, without sleeping: they may wait for its answers).
    r = platform::poll_until(
        [&] {
          const bool worked = transport->progress();
          if (ready()) return platform::PollState::kReady;
          return worked ? platform::PollState::kWorked : platform::PollState::kIdle;
        },
        deadline, how, aborted);
  } else {
    const Bell bell = kind == WaitKind::kCollective ? Bell::kBarrier : Bell::kData;
    r = platform::wait_event(bell_of(pe, bell), ready, deadline, how, aborted);
  }
  switch (r) {
    case platform::WaitResult::kReady:
      return Status::ok();
    case platform::WaitResult::kCancelled:
      return aborted_status();
    case platform::WaitResult::kTimedOut:
      break;
  }
  Status timeout =
      Status::error(ErrorCode::kTimeout,
                    "{} on PE {} timed out after {} s (HP_SHMEM_TIMEOUT_S sets the deadline)",
                    describe(), pe, timeout_s);
  // The PEs are out of step for good: the job is over, and the other PEs' waits end now
  // (PEER_DEAD naming this one) instead of each at its own deadline. Not from finalize: a PE
  // that is done only waits there for the others, whose own errors say why they did not come.
  if (!finalizing) job->abort(pe, timeout.to_string());
  return timeout;
}

void TeamState::index_members() {
  by_world.clear();
  for (int i = 0; i < int(members.size()); ++i) by_world.emplace_back(members[std::size_t(i)], i);
  std::sort(by_world.begin(), by_world.end());
}

void Context::init_world_team() {
  teams.assign(kMaxTeams, TeamState{});
  TeamState& world = teams[kTeamWorld];
  world.valid = true;
  world.my_index = pe;
  for (int i = 0; i < n_pes; ++i) world.members.push_back(i);
  world.index_members();
}

void Context::init_shared_team() {
  TeamState& shared = teams[kTeamShared];
  shared = TeamState{.valid = true};
  for (int p = 0; p < n_pes; ++p) {
    if (segments[std::size_t(p)] == nullptr) continue;
    if (p == pe) shared.my_index = int(shared.members.size());
    shared.members.push_back(p);
  }
  shared.index_members();
}

// The wait policies of a PE (see Context::policy): when this host's PEs outnumber the CPUs,
// point-to-point waits spin only briefly and collective waits not at all.
void set_wait_policies(Context& ctx, const Settings& env, int local_pes, bool shared) {
  constexpr std::int64_t kCrowdedSpin = 64;
  std::vector<int> cpus;
  const bool crowded = !platform::allowed_cpus(&cpus).is_ok() || local_pes > int(cpus.size());
  const auto yield_for = std::chrono::microseconds(env.yield_before_sleep_us);
  ctx.policy = platform::WaitPolicy{
      .spin = crowded ? std::min(env.spin_before_block, kCrowdedSpin) : env.spin_before_block,
      .yield_for = yield_for,
      .process_shared = shared};
  ctx.collective_policy = platform::WaitPolicy{.spin = crowded ? 0 : env.spin_before_block,
                                               .yield_for = yield_for,
                                               .process_shared = shared};
}

Status finalize_context(Context& ctx) {
  Status status;
  if (ctx.job_alive().is_ok()) {
    platform::full_fence();
    ctx.finalizing = true;
    // What this PE issued completes first, as in barrier_all (OpenSHMEM's finalize has an
    // implicit one): a put_signal message its target had not applied when it left its last
    // barrier would go with the target's communicator.
    if (ctx.transport != nullptr) status = ctx.transport->quiet();
    if (status.is_ok()) status = barrier_on(ctx, kTeamWorld);
  }
  // A failed job's PEs may never make the transport's collective calls.
  if ((ctx.job->aborted() || !status.is_ok()) && ctx.transport != nullptr) {
    ctx.transport->abandon();
  }
  ctx.job->pe(ctx.pe).state.store(std::uint32_t(PeState::kFinalized), std::memory_order_release);
  return status;
}

}  // namespace hp::shmem
