// The kernel table: the C ABI between the kernels front end (libhyper_parallel_kernels.so)
// and one SoC target library (libhyper_parallel_kernels_<target>.so, or the reference built
// into the front end). Each target library exports
//     extern "C" const hp::kernels::KernelTable* hp_kernel_table(void);
// The front end validates every argument before calling a table entry: entries are pure
// functions over tiles that trust their arguments, never allocate, and never fail.
//
// Versioning: `size` is sizeof(KernelTable) of the library's build and `version` is
// kKernelTableVersion; the front end refuses a table with another version or a smaller size.
// New entries are appended and the version bumped: a front end and its target libraries come
// from one build, and a library of another build is refused rather than half-used.
#ifndef HYPER_PARALLEL_KERNELS_KERNEL_TABLE_H_
#define HYPER_PARALLEL_KERNELS_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "kernels/packed_weights.h"

namespace hp::kernels {

// 4: bf16 B panels (Bf16GemmArgs::b_panels). 5: swiglu, swiglu_grad. 6: GroupedGemmArgs::preact.
inline constexpr std::uint32_t kKernelTableVersion = 6;

// Element types in the ABI (the numbers are those of hp::DType).
enum class ElementType : std::int32_t { kInt8 = 0, kBF16 = 4, kFP32 = 6 };

// Per-row int8 quantisation of x[rows, cols] (fp32 or bf16):
//   dynamic (static_scale == 0): s = max_c |x'[r][c]| / 127, q = rne(x' * (127 / max)), and
//     s = 0, q = 0 for an all-zero row;
//   static (static_scale > 0): s = static_scale, q = rne(x' * (1 / static_scale));
// where x' = x * smooth[c] when smooth is set (SmoothQuant), and q is clamped to [-127, 127].
// Rows holding a NaN or an infinity are counted in *non_finite_rows (their q and s are
// unspecified).
struct QuantizeArgs {
  const void* x;
  ElementType x_type;                     // kFP32 or kBF16
  std::int64_t rows, cols, x_row_stride;  // strides in elements
  const float* smooth;                    // [cols] or null
  float static_scale;                     // 0: dynamic
  std::int8_t* q;
  std::int64_t q_row_stride;
  float* scale;  // [rows]
};

// out[r][c] = q[r][c] * scale[r], fp32 or bf16.
struct DequantizeArgs {
  const std::int8_t* q;
  std::int64_t rows, cols, q_row_stride;
  const float* scale;    // [rows]
  ElementType out_type;  // kFP32 or kBF16
  void* out;
  std::int64_t out_row_stride;
};

enum class Epilogue : std::int32_t {
  // out[r][c] = (float(acc[r][c]) * w_scale[c]) * a_scale[r]          (fp32 or bf16)
  kDequant = 0,
  // GMM1: N = 2I, gate = columns [0, I), up = columns [I, 2I) (weights packed with
  // PackLayout::kSwigluHalves); h = silu(gate) * up (silu(g) = g / (1 + exp(-g))), times
  // smooth[e][c] when set, then per-row dynamic int8 quantisation of h[r][0..I) (the
  // QuantizeArgs formula): out is int8 [rows, I], out_scale [rows].
  kDequantSwigluQuant = 1,
  // GMM2: out[r][c] = ((float(acc[r][c]) * w_scale[c]) * a_scale[r]) * row_factor[r]
  kDequantScale = 2,
};

// Grouped int8 GEMM: one group per local expert. Rows [offsets[e], offsets[e+1]) of `a` are
// multiplied by expert e's packed weights. With per-group-of-K weight scales the int32
// accumulators of each K group are converted and summed in fp32, group by group in order.
struct GroupedGemmArgs {
  const std::int8_t* a;  // [offsets[E], K]
  std::int64_t a_row_stride;
  const float* a_scale;          // [offsets[E]]
  const std::int64_t* offsets;   // [E + 1], offsets[0] == 0, non-decreasing
  const PackedWeightsHeader* w;  // E, K, N, layout: see packed_weights.h
  Epilogue epilogue;
  ElementType out_type;  // kFP32/kBF16 (kDequant, kDequantScale) or kInt8 (swiglu)
  void* out;             // [offsets[E], N] or [offsets[E], I]
  std::int64_t out_row_stride;
  float* out_scale;         // kDequantSwigluQuant: [offsets[E]]
  const float* row_factor;  // kDequantScale: [offsets[E]]
  const float* smooth;      // kDequantSwigluQuant: [E, I] or null
  // kDequantSwigluQuant: null, or where GMM1's dequantised output a = [gate | up] is stored as
  // well (fp32 [offsets[E], 2I], the kDequant formula: what the backward would recompute).
  float* preact;
  std::int64_t preact_row_stride;
};

// The tiles of a grouped GEMM: for each expert e in order, its rows in blocks of tile_m and
// its output columns in blocks of tile_n (row blocks outer). Tile t of the whole problem is
// found by walking experts; a call computes tiles [begin, end).
struct TileGrid {
  std::int64_t tile_m;
  std::int64_t tile_n;  // kDequantSwigluQuant: >= I (a tile holds whole rows of h)
};

// bf16 GEMMs for the backward pass (fp32 accumulate), grouped per expert the same way:
// kInput:  out[r][n] = sum_k a[r][k] * B_e(k, n)    for r in group e  (dX = dY . W^T)
// kWeight: out[e][m][n] = sum_{r in group e} a[r][m] * b[r][n]         (dW = X^T . dY)
// B_e(k, n) = b[e * b_expert_stride + k * b_stride_k + n * b_stride_n].
enum class Bf16GemmKind : std::int32_t { kInput = 0, kWeight = 1 };
struct Bf16GemmArgs {
  Bf16GemmKind kind;
  const std::uint16_t* a;
  std::int64_t a_row_stride;
  const std::int64_t* offsets;  // [E + 1]
  std::int64_t experts;
  const std::uint16_t* b;
  std::int64_t b_expert_stride, b_stride_k, b_stride_n;  // kInput; kWeight: b_stride_k = row stride
  std::int64_t m;  // kWeight: rows of each dW (the forward K); kInput: unused
  std::int64_t k;  // kInput: the reduction size; kWeight: unused (the group's rows)
  std::int64_t n;
  ElementType out_type;  // kFP32 or kBF16
  void* out;             // kInput: [offsets[E], n]; kWeight: [E, m, n], rows of n
  std::int64_t out_row_stride;
  // kInput: B packed once by bf16_pack_panels for these experts, k and n (b is then not read,
  // and the grid's tile_n is a multiple of bf16_panel_cols); null: B is packed from b per call.
  const void* b_panels;
};

// A weighted sum of rows (MoE combine: an expert rank sums its experts' outputs of one token,
// the token's rank sums the ranks' rows): out[c] = sum over i = 0..n-1 in order of
// weight_i * rows[i][c], accumulated in fp32 from 0 as acc = acc + weight_i * x (two roundings;
// weight_i = 1 when weights is null), for c in [0, cols). rows fp32 or bf16, out fp32 or bf16
// (round to nearest even). n == 0 writes zeros. `next` (may be null): the rows of the caller's
// next sum, prefetched as this one proceeds, column block by column block (hints only: never
// dereferenced, so any addresses do).
struct RowSumArgs {
  const void* const* rows;  // [n]
  ElementType row_type;     // kFP32 or kBF16
  const float* weights;     // [n] or null
  std::int64_t n, cols;
  ElementType out_type;     // kFP32 or kBF16
  void* out;                // [cols]
  const void* const* next;  // [next_n] or null
  std::int64_t next_n;
};

// The SwiGLU's element-wise steps of the MoE layer's backward, on rows grouped by expert (rows
// [offsets[e], offsets[e+1]) are expert e's; smooth, when set, is fp32 [E, I]), with g = a[r][i]
// and u = a[r][I + i] (GMM1's gate and up columns) and sm = smooth[e][i] (1 when null):
//   swiglu:      h[r][i] = (silu(g) * u) * sm, silu(g) = g / (1 + exp(-g)) as the forward's
//                GMM1 epilogue computes it;
//   swiglu_grad: with w = row_weight[r] (1 when null), dh = (w * G[r][i]) * sm and
//                s = 1 / (1 + exp(-g)):
//                  da[r][i] = bf16(((dh * u) * s) * (1 + g * (1 - s)))   (d gate)
//                  da[r][I + i] = bf16((dh * g) * s)                     (d up)
//                and, when d_row_weight is set, d_row_weight[r] = h_scale[r] * sum, where sum
//                is sum_i G[r][i] * h_q[r][i] in fp32 over 16 lanes (lane l adds i = l, l + 16,
//                ... in order, from 0) then the lanes added in order 0..15 (from 0): the top-k
//                weight's gradient <G, h~> with h~ = h_q * h_scale.
// exp is kernel_math.h's exp_f32 on every target (the results are bit-identical).
// The rows both steps read: GMM1's fp32 gate | up rows and their experts.
struct SwigluRows {
  const float* a;  // [rows, 2I]
  std::int64_t a_row_stride, inter;
  const std::int64_t* offsets;  // [E + 1]
  std::int64_t experts;
  const float* smooth;  // [E, I] or null
};
struct SwigluArgs {
  SwigluRows in;
  float* h;  // [rows, I]
  std::int64_t h_row_stride;
};
struct SwigluGradArgs {
  SwigluRows in;
  const float* g;  // G = dY W2^T [rows, I]
  std::int64_t g_row_stride;
  const std::int8_t* h_q;  // [rows, I]
  std::int64_t h_q_row_stride;
  const float* h_scale;     // [rows]
  const float* row_weight;  // [rows] or null
  std::uint16_t* da;        // bf16 [rows, 2I]
  std::int64_t da_row_stride;
  float* d_row_weight;  // [rows] or null
};

struct KernelTable {
  std::uint32_t size;     // sizeof(KernelTable) of the library's build
  std::uint32_t version;  // kKernelTableVersion
  const char* target;     // "reference", "x86_64_v3", ...
  // Rows [row_begin, row_end); returns the rows holding non-finite values.
  std::int64_t (*quantize)(const QuantizeArgs* args, std::int64_t row_begin, std::int64_t row_end);
  void (*dequantize)(const DequantizeArgs* args, std::int64_t row_begin, std::int64_t row_end);
  // Scratch one caller of grouped_gemm needs (each concurrent caller its own).
  std::uint64_t (*grouped_gemm_workspace)(const GroupedGemmArgs* args, const TileGrid* grid);
  void (*grouped_gemm)(const GroupedGemmArgs* args, const TileGrid* grid, std::int64_t tile_begin,
                       std::int64_t tile_end, void* workspace);
  // The preferred tile sizes of this target (callers may pick smaller ones to split work).
  std::int64_t preferred_tile_m, preferred_tile_n;
  std::uint64_t (*bf16_gemm_workspace)(const Bf16GemmArgs* args, const TileGrid* grid);
  // Tiles of kInput: experts x row blocks x column blocks of out; of kWeight: experts x
  // blocks of m x blocks of n.
  void (*bf16_gemm)(const Bf16GemmArgs* args, const TileGrid* grid, std::int64_t tile_begin,
                    std::int64_t tile_end, void* workspace);
  // Version 2.
  void (*row_sum)(const RowSumArgs* args);
  // Version 4. kInput's B in this target's panel layout (a constant B, such as the backward's
  // W^T, packed once instead of on every call): the bytes for args' experts, k and n (0: the
  // target has no panel layout, and the other two entries are null), the columns of one panel,
  // and the packing of args' b (64-byte aligned `panels` of that many bytes).
  std::uint64_t (*bf16_panels_bytes)(const Bf16GemmArgs* args);
  std::int64_t bf16_panel_cols;
  void (*bf16_pack_panels)(const Bf16GemmArgs* args, void* panels);
  // Version 5. Rows [row_begin, row_end) of the formulas above.
  void (*swiglu)(const SwigluArgs* args, std::int64_t row_begin, std::int64_t row_end);
  void (*swiglu_grad)(const SwigluGradArgs* args, std::int64_t row_begin, std::int64_t row_end);
};

// The table's layout as this compilation sees it, for the vendor merge (vendor_note.h): an
// FNV-1a digest over each entry's offset and size in declaration order, then the table's size.
// An entry appended to the table is appended here; the static_assert fails until it is.
#define HP_KERNEL_TABLE_FIELD(f) offsetof(KernelTable, f), sizeof(KernelTable::f)
inline constexpr std::uint64_t kKernelTableFields[] = {
    HP_KERNEL_TABLE_FIELD(size),
    HP_KERNEL_TABLE_FIELD(version),
    HP_KERNEL_TABLE_FIELD(target),
    HP_KERNEL_TABLE_FIELD(quantize),
    HP_KERNEL_TABLE_FIELD(dequantize),
    HP_KERNEL_TABLE_FIELD(grouped_gemm_workspace),
    HP_KERNEL_TABLE_FIELD(grouped_gemm),
    HP_KERNEL_TABLE_FIELD(preferred_tile_m),
    HP_KERNEL_TABLE_FIELD(preferred_tile_n),
    HP_KERNEL_TABLE_FIELD(bf16_gemm_workspace),
    HP_KERNEL_TABLE_FIELD(bf16_gemm),
    HP_KERNEL_TABLE_FIELD(row_sum),
    HP_KERNEL_TABLE_FIELD(bf16_panels_bytes),
    HP_KERNEL_TABLE_FIELD(bf16_panel_cols),
    HP_KERNEL_TABLE_FIELD(bf16_pack_panels),
    HP_KERNEL_TABLE_FIELD(swiglu),
    HP_KERNEL_TABLE_FIELD(swiglu_grad),
    sizeof(KernelTable)};
#undef HP_KERNEL_TABLE_FIELD
// the last entry's offset
inline constexpr std::size_t kKernelTableLast = std::size(kKernelTableFields) - 3;
static_assert(kKernelTableFields[kKernelTableLast] + kKernelTableFields[kKernelTableLast + 1] ==
                  sizeof(KernelTable),
              "an entry was appended to KernelTable but not to kKernelTableFields");

inline constexpr std::uint64_t kernel_table_layout_digest() {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint64_t v : kKernelTableFields) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace hp::kernels

extern "C" {
using HpKernelTableFn = const hp::kernels::KernelTable* (*)();
}

#endif  // HYPER_PARALLEL_KERNELS_KERNEL_TABLE_H_
