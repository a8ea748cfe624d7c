// Whether this test executable is built with AddressSanitizer or ThreadSanitizer.
#ifndef HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_
#define HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_

#include "common/sanitizers.h"

namespace hp::test {

inline constexpr bool kSanitized = HP_ADDRESS_SANITIZER || HP_THREAD_SANITIZER;

}  // namespace hp::test

#endif  // HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_
