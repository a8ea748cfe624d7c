// Which sanitizers instrument the translation unit that includes this header: GCC defines
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang answers __has_feature instead.
//   HP_ADDRESS_SANITIZER, HP_THREAD_SANITIZER: 1 or 0.
#ifndef HYPER_PARALLEL_COMMON_SANITIZERS_H_
#define HYPER_PARALLEL_COMMON_SANITIZERS_H_

#if defined(__has_feature)
#define HP_HAS_FEATURE(feature) __has_feature(feature)
#else
#define HP_HAS_FEATURE(feature) 0
#endif

#if defined(__SANITIZE_ADDRESS__) || HP_HAS_FEATURE(address_sanitizer)
#define HP_ADDRESS_SANITIZER 1
#else
#define HP_ADDRESS_SANITIZER 0
#endif

#if defined(__SANITIZE_THREAD__) || HP_HAS_FEATURE(thread_sanitizer)
#define HP_THREAD_SANITIZER 1
#else
#define HP_THREAD_SANITIZER 0
#endif

#endif  // HYPER_PARALLEL_COMMON_SANITIZERS_H_
