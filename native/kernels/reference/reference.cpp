// The scalar reference target: the definition every other target is tested against. Plain
// loops over logical indices, no blocking, no intrinsics (kernel_table.h states the formulas).
#include <cmath>
#include <cstring>
#include <vector>

#include "common/bfloat16.h"
#include "kernels/kernel_math.h"
#include "kernels/kernel_table.h"
#include "kernels/reference/reference.h"
#include "kernels/tiles.h"

namespace hp::kernels {
namespace {

float load(const void* base, ElementType type, std::int64_t i) {
  if (type == ElementType::kBF16) return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

void store(void* base, ElementType type, std::int64_t i, float v) {
  if (type == ElementType::kBF16) {
    static_cast<std::uint16_t*>(base)[i] = float_to_bf16(v);
  } else {
    static_cast<float*>(base)[i] = v;
  }
}

// Quantizes one row of n values (already smoothed); returns false when one is not finite.
bool quantize_row(const float* x, std::int64_t n, float static_scale, std::int8_t* q,
                  float* scale) {
  float amax = 0.0f;
  bool finite = true;
  for (std::int64_t c = 0; c < n; ++c) {
    finite = finite && std::isfinite(x[c]);
    amax = std::max(amax, std::fabs(x[c]));
  }
  const float mul = static_scale > 0.0f ? 1.0f / static_scale : quant_multiplier(amax);
  *scale = !finite ? 0.0f : static_scale > 0.0f ? static_scale : quant_scale(amax);
  for (std::int64_t c = 0; c < n; ++c) q[c] = finite ? quantize_value(x[c] * mul) : 0;
  return finite;
}

std::int64_t quantize(const QuantizeArgs* a, std::int64_t row_begin, std::int64_t row_end) {
  std::vector<float> row(std::size_t(a->cols));
  std::int64_t bad = 0;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    for (std::int64_t c = 0; c < a->cols; ++c) {
      const float x = load(a->x, a->x_type, r * a->x_row_stride + c);
      row[std::size_t(c)] = a->smooth ? x * a->smooth[c] : x;
    }
    bad += !quantize_row(row.data(), a->cols, a->static_scale, a->q + r * a->q_row_stride,
                         a->scale + r);
  }
  return bad;
}

void dequantize(const DequantizeArgs* a, std::int64_t row_begin, std::int64_t row_end) {
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    for (std::int64_t c = 0; c < a->cols; ++c) {
      store(a->out, a->out_type, r * a->out_row_stride + c,
            float(a->q[r * a->q_row_stride + c]) * a->scale[r]);
    }
  }
}

void row_sum(const RowSumArgs* a) {
  for (std::int64_t c = 0; c < a->cols; ++c) {
    float acc = 0.0f;
    for (std::int64_t i = 0; i < a->n; ++i) {
      acc = acc + (a->weights ? a->weights[i] : 1.0f) * load(a->rows[i], a->row_type, c);
    }
    store(a->out, a->out_type, c, acc);
  }
}

// (sum over K groups of float(int32 dot of the group) * w_scale) for row r, logical column c.
float scaled_dot(const GroupedGemmArgs& a, std::int64_t e, std::int64_t r, std::int64_t c) {
  const PackedWeightsHeader& w = *a.w;
  const std::int64_t p = w.packed_column(c);
  const std::int8_t* x = a.a + r * a.a_row_stride;
  float sum = 0.0f;
  for (std::int64_t g = 0; g < w.groups; ++g) {
    std::int32_t acc = 0;
    for (std::int64_t k = g * w.group_size; k < std::min(w.k, (g + 1) * w.group_size); ++k) {
      acc += std::int32_t(x[k]) * w.value(e, k, p);
    }
    const float part = float(acc) * w.scales(e, g)[p];
    sum = g == 0 ? part : sum + part;
  }
  return sum;
}

std::uint64_t gemm_workspace(const GroupedGemmArgs*, const TileGrid*) { return 0; }

void grouped_gemm(const GroupedGemmArgs* args, const TileGrid* grid, std::int64_t begin,
                  std::int64_t end, void*) {
  const GroupedGemmArgs& a = *args;
  gemm_tile_space(a, *grid).for_each(begin, end, [&](const Tile& t) {
    for (std::int64_t r = t.row_begin; r < t.row_end; ++r) {
      if (a.epilogue == Epilogue::kDequantSwigluQuant) {
        const std::int64_t inter = a.w->n / 2;
        std::vector<float> h(static_cast<std::size_t>(inter));
        for (std::int64_t c = 0; c < inter; ++c) {
          const float gate = scaled_dot(a, t.expert, r, c) * a.a_scale[r];
          const float up = scaled_dot(a, t.expert, r, inter + c) * a.a_scale[r];
          if (a.preact) {
            a.preact[r * a.preact_row_stride + c] = gate;
            a.preact[r * a.preact_row_stride + inter + c] = up;
          }
          float v = silu(gate) * up;
          if (a.smooth) v = v * a.smooth[t.expert * inter + c];
          h[std::size_t(c)] = v;
        }
        quantize_row(h.data(), inter, 0.0f, static_cast<std::int8_t*>(a.out) + r * a.out_row_stride,
                     a.out_scale + r);
        continue;
      }
      for (std::int64_t c = t.col_begin; c < t.col_end; ++c) {
        float v = scaled_dot(a, t.expert, r, c) * a.a_scale[r];
        if (a.epilogue == Epilogue::kDequantScale) v = v * a.row_factor[r];
        store(a.out, a.out_type, r * a.out_row_stride + c, v);
      }
    }
  });
}

std::uint64_t bf16_workspace(const Bf16GemmArgs*, const TileGrid*) { return 0; }

void bf16_gemm(const Bf16GemmArgs* args, const TileGrid* grid, std::int64_t begin, std::int64_t end,
               void*) {
  const Bf16GemmArgs& a = *args;
  const auto bf = [](std::uint16_t v) { return bf16_to_float(v); };
  bf16_tile_space(a, *grid).for_each(begin, end, [&](const Tile& t) {
    for (std::int64_t r = t.row_begin; r < t.row_end; ++r) {
      for (std::int64_t c = t.col_begin; c < t.col_end; ++c) {
        float acc = 0.0f;
        std::int64_t out_index;
        if (a.kind == Bf16GemmKind::kInput) {
          const std::uint16_t* b = a.b + t.expert * a.b_expert_stride + c * a.b_stride_n;
          for (std::int64_t k = 0; k < a.k; ++k) {
            acc += bf(a.a[r * a.a_row_stride + k]) * bf(b[k * a.b_stride_k]);
          }
          out_index = r * a.out_row_stride + c;
        } else {
          for (std::int64_t i = a.offsets[t.expert]; i < a.offsets[t.expert + 1]; ++i) {
            acc += bf(a.a[i * a.a_row_stride + r]) * bf(a.b[i * a.b_stride_k + c]);
          }
          out_index = (t.expert * a.m + r) * a.out_row_stride + c;
        }
        store(a.out, a.out_type, out_index, acc);
      }
    }
  });
}

// The expert of row r (offsets non-decreasing, r < offsets[experts]).
std::int64_t expert_of(const std::int64_t* offsets, std::int64_t experts, std::int64_t r) {
  std::int64_t e = 0;
  while (e + 1 < experts && offsets[e + 1] <= r) ++e;
  return e;
}

void swiglu(const SwigluArgs* args, std::int64_t row_begin, std::int64_t row_end) {
  const SwigluArgs& a = *args;
  const SwigluRows& in = a.in;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int64_t e = expert_of(in.offsets, in.experts, r);
    for (std::int64_t i = 0; i < in.inter; ++i) {
      const float g = in.a[r * in.a_row_stride + i], u = in.a[r * in.a_row_stride + in.inter + i];
      const float sm = in.smooth ? in.smooth[e * in.inter + i] : 1.0f;
      a.h[r * a.h_row_stride + i] = (silu(g) * u) * sm;
    }
  }
}

void swiglu_grad(const SwigluGradArgs* args, std::int64_t row_begin, std::int64_t row_end) {
  const SwigluGradArgs& a = *args;
  const SwigluRows& in = a.in;
  const std::int64_t n = in.inter;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int64_t e = expert_of(in.offsets, in.experts, r);
    const float w = a.row_weight ? a.row_weight[r] : 1.0f;
    float lanes[16] = {};
    for (std::int64_t i = 0; i < n; ++i) {
      const float grad = a.g[r * a.g_row_stride + i];
      const float g = in.a[r * in.a_row_stride + i], u = in.a[r * in.a_row_stride + n + i];
      const float dh = (w * grad) * (in.smooth ? in.smooth[e * n + i] : 1.0f);
      const float s = sigmoid(g);
      a.da[r * a.da_row_stride + i] = float_to_bf16(((dh * u) * s) * (1.0f + g * (1.0f - s)));
      a.da[r * a.da_row_stride + n + i] = float_to_bf16((dh * g) * s);
      lanes[i % 16] = lanes[i % 16] + grad * float(a.h_q[r * a.h_q_row_stride + i]);
    }
    float sum = 0.0f;
    for (float v : lanes) sum = sum + v;
    if (a.d_row_weight) a.d_row_weight[r] = a.h_scale[r] * sum;
  }
}

constexpr KernelTable kTable = {
    .size = sizeof(KernelTable),
    .version = kKernelTableVersion,
    .target = "reference",
    .quantize = quantize,
    .dequantize = dequantize,
    .grouped_gemm_workspace = gemm_workspace,
    .grouped_gemm = grouped_gemm,
    .preferred_tile_m = 16,
    .preferred_tile_n = 64,
    .bf16_gemm_workspace = bf16_workspace,
    .bf16_gemm = bf16_gemm,
    .row_sum = row_sum,
    .swiglu = swiglu,
    .swiglu_grad = swiglu_grad,
};

}  // namespace

const KernelTable* reference_kernel_table() { return &kTable; }

}  // namespace hp::kernels
