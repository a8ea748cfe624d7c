// Quantisation and dequantisation of every target against the reference (bit-exact), and the
// argument checks of the front end.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

struct Quantized {
  std::vector<std::int8_t> q;
  std::vector<float> scale;
};

class Quantize : public TargetTest {
 protected:
  // x: rows x cols of fp32 (converted to bf16 when bf16 is set).
  Quantized run(const KernelTable& t, const std::vector<float>& x, std::int64_t rows,
                std::int64_t cols, bool bf16, const std::vector<float>* smooth,
                float static_scale) {
    std::vector<std::uint16_t> xb(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);
    Quantized out{std::vector<std::int8_t>(std::size_t(rows * cols), 99),
                  std::vector<float>(std::size_t(rows), -1.0f)};
    const TensorView xv =
        bf16 ? TensorView(xb.data(), DType::kBF16, {rows, cols})
             : TensorView(const_cast<float*>(x.data()), DType::kFP32, {rows, cols});
    const TensorView sv = smooth
                              ? TensorView(const_cast<float*>(smooth->data()), DType::kFP32, {cols})
                              : TensorView();
    const Status s = quantize(t, xv, TensorView(out.q.data(), DType::kInt8, {rows, cols}),
                              TensorView(out.scale.data(), DType::kFP32, {rows}), sv, static_scale);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }
};

TEST_P(Quantize, MatchesReferenceBitForBit) {
  Rng rng(11);
  for (std::int64_t cols : {1, 7, 16, 100, 7168}) {
    const std::int64_t rows = 9;
    std::vector<float> x = rng.reals(std::size_t(rows * cols), -3.0f, 3.0f);
    std::fill_n(x.begin() + cols, cols, 0.0f);  // row 1: all zero (scale 0, q 0)
    // huge
    for (std::int64_t c = 0; c < cols; ++c) x[std::size_t(2 * cols + c)] = c % 2 ? 1e30f : -1e30f;
    x[std::size_t(3 * cols)] = 1e-38f;  // a denormal-adjacent magnitude
    const std::vector<float> smooth = rng.reals(std::size_t(cols), 0.25f, 4.0f);
    for (bool bf16 : {false, true}) {
      for (bool with_smooth : {false, true}) {
        for (float static_scale : {0.0f, 0.02f}) {
          const auto want =
              run(reference(), x, rows, cols, bf16, with_smooth ? &smooth : nullptr, static_scale);
          const auto got =
              run(target(), x, rows, cols, bf16, with_smooth ? &smooth : nullptr, static_scale);
          ASSERT_EQ(want.q, got.q) << "cols " << cols << " bf16 " << bf16 << " smooth "
                                   << with_smooth << " static " << static_scale;
          ASSERT_EQ(0, std::memcmp(want.scale.data(), got.scale.data(), want.scale.size() * 4));
        }
      }
    }
    const auto zero = run(target(), x, rows, cols, false, nullptr, 0.0f);
    EXPECT_EQ(zero.scale[1], 0.0f);
    for (std::int64_t c = 0; c < cols; ++c) EXPECT_EQ(zero.q[std::size_t(cols + c)], 0);
  }
}

TEST_P(Quantize, FollowsTheFormula) {
  const std::vector<float> x = {1.0f, -2.54f, 0.5f, 0.0f, 2.54f, -1.27f, 0.01f, 0.0f};
  const auto got = run(target(), x, 2, 4, false, nullptr, 0.0f);
  EXPECT_FLOAT_EQ(got.scale[0], 2.54f / 127.0f);
  EXPECT_EQ(got.q[1], -127);
  EXPECT_EQ(got.q[0], 50);
  EXPECT_EQ(got.q[2], 25);
  EXPECT_EQ(got.q[4], 127);
  const auto fixed = run(target(), x, 2, 4, false, nullptr, 0.01f);  // static: clamps at 127
  EXPECT_EQ(fixed.q[1], -127);
  EXPECT_EQ(fixed.q[2], 50);
  EXPECT_EQ(fixed.scale[0], 0.01f);
}

TEST_P(Quantize, NonFiniteRowsAreNamed) {
  std::vector<float> x(6 * 32, 1.0f);
  x[3 * 32 + 5] = std::numeric_limits<float>::quiet_NaN();
  x[5 * 32] = std::numeric_limits<float>::infinity();
  std::vector<std::int8_t> q(x.size());
  std::vector<float> scale(6);
  const Status s = quantize(target(), TensorView(x.data(), DType::kFP32, {6, 32}),
                            TensorView(q.data(), DType::kInt8, {6, 32}),
                            TensorView(scale.data(), DType::kFP32, {6}));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2 row(s)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("row 3"), std::string::npos) << s.message();
}

TEST_P(Quantize, DequantizeMatchesReference) {
  Rng rng(12);
  const std::int64_t rows = 5, cols = 77;
  std::vector<std::int8_t> q = rng.int8s(std::size_t(rows * cols));
  std::vector<float> scale = rng.reals(std::size_t(rows), 0.0f, 0.1f);
  for (DType dt : {DType::kFP32, DType::kBF16}) {
    std::vector<std::uint8_t> want(std::size_t(rows * cols) * dtype_size(dt)), got(want.size());
    const TensorView qv(q.data(), DType::kInt8, {rows, cols}),
        sv(scale.data(), DType::kFP32, {rows});
    HP_ASSERT_OK(dequantize(reference(), qv, sv, TensorView(want.data(), dt, {rows, cols})));
    HP_ASSERT_OK(dequantize(target(), qv, sv, TensorView(got.data(), dt, {rows, cols})));
    EXPECT_EQ(want, got) << to_string(dt);
  }
}

HP_INSTANTIATE_FOR_TARGETS(Quantize);

// ---- argument checks (the front end, any target) --------------------------------------------

class QuantizeArguments : public ::testing::Test {
 protected:
  void SetUp() override { HP_ASSERT_OK(load_target("reference", &t_)); }
  const KernelTable* t_ = nullptr;
  std::vector<float> x_ = std::vector<float>(8, 1.0f);
  std::vector<std::int8_t> q_ = std::vector<std::int8_t>(8);
  std::vector<float> s_ = std::vector<float>(2);
};

TEST_F(QuantizeArguments, WrongShapesAndTypesAreNamed) {
  const TensorView x(x_.data(), DType::kFP32, {2, 4});
  EXPECT_EQ(quantize(*t_, x, TensorView(q_.data(), DType::kInt8, {4, 2}),
                     TensorView(s_.data(), DType::kFP32, {2}))
                .code(),
            ErrorCode::kShapeMismatch);
  EXPECT_EQ(quantize(*t_, x, TensorView(q_.data(), DType::kUInt8, {2, 4}),
                     TensorView(s_.data(), DType::kFP32, {2}))
                .code(),
            ErrorCode::kDTypeMismatch);
  EXPECT_EQ(quantize(*t_, TensorView(x_.data(), DType::kInt32, {2, 4}),
                     TensorView(q_.data(), DType::kInt8, {2, 4}),
                     TensorView(s_.data(), DType::kFP32, {2}))
                .code(),
            ErrorCode::kDTypeMismatch);
  EXPECT_EQ(
      quantize(*t_, x, TensorView(q_.data(), DType::kInt8, {2, 4}),
               TensorView(s_.data(), DType::kFP32, {2}), TensorView(s_.data(), DType::kFP32, {2}))
          .code(),
      ErrorCode::kShapeMismatch);  // smooth must have cols entries
  EXPECT_EQ(quantize(*t_, x, TensorView(q_.data(), DType::kInt8, {2, 4}),
                     TensorView(s_.data(), DType::kFP32, {2}), {}, -1.0f)
                .code(),
            ErrorCode::kInvalidArgument);
  const std::int64_t shape[] = {2, 4}, strides[] = {1, 2};  // column-major rows
  EXPECT_EQ(quantize(*t_, TensorView(x_.data(), DType::kFP32, shape, strides),
                     TensorView(q_.data(), DType::kInt8, {2, 4}),
                     TensorView(s_.data(), DType::kFP32, {2}))
                .code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hp::kernels::testing
