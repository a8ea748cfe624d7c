// The bf16 GEMMs of the backward pass against the reference. Products of bf16 values are exact
// in fp32; only the order of the fp32 sums differs between targets, so each output may differ
// from the reference by at most 2^-18 x sum_k |a_k b_k| (the documented tolerance).
#include <cmath>
#include <cstring>
#include <thread>

#include "common/aligned_allocator.h"
#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

std::vector<std::uint16_t> bf16s(Rng& rng, std::size_t n) {
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(rng.real(-2.0f, 2.0f));
  return v;
}

class Bf16Gemm : public TargetTest {
 protected:
  // The output starts `misalign` floats past a 64-byte boundary (0: aligned, where the targets
  // may store a weight gradient with non-temporal stores).
  // `grid`: the plan's tiles instead of the ones it chooses.
  std::vector<float> run(const KernelTable& t, const Bf16GemmProblem& p, int workers,
                         std::size_t out_elems, std::size_t misalign = 0,
                         const TileGrid* grid = nullptr) {
    AlignedVector<float> buffer(out_elems + misalign, -7.0f);
    float* out = buffer.data() + misalign;
    Bf16GemmProblem q = p;
    q.out = TensorView(out, DType::kFP32, p.out.shape());
    execute(t, q, workers, grid);
    return std::vector<float>(out, out + out_elems);
  }

  // Plans q (its output given) for `workers` and runs each worker on a thread of its own.
  void execute(const KernelTable& t, const Bf16GemmProblem& q, int workers,
               const TileGrid* grid = nullptr) {
    Bf16GemmPlan plan;
    const Status s = plan_bf16_gemm(t, q, workers, &plan, grid);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    std::vector<std::thread> threads;
    for (int w = 0; w < workers && s.is_ok(); ++w) {
      threads.emplace_back([&plan, w] {
        void* ws = std::aligned_alloc(64, std::max<std::uint64_t>(64, plan.workspace_bytes()));
        plan.run(w, ws);
        std::free(ws);
      });
    }
    for (auto& th : threads) th.join();
  }

  void compare(const std::vector<float>& want, const std::vector<float>& got,
               const std::vector<float>& abs_sum) {
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_LE(std::fabs(want[i] - got[i]), std::ldexp(abs_sum[i], -18) + 1e-30f)
          << "element " << i << ": reference " << want[i] << " target " << got[i];
    }
  }

  // dX[rows, hidden] = dY[rows, inter] . B_e for every expert e, with K = inter odd. B is W^T:
  // `transposed` views W [E, hidden, inter] (B's columns contiguous), otherwise W^T is stored
  // [E, inter, hidden] (B's rows contiguous); the targets pack the two differently. dY's rows
  // are padded with a NaN, which must not reach the result (pairs of K read past an odd K).
  // `groups` and `hidden` choose the tiles: whole blocks of rows and columns are accumulated in
  // the output itself, the others in the workspace.
  void input_gradient(bool transposed, std::vector<std::int64_t> groups = {5, 0, 70, 1},
                      std::int64_t hidden = 150) {
    Rng rng(31);
    const std::vector<std::int64_t> offsets = prefix_sums(groups);
    const auto experts = static_cast<std::int64_t>(groups.size());
    const std::int64_t rows = offsets.back(), inter = 37, ld = inter + 1;
    auto dy = bf16s(rng, std::size_t(rows * ld));
    for (std::int64_t r = 0; r < rows; ++r) dy[std::size_t(r * ld + inter)] = 0x7FC0;  // NaN
    auto w = bf16s(rng, std::size_t(experts * hidden * inter));
    // B_e(i, h) is w[at(e, i, h)].
    auto at = [&](std::int64_t e, std::int64_t i, std::int64_t h) {
      return std::size_t(transposed ? (e * hidden + h) * inter + i : (e * inter + i) * hidden + h);
    };
    const std::int64_t bshape[] = {experts, inter, hidden};
    const std::int64_t bstrides[] = {hidden * inter, transposed ? 1 : hidden,
                                     transposed ? inter : 1};
    Bf16GemmProblem p;
    p.kind = Bf16GemmKind::kInput;
    const std::int64_t ashape[] = {rows, inter}, astrides[] = {ld, 1};
    p.a = TensorView(dy.data(), DType::kBF16, ashape, astrides);
    p.offsets = TensorView(const_cast<std::int64_t*>(offsets.data()), DType::kInt64, {experts + 1});
    p.b = TensorView(w.data(), DType::kBF16, bshape, bstrides);
    p.out = TensorView(nullptr, DType::kFP32, {rows, hidden});
    std::vector<float> abs_sum(std::size_t(rows * hidden), 0.0f);
    for (std::int64_t e = 0; e < experts; ++e) {
      for (std::int64_t r = offsets[std::size_t(e)]; r < offsets[std::size_t(e) + 1]; ++r) {
        for (std::int64_t h = 0; h < hidden; ++h) {
          for (std::int64_t i = 0; i < inter; ++i) {
            abs_sum[std::size_t(r * hidden + h)] += std::fabs(
                bf16_to_float(dy[std::size_t(r * ld + i)]) * bf16_to_float(w[at(e, i, h)]));
          }
        }
      }
    }
    const auto want = run(reference(), p, 1, abs_sum.size());
    const auto got = run(target(), p, 1, abs_sum.size());
    compare(want, got, abs_sum);
    compare(want, run(target(), p, 3, abs_sum.size()), abs_sum);
    // B packed once into the target's panels: the same sums in the same order, bit for bit,
    // without b; on 3 workers too (tiles of whole panels).
    Bf16Panels panels;
    const Status packed = pack_bf16_panels(target(), p.b, &panels);
    ASSERT_TRUE(packed.is_ok()) << packed.to_string();
    EXPECT_EQ(panels.empty(), target().bf16_panels_bytes == nullptr);
    if (panels.empty()) return;
    Bf16GemmProblem q = p;
    q.b = TensorView();
    q.b_panels = &panels;
    EXPECT_EQ(run(target(), q, 1, abs_sum.size()), got);
    compare(want, run(target(), q, 3, abs_sum.size()), abs_sum);
  }

  // dW[e] = X_e^T dY_e (e < offsets.size() - 1) of x [rows, m] and dy [rows, n], an fp32
  // output without data (run gives it).
  static Bf16GemmProblem weight_problem(const std::vector<std::uint16_t>& x,
                                        const std::vector<std::uint16_t>& dy,
                                        const std::vector<std::int64_t>& offsets, std::int64_t m,
                                        std::int64_t n) {
    const auto experts = static_cast<std::int64_t>(offsets.size()) - 1;
    const std::int64_t rows = offsets.back();
    Bf16GemmProblem p;
    p.kind = Bf16GemmKind::kWeight;
    p.a = TensorView(const_cast<std::uint16_t*>(x.data()), DType::kBF16, {rows, m});
    p.offsets = TensorView(const_cast<std::int64_t*>(offsets.data()), DType::kInt64, {experts + 1});
    p.b = TensorView(const_cast<std::uint16_t*>(dy.data()), DType::kBF16, {rows, n});
    p.out = TensorView(nullptr, DType::kFP32, {experts, m, n});
    return p;
  }

  // dW[e] = X_e^T dY_e for groups of rows (an empty one, and one over two K chunks); m and n
  // choose the tiles: with n a multiple of the column blocks, the whole groups of rows are
  // accumulated in the output itself (and their last K chunk stored past the cache where the
  // target can and the output is aligned), the remaining rows in the workspace.
  void weight_gradient(std::int64_t m, std::int64_t n,
                       const std::vector<std::int64_t>& groups = {3, 0, 300, 1}) {
    Rng rng(32);
    const std::vector<std::int64_t> offsets = prefix_sums(groups);
    const auto experts = static_cast<std::int64_t>(groups.size());
    const std::int64_t rows = offsets.back();
    auto x = bf16s(rng, std::size_t(rows * m));
    auto dy = bf16s(rng, std::size_t(rows * n));
    const Bf16GemmProblem p = weight_problem(x, dy, offsets, m, n);
    std::vector<float> abs_sum(std::size_t(experts * m * n), 0.0f);
    for (std::int64_t e = 0; e < experts; ++e) {
      for (std::int64_t r = offsets[std::size_t(e)]; r < offsets[std::size_t(e) + 1]; ++r) {
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            abs_sum[std::size_t((e * m + i) * n + j)] +=
                std::fabs(bf16_to_float(x[std::size_t(r * m + i)]) *
                          bf16_to_float(dy[std::size_t(r * n + j)]));
          }
        }
      }
    }
    const auto want = run(reference(), p, 1, abs_sum.size());
    // An expert without rows gets a zero gradient, not stale memory.
    for (std::int64_t e = 0; e < experts; ++e) {
      if (groups[std::size_t(e)] != 0) continue;
      for (std::int64_t i = 0; i < m * n; ++i) ASSERT_EQ(want[std::size_t(e * m * n + i)], 0.0f);
    }
    const auto got = run(target(), p, 1, abs_sum.size());
    compare(want, got, abs_sum);
    compare(want, run(target(), p, 2, abs_sum.size()), abs_sum);
    compare(want, run(target(), p, 1, abs_sum.size(), 1), abs_sum);
    // Tiles of 16 columns: those starting off a target's column block pack B per tile, the
    // others read B packed once per group; the same sums in the same order either way.
    const TileGrid narrow{.tile_m = 20, .tile_n = 16};
    EXPECT_EQ(run(target(), p, 1, abs_sum.size(), 0, &narrow), got);
    EXPECT_EQ(run(target(), p, 2, abs_sum.size(), 0, &narrow), got);
  }
};

TEST_P(Bf16Gemm, PanelsAreRefusedWhereTheyDoNotFit) {
  Rng rng(5);
  auto w = bf16s(rng, 2 * 40 * 70);
  auto dy = bf16s(rng, 6 * 40);
  const std::int64_t offsets[] = {0, 2, 6};
  std::vector<float> out(6 * 70);
  Bf16Panels panels;
  ASSERT_TRUE(
      pack_bf16_panels(target(), TensorView(w.data(), DType::kBF16, {2, 40, 70}), &panels).is_ok());
  if (panels.empty()) GTEST_SKIP() << target().target << " has no bf16 panels";
  Bf16GemmProblem p{.kind = Bf16GemmKind::kInput,
                    .a = TensorView(dy.data(), DType::kBF16, {6, 40}),
                    .offsets = TensorView(const_cast<std::int64_t*>(offsets), DType::kInt64, {3}),
                    .b = TensorView(w.data(), DType::kBF16, {2, 40, 70}),
                    .out = TensorView(out.data(), DType::kFP32, {6, 70}),
                    .b_panels = &panels};
  Bf16GemmPlan plan;
  EXPECT_TRUE(plan_bf16_gemm(target(), p, 1, &plan).is_ok());
  // Another output width, another B, another table, another kind.
  Bf16GemmProblem other = p;
  other.out = TensorView(out.data(), DType::kFP32, {6, 64});
  EXPECT_EQ(plan_bf16_gemm(target(), other, 1, &plan).code(), ErrorCode::kShapeMismatch);
  Bf16Panels three;
  ASSERT_TRUE(
      pack_bf16_panels(target(), TensorView(w.data(), DType::kBF16, {3, 40, 40}), &three).is_ok());
  other = p;
  other.b_panels = &three;
  EXPECT_EQ(plan_bf16_gemm(target(), other, 1, &plan).code(), ErrorCode::kShapeMismatch);
  EXPECT_EQ(plan_bf16_gemm(reference(), p, 1, &plan).code(), ErrorCode::kInvalidArgument);
  other = p;
  other.kind = Bf16GemmKind::kWeight;
  EXPECT_EQ(plan_bf16_gemm(target(), other, 1, &plan).code(), ErrorCode::kInvalidArgument);
}

TEST_P(Bf16Gemm, InputGradientMatchesReference) { input_gradient(true); }

TEST_P(Bf16Gemm, InputGradientWithRowMajorWeightsMatchesReference) { input_gradient(false); }

TEST_P(Bf16Gemm, InputGradientOfWholeBlocksMatchesReference) {
  input_gradient(false, {6, 0, 72, 12}, 128);
  input_gradient(true, {6, 0, 72, 12}, 128);
}

TEST_P(Bf16Gemm, WeightGradientMatchesReference) { weight_gradient(45, 70); }

TEST_P(Bf16Gemm, WeightGradientOfWholeBlocksMatchesReference) {
  weight_gradient(50, 128);
  weight_gradient(48, 64);
}

// Groups of a few rows (a target may sum chunks of a few pairs on another unit than the rest),
// and one whose last K chunk is a single pair added to the first chunk's sums.
TEST_P(Bf16Gemm, WeightGradientOfFewRowsMatchesReference) {
  weight_gradient(48, 128, {1, 2, 3, 4, 5, 258, 0});
  weight_gradient(45, 70, {1, 2, 4, 258});
}

// A bf16 weight gradient (a framework's gradient of bf16 weights) is the fp32 one with each
// value rounded once, bit for bit: aligned or not, on 1 and 2 workers, over groups of one and
// of two K chunks, of a few rows and of none.
TEST_P(Bf16Gemm, WeightGradientInBf16IsTheRoundedFp32Gradient) {
  Rng rng(33);
  const std::vector<std::int64_t> offsets = prefix_sums({64, 0, 300, 16, 1, 2, 4, 258});
  const std::int64_t experts = 8, rows = offsets.back(), m = 48, n = 128;
  auto x = bf16s(rng, std::size_t(rows * m));
  auto dy = bf16s(rng, std::size_t(rows * n));
  const Bf16GemmProblem p = weight_problem(x, dy, offsets, m, n);
  const std::size_t count = std::size_t(experts * m * n);
  const std::vector<float> fp32 = run(target(), p, 1, count);
  for (int workers : {1, 2}) {
    for (std::size_t misalign : {0, 1}) {
      AlignedVector<std::uint16_t> buffer(count + misalign, 0x7FC1);
      Bf16GemmProblem q = p;
      q.out = TensorView(buffer.data() + misalign, DType::kBF16, {experts, m, n});
      execute(target(), q, workers);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(buffer[misalign + i], float_to_bf16(fp32[i]))
            << "element " << i << ", " << workers << " worker(s), misaligned by " << misalign;
      }
    }
  }
}

// A group whose B and A panels exceed the room a worker gives them (kBf16WeightPanelsMax):
// its tiles pack B per tile.
TEST_P(Bf16Gemm, WeightGradientOfAGroupTooLargeForPanelsMatchesReference) {
  weight_gradient(8, 128, {20000, 0, 5});
}

TEST_P(Bf16Gemm, InputGradientWithPartialRowGroupsMatchesReference) {
  input_gradient(false, {5, 0, 70, 1}, 128);
  input_gradient(true, {5, 0, 70, 1}, 128);
}

HP_INSTANTIATE_FOR_TARGETS(Bf16Gemm);

}  // namespace
}  // namespace hp::kernels::testing
