// The x86_64_v3 target: AVX2/FMA. int8 products widened to int16 (vpmovzxbw / vpmaddwd, exact
// for every int8 value, unlike the saturating vpmaddubsw), fp32 FMA for the bf16 GEMMs.
// Compiled with -march=x86-64-v3.
#include <immintrin.h>

#include "kernels/gemm_driver.h"
#include "kernels/vendor_note.h"

namespace hp::kernels {
namespace {

struct IsaV3 {
  using Panel = std::int16_t;  // activations widened once, when the panel is loaded
  static constexpr std::int64_t kRowAlign = 2;
  static constexpr bool kTiledPanel = false;
  static constexpr std::int64_t kNb = 16;
  static constexpr std::int64_t kPreferredTileM = 32;
  static constexpr std::int64_t kPreferredTileN = 256;
  static constexpr bool kBf16Pairs = false;
  static constexpr std::int64_t kBf16Mr = 6;
  static constexpr std::int64_t kBf16Nb = 16;
  static constexpr std::int64_t kBf16PairAlign = 1;
  struct Scope {};

  // Two rows x 16 columns. Per K group of 4, a 64-byte packed row holds 16 columns x 4 k; each
  // 16-byte quarter (4 columns) widens to 16 int16 and meets the row's 4 activations
  // broadcast as int16, giving per column two partial sums (k0+k1, k2+k3) to add at the end.
  static void int8_2x16(const std::int16_t* a, std::int64_t lda, const std::uint8_t* b,
                        std::int64_t k_len, std::int32_t* c, std::int64_t ldc) {
    __m256i acc[2][4];
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_si256();
    }
    for (std::int64_t k = 0; k < k_len; k += 4) {
      __m256i av[2];
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        std::int64_t word;
        __builtin_memcpy(&word, a + i * lda + k, 8);
        av[i] = _mm256_set1_epi64x(word);
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i bv = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k * 16 + j * 16)));
#pragma GCC unroll 2
        for (int i = 0; i < 2; ++i)
          acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(av[i], bv));
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
      // hadd gives columns [0 1 4 5 | 2 3 6 7] of each pair of quarters; permute to order.
      const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][0], acc[i][1]), 0xD8);
      const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][2], acc[i][3]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + i * ldc), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + i * ldc + 8), hi);
    }
  }

  static void int8_block(const std::int16_t* panel, std::int64_t lda, std::int64_t rows,
                         const std::uint8_t* b, std::int64_t bstride, int blocks,
                         std::int64_t k_len, std::int32_t* acc, std::int64_t ldc,
                         const std::uint8_t* /*next*/, std::int64_t /*next_bytes*/) {
    for (int blk = 0; blk < blocks; ++blk) {
      for (std::int64_t r = 0; r < rows; r += 2) {
        int8_2x16(panel + r * lda, lda, b + blk * bstride, k_len, acc + r * ldc + blk * 16, ldc);
      }
    }
  }

  static void bf16_block(const float* a, std::int64_t k_len, std::int64_t rows, const float* b,
                         float* c, std::int64_t ldc, bool accumulate) {
    for (std::int64_t r = 0; r < rows; r += 6) {
      __m256 acc[6][2];
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j) {
          acc[i][j] = accumulate ? _mm256_loadu_ps(c + (r + i) * ldc + j * 8) : _mm256_setzero_ps();
        }
      }
      for (std::int64_t k = 0; k < k_len; ++k) {
        const __m256 b0 = _mm256_loadu_ps(b + k * 16), b1 = _mm256_loadu_ps(b + k * 16 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i) {
          const __m256 av = _mm256_broadcast_ss(a + (r + i) * k_len + k);
          acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
      }
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
        _mm256_storeu_ps(c + (r + i) * ldc, acc[i][0]);
        _mm256_storeu_ps(c + (r + i) * ldc + 8, acc[i][1]);
      }
    }
  }
};

constexpr KernelTable kTable = driver::make_table<IsaV3>("x86_64_v3");

}  // namespace
}  // namespace hp::kernels

HP_KERNEL_VENDOR_NOTE("x86_64_v3");

extern "C" __attribute__((visibility("default"))) const hp::kernels::KernelTable*
hp_kernel_table() {
  return &hp::kernels::kTable;
}
