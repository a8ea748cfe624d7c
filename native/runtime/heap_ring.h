// HeapRing: the byte ring that runtime-allocated task outputs (OUTPUT arguments) come from.
//
// Layout: one buffer of `capacity` bytes (64-byte aligned). head and tail are running byte
// counts (never wrap in practice: 64 bits); buffer position = count % capacity, live bytes are
// [tail, head). An allocation that does not fit between the head position and the end of the
// buffer starts at position 0 instead: the skipped bytes count as allocated, and are freed
// as soon as the tail reaches them (live bytes span at most one capacity, so at most one
// skipped stretch is live at a time). Memory is released in allocation order only: each allocation
// returns a mark (the head count after it), and release_to(mark) frees everything allocated up
// to it. The task ring retires tasks in order, so it releases their marks in order.
// Not thread-safe: the scheduler calls it under its lock.
#ifndef HYPER_PARALLEL_RUNTIME_HEAP_RING_H_
#define HYPER_PARALLEL_RUNTIME_HEAP_RING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/api.h"

namespace hp::runtime {

class HP_API HeapRing {  // exported for its unit test; the header is not installed
 public:
  static constexpr std::size_t kAlignment = 64;

  explicit HeapRing(std::size_t capacity);  // rounded down to kAlignment; memory on first use

  // Allocates `bytes` (rounded up to kAlignment). False when it does not fit now.
  bool allocate(std::size_t bytes, std::byte** data, std::uint64_t* mark);
  // The mark of "nothing more allocated": a task without outputs retires with it.
  std::uint64_t current_mark() const noexcept { return head_; }
  void release_to(std::uint64_t mark) noexcept;

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t used() const noexcept { return static_cast<std::size_t>(head_ - tail_); }
  static std::size_t rounded(std::size_t bytes) noexcept {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  // The capacity a ring asked for `bytes` has (rounded down to kAlignment).
  static std::size_t capacity_for(std::size_t bytes) noexcept {
    return bytes / kAlignment * kAlignment;
  }
  std::string to_string() const;  // "3072 of 4096 bytes used"

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const noexcept;
  };
  std::size_t capacity_;
  std::unique_ptr<std::byte[], AlignedFree> memory_;
  std::uint64_t head_ = 0;
  std::uint64_t tail_ = 0;
  std::uint64_t skip_begin_ = 0;  // the live skipped stretch [skip_begin_, skip_end_), if any
  std::uint64_t skip_end_ = 0;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_HEAP_RING_H_
