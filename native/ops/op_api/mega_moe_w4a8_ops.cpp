// fused_deep_moe, variant w4a8: the layer's forward with int4 weights (int8 activations).
#include "op_executor.h"

using hp::ops::LayerVariant;

extern "C" {

hpStatus hpHyperMegaMoeW4A8CreateWithWeights(const hpHyperMegaMoeConfig* config,
                                             const hpHyperMegaMoeWeights* weights,
                                             hpHyperMegaMoeLayer** layer) {
  return hp::ops::create_layer(config, weights, LayerVariant::kW4A8, layer);
}

hpStatus hpHyperMegaMoeW4A8GetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                            const hpTensor* topkIdx, const hpTensor* topkWeights,
                                            const hpTensor* xActiveMask, const hpTensor* y,
                                            uint64_t* workspaceSize, hpOpExecutor** executor) {
  return hp::ops::layer_forward_executor(layer, LayerVariant::kW4A8,
                                         "hpHyperMegaMoeW4A8GetWorkspaceSize", x, topkIdx,
                                         topkWeights, xActiveMask, y, workspaceSize, executor);
}

hpStatus hpHyperMegaMoeW4A8(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor) {
  return hp::ops::run_executor(executor, workspace, workspaceSize);
}

}  // extern "C"
