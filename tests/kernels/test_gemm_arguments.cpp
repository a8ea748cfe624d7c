// The grouped GEMM's argument checks and the work splitter.
#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

class GemmArguments : public ::testing::Test {
 protected:
  void SetUp() override {
    HP_ASSERT_OK(load_target("reference", &t_));
    std::vector<std::int8_t> w(std::size_t(2 * 64 * 32), 1);
    std::vector<float> s(2 * 32, 1.0f);
    HP_ASSERT_OK(pack_weights(TensorView(w.data(), DType::kInt8, {2, 64, 32}),
                              TensorView(s.data(), DType::kFP32, {2, 32}), {}, &packed_));
    p_.a = TensorView(a_.data(), DType::kInt8, {4, 64});
    p_.a_scale = TensorView(scale_.data(), DType::kFP32, {4});
    p_.offsets = TensorView(offsets_.data(), DType::kInt64, {3});
    p_.weights = packed_.header();
    p_.out = TensorView(out_.data(), DType::kFP32, {4, 32});
  }
  ErrorCode plan(const GroupedGemmProblem& p) {
    GroupedGemmPlan plan;
    return plan_grouped_gemm(*t_, p, 1, &plan).code();
  }
  const KernelTable* t_ = nullptr;
  PackedWeights packed_;
  std::vector<std::int8_t> a_ = std::vector<std::int8_t>(4 * 64);
  std::vector<float> scale_ = std::vector<float>(4, 1.0f);
  std::vector<std::int64_t> offsets_ = {0, 1, 4};
  std::vector<float> out_ = std::vector<float>(4 * 32);
  GroupedGemmProblem p_;
};

TEST_F(GemmArguments, AValidProblemPlans) { EXPECT_EQ(plan(p_), ErrorCode::kOk); }

TEST_F(GemmArguments, BadGroupOffsetsAreNamed) {
  offsets_ = {0, 3, 2};
  EXPECT_EQ(plan(p_), ErrorCode::kInvalidArgument);
  offsets_ = {1, 2, 4};
  EXPECT_EQ(plan(p_), ErrorCode::kInvalidArgument);
  offsets_ = {0, 1, 5};
  EXPECT_EQ(plan(p_), ErrorCode::kShapeMismatch);
  GroupedGemmProblem p = p_;
  p.offsets = TensorView(offsets_.data(), DType::kInt64, {2});  // 1 expert, weights have 2
  EXPECT_EQ(plan(p), ErrorCode::kShapeMismatch);
  p.offsets = TensorView(offsets_.data(), DType::kInt32, {3});
  EXPECT_EQ(plan(p), ErrorCode::kDTypeMismatch);
}

TEST_F(GemmArguments, WrongShapesAndEpiloguesAreNamed) {
  GroupedGemmProblem p = p_;
  p.a = TensorView(a_.data(), DType::kInt8, {2, 128});
  EXPECT_EQ(plan(p), ErrorCode::kShapeMismatch);
  p = p_;
  p.out = TensorView(out_.data(), DType::kInt32, {4, 32});
  EXPECT_EQ(plan(p), ErrorCode::kDTypeMismatch);
  p = p_;
  p.epilogue = Epilogue::kDequantScale;  // without row_factor
  EXPECT_EQ(plan(p), ErrorCode::kInvalidArgument);
  p = p_;
  p.epilogue = Epilogue::kDequantSwigluQuant;  // weights not packed for SwiGLU
  EXPECT_EQ(plan(p), ErrorCode::kInvalidArgument);
  p = p_;
  p.weights = nullptr;
  EXPECT_EQ(plan(p), ErrorCode::kInvalidArgument);
  GroupedGemmPlan gp;
  const TileGrid bad{8, 20};
  EXPECT_EQ(plan_grouped_gemm(*t_, p_, 1, &gp, &bad).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(plan_grouped_gemm(*t_, p_, 0, &gp).code(), ErrorCode::kInvalidArgument);
}

TEST_F(GemmArguments, APreactivationOutsideTheSwigluEpilogueOrOfTheWrongShapeIsNamed) {
  GroupedGemmProblem p = p_;
  std::vector<float> preact(4 * 32);
  p.preact = TensorView(preact.data(), DType::kFP32, {4, 32});
  EXPECT_EQ(plan(p), ErrorCode::kInvalidArgument);  // a plain dequant has no pre-activation
  std::vector<std::int8_t> w(std::size_t(2 * 64 * 32), 1);
  std::vector<float> s(2 * 32, 1.0f);
  PackedWeights halves;
  HP_ASSERT_OK(pack_weights(TensorView(w.data(), DType::kInt8, {2, 64, 32}),
                            TensorView(s.data(), DType::kFP32, {2, 32}),
                            {.layout = PackLayout::kSwigluHalves}, &halves));
  std::vector<std::int8_t> h(4 * 16);
  std::vector<float> h_scale(4);
  p.weights = halves.header();
  p.epilogue = Epilogue::kDequantSwigluQuant;
  p.out = TensorView(h.data(), DType::kInt8, {4, 16});
  p.out_scale = TensorView(h_scale.data(), DType::kFP32, {4});
  EXPECT_EQ(plan(p), ErrorCode::kOk);
  p.preact = TensorView(preact.data(), DType::kFP32, {4, 16});  // [rows, I]: needs [rows, 2I]
  EXPECT_EQ(plan(p), ErrorCode::kShapeMismatch);
  p.preact = TensorView(preact.data(), DType::kBF16, {4, 32});
  EXPECT_EQ(plan(p), ErrorCode::kDTypeMismatch);
}

TEST(WorkSplit, BalancesSkewedExperts) {
  // One expert with 1000 rows and 30 with 2: four workers get about a quarter of the rows each.
  std::vector<std::int64_t> sizes(31, 2);
  sizes[0] = 1000;
  const std::vector<std::int64_t> offsets = prefix_sums(sizes);
  const TileSpace space{offsets.data(), 31, 0, 512, TileGrid{32, 512}};
  const std::vector<std::int64_t> bounds = split_tiles(space, 4);
  ASSERT_EQ(bounds.size(), 5u);
  EXPECT_EQ(bounds.front(), 0);
  EXPECT_EQ(bounds.back(), space.total());
  std::vector<std::int64_t> rows(4, 0);
  for (int w = 0; w < 4; ++w) {
    space.for_each(bounds[std::size_t(w)], bounds[std::size_t(w) + 1],
                   [&](const Tile& t) { rows[std::size_t(w)] += t.row_end - t.row_begin; });
  }
  for (int w = 0; w < 4; ++w) {
    EXPECT_GT(rows[std::size_t(w)], 200) << "worker " << w;
    EXPECT_LT(rows[std::size_t(w)], 330) << "worker " << w;
  }
}

TEST(WorkSplit, MoreWorkersThanTilesLeavesSomeIdle) {
  const std::vector<std::int64_t> offsets = {0, 3};
  const TileSpace space{offsets.data(), 1, 0, 16, TileGrid{16, 16}};
  const auto bounds = split_tiles(space, 3);
  EXPECT_EQ(bounds, (std::vector<std::int64_t>{0, 0, 1, 1}));
}

TEST(WorkSplit, GridShrinksForWorkers) {
  const KernelTable* t = nullptr;
  HP_ASSERT_OK(load_target("reference", &t));
  const std::vector<std::int64_t> offsets = {0, 64};
  const TileSpace space{offsets.data(), 1, 0, 2048, TileGrid{1, 1}};
  TileSpace s = space;
  s.grid = choose_grid(*t, space, false, 8);
  EXPECT_GE(s.total(), 16);
  EXPECT_EQ(s.grid.tile_n % 16, 0);
  s.grid = choose_grid(*t, space, true, 2);
  EXPECT_EQ(s.grid.tile_n, 2048);
}

}  // namespace
}  // namespace hp::kernels::testing
