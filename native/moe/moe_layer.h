// HyperMegaMoe forward, staged (seed 002 §5: the non-deep-fuse path's stages, run for any number
// of experts per rank): dispatch with int8 quantisation -> GMM1 with the fused
// dequant + SwiGLU + requant epilogue -> GMM2 with dequant x top-k weight -> combine (the plain
// sum: the weights are already applied). Collective like the Buffer it owns.
//
// The intermediates follow the workspace plan (workspace_plan.h, reuse mode): received rows and
// scales in x1Token/x1Scale, GMM1's requantised SwiGLU rows in the SwiGLU region, moved to
// x2Token/x2Scale once GMM1 is done, GMM2's fp32 rows in swapSpace. A shared expert (seed 002
// §5: an extra GMM1 + GMM2 on the rank's own tokens) uses the shared regions the same way; its
// output is added to y after the combine.
// Weights are this rank's local experts (expert e = rank x E_local + local index), int8 with
// per-output-channel fp32 scales, packed once at create:
//   w1 [E_local, H, 2I] (columns [0, I) gate, [I, 2I) up), w1_scale [E_local, 2I]
//   w2 [E_local, I, H], w2_scale [E_local, H]
// With a chip, the GEMMs run on its cube cores and the communication on its vector cores;
// without, on the calling thread.
#ifndef HYPER_PARALLEL_MOE_MOE_LAYER_H_
#define HYPER_PARALLEL_MOE_MOE_LAYER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "kernels/ops.h"
#include "kernels/packing.h"
#include "moe/buffer.h"
#include "moe/workspace_plan.h"
#include "platform/chip.h"

namespace hp::moe {

struct MoeLayerConfig {
  std::int64_t hidden = 0, intermediate = 0, num_experts = 0, topk = 0, max_tokens_per_rank = 0;
  std::int64_t shared_intermediate = 0;  // > 0: a shared expert (every token, weight 1) of this I
  CommKind comm = CommKind::kShmem;
  hp::platform::Chip* chip = nullptr;
};

struct ExpertWeights {
  TensorView w1, w1_scale, w2, w2_scale;
  // TENSOR_LIST (seed 002 §5): one tensor per local expert instead of the stacked ones above
  // (w1 [H, 2I], w1_scale [2I], w2 [I, H], w2_scale [H] each; leave the stacked ones empty).
  std::vector<TensorView> w1_list, w1_scale_list, w2_list, w2_scale_list;
  // The shared expert's (with shared_intermediate > 0): [1, H, 2Is], [1, 2Is], [1, Is, H], [1, H].
  TensorView shared_w1, shared_w1_scale, shared_w2, shared_w2_scale;
};

// Seconds of each stage of the last forward on this rank (the shared expert's GEMMs count in
// gmm1 and gmm2, its sum in combine).
struct MoeStageTimes {
  double dispatch = 0, gmm1 = 0, gmm2 = 0, combine = 0;
};

class HP_API MoeLayer {
 public:
  static Status create(const MoeLayerConfig& config, const ExpertWeights& weights, std::unique_ptr<MoeLayer>* out);
  ~MoeLayer();
  Status destroy();  // collective

  // x fp32/bf16 [T, H], topk_idx int64/int32 [T, K] (-1: none), topk_weights fp32 [T, K],
  // y fp32 [T, H]; x_active_mask optional uint8 [T] (inactive tokens get zeros). The
  // intermediates live in a workspace laid out by plan_moe (workspace_plan.h): the layer's own,
  // or the caller's (workspace_bytes() bytes, 64-byte aligned; a smaller one on any rank fails
  // every rank).
  Status forward(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights, const TensorView& y,
                 const TensorView& x_active_mask = {});
  Status forward(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights, const TensorView& y,
                 void* workspace, std::uint64_t workspace_bytes, const TensorView& x_active_mask = {});
  std::uint64_t workspace_bytes() const { return std::uint64_t(plan_.total_bytes); }
  const MoeTiling& plan() const { return plan_; }
  const MoeStageTimes& last_times() const { return times_; }
  std::int64_t last_rows() const { return rows_; }  // rows this rank's experts computed

 private:
  MoeLayer() = default;
  Status run_gemm(const hp::kernels::GroupedGemmProblem& problem);

  MoeLayerConfig config_;
  std::unique_ptr<Buffer> buffer_;
  hp::kernels::PackedWeights w1_, w2_, shared_w1_, shared_w2_;
  std::vector<float> shared_out_;  // the shared expert's rows [T, H]
  const hp::kernels::KernelTable* table_ = nullptr;
  MoeTiling plan_;
  Handle handle_;                     // of the last dispatch
  std::vector<float> recv_weights_;   // each received row's top-k weight (GMM2's row factor)
  std::vector<std::uint8_t> own_workspace_;
  std::vector<std::vector<std::uint8_t>> workspaces_;  // one per GEMM worker
  MoeStageTimes times_;
  std::int64_t rows_ = 0;
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_MOE_LAYER_H_
