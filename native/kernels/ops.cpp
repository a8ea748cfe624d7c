#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

namespace hp::kernels {
namespace {

bool is_float_out(DType d) { return d == DType::kFP32 || d == DType::kBF16; }
ElementType element_type(DType d) { return static_cast<ElementType>(int(d)); }

// A 2-D tensor of `dtype` with the given sizes (-1: any) whose rows are contiguous.
Status expect_matrix(const TensorView& t, std::string_view what, DType dtype, std::int64_t rows,
                     std::int64_t cols) {
  HP_RETURN_IF_ERROR(t.expect_dtype(what, dtype));
  HP_RETURN_IF_ERROR(t.expect_shape(what, {rows, cols}));
  if (t.dim(1) > 1 && t.stride(1) != 1) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "{} {}: rows must be contiguous (innermost stride 1)", what,
                         t.to_string());
  }
  return Status::ok();
}

Status expect_vector(const TensorView& t, std::string_view what, DType dtype, std::int64_t n) {
  HP_RETURN_IF_ERROR(t.expect_dtype(what, dtype));
  HP_RETURN_IF_ERROR(t.expect_shape(what, {n}));
  if (n > 1 && t.stride(0) != 1) {
    return Status::error(ErrorCode::kInvalidArgument, "{} {}: must be contiguous", what,
                         t.to_string());
  }
  return Status::ok();
}

bool absent(const TensorView& t) { return t.ndim() == 0 && t.data() == nullptr; }

// offsets int64 [experts + 1]: 0, non-decreasing, ending at rows.
Status check_offsets(const TensorView& offsets, std::int64_t experts, std::int64_t rows) {
  HP_RETURN_IF_ERROR(expect_vector(offsets, "offsets", DType::kInt64, experts + 1));
  const auto* o = static_cast<const std::int64_t*>(offsets.data());
  if (o[0] != 0) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "offsets[0] = {}: group offsets are prefix sums starting at 0", o[0]);
  }
  for (std::int64_t e = 0; e < experts; ++e) {
    if (o[e + 1] < o[e]) {
      return Status::error(
          ErrorCode::kInvalidArgument,
          "offsets[{}] = {} < offsets[{}] = {}: group offsets must not decrease (expert {} "
          "would have a negative row count)",
          e + 1, o[e + 1], e, o[e], e);
    }
  }
  if (o[experts] != rows) {
    return Status::error(ErrorCode::kShapeMismatch,
                         "offsets[{}] = {} but the activations have {} rows", experts, o[experts],
                         rows);
  }
  return Status::ok();
}

// offsets int64 [E + 1] with E >= 1 groups, E taken from its length (*experts), as above.
Status check_group_offsets(const TensorView& offsets, std::int64_t rows, std::int64_t* experts) {
  HP_RETURN_IF_ERROR(offsets.expect_shape("offsets", {-1}));
  HP_ENSURE(offsets.dim(0) >= 2, ErrorCode::kShapeMismatch,
            "offsets: expected [E + 1] with E >= 1");
  *experts = offsets.dim(0) - 1;
  return check_offsets(offsets, *experts, rows);
}

Status check_grid(const TileGrid& g, bool full_width, std::int64_t cols) {
  if (g.tile_m < 1 || g.tile_n < 1) {
    return Status::error(ErrorCode::kInvalidArgument, "tile grid {}x{}: tiles must be at least 1x1",
                         g.tile_m, g.tile_n);
  }
  if (full_width && g.tile_n < cols) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "tile grid {}x{}: the SwiGLU epilogue requantizes whole rows; tile_n must be >= {}",
        g.tile_m, g.tile_n, cols);
  }
  if (!full_width && g.tile_n % kPackCols != 0) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "tile grid {}x{}: tile_n must be a multiple of {}", g.tile_m, g.tile_n,
                         kPackCols);
  }
  return Status::ok();
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

Status quantize(const KernelTable& table, const TensorView& x, const TensorView& q,
                const TensorView& scale, const TensorView& smooth, float static_scale) {
  HP_RETURN_IF_ERROR(x.expect_shape("x", {-1, -1}));
  if (x.dtype() != DType::kFP32 && x.dtype() != DType::kBF16) {
    return Status::error(ErrorCode::kDTypeMismatch, "x {}: expected fp32 or bf16", x.to_string());
  }
  const std::int64_t rows = x.dim(0), cols = x.dim(1);
  HP_RETURN_IF_ERROR(expect_matrix(x, "x", x.dtype(), rows, cols));
  HP_RETURN_IF_ERROR(expect_matrix(q, "q", DType::kInt8, rows, cols));
  HP_RETURN_IF_ERROR(expect_vector(scale, "scale", DType::kFP32, rows));
  if (!absent(smooth)) HP_RETURN_IF_ERROR(expect_vector(smooth, "smooth", DType::kFP32, cols));
  if (!(static_scale >= 0.0f) || !std::isfinite(static_scale)) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "static_scale = {}: expected a finite scale > 0 (or 0 for dynamic quantisation)",
        static_scale);
  }
  if (rows == 0 || cols == 0) {
    if (cols == 0 && rows > 0) std::fill_n(static_cast<float*>(scale.data()), rows, static_scale);
    return Status::ok();
  }
  const QuantizeArgs args{
      .x = x.data(),
      .x_type = element_type(x.dtype()),
      .rows = rows,
      .cols = cols,
      .x_row_stride = x.stride(0),
      .smooth = absent(smooth) ? nullptr : static_cast<const float*>(smooth.data()),
      .static_scale = static_scale,
      .q = static_cast<std::int8_t*>(q.data()),
      .q_row_stride = q.stride(0),
      .scale = static_cast<float*>(scale.data()),
  };
  const std::int64_t bad = table.quantize(&args, 0, rows);
  if (bad > 0) {
    std::int64_t first = 0;
    while (first < rows && table.quantize(&args, first, first + 1) == 0) ++first;
    return Status::error(
        ErrorCode::kInvalidArgument,
        "x {}: {} row(s) hold NaN or infinity (the first is row {}); int8 quantisation needs "
        "finite values",
        x.to_string(), bad, first);
  }
  return Status::ok();
}

Status dequantize(const KernelTable& table, const TensorView& q, const TensorView& scale,
                  const TensorView& out) {
  HP_RETURN_IF_ERROR(q.expect_shape("q", {-1, -1}));
  const std::int64_t rows = q.dim(0), cols = q.dim(1);
  HP_RETURN_IF_ERROR(expect_matrix(q, "q", DType::kInt8, rows, cols));
  HP_RETURN_IF_ERROR(expect_vector(scale, "scale", DType::kFP32, rows));
  if (!is_float_out(out.dtype())) {
    return Status::error(ErrorCode::kDTypeMismatch, "out {}: expected fp32 or bf16",
                         out.to_string());
  }
  HP_RETURN_IF_ERROR(expect_matrix(out, "out", out.dtype(), rows, cols));
  if (rows == 0 || cols == 0) return Status::ok();
  const DequantizeArgs args{
      .q = static_cast<const std::int8_t*>(q.data()),
      .rows = rows,
      .cols = cols,
      .q_row_stride = q.stride(0),
      .scale = static_cast<const float*>(scale.data()),
      .out_type = element_type(out.dtype()),
      .out = out.data(),
      .out_row_stride = out.stride(0),
  };
  table.dequantize(&args, 0, rows);
  return Status::ok();
}

namespace {
// a fp32 [rows, 2I] with I >= 1, offsets of its rows, smooth fp32 [E, I] or absent.
Status check_swiglu_rows(const TensorView& a, const TensorView& offsets, const TensorView& smooth) {
  HP_RETURN_IF_ERROR(a.expect_shape("a", {-1, -1}));
  HP_ENSURE(a.dim(1) >= 2 && a.dim(1) % 2 == 0, ErrorCode::kShapeMismatch,
            "a {}: expected [rows, 2I] (gate | up) with I >= 1", a.to_string());
  HP_RETURN_IF_ERROR(expect_matrix(a, "a", DType::kFP32, a.dim(0), a.dim(1)));
  std::int64_t experts = 0;
  HP_RETURN_IF_ERROR(check_group_offsets(offsets, a.dim(0), &experts));
  if (!absent(smooth))
    HP_RETURN_IF_ERROR(expect_matrix(smooth, "smooth", DType::kFP32, experts, a.dim(1) / 2));
  return Status::ok();
}
const float* optional_floats(const TensorView& t) {
  return absent(t) ? nullptr : static_cast<const float*>(t.data());
}
SwigluRows swiglu_rows(const TensorView& a, const TensorView& offsets, const TensorView& smooth) {
  return {.a = static_cast<const float*>(a.data()),
          .a_row_stride = a.stride(0),
          .inter = a.dim(1) / 2,
          .offsets = static_cast<const std::int64_t*>(offsets.data()),
          .experts = offsets.dim(0) - 1,
          .smooth = optional_floats(smooth)};
}
}  // namespace

Status swiglu(const KernelTable& table, const TensorView& a, const TensorView& offsets,
              const TensorView& smooth, const TensorView& h) {
  HP_RETURN_IF_ERROR(check_swiglu_rows(a, offsets, smooth));
  const std::int64_t rows = a.dim(0), inter = a.dim(1) / 2;
  HP_RETURN_IF_ERROR(expect_matrix(h, "h", DType::kFP32, rows, inter));
  if (rows == 0) return Status::ok();
  const SwigluArgs args{.in = swiglu_rows(a, offsets, smooth),
                        .h = static_cast<float*>(h.data()),
                        .h_row_stride = h.stride(0)};
  table.swiglu(&args, 0, rows);
  return Status::ok();
}

Status swiglu_grad(const KernelTable& table, const SwigluGradProblem& p) {
  HP_RETURN_IF_ERROR(check_swiglu_rows(p.a, p.offsets, p.smooth));
  const std::int64_t rows = p.a.dim(0), inter = p.a.dim(1) / 2;
  HP_RETURN_IF_ERROR(expect_matrix(p.g, "g", DType::kFP32, rows, inter));
  HP_RETURN_IF_ERROR(expect_matrix(p.da, "da", DType::kBF16, rows, 2 * inter));
  if (!absent(p.row_weight))
    HP_RETURN_IF_ERROR(expect_vector(p.row_weight, "row_weight", DType::kFP32, rows));
  const bool wants_dw = !absent(p.d_row_weight);
  if (wants_dw) {
    HP_RETURN_IF_ERROR(expect_vector(p.d_row_weight, "d_row_weight", DType::kFP32, rows));
    HP_RETURN_IF_ERROR(expect_matrix(p.h_q, "h_q", DType::kInt8, rows, inter));
    HP_RETURN_IF_ERROR(expect_vector(p.h_scale, "h_scale", DType::kFP32, rows));
  }
  if (rows == 0) return Status::ok();
  const SwigluGradArgs args{
      .in = swiglu_rows(p.a, p.offsets, p.smooth),
      .g = static_cast<const float*>(p.g.data()),
      .g_row_stride = p.g.stride(0),
      .h_q = wants_dw ? static_cast<const std::int8_t*>(p.h_q.data()) : nullptr,
      .h_q_row_stride = wants_dw ? p.h_q.stride(0) : 0,
      .h_scale = wants_dw ? static_cast<const float*>(p.h_scale.data()) : nullptr,
      .row_weight = optional_floats(p.row_weight),
      .da = static_cast<std::uint16_t*>(p.da.data()),
      .da_row_stride = p.da.stride(0),
      .d_row_weight = wants_dw ? static_cast<float*>(p.d_row_weight.data()) : nullptr};
  table.swiglu_grad(&args, 0, rows);
  return Status::ok();
}

Status row_sum(const KernelTable& table, std::span<const void* const> rows, DType row_type,
               std::span<const float> weights, const TensorView& out,
               std::span<const void* const> next) {
  HP_ENSURE(is_float_out(row_type), ErrorCode::kDTypeMismatch,
            "row_sum: rows of {}: expected fp32 or bf16", to_string(row_type));
  HP_RETURN_IF_ERROR(out.expect_shape("out", {-1}));
  HP_ENSURE(is_float_out(out.dtype()), ErrorCode::kDTypeMismatch, "out {}: expected fp32 or bf16",
            out.to_string());
  HP_RETURN_IF_ERROR(expect_vector(out, "out", out.dtype(), out.dim(0)));
  HP_ENSURE(weights.empty() || weights.size() == rows.size(), ErrorCode::kShapeMismatch,
            "row_sum: {} weights for {} rows: expected none or one per row", weights.size(),
            rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    HP_ENSURE(rows[i] != nullptr || out.dim(0) == 0, ErrorCode::kInvalidArgument,
              "row_sum: row {} is null", i);
  }
  const RowSumArgs args{
      .rows = rows.data(),
      .row_type = element_type(row_type),
      .weights = weights.empty() ? nullptr : weights.data(),
      .n = std::int64_t(rows.size()),
      .cols = out.dim(0),
      .out_type = element_type(out.dtype()),
      .out = out.data(),
      .next = next.empty() ? nullptr : next.data(),
      .next_n = std::int64_t(next.size()),
  };
  table.row_sum(&args);
  return Status::ok();
}

std::vector<std::int64_t> split_tiles(const TileSpace& space, int workers) {
  workers = std::max(workers, 1);
  const std::int64_t total = space.total();
  std::vector<double> prefix;
  prefix.reserve(std::size_t(total) + 1);
  prefix.push_back(0.0);
  // A tile costs its rows x columns plus a fixed part (loading its activation panel).
  space.for_each(0, total, [&](const Tile& t) {
    prefix.push_back(prefix.back() +
                     double(t.row_end - t.row_begin) * double(t.col_end - t.col_begin) +
                     double(max_tile_rows(space.grid)) * 16.0);
  });
  std::vector<std::int64_t> bounds(std::size_t(workers) + 1, total);
  bounds[0] = 0;
  for (int w = 1; w < workers; ++w) {
    const double target = prefix.back() * w / workers;
    // The first tile boundary at or past the target, or the one just before it if closer.
    auto it = std::lower_bound(prefix.begin(), prefix.end(), target);
    std::int64_t b = it - prefix.begin();
    if (b > 0 &&
        target - prefix[std::size_t(b - 1)] < prefix[std::size_t(std::min(b, total))] - target)
      --b;
    bounds[std::size_t(w)] = std::clamp(b, bounds[std::size_t(w - 1)], total);
  }
  return bounds;
}

namespace {
// choose_grid from a starting grid.
TileGrid shrink_grid(TileGrid g, const TileSpace& space_in, bool full_width, int workers) {
  TileSpace space = space_in;
  for (;;) {
    space.grid = g;
    if (space.total() >= 2 * std::int64_t(workers)) break;
    if (!full_width && g.tile_n > 64) {
      g.tile_n = std::max<std::int64_t>(64, round_up(g.tile_n / 2, kPackCols));
    } else if (g.tile_m > 16) {
      g.tile_m = std::max<std::int64_t>(16, g.tile_m / 2);
    } else {
      break;
    }
  }
  return g;
}

// The bf16 GEMMs convert their B panels from bf16 for every tile: kInput tiles of this many times
// the table's rows amortise that over more rows (kWeight's tiles are rows of dW, whose A panels
// are transposed per tile, which costs more the taller the tile: bench/kernels/RESULTS.md).
constexpr std::int64_t kBf16InputRowFactor = 4;
// kWeight tiles are at most this tall on every target (x86_64_amx's int8 tiles are 256 rows; its
// dW tiles are capped like the others, for the transposed A panels above).
constexpr std::int64_t kBf16WeightMaxRows = 64;
std::int64_t bf16_tile_rows(const KernelTable& table, Bf16GemmKind kind) {
  if (kind == Bf16GemmKind::kInput) return kBf16InputRowFactor * table.preferred_tile_m;
  return std::min(kBf16WeightMaxRows, table.preferred_tile_m);
}
}  // namespace

TileGrid choose_grid(const KernelTable& table, const TileSpace& space, bool full_width,
                     int workers) {
  return shrink_grid({table.preferred_tile_m,
                      full_width ? std::max<std::int64_t>(space.cols, 1) : table.preferred_tile_n},
                     space, full_width, workers);
}

Status plan_grouped_gemm(const KernelTable& table, const GroupedGemmProblem& p, int workers,
                         GroupedGemmPlan* plan, const TileGrid* grid) {
  if (workers < 1)
    return Status::error(ErrorCode::kInvalidArgument, "workers = {}: expected >= 1", workers);
  HP_RETURN_IF_ERROR(validate_packed(p.weights));
  const PackedWeightsHeader& w = *p.weights;
  const bool swiglu = p.epilogue == Epilogue::kDequantSwigluQuant;
  if (p.epilogue != Epilogue::kDequant && p.epilogue != Epilogue::kDequantScale && !swiglu) {
    return Status::error(ErrorCode::kInvalidArgument, "epilogue {}: unknown", int(p.epilogue));
  }
  if (swiglu != (w.layout == PackLayout::kSwigluHalves)) {
    return Status(
        ErrorCode::kInvalidArgument,
        swiglu ? "the SwiGLU epilogue needs weights packed with PackLayout::kSwigluHalves"
               : "weights packed with PackLayout::kSwigluHalves are only for the SwiGLU epilogue");
  }
  HP_RETURN_IF_ERROR(p.a.expect_shape("a", {-1, w.k}));
  const std::int64_t rows = p.a.dim(0), cols = swiglu ? w.n / 2 : w.n;
  HP_RETURN_IF_ERROR(expect_matrix(p.a, "a", DType::kInt8, rows, w.k));
  HP_RETURN_IF_ERROR(expect_vector(p.a_scale, "a_scale", DType::kFP32, rows));
  HP_RETURN_IF_ERROR(check_offsets(p.offsets, w.experts, rows));
  if (swiglu) {
    HP_RETURN_IF_ERROR(expect_matrix(p.out, "out", DType::kInt8, rows, cols));
    HP_RETURN_IF_ERROR(expect_vector(p.out_scale, "out_scale", DType::kFP32, rows));
    if (!absent(p.smooth))
      HP_RETURN_IF_ERROR(expect_matrix(p.smooth, "smooth", DType::kFP32, w.experts, cols));
    if (!absent(p.smooth) && p.smooth.stride(0) != cols) {
      return Status::error(ErrorCode::kInvalidArgument, "smooth {}: must be contiguous",
                           p.smooth.to_string());
    }
  } else {
    if (!is_float_out(p.out.dtype())) {
      return Status::error(ErrorCode::kDTypeMismatch, "out {}: expected fp32 or bf16",
                           p.out.to_string());
    }
    HP_RETURN_IF_ERROR(expect_matrix(p.out, "out", p.out.dtype(), rows, cols));
  }
  if (p.epilogue == Epilogue::kDequantScale) {
    HP_RETURN_IF_ERROR(expect_vector(p.row_factor, "row_factor", DType::kFP32, rows));
  }
  if (!absent(p.preact)) {
    HP_ENSURE(swiglu, ErrorCode::kInvalidArgument,
              "preact {}: only the SwiGLU epilogue stores a pre-activation (leave it empty)",
              p.preact.to_string());
    HP_RETURN_IF_ERROR(expect_matrix(p.preact, "preact", DType::kFP32, rows, w.n));
  }
  const GroupedGemmArgs args{
      .a = static_cast<const std::int8_t*>(p.a.data()),
      .a_row_stride = p.a.stride(0),
      .a_scale = static_cast<const float*>(p.a_scale.data()),
      .offsets = static_cast<const std::int64_t*>(p.offsets.data()),
      .w = p.weights,
      .epilogue = p.epilogue,
      .out_type = element_type(p.out.dtype()),
      .out = p.out.data(),
      .out_row_stride = p.out.stride(0),
      .out_scale = swiglu ? static_cast<float*>(p.out_scale.data()) : nullptr,
      .row_factor = p.epilogue == Epilogue::kDequantScale
                        ? static_cast<const float*>(p.row_factor.data())
                        : nullptr,
      .smooth = swiglu && !absent(p.smooth) ? static_cast<const float*>(p.smooth.data()) : nullptr,
      .preact = absent(p.preact) ? nullptr : static_cast<float*>(p.preact.data()),
      .preact_row_stride = absent(p.preact) ? 0 : p.preact.stride(0),
  };
  TileSpace space = gemm_tile_space(args, TileGrid{1, 1});
  const TileGrid g = grid ? *grid : choose_grid(table, space, swiglu, workers);
  HP_RETURN_IF_ERROR(check_grid(g, swiglu, cols));
  space.grid = g;
  plan->table_ = &table;
  plan->args_ = args;
  plan->grid_ = g;
  plan->bounds_ = split_tiles(space, workers);
  plan->workspace_bytes_ =
      (table.grouped_gemm_workspace(&plan->args_, &g) + 63) & ~std::uint64_t(63);
  return Status::ok();
}

Status plan_bf16_gemm(const KernelTable& table, const Bf16GemmProblem& p, int workers,
                      Bf16GemmPlan* plan, const TileGrid* grid) {
  if (workers < 1)
    return Status::error(ErrorCode::kInvalidArgument, "workers = {}: expected >= 1", workers);
  HP_RETURN_IF_ERROR(p.a.expect_shape("a", {-1, -1}));
  const std::int64_t rows = p.a.dim(0);
  HP_RETURN_IF_ERROR(expect_matrix(p.a, "a", DType::kBF16, rows, p.a.dim(1)));
  std::int64_t experts = 0;
  HP_RETURN_IF_ERROR(check_group_offsets(p.offsets, rows, &experts));
  if (!is_float_out(p.out.dtype())) {
    return Status::error(ErrorCode::kDTypeMismatch, "out {}: expected fp32 or bf16",
                         p.out.to_string());
  }
  Bf16GemmArgs args{
      .kind = p.kind,
      .a = static_cast<const std::uint16_t*>(p.a.data()),
      .a_row_stride = p.a.stride(0),
      .offsets = static_cast<const std::int64_t*>(p.offsets.data()),
      .experts = experts,
      .b = static_cast<const std::uint16_t*>(p.b.data()),
      .out_type = element_type(p.out.dtype()),
      .out = p.out.data(),
  };
  if (p.b_panels != nullptr && p.kind != Bf16GemmKind::kInput) {
    return Status::error(ErrorCode::kInvalidArgument, "b_panels: only for kInput GEMMs");
  }
  if (p.kind == Bf16GemmKind::kInput) {
    const std::int64_t k = p.a.dim(1);
    std::int64_t n = 0;
    if (const Bf16Panels* panels = p.b_panels; panels != nullptr && !panels->empty()) {
      if (panels->table() != &table) {
        return Status::error(ErrorCode::kInvalidArgument,
                             "b_panels: packed for another kernel table (pack them with this one: "
                             "pack_bf16_panels)");
      }
      if (panels->experts() != experts || panels->k() != k) {
        return Status::error(ErrorCode::kShapeMismatch,
                             "b_panels: packed for B [{}, {}, {}], expected [{}, {}, N]",
                             panels->experts(), panels->k(), panels->n(), experts, k);
      }
      n = panels->n();
      args.b_panels = panels->data();
    } else {
      HP_RETURN_IF_ERROR(p.b.expect_dtype("b", DType::kBF16));
      HP_RETURN_IF_ERROR(p.b.expect_shape("b", {experts, k, -1}));
      n = p.b.dim(2);
      args.b_expert_stride = p.b.stride(0);
      args.b_stride_k = p.b.stride(1);
      args.b_stride_n = p.b.stride(2);
    }
    HP_RETURN_IF_ERROR(expect_matrix(p.out, "out", p.out.dtype(), rows, n));
    args.k = k;
    args.n = n;
    args.out_row_stride = p.out.stride(0);
  } else if (p.kind == Bf16GemmKind::kWeight) {
    const std::int64_t m = p.a.dim(1);
    HP_RETURN_IF_ERROR(p.b.expect_shape("b", {rows, -1}));
    const std::int64_t n = p.b.dim(1);
    HP_RETURN_IF_ERROR(expect_matrix(p.b, "b", DType::kBF16, rows, n));
    HP_RETURN_IF_ERROR(p.out.expect_shape("out", {experts, m, n}));
    if (p.out.stride(2) != 1 || p.out.stride(0) != m * p.out.stride(1)) {
      return Status::error(ErrorCode::kInvalidArgument,
                           "out {}: expected [E, M, N] with contiguous rows and "
                           "experts one after another",
                           p.out.to_string());
    }
    args.b_stride_k = p.b.stride(0);
    args.b_stride_n = 1;
    args.m = m;
    args.n = n;
    args.out_row_stride = p.out.stride(1);
  } else {
    return Status::error(ErrorCode::kInvalidArgument, "bf16 GEMM kind {}: unknown", int(p.kind));
  }
  TileSpace space = bf16_tile_space(args, TileGrid{1, 1});
  // kWeight tiles are whole rows of dW: a tile's A panel (A^T, transposed as it is packed)
  // then serves every column of the row block instead of being packed again per column tile.
  const bool full_width = p.kind == Bf16GemmKind::kWeight;
  TileGrid g =
      grid ? *grid
           : shrink_grid({bf16_tile_rows(table, p.kind),
                          full_width ? round_up(std::max<std::int64_t>(args.n, 1), kPackCols)
                                     : table.preferred_tile_n},
                         space, full_width, workers);
  HP_RETURN_IF_ERROR(check_grid(g, false, args.n));
  // Panels are whole blocks of columns: a tile starts at one.
  if (args.b_panels != nullptr) g.tile_n = round_up(g.tile_n, table.bf16_panel_cols);
  space.grid = g;
  plan->table_ = &table;
  plan->args_ = args;
  plan->grid_ = g;
  plan->bounds_ = split_tiles(space, workers);
  plan->workspace_bytes_ = (table.bf16_gemm_workspace(&plan->args_, &g) + 63) & ~std::uint64_t(63);
  return Status::ok();
}

Status pack_bf16_panels(const KernelTable& table, const TensorView& b, Bf16Panels* out) {
  HP_RETURN_IF_ERROR(b.expect_dtype("b", DType::kBF16));
  HP_RETURN_IF_ERROR(b.expect_shape("b", {-1, -1, -1}));
  *out = Bf16Panels();
  if (table.bf16_panels_bytes == nullptr) return Status::ok();
  const Bf16GemmArgs args{.kind = Bf16GemmKind::kInput,
                          .experts = b.dim(0),
                          .b = static_cast<const std::uint16_t*>(b.data()),
                          .b_expert_stride = b.stride(0),
                          .b_stride_k = b.stride(1),
                          .b_stride_n = b.stride(2),
                          .k = b.dim(1),
                          .n = b.dim(2)};
  const std::uint64_t bytes = table.bf16_panels_bytes(&args);
  if (bytes == 0) return Status::ok();
  void* buffer = std::aligned_alloc(64, (bytes + 63) & ~std::uint64_t(63));
  if (buffer == nullptr) {
    return Status::error(ErrorCode::kOutOfMemory, "the bf16 panels of B {} need {} bytes",
                         b.to_string(), bytes);
  }
  out->buffer_.reset(buffer);
  table.bf16_pack_panels(&args, buffer);
  out->table_ = &table;
  out->experts_ = b.dim(0);
  out->k_ = b.dim(1);
  out->n_ = b.dim(2);
  out->bytes_ = bytes;
  return Status::ok();
}

namespace {
template <typename Plan>
Status run_alone(const Plan& plan) {
  std::unique_ptr<void, AlignedFree> workspace;
  if (plan.workspace_bytes() > 0) {
    workspace.reset(std::aligned_alloc(64, plan.workspace_bytes()));
    if (!workspace) {
      return Status::error(ErrorCode::kOutOfMemory, "the GEMM workspace needs {} bytes",
                           plan.workspace_bytes());
    }
  }
  plan.run(0, workspace.get());
  return Status::ok();
}
}  // namespace

Status grouped_gemm(const KernelTable& table, const GroupedGemmProblem& problem) {
  GroupedGemmPlan plan;
  HP_RETURN_IF_ERROR(plan_grouped_gemm(table, problem, 1, &plan));
  return run_alone(plan);
}

Status bf16_gemm(const KernelTable& table, const Bf16GemmProblem& problem) {
  Bf16GemmPlan plan;
  HP_RETURN_IF_ERROR(plan_bf16_gemm(table, problem, 1, &plan));
  return run_alone(plan);
}

}  // namespace hp::kernels
