// The x86_64_amx target: AMX-INT8 tiles (tdpbsud) for the int8 GEMMs, AMX-BF16 tiles
// (tdpbf16ps) for the bf16 GEMMs. Compiled with -march=x86-64-v4 and the AMX and AVX512-BF16
// flags (native/kernels/CMakeLists.txt). The process must have
// been granted the tile state (arch_prctl, done by the front end before it selects this target).
//
// Tiles: C00 C01 C10 C11 = tmm0..3 (16 rows x 16 int32), A0 A1 = tmm4, tmm5 (16 rows x 64 K
// bytes: one tile of the tiled panel), B0 B1 = tmm6, tmm7 (16 K/4 rows x 64 bytes: one packed
// column block).
#include <immintrin.h>

#include "kernels/bf16_dot_block.h"
#include "kernels/gemm_driver.h"
#include "kernels/vendor_note.h"
#include "kernels/x86_64_amx/amx_ops.h"

#ifndef HP_AMX_TARGET_NAME
#define HP_AMX_TARGET_NAME "x86_64_amx"
#endif

namespace hp::kernels {
namespace {

constexpr amx::TileConfig kConfig = {
    .palette_id = 1,
    .start_row = 0,
    .reserved = {},
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

struct IsaAmx {
  using Panel = std::int8_t;
  static constexpr std::int64_t kRowAlign = 16;
  static constexpr bool kTiledPanel = true;
  static constexpr std::int64_t kNb = 32;
  static constexpr std::int64_t kPreferredTileM = 256;
  static constexpr std::int64_t kPreferredTileN = 256;
  static constexpr bool kBf16Pairs = true;
  static constexpr std::int64_t kBf16Mr = 16;
  static constexpr std::int64_t kBf16Nb = 64;
  static constexpr std::int64_t kBf16PairAlign = 16;  // one A tile row: 16 pairs = 64 bytes
  // Chunks of at most this many pairs (a weight gradient at a few rows per expert) run on
  // vdpbf16ps (bf16_dot_block.h) instead of the tiles: a tile pass costs the same whatever
  // its pairs, and its sums reach the vector registers only through a store to L1 and a load.
  static constexpr std::int64_t kBf16FewPairs = 4;

  struct Scope {
    Scope() { HP_TILE_LOADCONFIG(&kConfig); }
    ~Scope() { HP_TILE_RELEASE(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // Lines of the next column blocks' weights (the caller's hint) to bring into L2, a few per K
  // step: the weights stream from memory once per block and every pass after the first reads
  // them from L2.
  struct Prefetch {
    const char* next;
    const char* end;
    std::int64_t lines_per_step;
    void step() {
      for (std::int64_t i = 0; i < lines_per_step && next < end; ++i, next += 64)
        __builtin_prefetch(next, 0, 2);
    }
  };

  // The accumulator tiles C00 C01 C10 C11 of RT x CT 16 x 16 blocks of 4-byte elements (int32
  // or fp32) at c, ldc elements per row: zeroed or loaded, and stored.
  template <int RT, int CT, typename T>
  static void start_accumulators(const T* c, std::int64_t ldc, bool zero) {
    static_assert(sizeof(T) == 4);
    const std::int64_t ldc_bytes = ldc * 4;
    if (zero) {
      HP_TILE_ZERO(0);
      if constexpr (CT == 2) HP_TILE_ZERO(1);
      if constexpr (RT == 2) HP_TILE_ZERO(2);
      if constexpr (RT == 2 && CT == 2) HP_TILE_ZERO(3);
    } else {
      HP_TILE_LOAD(0, c, ldc_bytes);
      if constexpr (CT == 2) HP_TILE_LOAD(1, c + 16, ldc_bytes);
      if constexpr (RT == 2) HP_TILE_LOAD(2, c + 16 * ldc, ldc_bytes);
      if constexpr (RT == 2 && CT == 2) HP_TILE_LOAD(3, c + 16 * ldc + 16, ldc_bytes);
    }
  }
  template <int RT, int CT, typename T>
  static void store_accumulators(T* c, std::int64_t ldc) {
    const std::int64_t ldc_bytes = ldc * 4;
    HP_TILE_STORE(0, c, ldc_bytes);
    if constexpr (CT == 2) HP_TILE_STORE(1, c + 16, ldc_bytes);
    if constexpr (RT == 2) HP_TILE_STORE(2, c + 16 * ldc, ldc_bytes);
    if constexpr (RT == 2 && CT == 2) HP_TILE_STORE(3, c + 16 * ldc + 16, ldc_bytes);
  }

  // RT row tiles (16 rows each) x CT column tiles (16 columns each) over k_len (a multiple of 64),
  // starting from zero (first) or from the accumulators in c.
  template <int RT, int CT>
  static void tiles(const std::int8_t* a, std::int64_t lda, const std::uint8_t* b,
                    std::int64_t bstride, std::int64_t k_len, std::int32_t* c, std::int64_t ldc,
                    bool first, Prefetch& prefetch) {
    start_accumulators<RT, CT>(c, ldc, first);
    for (std::int64_t k = 0; k < k_len; k += 64) {
      prefetch.step();
      HP_TILE_LOAD(4, a + 16 * k, 64);
      HP_TILE_LOAD(6, b + k * 16, 64);
      if constexpr (CT == 2) HP_TILE_LOAD(7, b + bstride + k * 16, 64);
      HP_TILE_DPBSUD(0, 4, 6);
      if constexpr (CT == 2) HP_TILE_DPBSUD(1, 4, 7);
      if constexpr (RT == 2) {
        HP_TILE_LOAD(5, a + 16 * lda + 16 * k, 64);
        HP_TILE_DPBSUD(2, 5, 6);
        if constexpr (CT == 2) HP_TILE_DPBSUD(3, 5, 7);
      }
    }
    store_accumulators<RT, CT>(c, ldc);
  }

  // K in chunks of at most kChunk whose B rows (2 blocks x kChunk / 4 x 64 bytes) stay in L1
  // while every row tile passes over them; the accumulators go through acc between chunks.
  static constexpr std::int64_t kChunk = 512;

  static void int8_block(const std::int8_t* panel, std::int64_t lda, std::int64_t rows,
                         const std::uint8_t* b, std::int64_t bstride, int blocks,
                         std::int64_t k_len, std::int32_t* acc, std::int64_t ldc,
                         const std::uint8_t* next, std::int64_t next_bytes) {
    int8_block_interleaved(panel, lda, rows, b, bstride, blocks, k_len, acc, ldc, next, next_bytes,
                           [](std::int64_t, std::int64_t) {});
  }

  // int8_block, calling between(i, n) after the i-th of its n tile passes: vector work placed
  // there runs while the tile unit works through the passes before it.
  template <typename Between>
  static void int8_block_interleaved(const std::int8_t* panel, std::int64_t lda, std::int64_t rows,
                                     const std::uint8_t* b, std::int64_t bstride, int blocks,
                                     std::int64_t k_len, std::int32_t* acc, std::int64_t ldc,
                                     const std::uint8_t* next, std::int64_t next_bytes,
                                     Between&& between) {
    HP_COMPILER_BARRIER();
    const std::int64_t steps = ceil_div(rows, 32) * (k_len / 64);
    const char* pf = reinterpret_cast<const char*>(next);
    Prefetch prefetch{pf, pf ? pf + next_bytes : nullptr, ceil_div(next_bytes / 64, steps)};
    const std::int64_t chunks = ceil_div(k_len, kChunk),
                       chunk = round_up(ceil_div(k_len, chunks), 64);
    const std::int64_t passes = ceil_div(k_len, chunk) * ceil_div(rows, 32);
    std::int64_t pass = 0;
    for (std::int64_t k0 = 0; k0 < k_len; k0 += chunk) {
      const std::int64_t kl = std::min(chunk, k_len - k0);
      const std::uint8_t* bk = b + k0 * 16;
      for (std::int64_t r = 0; r < rows;) {
        const std::int8_t* a = panel + r * lda + 16 * k0;
        std::int32_t* c = acc + r * ldc;
        const bool two_rows = rows - r >= 32, first = k0 == 0;
        if (two_rows && blocks == 2) tiles<2, 2>(a, lda, bk, bstride, kl, c, ldc, first, prefetch);
        if (two_rows && blocks == 1) tiles<2, 1>(a, lda, bk, bstride, kl, c, ldc, first, prefetch);
        if (!two_rows && blocks == 2) tiles<1, 2>(a, lda, bk, bstride, kl, c, ldc, first, prefetch);
        if (!two_rows && blocks == 1) tiles<1, 1>(a, lda, bk, bstride, kl, c, ldc, first, prefetch);
        r += two_rows ? 32 : 16;
        between(pass++, passes);
      }
    }
    HP_COMPILER_BARRIER();
  }

  // RT row tiles x 2 column tiles (32 fp32 columns) of c, over lda pairs (a multiple of 16):
  // A tiles are 16 rows x 16 pairs of the panel a[r][lda], B tiles 16 pair rows x 16
  // columns of b[lda][64]. kStream: c is written with non-temporal stores (c 64-byte
  // aligned, ldc a multiple of 16); a tile store cannot bypass the caches, so the tiles go
  // through an L1 scratch first.
  template <int RT, bool kStream>
  static void bf16_tiles(const std::uint32_t* a, std::int64_t lda, const std::uint32_t* b, float* c,
                         std::int64_t ldc, bool accumulate) {
    start_accumulators<RT, 2>(c, ldc, !accumulate);
    bf16_dots<RT>(a, lda, b);
    if constexpr (kStream) {
      alignas(64) float staged[RT * 2][16 * 16];  // tile t: C(t / 2)(t % 2)
      stage_accumulators<RT>(staged);
      for (int t = 0; t < RT * 2; ++t) {
        float* out = c + (t / 2) * 16 * ldc + (t % 2) * 16;
        for (int row = 0; row < 16; ++row)
          _mm512_stream_ps(out + row * ldc, _mm512_load_ps(staged[t] + row * 16));
      }
    } else {
      store_accumulators<RT, 2>(c, ldc);
    }
  }

  // bf16_tiles' sums of one K chunk (from zero) as bf16 (float_to_bf16), streamed: a row of
  // the two column tiles is 32 bf16 values, one 64-byte line of c (64-byte aligned, ldc a
  // multiple of 32).
  template <int RT>
  static void bf16_tiles_to_bf16(const std::uint32_t* a, std::int64_t lda, const std::uint32_t* b,
                                 std::uint16_t* c, std::int64_t ldc) {
    start_accumulators<RT, 2>(static_cast<const float*>(nullptr), 0, true);
    bf16_dots<RT>(a, lda, b);
    alignas(64) float staged[RT * 2][16 * 16];
    stage_accumulators<RT>(staged);
    for (int rt = 0; rt < RT; ++rt) {
      for (int row = 0; row < 16; ++row) {
        driver::F32x16 lo, hi;
        driver::load_f32x16(staged[rt * 2] + row * 16, &lo);
        driver::load_f32x16(staged[rt * 2 + 1] + row * 16, &hi);
        driver::store_bf16x32_streaming(c + (rt * 16 + row) * ldc, lo, hi);
      }
    }
  }

  // The accumulators into an L1 scratch (a tile store cannot bypass the caches).
  template <int RT>
  static void stage_accumulators(float (*staged)[16 * 16]) {
    HP_TILE_STORE(0, staged[0], 64);
    HP_TILE_STORE(1, staged[1], 64);
    if constexpr (RT == 2) {
      HP_TILE_STORE(2, staged[2], 64);
      HP_TILE_STORE(3, staged[3], 64);
    }
  }

  // The accumulators += A tiles x B tiles over lda pairs.
  template <int RT>
  static void bf16_dots(const std::uint32_t* a, std::int64_t lda, const std::uint32_t* b) {
    const std::int64_t lda_bytes = lda * 4;
    for (std::int64_t i = 0; i < lda; i += 16) {
      HP_TILE_LOAD(4, a + i, lda_bytes);
      HP_TILE_LOAD(6, b + i * 64, 256);
      HP_TILE_LOAD(7, b + i * 64 + 16, 256);
      HP_TILE_DPBF16PS(0, 4, 6);
      HP_TILE_DPBF16PS(1, 4, 7);
      if constexpr (RT == 2) {
        HP_TILE_LOAD(5, a + 16 * lda + i, lda_bytes);
        HP_TILE_DPBF16PS(2, 5, 6);
        HP_TILE_DPBF16PS(3, 5, 7);
      }
    }
  }

  // AMX-BF16 (tdpbf16ps) on the bf16 pair panels (rows of lda = k_pairs rounded up to 16);
  // rows a multiple of 16.
  template <bool kStream = false>
  static void bf16_block(const std::uint32_t* a, std::int64_t k_pairs, std::int64_t rows,
                         const std::uint32_t* b, float* c, std::int64_t ldc, bool accumulate) {
    const std::int64_t lda = round_up(k_pairs, kBf16PairAlign);
    if (k_pairs <= kBf16FewPairs)
      return bf16_dot_block<kStream>(a, lda, k_pairs, rows, b, c, ldc, accumulate);
    for_each_tile_pair(rows, [&]<int RT>(std::int64_t r, std::int64_t n) {
      bf16_tiles<RT, kStream>(a + r * lda, lda, b + n, c + r * ldc + n, ldc, accumulate);
    });
  }

  // tiles.template operator()<RT>(r, n) over the block: rows [r, r + 16 RT) (two row tiles while
  // 32 rows remain, then one) and the column tile pairs n of kBf16Nb.
  template <typename Tiles>
  static void for_each_tile_pair(std::int64_t rows, const Tiles& tiles) {
    HP_COMPILER_BARRIER();
    for (std::int64_t r = 0; r < rows;) {
      const bool two_rows = rows - r >= 32;
      for (std::int64_t n = 0; n < kBf16Nb; n += 32) {
        if (two_rows) {
          tiles.template operator()<2>(r, n);
        } else {
          tiles.template operator()<1>(r, n);
        }
      }
      r += two_rows ? 32 : 16;
    }
    HP_COMPILER_BARRIER();
  }
  // Streams only sums of one K chunk: when earlier chunks were accumulated in c, its lines are
  // in the cache already and the detour through the scratch costs more than it saves.
  static void bf16_block_streamed(const std::uint32_t* a, std::int64_t k_pairs, std::int64_t rows,
                                  const std::uint32_t* b, float* c, std::int64_t ldc,
                                  bool accumulate) {
    if (accumulate) return bf16_block<false>(a, k_pairs, rows, b, c, ldc, accumulate);
    bf16_block<true>(a, k_pairs, rows, b, c, ldc, accumulate);
  }
  // A weight gradient's tile of one K chunk in bf16: the sums converted and streamed (c 64-byte
  // aligned, ldc a multiple of 32; rows a multiple of 16).
  static void bf16_block_streamed_bf16(const std::uint32_t* a, std::int64_t k_pairs,
                                       std::int64_t rows, const std::uint32_t* b, std::uint16_t* c,
                                       std::int64_t ldc) {
    const std::int64_t lda = round_up(k_pairs, kBf16PairAlign);
    if (k_pairs <= kBf16FewPairs)
      return bf16_dot_block<true>(a, lda, k_pairs, rows, b, c, ldc, false);
    for_each_tile_pair(rows, [&]<int RT>(std::int64_t r, std::int64_t n) {
      bf16_tiles_to_bf16<RT>(a + r * lda, lda, b + n, c + r * ldc + n, ldc);
    });
  }
  static void bf16_stream_fence() { _mm_sfence(); }
};

constexpr KernelTable kTable = driver::make_table<IsaAmx>(HP_AMX_TARGET_NAME);

}  // namespace
}  // namespace hp::kernels

HP_KERNEL_VENDOR_NOTE(HP_AMX_TARGET_NAME);

extern "C" __attribute__((visibility("default"))) const hp::kernels::KernelTable*
hp_kernel_table() {
  return &hp::kernels::kTable;
}
