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
#include "moe/buffer_config.h"
#include "moe/shares.h"
#include "moe/stream_copy.h"
#include "moe/window_layout.h"

namespace hp::moe {

using namespace window;  // NOLINT: the window's own constants

Status Buffer::create(const BufferConfig& config, std::unique_ptr<Buffer>* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "Buffer::create: out is null");
  HP_ENSURE(hp::shmem::initialized(), ErrorCode::kFailedPrecondition,
            "Buffer::create: hp::shmem is not initialized (call hp::shmem::init first)");
  bool all_mapped = false;
  HP_RETURN_IF_ERROR(agree_on_config(config, &all_mapped));
  const bool pull_wanted =
      config.dispatch_path == DispatchPath::kPull ||
      (config.dispatch_path == DispatchPath::kAuto && config.capacity_factor == 0.0);
  std::unique_ptr<Buffer> b(new Buffer());
  b->config_ = config;
  b->rank_ = hp::shmem::my_pe();
  b->ranks_ = hp::shmem::n_pes();
  b->pull_ = pull_wanted && all_mapped;
  HP_RETURN_IF_ERROR(hp::kernels::selected_target(&b->table_));
  HP_RETURN_IF_ERROR(b->allocate_regions());
  // Every rank initialises its own status words, then a barrier, before any remote write.
  std::memset(b->status_.flags(), 0, b->status_.flag_bytes());
  HP_RETURN_IF_ERROR(hp::shmem::barrier_all());
  *out = std::move(b);
  return Status::ok();
}

// (Collective.) The window's regions in their order, then the allocations of their own. The
// window comes first: a failure after it leaves a buffer whose destroy frees what exists.
Status Buffer::allocate_regions() {
  const RegionShape shape = region_shape(config_, ranks_);
  combine_row_bytes_ = shape.combine_row_bytes;
  WindowPlan plan;
  status_.plan(shape, &plan);
  back_.plan(shape.combine_row_bytes, config_.zero_copy_combine ? 0 : shape.sends(), &plan);
  if (config_.low_latency) low_latency_.plan(shape, &plan);
  if (config_.streamed_combine)
    stream_.rows.plan(shape.combine_row_bytes, shape.tmax * shape.topk, &plan);
  void* window = nullptr;
  HP_RETURN_IF_ERROR(hp::shmem::align(64, plan.bytes(), &window));
  window_ = static_cast<std::uint8_t*>(window);
  status_.attach(window_);
  back_.attach(window_);
  low_latency_.attach(window_);
  stream_.rows.attach(window_);
  if (pull_) {
    HP_RETURN_IF_ERROR(send_.allocate(shape));
  } else {
    // Lossless (every source's T_max to this rank) or the capacity factor's share of the
    // average load (T_max x min(K, R) per rank), which dispatch grows when a batch needs more.
    const auto lossless = std::int64_t(shape.ranks * shape.tmax);
    records_.init(shape);
    HP_RETURN_IF_ERROR(records_.allocate(
        config_.capacity_factor == 0.0
            ? lossless
            : std::min(lossless,
                       std::int64_t(std::ceil(config_.capacity_factor * double(shape.sends()))))));
  }
  if (config_.zero_copy_combine) {
    HP_RETURN_IF_ERROR(combine_rows_.allocate(
        shape, std::max<std::int64_t>(1, config_.max_tokens_per_rank * config_.topk)));
  }
  return Status::ok();
}

Buffer::~Buffer() { (void)destroy(); }

Status Buffer::destroy() {
  if (window_ == nullptr) return Status::ok();
  void* w = std::exchange(window_, nullptr);
  HP_RETURN_IF_ERROR(hp::shmem::barrier_all());  // nobody writes into our window any more
  HP_RETURN_IF_ERROR(records_.release());
  HP_RETURN_IF_ERROR(send_.release());
  HP_RETURN_IF_ERROR(combine_rows_.release());
  return hp::shmem::free(w);
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

// A call whose inputs this rank rejected: it still takes the call's epoch and sets its flag on
// every rank, its error code first written to the slot's status word, so that the others
// return ABORTED at once instead of waiting for their deadline.
template <typename Comm>
Status Buffer::reject_call(Comm& comm, int kind, std::uint64_t epoch, const Status& input) {
  const std::uint64_t word = (epoch << 16) | std::uint64_t(input.code());
  for (int i = 0; i < ranks_; ++i) {
    const int d = (rank_ + 1 + i) % ranks_;
    std::uint64_t* status = status_.flag(kind, rank_) + 1;
    Status st;
    std::uint8_t* p = comm.open(d, status, sizeof(word), &st);
    if (p == nullptr) return st;
    std::memcpy(p, &word, sizeof(word));
    HP_RETURN_IF_ERROR(comm.close(d, status, p, sizeof(word)));
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kind, rank_), epoch, d));
  }
  HP_RETURN_IF_ERROR(comm.quiet());
  return input;
}
template Status Buffer::reject_call(WindowComm&, int, std::uint64_t, const Status&);
template Status Buffer::reject_call(ShmemComm&, int, std::uint64_t, const Status&);

// After every flag of `kind` reached `epoch`: ABORTED naming a rank that rejected the call.
Status Buffer::check_rejections(int kind, std::uint64_t epoch, const char* call) const {
  for (int s = 0; s < ranks_; ++s) {
    const std::uint64_t word = *(status_.flag(kind, s) + 1);
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
      const SendWindow::Half mine = send_.half(send_epoch, rank_);
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

// The count exchange: this rank's counts (or its error code) and flag to every rank, then
// every rank's flag.
template <typename Comm>
Status Buffer::send_counts(Comm& comm, const DispatchArgs& a, const Status& input,
                           const Handle& h) {
  const std::uint64_t epoch = h.epoch;
  const auto R = std::size_t(ranks_);
  std::vector<std::int64_t> mine(kCountsHeader + R + std::size_t(config_.num_experts), 0);
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
    std::uint8_t* dst = comm.open(d, status_.counts(epoch, rank_), count_bytes, &st);
    if (dst == nullptr) return st;
    std::memcpy(dst, mine.data(), count_bytes);
    HP_RETURN_IF_ERROR(comm.close(d, status_.counts(epoch, rank_), dst, count_bytes));
    HP_RETURN_IF_ERROR(comm.signal(status_.flag(kNotify, rank_), epoch, d));
  }
  for (int s = 0; s < ranks_; ++s) {
    HP_RETURN_IF_ERROR(
        hp::shmem::signal_wait_until(status_.flag(kNotify, s), hp::shmem::Cmp::kGe, epoch));
  }
  return Status::ok();
}

template <typename Comm>
Status Buffer::notify_with(Comm& comm, const DispatchArgs& a, Handle* handle,
                           const Status& caller_check) {
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
  HP_RETURN_IF_ERROR(send_counts(comm, a, input, h));
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
    if (status_.counts(epoch, s)[0] != 0) {
      return Status::error(ErrorCode::kAborted,
                           "dispatch: rank {} rejected its inputs ({}); see its error", s,
                           to_string(ErrorCode(status_.counts(epoch, s)[0])));
    }
  }
  HP_RETURN_IF_ERROR(expect_same_rows_kind("dispatch", ranks_, rank_,
                                           [&](int s) { return status_.counts(epoch, s)[1]; }));
  h.tok.resize(R * R);
  std::vector<std::int64_t>& expert_rows = h.tokens_per_expert;
  expert_rows.assign(std::size_t(per_rank), 0);
  for (std::size_t s = 0; s < R; ++s) {
    const std::int64_t* c = status_.counts(epoch, int(s)) + kCountsHeader;
    for (std::size_t d = 0; d < R; ++d) h.tok[s * R + d] = c[d];
    for (std::int64_t le = 0; le < per_rank; ++le)
      expert_rows[std::size_t(le)] += c[R + std::size_t(rank_ * per_rank + le)];
  }
  if (!pull_) HP_RETURN_IF_ERROR(grow_records(h));
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

template <typename Comm>
Status Buffer::data_with(Comm& comm, const DispatchArgs& a, Handle* handle,
                         const DispatchOutputs& out,
                         const std::function<Status(std::int64_t)>& on_expert_ready) {
  const std::int64_t hidden = config_.hidden, per_rank = local_experts();
  const bool quant = a.quant == Quant::kDynamicInt8;
  Handle& h = *handle;
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
    if (pad_end == pad_begin) continue;  // no pad rows (with no rows at all, x_out is null)
    std::memset(x_out + std::size_t(pad_begin) * payload_bytes, 0,
                std::size_t(pad_end - pad_begin) * payload_bytes);
    if (quant) std::fill(scale_out + pad_begin, scale_out + pad_end, 0.0f);
    std::fill(weight_out + pad_begin, weight_out + pad_end, 0.0f);
  }
  index_records(a, h, out);
  HP_RETURN_IF_ERROR(copy_payloads(h, payload_bytes, x_out, on_expert_ready));
  return comm.quiet();
}

// Each received record's rows (by local expert, then source, then token), their scales,
// weights and sources into h and `out`, and where each record's payload is.
void Buffer::index_records(const DispatchArgs& a, Handle& h, const DispatchOutputs& out) {
  const std::int64_t hidden = config_.hidden, topk = config_.topk, per_rank = local_experts();
  const bool quant = a.quant == Quant::kDynamicInt8;
  const auto R = std::size_t(ranks_);
  const std::size_t payload_bytes = std::size_t(hidden) * (quant ? 1 : a.x.element_size());
  auto* scale_out = static_cast<float*>(out.x_scale.data());
  auto* weight_out = static_cast<float*>(out.topk_weights.data());
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
    const SendWindow::Half from = pull_ ? send_.half(h.epoch, int(s)) : SendWindow::Half{};
    const std::int32_t* list = pull_ ? from.list + rank_ * config_.max_tokens_per_rank : nullptr;
    for (std::int64_t i = 0; i < n; ++i, ++rec_index) {
      PushRecords::Meta meta;
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
        std::uint8_t* rec = records_.record(rec_index);
        std::memcpy(&meta, rec, sizeof(meta));
        experts = records_.experts(rec);
        weights = records_.weights(rec);
        record_payload_[std::size_t(rec_index)] = records_.payload(rec);
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
}

// The records' payloads into x_out at their rows: expert by expert, each announced to
// on_expert_ready when written, or split over the workers.
Status Buffer::copy_payloads(const Handle& h, std::size_t payload_bytes, std::uint8_t* x_out,
                             const std::function<Status(std::int64_t)>& on_expert_ready) {
  const std::int64_t topk = config_.topk, per_rank = local_experts();
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
    return Status::ok();
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
  return Status::ok();
}

}  // namespace hp::moe
