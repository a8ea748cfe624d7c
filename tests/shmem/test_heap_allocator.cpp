// The deterministic symmetric-heap allocator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "shmem/heap_allocator.h"
#include "shmem/segment_map.h"

namespace hp::shmem {
namespace {

TEST(HeapAllocator, SameCallsGiveSameOffsets) {
  HeapAllocator a(1 << 20, kHeapAlignment), b(1 << 20, kHeapAlignment);
  std::size_t x = 0, y = 0;
  for (std::size_t bytes : {1, 100, 4096, 7, 64 * 1024}) {
    ASSERT_TRUE(a.allocate(bytes, 0, &x).is_ok());
    ASSERT_TRUE(b.allocate(bytes, 0, &y).is_ok());
    EXPECT_EQ(x, y);
    EXPECT_EQ(x % HeapAllocator::kMinAlignment, 0u);
  }
}

TEST(HeapAllocator, HonoursAlignment) {
  HeapAllocator a(1 << 20, kHeapAlignment);
  std::size_t off = 0;
  ASSERT_TRUE(a.allocate(10, 0, &off).is_ok());
  ASSERT_TRUE(a.allocate(10, 4096, &off).is_ok());
  EXPECT_EQ(off % 4096, 0u);
  EXPECT_EQ(a.allocate(10, 48, &off).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.allocate(10, std::size_t(4) << 20, &off).code(), ErrorCode::kInvalidArgument);
}

// Any power of two that fits the heap: the heap's start is aligned to its size rounded up.
TEST(HeapAllocator, AlignsUpToTheHeapStartsAlignment) {
  const std::size_t heap = std::size_t(48) << 20;
  EXPECT_EQ(heap_alignment(heap), std::size_t(64) << 20);
  EXPECT_EQ(heap_alignment(4096), kHeapAlignment);
  HeapAllocator a(heap, heap_alignment(heap));
  std::size_t off = 0;
  ASSERT_TRUE(a.allocate(10, 0, &off).is_ok());
  ASSERT_TRUE(a.allocate(100, std::size_t(16) << 20, &off).is_ok());
  EXPECT_EQ(off, std::size_t(16) << 20);
  ASSERT_TRUE(a.allocate(100, std::size_t(32) << 20, &off).is_ok());
  EXPECT_EQ(off, std::size_t(32) << 20);
  EXPECT_EQ(a.allocate(10, std::size_t(128) << 20, &off).code(), ErrorCode::kInvalidArgument);
}

TEST(HeapAllocator, BlocksNeverOverlapAndFreesCoalesce) {
  HeapAllocator a(64 * 1024, kHeapAlignment);
  std::vector<std::size_t> offs(8);
  for (auto& o : offs) ASSERT_TRUE(a.allocate(8 * 1024, 0, &o).is_ok());
  std::size_t extra = 0;
  EXPECT_EQ(a.allocate(1, 0, &extra).code(), ErrorCode::kOutOfMemory);  // full
  for (std::size_t i = 0; i < offs.size(); i += 2) ASSERT_TRUE(a.release(offs[i]).is_ok());
  EXPECT_EQ(a.largest_free_block(), 8u * 1024);  // holes do not merge across used blocks
  for (std::size_t i = 1; i < offs.size(); i += 2) ASSERT_TRUE(a.release(offs[i]).is_ok());
  EXPECT_EQ(a.largest_free_block(), 64u * 1024);
  EXPECT_EQ(a.bytes_in_use(), 0u);
}

TEST(HeapAllocator, FullHeapSaysWhatToDo) {
  HeapAllocator a(4096, kHeapAlignment);
  std::size_t off = 0;
  Status s = a.allocate(8192, 0, &off);
  EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("HP_SHMEM_HEAP_SIZE"));
}

TEST(HeapAllocator, DoubleFreeAndForeignOffsetsAreNamed) {
  HeapAllocator a(1 << 16, kHeapAlignment);
  std::size_t off = 0, other = 0;
  ASSERT_TRUE(a.allocate(100, 0, &off).is_ok());
  ASSERT_TRUE(a.allocate(100, 0, &other).is_ok());
  ASSERT_TRUE(a.release(off).is_ok());
  EXPECT_EQ(a.release(off).code(), ErrorCode::kDoubleFree);
  EXPECT_EQ(a.release(other + 8).code(), ErrorCode::kNotSymmetric);
  EXPECT_EQ(a.release(60000).code(), ErrorCode::kNotSymmetric);  // never allocated
  ASSERT_TRUE(a.allocate(100, 0, &off).is_ok());  // reuses the freed block: live again
  EXPECT_TRUE(a.release(off).is_ok());
}

}  // namespace
}  // namespace hp::shmem
