// The symmetric heap: collective allocation (same calls, same order on every PE -> the same
// offsets everywhere), and address queries.
#include <cstring>

#include "shmem/context.h"

namespace hp::shmem {

namespace {

// Every collective allocation: `allocated` is this PE's result (the allocator is deterministic,
// so every PE gets the same one, success or error); `zero` clears the block. Every PE then
// passes the barrier (OpenSHMEM: an allocation of a non-zero size ends with one, failed or
// not), so nobody touches the new block on another PE before that PE allocated it.
Status finish_allocation(Context& ctx, Status allocated, std::size_t offset, std::size_t bytes,
                         bool zero, void** out) {
  if (allocated.is_ok()) {
    *out = ctx.heap_base(ctx.pe) + offset;
    if (zero) std::memset(*out, 0, bytes);
  }
  HP_RETURN_IF_ERROR(barrier_on(ctx, kTeamWorld));
  return allocated;
}

}  // namespace

Status align(std::size_t alignment, std::size_t bytes, void** out) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("malloc", &ctx));
  std::size_t offset = 0;
  const Status allocated = ctx->allocator->allocate(bytes, alignment, &offset);
  return finish_allocation(*ctx, allocated, offset, bytes, false, out);
}

Status malloc(std::size_t bytes, void** out) { return align(0, bytes, out); }

Status calloc(std::size_t count, std::size_t size, void** out) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("calloc", &ctx));
  std::size_t bytes = 0, offset = 0;
  const Status allocated =
      __builtin_mul_overflow(count, size, &bytes)
          ? Status::error(ErrorCode::kInvalidArgument, "calloc({}, {}) overflows", count, size)
          : ctx->allocator->allocate(bytes, 0, &offset);
  return finish_allocation(*ctx, allocated, offset, bytes, true, out);
}

Status free(void* ptr) {
  if (ptr == nullptr) return Status::ok();  // as free(NULL)
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context("free", &ctx));
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(ctx->heap_offset(ptr, 0, "free", &offset));
  // Collective: nobody still reads or writes the block on any PE once it is released.
  HP_RETURN_IF_ERROR(quiet());
  HP_RETURN_IF_ERROR(barrier_on(*ctx, kTeamWorld));
  return ctx->allocator->release(offset);
}

void* ptr(const void* addr, int pe) noexcept {
  Context* ctx = current();
  std::size_t offset = 0;
  if (ctx == nullptr || pe < 0 || pe >= ctx->n_pes || ctx->segments[pe] == nullptr ||
      !ctx->heap_offset(addr, 0, "ptr", &offset).is_ok()) {
    return nullptr;
  }
  return ctx->remote(pe, offset);
}

bool addr_accessible(const void* addr, int pe) noexcept {
  Context* ctx = current();
  std::size_t offset = 0;
  return ctx != nullptr && pe >= 0 && pe < ctx->n_pes &&
         ctx->heap_offset(addr, 0, "addr_accessible", &offset).is_ok();
}

PeBinding pe_binding() noexcept { return {current()}; }

void bind_thread(PeBinding binding) noexcept {
  set_thread_context(const_cast<Context*>(static_cast<const Context*>(binding.context)));
}

int my_pe() noexcept {
  Context* ctx = current();
  return ctx ? ctx->pe : -1;
}

int n_pes() noexcept {
  Context* ctx = current();
  return ctx ? ctx->n_pes : -1;
}

std::string_view transport_name(int pe) noexcept {
  Context* ctx = current();
  if (ctx == nullptr || pe < 0 || pe >= ctx->n_pes) return {};
  if (pe == ctx->pe) return "self";
  return ctx->mapped(pe) ? std::string_view(ctx->transport_kind) : ctx->transport->name();
}

std::size_t heap_size() noexcept {
  Context* ctx = current();
  return ctx ? ctx->heap_bytes() : 0;
}

bool initialized() noexcept { return current() != nullptr; }

}  // namespace hp::shmem
