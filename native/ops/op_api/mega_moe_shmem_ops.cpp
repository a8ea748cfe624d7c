// fused_deep_moe, variant shmem: the layer's forward forced onto the put + signal context of
// symmetric memory (hp::moe::CommKind::kShmem), on every transport. This file is the op's own
// use of the symmetric-memory API: it is compiled against the SHMEM SDK's include directories
// (HP_SHMEM_HOME, or this build's symmetric_memory install; docs/ops.md), and is left out of a
// build without one.
#include <hyper_parallel/shmem/shmem.h>

#include "op_executor.h"

using hp::ErrorCode;
using hp::Status;
using hp::ops::LayerVariant;

extern "C" {

hpStatus hpHyperMegaMoeShmemCreateWithWeights(const hpHyperMegaMoeConfig* config,
                                              const hpHyperMegaMoeWeights* weights,
                                              hpHyperMegaMoeLayer** layer) {
  if (!hp::shmem::initialized()) {
    return hp::ops::report(Status::error(ErrorCode::kFailedPrecondition,
                                         "hpHyperMegaMoeShmemCreateWithWeights: symmetric memory "
                                         "is not initialised on this process: run the ranks "
                                         "under hprun or mpirun (or call shmem_init) first"));
  }
  return hp::ops::create_layer(config, weights, LayerVariant::kShmem, layer);
}

hpStatus hpHyperMegaMoeShmemGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                             const hpTensor* topkIdx, const hpTensor* topkWeights,
                                             const hpTensor* xActiveMask, const hpTensor* y,
                                             uint64_t* workspaceSize, hpOpExecutor** executor) {
  return hp::ops::layer_forward_executor(layer, LayerVariant::kShmem,
                                         "hpHyperMegaMoeShmemGetWorkspaceSize", x, topkIdx,
                                         topkWeights, xActiveMask, y, workspaceSize, executor);
}

hpStatus hpHyperMegaMoeShmem(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor) {
  return hp::ops::run_executor(executor, workspace, workspaceSize);
}

}  // extern "C"
