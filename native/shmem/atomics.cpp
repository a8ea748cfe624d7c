// Atomic memory operations on another PE's 32/64-bit word: std::atomic_ref on the target's
// mapping (lock-prefixed instructions are atomic across processes sharing the memory).
#include <atomic>
#include <cstdint>

#include "context.h"

namespace hp::shmem {
namespace {

// Checks the call; *remote is the word's mapping, or null when the transport must do the op
// (it then gets the word's segment offset).
template <typename T>
Status target_word(std::string_view what, const T* dest, int pe, Context** ctx, T** remote,
                   std::size_t* segment_offset) {
  HP_RETURN_IF_ERROR(require_context(what, ctx));
  HP_RETURN_IF_ERROR((*ctx)->check_pe(pe, what));
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR((*ctx)->heap_offset(dest, sizeof(T), what, &offset));
  HP_ENSURE(reinterpret_cast<std::uintptr_t>(dest) % sizeof(T) == 0, ErrorCode::kMisaligned,
            "{}: {} is not {}-byte aligned", what, static_cast<const void*>(dest), sizeof(T));
  *segment_offset = kControlBytes + offset;
  *remote = (*ctx)->atomics_via_transport(pe) ? nullptr : reinterpret_cast<T*>((*ctx)->remote(pe, offset));
  return Status::ok();
}

// The op through the transport.
template <typename T>
Status transport_op(Context& ctx, int pe, std::size_t offset, AtomicOp op, const T* operand,
                    const T* compare, T* result) {
  T ignored{};
  return ctx.transport->atomic(pe, offset, op, sizeof(T), operand, compare,
                               result != nullptr ? result : &ignored);
}

}  // namespace

template <typename T>
Status atomic_fetch_add(T* dest, T value, int pe, T* old) {
  Context* ctx = nullptr;
  T* remote = nullptr;
  std::size_t off = 0;
  HP_RETURN_IF_ERROR(target_word("atomic_fetch_add", dest, pe, &ctx, &remote, &off));
  if (remote == nullptr) return transport_op<T>(*ctx, pe, off, AtomicOp::kFetchAdd, &value, nullptr, old);
  *old = std::atomic_ref<T>(*remote).fetch_add(value, std::memory_order_seq_cst);
  ctx->notify(pe);
  return Status::ok();
}

template <typename T>
Status atomic_add(T* dest, T value, int pe) {
  T ignored{};
  return atomic_fetch_add(dest, value, pe, &ignored);
}

template <typename T>
Status atomic_compare_swap(T* dest, T cond, T value, int pe, T* old) {
  Context* ctx = nullptr;
  T* remote = nullptr;
  std::size_t off = 0;
  HP_RETURN_IF_ERROR(target_word("atomic_compare_swap", dest, pe, &ctx, &remote, &off));
  if (remote == nullptr) return transport_op<T>(*ctx, pe, off, AtomicOp::kCompareSwap, &value, &cond, old);
  T expected = cond;
  std::atomic_ref<T>(*remote).compare_exchange_strong(expected, value, std::memory_order_seq_cst);
  *old = expected;  // the value found: cond when the swap happened
  ctx->notify(pe);
  return Status::ok();
}

template <typename T>
Status atomic_swap(T* dest, T value, int pe, T* old) {
  Context* ctx = nullptr;
  T* remote = nullptr;
  std::size_t off = 0;
  HP_RETURN_IF_ERROR(target_word("atomic_swap", dest, pe, &ctx, &remote, &off));
  if (remote == nullptr) return transport_op<T>(*ctx, pe, off, AtomicOp::kSwap, &value, nullptr, old);
  *old = std::atomic_ref<T>(*remote).exchange(value, std::memory_order_seq_cst);
  ctx->notify(pe);
  return Status::ok();
}

template <typename T>
Status atomic_fetch(const T* source, int pe, T* out) {
  Context* ctx = nullptr;
  T* remote = nullptr;
  std::size_t off = 0;
  HP_RETURN_IF_ERROR(target_word("atomic_fetch", source, pe, &ctx, &remote, &off));
  if (remote == nullptr) return transport_op<T>(*ctx, pe, off, AtomicOp::kFetch, nullptr, nullptr, out);
  *out = std::atomic_ref<T>(*remote).load(std::memory_order_seq_cst);
  return Status::ok();
}

template <typename T>
Status atomic_set(T* dest, T value, int pe) {
  Context* ctx = nullptr;
  T* remote = nullptr;
  std::size_t off = 0;
  HP_RETURN_IF_ERROR(target_word("atomic_set", dest, pe, &ctx, &remote, &off));
  if (remote == nullptr) return transport_op<T>(*ctx, pe, off, AtomicOp::kSet, &value, nullptr, nullptr);
  std::atomic_ref<T>(*remote).store(value, std::memory_order_seq_cst);
  ctx->notify(pe);
  return Status::ok();
}

#define HP_SHMEM_INSTANTIATE_ATOMICS(T)                                      \
  template HP_API Status atomic_fetch_add<T>(T*, T, int, T*);                \
  template HP_API Status atomic_add<T>(T*, T, int);                          \
  template HP_API Status atomic_compare_swap<T>(T*, T, T, int, T*);          \
  template HP_API Status atomic_swap<T>(T*, T, int, T*);                     \
  template HP_API Status atomic_fetch<T>(const T*, int, T*);                 \
  template HP_API Status atomic_set<T>(T*, T, int);

HP_SHMEM_INSTANTIATE_ATOMICS(std::int32_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::uint32_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::int64_t)
HP_SHMEM_INSTANTIATE_ATOMICS(std::uint64_t)

}  // namespace hp::shmem
