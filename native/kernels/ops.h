// The kernels' public operations: validated TensorView arguments in, a call of the chosen
// target's table out. Every check happens here (shapes, dtypes, strides, group offsets, expert
// ids, packed format) with a named error code; the targets never see bad arguments.
//
// GEMMs are planned first (the tile grid, the split of tiles across workers, the workspace
// each worker needs) and then run, one worker's share per call, so that callers (the chip's
// cube cores, a thread pool) run them in parallel. Rows of every tensor must be contiguous
// (innermost stride 1); row strides are free.
#ifndef HYPER_PARALLEL_KERNELS_OPS_H_
#define HYPER_PARALLEL_KERNELS_OPS_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "kernels/kernel_table.h"
#include "kernels/packing.h"
#include "kernels/tiles.h"

namespace hp::kernels {

// Per-row int8 quantisation (formula in kernel_table.h): x fp32/bf16 [rows, cols] -> q int8
// [rows, cols], scale fp32 [rows]. smooth: optional fp32 [cols] (null data = none).
// static_scale > 0 selects static quantisation. INVALID_ARGUMENT names the first row holding a
// NaN or an infinity.
HP_API Status quantize(const KernelTable& table, const TensorView& x, const TensorView& q,
                       const TensorView& scale, const TensorView& smooth = {},
                       float static_scale = 0.0f);

// out fp32/bf16 [rows, cols] = q int8 [rows, cols] * scale fp32 [rows].
HP_API Status dequantize(const KernelTable& table, const TensorView& q, const TensorView& scale,
                         const TensorView& out);

// out fp32/bf16 [cols] = sum over i in order of weights[i] * rows[i] (the RowSumArgs formula):
// rows are row_type (fp32/bf16) rows of cols elements; weights empty (all 1) or one per row.
// next: the rows of the caller's next sum, if it knows them, prefetched as this one proceeds
// (a hint: the result does not depend on it).
HP_API Status row_sum(const KernelTable& table, std::span<const void* const> rows, DType row_type,
                      std::span<const float> weights, const TensorView& out,
                      std::span<const void* const> next = {});

// The SwiGLU's element-wise steps of the MoE backward (formulas in kernel_table.h). Rows are
// grouped by expert (offsets int64 [E + 1]); smooth: optional fp32 [E, I].
//   swiglu: a fp32 [rows, 2I] (gate | up) -> h fp32 [rows, I].
HP_API Status swiglu(const KernelTable& table, const TensorView& a, const TensorView& offsets,
                     const TensorView& smooth, const TensorView& h);
struct SwigluGradProblem {
  TensorView a;             // fp32 [rows, 2I]: GMM1's gate | up
  TensorView offsets;       // int64 [E + 1]
  TensorView smooth;        // fp32 [E, I] or empty
  TensorView g;             // fp32 [rows, I]: dY W2^T
  TensorView h_q, h_scale;  // int8 [rows, I], fp32 [rows]: the quantised h (for d_row_weight)
  TensorView row_weight;    // fp32 [rows] or empty (1)
  TensorView da;            // bf16 [rows, 2I]: [d gate | d up]
  TensorView d_row_weight;  // fp32 [rows] or empty (not computed)
};
HP_API Status swiglu_grad(const KernelTable& table, const SwigluGradProblem& problem);

struct GroupedGemmProblem {
  TensorView a;        // int8 [rows, K]
  TensorView a_scale;  // fp32 [rows]
  TensorView offsets;  // int64 [E + 1]: rows of expert e are [offsets[e], offsets[e+1])
  const PackedWeightsHeader* weights = nullptr;  // packed: E, K, N
  Epilogue epilogue = Epilogue::kDequant;
  TensorView out;         // fp32/bf16 [rows, N]; int8 [rows, N/2] for kDequantSwigluQuant
  TensorView out_scale;   // fp32 [rows] (kDequantSwigluQuant)
  TensorView row_factor;  // fp32 [rows] (kDequantScale)
  TensorView smooth;      // fp32 [E, N/2] or empty (kDequantSwigluQuant)
  // fp32 [rows, N] or empty (kDequantSwigluQuant only): also store the dequantised GEMM output
  // a = [gate | up], bit for bit what kDequant computes from weights packed plainly.
  TensorView preact;
};

// A kInput GEMM's constant B (the backward's W^T) packed once into the table's panel layout,
// so that every GEMM with it reads the panels as they are instead of packing B per call.
class HP_API Bf16Panels {
 public:
  bool empty() const { return buffer_ == nullptr; }
  std::uint64_t bytes() const { return bytes_; }
  const KernelTable* table() const { return table_; }
  std::int64_t experts() const { return experts_; }
  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }
  const void* data() const { return buffer_.get(); }

 private:
  friend Status pack_bf16_panels(const KernelTable&, const TensorView&, Bf16Panels*);
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> buffer_;
  const KernelTable* table_ = nullptr;
  std::int64_t experts_ = 0, k_ = 0, n_ = 0;
  std::uint64_t bytes_ = 0;
};

// b bf16 [E, K, N] (any strides) into `out`; `out` stays empty when the table has no panel
// layout (its GEMMs then pack B per call). OUT_OF_MEMORY when the panels cannot be allocated.
HP_API Status pack_bf16_panels(const KernelTable& table, const TensorView& b, Bf16Panels* out);

struct Bf16GemmProblem {
  Bf16GemmKind kind = Bf16GemmKind::kInput;
  // kInput:  a bf16 [rows, K], b bf16 [E, K, N] (any strides: pass W transposed for dX = dY W^T),
  //          out fp32/bf16 [rows, N]
  // kWeight: a bf16 [rows, M], b bf16 [rows, N], out fp32/bf16 [E, M, N] (dW = X^T dY)
  TensorView a;
  TensorView offsets;  // int64 [E + 1]
  TensorView b;
  TensorView out;
  // kInput: B packed by pack_bf16_panels with this table, read instead of b (whose data may then
  // be null). Null or empty panels (the table has none): B is b.
  const Bf16Panels* b_panels = nullptr;
};

// Contiguous ranges of tiles, one per worker, of about equal work (rows x columns, so that an
// expert with many rows is split by its row blocks and small experts are packed together).
// Returns workers + 1 bounds.
HP_API std::vector<std::int64_t> split_tiles(const TileSpace& space, int workers);

// The grid for `workers`: the table's preferred tiles, shrunk until there are at least two
// tiles per worker (or the tiles reach their minimum). full_width: one tile spans every column.
HP_API TileGrid choose_grid(const KernelTable& table, const TileSpace& space, bool full_width,
                            int workers);

template <typename Args>
class GemmPlan;
using GroupedGemmPlan = GemmPlan<GroupedGemmArgs>;
using Bf16GemmPlan = GemmPlan<Bf16GemmArgs>;

// Validates the problem and plans it for `workers` (grid: null = choose_grid; a given grid
// must have tile_m >= 1 and tile_n a multiple of 16, or >= N/2 for kDequantSwigluQuant).
// The plan keeps pointers into the problem's tensors: they must outlive its runs.
HP_API Status plan_grouped_gemm(const KernelTable& table, const GroupedGemmProblem& problem,
                                int workers, GroupedGemmPlan* plan, const TileGrid* grid = nullptr);
HP_API Status plan_bf16_gemm(const KernelTable& table, const Bf16GemmProblem& problem, int workers,
                             Bf16GemmPlan* plan, const TileGrid* grid = nullptr);
// The two under one name, for callers generic over the problem's kind: PlanFor<Problem> is
// its plan type.
template <typename Problem>
using PlanFor =
    std::conditional_t<std::is_same_v<Problem, GroupedGemmProblem>, GroupedGemmPlan, Bf16GemmPlan>;
inline Status plan_gemm(const KernelTable& table, const GroupedGemmProblem& problem, int workers,
                        GroupedGemmPlan* plan) {
  return plan_grouped_gemm(table, problem, workers, plan);
}
inline Status plan_gemm(const KernelTable& table, const Bf16GemmProblem& problem, int workers,
                        Bf16GemmPlan* plan) {
  return plan_bf16_gemm(table, problem, workers, plan);
}

template <typename Args>
class GemmPlan {
 public:
  const KernelTable& table() const { return *table_; }
  const Args& args() const { return args_; }
  const TileGrid& grid() const { return grid_; }
  int workers() const { return int(bounds_.size()) - 1; }
  std::int64_t tiles() const { return bounds_.back(); }
  std::pair<std::int64_t, std::int64_t> worker_tiles(int worker) const {
    return {bounds_[worker], bounds_[worker + 1]};
  }
  std::uint64_t workspace_bytes() const { return workspace_bytes_; }  // per worker, 64-byte aligned
  // Runs `worker`'s tiles with its own workspace (workspace_bytes(), 64-byte aligned).
  void run(int worker, void* workspace) const {
    call(bounds_[std::size_t(worker)], bounds_[std::size_t(worker) + 1], workspace);
  }
  // Runs tiles [begin, end) (for callers that schedule tiles themselves).
  void call(std::int64_t begin, std::int64_t end, void* workspace) const {
    if constexpr (std::is_same_v<Args, GroupedGemmArgs>) {
      table_->grouped_gemm(&args_, &grid_, begin, end, workspace);
    } else {
      table_->bf16_gemm(&args_, &grid_, begin, end, workspace);
    }
  }

 private:
  friend Status plan_grouped_gemm(const KernelTable&, const GroupedGemmProblem&, int,
                                  GroupedGemmPlan*, const TileGrid*);
  friend Status plan_bf16_gemm(const KernelTable&, const Bf16GemmProblem&, int, Bf16GemmPlan*,
                               const TileGrid*);
  const KernelTable* table_ = nullptr;
  Args args_{};
  TileGrid grid_{};
  std::vector<std::int64_t> bounds_{0};
  std::uint64_t workspace_bytes_ = 0;
};
// Plan for one worker and run it on the calling thread (allocates the workspace).
HP_API Status grouped_gemm(const KernelTable& table, const GroupedGemmProblem& problem);
HP_API Status bf16_gemm(const KernelTable& table, const Bf16GemmProblem& problem);

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_OPS_H_
