// What the OpenSHMEM C API's source files share (internal header): error reporting in the
// OpenSHMEM style, the mapping of C types onto hp::shmem's 32/64-bit instantiations, the
// translation of global variables' addresses into the symmetric heap, team and context
// handles, and a general wait for the waits hp::shmem has no typed form of.
#ifndef HYPER_PARALLEL_SHMEM_C_API_C_API_H_
#define HYPER_PARALLEL_SHMEM_C_API_C_API_H_

#include <atomic>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "common/status.h"
#include "shmem/shmem.h"

// The C declarations, exported: every definition in these files matches one of them.
#pragma GCC visibility push(default)
#include "shmem/c_api/shmem.h"
#pragma GCC visibility pop

namespace hp::shmem::c_api {

static_assert(SHMEM_CMP_EQ == int(Cmp::kEq) && SHMEM_CMP_NE == int(Cmp::kNe) &&
              SHMEM_CMP_GT == int(Cmp::kGt) && SHMEM_CMP_GE == int(Cmp::kGe) &&
              SHMEM_CMP_LT == int(Cmp::kLt) && SHMEM_CMP_LE == int(Cmp::kLe));
static_assert(SHMEM_SIGNAL_SET == int(SignalOp::kSet) && SHMEM_SIGNAL_ADD == int(SignalOp::kAdd));

// ---- errors ---------------------------------------------------------------------------------

// Prints "hp shmem: <routine>: <status>" to stderr and ends the process with status 1, without
// the at-exit finalize (its barrier would wait for PEs that wait for this one); hprun then ends
// the job.
[[noreturn]] void fail(const char* routine, const Status& status);

inline void check(const char* routine, const Status& status) {
  if (!status.is_ok()) [[unlikely]]
    fail(routine, status);
}

// For the routines that return an int: 0, or 1 after printing the same line as fail().
int report(const char* routine, const Status& status);

// count * size bytes, or INVALID_ARGUMENT when that overflows.
Status checked_bytes(const char* routine, std::size_t count, std::size_t size, std::size_t* bytes);

// The comparison `cmp` (SHMEM_CMP_*), or INVALID_ARGUMENT.
Status to_cmp(const char* routine, int cmp, Cmp* out);

// ---- C types as hp::shmem words ---------------------------------------------------------------

template <std::size_t kBytes, bool kSigned>
struct IntOfSize;
template <>
struct IntOfSize<2, true> {
  using type = std::int16_t;
};
template <>
struct IntOfSize<2, false> {
  using type = std::uint16_t;
};
template <>
struct IntOfSize<4, true> {
  using type = std::int32_t;
};
template <>
struct IntOfSize<4, false> {
  using type = std::uint32_t;
};
template <>
struct IntOfSize<8, true> {
  using type = std::int64_t;
};
template <>
struct IntOfSize<8, false> {
  using type = std::uint64_t;
};

// The fixed-size integer a C type is handled as: same size and signedness (floating-point
// types as their unsigned bit patterns). long long and int64_t differ as C types but are the
// same word.
template <typename T>
using Word = typename IntOfSize<sizeof(T), std::is_integral_v<T> && std::is_signed_v<T>>::type;

// hp::shmem instantiates its waits and atomics for 32- and 64-bit words.
template <typename T>
inline constexpr bool kNativeWord = sizeof(T) == 4 || sizeof(T) == 8;

template <typename T>
Word<T> to_word(T value) {
  return std::bit_cast<Word<T>>(value);
}
template <typename T>
T from_word(Word<T> word) {
  return std::bit_cast<T>(word);
}

// An acquire load of this PE's word, as hp::shmem's waits read them.
template <typename T>
T load(const T* word) {
  return std::atomic_ref<T>(*const_cast<T*>(word)).load(std::memory_order_acquire);
}

// Checks that n words of sizeof(T) bytes at `words` are this PE's, symmetric and aligned
// (FAILED_PRECONDITION before init, NOT_SYMMETRIC, MISALIGNED).
Status check_local_words(const char* routine, const void* words, std::size_t n, std::size_t size);

// Waits until ready() holds (hp::shmem::wait_for: eventcount wake-ups, the job's abort, and
// HP_SHMEM_TIMEOUT_S) for the waits hp::shmem has no typed form of; a TIMEOUT names
// describe(), like hp::shmem's own waits.
Status wait_until_ready(const std::function<bool()>& ready,
                        const std::function<std::string()>& describe);

// ---- global and static variables (symmetric_data.cpp) ----------------------------------------

// The executable's writable segment [begin, end), moved at shmem_init into the symmetric heap
// block `block`; empty before.
struct DataSegment {
  std::byte* begin = nullptr;
  std::byte* end = nullptr;
  std::byte* block = nullptr;
};
extern DataSegment g_data;

// Collective, in shmem_init after hp::shmem::init: moves the segment into the heap.
Status map_data_segment();

// `p`, or, for an address of a global or static variable of the program, the same memory's
// address in the symmetric heap (what hp::shmem's routines accept). Every pointer a routine
// hands to hp::shmem goes through sym().
template <typename T>
T* sym(T* p) {
  const auto* b = reinterpret_cast<const std::byte*>(p);
  if (b < g_data.begin || b >= g_data.end) return p;
  return reinterpret_cast<T*>(g_data.block + (b - g_data.begin));
}

// The symmetric word at `p` (through sym(): a global variable's word is its heap copy).
template <typename T>
Word<T>* as_word(T* p) {
  return reinterpret_cast<Word<T>*>(sym(p));
}
template <typename T>
const Word<T>* as_word(const T* p) {
  return reinterpret_cast<const Word<T>*>(sym(p));
}

// ---- teams ----------------------------------------------------------------------------------

// INVALID_ARGUMENT: `which` (an argument of `routine`) is no team this PE is a member of.
Status invalid_team(const char* routine, const char* which);

// Forgets every split's configuration (the last shmem_finalize: the teams are gone).
void forget_team_configs();

// SHMEM_TEAM_INVALID, _WORLD and _SHARED are 0, 1 and 2 (kTeamInvalid, kTeamWorld and
// kTeamShared); every team handle h is h + 1.
inline Team to_team(shmem_team_t handle) {
  const auto value = reinterpret_cast<std::uintptr_t>(handle);
  if (value < 1 || value - 1 > std::uintptr_t(INT_MAX)) return kTeamInvalid;
  return Team(value - 1);
}
inline shmem_team_t to_handle(Team team) {
  if (team < 0) return SHMEM_TEAM_INVALID;
  return reinterpret_cast<shmem_team_t>(std::uintptr_t(team) + 1);
}

// ---- contexts (contexts.cpp) -----------------------------------------------------------------

// The world PE that PE `pe` of context `ctx` is (a context made from a team numbers PEs as the
// team does); ends the process naming `routine` for an invalid context or a PE outside it.
int ctx_pe(const char* routine, shmem_ctx_t ctx, int pe);

// Frees every context (the last shmem_finalize: finalizing releases all the library holds).
void release_contexts();

}  // namespace hp::shmem::c_api

#endif  // HYPER_PARALLEL_SHMEM_C_API_C_API_H_
