// Whether this test executable is built with AddressSanitizer or ThreadSanitizer (GCC defines
// __SANITIZE_*__, clang answers __has_feature).
#ifndef HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_
#define HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_

namespace hp::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace hp::test

#endif  // HYPER_PARALLEL_TESTS_COMMON_SANITIZED_H_
