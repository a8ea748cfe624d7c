// MoE dispatch and combine between the ranks of the shmem world (DeepEP's normal mode).
//
// A Buffer is created collectively (every rank, same BufferConfig; a disagreement is an error
// on every rank) and owns one symmetric window per rank, plus the allocations of the modes
// that grow or exist on one path only. Their regions and layouts are in buffer_regions.h, one
// type per mode: the status words (flags and counts) every call uses; the normal combine's
// return rows; the push dispatch's records; the pull dispatch's send window; the low-latency
// mode's counts, slots and rows; the streamed combine's pair rows; the zero-copy combine's
// rows.
//
// Calls are collective and in the same order on every rank: notify (inside dispatch) -> data ->
// (combine). A rank writes a peer's region only after the peer has entered the call that
// reads it (the count exchange of the next dispatch orders everything of the previous one).
//
// dispatch moves each token once per destination rank (quantised once when asked), on one of
// two paths (BufferConfig::dispatch_path):
//   push: the source writes the token's record (int8 row and scale, experts and weights) into
//         each destination's records window, then each destination expands its records;
//   pull: the source writes its tokens once into its own send window before the count
//         exchange, and each destination expands them from there, read in place: no record
//         is copied on the way (the peers' heaps must be mapped: threads and shm transports).
// Either way the destination's rows are grouped by local expert: recv_x [rows, H] with
// expert_offsets (padded to expert_alignment; pad rows are zero), the order within an expert
// by source rank, then token.
// combine is its adjoint: each expert rank sums, per received token, weight x expert output
// over its local experts in fp32 and sends that row back (rounded to expert_out's dtype); the
// source sums the rows of its ranks in fp32, in rank order, and writes y (fp32 or bf16).
// With zero_copy_combine (DeepEP's zero copy), the expert outputs are written by the caller
// into the buffer's combine rows on the symmetric heap, and combine moves no rows: each rank
// publishes its weights and sets its flag, then every source reads its pairs' rows where they
// are (in place where the peer's heap is mapped, hp::shmem::get_nbi otherwise) and sums
// y[t] = sum over k of weight x row in fp32, in k order, rounded once.
#ifndef HYPER_PARALLEL_MOE_BUFFER_H_
#define HYPER_PARALLEL_MOE_BUFFER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "moe/buffer_regions.h"
#include "moe/comm.h"
#include "moe/layout.h"
#include "platform/chip.h"

namespace hp::kernels {
struct KernelTable;
}

namespace hp::moe {

// How dispatch moves tokens (see the top of this file). kPull needs every rank to map every
// peer's heap (the threads and shm transports; UNSUPPORTED otherwise) and a lossless buffer (a
// capacity factor bounds the push path's records window: INVALID_ARGUMENT with one). kAuto:
// kPull where both hold, else kPush.
enum class DispatchPath : std::int32_t { kAuto = 0, kPush = 1, kPull = 2 };

struct BufferConfig {
  std::int64_t hidden = 0;               // H
  std::int64_t max_tokens_per_rank = 0;  // T_max: the most tokens any rank dispatches at once
  std::int64_t num_experts = 0;          // E (a multiple of the number of ranks)
  std::int64_t topk = 0;                 // K
  std::int64_t max_element_bytes = 4;    // the widest x dtype dispatched unquantised (4: fp32)
  // the widest expert_out dtype combined (4: fp32, 2: bf16)
  std::int64_t combine_element_bytes = 4;
  CommKind comm = CommKind::kShmem;
  // Adds the low-latency mode's regions (low_latency_dispatch/combine; max_tokens_per_rank is
  // their per-rank batch bound too).
  bool low_latency = false;
  // 0: lossless (room for every rank's max_tokens_per_rank records at each rank). > 0 (>= 1):
  // room for capacity_factor x the average load (max_tokens_per_rank x min(K, R) records);
  // a dispatch that needs more grows it x1.25 at a time, collectively, up to the lossless
  // bound, or, with grow_on_overflow = false, fails with OUT_OF_MEMORY on every rank before
  // any token moves. No token is ever dropped.
  double capacity_factor = 0.0;
  bool grow_on_overflow = true;
  // The vector cores dispatch and combine split their tokens over (a kVector launch); null:
  // the calling thread. Per rank (not compared across ranks); the chip must outlive its use.
  hp::platform::Chip* chip = nullptr;
  // Adds the streamed combine's region (combine_stream_*).
  bool streamed_combine = false;
  // combine reads the expert outputs in place: they must be written into combine_buffer()'s
  // tensor (on the symmetric heap) instead of a tensor of the caller's.
  bool zero_copy_combine = false;
  DispatchPath dispatch_path = DispatchPath::kAuto;
};

enum class Quant : std::int32_t { kNone = 0, kDynamicInt8 = 1 };

struct DispatchArgs {
  TensorView x;              // fp32/bf16 [T, H], contiguous
  TensorView topk_idx;       // int64/int32 [T, K]; -1 = no expert
  TensorView topk_weights;   // fp32 [T, K]
  TensorView x_active_mask;  // optional uint8 [T]: 0 = the token is not sent
  Quant quant = Quant::kNone;
  std::int64_t expert_alignment = 1;  // each local expert's rows padded to a multiple of this
  // optional fp32 [H] (kDynamicInt8): x x smooth per channel, then quantised
  TensorView smooth;
};

// What combine needs of a dispatch: who sent each received row, and where the rows of each
// received token are.
struct Handle {
  std::uint64_t epoch = 0;
  DispatchLayout layout;          // the source side (this rank's tokens)
  std::vector<std::int64_t> tok;  // [R x R] tokens rank s sends to rank d (s-major)
  // The receive layout (notify_dispatch): rows per local expert, their offsets (padded to
  // expert_alignment) and the total, which sizes dispatch_data's outputs.
  std::vector<std::int64_t> tokens_per_expert;  // [E_local]
  std::vector<std::int64_t> expert_offsets;     // [E_local + 1]
  std::int64_t rows = 0;
  std::vector<std::int64_t> record_rows;    // [records x K]: rows of each received record, -1 none
  std::vector<std::int32_t> row_src_rank;   // [rows], -1 for pad rows
  std::vector<std::int32_t> row_src_token;  // [rows]
  // [rows]: the row's k in its token's top-k, -1 for pad rows
  std::vector<std::int32_t> row_src_slot;
  std::int64_t records = 0;
  // [T x K], the source side: pair (t, k)'s expert, -1 when not sent
  std::vector<std::int32_t> pair_expert;
  // [T], the source side: 0 for tokens x_active_mask left out
  std::vector<std::uint8_t> token_active;
  // The source side, with zero_copy_combine: pair (t, k)'s row in the combine rows of its
  // expert's rank; each expert's rows of this rank are one run, from expert_first_row [E].
  std::vector<std::int64_t> pair_row;          // [T x K]
  std::vector<std::int64_t> expert_first_row;  // [E]
};

// Where dispatch_data writes (sized by notify_dispatch's handle.rows): x int8 (quantised) or
// x's dtype [rows, H]; x_scale fp32 [rows] (quantised only); topk_weights fp32 [rows].
struct DispatchOutputs {
  TensorView x, x_scale, topk_weights;
};

struct DispatchResult {
  DType x_dtype = DType::kInt8;
  std::int64_t rows = 0, hidden = 0;
  std::vector<std::uint8_t> x_bytes;            // [rows, H] of x_dtype
  std::vector<float> x_scale;                   // [rows] (quantised dispatch)
  std::vector<float> topk_weights;              // [rows]: the weight of this row's expert
  std::vector<std::int64_t> expert_offsets;     // [E_local + 1]
  std::vector<std::int64_t> tokens_per_expert;  // [E_local] (unpadded)
  Handle handle;

  TensorView x() { return TensorView(x_bytes.data(), x_dtype, {rows, hidden}); }
};

// DeepEP's low-latency mode (decode): no count exchange before the data. Each (token, expert)
// pair goes straight to its slot: source s's pairs for local expert e fill slots
// [e][s][0, n) of the expert's rank, then s writes its counts and sets the flag. The receiver
// packs each expert's rows by source, then token.
struct LowLatencyHandle {
  std::uint64_t epoch = 0;
  std::int64_t tokens = 0;             // this rank's T
  std::vector<std::int64_t> topk_idx;  // [T x K] as dispatched; -1 where nothing was sent
  // [T x K]: the pair's slot at its expert (its rank among this rank's pairs for that
  // expert), -1 none
  std::vector<std::int32_t> pair_slot;
  std::vector<std::int32_t> row_src_rank;   // [E_local x R*T_max]; -1 past an expert's rows
  std::vector<std::int32_t> row_src_token;  // [E_local x R*T_max]
};

struct LowLatencyResult {
  DType x_dtype = DType::kInt8;
  std::int64_t hidden = 0;
  std::int64_t rows_per_expert = 0;  // R x T_max
  // [E_local, R*T_max, H]; rows past an expert's count unspecified
  std::vector<std::uint8_t> x_bytes;
  std::vector<float> x_scale;                   // [E_local, R*T_max] (quantised dispatch)
  std::vector<std::int64_t> tokens_per_expert;  // [E_local]: each expert's packed rows
  std::vector<std::int64_t> layout_range;       // [E_local, R, 2]: first row and count from rank s
  LowLatencyHandle handle;

  TensorView x() {
    return TensorView(x_bytes.data(), x_dtype,
                      {std::int64_t(tokens_per_expert.size()), rows_per_expert, hidden});
  }
};

class HP_API Buffer {
 public:
  // Collective over the shmem world (hp::shmem must be initialized).
  static Status create(const BufferConfig& config, std::unique_ptr<Buffer>* out);
  ~Buffer();  // frees the window (collective): call destroy() first to see its status
  Status destroy();

  const BufferConfig& config() const { return config_; }
  int rank() const { return rank_; }
  int num_ranks() const { return ranks_; }
  std::int64_t local_experts() const { return config_.num_experts / ranks_; }
  // The path dispatch takes (kPush or kPull: kAuto resolved by create).
  DispatchPath dispatch_path() const { return pull_ ? DispatchPath::kPull : DispatchPath::kPush; }
  // The push dispatch's records window: records per rank (0 on the pull path, which has none).
  std::int64_t record_capacity() const { return records_.capacity(); }
  std::int64_t times_grown() const { return records_.times_grown(); }

  // dispatch = notify_dispatch + dispatch_data into the result's own storage (caller_check as
  // notify_dispatch's).
  Status dispatch(const DispatchArgs& args, DispatchResult* out,
                  const Status& caller_check = Status::ok());
  // The two halves, for callers that allocate the outputs themselves (the op ABI): the count
  // exchange (validating and quantising the inputs) fills handle's receive layout; then
  // dispatch_data with the same args sends the tokens and writes the rows into `out`. No other
  // call on the buffer may come between them.
  // caller_check: an error the caller found in its own arguments (e.g. an op's outputs), sent
  // in place of the counts like an input error, so that every rank fails alike.
  Status notify_dispatch(const DispatchArgs& args, Handle* handle,
                         const Status& caller_check = Status::ok());
  // on_expert_ready (optional): called with each local expert in order as soon as its rows are
  // all in `out` (every source's tokens arrived and were expanded), so that its GEMM can start
  // while the next expert's rows are written; then the rows are written on the calling thread.
  Status dispatch_data(
      const DispatchArgs& args, Handle* handle, const DispatchOutputs& out,
      const std::function<Status(std::int64_t local_expert)>& on_expert_ready = {});
  // expert_out fp32/bf16 [rows, H] (rows of the dispatch); weights: optional fp32 [rows]
  // (default: the dispatched top-k weights; pass `weighted = false` to sum without weights,
  // dispatch's adjoint); y fp32/bf16 [T, H] of the dispatching rank.
  // With zero_copy_combine, expert_out must be combine_buffer(handle)'s tensor.
  Status combine(const TensorView& expert_out, const Handle& handle, const TensorView& y,
                 const TensorView& weights = {}, bool weighted = true);
  // zero_copy_combine: where this rank's expert outputs for the last dispatch's rows go, the
  // [handle.rows, H] tensor (bf16 when combine_element_bytes is 2, else fp32) on the symmetric
  // heap that combine reads in place. Call it before writing the rows of each combine: it waits
  // until no rank still reads the previous combine's rows (normally long done: the next
  // dispatch orders that). Several combines of one dispatch may read the same rows without it.
  // The tensor is valid until the next dispatch.
  Status combine_buffer(const Handle& handle, TensorView* out);

  // The streamed combine (a buffer made with streamed_combine; the deep fuse, where the
  // combine runs as GMM2's tiles complete): combine_stream_begin with the last dispatch's handle,
  // combine_stream_rows for every row of expert_out once, in any order and batches, as they are
  // ready, then combine_stream_end. Each row goes back unsummed to its source's pair slot
  // [t][k] (its weight must be applied already: GMM2's epilogue does); end sets this rank's
  // flag on every rank, waits for every rank's, and sums y[t] = the pair rows of t in k order
  // (fp32, written as y's dtype). One thread calls rows; no other call on the buffer between
  // begin and end. Inputs begin rejects (expert_out fp32/bf16 [rows, H], y fp32/bf16 [T, H])
  // make this rank send nothing and its end fail; the other ranks' end returns ABORTED.
  Status combine_stream_begin(const Handle& handle, const TensorView& expert_out,
                              const TensorView& y);
  Status combine_stream_rows(std::int64_t row_begin, std::int64_t row_end);
  // caller_check: an error the caller met while streaming (e.g. its GEMM failed): this rank
  // then rejects the call like a bad input, so that no rank waits for rows that never come.
  // add: optional fp32 [T, H] rows summed into y's rows of active tokens after the pair rows
  // (a shared expert's output: ProcessCombine, docs/design.md).
  Status combine_stream_end(const Status& caller_check = Status::ok(), const TensorView& add = {});

  // The chip dispatch and combine split their work over from now on (null: the calling thread,
  // e.g. when they run inside a launch of that chip). Per rank.
  void use_chip(hp::platform::Chip* chip) { config_.chip = chip; }

  // The low-latency mode (the buffer made with low_latency = true): args as dispatch's
  // (expert_alignment unused). combine: expert_out fp32/bf16 [E_local, R*T_max, H] in the
  // dispatch's row order; y[t] = sum over k of topk_weights[t][k] x the output of t's k-th
  // expert (fp32, in k order), fp32/bf16 [T, H]; tokens that were not sent get zeros.
  Status low_latency_dispatch(const DispatchArgs& args, LowLatencyResult* out);
  Status low_latency_combine(const TensorView& expert_out, const TensorView& topk_weights,
                             const LowLatencyHandle& handle, const TensorView& y);

 private:
  Buffer() = default;
  Status allocate_regions();
  // send_epoch: the normal dispatch on the pull path publishes into its send half; 0: no window.
  Status prepare_dispatch(const DispatchArgs& args, DispatchLayout* layout,
                          std::uint64_t send_epoch = 0);
  Status publish_tokens(const DispatchArgs& args, std::uint64_t epoch,
                        const DispatchLayout& layout);
  Status plan_pulls(std::uint64_t epoch, Handle* handle);
  Status expect_planned(const Handle& handle, const char* call) const;
  Status expect_combine_rows(const TensorView& expert_out, const Handle& handle) const;
  DType combine_rows_dtype() const {
    return config_.combine_element_bytes == 2 ? DType::kBF16 : DType::kFP32;
  }
  template <typename Comm>
  Status reject_call(Comm& comm, int kind, std::uint64_t epoch, const Status& input);
  Status check_rejections(int kind, std::uint64_t epoch, const char* call) const;
  template <typename Comm>
  Status notify_with(Comm& comm, const DispatchArgs& args, Handle* handle,
                     const Status& caller_check);
  template <typename Comm>
  Status send_counts(Comm& comm, const DispatchArgs& args, const Status& input,
                     const Handle& handle);
  Status grow_records(const Handle& handle);  // the push path (push_dispatch.cpp)
  template <typename Comm>
  Status push_records(Comm& comm, const DispatchArgs& args, const Handle& handle);
  template <typename Comm>
  Status data_with(Comm& comm, const DispatchArgs& args, Handle* handle, const DispatchOutputs& out,
                   const std::function<Status(std::int64_t)>& on_expert_ready);
  Status check_dispatch_outputs(const DispatchArgs& args, const Handle& handle,
                                const DispatchOutputs& out) const;
  // dispatch_data's steps after the records arrived: index them, then copy their payloads.
  void index_records(const DispatchArgs& args, Handle& handle, const DispatchOutputs& out);
  Status copy_payloads(const Handle& handle, std::size_t payload_bytes, std::uint8_t* x_out,
                       const std::function<Status(std::int64_t)>& on_expert_ready);
  template <typename Comm>
  Status combine_with(Comm& comm, const TensorView& expert_out, const Handle& handle,
                      const TensorView& y, const float* weights);
  template <typename Comm>
  Status pull_combine_with(Comm& comm, const Status& input, const Handle& handle,
                           const TensorView& y, const float* weights);
  Status pull_rows(const Handle& handle, const TensorView& y);
  template <typename Comm>
  Status low_latency_dispatch_with(Comm& comm, const DispatchArgs& args, LowLatencyResult* out);
  // low_latency_dispatch's steps: the pairs to their slots, the counts exchange, the packing.
  template <typename Comm>
  Status low_latency_send(Comm& comm, const DispatchArgs& args, const LowLatencyHandle& handle,
                          const std::vector<std::int64_t>& pairs, std::size_t payload_bytes);
  template <typename Comm>
  Status low_latency_counts(Comm& comm, const DispatchArgs& args, const Status& input,
                            std::uint64_t epoch, const std::vector<std::int64_t>& pairs);
  Status low_latency_pack(const DispatchArgs& args, LowLatencyHandle& handle,
                          std::size_t payload_bytes, LowLatencyResult* out);
  template <typename Comm>
  Status low_latency_combine_with(Comm& comm, const TensorView& expert_out, const float* weights,
                                  const LowLatencyHandle& handle, const TensorView& y);
  template <typename Comm>
  Status stream_rows_with(Comm& comm, std::int64_t row_begin, std::int64_t row_end);
  template <typename Comm>
  Status stream_end_with(Comm& comm, const Status& caller_check, const TensorView& add);

  BufferConfig config_;
  int rank_ = 0, ranks_ = 0;
  bool pull_ = false;  // dispatch takes the pull path
  std::uint8_t* window_ = nullptr;
  // The regions (buffer_regions.h); a mode's region is planned or allocated only when the
  // config asks for the mode.
  StatusWords status_;
  RowHalves back_;  // the normal combine's return rows (none with zero_copy_combine)
  PushRecords records_;
  SendWindow send_;
  LowLatencyRegions low_latency_;
  struct StreamedCombine {  // streamed_combine: its rows and the open call
    RowHalves rows;         // pair back
    bool open = false;
    std::uint64_t epoch = 0;  // of the open (or last) streamed combine
    const Handle* handle = nullptr;
    TensorView expert_out, y;
    Status input;  // this rank's verdict on its inputs
  } stream_;
  CombineRows combine_rows_;
  std::size_t combine_row_bytes_ = 0;  // every combine mode's row stride
  std::uint64_t dispatch_epoch_ = 0, combine_epoch_ = 0;
  std::uint64_t notified_epoch_ = 0;  // the notify_dispatch dispatch_data may continue, 0: none
  std::vector<std::int64_t> expand_rows_;            // dispatch_data by expert: each row's record
  std::vector<const std::uint8_t*> record_payload_;  // dispatch_data: each received record's row
  std::vector<std::int8_t> quant_rows_;  // this rank's tokens quantised once per dispatch
  std::vector<float> quant_scales_;
  struct WorkerScratch {                  // one per worker (shares.h)
    std::vector<const void*> rows, next;  // the rows of one sum and of the next
    std::vector<float> weights, next_weights;
    std::vector<std::uint8_t> row;  // one summed row (fp32 or bf16), before it is streamed
  };
  std::vector<WorkerScratch> scratch_;
  // Appends token t's rows to `rows` and, for a weighted sum, their weights to `weights` (none:
  // all 1). Called once per token, in order.
  using GatherRows = std::function<void(std::int64_t t, std::vector<const void*>& rows,
                                        std::vector<float>& weights)>;
  // y's rows [t0, t1): each token's gathered rows summed in fp32, in order (kernels::row_sum),
  // into w.row (in cache), then streamed to y. Tokens are gathered one ahead, so that each sum
  // prefetches the next one's rows (row_sum's `next`).
  Status sum_tokens_into_y(WorkerScratch& w, DType wire, const TensorView& y, std::int64_t t0,
                           std::int64_t t1, const GatherRows& gather) const;
  // Waits until every rank has set its pulled flag to `epoch` (read this rank's combine rows).
  Status wait_pulled(std::uint64_t epoch) const;
  WindowComm window_comm_;
  ShmemComm shmem_comm_;                             // its staging is kept from call to call
  const hp::kernels::KernelTable* table_ = nullptr;  // quantisation and combine's row sums
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_BUFFER_H_
