/* HyperParallel's MoE ops, C ABI: the op package of the custom_ops component
 * (libhyper_parallel_op_api.so; which ops a package holds is in its ops.json, docs/ops.md).
 * Two phases, as CANN's aclnn: hp<Op>GetWorkspaceSize checks what it can and returns the
 * workspace size and an executor; hp<Op>(workspace, size, executor) runs the op and frees the
 * executor (hpOpExecutorDestroy frees one that is never run).
 *
 *   hpDispatchLayout         topk_idx -> tokens per rank, tokens per expert, is_token_in_rank
 *   hpNotifyDispatch         the count exchange: each local expert's receive rows and offsets
 *   hpMoeDispatchNormal      the tokens, into outputs sized by hpNotifyDispatch's offsets
 *   hpMoeCombineNormal       the weighted sum of the expert outputs back at each token's rank
 *   hpMoeDispatchLowLatency  the low-latency dispatch (fixed-size outputs, no count exchange)
 *   hpMoeCombineLowLatency   its combine
 *   hpHyperMegaMoe           the MoE layer's forward (below): int8 weights
 *   hpHyperMegaMoeW4A8       the same with int4 weights (a layer of
 * hpHyperMegaMoeW4A8CreateWithWeights) hpHyperMegaMoeShmem      the same on the put + signal
 * context (hpHyperMegaMoeShmemCreateWithWeights) hpHyperMegaMoeGrad       the layer's backward
 *
 * The three forwards are variants of one family: a package holds one of them.
 * hpNotifyDispatch, hpMoeDispatchNormal and hpMoeCombineNormal are collective over the ranks of
 * the buffer, in this order, with the same x / topk_idx / topk_weights for the notify and the
 * dispatch; the combine uses the last dispatch. Their GetWorkspaceSize never fails on the
 * tensors' contents: every check happens in the run, where a rank's bad input becomes an error
 * on every rank (the others: HP_STATUS_ABORTED), so no rank waits for one that stopped early.
 * Statuses are hp::ErrorCode numbers (0 = success); hpGetLastErrorMessage() says what failed
 * and what to do, for the calling thread's last failed call.
 */
#ifndef HYPER_PARALLEL_OP_API_H_
#define HYPER_PARALLEL_OP_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t hpStatus;
#define HP_STATUS_OK 0
#define HP_STATUS_INVALID_ARGUMENT 1
#define HP_STATUS_OUT_OF_RANGE 2
#define HP_STATUS_SHAPE_MISMATCH 3
#define HP_STATUS_DTYPE_MISMATCH 4
#define HP_STATUS_UNSUPPORTED 5
#define HP_STATUS_TIMEOUT 6
#define HP_STATUS_ABORTED 7
#define HP_STATUS_OUT_OF_MEMORY 8
#define HP_STATUS_FAILED_PRECONDITION 18

/* Element types (hp::DType numbers). */
#define HP_DTYPE_INT8 0
#define HP_DTYPE_UINT8 1
#define HP_DTYPE_INT32 2
#define HP_DTYPE_INT64 3
#define HP_DTYPE_BF16 4
#define HP_DTYPE_FP32 6

#define HP_TENSOR_MAX_DIMS 8
/* A tensor in host memory: shape and strides in elements (strides of a row-major tensor:
 * shape[i+1] * strides[i+1], the last 1). */
typedef struct hpTensor {
  void* data;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[HP_TENSOR_MAX_DIMS];
  int64_t strides[HP_TENSOR_MAX_DIMS];
} hpTensor;

#define HP_MOE_COMM_WINDOW 0 /* peers' windows mapped: plain stores (one node) */
#define HP_MOE_COMM_SHMEM 1  /* put + signal: every transport */
#define HP_MOE_QUANT_NONE 0
#define HP_MOE_QUANT_DYNAMIC_INT8 1

/* Dispatch reads the sources' tokens in place (the pull path) where every rank maps every
   peer's heap and capacity_factor is 0, and otherwise writes them into each destination's
   window (the push path): hp::moe::DispatchPath::kAuto (docs/moe.md). */
typedef struct hpMoeBufferConfig {
  int64_t hidden;
  int64_t max_tokens_per_rank;
  int64_t num_experts;
  int64_t topk;
  int64_t max_element_bytes;     /* the widest x dispatched unquantised: 4 fp32, 2 bf16, 1 */
  int64_t combine_element_bytes; /* the widest expert output combined: 4 fp32, 2 bf16 */
  int32_t comm;                  /* HP_MOE_COMM_* */
  int32_t grow_on_overflow;      /* with capacity_factor > 0: grow (1) or fail (0) on overflow */
  double capacity_factor;        /* 0: lossless */
  int32_t low_latency;           /* 1: also the regions of the low-latency ops */
} hpMoeBufferConfig;

typedef struct hpMoeBuffer hpMoeBuffer;
typedef struct hpOpExecutor hpOpExecutor;

const char* hpGetLastErrorMessage(void);

/* Collective over the shmem world (shmem_init or hprun's environment first). */
hpStatus hpMoeBufferCreate(const hpMoeBufferConfig* config, hpMoeBuffer** buffer);
hpStatus hpMoeBufferDestroy(hpMoeBuffer* buffer);
void hpOpExecutorDestroy(hpOpExecutor* executor);

/* topkIdx int64/int32 [T, K] (-1: none); outputs int64 [R], int64 [E], uint8 [T, R]. Local. */
hpStatus hpDispatchLayoutGetWorkspaceSize(const hpTensor* topkIdx, int64_t numExperts,
                                          int64_t numRanks, const hpTensor* tokensPerRank,
                                          const hpTensor* tokensPerExpert,
                                          const hpTensor* isTokenInRank, uint64_t* workspaceSize,
                                          hpOpExecutor** executor);
hpStatus hpDispatchLayout(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* x fp32/bf16 [T, H]; topkWeights fp32 [T, K]; xActiveMask uint8 [T] or NULL; outputs
 * recvTokensPerExpert int64 [E_local] (unpadded) and recvExpertOffsets int64 [E_local + 1]
 * (padded to expertAlignment; the last is the rows hpMoeDispatchNormal writes). */
hpStatus hpNotifyDispatchGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* x,
                                          const hpTensor* topkIdx, const hpTensor* topkWeights,
                                          const hpTensor* xActiveMask, int32_t quant,
                                          int64_t expertAlignment,
                                          const hpTensor* recvTokensPerExpert,
                                          const hpTensor* recvExpertOffsets,
                                          uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpNotifyDispatch(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* The notify's inputs again; outputs (rows = recvExpertOffsets[E_local]): recvX int8
 * (quantised) or x's dtype [rows, H]; recvXScale fp32 [rows] (quantised; else NULL);
 * recvTopkWeights fp32 [rows]; recvSrcInfo int32 [rows, 2] or NULL: each row's source rank and
 * token (-1 for pad rows). */
hpStatus hpMoeDispatchNormalGetWorkspaceSize(
    hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx, const hpTensor* topkWeights,
    const hpTensor* xActiveMask, int32_t quant, int64_t expertAlignment, const hpTensor* recvX,
    const hpTensor* recvXScale, const hpTensor* recvTopkWeights, const hpTensor* recvSrcInfo,
    uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpMoeDispatchNormal(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* expertOut fp32/bf16 [rows, H] of the last dispatch; weights fp32 [rows] (normally its
 * recvTopkWeights) or NULL for the plain sum (dispatch's adjoint); y fp32/bf16 [T, H]. */
hpStatus hpMoeCombineNormalGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* expertOut,
                                            const hpTensor* weights, const hpTensor* y,
                                            uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpMoeCombineNormal(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* The low-latency mode (a buffer created with low_latency = 1; T <= max_tokens_per_rank):
 * x, topkIdx, topkWeights, xActiveMask and quant as the normal dispatch's. Outputs, of fixed
 * shapes (rows = R x max_tokens_per_rank): recvX int8 (quantised) or x's dtype [E_local, rows,
 * H] (contiguous; rows past an expert's count unspecified); recvXScale fp32 [E_local, rows]
 * (quantised; else NULL); recvCount int64 [E_local]: each local expert's rows; layoutRange
 * int64 [E_local, R, 2] or NULL: the first row and count from each rank; recvSrcInfo int32
 * [E_local, rows, 2] or NULL: each row's source rank and token (-1 past the count). The
 * collective runs whatever the outputs are; a bad one is then this rank's error alone. */
hpStatus hpMoeDispatchLowLatencyGetWorkspaceSize(
    hpMoeBuffer* buffer, const hpTensor* x, const hpTensor* topkIdx, const hpTensor* topkWeights,
    const hpTensor* xActiveMask, int32_t quant, const hpTensor* recvX, const hpTensor* recvXScale,
    const hpTensor* recvCount, const hpTensor* layoutRange, const hpTensor* recvSrcInfo,
    uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpMoeDispatchLowLatency(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* expertOut fp32/bf16 [E_local, rows, H] in the last low-latency dispatch's row order;
 * topkWeights fp32 [T, K]; y fp32/bf16 [T, H] = sum over k of topkWeights[t][k] x the output of
 * t's k-th expert (tokens that were not sent: zeros). */
hpStatus hpMoeCombineLowLatencyGetWorkspaceSize(hpMoeBuffer* buffer, const hpTensor* expertOut,
                                                const hpTensor* topkWeights, const hpTensor* y,
                                                uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpMoeCombineLowLatency(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* ---- HyperMegaMoe: the MoE layer's forward (dispatch -> GMM1 + SwiGLU -> GMM2 -> combine) ----
 * hpHyperMegaMoeCreate is collective and packs this rank's experts' weights (copied):
 * w1 int8 [E_local, H, 2I] (gate columns, then up), w1Scale fp32 [E_local, 2I], w2 int8
 * [E_local, I, H], w2Scale fp32 [E_local, H]. The op's workspace is the layer's workspace plan
 * (quantised tokens and scales, SwiGLU output, GEMM output, ...) for maxTokensPerRank tokens:
 * 64-byte aligned, at least the size hpHyperMegaMoeGetWorkspaceSize returns (a smaller one on any
 * rank fails every rank). x fp32/bf16 [T, H], topkIdx int64/int32 [T, K], topkWeights fp32 [T, K],
 * xActiveMask uint8 [T] or NULL, y fp32 [T, H]. With shared_intermediate > 0, a shared expert
 * (every active token, weight 1) with sharedW1 [1, H, 2Is], sharedW1Scale [1, 2Is], sharedW2
 * [1, Is, H], sharedW2Scale [1, H] (NULL without one).
 * With cube_cores > 0 the layer runs on its own chip of cube_cores cores for the GEMMs and
 * vector_cores for the communication; path HP_MOE_PATH_DEEP (the deep-fuse forward) needs
 * vector_cores = 2 x cube_cores, HP_MOE_PATH_AUTO takes it with such a chip and more than one
 * expert per rank. */
/* backward: NONE, a forward-only layer; RECOMPUTE (1), the layer keeps bf16 copies of the
 * weights and hpHyperMegaMoeGrad recomputes GMM1 from x; KEEP_ACTIVATIONS, each forward also
 * keeps GMM1's output (fp32, rows x 2I per rank) and a Grad of the same inputs uses it instead of
 * recomputing (the same gradients, bit for bit). */
#define HP_MOE_BACKWARD_NONE 0
#define HP_MOE_BACKWARD_RECOMPUTE 1
#define HP_MOE_BACKWARD_KEEP_ACTIVATIONS 2
/* OR-ed with RECOMPUTE or KEEP_ACTIVATIONS: the activation-gradient GEMMs (dY W2^T, dA W1^T) in
 * int8 instead of bf16 (dY and dA rounded to int8 per row, the weights exact; the layer keeps
 * the int8 weights transposed instead of bf16 copies). */
#define HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS 4

#define HP_MOE_PATH_AUTO 0
#define HP_MOE_PATH_STAGED 1
#define HP_MOE_PATH_DEEP 2

typedef struct hpHyperMegaMoeConfig {
  int64_t hidden;
  int64_t intermediate;
  int64_t num_experts;
  int64_t topk;
  int64_t max_tokens_per_rank;
  int32_t comm; /* HP_MOE_COMM_* */
  int64_t shared_intermediate;
  int32_t backward;   /* HP_MOE_BACKWARD_* mode, optionally | INT8_ACTIVATION_GRADS */
  int32_t path;       /* HP_MOE_PATH_* */
  int32_t cube_cores; /* 0: no chip (everything on the calling thread) */
  int32_t vector_cores;
  double capacity_factor; /* 0: lossless; >= 1: hpMoeBufferConfig's */
  int32_t no_growth; /* with capacity_factor: 1 = OUT_OF_MEMORY on overflow instead of growing */
} hpHyperMegaMoeConfig;

/* Every weight of a layer (hpHyperMegaMoeCreateWithWeights): the stacked tensors as for
 * hpHyperMegaMoeCreate, or, TENSOR_LIST, numListed = E_local per-expert tensors in the arrays
 * w1List (int8 [H, 2I] each), w1ScaleList (fp32 [2I]), w2List (int8 [I, H]), w2ScaleList (fp32
 * [H]) with the stacked ones NULL; the shared expert's (or NULL); and the optional smooth-quant
 * scales (NULL: none): smooth1 fp32 [H] scales x before its quantisation, smooth2 fp32
 * [E_local, I] (sharedSmooth2 [1, Is]) scales the SwiGLU output before its requantisation. */
typedef struct hpHyperMegaMoeWeights {
  const hpTensor* w1;
  const hpTensor* w1Scale;
  const hpTensor* w2;
  const hpTensor* w2Scale;
  int64_t numListed;
  const hpTensor* w1List;
  const hpTensor* w1ScaleList;
  const hpTensor* w2List;
  const hpTensor* w2ScaleList;
  const hpTensor* sharedW1;
  const hpTensor* sharedW1Scale;
  const hpTensor* sharedW2;
  const hpTensor* sharedW2Scale;
  const hpTensor* smooth1;
  const hpTensor* smooth2;
  const hpTensor* sharedSmooth2;
} hpHyperMegaMoeWeights;

typedef struct hpHyperMegaMoeLayer hpHyperMegaMoeLayer;

hpStatus hpHyperMegaMoeCreate(const hpHyperMegaMoeConfig* config, const hpTensor* w1,
                              const hpTensor* w1Scale, const hpTensor* w2, const hpTensor* w2Scale,
                              const hpTensor* sharedW1, const hpTensor* sharedW1Scale,
                              const hpTensor* sharedW2, const hpTensor* sharedW2Scale,
                              hpHyperMegaMoeLayer** layer);
hpStatus hpHyperMegaMoeCreateWithWeights(const hpHyperMegaMoeConfig* config,
                                         const hpHyperMegaMoeWeights* weights,
                                         hpHyperMegaMoeLayer** layer);
hpStatus hpHyperMegaMoeDestroy(hpHyperMegaMoeLayer* layer);
hpStatus hpHyperMegaMoeGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                        const hpTensor* topkIdx, const hpTensor* topkWeights,
                                        const hpTensor* xActiveMask, const hpTensor* y,
                                        uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpHyperMegaMoe(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* ---- the variants of hpHyperMegaMoe (its config, weights and tensors, unless said) ----------
 * W4A8: the experts' weights (routed and shared) are int8 tensors of int4 values, in [-8, 7]
 * (HP_STATUS_OUT_OF_RANGE otherwise), stored packed two to a byte; activations stay int8.
 * Shmem: the layer's communication is forced onto the put + signal context (config->comm is
 * not read), which runs on every transport of symmetric memory.
 * Each variant's GetWorkspaceSize takes only the layers of its own create
 * (HP_STATUS_FAILED_PRECONDITION otherwise); hpHyperMegaMoeDestroy and hpHyperMegaMoeGrad take
 * them all. */
hpStatus hpHyperMegaMoeW4A8CreateWithWeights(const hpHyperMegaMoeConfig* config,
                                             const hpHyperMegaMoeWeights* weights,
                                             hpHyperMegaMoeLayer** layer);
hpStatus hpHyperMegaMoeW4A8GetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                            const hpTensor* topkIdx, const hpTensor* topkWeights,
                                            const hpTensor* xActiveMask, const hpTensor* y,
                                            uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpHyperMegaMoeW4A8(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

hpStatus hpHyperMegaMoeShmemCreateWithWeights(const hpHyperMegaMoeConfig* config,
                                              const hpHyperMegaMoeWeights* weights,
                                              hpHyperMegaMoeLayer** layer);
hpStatus hpHyperMegaMoeShmemGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                             const hpTensor* topkIdx, const hpTensor* topkWeights,
                                             const hpTensor* xActiveMask, const hpTensor* y,
                                             uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpHyperMegaMoeShmem(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

/* ---- HyperMegaMoeGrad: the forward's gradients (a layer created with backward = 1) ----------
 * The forward's x, topkIdx, topkWeights and xActiveMask (NULL or as given to it); dy fp32/bf16
 * [T, H]. Outputs (overwritten): dx fp32/bf16 [T, H], dTopkWeights fp32 [T, K], dw1 fp32/bf16
 * [E_local, H, 2I], dw2 [E_local, I, H]; with a shared expert sharedDw1 [1, H, 2Is] and
 * sharedDw2 [1, Is, H] (this rank's tokens' share), else NULL. The quantisers pass gradients
 * straight through; the GEMMs are bf16 with fp32 accumulation. Collective; the workspace size
 * is 0 (the layer keeps the backward's storage). */
hpStatus hpHyperMegaMoeGradGetWorkspaceSize(hpHyperMegaMoeLayer* layer, const hpTensor* x,
                                            const hpTensor* topkIdx, const hpTensor* topkWeights,
                                            const hpTensor* xActiveMask, const hpTensor* dy,
                                            const hpTensor* dx, const hpTensor* dTopkWeights,
                                            const hpTensor* dw1, const hpTensor* dw2,
                                            const hpTensor* sharedDw1, const hpTensor* sharedDw2,
                                            uint64_t* workspaceSize, hpOpExecutor** executor);
hpStatus hpHyperMegaMoeGrad(void* workspace, uint64_t workspaceSize, hpOpExecutor* executor);

#ifdef __cplusplus
}
#endif

#endif /* HYPER_PARALLEL_OP_API_H_ */
