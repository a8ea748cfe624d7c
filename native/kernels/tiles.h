// Walking the tiles of a grouped problem (shared by the targets, the reference and the work
// splitter). Tiles are numbered expert by expert; within an expert, row blocks outer and
// column blocks inner. An expert with no rows has no tiles.
//
// An expert's R rows form max(1, round(R / tile_m)) row blocks of balanced size (block b is
// [R b / B, R (b + 1) / B)), so no block is a sliver that streams the weights again for a few
// rows; a block has at most max_tile_rows(grid) = tile_m + tile_m / 2 rows.
#ifndef HYPER_PARALLEL_KERNELS_TILES_H_
#define HYPER_PARALLEL_KERNELS_TILES_H_

#include <algorithm>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace hp::kernels {

struct Tile {
  std::int64_t expert;
  std::int64_t row_begin, row_end;  // rows of the grouped activations (or of dW for kWeight)
  std::int64_t col_begin, col_end;  // output columns
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }
inline std::int64_t max_tile_rows(const TileGrid& grid) { return grid.tile_m + grid.tile_m / 2; }

// Rows of expert e's tiles: [row_base, row_base + rows). For grouped rows that is the group;
// for a per-expert output (bf16 kWeight) it is [0, rows_per_expert).
struct TileSpace {
  const std::int64_t* offsets;  // null: every expert has rows_per_expert rows
  std::int64_t experts;
  std::int64_t rows_per_expert;
  std::int64_t cols;
  TileGrid grid;

  std::int64_t row_base(std::int64_t e) const { return offsets ? offsets[e] : 0; }
  std::int64_t rows(std::int64_t e) const {
    return offsets ? offsets[e + 1] - offsets[e] : rows_per_expert;
  }
  std::int64_t col_tiles() const { return ceil_div(cols, grid.tile_n); }
  std::int64_t row_blocks(std::int64_t e) const {
    const std::int64_t r = rows(e);
    return r == 0 ? 0 : std::max<std::int64_t>(1, (r + grid.tile_m / 2) / grid.tile_m);
  }
  std::int64_t tiles(std::int64_t e) const { return row_blocks(e) * col_tiles(); }
  std::int64_t total() const {
    std::int64_t t = 0;
    for (std::int64_t e = 0; e < experts; ++e) t += tiles(e);
    return t;
  }

  // Calls f(const Tile&) for tiles [begin, end).
  template <typename F>
  void for_each(std::int64_t begin, std::int64_t end, F&& f) const {
    const std::int64_t ct = col_tiles();
    std::int64_t first = 0;
    for (std::int64_t e = 0; e < experts && first < end; ++e) {
      const std::int64_t count = tiles(e), blocks = row_blocks(e), r = rows(e);
      const std::int64_t lo = std::max(begin, first), hi = std::min(end, first + count);
      for (std::int64_t t = lo; t < hi; ++t) {
        const std::int64_t local = t - first, rb = local / ct, cb = local % ct;
        const std::int64_t c0 = cb * grid.tile_n;
        f(Tile{e, row_base(e) + r * rb / blocks, row_base(e) + r * (rb + 1) / blocks, c0,
               std::min(c0 + grid.tile_n, cols)});
      }
      first += count;
    }
  }
};

inline TileSpace gemm_tile_space(const GroupedGemmArgs& a, const TileGrid& grid) {
  const std::int64_t cols = a.epilogue == Epilogue::kDequantSwigluQuant ? a.w->n / 2 : a.w->n;
  return TileSpace{a.offsets, a.w->experts, 0, cols, grid};
}

inline TileSpace bf16_tile_space(const Bf16GemmArgs& a, const TileGrid& grid) {
  if (a.kind == Bf16GemmKind::kWeight) return TileSpace{nullptr, a.experts, a.m, a.n, grid};
  return TileSpace{a.offsets, a.experts, 0, a.n, grid};
}

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_TILES_H_
