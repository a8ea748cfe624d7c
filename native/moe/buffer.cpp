#include "moe/buffer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "common/bfloat16.h"
#include "kernels/ops.h"
#include "kernels/targets.h"
#include "kernels/tiles.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {
namespace {

using namespace window;  // NOLINT: the window's own constants

// A record's meta: token index, scale, then expert[K] and weight[K].
struct RecordMeta {
  std::int32_t token;
  float scale;
};
std::int32_t* meta_experts(std::uint8_t* rec) {
  return reinterpret_cast<std::int32_t*>(rec + sizeof(RecordMeta));
}
float* meta_weights(std::uint8_t* rec, std::int64_t k) {
  return reinterpret_cast<float*>(rec + sizeof(RecordMeta) + std::size_t(k) * 4);
}

}  // namespace

Status Buffer::create(const BufferConfig& config, std::unique_ptr<Buffer>* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "Buffer::create: out is null");
  HP_ENSURE(hp::shmem::initialized(), ErrorCode::kFailedPrecondition,
            "Buffer::create: hp::shmem is not initialized (call hp::shmem::init first)");
  const int ranks = hp::shmem::n_pes(), rank = hp::shmem::my_pe();
  // Every rank checks every rank's config (the same data everywhere: the same verdict), and
  // whether it maps every peer's heap (the window context and the pull dispatch need that).
  constexpr int kFields = 13;
  const std::array<std::int64_t, kFields> mine = {
      config.hidden,
      config.max_tokens_per_rank,
      config.num_experts,
      config.topk,
      config.max_element_bytes,
      config.combine_element_bytes,
      std::int64_t(config.comm),
      std::int64_t(config.low_latency),
      std::bit_cast<std::int64_t>(config.capacity_factor),
      std::int64_t(config.grow_on_overflow),
      std::int64_t(config.streamed_combine),
      std::int64_t(config.zero_copy_combine),
      std::int64_t(config.dispatch_path)};
  void* scratch = nullptr;
  HP_RETURN_IF_ERROR(
      hp::shmem::calloc(std::size_t(ranks + 1) * kFields, sizeof(std::int64_t), &scratch));
  auto* all = static_cast<std::int64_t*>(scratch);
  std::memcpy(all + std::size_t(ranks) * kFields, mine.data(), sizeof(mine));
  Status s = hp::shmem::fcollect(hp::shmem::kTeamWorld, all, all + std::size_t(ranks) * kFields,
                                 sizeof(mine));
  std::vector<std::int64_t> table(all, all + std::size_t(ranks) * kFields);
  // Whether this rank maps every peer's heap (scratch is symmetric), gathered into `all`: the
  // first rank r cannot map, or -1.
  std::vector<std::int64_t> unmapped;
  if (s.is_ok()) {
    std::int64_t& first_unmapped = all[std::size_t(ranks) * kFields];  // this rank's contribution
    first_unmapped = -1;
    for (int pe = 0; pe < ranks && first_unmapped < 0; ++pe) {
      if (hp::shmem::ptr(scratch, pe) == nullptr) first_unmapped = pe;
    }
    s = hp::shmem::fcollect(hp::shmem::kTeamWorld, all, &first_unmapped, sizeof(std::int64_t));
    unmapped.assign(all, all + ranks);
  }
  HP_RETURN_IF_ERROR(hp::shmem::free(scratch));
  HP_RETURN_IF_ERROR(s);
  static constexpr const char* kNames[] = {"hidden",
                                           "max_tokens_per_rank",
                                           "num_experts",
                                           "topk",
                                           "max_element_bytes",
                                           "combine_element_bytes",
                                           "comm",
                                           "low_latency",
                                           "capacity_factor",
                                           "grow_on_overflow",
                                           "streamed_combine",
                                           "zero_copy_combine",
                                           "dispatch_path"};
  static_assert(std::size(kNames) == kFields, "a name for every compared field");
  for (int r = 1; r < ranks; ++r) {
    for (int f = 0; f < kFields; ++f) {
      if (table[std::size_t(r * kFields + f)] != table[std::size_t(f)]) {
        return Status::error(
            ErrorCode::kInvalidArgument,
            "Buffer::create: ranks disagree on {}: rank 0 has {}, rank {} has {} (every rank "
            "must pass the same BufferConfig)",
            kNames[f], table[std::size_t(f)], r, table[std::size_t(r * kFields + f)]);
      }
    }
  }
  if (config.hidden < 1 || config.max_tokens_per_rank < 0 || config.topk < 1 ||
      config.num_experts < 1 || config.num_experts % ranks != 0) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig hidden = {}, max_tokens_per_rank = {}, topk = {}, num_experts = {}: expected "
        "hidden, topk >= 1 and num_experts a positive multiple of the {} ranks",
        config.hidden, config.max_tokens_per_rank, config.topk, config.num_experts, ranks);
  }
  if (config.max_element_bytes != 1 && config.max_element_bytes != 2 &&
      config.max_element_bytes != 4) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "BufferConfig max_element_bytes = {}: expected 1, 2 or 4",
                         config.max_element_bytes);
  }
  if (config.combine_element_bytes != 2 && config.combine_element_bytes != 4) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "BufferConfig combine_element_bytes = {}: expected 2 or 4",
                         config.combine_element_bytes);
  }
  if (!(config.capacity_factor == 0.0 ||
        (config.capacity_factor >= 1.0 && config.capacity_factor <= 1e6))) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig capacity_factor = {}: expected 0 (lossless) or a factor in [1, 1e6]",
        config.capacity_factor);
  }
  if (config.comm != CommKind::kWindow && config.comm != CommKind::kShmem) {
    return Status::error(ErrorCode::kInvalidArgument, "BufferConfig comm = {}: unknown",
                         int(config.comm));
  }
  if (config.dispatch_path != DispatchPath::kAuto && config.dispatch_path != DispatchPath::kPush &&
      config.dispatch_path != DispatchPath::kPull) {
    return Status::error(ErrorCode::kInvalidArgument, "BufferConfig dispatch_path = {}: unknown",
                         int(config.dispatch_path));
  }
  if (config.dispatch_path == DispatchPath::kPull && config.capacity_factor != 0.0) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig dispatch_path = kPull with capacity_factor = {}: a capacity factor bounds "
        "the "
        "push dispatch's records window, and the pull dispatch has none (use kAuto or kPush)",
        config.capacity_factor);
  }
  const auto blind =
      std::find_if(unmapped.begin(), unmapped.end(), [](std::int64_t pe) { return pe >= 0; });
  const bool all_mapped = blind == unmapped.end();
  if (!all_mapped &&
      (config.comm == CommKind::kWindow || config.dispatch_path == DispatchPath::kPull)) {
    const int r = int(blind - unmapped.begin()), pe = int(*blind);
    const bool window = config.comm == CommKind::kWindow;
    return Status::error(ErrorCode::kUnsupported,
                         "{}, and rank {} cannot map rank {}'s ({} transport): use {}",
                         window ? "the window comm context maps peers' windows"
                                : "dispatch_path = kPull reads peers' send windows in place",
                         r, pe, r == rank ? hp::shmem::transport_name(pe) : "another",
                         window ? "CommKind::kShmem" : "DispatchPath::kAuto or kPush");
  }
  const bool pull_wanted =
      config.dispatch_path == DispatchPath::kPull ||
      (config.dispatch_path == DispatchPath::kAuto && config.capacity_factor == 0.0);
  std::unique_ptr<Buffer> b(new Buffer());
  b->config_ = config;
  b->rank_ = rank;
  b->ranks_ = ranks;
  b->pull_ = pull_wanted && all_mapped;
  HP_RETURN_IF_ERROR(hp::kernels::selected_target(&b->table_));
  const auto r = std::size_t(ranks), tmax = std::size_t(config.max_tokens_per_rank);
  b->meta_bytes_ = round64(sizeof(RecordMeta) + std::size_t(config.topk) * 8);
  b->record_bytes_ =
      b->meta_bytes_ + round64(std::size_t(config.hidden * config.max_element_bytes));
  b->back_row_bytes_ = round64(std::size_t(config.hidden * config.combine_element_bytes));
  b->counts_offset_ = kFlagKinds * r * kSlot;
  // A rank sends a token to at most min(K, R) ranks: that many return rows per token.
  const std::size_t sends = tmax * std::size_t(std::min<std::int64_t>(config.topk, ranks));
  b->back_offset_ = b->counts_offset_ +
                    round64(2 * r * (kCountsHeader + r + std::size_t(config.num_experts)) * 8);
  b->window_bytes_ =
      b->back_offset_ + (config.zero_copy_combine ? 0 : 2 * sends * b->back_row_bytes_);
  if (config.low_latency) {
    const auto local = std::size_t(config.num_experts) / r;
    b->ll_slot_bytes_ = kSlot + round64(std::size_t(config.hidden * config.max_element_bytes));
    b->ll_counts_offset_ = b->window_bytes_;
    b->ll_recv_offset_ =
        b->ll_counts_offset_ + round64(2 * r * (kLowLatencyCountsHeader + local) * 8);
    b->ll_back_offset_ = b->ll_recv_offset_ + 2 * local * r * tmax * b->ll_slot_bytes_;
    b->window_bytes_ =
        b->ll_back_offset_ + 2 * std::size_t(config.num_experts) * tmax * b->back_row_bytes_;
  }
  if (config.streamed_combine) {
    b->pair_offset_ = b->window_bytes_;
    b->window_bytes_ = b->pair_offset_ + 2 * tmax * std::size_t(config.topk) * b->back_row_bytes_;
  }
  void* window = nullptr;
  HP_RETURN_IF_ERROR(hp::shmem::align(64, b->window_bytes_, &window));
  b->window_ = static_cast<std::uint8_t*>(window);
  // Records: lossless, every source's T_max to this rank, or the capacity factor's share of
  // the average load (T_max x min(K, R) per rank), which dispatch grows when a batch needs more.
  const auto lossless = std::int64_t(r * tmax);
  if (b->pull_) {
    HP_RETURN_IF_ERROR(b->allocate_send_window());
  } else {
    b->recv_capacity_ =
        config.capacity_factor == 0.0
            ? lossless
            : std::min(lossless, std::int64_t(std::ceil(config.capacity_factor * double(sends))));
    HP_RETURN_IF_ERROR(b->allocate_records(b->recv_capacity_));
  }
  if (config.zero_copy_combine) {
    HP_RETURN_IF_ERROR(b->allocate_combine_rows(
        std::max<std::int64_t>(1, config.max_tokens_per_rank * config.topk)));
  }
  // Every rank initialises its own status words, then a barrier, before any remote write.
  std::memset(b->window_, 0, b->counts_offset_);
  HP_RETURN_IF_ERROR(hp::shmem::barrier_all());
  *out = std::move(b);
  return Status::ok();
}

Buffer::~Buffer() { (void)destroy(); }

Status Buffer::destroy() {
  if (window_ == nullptr) return Status::ok();
  void* w = window_;
  window_ = nullptr;
  HP_RETURN_IF_ERROR(hp::shmem::barrier_all());  // nobody writes into our window any more
  if (recv_ != nullptr) HP_RETURN_IF_ERROR(hp::shmem::free(std::exchange(recv_, nullptr)));
  if (send_ != nullptr) HP_RETURN_IF_ERROR(hp::shmem::free(std::exchange(send_, nullptr)));
  if (combine_rows_ != nullptr)
    HP_RETURN_IF_ERROR(hp::shmem::free(std::exchange(combine_rows_, nullptr)));
  return hp::shmem::free(w);
}

// (Collective: every rank calls it with the same capacity.)
Status Buffer::allocate_records(std::int64_t capacity) {
  const Status s = reallocate_symmetric(
      &recv_, std::max<std::size_t>(std::size_t(capacity) * record_bytes_, 64));
  if (!s.is_ok()) {
    return Status::error(
        s.code(),
        "{} records of {} bytes for dispatch ({}): raise HP_SHMEM_HEAP_SIZE or lower "
        "max_tokens_per_rank / capacity_factor",
        capacity, record_bytes_, s.message());
  }
  recv_capacity_ = capacity;
  return Status::ok();
}

std::uint64_t* Buffer::flag(int kind, int rank) const {
  return reinterpret_cast<std::uint64_t*>(
      window_ + (std::size_t(kind) * std::size_t(ranks_) + std::size_t(rank)) * kSlot);
}
std::int64_t* Buffer::counts(std::uint64_t epoch, int rank) const {
  const std::size_t slot = std::size_t(kCountsHeader + ranks_ + config_.num_experts);
  return reinterpret_cast<std::int64_t*>(window_ + counts_offset_) +
         ((epoch % 2) * std::size_t(ranks_) + std::size_t(rank)) * slot;
}
std::uint8_t* Buffer::record(std::int64_t index) const {
  return recv_ + std::size_t(index) * record_bytes_;
}
std::uint8_t* Buffer::back_row(std::uint64_t epoch, std::int64_t index) const {
  const std::size_t half = std::size_t(config_.max_tokens_per_rank) *
                           std::size_t(std::min<std::int64_t>(config_.topk, ranks_)) *
                           back_row_bytes_;
  return window_ + back_offset_ + (epoch % 2) * half + std::size_t(index) * back_row_bytes_;
}

Status Buffer::dispatch(const DispatchArgs& args, DispatchResult* out, const Status& caller_check) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "Buffer::dispatch: out is null");
  HP_RETURN_IF_ERROR(notify_dispatch(args, &out->handle, caller_check));
  // The result's storage is reused from call to call (no page faults for a same-sized batch).
  DispatchResult& r = *out;
  const Handle& h = r.handle;
  const bool quant = args.quant == Quant::kDynamicInt8;
  r.x_dtype = quant ? DType::kInt8 : args.x.dtype();
  r.rows = h.rows;
  r.hidden = config_.hidden;
  r.x_bytes.resize(std::size_t(r.rows * r.hidden) * dtype_size(r.x_dtype));
  r.x_scale.resize(quant ? std::size_t(r.rows) : 0);
  r.topk_weights.resize(std::size_t(r.rows));
  r.tokens_per_expert = h.tokens_per_expert;
  r.expert_offsets = h.expert_offsets;
  return dispatch_data(
      args, &r.handle,
      {.x = r.x(),
       .x_scale = quant ? TensorView(r.x_scale.data(), DType::kFP32, {r.rows}) : TensorView(),
       .topk_weights = TensorView(r.topk_weights.data(), DType::kFP32, {r.rows})});
}

Status Buffer::notify_dispatch(const DispatchArgs& args, Handle* handle,
                               const Status& caller_check) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::notify_dispatch: the buffer was destroyed");
  HP_ENSURE(handle != nullptr, ErrorCode::kInvalidArgument,
            "Buffer::notify_dispatch: handle is null");
  if (config_.comm == CommKind::kWindow)
    return notify_with(window_comm_, args, handle, caller_check);
  return notify_with(shmem_comm_, args, handle, caller_check);
}

Status Buffer::dispatch_data(const DispatchArgs& args, Handle* handle, const DispatchOutputs& out,
                             const std::function<Status(std::int64_t)>& on_expert_ready) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::dispatch_data: the buffer was destroyed");
  HP_ENSURE(handle != nullptr && handle->epoch == notified_epoch_ && notified_epoch_ != 0,
            ErrorCode::kFailedPrecondition,
            "Buffer::dispatch_data: no notify_dispatch to continue (call notify_dispatch with the "
            "same arguments "
            "first, then dispatch_data once with its handle)");
  HP_ENSURE(args.x.ndim() == 2 && args.x.dim(0) == handle->layout.num_tokens,
            ErrorCode::kInvalidArgument,
            "Buffer::dispatch_data: x {} is not the x of notify_dispatch ({} tokens)",
            args.x.to_string(), handle->layout.num_tokens);
  notified_epoch_ = 0;
  if (config_.comm == CommKind::kWindow)
    return data_with(window_comm_, args, handle, out, on_expert_ready);
  return data_with(shmem_comm_, args, handle, out, on_expert_ready);
}

Status Buffer::check_dispatch_outputs(const DispatchArgs& a, const Handle& h,
                                      const DispatchOutputs& out) const {
  const bool quant = a.quant == Quant::kDynamicInt8;
  HP_RETURN_IF_ERROR(out.x.expect_shape("recv x", {h.rows, config_.hidden}));
  HP_RETURN_IF_ERROR(out.x.expect_dtype("recv x", quant ? DType::kInt8 : a.x.dtype()));
  HP_RETURN_IF_ERROR(expect_contiguous(out.x, "recv x"));
  if (quant) {
    HP_RETURN_IF_ERROR(out.x_scale.expect_shape("recv x_scale", {h.rows}));
    HP_RETURN_IF_ERROR(out.x_scale.expect_dtype("recv x_scale", DType::kFP32));
    HP_RETURN_IF_ERROR(expect_contiguous(out.x_scale, "recv x_scale"));
  }
  HP_RETURN_IF_ERROR(out.topk_weights.expect_shape("recv topk_weights", {h.rows}));
  HP_RETURN_IF_ERROR(out.topk_weights.expect_dtype("recv topk_weights", DType::kFP32));
  return expect_contiguous(out.topk_weights, "recv topk_weights");
}

Status Buffer::combine(const TensorView& expert_out, const Handle& handle, const TensorView& y,
                       const TensorView& weights, bool weighted) {
  HP_ENSURE(window_ != nullptr, ErrorCode::kFailedPrecondition,
            "Buffer::combine: the buffer was destroyed");
  const std::int64_t rows = std::int64_t(handle.row_src_rank.size());
  const float* w = nullptr;
  const Status input = [&]() -> Status {
    HP_RETURN_IF_ERROR(expect_float_rows(expert_out, "expert_out", {rows, config_.hidden},
                                         config_.combine_element_bytes));
    HP_RETURN_IF_ERROR(expect_float_rows(y, "y", {handle.layout.num_tokens, config_.hidden}));
    if (config_.zero_copy_combine) HP_RETURN_IF_ERROR(expect_combine_rows(expert_out, handle));
    if (weighted) {
      HP_RETURN_IF_ERROR(weights.expect_shape("weights", {rows}));
      HP_RETURN_IF_ERROR(weights.expect_dtype("weights", DType::kFP32));
      HP_RETURN_IF_ERROR(expect_contiguous(weights, "weights"));
      HP_ENSURE(
          rows == 0 || weights.data() != nullptr, ErrorCode::kInvalidArgument,
          "Buffer::combine: weighted without weights: pass the dispatch result's topk_weights");
      w = static_cast<const float*>(weights.data());
    }
    return Status::ok();
  }();
  if (config_.zero_copy_combine) {
    if (config_.comm == CommKind::kWindow)
      return pull_combine_with(window_comm_, input, handle, y, w);
    return pull_combine_with(shmem_comm_, input, handle, y, w);
  }
  if (config_.comm == CommKind::kWindow) {
    if (!input.is_ok()) return reject_call(window_comm_, kCombine, ++combine_epoch_, input);
    return combine_with(window_comm_, expert_out, handle, y, w);
  }
  if (!input.is_ok()) return reject_call(shmem_comm_, kCombine, ++combine_epoch_, input);
  return combine_with(shmem_comm_, expert_out, handle, y, w);
}

// A call whose inputs this rank rejected: it still takes the call's epoch and sets its flag on
// every rank, its error code first written to the slot's status word, so that the others
// return ABORTED at once instead of waiting for their deadline.
template <typename Comm>
Status Buffer::reject_call(Comm& comm, int kind, std::uint64_t epoch, const Status& input) {
  const std::uint64_t word = (epoch << 16) | std::uint64_t(input.code());
  for (int i = 0; i < ranks_; ++i) {
    const int d = (rank_ + 1 + i) % ranks_;
    std::uint64_t* status = flag(kind, rank_) + 1;
    Status st;
    std::uint8_t* p = comm.open(d, status, sizeof(word), &st);
    if (p == nullptr) return st;
    std::memcpy(p, &word, sizeof(word));
    HP_RETURN_IF_ERROR(comm.close(d, status, p, sizeof(word)));
    HP_RETURN_IF_ERROR(comm.signal(flag(kind, rank_), epoch, d));
  }
  HP_RETURN_IF_ERROR(comm.quiet());
  return input;
}
template Status Buffer::reject_call(WindowComm&, int, std::uint64_t, const Status&);
template Status Buffer::reject_call(ShmemComm&, int, std::uint64_t, const Status&);

// After every flag of `kind` reached `epoch`: ABORTED naming a rank that rejected the call.
Status Buffer::check_rejections(int kind, std::uint64_t epoch, const char* call) const {
  for (int s = 0; s < ranks_; ++s) {
    const std::uint64_t word = *(flag(kind, s) + 1);
    if (word >> 16 == epoch && (word & 0xFFFF) != 0) {
      return Status::error(ErrorCode::kAborted,
                           "{}: rank {} rejected its inputs ({}); see its error", call, s,
                           to_string(ErrorCode(word & 0xFFFF)));
    }
  }
  return Status::ok();
}

// Checks a dispatch's inputs against the buffer, computes the source layout and, when asked,
// quantises every token (into quant_rows_ and quant_scales_, or, with a send_epoch, this rank's
// send half of it, which then gets the rest of its tokens); any error here is the rank's input
// error.
Status Buffer::prepare_dispatch(const DispatchArgs& a, DispatchLayout* layout,
                                std::uint64_t send_epoch) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, experts = config_.num_experts;
  const bool quant = a.quant == Quant::kDynamicInt8;
  HP_RETURN_IF_ERROR(a.x.expect_shape("x", {-1, hidden}));
  const std::int64_t tokens = a.x.dim(0);
  if (a.x.dtype() != DType::kFP32 && a.x.dtype() != DType::kBF16) {
    return Status::error(ErrorCode::kDTypeMismatch, "x {}: expected fp32 or bf16", a.x.to_string());
  }
  HP_RETURN_IF_ERROR(expect_contiguous(a.x, "x"));
  if (tokens > config_.max_tokens_per_rank) {
    return Status::error(ErrorCode::kOutOfRange,
                         "x has {} tokens, more than the buffer's max_tokens_per_rank = {}", tokens,
                         config_.max_tokens_per_rank);
  }
  HP_RETURN_IF_ERROR(a.topk_idx.expect_shape("topk_idx", {tokens, topk}));
  HP_RETURN_IF_ERROR(a.topk_weights.expect_shape("topk_weights", {tokens, topk}));
  HP_RETURN_IF_ERROR(a.topk_weights.expect_dtype("topk_weights", DType::kFP32));
  HP_RETURN_IF_ERROR(expect_contiguous(a.topk_weights, "topk_weights"));
  const std::size_t x_elem = a.x.element_size();
  HP_ENSURE(quant || a.quant == Quant::kNone, ErrorCode::kInvalidArgument, "quant = {}: unknown",
            int(a.quant));
  if (!quant && std::int64_t(x_elem) > config_.max_element_bytes) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "x {} unquantised needs {} bytes per element; the buffer was made with "
                         "max_element_bytes = {}",
                         a.x.to_string(), x_elem, config_.max_element_bytes);
  }
  HP_ENSURE(a.expert_alignment >= 1 && a.expert_alignment <= kMaxExpertAlignment,
            ErrorCode::kInvalidArgument, "expert_alignment = {}: expected 1 to {}",
            a.expert_alignment, kMaxExpertAlignment);
  if (a.smooth.data() != nullptr) {
    HP_ENSURE(quant, ErrorCode::kInvalidArgument,
              "smooth: given for an unquantised dispatch (it scales x per channel before the int8 "
              "quantisation)");
    HP_RETURN_IF_ERROR(a.smooth.expect_shape("smooth", {hidden}));
    HP_RETURN_IF_ERROR(a.smooth.expect_dtype("smooth", DType::kFP32));
    HP_RETURN_IF_ERROR(expect_contiguous(a.smooth, "smooth"));
  }
  HP_RETURN_IF_ERROR(dispatch_layout(a.topk_idx, experts, ranks_, layout, a.x_active_mask));
  if (quant) {
    std::int8_t* rows = nullptr;
    float* scales = nullptr;
    if (send_epoch != 0) {
      const SendHalf mine = send_half(send_epoch, rank_);
      rows = reinterpret_cast<std::int8_t*>(mine.payload);
      scales = mine.scale;
    } else {
      quant_rows_.resize(std::size_t(tokens * hidden));
      quant_scales_.resize(std::size_t(tokens));
      rows = quant_rows_.data();
      scales = quant_scales_.data();
    }
    const auto* x_rows = static_cast<const std::uint8_t*>(a.x.data());
    HP_RETURN_IF_ERROR(
        for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
          return hp::kernels::quantize(
              *table_,
              TensorView(const_cast<std::uint8_t*>(x_rows) + std::size_t(t0 * hidden) * x_elem,
                         a.x.dtype(), {t1 - t0, hidden}),
              TensorView(rows + t0 * hidden, DType::kInt8, {t1 - t0, hidden}),
              TensorView(scales + t0, DType::kFP32, {t1 - t0}), a.smooth);
        }));
  }
  return send_epoch != 0 ? publish_tokens(a, send_epoch, *layout) : Status::ok();
}

template <typename Comm>
Status Buffer::notify_with(Comm& comm, const DispatchArgs& a, Handle* handle,
                           const Status& caller_check) {
  const std::int64_t experts = config_.num_experts;
  const std::int64_t per_rank = local_experts();
  // ---- validation: a rank with bad inputs still takes part in the count exchange, with its
  // error code in place of counts, so every rank returns an error instead of waiting.
  Handle& h = *handle;  // its storage is reused from call to call
  h.records = 0;
  notified_epoch_ = 0;
  const std::uint64_t epoch = ++dispatch_epoch_;
  const Status input =
      caller_check.is_ok() ? prepare_dispatch(a, &h.layout, pull_ ? epoch : 0) : caller_check;
  h.epoch = epoch;
  const auto R = std::size_t(ranks_);
  // ---- notify: counts (or this rank's error code) to every rank ---------------------------
  std::vector<std::int64_t> mine(kCountsHeader + R + std::size_t(experts), 0);
  mine[0] = std::int64_t(input.code());
  mine[1] = input.is_ok() ? rows_kind(a.x.dtype(), a.quant == Quant::kDynamicInt8) : 0;
  mine[2] = a.expert_alignment;
  if (input.is_ok()) {
    std::copy(h.layout.tokens_per_rank.begin(), h.layout.tokens_per_rank.end(),
              mine.begin() + kCountsHeader);
    std::copy(h.layout.tokens_per_expert.begin(), h.layout.tokens_per_expert.end(),
              mine.begin() + kCountsHeader + std::ptrdiff_t(R));
  }
  const std::size_t count_bytes = mine.size() * sizeof(std::int64_t);
  for (int i = 0; i < ranks_; ++i) {
    const int d = (rank_ + i) % ranks_;
    Status st;
    std::uint8_t* dst = comm.open(d, counts(epoch, rank_), count_bytes, &st);
    if (dst == nullptr) return st;
    std::memcpy(dst, mine.data(), count_bytes);
    HP_RETURN_IF_ERROR(comm.close(d, counts(epoch, rank_), dst, count_bytes));
    HP_RETURN_IF_ERROR(comm.signal(flag(kNotify, rank_), epoch, d));
  }
  for (int s = 0; s < ranks_; ++s) {
    HP_RETURN_IF_ERROR(hp::shmem::signal_wait_until(flag(kNotify, s), hp::shmem::Cmp::kGe, epoch));
  }
  if (!input.is_ok()) return input;
  // The source side's pairs that go to an expert (the streamed and zero-copy combines sum these).
  const std::int64_t tokens = a.x.dim(0), topk = config_.topk;
  const auto* active = static_cast<const std::uint8_t*>(a.x_active_mask.data());
  h.pair_expert.assign(std::size_t(tokens * topk), -1);
  h.token_active.assign(std::size_t(tokens), 1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (active != nullptr && active[t] == 0) {
      h.token_active[std::size_t(t)] = 0;
      continue;
    }
    for (std::int64_t k = 0; k < topk; ++k)
      h.pair_expert[std::size_t(t * topk + k)] = std::int32_t(topk_at(a.topk_idx, t, k));
  }
  for (int s = 0; s < ranks_; ++s) {
    if (counts(epoch, s)[0] != 0) {
      return Status::error(ErrorCode::kAborted,
                           "dispatch: rank {} rejected its inputs ({}); see its error", s,
                           to_string(ErrorCode(counts(epoch, s)[0])));
    }
  }
  HP_RETURN_IF_ERROR(
      expect_same_rows_kind("dispatch", ranks_, rank_, [&](int s) { return counts(epoch, s)[1]; }));
  h.tok.resize(R * R);
  std::vector<std::int64_t>& expert_rows = h.tokens_per_expert;
  expert_rows.assign(std::size_t(per_rank), 0);
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t* c = counts(epoch, int(s)) + kCountsHeader;
    for (std::size_t d = 0; d < R; ++d) h.tok[s * R + d] = c[d];
    for (std::int64_t le = 0; le < per_rank; ++le)
      expert_rows[std::size_t(le)] += c[R + std::size_t(rank_ * per_rank + le)];
  }
  // ---- the push path's records window: every rank sees the same counts, so all grow alike --
  std::int64_t needed = 0;
  for (std::size_t d = 0; d < R; ++d) {
    std::int64_t incoming = 0;
    for (std::size_t s = 0; s < R; ++s) incoming += h.tok[s * R + d];
    needed = std::max(needed, incoming);
  }
  if (!pull_ && needed > recv_capacity_) {
    if (!config_.grow_on_overflow) {
      return Status::error(
          ErrorCode::kOutOfMemory,
          "dispatch: a rank receives {} tokens, more than the {} the capacity factor {} holds (no "
          "token was sent; raise capacity_factor or set grow_on_overflow)",
          needed, recv_capacity_, config_.capacity_factor);
    }
    const std::int64_t lossless = std::int64_t(R) * config_.max_tokens_per_rank;
    std::int64_t capacity = recv_capacity_;
    while (capacity < needed)
      capacity = std::min(lossless,
                          std::max(capacity + 1, std::int64_t(std::ceil(1.25 * double(capacity)))));
    HP_RETURN_IF_ERROR(allocate_records(capacity));
    ++records_grown_;
  }
  // ---- the receive layout: each local expert's rows, padded to expert_alignment ------------
  h.expert_offsets.assign(std::size_t(per_rank) + 1, 0);
  for (std::int64_t le = 0; le < per_rank; ++le) {
    const std::int64_t padded = (expert_rows[std::size_t(le)] + a.expert_alignment - 1) /
                                a.expert_alignment * a.expert_alignment;
    h.expert_offsets[std::size_t(le) + 1] = h.expert_offsets[std::size_t(le)] + padded;
  }
  h.rows = h.expert_offsets.back();
  for (std::size_t s = 0; s < R; ++s) h.records += h.tok[s * R + std::size_t(rank_)];
  if (config_.zero_copy_combine) HP_RETURN_IF_ERROR(plan_pulls(epoch, &h));
  notified_epoch_ = epoch;
  return comm.quiet();
}

// The push path's data: each token once per destination, as a record in its records window;
// tokens split over the workers. Every destination's region is opened first (staging under
// ShmemComm), the workers write their tokens' records (a token's record for d comes after
// those of earlier tokens in d), then each region is sent and flagged; then it waits for every
// source's records.
template <typename Comm>
Status Buffer::push_records(Comm& comm, const DispatchArgs& a, const Handle& h) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk;
  const bool quant = a.quant == Quant::kDynamicInt8;
  const std::int64_t tokens = a.x.dim(0);
  const std::uint64_t epoch = h.epoch;
  const auto R = std::size_t(ranks_);
  const std::size_t payload_bytes = std::size_t(hidden) * (quant ? 1 : a.x.element_size());
  const auto* x_bytes = static_cast<const std::uint8_t*>(a.x.data());
  const auto* weights = static_cast<const float*>(a.topk_weights.data());
  std::vector<std::uint8_t*> dst(R, nullptr);
  std::vector<std::int64_t> first(R, 0);  // my first record in d's window
  for (std::size_t d = 0; d < R; ++d) {
    for (std::size_t s = 0; s < std::size_t(rank_); ++s) first[d] += h.tok[s * R + d];
    const std::int64_t n = h.tok[std::size_t(rank_) * R + d];
    if (n == 0) continue;
    Status st;
    dst[d] = comm.open(int(d), record(first[d]), std::size_t(n) * record_bytes_, &st);
    if (dst[d] == nullptr) return st;
  }
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, tokens, [&](std::int64_t t0, std::int64_t t1, int) {
        std::vector<std::int64_t> at(R, 0);
        for (std::int64_t t = 0; t < t0; ++t) {
          for (std::size_t d = 0; d < R; ++d) at[d] += h.layout.in_rank(t, std::int64_t(d));
        }
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::uint8_t* src =
              quant ? reinterpret_cast<const std::uint8_t*>(quant_rows_.data()) + t * hidden
                    : x_bytes + std::size_t(t) * payload_bytes;
          for (std::size_t d = 0; d < R; ++d) {
            if (!h.layout.in_rank(t, std::int64_t(d))) continue;
            std::uint8_t* rec = dst[d] + std::size_t(at[d]++) * record_bytes_;
            RecordMeta meta{std::int32_t(t), quant ? quant_scales_[std::size_t(t)] : 0.0f};
            std::memcpy(rec, &meta, sizeof(meta));
            for (std::int64_t k = 0; k < topk; ++k) {
              meta_experts(rec)[k] = std::int32_t(topk_at(a.topk_idx, t, k));
              meta_weights(rec, topk)[k] = weights[t * topk + k];
            }
            stream_copy(rec + meta_bytes_, src, payload_bytes);
          }
        }
        return Status::ok();
      }));
  for (int i = 0; i < ranks_; ++i) {
    const auto d = std::size_t((rank_ + 1 + i) % ranks_);
    const std::size_t bytes = std::size_t(h.tok[std::size_t(rank_) * R + d]) * record_bytes_;
    HP_RETURN_IF_ERROR(comm.close(int(d), record(first[d]), dst[d], bytes));
    HP_RETURN_IF_ERROR(comm.signal(flag(kDispatch, rank_), epoch, int(d)));
  }
  for (int s = 0; s < ranks_; ++s) {
    HP_RETURN_IF_ERROR(
        hp::shmem::signal_wait_until(flag(kDispatch, s), hp::shmem::Cmp::kGe, epoch));
  }
  return Status::ok();
}
template Status Buffer::push_records(WindowComm&, const DispatchArgs&, const Handle&);
template Status Buffer::push_records(ShmemComm&, const DispatchArgs&, const Handle&);

template <typename Comm>
Status Buffer::data_with(Comm& comm, const DispatchArgs& a, Handle* handle,
                         const DispatchOutputs& out,
                         const std::function<Status(std::int64_t)>& on_expert_ready) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, per_rank = local_experts();
  const bool quant = a.quant == Quant::kDynamicInt8;
  Handle& h = *handle;
  const auto R = std::size_t(ranks_);
  // Validated by notify_dispatch (the same args): the outputs are checked here, after this
  // rank's records are sent, so that a bad output is this rank's error only.
  const Status outputs = check_dispatch_outputs(a, h, out);
  const std::size_t payload_bytes = std::size_t(hidden) * (quant ? 1 : a.x.element_size());
  // The pull path's tokens are in their sources' send windows since the count exchange.
  if (!pull_) HP_RETURN_IF_ERROR(push_records(comm, a, h));
  if (!outputs.is_ok()) {
    HP_RETURN_IF_ERROR(comm.quiet());
    return outputs;
  }
  // ---- expand: records into rows grouped by local expert; pad rows are zero ---------------
  auto* x_out = static_cast<std::uint8_t*>(out.x.data());
  auto* scale_out = static_cast<float*>(out.x_scale.data());
  auto* weight_out = static_cast<float*>(out.topk_weights.data());
  for (std::int64_t le = 0; le < per_rank; ++le) {
    const std::int64_t pad_begin =
        h.expert_offsets[std::size_t(le)] + h.tokens_per_expert[std::size_t(le)];
    const std::int64_t pad_end = h.expert_offsets[std::size_t(le) + 1];
    std::memset(x_out + std::size_t(pad_begin) * payload_bytes, 0,
                std::size_t(pad_end - pad_begin) * payload_bytes);
    if (quant) std::fill(scale_out + pad_begin, scale_out + pad_end, 0.0f);
    std::fill(weight_out + pad_begin, weight_out + pad_end, 0.0f);
  }
  h.row_src_rank.assign(std::size_t(h.rows), -1);
  h.row_src_token.assign(std::size_t(h.rows), -1);
  h.row_src_slot.assign(std::size_t(h.rows), -1);
  h.record_rows.assign(std::size_t(h.records * topk), -1);
  record_payload_.resize(std::size_t(h.records));
  std::vector<std::int64_t> cursor(h.expert_offsets.begin(), h.expert_offsets.end() - 1);
  std::int64_t rec_index = 0;
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t n = h.tok[s * R + std::size_t(rank_)];
    // Record i from s: the i-th token s sends here, in s's send window (pull) or in this
    // rank's records window (push).
    const SendHalf from = pull_ ? send_half(h.epoch, int(s)) : SendHalf{};
    const std::int32_t* list = pull_ ? from.list + rank_ * config_.max_tokens_per_rank : nullptr;
    for (std::int64_t i = 0; i < n; ++i, ++rec_index) {
      RecordMeta meta;
      const std::int32_t* experts = nullptr;
      const float* weights = nullptr;
      if (pull_) {
        meta.token = list[i];
        meta.scale = quant ? from.scale[meta.token] : 0.0f;
        experts = from.expert + std::int64_t(meta.token) * topk;
        weights = from.weight + std::int64_t(meta.token) * topk;
        record_payload_[std::size_t(rec_index)] =
            from.payload + std::size_t(meta.token) * payload_bytes;
      } else {
        std::uint8_t* rec = record(rec_index);
        std::memcpy(&meta, rec, sizeof(meta));
        experts = meta_experts(rec);
        weights = meta_weights(rec, topk);
        record_payload_[std::size_t(rec_index)] = rec + meta_bytes_;
      }
      for (std::int64_t k = 0; k < topk; ++k) {
        const std::int64_t e = experts[k];
        if (e < rank_ * per_rank || e >= (rank_ + 1) * per_rank) continue;
        const std::int64_t row = cursor[std::size_t(e - rank_ * per_rank)]++;
        if (quant) scale_out[row] = meta.scale;
        weight_out[row] = weights[k];
        h.row_src_rank[std::size_t(row)] = std::int32_t(s);
        h.row_src_token[std::size_t(row)] = meta.token;
        h.row_src_slot[std::size_t(row)] = std::int32_t(k);
        h.record_rows[std::size_t(rec_index * topk + k)] = row;
      }
    }
  }
  if (on_expert_ready) {  // the payloads expert by expert, each announced when written
    std::vector<std::int64_t>& row_record = expand_rows_;
    row_record.assign(std::size_t(h.rows), -1);
    for (std::int64_t i = 0; i < h.records; ++i) {
      for (std::int64_t k = 0; k < topk; ++k) {
        const std::int64_t row = h.record_rows[std::size_t(i * topk + k)];
        if (row >= 0) row_record[std::size_t(row)] = i;
      }
    }
    for (std::int64_t le = 0; le < per_rank; ++le) {
      const std::int64_t first = h.expert_offsets[std::size_t(le)];
      for (std::int64_t row = first; row < first + h.tokens_per_expert[std::size_t(le)]; ++row) {
        stream_copy(x_out + std::size_t(row) * payload_bytes,
                    record_payload_[std::size_t(row_record[std::size_t(row)])], payload_bytes);
      }
      stream_fence();
      HP_RETURN_IF_ERROR(on_expert_ready(le));
    }
    return comm.quiet();
  }
  // The payloads, records split over the workers.
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, h.records, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t i = r0; i < r1; ++i) {
          const std::uint8_t* payload = record_payload_[std::size_t(i)];
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int64_t row = h.record_rows[std::size_t(i * topk + k)];
            if (row >= 0)
              stream_copy(x_out + std::size_t(row) * payload_bytes, payload, payload_bytes);
          }
        }
        return Status::ok();
      }));
  return comm.quiet();
}

Status Buffer::sum_tokens_into_y(WorkerScratch& w, DType wire, const TensorView& y, std::int64_t t0,
                                 std::int64_t t1, const GatherRows& gather) const {
  const std::int64_t hidden = config_.hidden;
  const std::size_t y_row_bytes = std::size_t(hidden) * dtype_size(y.dtype());
  w.row.resize(std::size_t(hidden) * sizeof(float));
  w.rows.clear();
  w.weights.clear();
  if (t0 < t1) gather(t0, w.rows, w.weights);
  for (std::int64_t t = t0; t < t1; ++t) {
    w.next.clear();
    w.next_weights.clear();
    if (t + 1 < t1) gather(t + 1, w.next, w.next_weights);
    HP_RETURN_IF_ERROR(hp::kernels::row_sum(*table_, w.rows, wire, w.weights,
                                            TensorView(w.row.data(), y.dtype(), {hidden}), w.next));
    stream_copy(static_cast<std::uint8_t*>(y.data()) + std::size_t(t) * y_row_bytes, w.row.data(),
                y_row_bytes);
    std::swap(w.rows, w.next);
    std::swap(w.weights, w.next_weights);
  }
  return Status::ok();
}

template <typename Comm>
Status Buffer::combine_with(Comm& comm, const TensorView& expert_out, const Handle& h,
                            const TensorView& y, const float* weights) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk;
  const auto R = std::size_t(ranks_);
  const std::uint64_t epoch = ++combine_epoch_;
  const DType wire = expert_out.dtype();
  const std::size_t wire_bytes = std::size_t(hidden) * dtype_size(wire);
  const auto* out_bytes = static_cast<const std::uint8_t*>(expert_out.data());
  scratch_.resize(std::size_t(share_workers(config_.chip)));
  for (WorkerScratch& w : scratch_) w.row.resize(std::size_t(hidden) * sizeof(float));
  // ---- send: per received record, the weighted sum of its rows, to the record's source -------
  // Records from source s are [rec_first[s], rec_first[s + 1]) of this rank's records; their
  // rows go to s's back region after those of ranks before me, in record order.
  std::vector<std::int64_t> rec_first(R + 1, 0);
  std::vector<std::uint8_t*> dst(R, nullptr);
  std::vector<std::int64_t> slot(R, 0);  // where my rows start in s's back region
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t n = h.tok[s * R + std::size_t(rank_)];
    rec_first[s + 1] = rec_first[s] + n;
    for (std::size_t d = 0; d < std::size_t(rank_); ++d) slot[s] += h.tok[s * R + d];
    if (n == 0) continue;
    Status st;
    dst[s] = comm.open(int(s), back_row(epoch, slot[s]),
                       std::size_t(n - 1) * back_row_bytes_ + wire_bytes, &st);
    if (dst[s] == nullptr) return st;
  }
  HP_RETURN_IF_ERROR(
      for_each_share(config_.chip, h.records, [&](std::int64_t r0, std::int64_t r1, int worker) {
        WorkerScratch& w = scratch_[std::size_t(worker)];
        std::size_t s = 0;
        for (std::int64_t i = r0; i < r1; ++i) {
          while (i >= rec_first[s + 1]) ++s;
          w.rows.clear();
          w.weights.clear();
          w.next.clear();
          for (std::int64_t k = 0; k < topk; ++k) {
            const std::int64_t row = h.record_rows[std::size_t(i * topk + k)];
            if (row >= 0) {
              w.rows.push_back(out_bytes + std::size_t(row) * wire_bytes);
              w.weights.push_back(weights ? weights[row] : 1.0f);
            }
            const std::int64_t next =
                i + 1 < r1 ? h.record_rows[std::size_t((i + 1) * topk + k)] : -1;
            if (next >= 0) w.next.push_back(out_bytes + std::size_t(next) * wire_bytes);
          }
          // Summed in cache, then streamed to the source rank's window.
          HP_RETURN_IF_ERROR(hp::kernels::row_sum(
              *table_, w.rows, wire, w.weights, TensorView(w.row.data(), wire, {hidden}), w.next));
          stream_copy(dst[s] + std::size_t(i - rec_first[s]) * back_row_bytes_, w.row.data(),
                      wire_bytes);
        }
        return Status::ok();
      }));
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t n = rec_first[s + 1] - rec_first[s];
    const std::size_t bytes = n == 0 ? 0 : std::size_t(n - 1) * back_row_bytes_ + wire_bytes;
    HP_RETURN_IF_ERROR(comm.close(int(s), back_row(epoch, slot[s]), dst[s], bytes));
    HP_RETURN_IF_ERROR(comm.signal(flag(kCombine, rank_), epoch, int(s)));
  }
  for (int d = 0; d < ranks_; ++d) {
    HP_RETURN_IF_ERROR(hp::shmem::signal_wait_until(flag(kCombine, d), hp::shmem::Cmp::kGe, epoch));
  }
  if (Status rejected = check_rejections(kCombine, epoch, "combine"); !rejected.is_ok()) {
    HP_RETURN_IF_ERROR(comm.quiet());
    return rejected;
  }
  // ---- reduce: y[t] = sum over ranks d holding t of d's row, in rank order; tokens split ----
  std::vector<std::int64_t> base(R, 0);
  for (std::size_t d = 1; d < R; ++d) base[d] = base[d - 1] + h.tok[std::size_t(rank_) * R + d - 1];
  HP_RETURN_IF_ERROR(for_each_share(
      config_.chip, h.layout.num_tokens, [&](std::int64_t t0, std::int64_t t1, int worker) {
        std::vector<std::int64_t> at(R, 0);
        for (std::int64_t t = 0; t < t0; ++t) {
          for (std::size_t d = 0; d < R; ++d) at[d] += h.layout.in_rank(t, std::int64_t(d));
        }
        const auto gather = [&](std::int64_t t, std::vector<const void*>& rows,
                                std::vector<float>&) {
          for (std::size_t d = 0; d < R; ++d) {
            if (h.layout.in_rank(t, std::int64_t(d)))
              rows.push_back(back_row(epoch, base[d] + at[d]++));
          }
        };
        return sum_tokens_into_y(scratch_[std::size_t(worker)], wire, y, t0, t1, gather);
      }));
  return comm.quiet();
}

}  // namespace hp::moe
