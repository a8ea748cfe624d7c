#include "runtime/heap_ring.h"

#include <new>

#include <fmt/format.h>

namespace hp::runtime {

void HeapRing::AlignedFree::operator()(std::byte* p) const noexcept {
  ::operator delete[](p, std::align_val_t(kAlignment));
}

HeapRing::HeapRing(std::size_t capacity) : capacity_(capacity_for(capacity)) {}

bool HeapRing::allocate(std::size_t bytes, std::byte** data, std::uint64_t* mark) {
  const std::size_t n = rounded(bytes);
  if (n > capacity_ || capacity_ == 0) return false;
  if (!memory_) {
    memory_.reset(
        static_cast<std::byte*>(::operator new[](capacity_, std::align_val_t(kAlignment))));
  }
  if (head_ == tail_ && head_ % capacity_ != 0) {  // empty: restart at position 0
    head_ = tail_ = (head_ / capacity_ + 1) * capacity_;
  }
  const std::size_t free = capacity_ - used();
  const std::size_t position = static_cast<std::size_t>(head_ % capacity_);
  const std::size_t to_end = capacity_ - position;
  std::size_t offset;
  if (n <= to_end && n <= free) {
    offset = position;
  } else if (n > to_end && to_end + n <= free) {
    skip_begin_ = head_;  // skip the end of the buffer
    head_ += to_end;
    skip_end_ = head_;
    offset = 0;
  } else {
    return false;
  }
  head_ += n;
  *data = memory_.get() + offset;
  *mark = head_;
  return true;
}

void HeapRing::release_to(std::uint64_t mark) noexcept {
  if (mark > tail_) tail_ = mark;
  if (tail_ == skip_begin_ && skip_end_ > skip_begin_) tail_ = skip_end_;
}

std::string HeapRing::to_string() const {
  return fmt::format("{} of {} bytes used", used(), capacity_);
}

}  // namespace hp::runtime
