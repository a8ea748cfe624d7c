// The bf16 GEMM block on bf16 pairs with vdpbf16ps (AVX512-BF16), shared by the targets that
// have it: x86_64_amx always, x86_64_v4 on CPUs with AVX512-BF16 (its own flags do not include
// it, hence the target attribute). Each fp32 lane gains a[2i] b[2i] + a[2i+1] b[2i+1]: products
// of bf16 values are exact in fp32, so only the order of the sums differs from the FMA form
// (and denormal inputs and results are flushed, as the instruction does).
//   c[r][n] (+)= sum_k A(r, k) B(k, n) for r < rows (a multiple of 6) and n < 64, the panels
//   a[r][k_pairs] and b[k_pairs][64] holding pairs (lo = even k, hi = odd k).
// kStream: c is stored with non-temporal stores (c 64-byte aligned, ldc a multiple of 16): for
// final values that are not read again soon, which then skip the read of their lines.
#ifndef HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_
#define HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_

#include <immintrin.h>

#include <cstdint>

namespace hp::kernels {

template <bool kStream = false>
__attribute__((target("avx512f,avx512bf16"))) inline void bf16_dot_block(
    const std::uint32_t* a, std::int64_t k_pairs, std::int64_t rows, const std::uint32_t* b,
    float* c, std::int64_t ldc, bool accumulate) {
  for (std::int64_t r = 0; r < rows; r += 6) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        acc[i][j] = accumulate ? _mm512_loadu_ps(c + (r + i) * ldc + j * 16) : _mm512_setzero_ps();
      }
    }
    for (std::int64_t k = 0; k < k_pairs; ++k) {
      __m512bh bv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) bv[j] = (__m512bh)_mm512_loadu_si512(b + k * 64 + j * 16);
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(std::int32_t(a[(r + i) * k_pairs + k]));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
      }
    }
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        if constexpr (kStream) {
          _mm512_stream_ps(c + (r + i) * ldc + j * 16, acc[i][j]);
        } else {
          _mm512_storeu_ps(c + (r + i) * ldc + j * 16, acc[i][j]);
        }
      }
    }
  }
}

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_BF16_DOT_BLOCK_H_
