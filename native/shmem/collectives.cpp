// Collectives on a team: broadcast, fcollect, collect, alltoall, allreduce, reduce_scatter, and
// the reductions with a caller's combine (allreduce_with, reduce_scatter_with).
//
// Pull-based, over the mapped heaps of the team's members:
//   1. barrier on the team: every member's source is ready;
//   2. each member reads what it needs from the members' source copies (peer_bytes() and
//      copy_from(): a mapping, or a get through the transport; the one
//      place that touches another PE's memory) and computes its result;
//   3. barrier on the team: nobody reads a source any more, so each may be overwritten.
// The result goes straight to dest when dest does not overlap source; otherwise (in-place
// allreduce, or any overlap) into a private staging buffer copied to dest after step 3, when
// no member still reads this PE's source. Either way a call may follow another at once.
//
// Reductions combine the members in team order (0, 1, ..., n-1), so every member computes
// bit-identical results, chunk by chunk into an accumulator that stays in L1; the dtype and op
// are dispatched once per call to a loop the compiler vectorizes. Integer sums wrap (two's
// complement); bf16 is accumulated in fp32 and rounded to nearest even once at the end.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "shmem/context.h"

namespace hp::shmem {

namespace {

// ---- access to the members' data --------------------------------------------------------------

// `bytes` of `world_pe`'s copy at heap offset `offset`: a pointer into its mapping, or, for a
// PE reached through the transport, a get into `scratch` (at least `bytes` long).
Status peer_bytes(const Context& ctx, int world_pe, std::size_t offset, std::size_t bytes,
                  std::byte* scratch, const std::byte** out) {
  if (ctx.mapped(world_pe)) {
    *out = ctx.remote(world_pe, offset);
    return Status::ok();
  }
  *out = scratch;
  return ctx.read(world_pe, kControlBytes + offset, scratch, bytes);
}

Status copy_from(const Context& ctx, std::byte* out, int world_pe, std::size_t offset,
                 std::size_t bytes) {
  return ctx.read(world_pe, kControlBytes + offset, out, bytes);
}

// ---- validation and the common skeleton -------------------------------------------------------

struct Call {
  std::string_view what;
  Context* ctx = nullptr;
  TeamState* team = nullptr;
  Team handle = kTeamInvalid;
  std::byte* dest = nullptr;
  std::size_t dest_bytes = 0;
  const std::byte* source = nullptr;
  std::size_t source_bytes = 0;
  std::size_t source_offset = 0;  // symmetric offset of source

  int n() const { return int(team->members.size()); }
  int me() const { return team->my_index; }
  int world(int team_pe) const { return team->members[std::size_t(team_pe)]; }
};

Status product(std::string_view what, std::size_t a, std::size_t b, std::string_view of,
               std::size_t* out) {
  HP_ENSURE(!__builtin_mul_overflow(a, b, out), ErrorCode::kInvalidArgument,
            "{}: {} ({} x {}) overflows", what, of, a, b);
  return Status::ok();
}

// Checks the context and the team (this PE a member).
Status open_call(std::string_view what, Team team, Call* call) {
  call->what = what;
  HP_RETURN_IF_ERROR(require_context(what, &call->ctx));
  HP_RETURN_IF_ERROR(member_team(*call->ctx, team, what, &call->team));
  call->handle = team;
  return Status::ok();
}

// Checks that [dest, +dest_bytes) and [source, +source_bytes) lie in the symmetric heap.
Status set_buffers(Call* call, void* dest, std::size_t dest_bytes, const void* source,
                   std::size_t source_bytes) {
  call->dest = static_cast<std::byte*>(dest);
  call->dest_bytes = dest_bytes;
  call->source = static_cast<const std::byte*>(source);
  call->source_bytes = source_bytes;
  if (dest_bytes == 0) return Status::ok();  // nothing moves: the buffers are not touched
  std::size_t dest_offset = 0;
  HP_RETURN_IF_ERROR(
      call->ctx->heap_offset(dest, dest_bytes, "dest", &dest_offset).with_context(call->what));
  return call->ctx->heap_offset(source, source_bytes, "source", &call->source_offset)
      .with_context(call->what);
}

// Reductions load whole elements: dest and source must be aligned to the element size.
Status check_aligned(const Call& call, std::size_t element) {
  const auto misaligned = [element](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % element != 0;
  };
  HP_ENSURE(call.dest_bytes == 0 || (!misaligned(call.dest) && !misaligned(call.source)),
            ErrorCode::kMisaligned,
            "{}: dest {} and source {} must be aligned to the {}-byte elements", call.what,
            static_cast<const void*>(call.dest), static_cast<const void*>(call.source), element);
  return Status::ok();
}

// Runs the three steps of the file comment; fill(out) writes the dest_bytes of the result and
// returns a Status.
template <typename Fill>
Status run(const Call& call, Fill&& fill) {
  if (call.dest_bytes == 0) return Status::ok();
  const bool overlap =
      call.dest < call.source + call.source_bytes && call.source < call.dest + call.dest_bytes;
  std::unique_ptr<std::byte[]> staging;
  if (overlap) staging = std::make_unique_for_overwrite<std::byte[]>(call.dest_bytes);
  std::byte* out = overlap ? staging.get() : call.dest;
  HP_RETURN_IF_ERROR(barrier_on(*call.ctx, call.handle).with_context(call.what));
  const Status filled = fill(out);
  // The closing barrier even after a failed read: nobody may leave while others still read.
  HP_RETURN_IF_ERROR(barrier_on(*call.ctx, call.handle).with_context(call.what));
  HP_RETURN_IF_ERROR(Status(filled).with_context(call.what));
  if (overlap) std::memcpy(call.dest, out, call.dest_bytes);
  return Status::ok();
}

// ---- reduction kernels ------------------------------------------------------------------------

// Element traits: storage type S, accumulator type A, and the conversions between them.
template <typename T>
struct Plain {
  using S = T;
  using A = T;
  static A load(S s) { return s; }
  static S store(A a) { return a; }
};

struct BF16 {
  using S = std::uint16_t;
  using A = float;
  static A load(S s) { return std::bit_cast<float>(std::uint32_t(s) << 16); }
  // Round to nearest, ties to even; NaN stays a (quiet) NaN of the same sign.
  static S store(A a) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
    const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
    return S(nan ? (bits >> 16) | 0x40u : rounded);
  }
};

template <ReduceOp kOp, typename A>
inline A combine(A a, A b) {
  if constexpr (kOp == ReduceOp::kSum) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return A(U(a) + U(b));  // wraps instead of overflowing
    } else {
      return a + b;
    }
  } else if constexpr (kOp == ReduceOp::kMax) {
    return a < b ? b : a;
  } else {
    return b < a ? b : a;
  }
}

constexpr std::size_t kChunk = 2048;  // accumulator elements: at most 16 KiB, stays in L1

// Inlined with n = kChunk for full chunks, so the loops have a constant trip count.
template <typename E>
inline void load_chunk(typename E::A* __restrict acc, const typename E::S* __restrict in,
                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = E::load(in[i]);
}

template <typename E, ReduceOp kOp>
inline void combine_chunk(typename E::A* __restrict acc, const typename E::S* __restrict in,
                          std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = combine<kOp>(acc[i], E::load(in[i]));
}

template <typename E>
inline void store_chunk(typename E::S* __restrict out, const typename E::A* __restrict acc,
                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = E::store(acc[i]);
}

template <typename E, ReduceOp kOp>
inline Status reduce_chunk(const Call& call, std::size_t offset, std::size_t n,
                           typename E::A* __restrict acc, typename E::S* __restrict out,
                           std::byte* scratch) {
  using S = typename E::S;
  const std::byte* in = nullptr;
  HP_RETURN_IF_ERROR(peer_bytes(*call.ctx, call.world(0), offset, n * sizeof(S), scratch, &in));
  load_chunk<E>(acc, reinterpret_cast<const S*>(in), n);
  for (int j = 1; j < call.n(); ++j) {
    HP_RETURN_IF_ERROR(peer_bytes(*call.ctx, call.world(j), offset, n * sizeof(S), scratch, &in));
    combine_chunk<E, kOp>(acc, reinterpret_cast<const S*>(in), n);
  }
  store_chunk<E>(out, acc, n);
  return Status::ok();
}

// out[i] = op over the members j (in team order) of element i at `offset` in j's heap.
template <typename E, ReduceOp kOp>
Status reduce_members(const Call& call, std::size_t offset, std::size_t count, std::byte* out) {
  using S = typename E::S;
  typename E::A acc[kChunk];
  alignas(64) std::byte scratch[kChunk * sizeof(S)];  // a chunk fetched through the transport
  S* result = reinterpret_cast<S*>(out);
  std::size_t base = 0;
  for (; base + kChunk <= count; base += kChunk) {
    HP_RETURN_IF_ERROR(
        reduce_chunk<E, kOp>(call, offset + base * sizeof(S), kChunk, acc, result + base, scratch));
  }
  if (base < count) {
    HP_RETURN_IF_ERROR(reduce_chunk<E, kOp>(call, offset + base * sizeof(S), count - base, acc,
                                            result + base, scratch));
  }
  return Status::ok();
}

using Kernel = Status (*)(const Call&, std::size_t, std::size_t, std::byte*);

template <typename E>
Kernel for_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &reduce_members<E, ReduceOp::kSum>;
    case ReduceOp::kMax:
      return &reduce_members<E, ReduceOp::kMax>;
    case ReduceOp::kMin:
      return &reduce_members<E, ReduceOp::kMin>;
  }
  return nullptr;
}

// The kernel for dtype x op, or INVALID_ARGUMENT / DTYPE_MISMATCH naming what is wrong.
Status pick_reduction(std::string_view what, DType dtype, ReduceOp op, Kernel* fn) {
  HP_ENSURE(op == ReduceOp::kSum || op == ReduceOp::kMax || op == ReduceOp::kMin,
            ErrorCode::kInvalidArgument, "{}: reduce op {} is not SUM (0), MAX (1) or MIN (2)",
            what, int(op));
  switch (dtype) {
    case DType::kInt32:
      *fn = for_op<Plain<std::int32_t>>(op);
      return Status::ok();
    case DType::kInt64:
      *fn = for_op<Plain<std::int64_t>>(op);
      return Status::ok();
    case DType::kFP32:
      *fn = for_op<Plain<float>>(op);
      return Status::ok();
    case DType::kFP64:
      *fn = for_op<Plain<double>>(op);
      return Status::ok();
    case DType::kBF16:
      *fn = for_op<BF16>(op);
      return Status::ok();
    default:
      break;
  }
  HP_ENSURE(dtype_size(dtype) != 0, ErrorCode::kInvalidArgument, "{}: dtype {} is not a DType",
            what, int(dtype));
  return Status::error(ErrorCode::kDTypeMismatch,
                       "{}: dtype {} is not supported by reductions; use int32, int64, fp32, fp64 "
                       "or bf16",
                       what, to_string(dtype));
}

}  // namespace

// ---- the collectives --------------------------------------------------------------------------

Status broadcast(Team team, void* dest, const void* source, std::size_t bytes, int root) {
  Call call;
  HP_RETURN_IF_ERROR(open_call("broadcast", team, &call));
  HP_ENSURE(root >= 0 && root < call.n(), ErrorCode::kOutOfRange,
            "broadcast: root {} is not a PE of team {} (PEs 0..{})", root, team, call.n() - 1);
  HP_RETURN_IF_ERROR(set_buffers(&call, dest, bytes, source, bytes));
  const int from = call.world(root);
  return run(call, [&](std::byte* out) {
    return copy_from(*call.ctx, out, from, call.source_offset, bytes);
  });
}

Status fcollect(Team team, void* dest, const void* source, std::size_t bytes) {
  Call call;
  HP_RETURN_IF_ERROR(open_call("fcollect", team, &call));
  std::size_t dest_bytes = 0;
  HP_RETURN_IF_ERROR(product("fcollect", std::size_t(call.n()), bytes, "dest bytes", &dest_bytes));
  HP_RETURN_IF_ERROR(set_buffers(&call, dest, dest_bytes, source, bytes));
  return run(call, [&](std::byte* out) {
    // Start at a different member on each PE, so the PEs do not all read one PE at once.
    for (int k = 0; k < call.n(); ++k) {
      const int j = (call.me() + k) % call.n();
      HP_RETURN_IF_ERROR(copy_from(*call.ctx, out + std::size_t(j) * bytes, call.world(j),
                                   call.source_offset, bytes));
    }
    return Status::ok();
  });
}

// The steps of run(), with the members' sizes learnt in step 1: each member publishes its byte
// count in its own scratch[team][1] before the first barrier, and every member reads them all
// after it. No member publishes the next call's count before passing this call's second
// barrier, which every member reaches only after reading. (scratch[team][0] is the splits'.)
Status collect(Team team, void* dest, const void* source, std::size_t bytes) {
  Call call;
  HP_RETURN_IF_ERROR(open_call("collect", team, &call));
  Context& ctx = *call.ctx;
  auto& my_count = ctx.control(ctx.pe).scratch[team][1].value;
  my_count.store(bytes, std::memory_order_relaxed);
  HP_RETURN_IF_ERROR(barrier_on(ctx, team).with_context(call.what));
  std::vector<std::size_t> offsets(std::size_t(call.n()) + 1, 0);
  Status status;
  for (int j = 0; j < call.n() && status.is_ok(); ++j) {
    std::uint64_t count = 0;
    status = ctx.load_u64(call.world(j), ctx.segment_offset_of(&my_count), &count);
    if (status.is_ok() &&
        __builtin_add_overflow(offsets[std::size_t(j)], count, &offsets[std::size_t(j) + 1])) {
      status = Status::error(ErrorCode::kInvalidArgument, "the members' sizes overflow size_t");
    }
  }
  const std::size_t total = offsets[std::size_t(call.n())];
  if (status.is_ok()) status = set_buffers(&call, dest, total, source, bytes);
  const bool overlap = status.is_ok() && total > 0 && bytes > 0 &&
                       call.dest < call.source + bytes && call.source < call.dest + total;
  std::vector<std::byte> staging(overlap ? total : 0);
  std::byte* out = overlap ? staging.data() : call.dest;
  for (int k = 0; k < call.n() && status.is_ok(); ++k) {
    const int j = (call.me() + k) % call.n();  // start at a different member on each PE
    const std::size_t size = offsets[std::size_t(j) + 1] - offsets[std::size_t(j)];
    if (size > 0) {
      status =
          copy_from(ctx, out + offsets[std::size_t(j)], call.world(j), call.source_offset, size);
    }
  }
  // The closing barrier even after a failure: nobody may leave while others still read.
  HP_RETURN_IF_ERROR(barrier_on(ctx, team).with_context(call.what));
  HP_RETURN_IF_ERROR(status.with_context(call.what));
  if (overlap) std::memcpy(call.dest, staging.data(), total);
  return Status::ok();
}

Status alltoall(Team team, void* dest, const void* source, std::size_t bytes_per_pe) {
  Call call;
  HP_RETURN_IF_ERROR(open_call("alltoall", team, &call));
  std::size_t bytes = 0;
  HP_RETURN_IF_ERROR(
      product("alltoall", std::size_t(call.n()), bytes_per_pe, "buffer bytes", &bytes));
  HP_RETURN_IF_ERROR(set_buffers(&call, dest, bytes, source, bytes));
  const std::size_t my_block = std::size_t(call.me()) * bytes_per_pe;
  return run(call, [&](std::byte* out) {
    for (int k = 0; k < call.n(); ++k) {
      const int j = (call.me() + k) % call.n();
      HP_RETURN_IF_ERROR(copy_from(*call.ctx, out + std::size_t(j) * bytes_per_pe, call.world(j),
                                   call.source_offset + my_block, bytes_per_pe));
    }
    return Status::ok();
  });
}

namespace {

// The buffers of a reduction of `count` elements of `element` bytes: source is that many
// (scatter = false: allreduce) or team size blocks of that many (scatter = true: reduce_scatter,
// this PE reduces block my_index). *offset: the symmetric offset of what this PE reduces.
Status reduction_buffers(Call* call, void* dest, const void* source, std::size_t count,
                         bool scatter, std::size_t element, std::size_t* offset) {
  std::size_t block = 0, source_bytes = 0;
  HP_RETURN_IF_ERROR(product(call->what, count, element, "block bytes", &block));
  HP_RETURN_IF_ERROR(product(call->what, scatter ? std::size_t(call->n()) : 1, block,
                             "source bytes", &source_bytes));
  HP_RETURN_IF_ERROR(set_buffers(call, dest, block, source, source_bytes));
  *offset = call->source_offset + (scatter ? std::size_t(call->me()) * block : 0);
  return Status::ok();
}

Status reduction(std::string_view what, Team team, void* dest, const void* source,
                 std::size_t count, bool scatter, DType dtype, ReduceOp op) {
  Call call;
  HP_RETURN_IF_ERROR(open_call(what, team, &call));
  Kernel reduce = nullptr;
  HP_RETURN_IF_ERROR(pick_reduction(what, dtype, op, &reduce));
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(
      reduction_buffers(&call, dest, source, count, scatter, dtype_size(dtype), &offset));
  HP_RETURN_IF_ERROR(check_aligned(call, dtype_size(dtype)));
  return run(call, [&](std::byte* out) { return reduce(call, offset, count, out); });
}

// ---- reductions with a caller's combine ---------------------------------------------------------

struct FreeAligned {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

// out = the members' `count` elements of `element` bytes at `offset`, combined in team order,
// chunk by chunk (at most kChunkBytes, at least one element) into a 64-byte aligned accumulator.
Status combine_members(const Call& call, std::size_t offset, std::size_t count, std::size_t element,
                       ReduceFn combine, void* user, std::byte* out) {
  constexpr std::size_t kChunkBytes = 16 << 10;
  const std::size_t chunk = std::max<std::size_t>(1, kChunkBytes / element);
  const std::size_t room = (chunk * element + 63) / 64 * 64;  // keeps scratch 64-byte aligned
  const std::unique_ptr<std::byte[], FreeAligned> buffer(
      static_cast<std::byte*>(::operator new[](2 * room, std::align_val_t(64))));
  std::byte* acc = buffer.get();
  std::byte* scratch = acc + room;  // a chunk fetched through the transport
  for (std::size_t base = 0; base < count; base += chunk) {
    const std::size_t n = std::min(chunk, count - base), bytes = n * element;
    const std::size_t at = offset + base * element;
    const std::byte* in = nullptr;
    HP_RETURN_IF_ERROR(peer_bytes(*call.ctx, call.world(0), at, bytes, scratch, &in));
    std::memcpy(acc, in, bytes);
    for (int j = 1; j < call.n(); ++j) {
      HP_RETURN_IF_ERROR(peer_bytes(*call.ctx, call.world(j), at, bytes, scratch, &in));
      combine(acc, in, n, user);
    }
    std::memcpy(out + base * element, acc, bytes);
  }
  return Status::ok();
}

Status reduction_with(std::string_view what, Team team, void* dest, const void* source,
                      std::size_t count, bool scatter, std::size_t element, ReduceFn combine,
                      void* user) {
  Call call;
  HP_RETURN_IF_ERROR(open_call(what, team, &call));
  HP_ENSURE(element != 0, ErrorCode::kInvalidArgument, "{}: element_bytes is 0", what);
  HP_ENSURE(combine != nullptr, ErrorCode::kInvalidArgument, "{}: combine is null", what);
  std::size_t offset = 0;
  HP_RETURN_IF_ERROR(reduction_buffers(&call, dest, source, count, scatter, element, &offset));
  return run(call, [&](std::byte* out) {
    return combine_members(call, offset, count, element, combine, user, out);
  });
}

}  // namespace

Status allreduce(Team team, void* dest, const void* source, std::size_t count, DType dtype,
                 ReduceOp op) {
  return reduction("allreduce", team, dest, source, count, false, dtype, op);
}

Status reduce_scatter(Team team, void* dest, const void* source, std::size_t count_per_pe,
                      DType dtype, ReduceOp op) {
  return reduction("reduce_scatter", team, dest, source, count_per_pe, true, dtype, op);
}

Status allreduce_with(Team team, void* dest, const void* source, std::size_t count,
                      std::size_t element_bytes, ReduceFn combine, void* user) {
  return reduction_with("allreduce_with", team, dest, source, count, false, element_bytes, combine,
                        user);
}

Status reduce_scatter_with(Team team, void* dest, const void* source, std::size_t count_per_pe,
                           std::size_t element_bytes, ReduceFn combine, void* user) {
  return reduction_with("reduce_scatter_with", team, dest, source, count_per_pe, true,
                        element_bytes, combine, user);
}

// After a sync of the team (every member's source is ready) each member reads the sources of the
// members before it and folds them in team order; after a second sync (every member has read) it
// writes dest, which may therefore be source. Member x count element reads: exact and simple,
// for a collective that is rare next to the reductions.
Status scan_with(Team team, void* dest, const void* source, std::size_t count,
                 std::size_t element_bytes, ReduceFn combine, void* user, bool inclusive) {
  constexpr std::string_view what = "scan_with";
  HP_ENSURE(element_bytes != 0, ErrorCode::kInvalidArgument, "{}: element_bytes is 0", what);
  HP_ENSURE(combine != nullptr, ErrorCode::kInvalidArgument, "{}: combine is null", what);
  const int me = team_my_pe(team);
  HP_ENSURE(me >= 0, ErrorCode::kInvalidArgument,
            "{}: the team is SHMEM_TEAM_INVALID or not a team of this PE", what);
  std::size_t bytes = 0;
  HP_ENSURE(!__builtin_mul_overflow(count, element_bytes, &bytes), ErrorCode::kInvalidArgument,
            "{}: {} elements of {} bytes overflow size_t", what, count, element_bytes);
  HP_RETURN_IF_ERROR(team_sync(team));
  std::vector<std::byte> sum(bytes), part(bytes);
  const int last = inclusive ? me : me - 1;
  for (int m = 0; bytes > 0 && m <= last; ++m) {
    std::byte* in = m == 0 ? sum.data() : part.data();
    if (m == me) {
      std::memcpy(in, source, bytes);
    } else {
      HP_RETURN_IF_ERROR(get(in, source, bytes, team_translate_pe(team, m, kTeamWorld)));
    }
    if (m > 0) combine(sum.data(), part.data(), count, user);
  }
  HP_RETURN_IF_ERROR(team_sync(team));
  if (bytes > 0) std::memcpy(dest, sum.data(), bytes);
  return Status::ok();
}

}  // namespace hp::shmem
