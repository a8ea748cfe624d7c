// TaskSlot: one entry of a task ring (internal to the runtime).
//
// Ownership, by field group:
//   orchestration thread  filled at submit while the slot is PENDING and not yet published;
//                         read-only for every other thread from publication until the slot is
//                         reclaimed, which only the orchestration thread does (once it is
//                         consumed(), when no other thread touches it any more).
//   atomics               consumers, fanin, refs, cores_outstanding, state, skip.
// Edges (lock-free): a task's `consumers` is a stack of the Edges of the tasks waiting for it,
// each Edge living in its consumer (the first in `first_wait`, the others in `waits`). The
// submitter pushes (CAS) while the head is not kClosedEdges; the completer exchanges the head
// for kClosedEdges (after writing status and COMPLETED), which closes the stack, and walks what
// it took. So an edge is either taken by the completer, which then decrements the consumer's
// fanin, or refused, and the submitter sees the predecessor completed (and its status). The
// walker reads an edge before it decrements the consumer's fanin and never after: that
// decrement may let the consumer run, retire and have its slot reused. `waits` is reserved
// before its first edge is linked, so it never moves while linked. A completer walking a
// task's first edge reads it on the line of the fanin it then decrements: one line transfer,
// where an edge in `waits` costs a second, dependent one.
// Fanin: kFaninGuard while submit() adds edges (no decrement can reach 0 meanwhile), minus one
// per completed predecessor; publish() subtracts kFaninGuard less the edges it linked, or, when
// it linked none (no other thread can reach the slot), stores 0.
// Publication: whoever takes fanin to 0 (publish, or a completer with acq_rel, which the
// subtraction's release ordered after the orchestration thread's writes) makes the task ready
// and hands it to a core through a ready queue or a core assignment (both release/acquire).
#ifndef HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
#define HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "platform/chip.h"
#include "runtime/callable.h"
#include "runtime/observer.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime {

struct TaskSlot;

// One "consumer waits for a predecessor" link (see above).
struct Edge {
  TaskSlot* consumer = nullptr;
  Edge* next = nullptr;
};

// The head of a completed task's `consumers`: no edge can be added any more.
inline Edge* const kClosedEdges = reinterpret_cast<Edge*>(alignof(Edge));
// fanin while submit() is still adding edges: more than any task's predecessors.
inline constexpr int kFaninGuard = 1 << 30;

// Layout: groups on their own cache lines, so that a core running the task reads lines only the
// orchestration thread wrote (once), and the lines both sides write are few. What a core reads
// of a single-core task (info, callable, gang, kept_alive) is the slot's first 128 bytes: one
// pair of lines, which the CPU's adjacent-line prefetcher fetches together (hence the slot's
// alignment). Every line a core has read, the next submit into the slot must take back from
// it, so those lines are kept to one pair rather than spread over three (id first, the
// arguments between).
// The bytes at the start of a slot that a core reads of a single-core task: one pair of lines.
inline constexpr std::size_t kCoreReadBytes = 128;

struct alignas(kCoreReadBytes) TaskSlot {
  // --- orchestration thread, read by the cores (see above): the first kCoreReadBytes ---
  TaskInfo info;  // info.callable views callable->name()
  // Kept alive by the orchestrator's callable cache until the task is reclaimed (orchestrator.cpp).
  const Callable* callable = nullptr;
  // Kept across reuses of the slot and re-armed per task (no allocation per task).
  std::unique_ptr<platform::BlockLaunch> launch;
  int gang = 1;                       // cores the task occupies at once
  std::vector<TaskSlot*> kept_alive;  // predecessors whose memory this task holds
  TaskArgs args;                      // OUTPUT tensors carry their heap-ring memory

  // --- orchestration thread only ---
  alignas(64) TaskId id = kNoTask;
  std::uint64_t heap_mark = 0;             // release the heap ring to here at reclaim
  bool scope_held = false;                 // its scope is open (or it escaped to one that is)
  std::vector<std::uint32_t> map_entries;  // its tensor map entries, removed at reclaim
  // The last submitting task that linked an edge to this one (order_after: only while this one's
  // `consumers` was open).
  TaskId connect_stamp = kNoTask;
  std::vector<Edge> waits;  // its edges after first_wait, in its predecessors' `consumers`
  int edges_linked = 0;     // edges linked (fanin counts their completions)

  // --- shared ---
  alignas(64) std::atomic<Edge*> consumers{nullptr};  // see above
  // Set once (exchange) by whoever first finds a failed predecessor; that thread writes
  // `status` before it releases its hold on the task (fanin), the completer writes it before
  // it closes `consumers`.
  Status status;
  // Predecessors not completed yet, plus kFaninGuard while submit() is still adding edges.
  std::atomic<int> fanin{0};
  // Reasons other threads keep the task: 1 until it completes, 1 per consumer that keeps its
  // memory alive until that consumer completes. Its scope's hold is scope_held, the
  // orchestration thread's own: releasing it touches no line another thread writes.
  std::atomic<int> refs{0};
  std::atomic<TaskState> state{TaskState::kFree};
  std::atomic<bool> skip{false};
  Edge first_wait;  // its first edge (see above), on the line of its fanin
  std::atomic<int> cores_outstanding{0};
  TaskSlot* next_ready = nullptr;  // link of the ready queue the task waits in

  // --- deferred completion (deferred_completion.h) ---
  // 0: not deferred. A block that defers the task sets 2: one count for its blocks returning,
  // one for the deferred event; whoever takes it to 0 completes the task. The fields below are
  // written by the block that deferred (after it set `deferred`), then each by its own side
  // before its decrement.
  std::atomic<int> deferred{0};
  std::uint64_t deferral_key = 0;
  Status block_status;     // the blocks' failure, when they failed after the event came
  Status deferred_status;  // what the deferred event completed the task with

  // CONSUMED: completed, no consumer keeps it, no scope holds it; the orchestration thread may
  // reclaim it (the acquire pairs with the release of the last refs decrement). The task's
  // state reads COMPLETED until then: CONSUMED is this condition, which observed_state() shows.
  bool consumed() const noexcept {
    return !scope_held && refs.load(std::memory_order_acquire) == 0;
  }
  TaskState observed_state() const noexcept {
    return consumed() ? TaskState::kConsumed : state.load(std::memory_order_acquire);
  }

  // Starts the slot's next task (orchestration thread, TaskRing::take(): a slot never used or
  // reclaimed, so consumed()), keeping capacities: PENDING, the submission's guard on fanin,
  // refs 1 (not completed), its scope's hold; no edges, waits, kept predecessors or stamp; ok
  // status. What submit() writes in any case (info, callable, gang, cores_outstanding, args) is
  // not written here: the submitting thread is bound by its stores.
  void begin(TaskId task, std::uint64_t mark) {
    id = task;
    heap_mark = mark;
    scope_held = true;
    kept_alive.clear();
    map_entries.clear();
    connect_stamp = kNoTask;
    waits.clear();
    edges_linked = 0;
    first_wait = {};
    consumers.store(nullptr, std::memory_order_relaxed);
    fanin.store(kFaninGuard, std::memory_order_relaxed);
    refs.store(1, std::memory_order_relaxed);
    skip.store(false, std::memory_order_relaxed);
    deferred.store(0, std::memory_order_relaxed);
    status = Status::ok();
    next_ready = nullptr;
    state.store(TaskState::kPending, std::memory_order_relaxed);
  }
};

// The cores' group is the first pair of lines (see the layout above). offsetof on a type that
// is not standard-layout is conditionally supported; GCC and Clang support it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(TaskSlot, args) <= kCoreReadBytes,
              "a core reads more than kCoreReadBytes of a slot");
#pragma GCC diagnostic pop

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_SLOT_H_
