// put/get/put_signal/fence/quiet. On the mapped transports (threads, shm) every PE's heap is
// mapped here, so a put is a copy into the target's mapping followed by a notify (the target
// may sleep in a wait on the memory just written), and every put is complete when it returns:
// the _nbi forms are the blocking ones, and quiet/fence only order this thread's stores.
//
// PEs that are not mapped here go through ctx.transport (MPI): puts complete locally on return
// and remotely at quiet, gets on return; the transport delivers put_signal's data before its
// signal (transport.h).
//
// A put or get of one naturally aligned 1/2/4/8-byte word is a single atomic access (release
// store, acquire load): "put the data, then p() a flag" is the classic pattern, and the
// target's wait on the flag must see everything put before it.
#include <atomic>
#include <cstring>

#include "shmem/context.h"
#include "shmem/copy.h"

namespace hp::shmem {
namespace {

// The heap offset of [symmetric, +bytes) after checking the PE and the range. A transfer of
// no bytes touches no address: any pointer is valid for it (OpenSHMEM), its offset is 0.
Status checked_offset(std::string_view what, const void* symmetric, std::size_t bytes, int pe,
                      Context** ctx, std::size_t* offset) {
  HP_RETURN_IF_ERROR(require_context(what, ctx));
  HP_RETURN_IF_ERROR((*ctx)->check_pe(pe, what));
  *offset = 0;
  if (bytes == 0) return Status::ok();
  return (*ctx)->heap_offset(symmetric, bytes, what, offset);
}

Status checked_signal(Context& ctx, std::uint64_t* sig_addr, std::size_t* offset) {
  HP_RETURN_IF_ERROR(
      ctx.heap_offset(sig_addr, sizeof(std::uint64_t), "put_signal sig_addr", offset));
  HP_ENSURE(reinterpret_cast<std::uintptr_t>(sig_addr) % alignof(std::uint64_t) == 0,
            ErrorCode::kMisaligned, "put_signal: sig_addr {} is not 8-byte aligned",
            static_cast<void*>(sig_addr));
  return Status::ok();
}

template <typename W>
bool word_copy(void* dest, const void* source, bool store) {
  if (reinterpret_cast<std::uintptr_t>(store ? dest : source) % sizeof(W) != 0) return false;
  if (store) {
    W value;
    std::memcpy(&value, source, sizeof(W));
    std::atomic_ref<W>(*static_cast<W*>(dest)).store(value, std::memory_order_release);
  } else {
    const W value = std::atomic_ref<W>(*static_cast<W*>(const_cast<void*>(source)))
                        .load(std::memory_order_acquire);
    std::memcpy(dest, &value, sizeof(W));
  }
  return true;
}

// Copies `bytes`; one aligned word atomically (store: into shared `dest`; else from `source`).
void copy(void* dest, const void* source, std::size_t bytes, bool store) {
  const bool done = (bytes == 8 && word_copy<std::uint64_t>(dest, source, store)) ||
                    (bytes == 4 && word_copy<std::uint32_t>(dest, source, store)) ||
                    (bytes == 2 && word_copy<std::uint16_t>(dest, source, store)) ||
                    (bytes == 1 && word_copy<std::uint8_t>(dest, source, store));
  if (!done) {
    if (store) {
      copy_to_peer(dest, source, bytes);
    } else {
      std::memcpy(dest, source, bytes);
    }
  }
}

}  // namespace

Status put(void* dest, const void* source, std::size_t bytes, int pe) {
  Context* ctx = nullptr;
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(checked_offset("put", dest, bytes, pe, &ctx, &offset));
  if (bytes == 0) return Status::ok();
  if (!ctx->mapped(pe)) return ctx->transport->put(pe, kControlBytes + offset, source, bytes);
  copy(ctx->remote(pe, offset), source, bytes, /*store=*/true);
  ctx->notify(pe);
  return Status::ok();
}

Status put_blocks(void* dest, const void* source, std::ptrdiff_t dest_stride,
                  std::ptrdiff_t source_stride, std::size_t block_bytes, std::size_t nblocks,
                  int pe) {
  Context* ctx = nullptr;
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(checked_offset("put_blocks", dest, 0, pe, &ctx, &offset));
  if (block_bytes == 0 || nblocks == 0) return Status::ok();
  auto* out = static_cast<std::byte*>(dest);
  const auto* in = static_cast<const std::byte*>(source);
  // The blocks are evenly spaced and the heap is one range: when the first and the last are
  // inside it, every block is, at its offset from the first. Nothing moves before both are
  // checked.
  const std::ptrdiff_t last = std::ptrdiff_t(nblocks - 1) * dest_stride;
  std::size_t first_offset = 0, last_offset = 0;
  HP_RETURN_IF_ERROR(ctx->heap_offset(out, block_bytes, "put_blocks", &first_offset));
  HP_RETURN_IF_ERROR(ctx->heap_offset(out + last, block_bytes, "put_blocks", &last_offset));
  if (!ctx->mapped(pe)) {
    return ctx->transport->put_blocks(pe, kControlBytes + first_offset, in, dest_stride,
                                      source_stride, block_bytes, nblocks);
  }
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::size_t at =
        std::size_t(std::ptrdiff_t(first_offset) + std::ptrdiff_t(b) * dest_stride);
    copy(ctx->remote(pe, at), in + std::ptrdiff_t(b) * source_stride, block_bytes,
         /*store=*/true);
  }
  ctx->notify(pe);  // once, after every block
  return Status::ok();
}

Status get(void* dest, const void* source, std::size_t bytes, int pe) {
  Context* ctx = nullptr;
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(checked_offset("get", source, bytes, pe, &ctx, &offset));
  if (bytes == 0) return Status::ok();
  if (!ctx->mapped(pe)) return ctx->transport->get(pe, kControlBytes + offset, dest, bytes);
  copy(dest, ctx->remote(pe, offset), bytes, /*store=*/false);
  return Status::ok();
}

Status put_nbi(void* dest, const void* source, std::size_t bytes, int pe) {
  return put(dest, source, bytes, pe);
}

Status get_nbi(void* dest, const void* source, std::size_t bytes, int pe) {
  return get(dest, source, bytes, pe);
}

Status put_signal(void* dest, const void* source, std::size_t bytes, std::uint64_t* sig_addr,
                  std::uint64_t signal, SignalOp op, int pe) {
  Context* ctx = nullptr;
  std::size_t offset = 0, signal_offset = 0;
  HP_RETURN_IF_ERROR(checked_offset("put_signal", dest, bytes, pe, &ctx, &offset));
  HP_RETURN_IF_ERROR(checked_signal(*ctx, sig_addr, &signal_offset));
  HP_ENSURE(op == SignalOp::kSet || op == SignalOp::kAdd, ErrorCode::kInvalidArgument,
            "put_signal: signal op {} is neither SET nor ADD", int(op));
  const AtomicOp signal_op = op == SignalOp::kSet ? AtomicOp::kSet : AtomicOp::kAdd;
  if (!ctx->mapped(pe)) {
    return ctx->transport->put_signal(pe, kControlBytes + offset, source, bytes,
                                      kControlBytes + signal_offset, signal, signal_op);
  }
  // No data (bytes 0): only the signal.
  if (bytes > 0) copy_to_peer(ctx->remote(pe, offset), source, bytes);
  if (ctx->atomics_via_transport(pe)) {
    return ctx->transport->atomic(pe, kControlBytes + signal_offset, signal_op, 8, &signal, nullptr,
                                  nullptr);
  }
  std::atomic_ref<std::uint64_t> word(
      *reinterpret_cast<std::uint64_t*>(ctx->remote(pe, signal_offset)));
  if (op == SignalOp::kSet) {
    word.store(signal, std::memory_order_release);
  } else {
    word.fetch_add(signal, std::memory_order_release);
  }
  ctx->notify(pe);
  return Status::ok();
}

Status put_signal_nbi(void* dest, const void* source, std::size_t bytes, std::uint64_t* sig_addr,
                      std::uint64_t signal, SignalOp op, int pe) {
  return put_signal(dest, source, bytes, sig_addr, signal, op, pe);
}

std::uint64_t signal_fetch(const std::uint64_t* sig_addr) noexcept {
  progress();
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(sig_addr))
      .load(std::memory_order_acquire);
}

namespace {

// Completes everything this PE issued (`what`: the calling routine).
Status complete_all(std::string_view what) {
  Context* ctx = nullptr;
  HP_RETURN_IF_ERROR(require_context(what, &ctx));
  platform::full_fence();
  if (ctx->transport == nullptr) return Status::ok();
  // A failed job's PEs may never complete what was sent to them.
  HP_RETURN_IF_ERROR(ctx->job_alive());
  return ctx->transport->quiet();
}

}  // namespace

// The transport orders nothing between targets cheaper than completing everything.
Status fence() { return complete_all("fence"); }

Status quiet() { return complete_all("quiet"); }

}  // namespace hp::shmem
