// The bf16 GEMM block on bf16 pairs with vdpbf16ps (AVX512-BF16), shared by the targets that
// have it: x86_64_v4 on CPUs with AVX512-BF16 (its own flags do not include it, hence the target
// attribute) and x86_64_amx for chunks of a few pairs. Each fp32 lane gains a[2i] b[2i] +
// a[2i+1] b[2i+1]: products of bf16 values are exact in fp32, so only the order of the sums
// differs from the FMA form (and denormal inputs and results are flushed, as the instruction
// does).
//   c[r][n] (+)= sum_k A(r, k) B(k, n) for r < rows and n < 64, the panels a[r][lda] and
//   b[k_pairs][64] holding pairs (lo = even k, hi = odd k); pairs [k_pairs, lda) of a unread.
// kStream: c is stored with non-temporal stores (c 64-byte aligned, ldc a multiple of 16): for
// final values that are not read again soon, which then skip the read of their lines.
// Out = std::uint16_t (with kStream, accumulate false): c is bf16, the sums of one K chunk
// converted and streamed, a row's 64 columns as two 64-byte lines (c 64-byte aligned, ldc a
// multiple of 32). The conversion is vcvtne2ps2bf16: float_to_bf16's rounding and NaN
// quieting, but a denormal input goes to zero; the sums of vdpbf16ps are never denormal (it
// flushes its results), so it is float_to_bf16's value.
#ifndef HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_
#define HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace hp::kernels {

// kRows rows of the block.
template <int kRows, bool kStream, typename Out>
__attribute__((target("avx512f,avx512bf16"))) inline void bf16_dot_rows(
    const std::uint32_t* a, std::int64_t lda, std::int64_t k_pairs, const std::uint32_t* b, Out* c,
    std::int64_t ldc, bool accumulate) {
  constexpr bool kBf16 = std::is_same_v<Out, std::uint16_t>;
  static_assert(!kBf16 || kStream, "bf16 sums are streamed");
  __m512 acc[kRows][4];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if constexpr (kBf16) {
        acc[i][j] = _mm512_setzero_ps();
      } else {
        acc[i][j] = accumulate ? _mm512_loadu_ps(c + i * ldc + j * 16) : _mm512_setzero_ps();
      }
    }
  }
  for (std::int64_t k = 0; k < k_pairs; ++k) {
    __m512bh bv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) bv[j] = (__m512bh)_mm512_loadu_si512(b + k * 64 + j * 16);
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(std::int32_t(a[i * lda + k]));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    if constexpr (kBf16) {
      for (int j = 0; j < 4; j += 2) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(c + i * ldc + j * 16),
                            (__m512i)_mm512_cvtne2ps_pbh(acc[i][j + 1], acc[i][j]));
      }
    } else {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        if constexpr (kStream) {
          _mm512_stream_ps(c + i * ldc + j * 16, acc[i][j]);
        } else {
          _mm512_storeu_ps(c + i * ldc + j * 16, acc[i][j]);
        }
      }
    }
  }
}

template <bool kStream = false, typename Out = float>
__attribute__((target("avx512f,avx512bf16"))) inline void bf16_dot_block(
    const std::uint32_t* a, std::int64_t lda, std::int64_t k_pairs, std::int64_t rows,
    const std::uint32_t* b, Out* c, std::int64_t ldc, bool accumulate) {
  std::int64_t r = 0;
  for (; r + 6 <= rows; r += 6)
    bf16_dot_rows<6, kStream>(a + r * lda, lda, k_pairs, b, c + r * ldc, ldc, accumulate);
  for (; r < rows; ++r)
    bf16_dot_rows<1, kStream>(a + r * lda, lda, k_pairs, b, c + r * ldc, ldc, accumulate);
}

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_
