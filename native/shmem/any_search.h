// The search of the _any waits and tests (wait_until_any, test_any and their _vector forms):
// OpenSHMEM requires that a series of calls eventually returns every index that satisfies the
// condition, so each search starts one past the index the calling thread's previous search of
// the same words returned instead of at 0 (a program that handles one index per call would
// otherwise never see the others while a lower one keeps being satisfied). The start is kept
// per set of words (their address and count), so searches of other sets in between do not move
// it; each thread remembers the last kAnySearchSets sets it searched.
#ifndef HYPER_PARALLEL_SHMEM_ANY_SEARCH_H_
#define HYPER_PARALLEL_SHMEM_ANY_SEARCH_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace hp::shmem {

inline constexpr std::size_t kAnySearchSets = 32;

// Where this thread's next search of the n words at `words` starts (modulo n). A set not
// among the remembered ones replaces the least recently searched and starts at 0.
inline std::size_t& any_search_start(const void* words, std::size_t n) {
  struct Entry {
    const void* words = nullptr;
    std::size_t n = 0;
    std::size_t start = 0;
    std::uint64_t used = 0;  // when this thread last searched the set
  };
  static thread_local std::array<Entry, kAnySearchSets> sets{};
  static thread_local std::uint64_t clock = 0;
  Entry* oldest = &sets[0];
  for (Entry& e : sets) {
    if (e.words == words && e.n == n) {
      e.used = ++clock;
      return e.start;
    }
    if (e.used < oldest->used) oldest = &e;
  }
  *oldest = Entry{words, n, 0, ++clock};
  return oldest->start;
}

// The first i in [0, n), rotated to start at this thread's start for `words`, for which
// found(i) holds; SIZE_MAX when none does. A hit moves the start one past it.
template <typename Found>
std::size_t find_any(const void* words, std::size_t n, const Found& found) {
  if (n == 0) return SIZE_MAX;
  std::size_t& start = any_search_start(words, n);
  std::size_t i = start % n;
  for (std::size_t k = 0; k < n; ++k, i = i + 1 == n ? 0 : i + 1) {
    if (found(i)) {
      start = i + 1;
      return i;
    }
  }
  return SIZE_MAX;
}

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_ANY_SEARCH_H_
