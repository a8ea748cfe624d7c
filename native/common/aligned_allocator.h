// A std::allocator twin whose blocks start on a 64-byte boundary: a cache line, and the
// alignment the kernels' non-temporal stores and most tensor libraries' buffers have.
#ifndef HYPER_PARALLEL_COMMON_ALIGNED_ALLOCATOR_H_
#define HYPER_PARALLEL_COMMON_ALIGNED_ALLOCATOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace hp {

template <typename T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};

  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }

  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_ALIGNED_ALLOCATOR_H_
