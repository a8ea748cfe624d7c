// TaskSlot: one entry of a task ring (internal to the runtime).
//
// Ownership, by field group:
//   orchestration thread  filled at submit while the slot is PENDING and not yet published;
//                         read-only for every other thread from publication until the slot is
//                         reclaimed, which only the orchestration thread does (after it saw the
//                         slot CONSUMED, when no other thread touches it any more).
//   lock                  `consumers` and the transition to COMPLETED: a submitter registers a
//                         new consumer only while the task is not COMPLETED, and the completer
//                         takes the list when it sets COMPLETED, both under `lock`.
//   atomics               fanin, refs, cores_outstanding, state, skip.
// Publication: the orchestration thread's writes are published by its release decrement of
// `fanin` (the submission guard); whoever takes fanin to 0 (acq_rel) makes the task ready and
// hands it to a core through a ready queue or a core assignment (both release/acquire).
#ifndef HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
#define HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "../common/status.h"
#include "../platform/chip.h"
#include "callable.h"
#include "observer.h"
#include "spin_lock.h"
#include "task_args.h"
#include "task_types.h"

namespace hp::runtime {

// Layout: three groups on their own cache lines, so that a core running the task reads lines
// only the orchestration thread wrote (once), and the lines both sides write are few.
struct TaskSlot {
  // --- orchestration thread, read by the cores (see above) ---
  TaskId id = kNoTask;
  TaskInfo info;  // info.callable views callable->name()
  // Kept alive by the orchestrator's callable cache until the task is reclaimed (orchestrator.cpp).
  const Callable* callable = nullptr;
  TaskArgs args;  // OUTPUT tensors carry their heap-ring memory
  // Kept across reuses of the slot and re-armed per task (no allocation per task).
  std::unique_ptr<platform::BlockLaunch> launch;
  int gang = 1;                          // cores the task occupies at once
  std::vector<TaskSlot*> kept_alive;     // predecessors whose memory this task holds

  // --- orchestration thread only ---
  alignas(64) std::uint64_t heap_mark = 0;  // release the heap ring to here at reclaim
  bool scope_held = false;
  std::vector<std::uint32_t> map_entries;  // its tensor map entries, removed at reclaim
  TaskId connect_stamp = kNoTask;  // the last submitting task that ordered itself after this one

  // --- shared ---
  alignas(64) SpinLock lock;
  std::atomic<TaskState> state{TaskState::kFree};
  // Predecessors not completed yet, plus 1 while submit() is still adding edges.
  std::atomic<int> fanin{0};
  // Reasons the task cannot be consumed: 1 until it completes, 1 while a scope holds it, 1 per
  // consumer that keeps its memory alive until that consumer completes.
  std::atomic<int> refs{0};
  std::atomic<int> cores_outstanding{0};
  // Set once (exchange) by whoever first finds a failed predecessor; that thread writes
  // `status` before it releases its hold on the task (fanin), the completer writes it before
  // it sets COMPLETED.
  std::atomic<bool> skip{false};
  std::vector<TaskSlot*> consumers;  // under `lock`: successors ordered after this task
  TaskSlot* next_ready = nullptr;    // link of the ready queue the task waits in
  Status status;

  // Back to FREE for the next task (orchestration thread, slot CONSUMED); keeps capacities.
  void reset() {
    id = kNoTask;
    info = {};
    callable = nullptr;
    heap_mark = 0;
    scope_held = false;
    gang = 1;
    kept_alive.clear();
    map_entries.clear();
    connect_stamp = kNoTask;
    consumers.clear();
    fanin.store(0, std::memory_order_relaxed);
    refs.store(0, std::memory_order_relaxed);
    cores_outstanding.store(0, std::memory_order_relaxed);
    skip.store(false, std::memory_order_relaxed);
    status = Status::ok();
    next_ready = nullptr;
    state.store(TaskState::kFree, std::memory_order_relaxed);
  }
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
