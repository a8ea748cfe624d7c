// Copies of large rows that bypass the cache (non-temporal stores): dispatch's expanded rows and
// combine's return rows are written once and read later by another pass or another rank, so
// fetching their lines first (a normal store's read-for-ownership) only doubles the traffic.
// Stores are weakly ordered: call stream_fence() before anything that publishes the data.
#ifndef HYPER_PARALLEL_MOE_STREAM_COPY_H_
#define HYPER_PARALLEL_MOE_STREAM_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace hp::moe {

inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  if (bytes < head + 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

// Orders every earlier stream_copy before later stores (and the flags that publish them).
inline void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_STREAM_COPY_H_
