// The node's collectives: one next-level task per chip, each moving data through the chips'
// scratch windows with notify/wait signals on the symmetric heap.
//
// Scratch window of a chip (scratch_total bytes at the same offset of every chip's heap):
//   [0, scratch_bytes)         data: one slot of slot_bytes = scratch_bytes / chips (rounded
//                              down to 64) per source chip
//   epoch                      this chip's count of chunks moved (only it writes it)
//   joined[p], p < chips       chip p has begun the chunk of that epoch (its slots are free)
//   ready[p],  p < chips       chip p's data for the chunk of that epoch is in slot p
// (signal words 64 bytes apart). Per chunk, every chip: e = ++epoch; tells every peer "joined
// e"; for each peer it sends to, waits until that peer joined e, then puts its data into the
// peer's slot and sets the peer's ready[me] = e (put_signal); waits for ready[q] >= e of every
// peer it receives from; computes its result from its own slots. A peer's slots are written
// only after it joined the epoch, i.e. after it read them for the previous one, and a chip's
// result buffers are only ever written by that chip: the L3 dependencies on them (its task's
// arguments) stay exact. Every chip runs the same collectives in the same order (each chip's
// scratch is an INOUT argument of its collective tasks), so the epochs agree.
//
// Reductions fold the chips' data in chip order 0, 1, ...: every chip gets the same bits.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/node/node_worker_impl.h"
#include "shmem/shmem.h"

namespace hp::runtime {

namespace {

enum Kind : int { kAllreduce, kBroadcast, kAllgather, kReduceScatter, kAllToAll, kKinds };
constexpr const char* kKindNames[kKinds] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                            "all_to_all"};
constexpr std::size_t kWord = 64;  // signal words apart

struct Window {
  std::byte* base = nullptr;
  std::size_t slot_bytes = 0;
  std::size_t data_bytes = 0;
  int chips = 0;
  std::uint64_t* word(std::size_t index) const {
    return reinterpret_cast<std::uint64_t*>(base + data_bytes + index * kWord);
  }
  std::uint64_t* epoch() const { return word(0); }
  std::uint64_t* joined(int p) const { return word(1 + std::size_t(p)); }
  std::uint64_t* ready(int p) const { return word(1 + std::size_t(chips + p)); }
  std::byte* slot(int p) const { return base + std::size_t(p) * slot_bytes; }
};

template <typename T>
void fold(void* acc, const void* in, std::size_t count, CollectiveOp op) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  if (op == CollectiveOp::kSum) {
    for (std::size_t i = 0; i < count; ++i) a[i] += b[i];
  } else {
    for (std::size_t i = 0; i < count; ++i) a[i] = std::max(a[i], b[i]);
  }
}

Status fold_into(DType dtype, void* acc, const void* in, std::size_t bytes, CollectiveOp op) {
  switch (dtype) {
    case DType::kInt32:
      fold<std::int32_t>(acc, in, bytes / 4, op);
      return Status::ok();
    case DType::kInt64:
      fold<std::int64_t>(acc, in, bytes / 8, op);
      return Status::ok();
    case DType::kFP32:
      fold<float>(acc, in, bytes / 4, op);
      return Status::ok();
    case DType::kFP64:
      fold<double>(acc, in, bytes / 8, op);
      return Status::ok();
    default:
      return Status::error(ErrorCode::kDTypeMismatch,
                           "a reduction over {} elements: the node's reductions take int32, "
                           "int64, fp32 and fp64",
                           to_string(dtype));
  }
}

// One chunk of a collective on chip `me`. `send(p)`: the bytes this chip puts into chip p's
// slot (empty: nothing for p); `receives(q)`: whether this chip waits for chip q's data.
template <typename Send, typename Receives>
Status exchange(const Window& w, int me, Send send, Receives receives) {
  const std::uint64_t e = ++*w.epoch();
  for (int k = 1; k < w.chips; ++k) {
    const int p = (me + k) % w.chips;
    HP_RETURN_IF_ERROR(
        shmem::put_signal(nullptr, nullptr, 0, w.joined(me), e, shmem::SignalOp::kSet, p));
  }
  for (int k = 1; k < w.chips; ++k) {
    const int p = (me + k) % w.chips;
    const std::span<const std::byte> data = send(p);
    if (data.empty()) continue;
    HP_RETURN_IF_ERROR(shmem::signal_wait_until(w.joined(p), shmem::Cmp::kGe, e));
    HP_RETURN_IF_ERROR(shmem::put_signal(w.slot(me), data.data(), data.size(), w.ready(me), e,
                                         shmem::SignalOp::kSet, p));
  }
  for (int q = 0; q < w.chips; ++q) {
    if (q == me || !receives(q)) continue;
    HP_RETURN_IF_ERROR(shmem::signal_wait_until(w.ready(q), shmem::Cmp::kGe, e));
  }
  return Status::ok();
}

// The kernel of every collective (scalars: kind, op or root, dtype, block bytes; tensors: dest,
// [source,] scratch).
Status collective_kernel(const TaskArgs& args, platform::BlockContext&) {
  const auto kind = Kind(args.scalar_as<std::int64_t>(0));
  const std::int64_t op_or_root = args.scalar_as<std::int64_t>(1);
  const auto dtype = static_cast<DType>(args.scalar_as<std::int64_t>(2));
  const auto block = std::size_t(args.scalar_as<std::int64_t>(3));
  const int chips = int(args.scalar_as<std::int64_t>(4));
  const auto scratch_bytes = std::size_t(args.scalar_as<std::int64_t>(5));
  const int me = shmem::my_pe();
  HP_ENSURE(me >= 0 && shmem::n_pes() == chips, ErrorCode::kFailedPrecondition,
            "{} runs on a chip of a node worker (PE {} of {})", kKindNames[kind], me,
            shmem::n_pes());
  auto* dest = static_cast<std::byte*>(args.tensor(0).data());
  const auto* source =
      args.num_tensors() == 3 ? static_cast<const std::byte*>(args.tensor(1).data()) : dest;
  Window w;
  w.base = static_cast<std::byte*>(args.tensor(args.num_tensors() - 1).data());
  w.chips = chips;
  w.data_bytes = scratch_bytes;
  w.slot_bytes = scratch_bytes / std::size_t(chips) / 64 * 64;
  const std::size_t element = dtype_size(dtype);
  // Chunks hold whole elements.
  const std::size_t chunk = std::max<std::size_t>(w.slot_bytes / element * element, element);
  HP_ENSURE(w.slot_bytes >= element, ErrorCode::kOutOfMemory,
            "{}: the scratch window's slots ({} bytes for {} chips) hold no element",
            kKindNames[kind], scratch_bytes, chips);
  const auto op = CollectiveOp(op_or_root);
  for (std::size_t at = 0; at < block; at += chunk) {
    const std::size_t n = std::min(chunk, block - at);
    auto none = [](int) { return std::span<const std::byte>(); };
    switch (kind) {
      case kAllreduce: {
        HP_RETURN_IF_ERROR(exchange(
            w, me, [&](int) { return std::span(source + at, n); }, [](int) { return true; }));
        // In chip order, into a copy of chip 0's data.
        std::vector<std::byte> acc(n);
        std::memcpy(acc.data(), me == 0 ? source + at : w.slot(0), n);
        for (int q = 1; q < chips; ++q) {
          HP_RETURN_IF_ERROR(
              fold_into(dtype, acc.data(), q == me ? source + at : w.slot(q), n, op));
        }
        std::memcpy(dest + at, acc.data(), n);
        break;
      }
      case kBroadcast: {
        const int root = int(op_or_root);
        HP_RETURN_IF_ERROR(exchange(
            w, me,
            [&](int) {
              return me == root ? std::span(source + at, n) : std::span<const std::byte>();
            },
            [&](int q) { return q == root; }));
        if (me != root) std::memcpy(dest + at, w.slot(root), n);
        break;
      }
      case kAllgather: {
        HP_RETURN_IF_ERROR(exchange(
            w, me, [&](int) { return std::span(source + at, n); }, [](int) { return true; }));
        for (int q = 0; q < chips; ++q) {
          std::memcpy(dest + std::size_t(q) * block + at, q == me ? source + at : w.slot(q), n);
        }
        break;
      }
      case kReduceScatter: {
        HP_RETURN_IF_ERROR(exchange(
            w, me, [&](int p) { return std::span(source + std::size_t(p) * block + at, n); },
            [](int) { return true; }));
        std::vector<std::byte> acc(n);
        const std::byte* mine = source + std::size_t(me) * block + at;
        std::memcpy(acc.data(), me == 0 ? mine : w.slot(0), n);
        for (int q = 1; q < chips; ++q) {
          HP_RETURN_IF_ERROR(fold_into(dtype, acc.data(), q == me ? mine : w.slot(q), n, op));
        }
        std::memcpy(dest + at, acc.data(), n);
        break;
      }
      case kAllToAll: {
        HP_RETURN_IF_ERROR(exchange(
            w, me, [&](int p) { return std::span(source + std::size_t(p) * block + at, n); },
            [](int) { return true; }));
        for (int q = 0; q < chips; ++q) {
          std::memcpy(dest + std::size_t(q) * block + at,
                      q == me ? source + std::size_t(me) * block + at : w.slot(q), n);
        }
        break;
      }
      default:
        (void)none;
        return Status::error(ErrorCode::kInvalidArgument, "collective kind {} is unknown",
                             int(kind));
    }
  }
  return Status::ok();
}

}  // namespace

Status register_collectives(NodeWorker& worker, std::vector<std::pair<Sha256Digest, int>>* out) {
  for (int kind = 0; kind < kKinds; ++kind) {
    CallableHandle handle;
    HP_RETURN_IF_ERROR(worker.register_callable(
        Callable::from_function(kKindNames[kind], collective_kernel,
                                fmt::format("hp.runtime.node.{}.v1", kKindNames[kind]),
                                "hp.runtime.node.collectives"),
        &handle));
    out->emplace_back(handle.digest, kind);
  }
  return Status::ok();
}

Status collective_handle(const NodeWorker::Impl& impl, std::string_view name, CallableHandle* out) {
  for (int kind = 0; kind < kKinds; ++kind) {
    if (name == kKindNames[kind]) {
      *out = CallableHandle{impl.builtins[std::size_t(kind)].first};
      return Status::ok();
    }
  }
  return Status::error(ErrorCode::kNotFound,
                       "replay: callable '{}' has no handle in the bindings (and is no collective)",
                       name);
}

Status NodeOrchestrator::collective(int kind, const SymmetricTensor& dest,
                                    const SymmetricTensor& source, std::int64_t op_or_root) {
  NodeWorker::Impl& impl = *worker_.impl_;
  const int chips = impl.config.chips;
  const char* what = kKindNames[kind];
  HP_ENSURE(dest.worker == &worker_ && source.worker == &worker_, ErrorCode::kInvalidArgument,
            "{}: the tensors must be alloc()ed by this node worker", what);
  HP_ENSURE(dest.dtype == source.dtype, ErrorCode::kDTypeMismatch, "{}: dest is {} and source {}",
            what, to_string(dest.dtype), to_string(source.dtype));
  const std::size_t dest_bytes = dest.bytes(), source_bytes = source.bytes();
  std::size_t block = source_bytes;
  switch (kind) {
    case kAllgather:
      HP_ENSURE(dest_bytes == source_bytes * std::size_t(chips), ErrorCode::kShapeMismatch,
                "allgather: dest ({} bytes) must hold {} chips x source ({} bytes)", dest_bytes,
                chips, source_bytes);
      break;
    case kReduceScatter:
      HP_ENSURE(source_bytes == dest_bytes * std::size_t(chips), ErrorCode::kShapeMismatch,
                "reduce_scatter: source ({} bytes) must hold {} chips x dest ({} bytes)",
                source_bytes, chips, dest_bytes);
      block = dest_bytes;
      break;
    case kAllToAll:
      HP_ENSURE(dest_bytes == source_bytes && source_bytes % std::size_t(chips) == 0,
                ErrorCode::kShapeMismatch,
                "all_to_all: source and dest ({} and {} bytes) must be equal, {} blocks",
                source_bytes, dest_bytes, chips);
      block = source_bytes / std::size_t(chips);
      break;
    default:
      break;
  }
  HP_ENSURE(block % dtype_size(dest.dtype) == 0, ErrorCode::kShapeMismatch,
            "{}: {} bytes per chip is not whole {} elements", what, block, to_string(dest.dtype));
  if (kind == kAllreduce || kind == kReduceScatter) {
    HP_ENSURE(dest.dtype == DType::kInt32 || dest.dtype == DType::kInt64 ||
                  dest.dtype == DType::kFP32 || dest.dtype == DType::kFP64,
              ErrorCode::kDTypeMismatch, "{} reduces int32, int64, fp32 or fp64, not {}", what,
              to_string(dest.dtype));
    HP_ENSURE(op_or_root == int(CollectiveOp::kSum) || op_or_root == int(CollectiveOp::kMax),
              ErrorCode::kInvalidArgument, "{}: unknown reduction {}", what, op_or_root);
  }
  if (kind == kBroadcast) {
    HP_ENSURE(op_or_root >= 0 && op_or_root < chips, ErrorCode::kOutOfRange,
              "broadcast: root {} is out of range; this node has chips 0..{}", op_or_root,
              chips - 1);
  }
  const Sha256Digest& digest = impl.builtins[std::size_t(kind)].first;
  CallableHandle handle{digest};
  const bool in_place = &dest == &source || dest.offset == source.offset;
  for (int chip = 0; chip < chips; ++chip) {
    TaskArgs args;
    const TensorView d = dest.on(chip);
    if (in_place) {
      args.inout(d);
    } else {
      args.output_existing(d).input(source.on(chip));
    }
    args.inout(TensorView(worker_.chip_heap(chip) + impl.scratch_offset, DType::kUInt8,
                          {std::int64_t(impl.scratch_total)}));
    args.scalar(std::int64_t(kind))
        .scalar(op_or_root)
        .scalar(std::int64_t(dest.dtype))
        .scalar(std::int64_t(block))
        .scalar(std::int64_t(chips))
        .scalar(std::int64_t(impl.config.scratch_bytes));
    HP_RETURN_IF_ERROR(
        submit_next_level(handle, args, {.mode = platform::LaunchMode::kVector}, chip)
            .with_context(what));
  }
  return Status::ok();
}

Status NodeOrchestrator::allreduce(const SymmetricTensor& buffer, CollectiveOp op) {
  return collective(kAllreduce, buffer, buffer, std::int64_t(op));
}
Status NodeOrchestrator::broadcast(const SymmetricTensor& buffer, int root) {
  return collective(kBroadcast, buffer, buffer, root);
}
Status NodeOrchestrator::allgather(const SymmetricTensor& dest, const SymmetricTensor& source) {
  return collective(kAllgather, dest, source, 0);
}
Status NodeOrchestrator::reduce_scatter(const SymmetricTensor& dest, const SymmetricTensor& source,
                                        CollectiveOp op) {
  return collective(kReduceScatter, dest, source, std::int64_t(op));
}
Status NodeOrchestrator::all_to_all(const SymmetricTensor& dest, const SymmetricTensor& source) {
  return collective(kAllToAll, dest, source, 0);
}

}  // namespace hp::runtime
