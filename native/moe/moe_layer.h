// HyperMegaMoe forward, staged (docs/moe.md: the non-deep-fuse path's stages, run for any number
// of experts per rank): dispatch with int8 quantisation -> GMM1 with the fused
// dequant + SwiGLU + requant epilogue -> GMM2 with dequant x top-k weight -> combine (the plain
// sum: the weights are already applied). Collective like the Buffer it owns.
//
// The intermediates follow the workspace plan (workspace_plan.h, reuse mode): received rows and
// scales in x1Token/x1Scale, GMM1's requantised SwiGLU rows in the SwiGLU region, moved to
// x2Token/x2Scale once GMM1 is done, GMM2's fp32 rows in swapSpace. A shared expert (an
// extra GMM1 + GMM2 on the rank's own tokens) uses the shared regions the same way; its
// output is added to y after the combine.
// Weights are this rank's local experts (expert e = rank x E_local + local index), int8 with
// per-output-channel fp32 scales, packed once at create:
//   w1 [E_local, H, 2I] (columns [0, I) gate, [I, 2I) up), w1_scale [E_local, 2I]
//   w2 [E_local, I, H], w2_scale [E_local, H]
// With a chip, the GEMMs run on its cube cores and the communication on its vector cores;
// without, on the calling thread.
//
// backward (a layer made with MoeLayerConfig::backward) is the gradient of this forward with
// the quantisers as straight-through estimators (d quant(v) / dv = 1), in bf16 GEMMs with fp32
// accumulation and element-wise math in fp32. It recomputes what it needs from x instead of
// keeping the forward's activations: dispatch x (int8) and dY (bf16) with the forward's
// routing (the same rows in the same order), then per row r of token t, expert e, weight w:
//   a = x~ W1[e] (int8 GEMM, dequantised, as the forward), g | u = a, h = silu(g) u,
//   h~ = dequant(quant(h)), G = dY W2[e]^T, d w = <G, h~>, dh = w G,
//   dW2[e] += (w h~)^T dY, dg = dh u silu'(g), du = dh silu(g), dW1[e] += x~^T [dg | du],
//   dx_r = [dg | du] W1[e]^T
// where x~ = dequant(quant(x)) and W = int8 x scale (the dequantised weights, in bf16); dX is
// the unweighted combine of the dx_r (dispatch's adjoint), d topk_weights[t][k] goes back to
// the token's rank by an all-to-all. The shared expert is the same with w = 1 on the rank's
// own active tokens. With smooth quant, x~ is of x smooth1 and h~ of h smooth2[e], so dh is
// w G smooth2[e] and dX is smooth1 times the sum above.
#ifndef HYPER_PARALLEL_MOE_MOE_LAYER_H_
#define HYPER_PARALLEL_MOE_MOE_LAYER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/aligned_allocator.h"
#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "kernels/ops.h"
#include "kernels/packing.h"
#include "moe/buffer.h"
#include "moe/workspace_plan.h"
#include "platform/chip.h"

namespace hp::moe {

// Which forward runs: kStaged runs dispatch, GMM1, GMM2 and combine one after
// another; kDeep (the deep-fuse path, a chip with 2 vector cores per cube core) overlaps them
// in two mixed launches: one vector core dispatches and hands each local expert to the cube
// cores as soon as its rows are in (GMM1 starts expert by expert), and, as GMM2's tiles
// complete, streams their rows back to the tokens' ranks (Buffer's streamed combine) while
// the cube cores compute the next tiles. kAuto: kDeep with such a chip and more than one
// expert per rank, else kStaged. The shared expert (if any) runs before the routed experts.
enum class LayerPath : std::int32_t { kAuto = 0, kStaged = 1, kDeep = 2 };

struct MoeLayerConfig {
  std::int64_t hidden = 0, intermediate = 0, num_experts = 0, topk = 0, max_tokens_per_rank = 0;
  std::int64_t shared_intermediate = 0;  // > 0: a shared expert (every token, weight 1) of this I
  CommKind comm = CommKind::kShmem;
  hp::platform::Chip* chip = nullptr;
  // Keeps what backward() needs: GMM1's weights packed for the plain dequant epilogue, both
  // GEMMs' dequantised weights in bf16, dispatch room for bf16 rows and the all-to-all of the
  // top-k weights' gradient.
  bool backward = false;
  // With backward: each forward also keeps its routed experts' GMM1 output a = [gate | up]
  // (fp32, rows x 2I, written by GMM1's epilogue beside its int8 rows), the int8 rows it came
  // from and the requantised SwiGLU rows it gave, and a backward whose dispatched rows are those
  // (the same experts' rows, bit for bit) takes a and h~ from there instead of recomputing GMM1
  // and the SwiGLU. The gradients are the same bits either
  // way; it trades that memory for the recompute's time. (The shared expert still recomputes.)
  bool keep_activations = false;
  // With backward: the activation gradients' GEMMs (G = dY W2^T and dX's rows = dA W1^T) run in
  // int8, at the forward's rate instead of bf16's. Each expert's rows of dY and dA are scaled by
  // its weights' per-channel scales (W^T's row scales, folded into the rows' columns) and
  // quantised per row; the other side is the int8 weights transposed, kept instead of the bf16
  // copies (half their memory). The gradients then carry the int8 rounding of dY and dA (as the
  // forward's y carries x's); the weight gradients stay bf16 GEMMs.
  bool int8_activation_grads = false;
  LayerPath path = LayerPath::kAuto;
  // The dispatch's capacity (BufferConfig's): 0 lossless; >= 1 room for that factor of the
  // average load, grown x1.25 collectively on overflow up to lossless, or (grow_on_overflow =
  // false) OUT_OF_MEMORY on every rank before any token moves. The workspace is lossless.
  double capacity_factor = 0.0;
  bool grow_on_overflow = true;
  // The experts' weights as stored and multiplied: int8, or int4 (W4A8: the int8 tensors hold
  // values in [-8, 7], OUT_OF_RANGE otherwise, packed two to a byte; the activations stay int8).
  hp::kernels::WeightType weights = hp::kernels::WeightType::kInt8;
};

struct ExpertWeights {
  TensorView w1, w1_scale, w2, w2_scale;
  // TENSOR_LIST: one tensor per local expert instead of the stacked ones above
  // (w1 [H, 2I], w1_scale [2I], w2 [I, H], w2_scale [H] each; leave the stacked ones empty).
  std::vector<TensorView> w1_list, w1_scale_list, w2_list, w2_scale_list;
  // The shared expert's (with shared_intermediate > 0): [1, H, 2Is], [1, 2Is], [1, Is, H], [1, H].
  TensorView shared_w1, shared_w1_scale, shared_w2, shared_w2_scale;
  // SMOOTH_QUANT, optional fp32 scales (copied at create): x x smooth1 [H] per
  // channel before the tokens' quantisation, h x smooth2 [E_local, I] (shared_smooth2 [1, Is]
  // for the shared expert) before the requantisation. The caller folds their inverses into w1's
  // rows and w2's rows; the layer only applies them.
  TensorView smooth1, smooth2, shared_smooth2;
};

// Seconds of each stage of the last forward on this rank (the shared expert's GEMMs count in
// gmm1 and gmm2, its sum in combine).
// On the deep path, overlap is the time communication ran under the GEMMs (the stages' sum
// minus overlap is the forward's time).
struct MoeStageTimes {
  double dispatch = 0, gmm1 = 0, gmm2 = 0, combine = 0, overlap = 0;
};

// backward's arguments: the forward's inputs, dY, and where the gradients go (every output
// is overwritten). dx fp32/bf16 [T, H]; d_topk_weights fp32 [T, K] (0 where topk_idx is -1 and
// for inactive tokens); dw1 fp32/bf16 [E_local, H, 2I], dw2 [E_local, I, H]; with a shared
// expert, shared_dw1 [1, H, 2Is] and shared_dw2 [1, Is, H]. Inactive tokens (x_active_mask)
// get zero gradients and add nothing to the weights'.
struct MoeGradArgs {
  TensorView x, topk_idx, topk_weights, x_active_mask;
  TensorView dy;  // fp32/bf16 [T, H]
  TensorView dx, d_topk_weights, dw1, dw2, shared_dw1, shared_dw2;
};

// Seconds of each stage of the last backward on this rank: both dispatches; GMM1's recompute
// with SwiGLU and requantisation (only x~ in bf16 when the forward's kept rows serve); the
// activation-gradient GEMMs (dY W2^T, dA W1^T) with the SwiGLU gradient; the weight-gradient GEMMs;
// the combine of dX and the all-to-all of d topk_weights. Shared-expert work counts in its stage.
// Where each core's time went in the last forward and backward (hp moe --trace): spans of
// steady_clock time (seconds since its epoch) per core, `core` being the chip's core index
// (cube cores first, then vector cores) or -1 for the calling thread.
enum class CorePhase : std::int32_t {
  kDispatch = 0,
  kGmm1,
  kGmm2,
  kCombine,
  kSharedExpert,
  kGradDispatch,
  kGradRecompute,
  kGradActivation,
  kGradWeight,
  kGradCombine,
  kCount
};
HP_API const char* to_string(CorePhase phase) noexcept;
struct CoreSpan {
  std::int32_t core = -1;
  CorePhase phase = CorePhase::kDispatch;
  double begin = 0, end = 0;
};

// Each stage's own time. With a chip, the routed experts' dW1 GEMM runs on the cube cores while
// a vector core combines dX and sends d topk_weights home (upstream's "combine in parallel with
// the w1 grad"), and with two cube cores or more G = dY W2^T (act_grad) and dW2 (weight_grad)
// run side by side; overlap is the time two stages ran at once, so the stages' sum minus
// overlap is the backward's time but for its unstaged bookkeeping.
struct MoeGradStageTimes {
  double dispatch = 0, recompute = 0, act_grad = 0, weight_grad = 0, combine = 0, overlap = 0;
};

class HP_API MoeLayer {
 public:
  static Status create(const MoeLayerConfig& config, const ExpertWeights& weights,
                       std::unique_ptr<MoeLayer>* out);
  ~MoeLayer();
  Status destroy();  // collective

  // x fp32/bf16 [T, H], topk_idx int64/int32 [T, K] (-1: none), topk_weights fp32 [T, K],
  // y fp32 [T, H]; x_active_mask optional uint8 [T] (inactive tokens get zeros). The
  // intermediates live in a workspace laid out by plan_moe (workspace_plan.h): the layer's own,
  // or the caller's (workspace_bytes() bytes, 64-byte aligned; a smaller one on any rank fails
  // every rank).
  Status forward(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                 const TensorView& y, const TensorView& x_active_mask = {});
  Status forward(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                 const TensorView& y, void* workspace, std::uint64_t workspace_bytes,
                 const TensorView& x_active_mask = {});
  // The gradients of forward (the layer made with config.backward). Collective.
  Status backward(const MoeGradArgs& args);

  const MoeLayerConfig& config() const { return config_; }
  std::int64_t local_experts() const { return buffer_ ? buffer_->local_experts() : 0; }
  std::uint64_t workspace_bytes() const { return std::uint64_t(plan_.total_bytes); }
  const MoeTiling& plan() const { return plan_; }
  bool deep() const { return deep_; }  // the forward runs the deep-fuse path
  const MoeStageTimes& last_times() const { return times_; }
  const MoeGradStageTimes& last_grad_times() const { return grad_times_; }
  // Whether the last backward took its routed experts' GMM1 output from the forward
  // (keep_activations, and the forward's rows were the backward's) instead of recomputing it.
  bool last_backward_kept() const { return last_backward_kept_; }
  // The spans of the last forward, then (if it ran since) of the last backward.
  std::vector<CoreSpan> last_spans() const;
  std::int64_t last_rows() const { return rows_; }  // rows this rank's experts computed

 private:
  MoeLayer() = default;
  Status load_weights(const ExpertWeights& weights);         // create's routed experts
  Status load_shared_weights(const ExpertWeights& weights);  // and shared expert
  // A grouped int8 or a bf16 GEMM on the chip's cube cores.
  Status run_gemm(const hp::kernels::GroupedGemmProblem& problem) { return plan_and_run(problem); }
  Status run_gemm(const hp::kernels::Bf16GemmProblem& problem) { return plan_and_run(problem); }
  template <typename Problem>
  Status plan_and_run(const Problem& problem);
  // The shared expert on this rank's tokens into shared_out_ (its regions of the workspace).
  Status run_shared_expert(const TensorView& x, std::uint8_t* ws);
  Status forward_deep(const DispatchArgs& args, const TensorView& y, std::uint8_t* ws,
                      const Status& workspace_ok);
  struct DeepForward;  // one forward_deep call (moe_layer_deep.cpp)
  Status forward_staged(const DispatchArgs& args, const TensorView& y, std::uint8_t* ws,
                        const Status& workspace_ok);
  template <typename Plan>
  Status run_plan(const Plan& plan);
  // Worker `worker`'s GEMM scratch: workspaces_[worker] (the caller sizes workspaces_ before a
  // launch), grown to `bytes` (never shrunk), 64-byte aligned. A worker touches only its own, so
  // the blocks of a launch may call it at once.
  void* worker_workspace(int worker, std::uint64_t bytes);
  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // One phase of a call, timed from construction to stop() or the end of its scope: its
  // seconds are added to *total (null: none) and, with a phase, recorded as a trace span of
  // `core` (-1: the calling thread). A phase that fails on the way still counts its time.
  class PhaseTimer {
   public:
    PhaseTimer(MoeLayer* layer, double* total, std::optional<CorePhase> phase,
               std::int32_t core = -1)
        : layer_(layer),
          total_(total),
          phase_(phase),
          core_(core),
          start_(std::chrono::steady_clock::now()) {}
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;
    ~PhaseTimer() { stop(); }
    // The phase's seconds (0 once stopped).
    double stop() {
      if (layer_ == nullptr) return 0.0;
      const double seconds = seconds_since(start_);
      if (total_ != nullptr) *total_ += seconds;
      if (phase_) layer_->add_span(core_, *phase_, start_);
      layer_ = nullptr;
      return seconds;
    }

   private:
    MoeLayer* layer_;
    double* total_;
    std::optional<CorePhase> phase_;
    std::int32_t core_;
    std::chrono::steady_clock::time_point start_;
  };
  Status prepare_backward(const ExpertWeights& weights, bool shared);  // w1, w2 and their scales
  // The smooth-quant scales as views (empty: none).
  TensorView smooth1() const { return view_of(smooth1_, {config_.hidden}); }
  TensorView smooth2() const {
    return view_of(smooth2_,
                   {std::int64_t(smooth2_.size()) / config_.intermediate, config_.intermediate});
  }
  TensorView shared_smooth2() const {
    return view_of(shared_smooth2_, {1, config_.shared_intermediate});
  }
  static TensorView view_of(const std::vector<float>& v,
                            std::initializer_list<std::int64_t> shape) {
    return v.empty() ? TensorView() : TensorView(const_cast<float*>(v.data()), DType::kFP32, shape);
  }
  Status check_grad_args(const MoeGradArgs& args) const;
  // One set of experts' backward (routed or shared), by the formulas above.
  struct ExpertGrad {
    // int8 [rows, H], fp32 [rows], int64 [E + 1], bf16 [rows, H]
    TensorView x_q, x_scale, offsets, dy;
    const float* row_weight = nullptr;  // [rows]; null: 1
    const hp::kernels::PackedWeights* w1_plain = nullptr;
    const float* smooth2 = nullptr;  // [E, I] or null
    // W1^T [E, 2I, H], W2^T [E, H, I]
    const std::uint16_t *w1t_bf16 = nullptr, *w2t_bf16 = nullptr;
    // The same in the kernel table's panels (empty where it has none: the GEMMs read the above).
    const hp::kernels::Bf16Panels *w1t_panels = nullptr, *w2t_panels = nullptr;
    // int8_activation_grads (then w1t_bf16 ... w2t_panels are unused): W1^T and W2^T in int8
    // with unit scales; the scales of w1_plain and of the forward's W2 scale dA's and dY's rows.
    const hp::kernels::PackedWeights *w1t_q = nullptr, *w2t_q = nullptr;
    const hp::kernels::PackedWeights* w2 = nullptr;
    std::int64_t inter = 0;
    TensorView dw1, dw2, dx_rows;   // dx_rows fp32 [rows, H]
    float* d_row_weight = nullptr;  // [rows] or null
    // leave dW1 = x~^T dA (grad_.x_bf16, grad_.da) to the caller
    bool defer_dw1 = false;
    const float* kept_a = nullptr;  // [rows, 2I]: the forward's a of these rows; null: recompute
    // With kept_a: the forward's requantised SwiGLU rows of them (int8 [rows, I], fp32 [rows]).
    const std::int8_t* kept_h_q = nullptr;
    const float* kept_h_scale = nullptr;
  };
  Status expert_backward(const ExpertGrad& p);  // recompute, activation grads, dW1
  Status recompute_forward(const ExpertGrad& p);
  Status activation_grads(const ExpertGrad& p);
  static TensorView smooth2_view(const ExpertGrad& p);
  // a [rows, 2I] of the experts of p: the forward's kept rows, or grad_.a (recompute_forward).
  TensorView preact_view(const ExpertGrad& p);
  // Two independent GEMMs at once (the first int8 or bf16, the second bf16), each on half of the
  // chip's cube cores (>= 2).
  template <typename FirstProblem>
  Status run_gemms_side_by_side(const FirstProblem& first,
                                const hp::kernels::Bf16GemmProblem& second);
  // backward's steps, in order: the dispatch of x and dY (verdict: this rank's argument
  // check, sent with the counts), the shared expert, the routed experts, their dW1 with the
  // communication: dX's combine and d topk_weights' all-to-all (backward_communication).
  Status dispatch_for_backward(const MoeGradArgs& a, const Status& verdict);
  Status shared_expert_backward(const MoeGradArgs& a);
  Status routed_experts_backward(const MoeGradArgs& a);
  Status routed_dw1_and_communication(const MoeGradArgs& a);
  Status backward_communication(const MoeGradArgs& a);

  MoeLayerConfig config_;
  std::unique_ptr<Buffer> buffer_;
  hp::kernels::PackedWeights w1_, w2_, shared_w1_, shared_w2_;
  std::vector<float> shared_out_;                          // the shared expert's rows [T, H]
  std::vector<float> smooth1_, smooth2_, shared_smooth2_;  // empty: no smooth quant
  const hp::kernels::KernelTable* table_ = nullptr;
  MoeTiling plan_;
  Handle handle_;                    // of the last dispatch
  std::vector<float> recv_weights_;  // each received row's top-k weight (GMM2's row factor)
  AlignedVector<std::uint8_t> own_workspace_;
  // backward: GMM1's weights packed plain, the dequantised weights transposed in bf16 (packed
  // into the kernel table's panels where it has them, the plain copies then freed), the
  // all-to-all's symmetric blocks (send and receive: R x T_max x K fp32 each) and per-call storage.
  hp::kernels::PackedWeights w1_plain_, shared_w1_plain_;
  std::vector<std::uint16_t> w1t_bf16_, w2t_bf16_, shared_w1t_bf16_, shared_w2t_bf16_;
  hp::kernels::Bf16Panels w1t_panels_, w2t_panels_, shared_w1t_panels_, shared_w2t_panels_;
  // int8_activation_grads, instead of the bf16 copies: W^T in int8 with unit scales (W's own
  // are those of w1_plain_ and w2_).
  hp::kernels::PackedWeights w1t_q_, w2t_q_, shared_w1t_q_, shared_w2t_q_;
  float* topk_grad_send_ = nullptr;
  float* topk_grad_recv_ = nullptr;
  struct GradStorage {
    DispatchResult x_recv, dy_recv;
    std::vector<std::uint16_t> dy_bf16;  // dY (own tokens, inactive ones zero) in bf16
    std::vector<float> a, g_dy;          // [rows, 2I] GMM1 recomputed; [rows, I] dY W2^T
    std::vector<std::int8_t> h_q;
    std::vector<float> h, h_scale, hw_scale, d_row_weight, dx_rows, dx_sum;
    std::vector<std::uint16_t> hw_bf16, x_bf16, da;  // w h~ (dW2's left side), x~, dA
    std::vector<std::int8_t> own_q;                  // the shared expert's x quantised
    std::vector<float> own_scale;
    std::vector<std::int8_t> act_q;  // int8_activation_grads: dY's or dA's rows quantised
    std::vector<float> act_scale;
  } grad_;
  // keep_activations: the last forward's routed pre-activation and the rows it came from. Every
  // forward clears `offsets` first and sets them once its GMM1 is done: no dispatch's offsets
  // are empty, so until then nothing matches (kept_preact_of).
  struct KeptActivations {
    AlignedVector<float> a;  // [rows, 2I] (64-byte aligned: GMM1 streams its rows in)
    std::vector<std::int8_t> x_q;
    std::vector<float> x_scale;
    std::vector<std::int64_t> offsets;
    std::vector<std::int8_t> h_q;  // GMM1's requantised SwiGLU rows [rows, I] (GMM2's input)
    std::vector<float> h_scale;
  } kept_;
  bool last_backward_kept_ = false;
  // GMM1's preact output for `rows` rows (kept_.a sized for them), or empty without
  // keep_activations.
  TensorView kept_preact(std::int64_t rows);
  // After GMM1: its input rows (x1 int8 [rows, H], scales, the experts' offsets) and its output
  // rows (h int8 [rows, I], scales) into kept_.
  void keep_rows(const std::uint8_t* x1, const float* x1_scale, const std::uint8_t* h,
                 const float* h_scale, const std::vector<std::int64_t>& offsets);
  // kept_.a if it was computed from exactly the rows of `recv`, else null.
  const float* kept_preact_of(const DispatchResult& recv) const;
  MoeGradStageTimes grad_times_;
  std::vector<AlignedVector<std::uint8_t>> workspaces_;  // one per GEMM worker
  MoeStageTimes times_;
  bool deep_ = false;
  // A span of `core` from `begin` to now, from any thread (the cores of a launch too).
  void add_span(std::int32_t core, CorePhase phase, std::chrono::steady_clock::time_point begin);
  mutable std::mutex spans_mutex_;
  std::vector<CoreSpan> spans_;
  std::int64_t rows_ = 0;
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_MOE_LAYER_H_
