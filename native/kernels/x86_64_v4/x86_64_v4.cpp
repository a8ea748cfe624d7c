// The x86_64_v4 target: AVX-512BW + VNNI (vpdpbusd) int8 micro-kernel; for the bf16 GEMMs,
// vdpbf16ps on CPUs with AVX512_BF16 (chosen when the table is asked for) and AVX-512F fp32
// FMAs on the others. Compiled with -march=x86-64-v4 -mavx512vnni; only the vdpbf16ps block
// is compiled for AVX512_BF16 as well.
#include <immintrin.h>

#include "kernels/bf16_dot_block.h"
#include "kernels/gemm_driver.h"
#include "kernels/vendor_note.h"

namespace hp::kernels {
namespace {

struct IsaV4 {
  using Panel = std::int8_t;
  static constexpr std::int64_t kRowAlign = 1;  // tails of 1-5 rows have their own kernels
  static constexpr bool kTiledPanel = false;
  static constexpr std::int64_t kNb = 64;
  static constexpr std::int64_t kPreferredTileM = 60;
  static constexpr std::int64_t kPreferredTileN = 256;
  static constexpr bool kBf16Pairs = false;
  static constexpr std::int64_t kBf16Mr = 6;
  static constexpr std::int64_t kBf16Nb = 64;
  static constexpr std::int64_t kBf16PairAlign = 1;
  struct Scope {};

  // MR (<= 6) rows x 16*NB columns, accumulators in MR*NB zmm registers.
  template <int MR, int NB>
  static void int8_mxn(const std::int8_t* a, std::int64_t lda, const std::uint8_t* b,
                       std::int64_t bstride, std::int64_t k_len, std::int32_t* c,
                       std::int64_t ldc) {
    __m512i acc[MR][NB];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_si512();
    }
    for (std::int64_t k = 0; k < k_len; k += 4) {
      __m512i bv[NB];
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) bv[j] = _mm512_loadu_si512(b + j * bstride + k * 16);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        std::int32_t word;
        __builtin_memcpy(&word, a + i * lda + k, 4);
        const __m512i av = _mm512_set1_epi32(word);
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], bv[j], av);
      }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) _mm512_storeu_si512(c + i * ldc + j * 16, acc[i][j]);
    }
  }

  static void int8_block(const std::int8_t* panel, std::int64_t lda, std::int64_t rows,
                         const std::uint8_t* b, std::int64_t bstride, int blocks,
                         std::int64_t k_len, std::int32_t* acc, std::int64_t ldc,
                         const std::uint8_t* /*next*/, std::int64_t /*next_bytes*/) {
    for (std::int64_t r = 0; r < rows; r += 6) {
      const std::int8_t* a = panel + r * lda;
      std::int32_t* c = acc + r * ldc;
      switch (std::min<std::int64_t>(6, rows - r)) {
        case 1:
          int8_rows<1>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
        case 2:
          int8_rows<2>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
        case 3:
          int8_rows<3>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
        case 4:
          int8_rows<4>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
        case 5:
          int8_rows<5>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
        default:
          int8_rows<6>(a, lda, b, bstride, blocks, k_len, c, ldc);
          break;
      }
    }
  }

  template <int MR>
  static void int8_rows(const std::int8_t* a, std::int64_t lda, const std::uint8_t* b,
                        std::int64_t bstride, int blocks, std::int64_t k_len, std::int32_t* c,
                        std::int64_t ldc) {
    switch (blocks) {
      case 1:
        int8_mxn<MR, 1>(a, lda, b, bstride, k_len, c, ldc);
        break;
      case 2:
        int8_mxn<MR, 2>(a, lda, b, bstride, k_len, c, ldc);
        break;
      case 3:
        int8_mxn<MR, 3>(a, lda, b, bstride, k_len, c, ldc);
        break;
      default:
        int8_mxn<MR, 4>(a, lda, b, bstride, k_len, c, ldc);
        break;
    }
  }

  static void bf16_block(const float* a, std::int64_t k_len, std::int64_t rows, const float* b,
                         float* c, std::int64_t ldc, bool accumulate) {
    for (std::int64_t r = 0; r < rows; r += 6) {
      __m512 acc[6][4];
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          acc[i][j] =
              accumulate ? _mm512_loadu_ps(c + (r + i) * ldc + j * 16) : _mm512_setzero_ps();
        }
      }
      for (std::int64_t k = 0; k < k_len; ++k) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) bv[j] = _mm512_loadu_ps(b + k * 64 + j * 16);
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i) {
          const __m512 av = _mm512_set1_ps(a[(r + i) * k_len + k]);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
      }
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(c + (r + i) * ldc + j * 16, acc[i][j]);
      }
    }
  }
};

// The bf16 GEMMs on bf16 pairs with vdpbf16ps (bf16_dot_block.h), for CPUs with AVX512-BF16.
struct IsaV4Bf16Dot : IsaV4 {
  static constexpr bool kBf16Pairs = true;
  static void bf16_block(const std::uint32_t* a, std::int64_t k_pairs, std::int64_t rows,
                         const std::uint32_t* b, float* c, std::int64_t ldc, bool accumulate) {
    bf16_dot_block(a, k_pairs, k_pairs, rows, b, c, ldc, accumulate);
  }
  static void bf16_block_streamed(const std::uint32_t* a, std::int64_t k_pairs, std::int64_t rows,
                                  const std::uint32_t* b, float* c, std::int64_t ldc,
                                  bool accumulate) {
    bf16_dot_block<true>(a, k_pairs, k_pairs, rows, b, c, ldc, accumulate);
  }
  static void bf16_block_streamed_bf16(const std::uint32_t* a, std::int64_t k_pairs,
                                       std::int64_t rows, const std::uint32_t* b, std::uint16_t* c,
                                       std::int64_t ldc) {
    bf16_dot_block<true>(a, k_pairs, k_pairs, rows, b, c, ldc, false);
  }
  static void bf16_stream_fence() { _mm_sfence(); }
};

#ifndef HP_V4_TARGET_NAME
#define HP_V4_TARGET_NAME "x86_64_v4"
#endif
constexpr KernelTable kTable = driver::make_table<IsaV4>(HP_V4_TARGET_NAME);
constexpr KernelTable kTableBf16Dot = [] {
  KernelTable t = kTable;
  driver::set_bf16_entries<IsaV4Bf16Dot>(&t);
  return t;
}();

}  // namespace
}  // namespace hp::kernels

HP_KERNEL_VENDOR_NOTE(HP_V4_TARGET_NAME);

extern "C" __attribute__((visibility("default"))) const hp::kernels::KernelTable*
hp_kernel_table() {
#if defined(HP_V4_FMA_ONLY)  // the tests' build of the FMA form, for CPUs with AVX512_BF16
  return &hp::kernels::kTable;
#else
  // The target's features (AVX-512 with the OS's zmm state) are checked before it is loaded.
  return __builtin_cpu_supports("avx512bf16") ? &hp::kernels::kTableBf16Dot : &hp::kernels::kTable;
#endif
}
