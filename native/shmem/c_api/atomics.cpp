// Atomic memory operations (blocking and non-blocking forms) and distributed locks.
//
// Every C type is handled as the hp::shmem word of its size and signedness (float and double as
// their bit patterns: fetch, set and swap only move bits). The bitwise AMOs are compare-and-swap
// loops, as hp::shmem has no bitwise atomics.
#include "shmem/c_api/c_api.h"
#include "shmem/job.h"

namespace c_api = hp::shmem::c_api;
using c_api::as_word;
using c_api::check;
using c_api::from_word;
using c_api::to_word;
using c_api::Word;
using hp::Status;

namespace {

template <typename T>
T fetch(const char* routine, const T* source, int pe) {
  Word<T> out{};
  check(routine, hp::shmem::atomic_fetch(as_word(source), pe, &out));
  return from_word<T>(out);
}

template <typename T>
void set(const char* routine, T* dest, T value, int pe) {
  check(routine, hp::shmem::atomic_set(as_word(dest), to_word(value), pe));
}

// hp::shmem's atomics of the form (dest, value, pe, &old): swap and fetch_add.
template <typename W>
using FetchOp = Status (*)(W*, W, int, W*);

template <typename T>
T fetch_op(const char* routine, FetchOp<Word<T>> op, T* dest, T value, int pe) {
  Word<T> old{};
  check(routine, op(as_word(dest), to_word(value), pe, &old));
  return from_word<T>(old);
}

template <typename T>
T swap(const char* routine, T* dest, T value, int pe) {
  return fetch_op(routine, &hp::shmem::atomic_swap<Word<T>>, dest, value, pe);
}

template <typename T>
T compare_swap(const char* routine, T* dest, T cond, T value, int pe) {
  Word<T> old{};
  check(routine,
        hp::shmem::atomic_compare_swap(as_word(dest), to_word(cond), to_word(value), pe, &old));
  return from_word<T>(old);
}

template <typename T>
T fetch_add(const char* routine, T* dest, T value, int pe) {
  return fetch_op(routine, &hp::shmem::atomic_fetch_add<Word<T>>, dest, value, pe);
}

template <typename T>
void add(const char* routine, T* dest, T value, int pe) {
  check(routine, hp::shmem::atomic_add(as_word(dest), to_word(value), pe));
}

enum class Bitwise { kAnd, kOr, kXor };

template <typename T>
T fetch_bitwise(const char* routine, Bitwise op, T* dest, T value, int pe) {
  using W = Word<T>;
  const W operand = to_word(value);
  W expected{};
  check(routine, hp::shmem::atomic_fetch(as_word(dest), pe, &expected));
  for (;;) {
    const W desired = op == Bitwise::kAnd  ? W(expected & operand)
                      : op == Bitwise::kOr ? W(expected | operand)
                                           : W(expected ^ operand);
    W found{};
    check(routine, hp::shmem::atomic_compare_swap(as_word(dest), expected, desired, pe, &found));
    if (found == expected) return from_word<T>(found);
    expected = found;
  }
}

// ---- locks ------------------------------------------------------------------------------------
// An MCS queue lock in the symmetric long: two 32-bit halves. On PE 0, the lock's home, half 0
// is the queue's tail: the last PE (+1) that holds or waits for the lock, 0 when it is free. On
// every PE, half 1 is its queue node: its successor (+1; the successor adds itself when it
// queues up) plus kGranted, added by its predecessor when it hands the lock over. Each PE waits
// on its own node, with hp::shmem's deadline.
constexpr int kHome = 0;
constexpr std::int32_t kGranted = 1 << 24;  // above every PE + 1
static_assert(kGranted > hp::shmem::kMaxPes);

std::int32_t* tail_of(long* lock) { return reinterpret_cast<std::int32_t*>(c_api::sym(lock)); }
std::int32_t* node_of(long* lock) { return tail_of(lock) + 1; }

// Swaps this PE into the tail (when `only_if_free`: only if the lock is free). Returns the
// previous tail. Resetting the node is safe only while this PE is in no queue: nobody links to
// it then. A PE that tests the lock may hold it (its successor's link is in its node), so a test
// first looks at the tail and leaves everything alone when the lock is set.
std::int32_t enqueue(const char* routine, long* lock, bool only_if_free) {
  const int me = hp::shmem::my_pe();
  std::int32_t previous = 0;
  if (only_if_free) {
    check(routine, hp::shmem::atomic_fetch(tail_of(lock), kHome, &previous));
    if (previous != 0) return previous;
  }
  check(routine, hp::shmem::atomic_set(node_of(lock), 0, me));  // nobody links to it now
  if (only_if_free) {
    check(routine, hp::shmem::atomic_compare_swap(tail_of(lock), 0, me + 1, kHome, &previous));
  } else {
    check(routine, hp::shmem::atomic_swap(tail_of(lock), me + 1, kHome, &previous));
  }
  return previous;
}

}  // namespace

extern "C" {

// One routine shmem_<NAME>_<OP> per macro (the 1.5 and the pre-1.4 names share them).
#define HP_C_FETCH(TYPE, NAME, OP)                       \
  TYPE shmem_##NAME##_##OP(const TYPE* source, int pe) { \
    return fetch("shmem_" #NAME "_" #OP, source, pe);    \
  }
#define HP_C_SET(TYPE, NAME, OP)                             \
  void shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) { \
    set("shmem_" #NAME "_" #OP, dest, value, pe);            \
  }
#define HP_C_SWAP(TYPE, NAME, OP)                            \
  TYPE shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) { \
    return swap("shmem_" #NAME "_" #OP, dest, value, pe);    \
  }
#define HP_C_COMPARE_SWAP(TYPE, NAME, OP)                               \
  TYPE shmem_##NAME##_##OP(TYPE* dest, TYPE cond, TYPE value, int pe) { \
    return compare_swap("shmem_" #NAME "_" #OP, dest, cond, value, pe); \
  }
#define HP_C_FETCH_INC(TYPE, NAME, OP)                                        \
  TYPE shmem_##NAME##_##OP(TYPE* dest, int pe) {                              \
    return fetch_add("shmem_" #NAME "_" #OP, dest, static_cast<TYPE>(1), pe); \
  }
#define HP_C_INC(TYPE, NAME, OP)                                 \
  void shmem_##NAME##_##OP(TYPE* dest, int pe) {                 \
    add("shmem_" #NAME "_" #OP, dest, static_cast<TYPE>(1), pe); \
  }
#define HP_C_FETCH_ADD(TYPE, NAME, OP)                         \
  TYPE shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) {   \
    return fetch_add("shmem_" #NAME "_" #OP, dest, value, pe); \
  }
#define HP_C_ADD(TYPE, NAME, OP)                             \
  void shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) { \
    add("shmem_" #NAME "_" #OP, dest, value, pe);            \
  }
#define HP_C_FETCH_BITWISE(TYPE, NAME, OP, KIND)                                  \
  TYPE shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) {                      \
    return fetch_bitwise("shmem_" #NAME "_" #OP, Bitwise::KIND, dest, value, pe); \
  }
#define HP_C_BITWISE(TYPE, NAME, OP, KIND)                                       \
  void shmem_##NAME##_##OP(TYPE* dest, TYPE value, int pe) {                     \
    (void)fetch_bitwise("shmem_" #NAME "_" #OP, Bitwise::KIND, dest, value, pe); \
  }

// clang-format off
#define HP_C_AMO_EXTENDED(TYPE, NAME)                                                            \
  HP_C_FETCH(TYPE, NAME, atomic_fetch)                                                           \
  HP_C_SET(TYPE, NAME, atomic_set) HP_C_SWAP(TYPE, NAME, atomic_swap)
#define HP_C_AMO_STANDARD(TYPE, NAME)                                                            \
  HP_C_AMO_EXTENDED(TYPE, NAME)                                                                  \
  HP_C_COMPARE_SWAP(TYPE, NAME, atomic_compare_swap)                                             \
  HP_C_FETCH_INC(TYPE, NAME, atomic_fetch_inc) HP_C_INC(TYPE, NAME, atomic_inc)                  \
  HP_C_FETCH_ADD(TYPE, NAME, atomic_fetch_add) HP_C_ADD(TYPE, NAME, atomic_add)
#define HP_C_AMO_BITWISE(TYPE, NAME)                                                             \
  HP_C_FETCH_BITWISE(TYPE, NAME, atomic_fetch_and, kAnd)                                         \
  HP_C_BITWISE(TYPE, NAME, atomic_and, kAnd)                                                     \
  HP_C_FETCH_BITWISE(TYPE, NAME, atomic_fetch_or, kOr) HP_C_BITWISE(TYPE, NAME, atomic_or, kOr)  \
  HP_C_FETCH_BITWISE(TYPE, NAME, atomic_fetch_xor, kXor)                                         \
  HP_C_BITWISE(TYPE, NAME, atomic_xor, kXor)
// The pre-1.4 names (shmem_<TYPENAME>_wait is in sync.cpp).
#define HP_C_DEPRECATED_EXTENDED(TYPE, NAME)                                                     \
  HP_C_FETCH(TYPE, NAME, fetch) HP_C_SET(TYPE, NAME, set) HP_C_SWAP(TYPE, NAME, swap)
#define HP_C_DEPRECATED_AMO(TYPE, NAME)                                                          \
  HP_C_DEPRECATED_EXTENDED(TYPE, NAME)                                                           \
  HP_C_COMPARE_SWAP(TYPE, NAME, cswap) HP_C_FETCH_INC(TYPE, NAME, finc)                          \
  HP_C_INC(TYPE, NAME, inc) HP_C_FETCH_ADD(TYPE, NAME, fadd) HP_C_ADD(TYPE, NAME, add)

// clang-format on
// The non-blocking forms store the fetched value at `out` (shmem.h: `fetch`) before they
// return, which is as early as the next quiet allows.
#define HP_C_NBI(TYPE, NAME, OP, PARAMS, VALUE)                                   \
  void shmem_##NAME##_atomic_##OP##_nbi(TYPE* out, HP_C_UNPAREN PARAMS, int pe) { \
    const char* routine = "shmem_" #NAME "_atomic_" #OP "_nbi";                   \
    *out = VALUE;                                                                 \
  }
#define HP_C_UNPAREN(...) __VA_ARGS__
#define HP_C_AMO_NBI_EXTENDED(TYPE, NAME)                                       \
  HP_C_NBI(TYPE, NAME, fetch, (const TYPE* source), fetch(routine, source, pe)) \
  HP_C_NBI(TYPE, NAME, swap, (TYPE * dest, TYPE value), swap(routine, dest, value, pe))
#define HP_C_AMO_NBI_STANDARD(TYPE, NAME)                                  \
  HP_C_AMO_NBI_EXTENDED(TYPE, NAME)                                        \
  HP_C_NBI(TYPE, NAME, compare_swap, (TYPE * dest, TYPE cond, TYPE value), \
           compare_swap(routine, dest, cond, value, pe))                   \
  HP_C_NBI(TYPE, NAME, fetch_inc, (TYPE * dest),                           \
           fetch_add(routine, dest, static_cast<TYPE>(1), pe))             \
  HP_C_NBI(TYPE, NAME, fetch_add, (TYPE * dest, TYPE value), fetch_add(routine, dest, value, pe))
#define HP_C_AMO_NBI_BITWISE(TYPE, NAME)                           \
  HP_C_NBI(TYPE, NAME, fetch_and, (TYPE * dest, TYPE value),       \
           fetch_bitwise(routine, Bitwise::kAnd, dest, value, pe)) \
  HP_C_NBI(TYPE, NAME, fetch_or, (TYPE * dest, TYPE value),        \
           fetch_bitwise(routine, Bitwise::kOr, dest, value, pe))  \
  HP_C_NBI(TYPE, NAME, fetch_xor, (TYPE * dest, TYPE value),       \
           fetch_bitwise(routine, Bitwise::kXor, dest, value, pe))

HP_SHMEM_AMO_TYPES(HP_C_AMO_STANDARD)
HP_SHMEM_AMO_FLOAT_TYPES(HP_C_AMO_EXTENDED)
HP_SHMEM_AMO_BITWISE_TYPES(HP_C_AMO_BITWISE)
HP_SHMEM_AMO_TYPES(HP_C_AMO_NBI_STANDARD)
HP_SHMEM_AMO_FLOAT_TYPES(HP_C_AMO_NBI_EXTENDED)
HP_SHMEM_AMO_BITWISE_TYPES(HP_C_AMO_NBI_BITWISE)
HP_SHMEM_DEPRECATED_TYPES(HP_C_DEPRECATED_AMO)
HP_SHMEM_AMO_FLOAT_TYPES(HP_C_DEPRECATED_EXTENDED)
#undef HP_C_FETCH
#undef HP_C_SET
#undef HP_C_SWAP
#undef HP_C_COMPARE_SWAP
#undef HP_C_FETCH_INC
#undef HP_C_INC
#undef HP_C_FETCH_ADD
#undef HP_C_ADD
#undef HP_C_FETCH_BITWISE
#undef HP_C_BITWISE
#undef HP_C_AMO_EXTENDED
#undef HP_C_AMO_STANDARD
#undef HP_C_AMO_BITWISE
#undef HP_C_DEPRECATED_EXTENDED
#undef HP_C_DEPRECATED_AMO
#undef HP_C_NBI
#undef HP_C_UNPAREN
#undef HP_C_AMO_NBI_EXTENDED
#undef HP_C_AMO_NBI_STANDARD
#undef HP_C_AMO_NBI_BITWISE

long shmem_swap(long* dest, long value, int pe) { return swap("shmem_swap", dest, value, pe); }

void shmem_set_lock(long* lock) {
  const char* routine = "shmem_set_lock";
  const std::int32_t previous = enqueue(routine, lock, false);
  if (previous == 0) return;  // it was free
  check(routine, hp::shmem::atomic_add(node_of(lock), hp::shmem::my_pe() + 1, previous - 1));
  check(routine, hp::shmem::wait_until(node_of(lock), hp::shmem::Cmp::kGe, kGranted));
  check(routine, hp::shmem::atomic_add(node_of(lock), -kGranted, hp::shmem::my_pe()));
}

int shmem_test_lock(long* lock) { return enqueue("shmem_test_lock", lock, true) == 0 ? 0 : 1; }

void shmem_clear_lock(long* lock) {
  const char* routine = "shmem_clear_lock";
  const int me = hp::shmem::my_pe();
  check(routine, hp::shmem::quiet());  // what this PE did under the lock is complete
  std::int32_t next = 0;
  check(routine, hp::shmem::atomic_fetch(node_of(lock), me, &next));
  if (next == 0) {
    std::int32_t tail = 0;
    check(routine, hp::shmem::atomic_compare_swap(tail_of(lock), me + 1, 0, kHome, &tail));
    if (tail == me + 1) return;  // nobody waits
    // A PE swapped itself into the tail and is about to link itself to this node.
    check(routine, hp::shmem::wait_until(node_of(lock), hp::shmem::Cmp::kNe, 0));
    check(routine, hp::shmem::atomic_fetch(node_of(lock), me, &next));
  }
  check(routine, hp::shmem::atomic_add(node_of(lock), kGranted, next - 1));
}

}  // extern "C"
