// Mapping PE segments so that every PE's heap starts on the same alignment.
//
// The heap allocator aligns offsets relative to the heap's start; an allocation is aligned in
// every PE's address space only if every heap start is. Segments are therefore mapped at an
// address where segment + kControlBytes (the heap start) is a multiple of heap_alignment(): the
// heap's size rounded up to a power of two, at least kHeapAlignment (2 MiB, a huge page), so
// that any power-of-two alignment that fits the heap is the same on every PE. The segment is
// mapped MAP_FIXED inside a PROT_NONE reservation that much larger (address space only), the
// rest of the reservation released.
#ifndef HYPER_PARALLEL_SHMEM_SEGMENT_MAP_H_
#define HYPER_PARALLEL_SHMEM_SEGMENT_MAP_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace hp::shmem {

inline constexpr std::size_t kHeapAlignment = std::size_t(2) << 20;

// Where a heap of `heap_bytes` starts: a multiple of this (a power of two >= kHeapAlignment).
inline std::size_t heap_alignment(std::size_t heap_bytes) {
  return std::max(kHeapAlignment, std::bit_ceil(heap_bytes));
}

// Maps `bytes` of `fd` (MAP_SHARED) or, with fd < 0, anonymous private memory. The heap start
// (result + heap_offset) is heap_alignment(bytes - heap_offset) aligned. With `mem_nodes` the
// mapping is bound to those NUMA nodes before any page is allocated (for a shared segment the
// policy is the object's: its pages stay there whoever touches them).
//
// `reserve` (the creator of a shared memory object, fd >= 0): every page of the object is
// allocated now (fallocate, after the binding), so that a /dev/shm or memory too small to hold
// the heap is OUT_OF_MEMORY here instead of a SIGBUS at the first touch of a missing page.
// Nothing is pre-faulted: an allocated page is zeroed when it is first touched, so a job pays
// for the pages it uses, not for the whole heap of every PE at start (and a mapping of another
// PE's segment takes a minor fault per page on its first access instead of all of them here).
Status map_segment_aligned(int fd, std::size_t bytes, std::size_t heap_offset, bool reserve,
                           std::byte** out, std::span<const int> mem_nodes = {});

// The bytes to skip from `base` so that base + skip + heap_offset is `alignment`-aligned.
inline std::size_t alignment_skip(const void* base, std::size_t heap_offset,
                                  std::size_t alignment) {
  const std::uintptr_t heap = reinterpret_cast<std::uintptr_t>(base) + heap_offset;
  return (alignment - heap % alignment) % alignment;
}

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_SEGMENT_MAP_H_
