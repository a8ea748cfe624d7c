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

namespace hp {

// Prefetches every 64-byte line of [p, p + bytes) for writing: owned with PREFETCHW when
// `prfchw`, shared (PREFETCHT0) otherwise.
inline void prefetch_for_write(const void* p, std::size_t bytes, bool prfchw) noexcept {
  const auto* c = static_cast<const char*>(p);
  for (std::size_t offset = 0; offset < bytes; offset += 64) {
    if (prfchw) {
      asm volatile("prefetchw %0" : : "m"(c[offset]));
    } else {
      asm volatile("prefetcht0 %0" : : "m"(c[offset]));
    }
  }
}

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_PREFETCH_H_
