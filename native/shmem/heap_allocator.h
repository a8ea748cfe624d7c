// The symmetric heap's allocator: deterministic, so that every PE, making the same calls in the
// same order, gets the same offsets (that is what makes an allocation symmetric).
//
// First fit over a free list of [offset, size) blocks kept sorted by offset; freed blocks
// coalesce with their neighbours. Offsets are relative to the start of the user heap.
#ifndef HYPER_PARALLEL_SHMEM_HEAP_ALLOCATOR_H_
#define HYPER_PARALLEL_SHMEM_HEAP_ALLOCATOR_H_

#include <cstddef>
#include <map>
#include <set>

#include "common/api.h"
#include "common/status.h"

namespace hp::shmem {

class HP_API HeapAllocator {
 public:
  static constexpr std::size_t kMinAlignment = 64;  // one cache line: signal slots never share

  // max_alignment: the alignment of the heap's start on every PE (segment_map.h's
  // heap_alignment): offsets are aligned relative to it, so an allocation is aligned in every
  // PE's address space up to that.
  HeapAllocator(std::size_t capacity, std::size_t max_alignment);

  // alignment: a power of two up to max_alignment (raised to kMinAlignment). bytes 0 allocates
  // kMinAlignment bytes.
  Status allocate(std::size_t bytes, std::size_t alignment, std::size_t* offset);
  // NOT_SYMMETRIC when `offset` is not the start of a block, DOUBLE_FREE when it is free.
  Status release(std::size_t offset);

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t bytes_in_use() const noexcept { return in_use_; }
  std::size_t largest_free_block() const noexcept;

 private:
  std::size_t capacity_;
  std::size_t max_alignment_;
  std::size_t in_use_ = 0;
  std::map<std::size_t, std::size_t> free_;  // offset -> size, no two adjacent
  std::map<std::size_t, std::size_t> used_;  // offset -> size
  std::set<std::size_t> freed_;              // starts of released blocks not reallocated since
};

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_HEAP_ALLOCATOR_H_
