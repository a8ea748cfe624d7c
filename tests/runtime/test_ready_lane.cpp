// Tests of ReadyLane (native/runtime/ready_lane.h): the orchestration thread's single-producer,
// multi-consumer ring of ready tasks.
#include "runtime/ready_lane.h"

#include <atomic>
#include <cstdint>
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

// A consumer's own copy of the tail: it takes what it saw published without reading the tail
// again, reads it again once past it, and sees later pushes then.
TEST(ReadyLane, PopWithTheConsumersCopyOfTheTail) {
  std::vector<TaskSlot> slots(4);
  ReadyLane lane;
  std::uint64_t seen = 0;
  EXPECT_EQ(lane.pop(seen), nullptr);
  EXPECT_EQ(seen, 0u);
  ASSERT_TRUE(lane.push(&slots[0]));
  ASSERT_TRUE(lane.push(&slots[1]));
  EXPECT_EQ(lane.pop(seen), &slots[0]);
  EXPECT_EQ(seen, 2u);
  ASSERT_TRUE(lane.push(&slots[2]));
  EXPECT_EQ(lane.pop(seen), &slots[1]);
  EXPECT_EQ(seen, 2u) << "the head was below the copy: no new read";
  EXPECT_EQ(lane.pop(seen), &slots[2]);
  EXPECT_EQ(seen, 3u);
  // Another consumer took what this one saw: the head moved past its copy, and it reads again.
  ASSERT_TRUE(lane.push(&slots[3]));
  std::uint64_t other = 0;
  EXPECT_EQ(lane.pop(other), &slots[3]);
  EXPECT_EQ(lane.pop(seen), nullptr);
  EXPECT_EQ(seen, 4u);
  EXPECT_TRUE(lane.empty());
}

// One producer wrapping the ring many times, three consumers: every task is taken exactly once,
// by consumers that read the tail at every pop and by consumers that keep a copy of it.
class ReadyLaneConsumers : public ::testing::TestWithParam<bool> {};

TEST_P(ReadyLaneConsumers, EveryTaskTakenOnceByConcurrentConsumers) {
  const bool copy_of_tail = GetParam();
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
      std::uint64_t seen = 0;
      while (received.load(std::memory_order_relaxed) < kTasks) {
        if (TaskSlot* t = copy_of_tail ? lane.pop(seen) : lane.pop()) {
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
  for (int i = 0; i < kTasks; ++i)
    ASSERT_EQ(taken[static_cast<std::size_t>(i)].load(), 1) << "task " << i;
}

INSTANTIATE_TEST_SUITE_P(TailReads, ReadyLaneConsumers, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "CopyOfTheTail" : "TailAtEveryPop";
                         });

}  // namespace
}  // namespace hp::runtime
