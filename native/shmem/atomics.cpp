// Atomic memory operations on another PE's 32/64-bit word: std::atomic_ref on the target's
// mapping (lock-prefixed instructions are atomic across processes sharing the memory).
#include <atomic>
#include <cstdint>

#include "shmem/context.h"

namespace hp::shmem {
namespace {

// After a fetching atomic on a mapped word. A PE that spins by such fetches (a lock's tail, its
// own node) lets the operations that PEs of other hosts sent it by message apply meanwhile: the
// spin may end only once they did. Every kProgressEvery-th fetch of a thread: a progress call
// is MPI calls (which may give up the CPU), a fetch from the mapping one instruction.
void progress_now_and_then(const Context& ctx) {
  constexpr unsigned kProgressEvery = 64;
  thread_local unsigned fetches = 0;
  if (ctx.transport != nullptr && ++fetches % kProgressEvery == 0) ctx.transport->progress();
}

// Checks the call, then runs `local(word)` on the target's mapping of the word (and wakes the
// target's waiters when `wakes`), or the same op through the transport when it cannot be done
// by load/store (the transport gets the word's segment offset).
template <typename T, typename Local>
Status apply(std::string_view what, const T* dest, int pe, AtomicOp op, const T* operand,
             const T* compare, T* result, bool wakes, Local local) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context(what, &ctx));
  HP_RETURN_IF_ERROR(ctx->check_pe(pe, what));
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(ctx->heap_offset(dest, sizeof(T), what, &offset));
  HP_ENSURE(reinterpret_cast<std::uintptr_t>(dest) % sizeof(T) == 0, ErrorCode::kMisaligned,
            "{}: {} is not {}-byte aligned", what, static_cast<const void*>(dest), sizeof(T));
  if (ctx->atomics_via_transport(pe)) {
    T ignored{};
    return ctx->transport->atomic(pe, kControlBytes + offset, op, sizeof(T), operand, compare,
                                  result != nullptr ? result : &ignored);
  }
  local(std::atomic_ref<T>(*reinterpret_cast<T*>(ctx->remote(pe, offset))));
  if (wakes) ctx->notify(pe);
  if (result != nullptr) progress_now_and_then(*ctx);
  return Status::ok();
}

}  // namespace

template <typename T>
Status atomic_fetch_add(T* dest, T value, int pe, T* old) {
  return apply<T>(
      "atomic_fetch_add", dest, pe, AtomicOp::kFetchAdd, &value, nullptr, old, true,
      [&](std::atomic_ref<T> w) { *old = w.fetch_add(value, std::memory_order_seq_cst); });
}

template <typename T>
Status atomic_add(T* dest, T value, int pe) {
  return apply<T>("atomic_add", dest, pe, AtomicOp::kAdd, &value, nullptr, nullptr, true,
                  [&](std::atomic_ref<T> w) { w.fetch_add(value, std::memory_order_seq_cst); });
}

template <typename T>
Status atomic_compare_swap(T* dest, T cond, T value, int pe, T* old) {
  return apply<T>("atomic_compare_swap", dest, pe, AtomicOp::kCompareSwap, &value, &cond, old, true,
                  [&](std::atomic_ref<T> w) {
                    T expected = cond;
                    w.compare_exchange_strong(expected, value, std::memory_order_seq_cst);
                    *old = expected;  // the value found: cond when the swap happened
                  });
}

template <typename T>
Status atomic_swap(T* dest, T value, int pe, T* old) {
  return apply<T>(
      "atomic_swap", dest, pe, AtomicOp::kSwap, &value, nullptr, old, true,
      [&](std::atomic_ref<T> w) { *old = w.exchange(value, std::memory_order_seq_cst); });
}

template <typename T>
Status atomic_fetch(const T* source, int pe, T* out) {
  return apply<T>("atomic_fetch", source, pe, AtomicOp::kFetch, nullptr, nullptr, out, false,
                  [&](std::atomic_ref<T> w) { *out = w.load(std::memory_order_seq_cst); });
}

template <typename T>
Status atomic_set(T* dest, T value, int pe) {
  return apply<T>("atomic_set", dest, pe, AtomicOp::kSet, &value, nullptr, nullptr, true,
                  [&](std::atomic_ref<T> w) { w.store(value, std::memory_order_seq_cst); });
}

#define HP_SHMEM_INSTANTIATE_ATOMICS(T)                      \
  template Status atomic_fetch_add<T>(T*, T, int, T*);       \
  template Status atomic_add<T>(T*, T, int);                 \
  template Status atomic_compare_swap<T>(T*, T, T, int, T*); \
  template Status atomic_swap<T>(T*, T, int, T*);            \
  template Status atomic_fetch<T>(const T*, int, T*);        \
  template Status atomic_set<T>(T*, T, int);

HP_SHMEM_INSTANTIATE_ATOMICS(std::int32_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::uint32_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::int64_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::uint64_t)

}  // namespace hp::shmem
