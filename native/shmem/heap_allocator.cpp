#include "shmem/heap_allocator.h"

#include <algorithm>
#include <bit>

namespace hp::shmem {

HeapAllocator::HeapAllocator(std::size_t capacity, std::size_t max_alignment)
    : capacity_(capacity), max_alignment_(max_alignment) {
  if (capacity_ > 0) free_.emplace(0, capacity_);
}

std::size_t HeapAllocator::largest_free_block() const noexcept {
  std::size_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

Status HeapAllocator::allocate(std::size_t bytes, std::size_t alignment, std::size_t* offset) {
  HP_ENSURE(alignment == 0 || std::has_single_bit(alignment), ErrorCode::kInvalidArgument,
            "alignment {} is not a power of two", alignment);
  HP_ENSURE(alignment <= max_alignment_, ErrorCode::kInvalidArgument,
            "alignment {} is larger than {}, the alignment of the {}-byte symmetric heap's start "
            "(set HP_SHMEM_HEAP_SIZE larger for a larger alignment)",
            alignment, max_alignment_, capacity_);
  alignment = std::max(alignment, kMinAlignment);
  // Round sizes up to the minimum alignment: the next block then starts on a fresh line.
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  HP_ENSURE(size <= capacity_, ErrorCode::kOutOfMemory,
            "symmetric heap: {} bytes asked of a {}-byte heap; set HP_SHMEM_HEAP_SIZE larger "
            "(hprun --heap-size)",
            bytes, capacity_);
  const std::size_t rounded = (size + kMinAlignment - 1) / kMinAlignment * kMinAlignment;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [start, length] = *it;
    const std::size_t aligned = (start + alignment - 1) / alignment * alignment;
    if (aligned - start > length || length - (aligned - start) < rounded) continue;
    free_.erase(it);
    if (aligned > start) free_.emplace(start, aligned - start);  // the gap before stays free
    const std::size_t end = aligned + rounded;
    if (end < start + length) free_.emplace(end, start + length - end);
    used_.emplace(aligned, rounded);
    // A reallocated start is live again; freed starts inside the new block are gone for good.
    freed_.erase(freed_.lower_bound(aligned), freed_.lower_bound(end));
    in_use_ += rounded;
    *offset = aligned;
    return Status::ok();
  }
  return Status::error(ErrorCode::kOutOfMemory,
                       "symmetric heap full: {} bytes (alignment {}) asked, largest free block {} "
                       "of {} bytes ({} in use); set HP_SHMEM_HEAP_SIZE larger (hprun "
                       "--heap-size) or free what you no longer need",
                       bytes, alignment, largest_free_block(), capacity_, in_use_);
}

Status HeapAllocator::release(std::size_t offset) {
  auto it = used_.find(offset);
  if (it == used_.end()) {
    HP_ENSURE(!freed_.contains(offset), ErrorCode::kDoubleFree,
              "symmetric free of heap offset {}: that block is already free", offset);
    return Status::error(ErrorCode::kNotSymmetric,
                         "symmetric free of heap offset {}: not the start of an allocation "
                         "from malloc/align/calloc",
                         offset);
  }
  std::size_t start = it->first, length = it->second;
  used_.erase(it);
  freed_.insert(start);
  in_use_ -= length;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, length);
  return Status::ok();
}

}  // namespace hp::shmem
