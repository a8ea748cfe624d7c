#include "moe_layer/unfused_layer.h"

#include "common/bfloat16.h"

namespace hp::bench::moe_layer {

UnfusedLayer::UnfusedLayer(MPI_Comm comm, const LayerShape& shape, const Experts& experts,
                           int threads)
    : shape_(shape),
      experts_(experts),
      threads_(threads),
      pipeline_(comm, shape.hidden, shape.experts, shape.topk, threads) {}

UnfusedLayer::ExpertGemms& UnfusedLayer::gemms(std::int64_t expert, std::int64_t rows) {
  ExpertGemms& g = gemms_[{expert, rows}];
  if (g.gmm1 == nullptr) {
    const std::int64_t H = shape_.hidden, I = shape_.intermediate;
    const auto e = std::size_t(expert);
    g.gmm1 = std::make_unique<DnnlInt8Matmul>(
        engine_, stream_, rows, H, 2 * I, experts_.w1.data() + e * std::size_t(H * 2 * I),
        std::vector<float>(
            experts_.w1_scale.begin() + std::ptrdiff_t(e * std::size_t(2 * I)),
            experts_.w1_scale.begin() + std::ptrdiff_t((e + 1) * std::size_t(2 * I))));
    g.gmm2 = std::make_unique<DnnlInt8Matmul>(
        engine_, stream_, rows, I, H, experts_.w2.data() + e * std::size_t(I * H),
        std::vector<float>(experts_.w2_scale.begin() + std::ptrdiff_t(e * std::size_t(H)),
                           experts_.w2_scale.begin() + std::ptrdiff_t((e + 1) * std::size_t(H))));
  }
  return g;
}

Status UnfusedLayer::forward(const std::uint16_t* x, const std::int64_t* topk_idx,
                             const float* topk_weights, std::int64_t tokens, std::uint16_t* y) {
  const std::int64_t H = shape_.hidden, I = shape_.intermediate;
  HP_RETURN_IF_ERROR(pipeline_.dispatch(x, topk_idx, topk_weights, tokens));
  const std::vector<std::int64_t>& off = pipeline_.expert_offsets();
  const auto rows = std::size_t(pipeline_.rows());
  expert_out_.resize(rows * std::size_t(H));
  for (std::int64_t l = 0; l < pipeline_.local_experts(); ++l) {
    const std::int64_t first = off[std::size_t(l)], m = off[std::size_t(l) + 1] - first;
    if (m == 0) continue;
    const bool known = gemms_.contains({l, m});
    HP_ENSURE(known || !frozen_, ErrorCode::kInternal,
              "unfused: expert {} has {} rows, a routing the frozen layer has no primitive for", l,
              m);
    ExpertGemms& g = gemms(l, m);
    gmm1_out_.resize(std::size_t(m * 2 * I));
    h_.resize(std::size_t(m * I));
    q_.resize(std::size_t(m * I));
    q_scale_.resize(std::size_t(m));
    gmm2_out_.resize(std::size_t(m * H));
    g.gmm1->run(stream_, pipeline_.recv_x() + first * H, gmm1_out_.data());
    swiglu_quant_pass(gmm1_out_.data(), m, I, pipeline_.recv_scale() + first, h_.data(), q_.data(),
                      q_scale_.data(), threads_);
    g.gmm2->run(stream_, q_.data(), gmm2_out_.data());
    std::uint16_t* out = expert_out_.data() + first * H;
#pragma omp parallel for num_threads(threads_)
    for (std::int64_t r = 0; r < m; ++r) {
      const float s = q_scale_[std::size_t(r)];
      for (std::int64_t c = 0; c < H; ++c)
        out[r * H + c] = float_to_bf16(gmm2_out_[std::size_t(r * H + c)] * s);
    }
  }
  return pipeline_.combine(expert_out_.data(), y);
}

}  // namespace hp::bench::moe_layer
