// TaskRing: slots taken and reclaimed in order, and find() of a live task by id, whether the
// ring's ids are consecutive (one scope depth) or have gaps (ids taken by other rings), across the
// wrap of the slot array.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <utility>

#include "runtime/task_ring.h"

namespace hp::runtime {
namespace {

// Takes the next slot for task `id`, as Scheduler::acquire does (the slot is then live).
TaskSlot* take(TaskRing& ring, TaskId id) { return ring.take(id, 0); }

// Reclaims the oldest slot, once its task is consumed (completed, no scope holds it).
void reclaim(TaskRing& ring) {
  TaskSlot* s = ring.oldest();
  if (s == nullptr) {
    ADD_FAILURE() << "reclaim of an empty ring";
    return;
  }
  s->refs.store(0, std::memory_order_relaxed);
  s->scope_held = false;
  ring.reclaim_oldest();
}

// A reclaimed slot keeps its last task's fields until it is taken again, and take() hands it
// out begun for the next task (PENDING, the submission's guard, refs 1, its scope's hold, no
// edges, no waits, no stamp, ok status), with its vectors' capacity kept.
TEST(RuntimeTaskRing, TakeBeginsAReclaimedSlotForTheNextTask) {
  TaskRing ring(0, 1, 0);
  TaskSlot* s = ring.take(3, 0);
  s->state.store(TaskState::kCompleted, std::memory_order_relaxed);
  s->consumers.store(kClosedEdges, std::memory_order_relaxed);
  s->fanin.store(5, std::memory_order_relaxed);
  s->skip.store(true, std::memory_order_relaxed);
  s->status = Status::error(ErrorCode::kKernelFailed, "boom");
  s->connect_stamp = 9;
  s->edges_linked = 2;
  s->waits.resize(4);
  s->map_entries = {1, 2, 3};
  s->kept_alive = {s};
  s->refs.store(0, std::memory_order_relaxed);
  s->scope_held = false;
  ring.reclaim_oldest();
  EXPECT_EQ(s->id, 3u) << "reclaim leaves the slot as it was";
  TaskSlot* again = ring.take(4, 17);
  ASSERT_EQ(again, s);
  EXPECT_EQ(again->id, 4u);
  EXPECT_EQ(again->heap_mark, 17u);
  EXPECT_EQ(again->state.load(), TaskState::kPending);
  EXPECT_EQ(again->consumers.load(), nullptr);
  EXPECT_EQ(again->fanin.load(), kFaninGuard);
  EXPECT_EQ(again->refs.load(), 1);
  EXPECT_TRUE(again->scope_held);
  EXPECT_TRUE(again->kept_alive.empty());
  EXPECT_FALSE(again->skip.load());
  EXPECT_TRUE(again->status.is_ok());
  EXPECT_EQ(again->connect_stamp, kNoTask);
  EXPECT_EQ(again->edges_linked, 0);
  EXPECT_TRUE(again->waits.empty());
  EXPECT_GE(again->waits.capacity(), 4u);
  EXPECT_TRUE(again->map_entries.empty());
}

TEST(RuntimeTaskRing, FindsConsecutiveIdsAndNothingOutside) {
  TaskRing ring(0, 8, 0);
  EXPECT_EQ(ring.find(0), nullptr);  // empty
  TaskSlot* slots[5];
  for (int i = 0; i < 5; ++i) slots[i] = take(ring, 10 + i);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ring.find(10 + i), slots[i]) << i;
  EXPECT_EQ(ring.find(9), nullptr);
  EXPECT_EQ(ring.find(15), nullptr);
  EXPECT_EQ(ring.find(kNoTask), nullptr);
}

TEST(RuntimeTaskRing, FindsIdsWithGapsAcrossTheWrap) {
  TaskRing ring(0, 4, 0);
  take(ring, 0);
  take(ring, 1);
  take(ring, 2);
  reclaim(ring);
  reclaim(ring);
  // Live: 2 in slot 2; then 7 in slot 3, 8 in slot 0 (wrapped), 20 in slot 1.
  TaskSlot* two = ring.find(2);
  TaskSlot* seven = take(ring, 7);
  TaskSlot* eight = take(ring, 8);
  TaskSlot* twenty = take(ring, 20);
  ASSERT_TRUE(ring.full());
  EXPECT_EQ(ring.find(2), two);
  EXPECT_EQ(ring.find(7), seven);
  EXPECT_EQ(ring.find(8), eight);
  EXPECT_EQ(ring.find(20), twenty);
  for (TaskId missing : {0, 1, 3, 4, 5, 6, 9, 10, 19, 21})
    EXPECT_EQ(ring.find(missing), nullptr) << missing;
}

// Random takes (ids with random gaps, runs of consecutive ids) and reclaims, every id checked
// against a list of the live tasks after each step.
TEST(RuntimeTaskRing, FindAgreesWithTheLiveTasks) {
  std::mt19937_64 rng(20261202);
  for (int capacity : {1, 2, 3, 8, 64}) {
    TaskRing ring(0, capacity, 0);
    std::deque<std::pair<TaskId, TaskSlot*>> live;
    TaskId next = 0;
    for (int step = 0; step < 2000; ++step) {
      const bool can_take = !ring.full(), can_reclaim = !live.empty();
      if (can_take && (!can_reclaim || rng() % 2 == 0)) {
        next += rng() % 3 == 0 ? 1 + rng() % 5 : 1;  // consecutive runs, sometimes a gap
        live.emplace_back(next, take(ring, next));
      } else {
        reclaim(ring);
        live.pop_front();
      }
      const TaskId lowest = live.empty() ? next : live.front().first;
      for (TaskId id = lowest > 2 ? lowest - 2 : 0; id <= next + 2; ++id) {
        TaskSlot* expected = nullptr;
        for (const auto& [live_id, slot] : live) {
          if (live_id == id) expected = slot;
        }
        ASSERT_EQ(ring.find(id), expected)
            << "capacity " << capacity << ", step " << step << ", id " << id;
      }
    }
  }
}

}  // namespace
}  // namespace hp::runtime
