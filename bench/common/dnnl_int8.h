// The unfused int8 FFN of the benchmarks' oneDNN peers: oneDNN's s8 x s8 -> f32 matmul with
// per-N output scales (oneDNN 2.6 has no per-row scales), and the separate pass a framework
// without a fused epilogue runs after GMM1: per-row dequantisation, SwiGLU and requantisation.
#ifndef HYPER_PARALLEL_BENCH_COMMON_DNNL_INT8_H_
#define HYPER_PARALLEL_BENCH_COMMON_DNNL_INT8_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/cpu_features.h"
#include "kernels/kernel_math.h"

namespace hp::bench {

// The largest int8 weight magnitude oneDNN's int8 matmul multiplies exactly on this CPU. Without
// VNNI it multiplies with vpmaddubsw, whose 16-bit sums of two u8 x s8 products saturate for
// full-range weights (its guide, "Nuances of int8 computations"); weights in [-63, 63], as that
// guide advises, keep every sum in range. A benchmark comparing oneDNN with an exact kernel draws
// its weights from [-max, max] on both sides, and says so when max is not 127.
inline int dnnl_exact_int8_weight_max() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512_vnni || cpu.amx_int8 ? 127 : 63;
}

// What a benchmark prints when its weights are narrower than int8's range ("" when max is 127).
inline std::string dnnl_weight_range_note(int max) {
  if (max == 127) return {};
  return "int8 weights in [-" + std::to_string(max) + ", " + std::to_string(max) +
         "] (no VNNI: oneDNN saturates beyond)";
}

// s8 [M, K] x s8 [K, N] -> f32 [M, N] for one M, the weights reordered once into the layout
// oneDNN picks for that M (its best case: a framework with a primitive cache gets no more).
class DnnlInt8Matmul {
 public:
  DnnlInt8Matmul(const dnnl::engine& engine, dnnl::stream& stream, std::int64_t m, std::int64_t k,
                 std::int64_t n, const std::int8_t* w, const std::vector<float>& scale) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc src_md({m, k}, dt::s8, tag::ab), w_any({k, n}, dt::s8, tag::any),
        w_plain({k, n}, dt::s8, tag::ab), dst_md({m, n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scale);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_any, dst_md), attr, engine);
    impl_ = pd.impl_info_str();
    dnnl::memory plain(w_plain, engine, const_cast<std::int8_t*>(w));
    weights_ = dnnl::memory(pd.weights_desc(), engine);
    dnnl::reorder(plain, weights_).execute(stream, plain, weights_);
    stream.wait();
    src_ = dnnl::memory(src_md, engine, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dst_md, engine, DNNL_MEMORY_NONE);
    prim_ = dnnl::matmul(pd);
  }

  // out = a x w (scaled per N); returns when done.
  void run(dnnl::stream& stream, const std::int8_t* a, float* out) {
    src_.set_data_handle(const_cast<std::int8_t*>(a));
    dst_.set_data_handle(out);
    prim_.execute(stream,
                  {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}});
    stream.wait();
  }

  const std::string& impl() const { return impl_; }

 private:
  dnnl::matmul prim_;
  dnnl::memory weights_, src_, dst_;
  std::string impl_;
};

// GMM1's output [M, 2I] (fp32, per-N scales applied; columns [0, I) gate, [I, 2I) up) to what
// the fused epilogue writes: h = silu(gate s) (up s) per row (s the row's activation scale),
// then per-row int8 quantisation into q [M, I] and q_scale [M]. h [M, I] is scratch.
inline void swiglu_quant_pass(const float* gemm, std::int64_t m, std::int64_t inter,
                              const float* a_scale, float* h, std::int8_t* q, float* q_scale,
                              int threads) {
  namespace hk = hp::kernels;
#pragma omp parallel for num_threads(threads)
  for (std::int64_t r = 0; r < m; ++r) {
    const float* gate = gemm + r * 2 * inter;
    const float* up = gate + inter;
    float* hr = h + r * inter;
    const float s = a_scale[r];
    float amax = 0.0f;
    for (std::int64_t c = 0; c < inter; ++c) {
      hr[c] = hk::silu(gate[c] * s) * (up[c] * s);
      amax = std::max(amax, std::fabs(hr[c]));
    }
    const float mul = hk::quant_multiplier(amax);
    q_scale[r] = hk::quant_scale(amax);
    std::int8_t* qr = q + r * inter;
    for (std::int64_t c = 0; c < inter; ++c) qr[c] = hk::quantize_value(hr[c] * mul);
  }
}

}  // namespace hp::bench

#endif  // HYPER_PARALLEL_BENCH_COMMON_DNNL_INT8_H_
