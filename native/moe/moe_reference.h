// Plainly written references of the MoE layer for one rank's tokens, over every expert's
// weights (global: [E, ...]), for tests and `hp moe --check`:
//   quantised: the layer's math step by step: per-token dynamic int8 x, int32 dot products with
//     the int8 weights, dequantised per channel and per token, SwiGLU (silu(g) = g / (1 +
//     exp(-g)) with std::exp), per-row int8 requantisation, the second int32 GEMM, dequantised,
//     times the top-k weight, summed over k in fp32;
//   float: no activation quantisation: the dequantised weights (w x scale) in fp32 throughout.
// Weights: w1 int8 [E, H, 2I] (gate | up), w1_scale fp32 [E, 2I], w2 int8 [E, I, H], w2_scale
// fp32 [E, H]; x fp32 [T, H], topk_idx int64 [T, K] (-1: none), topk_weights fp32 [T, K],
// optional mask uint8 [T]; y fp32 [T, H].
#ifndef HYPER_PARALLEL_MOE_MOE_REFERENCE_H_
#define HYPER_PARALLEL_MOE_MOE_REFERENCE_H_

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"

namespace hp::moe {

// Smooth quant (optional fp32): x x smooth1 [H] per channel before everything; h x smooth2
// [E, I] (shared_smooth2 [1, Is]) per channel before the second GEMM, in both references.
struct MoeReferenceArgs {
  TensorView w1, w1_scale, w2, w2_scale;
  // Optional shared expert (every active token, weight 1): [1, H, 2Is], [1, 2Is], [1, Is, H],
  // [1, H].
  TensorView shared_w1, shared_w1_scale, shared_w2, shared_w2_scale;
  TensorView x, topk_idx, topk_weights, x_active_mask;
  TensorView y;
  TensorView smooth1, smooth2, shared_smooth2;
};

HP_API Status moe_reference_quantized(const MoeReferenceArgs& args);
HP_API Status moe_reference_float(const MoeReferenceArgs& args);

// The gradient of the quantised reference for one rank's tokens, in fp64 with the quantisers
// as straight-through estimators (MoeLayer::backward's formulas, moe_layer.h):
// forward.y is not used (leave it empty); dy fp32 [T, H]; dx fp32 [T, H] and d_topk_weights
// fp32 [T, K] are overwritten; dw1 fp32 [E, H, 2I], dw2 [E, I, H] (every expert) and, with a
// shared expert, shared_dw1 [1, H, 2Is], shared_dw2 [1, Is, H] are added to, so that the
// weights' gradients of several ranks' tokens sum up.
struct MoeReferenceGradArgs {
  MoeReferenceArgs forward;
  TensorView dy, dx, d_topk_weights, dw1, dw2, shared_dw1, shared_dw2;
};

HP_API Status moe_reference_quantized_grad(const MoeReferenceGradArgs& args);

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_MOE_REFERENCE_H_
