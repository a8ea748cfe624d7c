// The AMX tile operations the x86_64_amx target uses, as macros over GCC's intrinsics, or,
// with HP_AMX_EMULATED, over a software model of the tile registers. The emulated build is a
// test-only library (never shipped, never selected): it lets the tile algorithm (configuration,
// layouts, strides, tails) be checked against the reference on CPUs without AMX.
//
// Tile numbers must be literals (the intrinsics stringify them).
#ifndef HYPER_PARALLEL_KERNELS_X86_64_AMX_AMX_OPS_H_
#define HYPER_PARALLEL_KERNELS_X86_64_AMX_AMX_OPS_H_

#include <cstdint>
#include <cstring>

namespace hp::kernels::amx {

// The 64-byte operand of ldtilecfg (palette 1).
struct alignas(64) TileConfig {
  std::uint8_t palette_id;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t colsb[16];
  std::uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

}  // namespace hp::kernels::amx

#if HP_AMX_EMULATED

namespace hp::kernels::amx::emulated {

struct TileFile {
  TileConfig config;
  std::uint8_t data[8][16][64];
};
inline thread_local TileFile tiles;

inline void load_config(const TileConfig* c) {
  tiles.config = *c;
  std::memset(tiles.data, 0, sizeof(tiles.data));
}
inline void release() { std::memset(&tiles, 0, sizeof(tiles)); }
inline void zero(int t) { std::memset(tiles.data[t], 0, sizeof(tiles.data[t])); }
inline void load(int t, const void* base, long stride) {
  zero(t);
  for (int r = 0; r < tiles.config.rows[t]; ++r) {
    std::memcpy(tiles.data[t][r], static_cast<const char*>(base) + r * stride,
                tiles.config.colsb[t]);
  }
}
inline void store(int t, void* base, long stride) {
  for (int r = 0; r < tiles.config.rows[t]; ++r) {
    std::memcpy(static_cast<char*>(base) + r * stride, tiles.data[t][r], tiles.config.colsb[t]);
  }
}
// dst[m][n] += sum_k sum_i int8 a[m][4k + i] * uint8 b[k][4n + i]
inline void dpbsud(int dst, int a, int b) {
  for (int m = 0; m < tiles.config.rows[dst]; ++m) {
    for (int n = 0; n < tiles.config.colsb[dst] / 4; ++n) {
      std::int32_t sum;
      std::memcpy(&sum, &tiles.data[dst][m][4 * n], 4);
      for (int k = 0; k < tiles.config.colsb[a] / 4; ++k) {
        for (int i = 0; i < 4; ++i) {
          sum += std::int32_t(std::int8_t(tiles.data[a][m][4 * k + i])) *
                 std::int32_t(tiles.data[b][k][4 * n + i]);
        }
      }
      std::memcpy(&tiles.data[dst][m][4 * n], &sum, 4);
    }
  }
}

// dst[m][n] += sum_k sum_i bf16 a[m][2k + i] * bf16 b[k][2n + i], in fp32.
inline float bf16_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline void dpbf16ps(int dst, int a, int b) {
  for (int m = 0; m < tiles.config.rows[dst]; ++m) {
    for (int n = 0; n < tiles.config.colsb[dst] / 4; ++n) {
      float sum;
      std::memcpy(&sum, &tiles.data[dst][m][4 * n], 4);
      for (int k = 0; k < tiles.config.colsb[a] / 4; ++k) {
        for (int i = 0; i < 2; ++i)
          sum +=
              bf16_at(&tiles.data[a][m][4 * k + 2 * i]) * bf16_at(&tiles.data[b][k][4 * n + 2 * i]);
      }
      std::memcpy(&tiles.data[dst][m][4 * n], &sum, 4);
    }
  }
}

}  // namespace hp::kernels::amx::emulated

#define HP_TILE_LOADCONFIG(config) ::hp::kernels::amx::emulated::load_config(config)
#define HP_TILE_RELEASE() ::hp::kernels::amx::emulated::release()
#define HP_TILE_ZERO(t) ::hp::kernels::amx::emulated::zero(t)
#define HP_TILE_LOAD(t, base, stride) ::hp::kernels::amx::emulated::load(t, base, long(stride))
#define HP_TILE_STORE(t, base, stride) ::hp::kernels::amx::emulated::store(t, base, long(stride))
#define HP_TILE_DPBSUD(c, a, b) ::hp::kernels::amx::emulated::dpbsud(c, a, b)
#define HP_TILE_DPBF16PS(c, a, b) ::hp::kernels::amx::emulated::dpbf16ps(c, a, b)

#else

#include <immintrin.h>

// GCC's tile loads are asm statements without a memory operand: a compiler barrier keeps the
// stores that fill a panel before the loads that read it.
#define HP_TILE_LOADCONFIG(config) _tile_loadconfig(config)
#define HP_TILE_RELEASE() _tile_release()
#define HP_TILE_ZERO(t) _tile_zero(t)
#define HP_TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define HP_TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define HP_TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define HP_TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)

#endif

#define HP_COMPILER_BARRIER() __asm__ volatile("" ::: "memory")

#endif  // HYPER_PARALLEL_KERNELS_X86_64_AMX_AMX_OPS_H_
