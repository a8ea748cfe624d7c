// The search of the _any waits and tests (wait_until_any, test_any and their _vector forms):
// OpenSHMEM requires that a series of calls eventually returns every index that satisfies the
// condition, so each search starts one past the index the calling thread's previous search
// returned instead of at 0 (a program that handles one index per call would otherwise never see
// the others while a lower one keeps being satisfied).
#ifndef HYPER_PARALLEL_SHMEM_ANY_SEARCH_H_
#define HYPER_PARALLEL_SHMEM_ANY_SEARCH_H_

#include <cstddef>
#include <cstdint>

namespace hp::shmem {

// Where this thread's next search starts (taken modulo the number of words).
inline std::size_t& any_search_start() {
  static thread_local std::size_t start = 0;
  return start;
}

// The first i in [0, n), rotated to start at this thread's start, for which found(i) holds;
// SIZE_MAX when none does. A hit moves the start one past it.
template <typename Found>
std::size_t find_any(std::size_t n, const Found& found) {
  if (n == 0) return SIZE_MAX;
  std::size_t& start = any_search_start();
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
