// HeapRing: in-order allocation and release, wrapping, and refusal when full.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/heap_ring.h"

namespace hp::runtime {
namespace {

TEST(RuntimeHeapRing, AllocatesInOrderAndRoundsToTheAlignment) {
  HeapRing ring(1024);
  std::byte* a = nullptr;
  std::byte* b = nullptr;
  std::uint64_t mark_a = 0, mark_b = 0;
  ASSERT_TRUE(ring.allocate(10, &a, &mark_a));
  ASSERT_TRUE(ring.allocate(64, &b, &mark_b));
  EXPECT_EQ(b - a, 64);  // 10 bytes take one 64-byte unit
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % HeapRing::kAlignment, 0u);
  EXPECT_EQ(ring.used(), 128u);
  ring.release_to(mark_a);
  EXPECT_EQ(ring.used(), 64u);
  ring.release_to(mark_b);
  EXPECT_EQ(ring.used(), 0u);
}

TEST(RuntimeHeapRing, RefusesWhenFullAndWrapsAfterRelease) {
  HeapRing ring(256);
  std::byte* p[4];
  std::uint64_t mark[4];
  ASSERT_TRUE(ring.allocate(128, &p[0], &mark[0]));
  ASSERT_TRUE(ring.allocate(64, &p[1], &mark[1]));
  std::byte* q = nullptr;
  std::uint64_t m = 0;
  EXPECT_FALSE(ring.allocate(128, &q, &m));  // 64 free at the end only
  ring.release_to(mark[0]);                  // frees [0, 128)
  // 64 bytes at the end remain, 128 needed: skips the end and starts at 0.
  ASSERT_TRUE(ring.allocate(128, &p[2], &mark[2]));
  EXPECT_EQ(p[2], p[0]);
  EXPECT_EQ(ring.used(), 64u + 64u + 128u);  // live 64, skipped 64, new 128
  EXPECT_FALSE(ring.allocate(64, &q, &m));
  ring.release_to(mark[1]);  // frees [128, 192) and the skipped end
  EXPECT_EQ(ring.used(), 128u);
  ASSERT_TRUE(ring.allocate(128, &p[3], &mark[3]));
  EXPECT_EQ(p[3], p[0] + 128);
  EXPECT_EQ(ring.used(), 256u);
  ring.release_to(mark[2]);
  ring.release_to(mark[3]);
  EXPECT_EQ(ring.used(), 0u);
}

TEST(RuntimeHeapRing, MarksWithoutAllocationsReleaseNothingNewer) {
  HeapRing ring(128);
  const std::uint64_t empty_mark = ring.current_mark();  // a task with no outputs
  std::byte* p = nullptr;
  std::uint64_t m = 0;
  ASSERT_TRUE(ring.allocate(128, &p, &m));
  ring.release_to(empty_mark);
  EXPECT_EQ(ring.used(), 128u);
  ring.release_to(m);
  EXPECT_EQ(ring.used(), 0u);
}

TEST(RuntimeHeapRing, RefusesMoreThanItsCapacity) {
  HeapRing ring(128);
  std::byte* p = nullptr;
  std::uint64_t m = 0;
  EXPECT_FALSE(ring.allocate(129, &p, &m));
  EXPECT_EQ(ring.used(), 0u);
}

}  // namespace
}  // namespace hp::runtime
