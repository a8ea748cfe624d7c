// Scheduler: the shared state of one orchestration run (internal to the runtime): the task
// rings, the dependency edges, one ready queue per resource shape, the chip's cores, and task
// completion, failure propagation and slot reclamation.
//
// Cores: the run keeps one chip launch open (kMix over every cluster, so each core runs one
// long block, core_main) in which every core loops: wait for an assignment, run its share of
// a task's blocks through that task's platform::BlockLaunch, report back. A task is placed as a
// gang: all the cores it needs at once (kCube / kVector: min(block_num, cores of that kind)
// cores, running blocks i, i + n, ... each; kMix: block_num whole clusters, each one group), so
// a running task never waits for cores held by another task, and sync_all within a task works
// whenever its blocks fit on the chip. Ready queues are FIFO per shape; whenever cores free up,
// the oldest queue head that fits is placed first (a head that does not fit does not stop
// other shapes; a wide task can wait while narrower ones keep finding cores).
//
// Locking: one mutex guards every "scheduler" field of every slot, the rings, the queues and
// the cores' bookkeeping. Waits use platform::wait_event on atomics (cores: their assignment
// flag; the orchestration thread: the progress counter), never the lock.
#ifndef HYPER_PARALLEL_RUNTIME_SCHEDULER_H_
#define HYPER_PARALLEL_RUNTIME_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "../common/status.h"
#include "../platform/chip.h"
#include "../platform/wait.h"
#include "observer.h"
#include "task_ring.h"
#include "tensor_map.h"

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

  Scheduler(platform::Chip& chip, Options options);
  ~Scheduler() noexcept;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::span<Observer* const> observers() const noexcept { return options_.observers; }

  // --- orchestration thread ---
  // Takes a slot (and `heap_bytes` of its ring's heap) for task `id`, waiting while the ring is
  // full. OUT_OF_MEMORY without waiting when nothing can ever be reclaimed (the oldest slot is
  // held by an open scope), TIMEOUT when no task completed for wait_timeout_s, ABORTED when the
  // run failed. The slot comes back PENDING, held by its scope, with the submission guard.
  Status acquire(int ring, TaskId id, std::size_t heap_bytes, TaskSlot** slot, std::byte** heap);
  // Adds the slot's edges: the tensor map's findings for `accesses`, then the explicit
  // predecessors; records the accesses. `deps` receives every dependency found.
  void connect(TaskSlot* slot, TensorMap& map, std::span<const TensorAccess> accesses,
               std::vector<Dependency>* deps);
  // Drops the submission guard: the task becomes ready once its predecessors completed.
  void publish(TaskSlot* slot);
  // A scope ended: it no longer holds these tasks.
  void release_scope(std::span<TaskSlot* const> held);
  // The ring's occupancy now (for observers).
  RingState ring_state(int ring);
  // Waits until every published task completed (TIMEOUT, and the rest skipped, when none
  // completes for wait_timeout_s; tasks already running are still waited for).
  Status wait_all();
  // Every core leaves core_main (call after wait_all).
  void stop();

  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  Status first_error() const;

  // --- chip cores ---
  Status core_main(platform::BlockContext& block);

  // --- the thread that opened the chip launch, when it failed: no core will ever run ---
  void abandon(const Status& why);

 private:
  struct alignas(64) Core {
    platform::WaitWord event;
    std::atomic<bool> assigned{false};
    // Written under the lock before `assigned` is set; read by the core once it sees it.
    TaskSlot* task = nullptr;
    int gang_pos = 0;
    int gang_size = 0;
    bool busy = false;  // under the lock
  };

  // All under the lock.
  void make_ready(TaskSlot* slot);
  void dispatch();
  bool fits(const TaskSlot& slot) const;
  void place(TaskSlot* slot);
  void assign(int core, TaskSlot* slot, int gang_pos, int gang_size);
  void complete(TaskSlot* slot, Status status, bool ran);
  void skip(TaskSlot* slot);
  void unref(TaskSlot* slot);
  void fail_run(const Status& status);
  void note_progress();
  std::string describe(const TaskSlot& slot) const;
  std::string describe_ring(TaskRing& ring);

  // Waits until progress_ moves past `seen` (or, with wake_on_failure, the run fails). TIMEOUT
  // naming `what` when nothing progressed for wait_timeout_s.
  Status wait_for_progress(std::uint64_t seen, bool wake_on_failure, std::string_view what);

  platform::Chip& chip_;
  const Options options_;
  const int num_cube_;
  const int num_vector_;
  const int ratio_;
  platform::WaitPolicy policy_;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<TaskRing>> rings_;
  std::unordered_map<TaskId, TaskSlot*> live_;  // tasks whose slot is not reclaimed
  std::deque<TaskSlot*> ready_[3];              // by platform::LaunchMode
  std::unique_ptr<Core[]> cores_;
  struct Completion {
    TaskSlot* slot;
    Status status;
    bool ran;
  };
  std::vector<Completion> completing_;  // complete()'s worklist (no recursion down a chain)
  bool in_complete_ = false;
  bool no_cores_ = false;
  std::uint64_t published_ = 0;
  std::uint64_t completed_ = 0;
  Status first_error_;

  std::atomic<bool> failed_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> progress_{0};  // completions + reclaims
  platform::WaitWord progress_event_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_SCHEDULER_H_
