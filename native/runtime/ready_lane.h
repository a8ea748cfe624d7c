// ReadyLane: the single-core tasks of one core type that the orchestration thread found ready
// at submit (internal to the runtime). A bounded ring with one producer (the orchestration
// thread) and any number of consumers (that type's cores, and after a failure whoever drains).
//
// Why beside the ReadyQueue: a push there takes its spin lock, a locked instruction on a line the
// popping core wrote last, which waits for that line and for every store the submit made before it
// (x86 stores commit in order): where lines move slowly between CPUs, most of a submit's cost
// (bench/runtime/RESULTS.md). A lane push is two plain stores (the cell, then `tail`, release) and
// a light notify (platform/wait.h: the waiting core pays a membarrier before it sleeps instead).
// Layout: `tail` and `head` (the consumers') on lines of their own, and the cells after them, 8 per
// line; the producer keeps its own copy of `tail` (`next_`) on a line no core reads, so a push
// reads nothing an idle core's polling pulled away (reading `tail` there would cost the pushing
// thread a transfer of that line on every push).
// Consumers: read `tail` (acquire: the cell and the task's slot are written) when their own
// copy of it is used up (pop(tail_seen)), read the cell, then CAS `head` from h to h + 1. The
// producer overwrites cell h only once `head` passed h (it checks `head` when the ring looks
// full), so a consumer whose CAS succeeds read the task meant for it; one whose CAS fails reads
// again. Full: push() returns false and the caller uses the ReadyQueue.
#ifndef HYPER_PARALLEL_RUNTIME_READY_LANE_H_
#define HYPER_PARALLEL_RUNTIME_READY_LANE_H_

#include <atomic>
#include <cstdint>

#include "runtime/task_slot.h"

namespace hp::runtime {

class alignas(64) ReadyLane {
 public:
  static constexpr std::uint64_t kCells = 256;

  // Producer only. False when the lane is full.
  bool push(TaskSlot* slot) noexcept {
    const std::uint64_t t = next_;
    if (t - head_seen_ == kCells) {
      head_seen_ = head_.load(std::memory_order_acquire);
      if (t - head_seen_ == kCells) return false;
    }
    cells_[t % kCells].store(slot, std::memory_order_relaxed);
    tail_.store(t + 1, std::memory_order_release);
    next_ = t + 1;
    return true;
  }
  // The oldest task, or null. `tail_seen` is the consumer's own copy of the last tail it read:
  // while the head is below it, the cells up to it are published (that read acquired them), and
  // the consumer does not read `tail_` again. Each read of `tail_` takes its line from the
  // producer, whose next push must take it back (x86: and every store after that push waits).
  TaskSlot* pop(std::uint64_t& tail_seen) noexcept {
    std::uint64_t h = head_.load(std::memory_order_relaxed);
    for (;;) {
      if (h >= tail_seen) {
        tail_seen = tail_.load(std::memory_order_acquire);
        if (h >= tail_seen) return nullptr;
      }
      TaskSlot* slot = cells_[h % kCells].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        return slot;
      }
    }
  }
  TaskSlot* pop() noexcept {
    std::uint64_t tail_seen = 0;
    return pop(tail_seen);
  }
  bool empty() const noexcept {
    return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_acquire);
  }

 private:
  std::uint64_t next_ = 0;       // the producer's: tail_ as it last stored it
  std::uint64_t head_seen_ = 0;  // the producer's last read of head_
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<TaskSlot*> cells_[kCells] = {};
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_READY_LANE_H_
