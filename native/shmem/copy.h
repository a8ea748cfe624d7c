// Copying a put's bytes into another PE's mapped heap.
//
// Large puts (>= kStreamingBytes) use non-temporal (streaming) stores when the CPU has AVX2:
// a destination that large is not going to be in any cache, and streaming stores skip the
// read-for-ownership of every destination line (bench/shmem/RESULTS.md compares the two).
// Smaller puts use memcpy, which leaves the data in cache for a target
// that reads it soon. Streaming stores are weakly ordered: the copy ends with an sfence, so a
// signal written after it is seen after the data.
#ifndef HYPER_PARALLEL_SHMEM_COPY_H_
#define HYPER_PARALLEL_SHMEM_COPY_H_

#include <cstddef>

namespace hp::shmem {

inline constexpr std::size_t kStreamingBytes = std::size_t(8) << 20;

void copy_to_peer(void* dest, const void* source, std::size_t bytes) noexcept;

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_COPY_H_
