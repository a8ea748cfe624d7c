// ReadyQueue: the FIFO of ready single-core tasks of one core type (internal to the runtime).
// Intrusive (linked through TaskSlot::next_ready: no allocation), guarded by a SpinLock held for
// a few pointer moves (an uncontended std::mutex cost more than the moves; the holder never
// blocks inside); size() is readable without it, for idle cores deciding whether to look.
// Any thread pushes; the cores of that type and, after a failure, the orchestration thread pop.
// `event` is bumped (platform::notify_event) after every push: idle cores wait on it.
#ifndef HYPER_PARALLEL_RUNTIME_READY_QUEUE_H_
#define HYPER_PARALLEL_RUNTIME_READY_QUEUE_H_

#include <atomic>
#include <mutex>

#include "platform/wait.h"
#include "runtime/spin_lock.h"
#include "runtime/task_slot.h"

namespace hp::runtime {

// A chain of ready tasks gathered without a lock, pushed at once.
struct ReadyBatch {
  TaskSlot* head = nullptr;
  TaskSlot* tail = nullptr;
  int size = 0;
  void add(TaskSlot* slot) noexcept {
    slot->next_ready = nullptr;
    if (tail == nullptr) {
      head = slot;
    } else {
      tail->next_ready = slot;
    }
    tail = slot;
    ++size;
  }
};

class alignas(64) ReadyQueue {
 public:
  // Appends the batch (then empty) and wakes idle cores.
  void push(ReadyBatch& batch) {
    if (batch.size == 0) return;
    {
      std::lock_guard lock(mutex_);
      if (tail_ == nullptr) {
        head_ = batch.head;
      } else {
        tail_->next_ready = batch.head;
      }
      tail_ = batch.tail;
      // Written under the lock only: a store, not a locked add (readers just load it).
      size_.store(size_.load(std::memory_order_relaxed) + batch.size, std::memory_order_release);
    }
    batch = {};
    platform::notify_event(event_, false);
  }
  // The oldest task, or null.
  TaskSlot* pop() {
    if (size_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard lock(mutex_);
    TaskSlot* slot = head_;
    if (slot == nullptr) return nullptr;
    head_ = slot->next_ready;
    if (head_ == nullptr) tail_ = nullptr;
    slot->next_ready = nullptr;
    size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    return slot;
  }
  int size() const noexcept { return size_.load(std::memory_order_acquire); }
  platform::WaitWord& event() noexcept { return event_; }

 private:
  SpinLock mutex_;
  TaskSlot* head_ = nullptr;
  TaskSlot* tail_ = nullptr;
  std::atomic<int> size_{0};
  platform::WaitWord event_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_READY_QUEUE_H_
