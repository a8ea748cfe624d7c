// Prefetching memory a thread is about to write.
//
// A plain prefetch (PREFETCHT0) brings a line in shared. When another core holds that line,
// the first store to it must then still ask that core to give it up, and because x86 stores
// commit in program order, that wait holds up every later store of the thread as well.
// PREFETCHW asks for the line owned, so the stores find it ready. GCC emits PREFETCHW for
// __builtin_prefetch(p, 1) only where the target has PRFCHW, which the baseline x86-64 does not
// promise (and GCC 12 drops the prefetches of a target("prfchw") function inlined into a
// baseline one), so the instructions are written out, and the caller says whether the CPU has
// PREFETCHW (CpuFeatures::prfchw).
#ifndef HYPER_PARALLEL_COMMON_PREFETCH_H_
#define HYPER_PARALLEL_COMMON_PREFETCH_H_

#include <cstddef>
#include <utility>

namespace hp {

namespace detail {
template <bool kOwned>
inline void prefetch_line(const char* line) noexcept {
  if constexpr (kOwned) {
    asm volatile("prefetchw %0" : : "m"(*line));
  } else {
    asm volatile("prefetcht0 %0" : : "m"(*line));
  }
}
}  // namespace detail

// Prefetches every 64-byte line of [p, p + Bytes) for reading (PREFETCHT0, shared: the thread
// that writes those lines keeps them).
template <std::size_t Bytes>
inline void prefetch_for_read(const void* p) noexcept {
  const auto* c = static_cast<const char*>(p);
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    (detail::prefetch_line<false>(c + L * 64), ...);
  }
  (std::make_index_sequence<(Bytes + 63) / 64>{});
}

// Prefetches every 64-byte line of [p, p + Bytes) for writing: owned with PREFETCHW when
// `prfchw`, shared (prefetch_for_read) otherwise. Unrolled: one instruction per line (the runtime
// prefetches a whole task slot, about 20 lines, per submit, where a loop cost 7 instructions a
// line).
template <std::size_t Bytes>
inline void prefetch_for_write(const void* p, bool prfchw) noexcept {
  if (!prfchw) return prefetch_for_read<Bytes>(p);
  const auto* c = static_cast<const char*>(p);
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    (detail::prefetch_line<true>(c + L * 64), ...);
  }
  (std::make_index_sequence<(Bytes + 63) / 64>{});
}

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_PREFETCH_H_
