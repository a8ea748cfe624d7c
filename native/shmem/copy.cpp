#include "shmem/copy.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/cpu_features.h"

namespace hp::shmem {
namespace {

__attribute__((target("avx2"))) void stream_copy(void* dest, const void* source,
                                                 std::size_t bytes) noexcept {
  auto* d = static_cast<char*>(dest);
  const auto* s = static_cast<const char*>(source);
  // Head: up to the first 32-byte aligned destination address, with ordinary stores.
  const std::size_t head = (32 - reinterpret_cast<std::uintptr_t>(d) % 32) % 32;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  std::memcpy(d + i, s + i, bytes - i);  // tail
  _mm_sfence();
}

}  // namespace

void copy_to_peer(void* dest, const void* source, std::size_t bytes) noexcept {
  static const bool avx2 = cpu_features().avx2;
  if (bytes >= kStreamingBytes && avx2) {
    stream_copy(dest, source, bytes);
  } else {
    std::memcpy(dest, source, bytes);
  }
}

}  // namespace hp::shmem
