// The grouped int8 GEMM of every target against the scalar reference: every epilogue, int8
// and int4 weights, per-channel and per-group scales, empty and one-row groups, tails in M, N
// and K, skewed groups, extreme values, several grids and work splits. The int8 epilogues are
// specified to be bit-identical across targets (kernel_math.h), so outputs compare exactly.
#include <cstring>
#include <memory>
#include <thread>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

struct Case {
  std::vector<std::int64_t> group_rows;
  std::int64_t k, n;
  WeightType type = WeightType::kInt8;
  std::int64_t group_size = 0;
  Epilogue epilogue = Epilogue::kDequant;
  DType out_dtype = DType::kFP32;
  bool smooth = false;
};

std::string describe(const Case& c) {
  std::string rows;
  for (auto r : c.group_rows) rows += std::to_string(r) + ",";
  return fmt::format("rows [{}] K={} N={} {} group={} epilogue={} out={}{}", rows, c.k, c.n,
                     c.type == WeightType::kInt8 ? "int8" : "int4", c.group_size, int(c.epilogue),
                     to_string(c.out_dtype), c.smooth ? " smooth" : "");
}

// The data of one case and the outputs of one run.
struct Problem {
  Case c;
  std::int64_t experts, rows, out_cols;
  std::vector<std::int8_t> a, w;
  std::vector<float> a_scale, w_scale, row_factor, smooth;
  std::vector<std::int64_t> offsets;
  PackedWeights packed;

  Problem(const Case& cs, Rng& rng, int extreme = 0) : c(cs) {
    experts = std::int64_t(c.group_rows.size());
    offsets = prefix_sums(c.group_rows);
    rows = offsets.back();
    const bool swiglu = c.epilogue == Epilogue::kDequantSwigluQuant;
    out_cols = swiglu ? c.n / 2 : c.n;
    const int wlo = c.type == WeightType::kInt4 ? -8 : -128,
              whi = c.type == WeightType::kInt4 ? 7 : 127;
    a = rng.int8s(std::size_t(rows * c.k));
    w = rng.int8s(std::size_t(experts * c.k * c.n), wlo, whi);
    if (extreme == 1) {  // every product at its largest magnitude
      std::fill(a.begin(), a.end(), std::int8_t(-128));
      std::fill(w.begin(), w.end(), std::int8_t(wlo));
    } else if (extreme == 2) {  // +-127 activations, zero rows in between
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t i = 0; i < c.k; ++i)
          a[std::size_t(r * c.k + i)] = r % 3 == 1 ? 0 : (i % 2 ? 127 : -127);
      }
    }
    a_scale = rng.reals(std::size_t(rows), 1e-4f, 2e-3f);
    const std::int64_t groups = c.group_size ? (c.k + c.group_size - 1) / c.group_size : 1;
    w_scale = rng.reals(std::size_t(experts * groups * c.n), 1e-3f, 4e-2f);
    row_factor = rng.reals(std::size_t(rows), 0.0f, 1.0f);
    smooth = rng.reals(std::size_t(experts * out_cols), 0.5f, 2.0f);
    const std::int64_t wshape[] = {experts, c.k, c.n};
    const std::int64_t sshape3[] = {experts, groups, c.n};
    const TensorView wv(w.data(), DType::kInt8, wshape);
    const TensorView sv(w_scale.data(), DType::kFP32, sshape3);
    const PackOptions options{.type = c.type,
                              .layout = swiglu ? PackLayout::kSwigluHalves : PackLayout::kPlain,
                              .group_size = c.group_size};
    const Status s = pack_weights(wv, sv, options, &packed);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }

  struct Output {
    std::vector<std::uint8_t> out;
    std::vector<float> out_scale;
  };

  GroupedGemmProblem problem(Output& o) {
    const bool swiglu = c.epilogue == Epilogue::kDequantSwigluQuant;
    const DType out_dtype = swiglu ? DType::kInt8 : c.out_dtype;
    o.out.assign(std::size_t(rows * out_cols) * dtype_size(out_dtype), 0xAB);
    o.out_scale.assign(std::size_t(rows), -1.0f);
    GroupedGemmProblem p;
    p.a = TensorView(a.data(), DType::kInt8, {rows, c.k});
    p.a_scale = TensorView(a_scale.data(), DType::kFP32, {rows});
    p.offsets = TensorView(offsets.data(), DType::kInt64, {experts + 1});
    p.weights = packed.header();
    p.epilogue = c.epilogue;
    p.out = TensorView(o.out.data(), out_dtype, {rows, out_cols});
    if (swiglu) p.out_scale = TensorView(o.out_scale.data(), DType::kFP32, {rows});
    if (c.epilogue == Epilogue::kDequantScale)
      p.row_factor = TensorView(row_factor.data(), DType::kFP32, {rows});
    if (c.smooth) p.smooth = TensorView(smooth.data(), DType::kFP32, {experts, out_cols});
    return p;
  }

  // Runs on `workers` threads, each its share of the plan's tiles; with `preact` (SwiGLU only,
  // [rows, n]) storing the pre-activation there too.
  Output run(const KernelTable& table, int workers, const TileGrid* grid = nullptr,
             float* preact = nullptr) {
    Output o;
    GroupedGemmProblem p = problem(o);
    if (preact != nullptr) p.preact = TensorView(preact, DType::kFP32, {rows, c.n});
    GroupedGemmPlan plan;
    const Status s = plan_grouped_gemm(table, p, workers, &plan, grid);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    if (!s.is_ok()) return o;
    std::vector<std::thread> threads;
    for (int wk = 0; wk < workers; ++wk) {
      threads.emplace_back([&plan, wk] {
        std::unique_ptr<void, decltype(&std::free)> ws(
            std::aligned_alloc(64, std::max<std::uint64_t>(64, plan.workspace_bytes())),
            &std::free);
        plan.run(wk, ws.get());
      });
    }
    for (auto& t : threads) t.join();
    return o;
  }
};

void expect_same(const Problem::Output& want, const Problem::Output& got, const Problem& p,
                 const std::string& what) {
  const bool swiglu = p.c.epilogue == Epilogue::kDequantSwigluQuant;
  ASSERT_EQ(want.out.size(), got.out.size());
  const std::size_t elem = swiglu ? 1 : dtype_size(p.c.out_dtype);
  for (std::size_t i = 0; i < want.out.size(); i += elem) {
    if (std::memcmp(&want.out[i], &got.out[i], elem) != 0) {
      const std::int64_t index = std::int64_t(i / elem), r = index / p.out_cols,
                         col = index % p.out_cols;
      std::string values;
      if (swiglu) {
        values =
            fmt::format("{} vs {}", int(std::int8_t(want.out[i])), int(std::int8_t(got.out[i])));
      } else if (elem == 4) {
        float x, y;
        std::memcpy(&x, &want.out[i], 4);
        std::memcpy(&y, &got.out[i], 4);
        values = fmt::format("{} vs {}", x, y);
      } else {
        std::uint16_t x, y;
        std::memcpy(&x, &want.out[i], 2);
        std::memcpy(&y, &got.out[i], 2);
        values = fmt::format("{} vs {}", bf16_to_float(x), bf16_to_float(y));
      }
      FAIL() << what << ": " << describe(p.c) << ": out[" << r << "][" << col << "] reference "
             << values;
    }
  }
  if (swiglu) {
    for (std::int64_t r = 0; r < p.rows; ++r) {
      ASSERT_EQ(want.out_scale[std::size_t(r)], got.out_scale[std::size_t(r)])
          << what << ": " << describe(p.c) << ": out_scale[" << r << "]";
    }
  }
}

class GroupedGemm : public TargetTest {
 protected:
  void check(const Case& c, std::uint64_t seed, int extreme = 0) {
    Rng rng(seed);
    Problem p(c, rng, extreme);
    ASSERT_FALSE(p.packed.empty());
    const Problem::Output want = p.run(reference(), 1);
    expect_same(want, p.run(target(), 1), p, "1 worker");
    if (HasFatalFailure()) return;
    expect_same(want, p.run(target(), 3), p, "3 workers");
    if (HasFatalFailure()) return;
    // Small odd tiles: tails everywhere.
    const TileGrid odd{7, c.epilogue == Epilogue::kDequantSwigluQuant ? p.out_cols : 16};
    expect_same(want, p.run(target(), 2, &odd), p, "7x16 tiles");
    if (HasFatalFailure()) return;
    // Tall tiles (up to 384 rows: AMX passes of 32 rows and a last one of 16, K chunks).
    const TileGrid tall{256, c.epilogue == Epilogue::kDequantSwigluQuant ? p.out_cols : 64};
    expect_same(want, p.run(target(), 1, &tall), p, "256x64 tiles");
  }
};

TEST_P(GroupedGemm, DequantMatchesReferenceOnRandomShapes) {
  Rng shapes(1);
  for (int i = 0; i < 12; ++i) {
    Case c;
    const std::int64_t experts = shapes.uniform(1, 4);
    for (std::int64_t e = 0; e < experts; ++e)
      c.group_rows.push_back(shapes.uniform(0, 3) == 0 ? 0 : shapes.uniform(1, 70));
    c.k = shapes.uniform(1, 300);
    c.n = shapes.uniform(1, 150);
    c.out_dtype = i % 2 ? DType::kBF16 : DType::kFP32;
    check(c, 100 + i);
    if (HasFatalFailure()) return;
  }
}

TEST_P(GroupedGemm, EdgeShapes) {
  const std::vector<Case> cases = {
      {.group_rows = {0, 0, 0}, .k = 64, .n = 32},        // no rows at all
      {.group_rows = {1}, .k = 1, .n = 1},                // the smallest problem
      {.group_rows = {0, 1, 0, 1}, .k = 3, .n = 17},      // M = 1 groups between empty ones
      {.group_rows = {200, 1, 0, 3}, .k = 128, .n = 64},  // skewed groups
      {.group_rows = {33}, .k = 65, .n = 48},             // K just past a tile
      {.group_rows = {16, 32}, .k = 256, .n = 128},       // exact multiples of every tile
      {.group_rows = {5, 6}, .k = 1000, .n = 16, .out_dtype = DType::kBF16},
      // with 256x64 tiles, one row block of 300 rows (AMX: 9 row pairs and a single row tile)
      // over K in chunks, and a last column block of 18
      {.group_rows = {300}, .k = 1100, .n = 50},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    check(cases[i], 200 + i);
    if (HasFatalFailure()) return;
  }
}

TEST_P(GroupedGemm, ExtremeValues) {
  for (WeightType type : {WeightType::kInt8, WeightType::kInt4}) {
    for (int extreme : {1, 2}) {
      check({.group_rows = {7, 40}, .k = 2048, .n = 40, .type = type}, 300 + extreme, extreme);
      if (HasFatalFailure()) return;
    }
  }
}

// With unit scales the fp32 output is the int32 accumulator itself (|acc| < 2^24): exact.
TEST_P(GroupedGemm, Int32AccumulatorsAreExact) {
  Rng rng(7);
  Case c{.group_rows = {9, 0, 20}, .k = 500, .n = 33};
  Problem p(c, rng);
  std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
  std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
  const std::int64_t shape[] = {p.experts, c.k, c.n};
  const std::int64_t sshape[] = {p.experts, c.n};
  HP_ASSERT_OK(pack_weights(TensorView(p.w.data(), DType::kInt8, shape),
                            TensorView(p.w_scale.data(), DType::kFP32, sshape), {}, &p.packed));
  const Problem::Output got = p.run(target(), 2);
  for (std::int64_t e = 0; e < p.experts; ++e) {
    for (std::int64_t r = p.offsets[std::size_t(e)]; r < p.offsets[std::size_t(e) + 1]; ++r) {
      for (std::int64_t col = 0; col < c.n; ++col) {
        std::int32_t acc = 0;
        for (std::int64_t i = 0; i < c.k; ++i) {
          acc += std::int32_t(p.a[std::size_t(r * c.k + i)]) *
                 p.w[std::size_t((e * c.k + i) * c.n + col)];
        }
        float v;
        std::memcpy(&v, &got.out[std::size_t(r * c.n + col) * 4], 4);
        ASSERT_EQ(std::int32_t(v), acc) << "row " << r << " col " << col;
      }
    }
  }
}

TEST_P(GroupedGemm, DequantScaleMatchesReference) {
  check({.group_rows = {3, 0, 50, 1}, .k = 200, .n = 96, .epilogue = Epilogue::kDequantScale}, 400);
  if (HasFatalFailure()) return;
  check({.group_rows = {64},
         .k = 1408,
         .n = 70,
         .epilogue = Epilogue::kDequantScale,
         .out_dtype = DType::kBF16},
        401);
}

// GMM1's shapes: empty and one-row groups, tails, smooth quant, a long K.
const std::vector<Case> kSwigluCases = {
    {.group_rows = {4, 0, 37}, .k = 96, .n = 2 * 40, .epilogue = Epilogue::kDequantSwigluQuant},
    {.group_rows = {1}, .k = 64, .n = 2 * 16, .epilogue = Epilogue::kDequantSwigluQuant},
    {.group_rows = {70, 2},
     .k = 300,
     .n = 2 * 75,
     .epilogue = Epilogue::kDequantSwigluQuant,
     .smooth = true},
    {.group_rows = {20}, .k = 2048, .n = 2 * 176, .epilogue = Epilogue::kDequantSwigluQuant},
};

TEST_P(GroupedGemm, SwigluQuantMatchesReference) {
  const std::vector<Case>& cases = kSwigluCases;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    check(cases[i], 500 + i);
    if (HasFatalFailure()) return;
  }
}

// GMM1's optional second output: the pre-activation a = [gate | up] in fp32, bit for bit the
// kDequant output of the same weights packed plainly (what the backward recomputes), and the
// int8 output unchanged by storing it.
TEST_P(GroupedGemm, SwigluPreactivationIsThePlainDequantOutput) {
  std::vector<Case> cases = kSwigluCases;
  cases.push_back({.group_rows = {9, 9},  // int4 weights with per-group scales
                   .k = 512,
                   .n = 2 * 24,
                   .type = WeightType::kInt4,
                   .group_size = 128,
                   .epilogue = Epilogue::kDequantSwigluQuant});
  for (std::size_t i = 0; i < cases.size(); ++i) {
    Rng rng(800 + i);
    Problem swiglu(cases[i], rng);
    Case plain_case = cases[i];
    plain_case.epilogue = Epilogue::kDequant;
    Rng same(800 + i);
    Problem plain(plain_case, same);  // the same draws: the same a, scales and weights
    ASSERT_EQ(swiglu.w, plain.w);
    const Problem::Output want_a = plain.run(target(), 1);

    const TileGrid odd{7, swiglu.out_cols};
    for (const TileGrid* grid : {static_cast<const TileGrid*>(nullptr), &odd}) {
      for (const KernelTable* table : {&target(), &reference()}) {
        std::vector<float> preact(std::size_t(swiglu.rows * cases[i].n), -7.0f);
        const Problem::Output got = swiglu.run(*table, 2, grid, preact.data());
        expect_same(swiglu.run(*table, 1, grid), got, swiglu, "with the pre-activation stored");
        if (HasFatalFailure()) return;
        ASSERT_EQ(std::memcmp(preact.data(), want_a.out.data(), preact.size() * sizeof(float)), 0)
            << describe(cases[i]) << (grid ? ", 7-row tiles" : "")
            << (table == &reference() ? ", the reference" : "");
      }
    }
  }
}

TEST_P(GroupedGemm, W4A8MatchesReference) {
  const std::vector<Case> cases = {
      {.group_rows = {5, 0, 30}, .k = 256, .n = 48, .type = WeightType::kInt4},
      {.group_rows = {17},
       .k = 300,
       .n = 33,
       .type = WeightType::kInt4,
       .group_size = 64},  // per-group scales
      {.group_rows = {9, 9},
       .k = 512,
       .n = 2 * 24,
       .type = WeightType::kInt4,
       .group_size = 128,
       .epilogue = Epilogue::kDequantSwigluQuant},
      {.group_rows = {12},
       .k = 192,
       .n = 64,
       .type = WeightType::kInt4,
       .group_size = 64,
       .epilogue = Epilogue::kDequantScale,
       .out_dtype = DType::kBF16},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    check(cases[i], 600 + i);
    if (HasFatalFailure()) return;
  }
}

TEST_P(GroupedGemm, Int8PerGroupScalesMatchReference) {
  check({.group_rows = {10, 3}, .k = 320, .n = 40, .group_size = 128}, 700);
}

HP_INSTANTIATE_FOR_TARGETS(GroupedGemm);

}  // namespace
}  // namespace hp::kernels::testing
