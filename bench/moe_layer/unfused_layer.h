// The layer's unfused peer: the MoE layer as a framework without a fused op runs it, from
// standard parts. The MPI_Alltoallv dispatch (moe_comm/alltoallv_pipeline.h: int8 rows grouped
// by local expert), then per local expert oneDNN's int8 GMM1, a separate SwiGLU +
// requantisation pass, oneDNN's int8 GMM2, a pass applying the rows' scales into bf16, and the
// pipeline's combine (each rank's weighted sum of its experts' rows, one bf16 row per token
// and rank home, summed in fp32 at the source). oneDNN's
// primitives are made per (expert, rows) on first use and kept: a fixed routing pays for
// them once, as a framework's primitive cache would.
#ifndef HYPER_PARALLEL_BENCH_MOE_LAYER_UNFUSED_LAYER_H_
#define HYPER_PARALLEL_BENCH_MOE_LAYER_UNFUSED_LAYER_H_

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/dnnl_int8.h"
#include "common/status.h"
#include "moe_comm/alltoallv_pipeline.h"
#include "moe_layer/workload.h"

namespace hp::bench::moe_layer {

class UnfusedLayer {
 public:
  // experts: this rank's local experts (workload.h layout); threads: oneDNN's and the passes'.
  UnfusedLayer(MPI_Comm comm, const LayerShape& shape, const Experts& experts, int threads);

  // x bf16 [T, H], topk_idx [T, K], topk_weights [T, K] -> y bf16 [T, H]. Collective.
  Status forward(const std::uint16_t* x, const std::int64_t* topk_idx, const float* topk_weights,
                 std::int64_t tokens, std::uint16_t* y);

  // From now on only the primitives made so far run (a routing that needs another one fails):
  // the caller may free `experts` (oneDNN keeps its own reordered copies).
  void freeze() { frozen_ = true; }

 private:
  struct ExpertGemms {
    std::unique_ptr<DnnlInt8Matmul> gmm1, gmm2;
  };
  ExpertGemms& gemms(std::int64_t expert, std::int64_t rows);

  LayerShape shape_;
  const Experts& experts_;
  int threads_;
  bool frozen_ = false;
  AlltoallvPipeline pipeline_;
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<std::pair<std::int64_t, std::int64_t>, ExpertGemms> gemms_;
  std::vector<float> gmm1_out_, h_, q_scale_, gmm2_out_;
  std::vector<std::int8_t> q_;
  std::vector<std::uint16_t> expert_out_;
};

}  // namespace hp::bench::moe_layer

#endif  // HYPER_PARALLEL_BENCH_MOE_LAYER_UNFUSED_LAYER_H_
