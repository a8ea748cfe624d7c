// Copying a freshly written object without waiting for its stores.
//
// A load is served from the store buffer (store-to-load forwarding) only when one earlier
// store holds all of its bytes; a load that spans two stores, or a store and memory, waits until
// those stores have reached the cache, and x86 stores reach it in order: behind every store the
// thread made before (on the task runtime's submit path, stores to lines other cores hold).
// A struct written field by field (a TensorView built just before a submit: 8-byte fields, and
// 16-byte stores of zeros at an 8-byte offset) and then copied with the 16-byte loads GCC
// chooses for a struct copy waits so on nearly every load. Copied a word at a time, from a
// struct whose writers store each of its words whole, each load lies within one store.
#ifndef HYPER_PARALLEL_COMMON_WORD_COPY_H_
#define HYPER_PARALLEL_COMMON_WORD_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hp {

// Copies [src, src + Bytes) to dst in 8-byte loads and stores (Bytes a multiple of 8). The
// empty asm keeps each word in a register of its own: GCC would merge the loads into 16-byte
// ones.
template <std::size_t Bytes>
inline void copy_words(void* dst, const void* src) noexcept {
  static_assert(Bytes % 8 == 0, "copy_words copies whole 8-byte words");
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
#pragma GCC unroll 64
  for (std::size_t i = 0; i < Bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, in + i, 8);
    asm("" : "+r"(word));
    std::memcpy(out + i, &word, 8);
  }
}

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_WORD_COPY_H_
