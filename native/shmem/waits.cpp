// Point-to-point synchronization on this PE's own symmetric words: wait_until/test (and their
// array forms) and signal_wait_until. Words are read with acquire loads (std::atomic_ref), so
// data put before a signal or flag is visible once the wait returns.
#include <atomic>
#include <cstdint>

#include <fmt/format.h>

#include "shmem/any_search.h"
#include "shmem/context.h"

namespace hp::shmem {
namespace {

template <typename T>
T load(const T* word) {
  return std::atomic_ref<T>(*const_cast<T*>(word)).load(std::memory_order_acquire);
}

// The words must be this PE's, symmetric and naturally aligned; the comparison valid.
template <typename T>
Status check_words(Context& ctx, std::string_view what, const T* words, std::size_t n, Cmp cmp) {
  HP_ENSURE(int(cmp) >= 0 && int(cmp) <= 5, ErrorCode::kInvalidArgument,
            "{}: comparison {} is not one of EQ NE GT GE LT LE", what, int(cmp));
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(ctx.heap_offset(words, n * sizeof(T), what, &offset));
  HP_ENSURE(reinterpret_cast<std::uintptr_t>(words) % sizeof(T) == 0, ErrorCode::kMisaligned,
            "{}: {} is not {}-byte aligned", what, static_cast<const void*>(words), sizeof(T));
  return Status::ok();
}

template <typename T>
std::string describe(std::string_view what, const Context& ctx, const T* word, Cmp cmp, T value) {
  return fmt::format("{}(heap+{:#x}, {} {}) with the word at {}", what,
                     std::size_t(reinterpret_cast<const std::byte*>(word) - ctx.heap_base(ctx.pe)),
                     to_string(cmp), value, load(word));
}

bool active(const int* status, std::size_t i) { return status == nullptr || status[i] == 0; }

}  // namespace

std::string_view to_string(Cmp cmp) noexcept {
  switch (cmp) {
    case Cmp::kEq:
      return "EQ";
    case Cmp::kNe:
      return "NE";
    case Cmp::kGt:
      return "GT";
    case Cmp::kGe:
      return "GE";
    case Cmp::kLt:
      return "LT";
    case Cmp::kLe:
      return "LE";
  }
  return "?";
}

template <typename T>
Status wait_until(T* ivar, Cmp cmp, T value) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("wait_until", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "wait_until", ivar, 1, cmp));
  return ctx->wait_local([&] { return satisfies(load(ivar), cmp, value); },
                         [&] { return describe("wait_until", *ctx, ivar, cmp, value); });
}

template <typename T>
Status test(T* ivar, Cmp cmp, T value, bool* satisfied) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("test", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "test", ivar, 1, cmp));
  progress();
  *satisfied = satisfies(load(ivar), cmp, value);
  return Status::ok();
}

template <typename T>
Status wait_until_all(T* ivars, std::size_t n, const int* status, Cmp cmp, T value) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("wait_until_all", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "wait_until_all", ivars, n, cmp));
  std::size_t next = 0;  // words before `next` are satisfied (they only need to be seen once)
  return ctx->wait_local(
      [&] {
        while (next < n && (!active(status, next) || satisfies(load(&ivars[next]), cmp, value)))
          ++next;
        return next == n;
      },
      [&] { return describe("wait_until_all", *ctx, &ivars[next], cmp, value); });
}

template <typename T>
Status wait_until_any(T* ivars, std::size_t n, const int* status, Cmp cmp, T value,
                      std::size_t* index) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("wait_until_any", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "wait_until_any", ivars, n, cmp));
  *index = SIZE_MAX;
  bool any_active = false;
  for (std::size_t i = 0; i < n; ++i) any_active |= active(status, i);
  if (!any_active) return Status::ok();  // OpenSHMEM: nothing to wait for, index = SIZE_MAX
  return ctx->wait_local(
      [&] {
        *index = find_any(ivars, n, [&](std::size_t i) {
          return active(status, i) && satisfies(load(&ivars[i]), cmp, value);
        });
        return *index != SIZE_MAX;
      },
      [&] { return describe("wait_until_any", *ctx, &ivars[0], cmp, value); });
}

template <typename T>
Status wait_until_some(T* ivars, std::size_t n, const int* status, Cmp cmp, T value,
                       std::size_t* indices, std::size_t* count) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("wait_until_some", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "wait_until_some", ivars, n, cmp));
  *count = 0;
  bool any_active = false;
  for (std::size_t i = 0; i < n; ++i) any_active |= active(status, i);
  if (!any_active) return Status::ok();
  return ctx->wait_local(
      [&] {
        *count = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (active(status, i) && satisfies(load(&ivars[i]), cmp, value)) indices[(*count)++] = i;
        }
        return *count > 0;
      },
      [&] { return describe("wait_until_some", *ctx, &ivars[0], cmp, value); });
}

void progress() noexcept {
  Context* ctx = current();
  if (ctx != nullptr && ctx->transport != nullptr) ctx->transport->progress();
}

Status wait_for(const std::function<bool()>& ready, std::string_view what) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("wait_for", &ctx));
  HP_ENSURE(bool(ready), ErrorCode::kInvalidArgument, "wait_for: the predicate is empty");
  return ctx->wait_local(ready, [&] { return std::string(what); });
}

Status signal_wait_until(std::uint64_t* sig_addr, Cmp cmp, std::uint64_t value,
                         std::uint64_t* value_out) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("signal_wait_until", &ctx));
  HP_RETURN_IF_ERROR(check_words(*ctx, "signal_wait_until", sig_addr, 1, cmp));
  std::uint64_t seen = 0;
  HP_RETURN_IF_ERROR(
      ctx->wait_local([&] { return satisfies(seen = load(sig_addr), cmp, value); },
                      [&] { return describe("signal_wait_until", *ctx, sig_addr, cmp, value); }));
  if (value_out != nullptr) *value_out = seen;
  return Status::ok();
}

#define HP_SHMEM_INSTANTIATE_WAITS(T)                                                   \
  template Status wait_until<T>(T*, Cmp, T);                                            \
  template Status test<T>(T*, Cmp, T, bool*);                                           \
  template Status wait_until_all<T>(T*, std::size_t, const int*, Cmp, T);               \
  template Status wait_until_any<T>(T*, std::size_t, const int*, Cmp, T, std::size_t*); \
  template Status wait_until_some<T>(T*, std::size_t, const int*, Cmp, T, std::size_t*, \
                                     std::size_t*);

HP_SHMEM_INSTANTIATE_WAITS(std::int16_t)
HP_SHMEM_INSTANTIATE_WAITS(std::uint16_t)
HP_SHMEM_INSTANTIATE_WAITS(std::int32_t)
HP_SHMEM_INSTANTIATE_WAITS(std::uint32_t)
HP_SHMEM_INSTANTIATE_WAITS(std::int64_t)
HP_SHMEM_INSTANTIATE_WAITS(std::uint64_t)

}  // namespace hp::shmem
