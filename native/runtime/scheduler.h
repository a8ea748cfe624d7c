// Scheduler: the shared state of one orchestration run (internal to the runtime): the task
// rings, the dependency edges, the ready queues, the chip's cores, and task completion, failure
// propagation and slot reclamation.
//
// Cores: the run keeps one chip launch open (kMix over every cluster, so each core runs one
// long block, core_main) in which every core loops: take a ready task, run its blocks through a
// platform::BlockLaunch (the core's own for single-core tasks, the slot's for gangs), complete
// it. Two kinds of task:
//   single-core  kCube / kVector tasks whose gang (min(block_num, cores of that kind)) is 1: one
//                core runs all their blocks. They wait in their core type's ReadyQueue, which
//                idle cores of that type pull from; a core that completes a task runs one of
//                the successors this made ready itself, next (no queue, no wake-up), and pushes
//                the others as one batch. Those ready at submit go to the type's ReadyLane
//                instead (ready_lane.h: no locked instruction for the orchestration thread), or
//                to the queue when the lane is full; cores look in the lane first.
//   gang         every other task: placed as a gang, all the cores it needs at once (kCube /
//                kVector: min(block_num, cores of that kind) cores, running blocks i, i + n, ...
//                each; kMix: block_num whole clusters, each one group), so a running task never
//                waits for cores held by another task and sync_all works whenever its blocks fit
//                on the chip. Gang queues are FIFO per shape; the oldest head that fits is placed
//                first, under `mutex_`, by claiming idle cores (CAS kIdle -> kReserved, then
//                kAssigned, or back to kIdle when the gang does not fit). While a gang waits for
//                cores of a type, idle cores of that type take no single-core work, so the gang
//                is not starved.
// Core states: kBusy (its own: running, or looking for work), kIdle (waiting; claimable),
// kReserved (claimed by a placer deciding), kAssigned (a gang share to run). An idle core waits
// on its type's ReadyQueue event (platform::wait_event: spin, yield, then futex, looking at
// most once per HP_IDLE_POLL_US while it spins or yields), which pushes, lane pushes,
// placements and stop() bump. Lost-wake-up freedom: a core stores kIdle (seq_cst)
// and then reads the gang counters, a placer bumps them (seq_cst) and then reads core states.
// Light notifies (platform/wait.h), where membarrier works: lane pushes and the cores'
// completions notify without a fence, and whoever waits on those events (idle cores, a submit
// waiting for ring space, wait_all) fences for them before it sleeps. A core counts its own
// completions (Core::completed, no locked add); completed() sums the counts.
//
// Dependencies: lock-free (task_slot.h: a stack of edges per task, closed by its completion).
// Reclamation: a task is consumed once it completed, no consumer keeps its memory and its scope
// released it (TaskSlot::consumed()); only the orchestration thread reclaims slots (in ring
// order, when it needs a slot: sweep), so it alone resets slots, frees heap-ring memory and
// drops tensor map entries, and needs no lock for the rings.
#ifndef HYPER_PARALLEL_RUNTIME_SCHEDULER_H_
#define HYPER_PARALLEL_RUNTIME_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "platform/chip.h"
#include "platform/wait.h"
#include "runtime/deferral_registry.h"
#include "runtime/deferred_completion.h"
#include "runtime/observer.h"
#include "runtime/ready_lane.h"
#include "runtime/ready_queue.h"
#include "runtime/task_ring.h"
#include "runtime/tensor_map.h"

namespace hp::runtime {

class Scheduler {
 public:
  static constexpr int kRings = 4;  // scope depths 0, 1, 2 and >= 3

  struct Options {
    int ring_slots = 1024;
    std::size_t heap_bytes = 0;
    double wait_timeout_s = 60;
    std::vector<Observer*> observers;
  };

  // `rings`: kRings rings of options' size, kept from an earlier run on this chip (empty: new
  // ones).
  Scheduler(platform::Chip& chip, Options options,
            std::vector<std::unique_ptr<TaskRing>> rings = {});
  ~Scheduler() noexcept;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // A task of this shape runs on one core, through that core's launch; others are gangs and
  // need a launch of their own (TaskSlot::launch).
  bool single_core(const CallConfig& config) const noexcept {
    return gang_of(config) == 1 && config.mode != platform::LaunchMode::kMix;
  }
  // The same for a task whose gang and config are in its slot.
  bool single_core(const TaskSlot& slot) const noexcept {
    return slot.gang == 1 && slot.info.config.mode != platform::LaunchMode::kMix;
  }

  std::span<Observer* const> observers() const noexcept { return options_.observers; }
  // Cores a task of this shape occupies at once (1: a single-core task).
  int gang_of(const CallConfig& config) const noexcept;

  // --- orchestration thread ---
  // Takes a slot (and `heap_bytes` of its ring's heap) for task `id`, after reclaiming the
  // ring's consumed slots (and their entries of `map`), waiting while the ring is full.
  // OUT_OF_MEMORY without waiting when nothing can ever be reclaimed (the oldest slot is held
  // by an open scope), TIMEOUT when no task completed for wait_timeout_s, ABORTED when the run
  // failed. The slot comes back PENDING, held by its scope, with the submission guard.
  Status acquire(int ring, TaskId id, std::size_t heap_bytes, TensorMap& map, TaskSlot** slot,
                 std::byte** heap);
  // Adds the slot's edges: the tensor map's findings for `accesses`, then the explicit
  // predecessors; records the accesses. `deps` (when not null: only observers read it) receives
  // every dependency found.
  void connect(TaskSlot* slot, TensorMap& map, std::span<const TensorAccess> accesses,
               std::vector<Dependency>* deps);
  // Drops the submission guard: the task becomes ready once its predecessors completed.
  void publish(TaskSlot* slot);
  // A scope ended: it no longer holds these tasks.
  void release_scope(std::span<TaskSlot* const> held);
  // Reclaims the consumed slots of every ring but `keep` (-1: none kept), as acquire() does
  // for its ring: their heap memory and their entries of `map`. For occupancy samples, so that
  // they do not count slots consumed but not yet reclaimed.
  void reclaim(TensorMap& map, int keep = -1);
  // The ring's occupancy now (for observers): slots taken and not reclaimed, heap bytes in use.
  // Exact without a lock: only this thread takes and reclaims slots. A slot consumed since the
  // ring's last reclaim still counts.
  RingState ring_state(int ring);
  // The smallest id of a task whose slot is not reclaimed yet (kNoTask when none is): tasks
  // with smaller ids are done and forgotten.
  TaskId oldest_live_task();
  // Waits until every published task completed (TIMEOUT, and the rest skipped, when none
  // completes for wait_timeout_s; tasks already running are still waited for).
  Status wait_all();
  // Every core leaves core_main (call after wait_all).
  void stop();
  // The rings, cleared for a later run on the same chip, once the cores left core_main; empty
  // when a task was left unfinished (a failed launch).
  std::vector<std::unique_ptr<TaskRing>> take_rings();

  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  Status first_error() const;

  // --- chip cores ---
  Status core_main(platform::BlockContext& block);

  // --- the thread that opened the chip launch, when it failed: no core will ever run ---
  void abandon(const Status& why);

  // --- deferred completion (deferred_completion.h) ---
  // Defers the task whose block runs on the calling thread (word null: to *done).
  static Status defer_current(const std::uint64_t* word, std::uint64_t target,
                              DeferredCompletion* done, std::string_view waits_for = {});
  // The end of the run (after wait_all): no deferral completes any more.
  void close_deferrals() noexcept { deferrals_->close(); }

 private:
  enum class CoreState : std::uint8_t { kBusy, kIdle, kReserved, kAssigned };
  struct alignas(64) Core {
    std::atomic<CoreState> state{CoreState::kBusy};
    int type = 0;  // 0 cube, 1 vector
    // A gang share: written by the placer (under mutex_) before state = kAssigned (release).
    TaskSlot* task = nullptr;
    int gang_pos = 0;
    int gang_size = 0;
    TaskSlot* continuation = nullptr;  // the core's own: the successor it runs next
    std::uint64_t lane_tail_seen = 0;  // the core's own: ReadyLane::pop's copy of its tail
    // Tasks this core completed (its own; a load and a store, not a locked add): completed().
    std::atomic<std::uint64_t> completed{0};
    // The core's own launch for single-core tasks, re-armed by the core per task (its lines stay
    // in the core's cache); its kernel runs `current`. Gangs use their slot's launch.
    std::unique_ptr<platform::BlockLaunch> launch;
    TaskSlot* current = nullptr;
  };
  struct Work {
    TaskSlot* task = nullptr;  // null: stop
    int gang_pos = 0;
    int gang_size = 1;
  };
  // What completing tasks made ready, handed out when the completion is done.
  struct Released {
    ReadyBatch ready[2];             // single-core tasks, by core type
    std::vector<TaskSlot*> skipped;  // to complete without running
    // Handed out by the orchestration thread (publish): single-core tasks go to lanes_, and
    // lane[type] says one did.
    bool by_orchestration_thread = false;
    bool lane[2] = {false, false};
  };

  static int type_of(platform::LaunchMode mode) noexcept {
    return mode == platform::LaunchMode::kCube ? 0 : 1;
  }
  Work next_work(Core& me);
  void execute(const Work& work, Core& me, int core_index);
  // Every block of `task` returned, with `status`: completes it, or, when it deferred its
  // completion, counts its blocks' half (task_slot.h).
  void finish_blocks(TaskSlot* task, Status status, Core* me);
  // The deferred event of `task` came (DeferralRegistry's finish).
  void finish_deferred(TaskSlot* task, Status status);
  // Completes `slot` (and the tasks this makes skip), then hands out what became ready.
  void complete(TaskSlot* slot, Status status, bool ran, Core* me);
  void complete_one(TaskSlot* slot, Status status, bool ran, Core* me, Released& released);
  void make_ready(TaskSlot* slot, Core* me, Released& released);
  void hand_out(Released& released, Core* me);
  void order_after(TaskSlot* slot, TaskSlot* pred);
  // order_after()'s edge into a predecessor's `consumers` (whose head was `head`); false when it
  // closed meanwhile (completed).
  bool link_edge(TaskSlot* slot, TaskSlot* pred, Edge* head);
  // `slot` is skipped because `pred` failed (its status says so, unless it was skipped already).
  void skip_after_failed(TaskSlot* slot, TaskSlot* pred);
  void unref(TaskSlot* slot) noexcept;
  void mark_skipped(TaskSlot* slot);
  void fail_run(const Status& status);
  // Places waiting gangs on idle cores (under mutex_); after a failure, moves them to `skipped`.
  void dispatch_gangs(std::vector<TaskSlot*>& skipped);
  bool try_place(TaskSlot* slot);
  void enqueue_gang(TaskSlot* slot);
  void drain_ready(std::vector<TaskSlot*>& skipped);
  void sweep(TaskRing& ring, TensorMap& map);
  TaskSlot* find_live(TaskId id);
  std::string describe(const TaskSlot& slot) const;
  std::string describe_ring(TaskRing& ring);

  // Tasks completed so far: completed_ plus every core's count. Each count only grows, so the
  // sum read moves past a value once a completion after it was counted.
  std::uint64_t completed() const noexcept;
  // Waits until completed() moves past `seen` (or, with wake_on_failure, the run fails). TIMEOUT
  // naming `what` when nothing progressed for wait_timeout_s.
  Status wait_for_progress(std::uint64_t seen, bool wake_on_failure, std::string_view what);

  platform::Chip& chip_;
  const Options options_;
  const int num_cube_;
  const int num_vector_;
  const int ratio_;
  platform::WaitPolicy policy_;       // the orchestration thread's waits
  platform::WaitPolicy core_policy_;  // an idle core's: policy_ looking every HP_IDLE_POLL_US

  // Orchestration thread only.
  bool prefetch_owned_ = false;  // the CPU has PREFETCHW (common/prefetch.h)
  std::vector<std::unique_ptr<TaskRing>> rings_;
  std::vector<FoundDependency> found_;
  std::uint64_t published_ = 0;
  std::uint64_t acquired_ = 0;

  std::unique_ptr<Core[]> cores_;
  ReadyQueue ready_[2];  // single-core tasks by core type
  // Single-core tasks ready at submit, by core type (the orchestration thread's); null when
  // light notifies are not available here (platform/wait.h): then they use ready_.
  std::unique_ptr<ReadyLane[]> lanes_;

  mutable std::mutex mutex_;                                // gang queues and placement
  std::deque<TaskSlot*> gangs_[3];                          // by platform::LaunchMode
  alignas(64) std::atomic<int> gangs_waiting_[2] = {0, 0};  // queued gangs needing each core type

  mutable std::mutex error_mutex_;
  Status first_error_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> no_cores_{false};
  std::atomic<bool> stopping_{false};
  // Completions by threads other than the cores (skipped tasks, the end of a failed run).
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  // Bumped after completions (a core's with a light notify) and on failure.
  platform::WaitWord progress_event_;
  // Deferred tasks of this run; its watcher and DeferredCompletions complete them.
  std::shared_ptr<DeferralRegistry> deferrals_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_SCHEDULER_H_
