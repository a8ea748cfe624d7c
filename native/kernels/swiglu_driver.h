// The SwiGLU's element-wise steps of the MoE backward (kernel_table.h: SwigluArgs,
// SwigluGradArgs) for the optimized targets: each target compiles this header with its own
// -march, and the loops below are written so that the compiler vectorizes them without
// changing a bit of the results (element-wise IEEE operations in the formula's order; the one
// reduction keeps its 16 lanes explicitly).
#ifndef HYPER_PARALLEL_KERNELS_SWIGLU_DRIVER_H_
#define HYPER_PARALLEL_KERNELS_SWIGLU_DRIVER_H_

#include <algorithm>
#include <cstdint>

#include "common/bfloat16.h"
#include "kernels/kernel_math.h"
#include "kernels/kernel_table.h"

namespace hp::kernels::driver {

// Calls f(expert, first_row, end_row) for the rows of [begin, end) of each expert in order.
template <typename F>
void for_expert_rows(const std::int64_t* offsets, std::int64_t experts, std::int64_t begin,
                     std::int64_t end, F&& f) {
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t lo = std::max(begin, offsets[e]), hi = std::min(end, offsets[e + 1]);
    if (lo < hi) f(e, lo, hi);
  }
}

inline void swiglu(const SwigluArgs* args, std::int64_t begin, std::int64_t end) {
  const SwigluArgs& a = *args;
  const SwigluRows& in = a.in;
  const std::int64_t n = in.inter;
  for_expert_rows(in.offsets, in.experts, begin, end,
                  [&](std::int64_t e, std::int64_t lo, std::int64_t hi) {
                    const float* sm = in.smooth ? in.smooth + e * n : nullptr;
                    for (std::int64_t r = lo; r < hi; ++r) {
                      const float* g = in.a + r * in.a_row_stride;
                      const float* u = g + n;
                      float* h = a.h + r * a.h_row_stride;
                      for (std::int64_t i = 0; i < n; ++i) h[i] = silu(g[i]) * u[i];
                      if (sm) {
                        for (std::int64_t i = 0; i < n; ++i) h[i] = h[i] * sm[i];
                      }
                    }
                  });
}

// sum_i x[i] * float(q[i]) in 16 lanes (lane l: i = l, l + 16, ...), lanes added in order.
inline float lane_dot(const float* x, const std::int8_t* q, std::int64_t n) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) lanes[l] = lanes[l] + x[i + l] * float(q[i + l]);
  }
  for (int l = 0; i + l < n; ++l) lanes[l] = lanes[l] + x[i + l] * float(q[i + l]);
  float sum = 0.0f;
  for (float v : lanes) sum = sum + v;
  return sum;
}

inline void swiglu_grad(const SwigluGradArgs* args, std::int64_t begin, std::int64_t end) {
  const SwigluGradArgs& a = *args;
  const SwigluRows& in = a.in;
  const std::int64_t n = in.inter;
  for_expert_rows(
      in.offsets, in.experts, begin, end, [&](std::int64_t e, std::int64_t lo, std::int64_t hi) {
        const float* sm = in.smooth ? in.smooth + e * n : nullptr;
        for (std::int64_t r = lo; r < hi; ++r) {
          const float* gate = in.a + r * in.a_row_stride;
          const float* up = gate + n;
          const float* grad = a.g + r * a.g_row_stride;
          const float w = a.row_weight ? a.row_weight[r] : 1.0f;
          std::uint16_t* dg = a.da + r * a.da_row_stride;
          std::uint16_t* du = dg + n;
          for (std::int64_t i = 0; i < n; ++i) {
            const float dh = (w * grad[i]) * (sm ? sm[i] : 1.0f);
            const float g = gate[i], s = sigmoid(g);
            dg[i] = float_to_bf16(((dh * up[i]) * s) * (1.0f + g * (1.0f - s)));
            du[i] = float_to_bf16((dh * g) * s);
          }
          if (a.d_row_weight)
            a.d_row_weight[r] = a.h_scale[r] * lane_dot(grad, a.h_q + r * a.h_q_row_stride, n);
        }
      });
}

}  // namespace hp::kernels::driver

#endif  // HYPER_PARALLEL_KERNELS_SWIGLU_DRIVER_H_
