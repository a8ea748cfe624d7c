// TaskRing: the task slots and the heap ring of one scope depth (internal to the runtime).
//
// Slots are taken and reclaimed in submission order: head and tail count slots taken and
// reclaimed (slot = count % capacity); the live tasks are [tail, head), their ids increasing.
// head_slot_ and tail_slot_ keep head % capacity and tail % capacity: the submit path divides
// by nothing (a 64-bit division takes tens of cycles, and a submit would need several).
// Only the oldest live task can be reclaimed, so a long-lived task holds back the ring behind
// it. That is why each scope depth (0, 1, 2, >= 3) has its own ring: an inner scope's
// short-lived tasks recycle their ring while an outer scope still holds its tasks.
// Orchestration thread only: other threads drop their holds on slots, the orchestration thread
// reclaims them once consumed() (Scheduler::sweep).
#ifndef HYPER_PARALLEL_RUNTIME_TASK_RING_H_
#define HYPER_PARALLEL_RUNTIME_TASK_RING_H_

#include <cstdint>
#include <memory>

#include "runtime/heap_ring.h"
#include "runtime/task_slot.h"

namespace hp::runtime {

class TaskRing {
 public:
  TaskRing(int index, int slots, std::size_t heap_bytes)
      : index_(index),
        capacity_(slots),
        slots_(std::make_unique<TaskSlot[]>(static_cast<std::size_t>(slots))),
        heap_(heap_bytes) {}

  int index() const noexcept { return index_; }
  int capacity() const noexcept { return capacity_; }
  int live() const noexcept { return static_cast<int>(head_ - tail_); }
  bool full() const noexcept { return live() == capacity_; }
  HeapRing& heap() noexcept { return heap_; }
  const HeapRing& heap() const noexcept { return heap_; }

  // The next slot, begun for task `id` (TaskSlot::begin; the ring must not be full). Written
  // here, not when reclaimed: the core that ran its last task holds its shared line and has
  // read the others, so the stores wait for those lines. Here they are the lines the previous
  // submit prefetched owned (upcoming()); a reclaim comes in bursts (a scope's worth of slots at
  // once) that nothing prefetches.
  TaskSlot* take(TaskId id, std::uint64_t heap_mark) noexcept {
    TaskSlot* s = &slots_[head_slot_];
    s->begin(id, heap_mark);
    ++head_;
    head_slot_ = following(head_slot_);
    return s;
  }
  // The slot the next take() returns (whether or not it is free yet).
  TaskSlot* upcoming() noexcept { return &slots_[head_slot_]; }
  // The slot that is reclaimed next, or null when none is live.
  TaskSlot* oldest() noexcept { return head_ == tail_ ? nullptr : &slots_[tail_slot_]; }
  // The newest live slot, or null.
  TaskSlot* newest() noexcept { return head_ == tail_ ? nullptr : &slots_[preceding(head_slot_)]; }
  // The live slot of task `id`, or null. Ids increase from tail to head; they are consecutive
  // when every task submitted since the oldest live one went to this ring (one scope depth), so
  // that slot is tried first, then a binary search.
  TaskSlot* find(TaskId id) noexcept {
    if (head_ == tail_) return nullptr;
    const TaskId first = slots_[tail_slot_].id;
    if (id < first || id > slots_[preceding(head_slot_)].id) return nullptr;
    if (const std::uint64_t offset = id - first; offset < head_ - tail_) {
      std::size_t guess = tail_slot_ + static_cast<std::size_t>(offset);
      if (guess >= static_cast<std::size_t>(capacity_))
        guess -= static_cast<std::size_t>(capacity_);
      if (slots_[guess].id == id) return &slots_[guess];
    }
    std::uint64_t lo = tail_, hi = head_;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (at(mid)->id < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < head_ && at(lo)->id == id ? at(lo) : nullptr;
  }
  // Reclaims the oldest slot (it must be consumed()): its heap memory too. The slot keeps its
  // last task's fields (nothing reads a slot outside [tail, head)) until take() begins the next.
  void reclaim_oldest() {
    TaskSlot* s = oldest();
    heap_.release_to(s->heap_mark);
    ++tail_;
    tail_slot_ = following(tail_slot_);
  }

  // For reuse by a later run, once no core touches the ring: every live slot reclaimed (take()
  // begins each when it is used again) and the heap ring empty. False (and nothing changed) when
  // a live task is not consumed().
  bool clear() {
    for (std::uint64_t i = tail_; i < head_; ++i) {
      if (!at(i)->consumed()) return false;
    }
    tail_ = head_;
    tail_slot_ = head_slot_;
    heap_.release_to(heap_.current_mark());
    return true;
  }

  RingState state() noexcept {
    RingState r;
    r.ring = index_;
    r.live_slots = live();
    r.slot_capacity = capacity_;
    r.heap_used = heap_.used();
    r.heap_capacity = heap_.capacity();
    if (TaskSlot* s = oldest()) {
      r.oldest_task = s->id;
      r.oldest_state = s->observed_state();
    }
    return r;
  }

 private:
  TaskSlot* at(std::uint64_t count) noexcept {
    return &slots_[count % static_cast<std::uint64_t>(capacity_)];
  }
  std::size_t following(std::size_t slot) const noexcept {
    return slot + 1 == static_cast<std::size_t>(capacity_) ? 0 : slot + 1;
  }
  std::size_t preceding(std::size_t slot) const noexcept {
    return (slot == 0 ? static_cast<std::size_t>(capacity_) : slot) - 1;
  }

  int index_;
  int capacity_;
  std::unique_ptr<TaskSlot[]> slots_;
  HeapRing heap_;
  std::uint64_t head_ = 0;
  std::uint64_t tail_ = 0;
  std::size_t head_slot_ = 0;  // head_ % capacity_
  std::size_t tail_slot_ = 0;  // tail_ % capacity_
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_RING_H_
