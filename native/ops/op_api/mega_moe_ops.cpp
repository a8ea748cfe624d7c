// The layer ops of the C op ABI: fused_deep_moe (variant base: int8 weights) and
// fused_deep_moe_grad, over hp::moe::MoeLayer; the layer's destroy, shared by every variant.
#include <memory>

#include "op_executor.h"

using hp::ErrorCode;
using hp::Status;
using hp::ops::LayerVariant;
using hp::ops::report;
using hp::ops::view;

extern "C" {

hpStatus hpHyperMegaMoeCreate(const hpHyperMegaMoeConfig* config, const hpTensor* w1,
                              const hpTensor* w1Scale, const hpTensor* w2, const hpTensor* w2Scale,
                              const hpTensor* sharedW1, const hpTensor* sharedW1Scale,
                              const hpTensor* sharedW2, const hpTensor* sharedW2Scale,
                              hpHyperMegaMoeLayer** layer) {
  const hpHyperMegaMoeWeights weights{.w1 = w1,
                                      .w1Scale = w1Scale,
                                      .w2 = w2,
                                      .w2Scale = w2Scale,
                                      .sharedW1 = sharedW1,
                                      .sharedW1Scale = sharedW1Scale,
                                      .sharedW2 = sharedW2,
                                      .sharedW2Scale = sharedW2Scale};
  return hp::ops::create_layer(config, &weights, LayerVariant::kBase, layer);
}

hpStatus hpHyperMegaMoeCreateWithWeights(const hpHyperMegaMoeConfig* config,
                                         const hpHyperMegaMoeWeights* weights,
                                         hpHyperMegaMoeLayer** layer) {
  return hp::ops::create_layer(config, weights, LayerVariant::kBase, layer);
}

hpStatus hpHyperMegaMoeDestroy(hpHyperMegaMoeLayer* layer) {
  if (layer == nullptr) return HP_STATUS_OK;
  std::unique_ptr<hpHyperMegaMoeLayer> owned(layer);
  return owned->layer ? report(owned->layer->destroy()) : HP_STATUS_OK;
}

hpStatus hpHyperMegaMoeGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                        const hpTensor* topkIdx, const hpTensor* topkWeights,
                                        const hpTensor* xActiveMask, const hpTensor* y,
                                        uint64_t* workspaceSize, hpOpExecutor** executor) {
  return hp::ops::layer_forward_executor(layer, LayerVariant::kBase,
                                         "hpHyperMegaMoeGetWorkspaceSize", x, topkIdx, topkWeights,
                                         xActiveMask, y, workspaceSize, executor);
}

hpStatus hpHyperMegaMoe(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor) {
  return hp::ops::run_executor(executor, workspace, workspaceSize);
}

hpStatus hpHyperMegaMoeGradGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                            const hpTensor* topkIdx, const hpTensor* topkWeights,
                                            const hpTensor* xActiveMask, const hpTensor* dy,
                                            const hpTensor* dx, const hpTensor* dTopkWeights,
                                            const hpTensor* dw1, const hpTensor* dw2,
                                            const hpTensor* sharedDw1, const hpTensor* sharedDw2,
                                            uint64_t* workspaceSize, hpOpExecutor** executor) {
  if (layer == nullptr || layer->layer == nullptr) {
    return report(Status::error(ErrorCode::kInvalidArgument,
                                "hpHyperMegaMoeGradGetWorkspaceSize: layer is NULL or "
                                "destroyed: create one with hpHyperMegaMoeCreate"));
  }
  const hp::moe::MoeGradArgs args{.x = view(x),
                                  .topk_idx = view(topkIdx),
                                  .topk_weights = view(topkWeights),
                                  .x_active_mask = view(xActiveMask),
                                  .dy = view(dy),
                                  .dx = view(dx),
                                  .d_topk_weights = view(dTopkWeights),
                                  .dw1 = view(dw1),
                                  .dw2 = view(dw2),
                                  .shared_dw1 = view(sharedDw1),
                                  .shared_dw2 = view(sharedDw2)};
  hp::moe::MoeLayer* l = layer->layer.get();
  return hp::ops::make_executor([=] { return l->backward(args); }, workspaceSize, executor);
}

hpStatus hpHyperMegaMoeGrad(void*, uint64_t, hpOpExecutor* executor) {
  return hp::ops::run_executor(executor);
}

}  // extern "C"
