// Point-to-point synchronization (wait_until and test families, their _vector forms and the
// deprecated waits) and the world barriers.
//
// Waits on 32/64-bit words with one comparison value use hp::shmem's typed waits (wait_until,
// wait_until_all/_any/_some). The others (16-bit words, a comparison value per word:
// wait_until_any_vector, wait_until_some_vector) wait through hp::shmem::wait_for
// (c_api::wait_until_ready), with the same wake-ups, abort and deadline. Tests let the
// transport progress (hp::shmem::progress), then read the words directly (acquire loads, as
// hp::shmem's waits do) after checking that they are symmetric and aligned.
#include <fmt/format.h>

#include "shmem/any_search.h"
#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::as_word;
using c_api::check;
using c_api::kNativeWord;
using c_api::to_word;
using hp::shmem::Cmp;

namespace {

// The comparison value of word i: one for all words, or one per word (the _vector forms).
template <typename T>
struct OneValue {
  T value;
  T operator()(std::size_t) const { return value; }
};
template <typename T>
struct EachValue {
  const T* values;
  T operator()(std::size_t i) const { return values[i]; }
};
template <typename Values>
inline constexpr bool kOneValue = false;
template <typename T>
inline constexpr bool kOneValue<OneValue<T>> = true;

bool active(const int* status, std::size_t i) { return status == nullptr || status[i] == 0; }

bool any_active(const int* status, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (active(status, i)) return true;
  }
  return false;
}

// Loads through the program's address of a global word read the same memory as its heap copy.
template <typename T, typename Values>
bool satisfied(const T* ivars, std::size_t i, Cmp cmp, const Values& values) {
  return hp::shmem::satisfies(c_api::load(&ivars[i]), cmp, values(i));
}

// The comparison, after checking it and the words (their symmetric addresses: see sym()), and
// letting the transport apply what other PEs sent (a test reads the words once; the waits poll
// with progress anyway).
template <typename T>
Cmp checked(const char* routine, const T* ivars, std::size_t n, int cmp) {
  Cmp c{};
  check(routine, c_api::to_cmp(routine, cmp, &c));
  check(routine, c_api::check_local_words(routine, c_api::sym(ivars), n, sizeof(T)));
  hp::shmem::progress();
  return c;
}

// Polls until pick() finds a word (see the file comment).
void poll(const char* routine, const void* ivars, std::size_t n, Cmp cmp,
          const std::function<bool()>& pick) {
  check(routine, c_api::wait_until_ready(pick, [&] {
          return fmt::format("{}({} word(s) at {}, {})", routine, n, ivars, to_string(cmp));
        }));
}

// ---- tests --------------------------------------------------------------------------------

template <typename T, typename Values>
int test_all(const char* routine, T* ivars, std::size_t n, const int* status, int cmp,
             const Values& values) {
  const Cmp c = checked(routine, ivars, n, cmp);
  for (std::size_t i = 0; i < n; ++i) {
    if (active(status, i) && !satisfied(ivars, i, c, values)) return 0;
  }
  return 1;
}

template <typename T, typename Values>
std::size_t test_any(const char* routine, T* ivars, std::size_t n, const int* status, int cmp,
                     const Values& values) {
  const Cmp c = checked(routine, ivars, n, cmp);
  return hp::shmem::find_any(
      ivars, n, [&](std::size_t i) { return active(status, i) && satisfied(ivars, i, c, values); });
}

template <typename T, typename Values>
std::size_t test_some(const char* routine, T* ivars, std::size_t n, std::size_t* indices,
                      const int* status, int cmp, const Values& values) {
  const Cmp c = checked(routine, ivars, n, cmp);
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (active(status, i) && satisfied(ivars, i, c, values)) indices[count++] = i;
  }
  return count;
}

// ---- waits --------------------------------------------------------------------------------

template <typename T>
void wait_one(const char* routine, T* ivar, int cmp, T value) {
  if constexpr (kNativeWord<T>) {
    Cmp c{};
    check(routine, c_api::to_cmp(routine, cmp, &c));
    check(routine, hp::shmem::wait_until(as_word(ivar), c, to_word(value)));
  } else {
    const Cmp c = checked(routine, ivar, 1, cmp);
    poll(routine, ivar, 1, c, [&] { return hp::shmem::satisfies(c_api::load(ivar), c, value); });
  }
}

// Each active word satisfies the comparison at some point during the call (once seen, a word
// is not watched again), as hp::shmem::wait_until_all.
template <typename T, typename Values>
void wait_all(const char* routine, T* ivars, std::size_t n, const int* status, int cmp,
              const Values& values) {
  if (n == 0) return;
  if constexpr (kNativeWord<T> && kOneValue<Values>) {
    Cmp c{};
    check(routine, c_api::to_cmp(routine, cmp, &c));
    check(routine, hp::shmem::wait_until_all(as_word(ivars), n, status, c, to_word(values.value)));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      if (active(status, i)) wait_one(routine, &ivars[i], cmp, values(i));
    }
  }
}

template <typename T, typename Values>
std::size_t wait_any(const char* routine, T* ivars, std::size_t n, const int* status, int cmp,
                     const Values& values) {
  if (n == 0) return SIZE_MAX;
  const Cmp c = checked(routine, ivars, n, cmp);
  std::size_t index = SIZE_MAX;
  if constexpr (kNativeWord<T> && kOneValue<Values>) {
    check(routine,
          hp::shmem::wait_until_any(as_word(ivars), n, status, c, to_word(values.value), &index));
  } else if (any_active(status, n)) {
    poll(routine, ivars, n, c, [&] {
      index = hp::shmem::find_any(ivars, n, [&](std::size_t i) {
        return active(status, i) && satisfied(ivars, i, c, values);
      });
      return index != SIZE_MAX;
    });
  }
  return index;
}

template <typename T, typename Values>
std::size_t wait_some(const char* routine, T* ivars, std::size_t n, std::size_t* indices,
                      const int* status, int cmp, const Values& values) {
  if (n == 0) return 0;
  const Cmp c = checked(routine, ivars, n, cmp);
  std::size_t count = 0;
  if constexpr (kNativeWord<T> && kOneValue<Values>) {
    check(routine, hp::shmem::wait_until_some(as_word(ivars), n, status, c, to_word(values.value),
                                              indices, &count));
  } else if (any_active(status, n)) {
    poll(routine, ivars, n, c, [&] {
      count = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (active(status, i) && satisfied(ivars, i, c, values)) indices[count++] = i;
      }
      return count > 0;
    });
  }
  return count;
}

}  // namespace

extern "C" {

#define HP_C_SYNC(TYPE, NAME)                                                                     \
  void shmem_##NAME##_wait_until(TYPE* ivar, int cmp, TYPE cmp_value) {                           \
    wait_one("shmem_" #NAME "_wait_until", ivar, cmp, cmp_value);                                 \
  }                                                                                               \
  void shmem_##NAME##_wait_until_all(TYPE* ivars, size_t nelems, const int* status, int cmp,      \
                                     TYPE cmp_value) {                                            \
    wait_all("shmem_" #NAME "_wait_until_all", ivars, nelems, status, cmp,                        \
             OneValue<TYPE>{cmp_value});                                                          \
  }                                                                                               \
  size_t shmem_##NAME##_wait_until_any(TYPE* ivars, size_t nelems, const int* status, int cmp,    \
                                       TYPE cmp_value) {                                          \
    return wait_any("shmem_" #NAME "_wait_until_any", ivars, nelems, status, cmp,                 \
                    OneValue<TYPE>{cmp_value});                                                   \
  }                                                                                               \
  size_t shmem_##NAME##_wait_until_some(TYPE* ivars, size_t nelems, size_t* indices,              \
                                        const int* status, int cmp, TYPE cmp_value) {             \
    return wait_some("shmem_" #NAME "_wait_until_some", ivars, nelems, indices, status, cmp,      \
                     OneValue<TYPE>{cmp_value});                                                  \
  }                                                                                               \
  void shmem_##NAME##_wait_until_all_vector(TYPE* ivars, size_t nelems, const int* status,        \
                                            int cmp, TYPE* cmp_values) {                          \
    wait_all("shmem_" #NAME "_wait_until_all_vector", ivars, nelems, status, cmp,                 \
             EachValue<TYPE>{cmp_values});                                                        \
  }                                                                                               \
  size_t shmem_##NAME##_wait_until_any_vector(TYPE* ivars, size_t nelems, const int* status,      \
                                              int cmp, TYPE* cmp_values) {                        \
    return wait_any("shmem_" #NAME "_wait_until_any_vector", ivars, nelems, status, cmp,          \
                    EachValue<TYPE>{cmp_values});                                                 \
  }                                                                                               \
  size_t shmem_##NAME##_wait_until_some_vector(TYPE* ivars, size_t nelems, size_t* indices,       \
                                               const int* status, int cmp, TYPE* cmp_values) {    \
    return wait_some("shmem_" #NAME "_wait_until_some_vector", ivars, nelems, indices, status,    \
                     cmp, EachValue<TYPE>{cmp_values});                                           \
  }                                                                                               \
  int shmem_##NAME##_test(TYPE* ivar, int cmp, TYPE cmp_value) {                                  \
    return test_all("shmem_" #NAME "_test", ivar, 1, nullptr, cmp, OneValue<TYPE>{cmp_value});    \
  }                                                                                               \
  int shmem_##NAME##_test_all(TYPE* ivars, size_t nelems, const int* status, int cmp,             \
                              TYPE cmp_value) {                                                   \
    return test_all("shmem_" #NAME "_test_all", ivars, nelems, status, cmp,                       \
                    OneValue<TYPE>{cmp_value});                                                   \
  }                                                                                               \
  size_t shmem_##NAME##_test_any(TYPE* ivars, size_t nelems, const int* status, int cmp,          \
                                 TYPE cmp_value) {                                                \
    return test_any("shmem_" #NAME "_test_any", ivars, nelems, status, cmp,                       \
                    OneValue<TYPE>{cmp_value});                                                   \
  }                                                                                               \
  size_t shmem_##NAME##_test_some(TYPE* ivars, size_t nelems, size_t* indices, const int* status, \
                                  int cmp, TYPE cmp_value) {                                      \
    return test_some("shmem_" #NAME "_test_some", ivars, nelems, indices, status, cmp,            \
                     OneValue<TYPE>{cmp_value});                                                  \
  }                                                                                               \
  int shmem_##NAME##_test_all_vector(TYPE* ivars, size_t nelems, const int* status, int cmp,      \
                                     TYPE* cmp_values) {                                          \
    return test_all("shmem_" #NAME "_test_all_vector", ivars, nelems, status, cmp,                \
                    EachValue<TYPE>{cmp_values});                                                 \
  }                                                                                               \
  size_t shmem_##NAME##_test_any_vector(TYPE* ivars, size_t nelems, const int* status, int cmp,   \
                                        TYPE* cmp_values) {                                       \
    return test_any("shmem_" #NAME "_test_any_vector", ivars, nelems, status, cmp,                \
                    EachValue<TYPE>{cmp_values});                                                 \
  }                                                                                               \
  size_t shmem_##NAME##_test_some_vector(TYPE* ivars, size_t nelems, size_t* indices,             \
                                         const int* status, int cmp, TYPE* cmp_values) {          \
    return test_some("shmem_" #NAME "_test_some_vector", ivars, nelems, indices, status, cmp,     \
                     EachValue<TYPE>{cmp_values});                                                \
  }
HP_SHMEM_SYNC_TYPES(HP_C_SYNC)
#undef HP_C_SYNC

// Deprecated: wait until the word differs from cmp_value.
#define HP_C_DEPRECATED_WAIT(TYPE, NAME)                             \
  void shmem_##NAME##_wait(TYPE* ivar, TYPE cmp_value) {             \
    wait_one("shmem_" #NAME "_wait", ivar, SHMEM_CMP_NE, cmp_value); \
  }
HP_SHMEM_DEPRECATED_TYPES(HP_C_DEPRECATED_WAIT)
#undef HP_C_DEPRECATED_WAIT

void shmem_short_wait(short* ivar, short cmp_value) {
  wait_one("shmem_short_wait", ivar, SHMEM_CMP_NE, cmp_value);
}

void shmem_wait(long* ivar, long cmp_value) {
  wait_one("shmem_wait", ivar, SHMEM_CMP_NE, cmp_value);
}

// C11 callers reach shmem_long_wait_until through the type-generic macro of the same name.
void shmem_wait_until(long* ivar, int cmp, long cmp_value) {
  wait_one("shmem_wait_until", ivar, cmp, cmp_value);
}

void shmem_barrier_all(void) { check("shmem_barrier_all", hp::shmem::barrier_all()); }

void shmem_sync_all(void) { check("shmem_sync_all", hp::shmem::sync_all()); }

}  // extern "C"
