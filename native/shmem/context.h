// The state of one PE, and the helpers every routine shares (internal header).
//
// Segment layout (every PE's segment is the same size; offsets are symmetric):
//
//   [0, kControlBytes)                 ControlArea: the library's own synchronization words
//   [kControlBytes, segment_bytes)     the user heap, managed by HeapAllocator
//
// Every PE's segment is zero when it becomes kReady (fresh shared memory or mmap), and the
// PEs pass a barrier before the first remote write: the protocol rule "initialise your slots,
// then barrier, then write remotely" holds by construction.
#ifndef HYPER_PARALLEL_SHMEM_CONTEXT_H_
#define HYPER_PARALLEL_SHMEM_CONTEXT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "common/status.h"
#include "platform/wait.h"
#include "shmem/heap_allocator.h"
#include "shmem/job.h"
#include "shmem/shmem.h"
#include "shmem/transport.h"

namespace hp::shmem {

inline constexpr int kMaxTeams = 64;   // teams at once on a PE, the predefined ones included
inline constexpr int kMaxRounds = 13;  // dissemination rounds: ceil(log2(kMaxPes)) + 1

// A 64-bit synchronization word alone on its cache line (signal slots are >= 64 bytes apart).
struct alignas(64) SyncSlot {
  std::atomic<std::uint64_t> value{0};
};

struct ControlArea {
  SyncSlot barrier[kMaxTeams][kMaxRounds];  // dissemination barrier: arrivals per round
  SyncSlot scratch[kMaxTeams][4];           // small values exchanged by team operations
};
inline constexpr std::size_t kControlBytes = 128 << 10;
static_assert(sizeof(ControlArea) <= kControlBytes);

// A team: its members as world PEs, in team order, and this PE's place in it.
struct TeamState {
  bool valid = false;
  std::vector<int> members;         // team PE index -> world PE
  int my_index = -1;                // -1: this PE is not a member
  std::uint64_t barrier_epoch = 0;  // barriers this PE completed on this team
  // (world PE, team PE index) for every member, sorted by world PE: what team_translate_pe
  // bisects (members is in team order, which a negative stride reverses).
  std::vector<std::pair<int, int>> by_world;
  void index_members();  // fills by_world from members
};

struct Context {
  int pe = -1;
  int n_pes = 0;
  std::string transport_kind;             // of the mapped PEs: "threads", "shm", "self", "mpi"
  JobSegment* job = nullptr;              // the job's control segment
  std::unique_ptr<JobSegment> owned_job;  // set when this context owns it (process jobs)
  std::vector<std::byte*> segments;       // each PE's segment in this address space
  std::vector<std::size_t> mapped_bytes;  // per PE: bytes to munmap at finalize (0: not ours)
  std::size_t segment_bytes = 0;          // kControlBytes + heap bytes
  std::unique_ptr<HeapAllocator> allocator;
  double timeout_s = 120;
  // Point-to-point waits (wait_until, signals) and collective ones (barriers): when the host's
  // PEs outnumber its CPUs, a waiter's partner in a point-to-point exchange is usually running
  // (a short spin catches its answer), while a barrier always waits for some PE that is not
  // (spinning only delays it). See bench/shmem for the measurements behind the choice.
  platform::WaitPolicy policy;
  platform::WaitPolicy collective_policy;
  int init_count = 0;       // init() calls not yet matched by finalize()
  bool finalizing = false;  // in finalize's barrier: its TIMEOUT does not abort (wait_local)
  std::unique_ptr<RemoteTransport> transport;  // for unmapped PEs (MPI); null: all mapped
  std::vector<TeamState> teams;                // index = Team handle; [0] = world
  std::mutex team_mutex;  // team creation/destruction by several threads of a PE

  std::byte* heap_base(int target) const noexcept { return segments[target] + kControlBytes; }
  std::size_t heap_bytes() const noexcept { return segment_bytes - kControlBytes; }
  ControlArea& control(int target) const noexcept {
    return *reinterpret_cast<ControlArea*>(segments[target]);
  }

  // OUT_OF_RANGE unless 0 <= target < n_pes.
  Status check_pe(int target, std::string_view what) const;
  // The heap offset of [addr, addr + bytes) in this PE's heap, or NOT_SYMMETRIC.
  Status heap_offset(const void* addr, std::size_t bytes, std::string_view what,
                     std::size_t* offset) const;
  // The address of heap offset `offset` on `target` (mapped PEs only).
  std::byte* remote(int target, std::size_t offset) const noexcept {
    return heap_base(target) + offset;
  }
  bool mapped(int target) const noexcept { return segments[target] != nullptr; }
  // Atomics on `target` go through the transport (it owns atomicity, see transport.h).
  bool atomics_via_transport(int target) const noexcept {
    return !mapped(target) || (transport != nullptr && transport->owns_atomics());
  }
  // The segment offset of a word of this PE's segment (ControlArea or heap).
  std::size_t segment_offset_of(const void* local) const noexcept {
    return std::size_t(static_cast<const std::byte*>(local) - segments[pe]);
  }

  // Reads `bytes` at segment offset `offset` of `target` (a copy, or a get).
  Status read(int target, std::size_t offset, void* out, std::size_t bytes) const;
  // Which of a PE's eventcounts a change rings (job.h): its doorbell for its symmetric memory,
  // its barrier bell for its barrier slots.
  enum class Bell { kData, kBarrier };
  // A 64-bit atomic add on `target`'s word at segment offset `offset`, then a notify of `bell`;
  // through the transport, complete at the next quiet (it arrives without one).
  Status add_u64(int target, std::size_t offset, std::uint64_t value, Bell bell) const;
  // An atomic 64-bit load of `target`'s word at segment offset `offset`.
  Status load_u64(int target, std::size_t offset, std::uint64_t* out) const;

  // `pe`'s eventcount `bell` in the job segment.
  platform::WaitWord& bell_of(int pe, Bell bell) const noexcept;
  // After changing `target`'s memory: wakes it if it sleeps in a wait on `bell` (job.h).
  void notify(int target, Bell bell = Bell::kData) const noexcept;
  // Waits until ready() on this PE's memory, with the job's deadline and abort. `describe`
  // names what is waited on for the TIMEOUT message ("signal_wait_until(heap+0x40, GE 5)");
  // a TIMEOUT aborts the job with that message, but in finalize. A collective wait is a
  // barrier's: its own wait policy, and it sleeps on the barrier bell.
  enum class WaitKind { kPointToPoint, kCollective };
  Status wait_local(const std::function<bool()>& ready,
                    const std::function<std::string()>& describe,
                    WaitKind kind = WaitKind::kPointToPoint) const;
  // PEER_DEAD with the job's abort message.
  Status aborted_status() const;
  // OK while the job runs, aborted_status() once it was aborted. A transport that lost a PE or
  // a deadline (its failure()) aborts the job here first: the PEs cannot synchronize again.
  Status job_alive() const;
  // teams[kTeamWorld]: every PE in order.
  void init_world_team();
  // kTeamShared: the PEs whose segments are mapped (segments[p] set); after the mapping.
  void init_shared_team();
};

// Sets ctx.policy and ctx.collective_policy for `local_pes` PEs sharing this host's CPUs.
void set_wait_policies(Context& ctx, const Settings& env, int local_pes, bool shared);

// Collective end of a PE's participation: a quiet and a world barrier, then the slot is marked
// kFinalized. A job that failed (job_alive() is not OK) skips the barrier, and one that failed
// or whose barrier did abandons its transport, so finalize never waits for PEs that will not
// come.
Status finalize_context(Context& ctx);

// The calling thread's PE: its threads-job PE, else the process's PE; null before init.
Context* current() noexcept;
// current(), or FAILED_PRECONDITION naming `what`.
Status require_context(std::string_view what, Context** ctx);

// The team `team` with this PE a member, or INVALID_ARGUMENT naming `what` (teams.cpp).
Status member_team(Context& ctx, Team team, std::string_view what, TeamState** out);

// A PE of a node job (node_job.h), whose segments the process inherited, mapped, at fork.
struct InheritedPe {
  JobSegment* job = nullptr;  // not owned (the NodeJob's)
  int pe = -1;
  std::vector<std::byte*> segments;  // every PE's, in this address space
  std::size_t segment_bytes = 0;
  std::size_t reserved_bytes = 0;  // the parent's part of each heap, kept out of malloc's reach
  double timeout_s = 120;
};
// init() for such a PE (init_process.cpp): FAILED_PRECONDITION when already initialised.
Status init_inherited(const InheritedPe& inherited);

// Internal steps shared by the init paths.
Status barrier_on(Context& ctx, int team);  // dissemination barrier over a team (no quiet)
void set_thread_context(Context* ctx) noexcept;

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_CONTEXT_H_
