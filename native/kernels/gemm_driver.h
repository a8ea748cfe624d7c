// The blocked tile loops shared by the optimized targets. Each target compiles this header
// with its own -march and instantiates it with its micro-kernels (an `Isa` policy, below);
// everything else (panels, K groups, bias correction, epilogues, quantisation) is this code.
//
// Isa policy:
//   using Panel = std::int8_t or std::int16_t;  element type of the activation panel
//   kRowAlign                  rows the int8 micro-kernel computes at a time (panel padding)
//   kTiledPanel                false: panel rows are row-major, element (r, k) at r * k_pad + k;
//                              true (int8, kRowAlign 16): the panel is AMX A tiles, each 16 rows
//                              x 64 K bytes contiguous, element (r, k) at
//                              (r / 16) * 16 * k_pad + (k / 64) * 1024 + (r % 16) * 64 + k % 64
//                              (a tile load with a 64-byte stride: no L1 set conflicts, one
//                              sequential stream per 16 rows)
//   kNb                        packed columns per column block (a multiple of 16, <= 64)
//   int8_block(panel, k_pad, rows, b, b_block_stride, blocks, k_len, acc, acc_stride, next,
//              next_bytes)
//       acc[r][c] = sum_{k < k_len} panel(r, k) * b_u8(k, c) for r < rows (a multiple of
//       kRowAlign), c < 16 * blocks, b in the packed int8 layout (biased, u8); `panel` points
//       at K column k0 of row 0 (panel_ + k0, or panel_ + 16 * k0 when tiled); next: the
//       weights the caller takes next (a prefetch hint, never dereferenced; null: none),
//       next_bytes of them.
//   kBf16Pairs, kBf16Mr, kBf16Nb, kBf16PairAlign (K pairs of the panels padded to a multiple)
//   bf16_block(a_panel, k_count, rows, b_panel, c, ldc, accumulate)
//       c[r][n] (+)= sum_k A(r, k) B(k, n) for r < rows (a multiple of kBf16Mr), n < kBf16Nb;
//       fp32 panels a[r][k], b[k][n]; or, with kBf16Pairs, bf16 pairs a[r][k/2], b[k/2][n];
//       k_count: the chunk's K (or pair) count; the panels hold it rounded up to
//       kBf16PairAlign (a's row stride), zero past k_count.
//   optional: bf16_block_streamed(...) = bf16_block storing c with non-temporal stores (c
//       64-byte aligned, ldc a multiple of 16), and bf16_stream_fence() that orders them; the
//       driver uses it for the last K chunk of an fp32 output written in place.
//   struct Scope (RAII around one GEMM call: e.g. the AMX tile configuration).
//   optional: int8_block_interleaved(..., between) = int8_block calling between(i, n) after
//       the i-th of n passes; the fp32 dequant epilogue of one column block then runs in
//       slices between the tile passes of the next.
//
// Workspace per caller (64-byte aligned pieces): the activation panel, its per-group row sums,
// the int4 unpack buffer, the int32 accumulators (two with int8_block_interleaved), two fp32
// column blocks, and for kDequantSwigluQuant the fp32 rows of h (max_tile_rows x I) that are
// requantized while in L2.
#ifndef HYPER_PARALLEL_KERNELS_GEMM_DRIVER_H_
#define HYPER_PARALLEL_KERNELS_GEMM_DRIVER_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "common/bfloat16.h"
#include "kernels/kernel_math.h"
#include "kernels/kernel_table.h"
#include "kernels/swiglu_driver.h"
#include "kernels/tiles.h"

namespace hp::kernels::driver {

// Carves 64-byte aligned arrays out of a workspace; with a null base it only measures.
class Arena {
 public:
  explicit Arena(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(std::int64_t count) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (std::size_t(count) * sizeof(T) + 63) & ~std::size_t(63);
    return p;
  }
  std::uint64_t used() const { return used_; }

 private:
  char* base_;
  std::uint64_t used_ = 0;
};

inline float load_element(const void* base, ElementType type, std::int64_t i) {
  if (type == ElementType::kBF16) return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

inline void store_row(void* base, ElementType type, std::int64_t offset, const float* v,
                      std::int64_t n) {
  if (type == ElementType::kBF16) {
    std::uint16_t* out = static_cast<std::uint16_t*>(base) + offset;
    for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(v[i]);
  } else {
    std::memcpy(static_cast<float*>(base) + offset, v, std::size_t(n) * sizeof(float));
  }
}

// max |x| over finite floats as an integer max over the sign-cleared bits (exact, and the
// compiler vectorizes it); a NaN or infinity shows as bits >= 0x7F800000.
inline std::uint32_t abs_bits(float x) { return std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu; }
inline constexpr std::uint32_t kNonFiniteBits = 0x7F800000u;

// Quantizes n floats (the QuantizeArgs formula); false when one is not finite.
inline bool quantize_floats(const float* x, std::int64_t n, float static_scale, std::int8_t* q,
                            float* scale) {
  std::uint32_t amax_bits = 0;
  for (std::int64_t c = 0; c < n; ++c) amax_bits = std::max(amax_bits, abs_bits(x[c]));
  if (amax_bits >= kNonFiniteBits) {
    *scale = 0.0f;
    std::memset(q, 0, std::size_t(n));
    return false;
  }
  const float amax = std::bit_cast<float>(amax_bits);
  const float mul = static_scale > 0.0f ? 1.0f / static_scale : quant_multiplier(amax);
  *scale = static_scale > 0.0f ? static_scale : quant_scale(amax);
  for (std::int64_t c = 0; c < n; ++c) q[c] = quantize_value(x[c] * mul);
  return true;
}

template <ElementType kType, bool kSmooth>
bool quantize_row(const QuantizeArgs& a, std::int64_t r) {
  using In = std::conditional_t<kType == ElementType::kBF16, std::uint16_t, float>;
  const In* x = static_cast<const In*>(a.x) + r * a.x_row_stride;
  const float* smooth = a.smooth;  // locals: see cols below
  const auto value = [&](std::int64_t c) {
    float v;
    if constexpr (kType == ElementType::kBF16) {
      v = bf16_to_float(x[c]);
    } else {
      v = x[c];
    }
    if constexpr (kSmooth) v = v * smooth[c];
    return v;
  };
  // cols in a local: the int8 stores below may alias anything in `a` as far as the compiler
  // knows, and a bound it must reload every iteration keeps the loop scalar.
  const std::int64_t cols = a.cols;
  std::uint32_t amax_bits = 0;
  for (std::int64_t c = 0; c < cols; ++c) amax_bits = std::max(amax_bits, abs_bits(value(c)));
  std::int8_t* q = a.q + r * a.q_row_stride;
  if (amax_bits >= kNonFiniteBits) {
    a.scale[r] = 0.0f;
    std::memset(q, 0, std::size_t(cols));
    return false;
  }
  const float amax = std::bit_cast<float>(amax_bits);
  const float mul = a.static_scale > 0.0f ? 1.0f / a.static_scale : quant_multiplier(amax);
  a.scale[r] = a.static_scale > 0.0f ? a.static_scale : quant_scale(amax);
  for (std::int64_t c = 0; c < cols; ++c) q[c] = quantize_value(value(c) * mul);
  return true;
}

inline std::int64_t quantize(const QuantizeArgs* args, std::int64_t begin, std::int64_t end) {
  const QuantizeArgs& a = *args;
  std::int64_t bad = 0;
  for (std::int64_t r = begin; r < end; ++r) {
    bool ok;
    if (a.x_type == ElementType::kBF16) {
      ok = a.smooth ? quantize_row<ElementType::kBF16, true>(a, r)
                    : quantize_row<ElementType::kBF16, false>(a, r);
    } else {
      ok = a.smooth ? quantize_row<ElementType::kFP32, true>(a, r)
                    : quantize_row<ElementType::kFP32, false>(a, r);
    }
    bad += !ok;
  }
  return bad;
}

inline void dequantize(const DequantizeArgs* args, std::int64_t begin, std::int64_t end) {
  const DequantizeArgs& a = *args;
  for (std::int64_t r = begin; r < end; ++r) {
    const std::int8_t* q = a.q + r * a.q_row_stride;
    const float s = a.scale[r];
    if (a.out_type == ElementType::kBF16) {
      std::uint16_t* out = static_cast<std::uint16_t*>(a.out) + r * a.out_row_stride;
      for (std::int64_t c = 0; c < a.cols; ++c) out[c] = float_to_bf16(float(q[c]) * s);
    } else {
      float* out = static_cast<float*>(a.out) + r * a.out_row_stride;
      for (std::int64_t c = 0; c < a.cols; ++c) out[c] = float(q[c]) * s;
    }
  }
}

// Sixteen fp32 lanes (GCC vector extensions: one zmm on x86_64_v4, two ymm on x86_64_v3).
using F32x16 = float __attribute__((vector_size(64)));
using U32x16 = std::uint32_t __attribute__((vector_size(64)));
using U16x16 = std::uint16_t __attribute__((vector_size(32)));
using I32x16 = std::int32_t __attribute__((vector_size(64)));

// Stores 16 floats that are not read again soon: past the caches when p is 64-byte aligned (no
// read for ownership of the output lines; Int8Gemm::run fences them).
inline void store_f32x16_streaming(float* p, const F32x16& v) {
#if defined(__AVX512F__)
  if ((reinterpret_cast<std::uintptr_t>(p) & 63) == 0) {
    _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
    return;
  }
#endif
  std::memcpy(p, &v, sizeof(v));
}

// (Results through a pointer: returning a 64-byte vector by value has an ABI that depends on
// the target's flags.)
inline void load_f32x16(const float* p, F32x16* v) { std::memcpy(v, p, sizeof(*v)); }
inline void load_f32x16(const std::uint16_t* p, F32x16* v) {  // bf16
#if defined(__AVX512F__)
  // One widening load (the generic form below compiles to two half-width ones and a merge).
  // (maskz forms and vector-extension shifts: GCC 12 flags the undefined-source intrinsics.)
  const auto wide = reinterpret_cast<U32x16>(
      _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  *v = reinterpret_cast<F32x16>(wide << 16);
#else
  U16x16 h;
  std::memcpy(&h, p, sizeof(h));
  *v = reinterpret_cast<F32x16>(__builtin_convertvector(h, U32x16) << 16);
#endif
}

#if defined(__AVX512F__)
// 16 floats as bf16 (float_to_bf16, lane by lane).
inline __m256i bf16x16_of(const F32x16& v) {
  const auto bits = reinterpret_cast<U32x16>(v);
  const U32x16 high = bits >> 16;
  const U32x16 rounded = (bits + ((high & 1u) + 0x7FFFu)) >> 16;
  const U32x16 quiet = high | 0x40u;
  const __mmask16 nan =
      _mm512_cmp_ps_mask(reinterpret_cast<__m512>(v), reinterpret_cast<__m512>(v), _CMP_UNORD_Q);
  const __m512i lanes = _mm512_mask_mov_epi32(reinterpret_cast<__m512i>(rounded), nan,
                                              reinterpret_cast<__m512i>(quiet));
  return _mm512_maskz_cvtepi32_epi16(0xFFFF, lanes);
}

// 32 floats (lo, then hi) as bf16, one 64-byte line: past the caches when out is 64-byte
// aligned (the caller fences).
inline void store_bf16x32_streaming(std::uint16_t* out, const F32x16& lo, const F32x16& hi) {
  // (maskz forms: GCC 12 flags the undefined-source intrinsics)
  const __m512i line = _mm512_maskz_inserti64x4(
      0xFF, _mm512_maskz_inserti64x4(0xFF, _mm512_setzero_si512(), bf16x16_of(lo), 0),
      bf16x16_of(hi), 1);
  if ((reinterpret_cast<std::uintptr_t>(out) & 63) == 0) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out), line);
  } else {
    _mm512_storeu_si512(out, line);
  }
}
#endif

// 16 floats to bf16 (float_to_bf16, lane by lane), then stored.
inline void store_bf16x16(std::uint16_t* out, const F32x16& v) {
#if defined(__AVX512F__)
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bf16x16_of(v));
#else
  alignas(64) float lanes[16];
  std::memcpy(lanes, &v, sizeof(lanes));
  for (int i = 0; i < 16; ++i) out[i] = float_to_bf16(lanes[i]);
#endif
}

// n floats (a multiple of 32) as bf16 (float_to_bf16): with AVX-512 in 64-byte lines past the
// caches (out 64-byte aligned; the caller fences), otherwise stored plainly.
inline void stream_bf16_row(std::uint16_t* out, const float* v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 32) {
    F32x16 lo, hi;
    load_f32x16(v + i, &lo);
    load_f32x16(v + i + 16, &hi);
#if defined(__AVX512F__)
    store_bf16x32_streaming(out + i, lo, hi);
#else
    store_bf16x16(out + i, lo);
    store_bf16x16(out + i + 16, hi);
#endif
  }
}

// bytes zeros at out: with AVX-512 its whole 64-byte lines past the caches (the caller fences),
// the bytes before and after them (and everything without AVX-512) stored plainly.
inline void stream_zeros(void* out, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(out);
#if defined(__AVX512F__)
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(p) % 64) % 64);
  std::memset(p, 0, head);
  p += head;
  bytes -= head;
  for (; bytes >= 64; p += 64, bytes -= 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), _mm512_setzero_si512());
#endif
  std::memset(p, 0, bytes);
}

// The row sum 64 columns at a time, every row read in the same pass: the accumulators stay in
// registers, the rows stream side by side (each is often its own page: a 2048-wide bf16 row is
// 4 KiB), and each sum is built in row order, as the formula says. Each block prefetches the
// same columns of the next sum's rows: a gather of rows on pages of their own is bound by how
// many lines one core has in flight, and the hardware prefetcher starts each page cold.
template <ElementType kIn>
void row_sum_typed(const RowSumArgs& a) {
  using In = std::conditional_t<kIn == ElementType::kBF16, std::uint16_t, float>;
  constexpr std::int64_t kBlock = 64;
  const auto* const* rows = reinterpret_cast<const In* const*>(a.rows);
  const float* weights = a.weights;
  const std::int64_t n = a.n, cols = a.cols;
  alignas(64) float sums[kBlock];
  std::int64_t c0 = 0;
  for (; c0 + kBlock <= cols; c0 += kBlock) {
    F32x16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    for (std::int64_t j = 0; j < a.next_n; ++j) {  // the same columns of the next sum's rows
      const auto* p = static_cast<const char*>(a.next[j]) + c0 * std::int64_t(sizeof(In));
      for (std::size_t line = 0; line < sizeof(In) * kBlock; line += 64)
        __builtin_prefetch(p + line);
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const In* x = rows[i] + c0;
      const float w = weights ? weights[i] : 1.0f;
      F32x16 x0, x1, x2, x3;
      load_f32x16(x, &x0);
      load_f32x16(x + 16, &x1);
      load_f32x16(x + 32, &x2);
      load_f32x16(x + 48, &x3);
      s0 = s0 + w * x0;
      s1 = s1 + w * x1;
      s2 = s2 + w * x2;
      s3 = s3 + w * x3;
    }
    if (a.out_type == ElementType::kBF16) {
      std::uint16_t* out = static_cast<std::uint16_t*>(a.out) + c0;
      store_bf16x16(out, s0);
      store_bf16x16(out + 16, s1);
      store_bf16x16(out + 32, s2);
      store_bf16x16(out + 48, s3);
      continue;
    }
    std::memcpy(sums, &s0, 64);
    std::memcpy(sums + 16, &s1, 64);
    std::memcpy(sums + 32, &s2, 64);
    std::memcpy(sums + 48, &s3, 64);
    store_row(a.out, a.out_type, c0, sums, kBlock);
  }
  for (std::int64_t c = c0; c < cols; ++c) {
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      sum = sum + (weights ? weights[i] : 1.0f) * load_element(rows[i], a.row_type, c);
    store_row(a.out, a.out_type, c, &sum, 1);
  }
}

inline void row_sum(const RowSumArgs* args) {
  if (args->row_type == ElementType::kBF16) {
    row_sum_typed<ElementType::kBF16>(*args);
  } else {
    row_sum_typed<ElementType::kFP32>(*args);
  }
}

// ---- grouped int8 GEMM ----------------------------------------------------------------------

// Sum of n int8 values (vectorized: 16-bit partial sums cannot overflow within 256 elements).
inline std::int32_t sum_int8(const std::int8_t* p, std::int64_t n) {
  std::int32_t sum = 0;
  for (std::int64_t i0 = 0; i0 < n; i0 += 256) {
    const std::int64_t len = std::min<std::int64_t>(256, n - i0);
    std::int16_t part = 0;
    for (std::int64_t i = 0; i < len; ++i) part = std::int16_t(part + p[i0 + i]);
    sum += part;
  }
  return sum;
}

template <typename Isa>
class Int8Gemm {
 public:
  using Panel = typename Isa::Panel;
  static constexpr bool kInterleaves = requires {
    &Isa::template int8_block_interleaved<void (*)(std::int64_t, std::int64_t)>;
  };
  static_assert(!Isa::kTiledPanel || (sizeof(Panel) == 1 && Isa::kRowAlign == 16),
                "tiled panels are AMX A tiles");

  Int8Gemm(const GroupedGemmArgs& a, const TileGrid& grid, void* workspace)
      : a_(a), w_(*a.w), grid_(grid), mpad_(round_up(max_tile_rows(grid), Isa::kRowAlign)) {
    Arena arena(workspace);
    panel_ = arena.take<Panel>(mpad_ * w_.k_pad);
    rowsum_ = arena.take<std::int32_t>(w_.groups * mpad_);
    if (w_.type == WeightType::kInt4)
      unpacked_ = arena.take<std::uint8_t>(Isa::kNb / 16 * group_k() / 4 * 64);
    acc_ = arena.take<std::int32_t>(mpad_ * Isa::kNb);
    if (kInterleaves) acc_pending_ = arena.take<std::int32_t>(mpad_ * Isa::kNb);
    cw_[0] = arena.take<float>(mpad_ * Isa::kNb);
    cw_[1] = arena.take<float>(mpad_ * Isa::kNb);
    if (a.epilogue == Epilogue::kDequantSwigluQuant) h_ = arena.take<float>(mpad_ * w_.segment_pad);
    bytes_ = arena.used();
  }

  std::uint64_t workspace_bytes() const { return bytes_; }

  void run(std::int64_t begin, std::int64_t end) {
    [[maybe_unused]] typename Isa::Scope scope;
    gemm_tile_space(a_, grid_).for_each(begin, end, [&](const Tile& t) { run_tile(t); });
#if defined(__AVX512F__)
    _mm_sfence();  // the streaming stores are seen before whatever tells others we are done
#endif
  }

 private:
  // K rows of one scale group in the panel (the whole padded K with one group).
  std::int64_t group_k() const { return w_.groups == 1 ? w_.k_pad : w_.group_size; }
  std::int64_t group_begin(std::int64_t g) const { return g * w_.group_size; }
  std::int64_t group_end(std::int64_t g) const {
    return g + 1 == w_.groups ? w_.k_pad : (g + 1) * w_.group_size;
  }

  // Copies tile t's rows into the panel with their per-group row sums. Consecutive tiles of one
  // row block (column blocks are the inner order) reuse the panel.
  void load_panel(const Tile& t, std::int64_t rows, std::int64_t mpad) {
    if (t.row_begin == panel_row_begin_ && t.row_end == panel_row_end_) return;
    panel_row_begin_ = t.row_begin;
    panel_row_end_ = t.row_end;
    const std::int64_t k = w_.k, k_pad = w_.k_pad;
    for (std::int64_t r = 0; r < mpad; ++r) {
      Panel* dst = panel_ + r * k_pad;
      if (r >= rows) {
        if constexpr (Isa::kTiledPanel) {
          copy_tiled_row(r, nullptr, 0);  // (row r's chunks are not contiguous)
        } else {
          std::memset(dst, 0, std::size_t(k_pad) * sizeof(Panel));
        }
        for (std::int64_t g = 0; g < w_.groups; ++g) rowsum_[g * mpad_ + r] = 0;
        continue;
      }
      const std::int8_t* src = a_.a + (t.row_begin + r) * a_.a_row_stride;
      if constexpr (Isa::kTiledPanel) {
        copy_tiled_row(r, src, k);
      } else {
        for (std::int64_t i = 0; i < k; ++i) dst[i] = Panel(src[i]);
        for (std::int64_t i = k; i < k_pad; ++i) dst[i] = 0;
      }
      for (std::int64_t g = 0; g < w_.groups; ++g) {
        const std::int64_t i0 = std::min(k, group_begin(g)), i1 = std::min(k, group_end(g));
        rowsum_[g * mpad_ + r] = sum_int8(src + i0, i1 - i0);
      }
    }
  }

  // Row r of a tiled panel: len bytes of src, then zeros to k_pad, 64 bytes per A tile.
  void copy_tiled_row(std::int64_t r, const std::int8_t* src, std::int64_t len) {
    const std::int64_t k_pad = w_.k_pad;
    for (std::int64_t i0 = 0; i0 < k_pad; i0 += 64) {
      Panel* chunk = panel_ + (r / 16) * 16 * k_pad + i0 * 16 + (r % 16) * 64;
      const std::int64_t n = std::clamp<std::int64_t>(len - i0, 0, 64);
      if (n == 64) {
        std::memcpy(chunk, src + i0, 64);  // (a constant size: one vector move, not a call)
        continue;
      }
      if (n > 0) std::memcpy(chunk, src + i0, std::size_t(n));
      std::memset(chunk + n, 0, std::size_t(64 - n));
    }
  }

  // int4 blocks [cb, cb + blocks) of K rows [k0, k1) into int8 rows of 64 (still biased by 8).
  const std::uint8_t* unpack(std::int64_t e, std::int64_t cb, std::int64_t blocks, std::int64_t k0,
                             std::int64_t k1) {
    const std::int64_t rows = (k1 - k0) / 4;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* src = w_.block(e, cb + b, k0);
      std::uint8_t* dst = unpacked_ + b * rows * 64;
      for (std::int64_t i = 0; i < rows; ++i) {
        for (int j = 0; j < 32; ++j) {
          dst[i * 64 + j] = src[i * 32 + j] & 15;
          dst[i * 64 + 32 + j] = src[i * 32 + j] >> 4;
        }
      }
    }
    return unpacked_;
  }

  // The packed int8 weights after columns [p0, p0 + nb) of expert e, as much as those columns
  // take: what a GEMM over this panel reads next (a prefetch hint). None for int4 (the kernels
  // read the unpacked copy) or per-group scales (each group's rows are a separate call).
  struct NextWeights {
    const std::uint8_t* data = nullptr;
    std::int64_t bytes = 0;
  };
  NextWeights next_weights(std::int64_t e, std::int64_t p0, std::int64_t nb) const {
    if (w_.type != WeightType::kInt8 || w_.groups != 1 || p0 + nb >= w_.n_pad) return {};
    const std::int64_t blocks = std::min(nb, w_.n_pad - p0 - nb) / 16;
    return {w_.block(e, (p0 + nb) / 16, 0), blocks * (w_.k_pad / 4 * 64)};
  }

  // acc_[r][c] = the int32 dot products of the panel's rows with packed columns [p0, p0 + nb)
  // over the K rows of group g (biased weights: no correction yet).
  void dot_block(std::int64_t e, std::int64_t p0, std::int64_t nb, std::int64_t mpad,
                 std::int64_t g) {
    const std::int64_t blocks = nb / 16;
    const std::int64_t k0 = group_begin(g), k1 = group_end(g);
    const std::uint8_t* b;
    std::int64_t stride;
    if (w_.type == WeightType::kInt4) {
      b = unpack(e, p0 / 16, blocks, k0, k1);
      stride = (k1 - k0) / 4 * 64;
    } else {
      b = w_.block(e, p0 / 16, k0);
      stride = w_.k_pad / 4 * 64;
    }
    const NextWeights next = next_weights(e, p0, nb);
    Isa::int8_block(panel_ + (Isa::kTiledPanel ? 16 * k0 : k0), w_.k_pad, mpad, b, stride,
                    int(blocks), k1 - k0, acc_, Isa::kNb, next.data, next.bytes);
  }

  // cw[r][c] = sum over K groups of float(dot) * w_scale, packed columns [p0, p0 + nb).
  void scaled_block(std::int64_t e, std::int64_t p0, std::int64_t nb, std::int64_t rows,
                    std::int64_t mpad, float* cw) {
    for (std::int64_t g = 0; g < w_.groups; ++g) {
      dot_block(e, p0, nb, mpad, g);
      const float* ws = w_.scales(e, g) + p0;
      const std::int32_t bias = w_.bias;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int32_t correction = bias * rowsum_[g * mpad_ + r];
        const std::int32_t* acc = acc_ + r * Isa::kNb;
        float* out = cw + r * Isa::kNb;
        if (g == 0) {
          for (std::int64_t c = 0; c < nb; ++c) out[c] = float(acc[c] - correction) * ws[c];
        } else {
          for (std::int64_t c = 0; c < nb; ++c)
            out[c] = out[c] + float(acc[c] - correction) * ws[c];
        }
      }
    }
  }

  // The fp32 output of columns [j, j + valid) of tile t from acc_ (one K group) in one pass:
  // the operations and their order are scaled_block's and run_tile's, so the values are the
  // same. Whole 16-column pieces are streamed past the caches (store_f32x16_streaming).
  void store_dequantized(const Tile& t, std::int64_t j, std::int64_t valid,
                         const std::int32_t* dots, std::int64_t r0, std::int64_t r1) {
    const float* ws = w_.scales(t.expert, 0) + j;
    const std::int32_t bias = w_.bias;
    const bool scale_rows = a_.epilogue == Epilogue::kDequantScale;
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t row = t.row_begin + r;
      const std::int32_t correction = bias * rowsum_[r];
      const std::int32_t* acc = dots + r * Isa::kNb;
      const float s = a_.a_scale[row], f = scale_rows ? a_.row_factor[row] : 1.0f;
      float* out = static_cast<float*>(a_.out) + row * a_.out_row_stride + j;
      std::int64_t c = 0;
      for (; c + 16 <= valid; c += 16) {
        I32x16 dot;
        F32x16 w;
        std::memcpy(&dot, acc + c, sizeof(dot));
        load_f32x16(ws + c, &w);
        F32x16 v = __builtin_convertvector(dot - correction, F32x16) * w * s;
        if (scale_rows) v = v * f;
        store_f32x16_streaming(out + c, v);
      }
      for (; c < valid; ++c) {
        const float v = float(acc[c] - correction) * ws[c] * s;
        out[c] = scale_rows ? v * f : v;
      }
    }
  }

  // Columns [j, j + valid) of tile t, fp32 out of one K group: the dot products, then
  // store_dequantized. With int8_block_interleaved (int8 weights), the previous block's
  // store_dequantized runs in slices during this block's tile passes, and a tile's last block
  // is stored at once.
  void dequantized_block(const Tile& t, std::int64_t j, std::int64_t nb, std::int64_t valid,
                         std::int64_t mpad) {
    const std::int64_t rows = t.row_end - t.row_begin;
    if constexpr (kInterleaves) {
      if (w_.type == WeightType::kInt8) {
        const std::int64_t prev_j = j - Isa::kNb;
        const bool pending = j > t.col_begin;
        const auto between = [&](std::int64_t i, std::int64_t n) {
          if (pending)
            store_dequantized(t, prev_j, Isa::kNb, acc_pending_, rows * i / n, rows * (i + 1) / n);
        };
        const NextWeights next = next_weights(t.expert, j, nb);
        Isa::int8_block_interleaved(panel_, w_.k_pad, mpad, w_.block(t.expert, j / 16, 0),
                                    w_.k_pad / 4 * 64, int(nb / 16), w_.k_pad, acc_, Isa::kNb,
                                    next.data, next.bytes, between);
        std::swap(acc_, acc_pending_);
        if (j + Isa::kNb >= t.col_end) store_dequantized(t, j, valid, acc_pending_, 0, rows);
        return;
      }
    }
    dot_block(t.expert, j, nb, mpad, 0);
    store_dequantized(t, j, valid, acc_, 0, rows);
  }

  void run_tile(const Tile& t) {
    const std::int64_t rows = t.row_end - t.row_begin;
    const std::int64_t mpad = round_up(rows, Isa::kRowAlign);
    load_panel(t, rows, mpad);
    const float* a_scale = a_.a_scale + t.row_begin;
    if (a_.epilogue == Epilogue::kDequantSwigluQuant) {
      const std::int64_t inter = w_.segment_n, seg = w_.segment_pad;
      for (std::int64_t j = 0; j < seg; j += Isa::kNb) {
        const std::int64_t nb = std::min<std::int64_t>(Isa::kNb, seg - j);
        scaled_block(t.expert, j, nb, rows, mpad, cw_[0]);
        scaled_block(t.expert, seg + j, nb, rows, mpad, cw_[1]);
        const std::int64_t valid = std::min(nb, inter - j);
        const float* smooth = a_.smooth ? a_.smooth + t.expert * inter + j : nullptr;
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* gate = cw_[0] + r * Isa::kNb;
          const float* up = cw_[1] + r * Isa::kNb;
          float* h = h_ + r * seg + j;
          const float s = a_scale[r];
          if (a_.preact) {  // read by the backward, not here: streamed past the caches
            float* pre = a_.preact + (t.row_begin + r) * a_.preact_row_stride + j;
            std::int64_t c = 0;
            for (; c + 16 <= valid; c += 16) {
              F32x16 g, u;
              load_f32x16(gate + c, &g);
              load_f32x16(up + c, &u);
              store_f32x16_streaming(pre + c, g * s);
              store_f32x16_streaming(pre + inter + c, u * s);
            }
            for (; c < valid; ++c) {
              pre[c] = gate[c] * s;
              pre[inter + c] = up[c] * s;
            }
          }
          for (std::int64_t c = 0; c < valid; ++c) h[c] = silu(gate[c] * s) * (up[c] * s);
          if (smooth) {
            for (std::int64_t c = 0; c < valid; ++c) h[c] = h[c] * smooth[c];
          }
        }
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t row = t.row_begin + r;
        quantize_floats(h_ + r * seg, inter, 0.0f,
                        static_cast<std::int8_t*>(a_.out) + row * a_.out_row_stride,
                        a_.out_scale + row);
      }
      return;
    }
    const std::int64_t col_end_pad = round_up(t.col_end, 16);
    for (std::int64_t j = t.col_begin; j < t.col_end; j += Isa::kNb) {
      const std::int64_t nb = std::min<std::int64_t>(Isa::kNb, col_end_pad - j);
      const std::int64_t valid = std::min(nb, t.col_end - j);
      if (w_.groups == 1 && a_.out_type == ElementType::kFP32) {
        dequantized_block(t, j, nb, valid, mpad);
        continue;
      }
      scaled_block(t.expert, j, nb, rows, mpad, cw_[0]);
      for (std::int64_t r = 0; r < rows; ++r) {
        float* v = cw_[0] + r * Isa::kNb;
        const float s = a_scale[r];
        for (std::int64_t c = 0; c < valid; ++c) v[c] = v[c] * s;
        if (a_.epilogue == Epilogue::kDequantScale) {
          const float f = a_.row_factor[t.row_begin + r];
          for (std::int64_t c = 0; c < valid; ++c) v[c] = v[c] * f;
        }
        store_row(a_.out, a_.out_type, (t.row_begin + r) * a_.out_row_stride + j, v, valid);
      }
    }
  }

  const GroupedGemmArgs& a_;
  const PackedWeightsHeader& w_;
  TileGrid grid_;
  std::int64_t mpad_;
  std::int64_t panel_row_begin_ = -1, panel_row_end_ = -1;  // the rows the panel holds
  Panel* panel_ = nullptr;
  std::int32_t* rowsum_ = nullptr;
  std::uint8_t* unpacked_ = nullptr;
  std::int32_t* acc_ = nullptr;
  std::int32_t* acc_pending_ = nullptr;  // the block whose epilogue is interleaved with the next
  float* cw_[2] = {nullptr, nullptr};
  float* h_ = nullptr;
  std::uint64_t bytes_ = 0;
};

template <typename Isa>
std::uint64_t grouped_gemm_workspace(const GroupedGemmArgs* a, const TileGrid* grid) {
  return Int8Gemm<Isa>(*a, *grid, nullptr).workspace_bytes();
}

template <typename Isa>
void grouped_gemm(const GroupedGemmArgs* a, const TileGrid* grid, std::int64_t begin,
                  std::int64_t end, void* workspace) {
  Int8Gemm<Isa>(*a, *grid, workspace).run(begin, end);
}

// ---- bf16 GEMM (backward) -------------------------------------------------------------------

inline constexpr std::int64_t kBf16Kc = 256;  // K rows per packed chunk
inline constexpr std::int64_t kBf16InPlaceSpan = std::int64_t(2) << 20;
// kWeight: the most workspace a worker gives to one group's B in panels (bf16 pairs: B's own
// size; fp32 panels: twice) and a tile's A panels of every K chunk; a larger group's B is
// packed per tile.
inline constexpr std::int64_t kBf16WeightPanelsMax = std::int64_t(8) << 20;

template <typename Isa>
class Bf16Gemm {
 public:
  using Elem = std::conditional_t<Isa::kBf16Pairs, std::uint32_t, float>;
  static constexpr std::int64_t kPairs = Isa::kBf16Pairs ? 2 : 1;
  static constexpr bool kStreams = requires { &Isa::bf16_block_streamed; };
  static constexpr bool kStreamsBf16 = requires { &Isa::bf16_block_streamed_bf16; };
  static_assert(kBf16Kc / kPairs % Isa::kBf16PairAlign == 0, "padded K chunks fit the panels");

  Bf16Gemm(const Bf16GemmArgs& a, const TileGrid& grid, void* workspace)
      : a_(a),
        grid_(grid),
        mpad_(round_up(max_tile_rows(grid), Isa::kBf16Mr)),
        npad_(round_up(grid.tile_n, Isa::kBf16Nb)) {
    Arena arena(workspace);
    a_panel_ = arena.take<Elem>(mpad_ * kBf16Kc / kPairs);
    b_panel_ = arena.take<Elem>(kBf16Kc / kPairs * Isa::kBf16Nb);
    c_ = arena.take<float>(mpad_ * npad_);
    if (a_.kind == Bf16GemmKind::kWeight) {
      std::int64_t group_rows = 0;
      for (std::int64_t e = 0; e < a_.experts; ++e)
        group_rows = std::max(group_rows, a_.offsets[e + 1] - a_.offsets[e]);
      const std::int64_t chunks = ceil_div(group_rows, kBf16Kc);
      // One expert's panels (those of expert 0 start at 0) of `chunks` K chunks.
      const std::int64_t count = chunks * panel_offset(a_, 0, 1, 0);
      const std::int64_t a_count = mpad_ * chunks * kChunkPairs;
      if (count > 0 && (count + a_count) * std::int64_t(sizeof(Elem)) <= kBf16WeightPanelsMax) {
        weight_b_panels_ = arena.take<Elem>(count);
        weight_a_panels_ = arena.take<Elem>(a_count);
      }
    }
    bytes_ = arena.used();
  }

  std::uint64_t workspace_bytes() const { return bytes_; }

  void run(std::int64_t begin, std::int64_t end) {
    [[maybe_unused]] typename Isa::Scope scope;
    bf16_tile_space(a_, grid_).for_each(begin, end, [&](const Tile& t) { run_tile(t); });
    // The output's non-temporal stores are visible to whoever the caller hands it to next.
    if constexpr (kStreams || kStreamsBf16) Isa::bf16_stream_fence();
  }

  // kInput's B packed once (bf16_pack_panels): for each expert, K chunk of kBf16Kc rows and
  // block of kBf16Nb columns, the panel run_tile would pack, kChunkPairs pairs long (the pairs
  // past the chunk's zero). Only targets on bf16 pairs have it (fp32 panels would double B).
  static constexpr std::int64_t kChunkPairs = kBf16Kc / kPairs;
  static std::int64_t panel_offset(const Bf16GemmArgs& a, std::int64_t e, std::int64_t chunk,
                                   std::int64_t block) {
    const std::int64_t chunks = ceil_div(a.k, kBf16Kc), blocks = ceil_div(a.n, Isa::kBf16Nb);
    return ((e * chunks + chunk) * blocks + block) * kChunkPairs * Isa::kBf16Nb;
  }
  static std::uint64_t panels_bytes(const Bf16GemmArgs& a) {
    return Isa::kBf16Pairs ? std::uint64_t(panel_offset(a, a.experts, 0, 0)) * sizeof(Elem) : 0;
  }
  void pack_panels(Elem* panels) {
    for (std::int64_t e = 0; e < a_.experts; ++e) {
      const Tile t{.expert = e, .row_begin = 0, .row_end = 0, .col_begin = 0, .col_end = a_.n};
      pack_expert_panels(t, a_.k, panels + panel_offset(a_, e, 0, 0));
    }
  }

 private:
  // A(m, k) and B(k, n) of tile t's expert, as bf16 bits.
  const std::uint16_t& a_at(const Tile& t, std::int64_t m, std::int64_t k) const {
    if (a_.kind == Bf16GemmKind::kInput) return a_.a[(t.row_begin + m) * a_.a_row_stride + k];
    return a_.a[(a_.offsets[t.expert] + k) * a_.a_row_stride + t.row_begin + m];
  }
  const std::uint16_t& b_at(const Tile& t, std::int64_t k, std::int64_t n) const {
    if (a_.kind == Bf16GemmKind::kInput) {
      return a_.b[t.expert * a_.b_expert_stride + k * a_.b_stride_k + n * a_.b_stride_n];
    }
    return a_.b[(a_.offsets[t.expert] + k) * a_.b_stride_k + n * a_.b_stride_n];
  }
  // The panels of tile t's expert's B over K rows [0, k_total) at `panels` (expert 0's place
  // in bf16_pack_panels' layout), the pairs past each chunk's zero: kInput's constant W^T, and
  // kWeight's B of one group (weight_b_panels_).
  void pack_expert_panels(const Tile& t, std::int64_t k_total, Elem* panels) {
    for (std::int64_t k0 = 0; k0 < k_total; k0 += kBf16Kc) {
      const std::int64_t kl = std::min(kBf16Kc, k_total - k0), kp = ceil_div(kl, kPairs);
      for (std::int64_t col = 0; col < a_.n; col += Isa::kBf16Nb) {
        Elem* panel = panels + panel_offset(a_, 0, k0 / kBf16Kc, col / Isa::kBf16Nb);
        pack_b(t, col, std::min<std::int64_t>(Isa::kBf16Nb, a_.n - col), k0, kl, kp, panel);
        std::memset(panel + kp * Isa::kBf16Nb, 0,
                    std::size_t((kChunkPairs - kp) * Isa::kBf16Nb) * sizeof(Elem));
      }
    }
  }

  static Elem pack(std::uint16_t lo, std::uint16_t hi) {
    if constexpr (Isa::kBf16Pairs) {
      return std::uint32_t(lo) | (std::uint32_t(hi) << 16);
    } else {
      (void)hi;
      return bf16_to_float(lo);
    }
  }

  // The A panel [mpad][lda] of rows [0, rows) (zero rows below) and K rows [k0, k0 + kl), its
  // pairs [kp, lda) zero (lda: kp rounded up to kBf16PairAlign; fp32 panels have lda = kp). fp32
  // panels of contiguous A rows (kInput) or of A^T with contiguous columns (kWeight) are plain
  // conversions (vectorised); the rest goes element by element.
  void pack_a(const Tile& t, std::int64_t rows, std::int64_t mpad, std::int64_t k0, std::int64_t kl,
              std::int64_t kp, std::int64_t lda, Elem* a_panel) {
    std::memset(a_panel + rows * lda, 0, std::size_t((mpad - rows) * lda) * sizeof(Elem));
    if constexpr (!Isa::kBf16Pairs) {
      if (a_.kind == Bf16GemmKind::kInput) {
        for (std::int64_t m = 0; m < rows; ++m)
          convert(&a_.a[(t.row_begin + m) * a_.a_row_stride + k0], kl, a_panel + m * lda);
      } else {
        for (std::int64_t i = 0; i < kl; ++i) {
          const std::uint16_t* src =
              &a_.a[(a_.offsets[t.expert] + k0 + i) * a_.a_row_stride + t.row_begin];
          for (std::int64_t m = 0; m < rows; ++m) a_panel[m * lda + i] = bf16_to_float(src[m]);
        }
      }
      return;
    } else {
      // Pairs (k, k + 1) of a row: k0 is even, so a contiguous A row is already its pairs.
      if (a_.kind == Bf16GemmKind::kInput) {
        for (std::int64_t m = 0; m < rows; ++m) {
          Elem* dst = a_panel + m * lda;
          const std::uint16_t* src = &a_.a[(t.row_begin + m) * a_.a_row_stride + k0];
          // A loop the compiler vectorises (a memcpy call of this size is a slow rep movs).
          for (std::int64_t i = 0; i < kl / 2; ++i) std::memcpy(&dst[i], src + 2 * i, sizeof(Elem));
          if (kl % 2 != 0) dst[kp - 1] = pack(src[kl - 1], 0);
          std::fill(dst + kp, dst + lda, Elem(0));
        }
      } else {
        for (std::int64_t i = 0; i < kp; ++i) {
          const std::int64_t k = k0 + 2 * i;
          const std::uint16_t* lo =
              &a_.a[(a_.offsets[t.expert] + k) * a_.a_row_stride + t.row_begin];
          const std::uint16_t* hi = k + 1 < k0 + kl ? lo + a_.a_row_stride : nullptr;
          for (std::int64_t m = 0; m < rows; ++m)
            a_panel[m * lda + i] = pack(lo[m], hi ? hi[m] : 0);
        }
        for (std::int64_t m = 0; m < rows; ++m)
          std::fill(a_panel + m * lda + kp, a_panel + (m + 1) * lda, Elem(0));
      }
    }
  }

  // The B panel [kp][kBf16Nb] of columns [col, col + nb) (zero columns after) and K rows
  // [k0, k0 + kl); fp32 panels of B with contiguous rows or contiguous columns (W^T) are plain
  // conversions.
  void pack_b(const Tile& t, std::int64_t col, std::int64_t nb, std::int64_t k0, std::int64_t kl,
              std::int64_t kp, Elem* b_panel) {
    constexpr std::int64_t kNb = Isa::kBf16Nb;
    if (nb < kNb) {
      for (std::int64_t i = 0; i < kp; ++i)
        std::memset(b_panel + i * kNb + nb, 0, std::size_t(kNb - nb) * sizeof(Elem));
    }
    if constexpr (!Isa::kBf16Pairs) {
      if (a_.b_stride_n == 1) {
        for (std::int64_t i = 0; i < kl; ++i) convert(&b_at(t, k0 + i, col), nb, b_panel + i * kNb);
        return;
      }
      if (a_.kind == Bf16GemmKind::kInput && a_.b_stride_k == 1) {
        for (std::int64_t n = 0; n < nb; ++n) {
          const std::uint16_t* src = &b_at(t, k0, col + n);
          for (std::int64_t i = 0; i < kl; ++i) b_panel[i * kNb + n] = bf16_to_float(src[i]);
        }
        return;
      }
    } else {
      if (a_.b_stride_n == 1) {  // two B rows interleaved
        for (std::int64_t i = 0; i < kp; ++i) {
          const std::int64_t k = k0 + 2 * i;
          const std::uint16_t* lo = &b_at(t, k, col);
          Elem* dst = b_panel + i * kNb;
          if (k + 1 < k0 + kl) {
            const std::uint16_t* hi = &b_at(t, k + 1, col);
            for (std::int64_t n = 0; n < nb; ++n) dst[n] = pack(lo[n], hi[n]);
          } else {
            for (std::int64_t n = 0; n < nb; ++n) dst[n] = pack(lo[n], 0);
          }
        }
        return;
      }
      if (a_.kind == Bf16GemmKind::kInput && a_.b_stride_k == 1) {  // a B column is its pairs
        for (std::int64_t n = 0; n < nb; ++n) {
          const std::uint16_t* src = &b_at(t, k0, col + n);
          for (std::int64_t i = 0; i < kl / 2; ++i) {
            Elem pair;
            std::memcpy(&pair, src + 2 * i, sizeof(pair));
            b_panel[i * kNb + n] = pair;
          }
          if (kl % 2 != 0) b_panel[(kp - 1) * kNb + n] = pack(src[kl - 1], 0);
        }
        return;
      }
    }
    for (std::int64_t i = 0; i < kp; ++i) {
      const std::int64_t k = k0 + i * kPairs;
      Elem* dst = b_panel + i * kNb;
      for (std::int64_t n = 0; n < nb; ++n) {
        dst[n] =
            pack(b_at(t, k, col + n), kPairs == 2 && k + 1 < k0 + kl ? b_at(t, k + 1, col + n) : 0);
      }
    }
  }

  static void convert(const std::uint16_t* src, std::int64_t count, float* dst) {
    for (std::int64_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
  }

  // Isa::bf16_block, or its streamed form when asked and the target has one.
  static void block(const Elem* a, std::int64_t kp, std::int64_t rows, const Elem* b, float* c,
                    std::int64_t ldc, bool accumulate, bool stream) {
    if constexpr (kStreams) {
      if (stream) return Isa::bf16_block_streamed(a, kp, rows, b, c, ldc, accumulate);
    }
    Isa::bf16_block(a, kp, rows, b, c, ldc, accumulate);
  }

  void run_tile(const Tile& t) {
    const std::int64_t rows = t.row_end - t.row_begin, cols = t.col_end - t.col_begin;
    const std::int64_t mpad = round_up(rows, Isa::kBf16Mr);
    const std::int64_t k_total =
        a_.kind == Bf16GemmKind::kInput ? a_.k : a_.offsets[t.expert + 1] - a_.offsets[t.expert];
    const std::int64_t first_out_row =
        a_.kind == Bf16GemmKind::kInput ? t.row_begin : t.expert * a_.m + t.row_begin;
    // The whole groups of kBf16Mr rows of an fp32 output tile of whole column blocks, spanning
    // at most kBf16InPlaceSpan bytes of the output, are accumulated in place; the last, partial
    // group (and any other tile) goes through c_ and is stored after. (A taller span touches a
    // page per row in every K chunk, which costs more than the copy through c_:
    // bench/kernels/RESULTS.md.)
    const std::int64_t whole = rows - rows % Isa::kBf16Mr;
    const bool in_place =
        a_.out_type == ElementType::kFP32 && whole > 0 && cols % Isa::kBf16Nb == 0 &&
        whole * a_.out_row_stride * std::int64_t(sizeof(float)) <= kBf16InPlaceSpan;
    float* out_rows =
        in_place ? static_cast<float*>(a_.out) + first_out_row * a_.out_row_stride + t.col_begin
                 : nullptr;
    const bool stream_aligned = in_place && a_.kind == Bf16GemmKind::kWeight &&
                                reinterpret_cast<std::uintptr_t>(out_rows) % 64 == 0 &&
                                a_.out_row_stride % 16 == 0;
    // A bf16 weight gradient whose rows start on 64-byte lines, where the target streams bf16:
    // its sums are its values, converted and written past the caches. Of one K chunk, its whole
    // groups of rows go straight from the tiles (bf16_direct; through c_ they were written,
    // read back and converted); every other row from c_ once complete (at the end).
    std::uint16_t* const bf16_rows =
        static_cast<std::uint16_t*>(a_.out) + first_out_row * a_.out_row_stride + t.col_begin;
    const bool bf16_streamed = kStreamsBf16 && a_.out_type == ElementType::kBF16 &&
                               a_.kind == Bf16GemmKind::kWeight && k_total > 0 && cols % 32 == 0 &&
                               a_.out_row_stride % 32 == 0 &&
                               reinterpret_cast<std::uintptr_t>(bf16_rows) % 64 == 0;
    const bool bf16_direct =
        bf16_streamed && k_total <= kBf16Kc && whole > 0 && cols % Isa::kBf16Nb == 0;
    // rows [0, direct_rows) in place (fp32) or streamed (bf16_direct)
    const std::int64_t direct_rows = in_place || bf16_direct ? whole : 0;
    // The chunk's A panel a (kp pairs, rows of kp rounded up to kBf16PairAlign) times B panel b
    // into column block j of the rows, in place for the first direct_rows, through c_ for the
    // rest.
    auto multiply = [&](const Elem* a, std::int64_t kp, const Elem* b, std::int64_t j,
                        bool accumulate, bool last_chunk) {
      // The last chunk's sums of a weight gradient are its values: written past the cache (the
      // gradient is far larger than it) when the rows are aligned for it.
      if constexpr (kStreamsBf16) {
        if (bf16_direct) {  // one chunk: never accumulating
          Isa::bf16_block_streamed_bf16(a, kp, direct_rows, b, bf16_rows + j, a_.out_row_stride);
        }
      }
      if (direct_rows > 0 && !bf16_direct)
        block(a, kp, direct_rows, b, out_rows + j, a_.out_row_stride, accumulate,
              stream_aligned && last_chunk);
      if (direct_rows < mpad)
        Isa::bf16_block(a + direct_rows * round_up(kp, Isa::kBf16PairAlign), kp, mpad - direct_rows,
                        b, c_ + j, npad_, accumulate);
    };
    if (k_total == 0) {
      // An expert without rows: its tile of the output is zeros, stored once, past the caches
      // where the target streams (at a few rows per expert, most of a weight gradient's bytes).
      const std::size_t elem = a_.out_type == ElementType::kBF16 ? 2 : sizeof(float);
      auto* first = static_cast<unsigned char*>(a_.out) +
                    std::size_t(first_out_row * a_.out_row_stride + t.col_begin) * elem;
      for (std::int64_t r = 0; r < rows; ++r) {
        unsigned char* row = first + std::size_t(r * a_.out_row_stride) * elem;
        if constexpr (kStreams || kStreamsBf16) {
          stream_zeros(row, std::size_t(cols) * elem);
        } else {
          std::memset(row, 0, std::size_t(cols) * elem);
        }
      }
      return;
    }
    if (weight_b_panels_ != nullptr && t.col_begin % Isa::kBf16Nb == 0) {
      // kWeight with B packed here once per group (every row tile of a group reads all of its
      // B: packing it per tile packed it once per row block). Every chunk's A panel first, then
      // each block of columns through all the chunks, so that its output rows stay in L1 from
      // the first chunk to the last instead of being read and written again per chunk.
      if (weight_panels_expert_ != t.expert) {
        pack_expert_panels(t, k_total, weight_b_panels_);
        weight_panels_expert_ = t.expert;
      }
      const std::int64_t chunks = ceil_div(k_total, kBf16Kc);
      auto chunk_rows = [&](std::int64_t c) { return std::min(kBf16Kc, k_total - c * kBf16Kc); };
      auto chunk_pairs = [&](std::int64_t c) { return ceil_div(chunk_rows(c), kPairs); };
      for (std::int64_t c = 0; c < chunks; ++c) {
        pack_a(t, rows, mpad, c * kBf16Kc, chunk_rows(c), chunk_pairs(c),
               round_up(chunk_pairs(c), Isa::kBf16PairAlign),
               weight_a_panels_ + c * mpad_ * kChunkPairs);
      }
      for (std::int64_t j = 0; j < cols; j += Isa::kBf16Nb) {
        for (std::int64_t c = 0; c < chunks; ++c) {
          multiply(weight_a_panels_ + c * mpad_ * kChunkPairs, chunk_pairs(c),
                   weight_b_panels_ + panel_offset(a_, 0, c, (t.col_begin + j) / Isa::kBf16Nb), j,
                   c > 0, c == chunks - 1);
        }
      }
    } else {
      // kInput's B packed once by the caller, or B packed here per chunk and column block.
      const Elem* panels =
          a_.kind == Bf16GemmKind::kInput ? static_cast<const Elem*>(a_.b_panels) : nullptr;
      for (std::int64_t k0 = 0; k0 < k_total; k0 += kBf16Kc) {
        const std::int64_t kl = std::min(kBf16Kc, k_total - k0), kp = ceil_div(kl, kPairs);
        const std::int64_t kpp = round_up(kp, Isa::kBf16PairAlign);
        pack_a(t, rows, mpad, k0, kl, kp, kpp, a_panel_);
        // B's padding pairs [kp, kpp): pack_b writes only pairs below kp.
        if (panels == nullptr)
          std::memset(b_panel_ + kp * Isa::kBf16Nb, 0,
                      std::size_t((kpp - kp) * Isa::kBf16Nb) * sizeof(Elem));
        for (std::int64_t j = 0; j < cols; j += Isa::kBf16Nb) {
          const Elem* b = b_panel_;
          if (panels != nullptr) {  // t.col_begin is a multiple of kBf16Nb (the plan's tile_n)
            b = panels + panel_offset(a_, t.expert, k0 / kBf16Kc, (t.col_begin + j) / Isa::kBf16Nb);
          } else {
            pack_b(t, t.col_begin + j, std::min<std::int64_t>(Isa::kBf16Nb, cols - j), k0, kl, kp,
                   b_panel_);
          }
          multiply(a_panel_, kp, b, j, k0 > 0, k0 + kBf16Kc >= k_total);
        }
      }
    }
    for (std::int64_t r = direct_rows; r < rows; ++r) {
      const float* sums = c_ + (r - direct_rows) * npad_;
      if (bf16_streamed) {
        stream_bf16_row(bf16_rows + r * a_.out_row_stride, sums, cols);
      } else {
        store_row(a_.out, a_.out_type, (first_out_row + r) * a_.out_row_stride + t.col_begin, sums,
                  cols);
      }
    }
  }

  const Bf16GemmArgs& a_;
  TileGrid grid_;
  std::int64_t mpad_, npad_;
  Elem* a_panel_ = nullptr;
  Elem* b_panel_ = nullptr;
  float* c_ = nullptr;
  // kWeight (null: B packed per tile): one group's B in panels, and every K chunk's A panel of
  // a tile, mpad_ x kChunkPairs each.
  Elem* weight_b_panels_ = nullptr;
  Elem* weight_a_panels_ = nullptr;
  std::int64_t weight_panels_expert_ = -1;  // whose B weight_b_panels_ holds
  std::uint64_t bytes_ = 0;
};

template <typename Isa>
std::uint64_t bf16_gemm_workspace(const Bf16GemmArgs* a, const TileGrid* grid) {
  return Bf16Gemm<Isa>(*a, *grid, nullptr).workspace_bytes();
}

template <typename Isa>
void bf16_gemm(const Bf16GemmArgs* a, const TileGrid* grid, std::int64_t begin, std::int64_t end,
               void* workspace) {
  Bf16Gemm<Isa>(*a, *grid, workspace).run(begin, end);
}

template <typename Isa>
std::uint64_t bf16_panels_bytes(const Bf16GemmArgs* a) {
  return Bf16Gemm<Isa>::panels_bytes(*a);
}

template <typename Isa>
void bf16_pack_panels(const Bf16GemmArgs* a, void* panels) {
  const TileGrid grid{1, Isa::kBf16Nb};  // packing needs no workspace
  Bf16Gemm<Isa>(*a, grid, nullptr).pack_panels(static_cast<typename Bf16Gemm<Isa>::Elem*>(panels));
}

// The table entries of a target's bf16 GEMM on Isa (make_table's; a target with two bf16
// GEMMs picks one set at run time).
template <typename Isa>
constexpr void set_bf16_entries(KernelTable* t) {
  t->bf16_gemm_workspace = bf16_gemm_workspace<Isa>;
  t->bf16_gemm = bf16_gemm<Isa>;
  t->bf16_panels_bytes = Isa::kBf16Pairs ? bf16_panels_bytes<Isa> : nullptr;
  t->bf16_panel_cols = Isa::kBf16Pairs ? Isa::kBf16Nb : 0;
  t->bf16_pack_panels = Isa::kBf16Pairs ? bf16_pack_panels<Isa> : nullptr;
}

// The table of a target built from this driver.
template <typename Isa>
constexpr KernelTable make_table(const char* target) {
  KernelTable t{
      .size = sizeof(KernelTable),
      .version = kKernelTableVersion,
      .target = target,
      .quantize = quantize,
      .dequantize = dequantize,
      .grouped_gemm_workspace = grouped_gemm_workspace<Isa>,
      .grouped_gemm = grouped_gemm<Isa>,
      .preferred_tile_m = Isa::kPreferredTileM,
      .preferred_tile_n = Isa::kPreferredTileN,
      .row_sum = row_sum,
      .swiglu = swiglu,
      .swiglu_grad = swiglu_grad,
  };
  set_bf16_entries<Isa>(&t);
  return t;
}

}  // namespace hp::kernels::driver

#endif  // HYPER_PARALLEL_KERNELS_GEMM_DRIVER_H_
