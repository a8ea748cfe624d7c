// Tests of ReadyLane (native/runtime/ready_lane.h): the orchestration thread's single-producer,
// multi-consumer ring of ready tasks.
#include "runtime/ready_lane.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace hp::runtime {
namespace {

TEST(ReadyLane, FifoAndFullAfterItsCells) {
  std::vector<TaskSlot> slots(ReadyLane::kCells + 1);
  ReadyLane lane;
  EXPECT_TRUE(lane.empty());
  EXPECT_EQ(lane.pop(), nullptr);
  for (std::size_t i = 0; i < ReadyLane::kCells; ++i) ASSERT_TRUE(lane.push(&slots[i])) << i;
  EXPECT_FALSE(lane.push(&slots.back())) << "a full lane refuses (the caller uses the queue)";
  EXPECT_EQ(lane.pop(), &slots[0]);
  EXPECT_TRUE(lane.push(&slots.back())) << "one cell was freed";
  for (std::size_t i = 1; i < ReadyLane::kCells; ++i) EXPECT_EQ(lane.pop(), &slots[i]);
  EXPECT_EQ(lane.pop(), &slots.back());
  EXPECT_TRUE(lane.empty());
}

// One producer wrapping the ring many times, three consumers: every task is taken exactly once.
TEST(ReadyLane, EveryTaskTakenOnceByConcurrentConsumers) {
  constexpr int kTasks = 200000;
  constexpr int kConsumers = 3;
  std::vector<std::atomic<int>> taken(kTasks);
  // Each slot's id carries its task's number, written before the push (as submit() writes a
  // slot before publishing it): a consumer reading it relies on the push's release.
  std::vector<TaskSlot> tasks(kTasks);
  ReadyLane lane;
  std::atomic<int> received{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&] {
      while (received.load(std::memory_order_relaxed) < kTasks) {
        if (TaskSlot* t = lane.pop()) {
          taken[static_cast<std::size_t>(t->id)].fetch_add(1, std::memory_order_relaxed);
          received.fetch_add(1, std::memory_order_relaxed);
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (int i = 0; i < kTasks; ++i) {
    tasks[static_cast<std::size_t>(i)].id = static_cast<TaskId>(i);
    while (!lane.push(&tasks[static_cast<std::size_t>(i)])) std::this_thread::yield();
  }
  for (auto& t : consumers) t.join();
  EXPECT_TRUE(lane.empty());
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(taken[static_cast<std::size_t>(i)].load(), 1) << "task " << i;
}

}  // namespace
}  // namespace hp::runtime
