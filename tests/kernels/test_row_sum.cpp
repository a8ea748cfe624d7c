// The weighted row sum (MoE combine's reduction) of every target against the reference, bit for
// bit, and the front end's argument checks.
#include <cstring>
#include <limits>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

class RowSum : public TargetTest {};

// Rows of fp32 or bf16 values as raw bytes, and their pointers.
struct Rows {
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<const void*> ptrs;
};

Rows make_rows(Rng& rng, std::int64_t n, std::int64_t cols, DType type) {
  Rows r;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::vector<float> v = rng.reals(std::size_t(cols), -4.0f, 4.0f);
    std::vector<std::uint8_t> bytes(std::size_t(cols) * dtype_size(type));
    for (std::size_t c = 0; c < v.size(); ++c) {
      if (type == DType::kBF16) {
        const std::uint16_t b = float_to_bf16(v[c]);
        std::memcpy(bytes.data() + c * 2, &b, 2);
      } else {
        std::memcpy(bytes.data() + c * 4, &v[c], 4);
      }
    }
    r.data.push_back(std::move(bytes));
  }
  for (const auto& d : r.data) r.ptrs.push_back(d.data());
  return r;
}

TEST_P(RowSum, MatchesReferenceBitForBit) {
  Rng rng(5);
  for (DType in : {DType::kFP32, DType::kBF16}) {
    for (DType out : {DType::kFP32, DType::kBF16}) {
      for (std::int64_t n : {0, 1, 3, 8}) {
        for (std::int64_t cols : {1, 15, 1024, 2500, 7168}) {
          const Rows rows = make_rows(rng, n, cols, in);
          const std::vector<float> w = rng.reals(std::size_t(n), 0.0f, 1.0f);
          for (bool weighted : {false, true}) {
            const std::span<const float> ws =
                weighted ? std::span<const float>(w) : std::span<const float>();
            std::vector<std::uint8_t> want(std::size_t(cols) * dtype_size(out), 0xAB), got(want);
            HP_ASSERT_OK(
                row_sum(reference(), rows.ptrs, in, ws, TensorView(want.data(), out, {cols})));
            HP_ASSERT_OK(row_sum(target(), rows.ptrs, in, ws, TensorView(got.data(), out, {cols})));
            ASSERT_EQ(want, got) << to_string(in) << " -> " << to_string(out) << " n=" << n
                                 << " cols=" << cols << " weighted=" << weighted;
          }
        }
      }
    }
  }
}

// The rows of a next sum to prefetch are a hint: the same bits with them, whatever they are.
TEST_P(RowSum, NextRowsChangeNothing) {
  Rng rng(6);
  for (DType in : {DType::kFP32, DType::kBF16}) {
    for (std::int64_t cols : {15, 2048, 7168}) {
      const Rows rows = make_rows(rng, 8, cols, in), next = make_rows(rng, 8, cols, in);
      std::vector<const void*> odd = {nullptr, next.ptrs[0],
                                      reinterpret_cast<const void*>(std::uintptr_t(64))};
      std::vector<float> plain(static_cast<std::size_t>(cols)), got(plain.size());
      HP_ASSERT_OK(
          row_sum(target(), rows.ptrs, in, {}, TensorView(plain.data(), DType::kFP32, {cols})));
      for (const auto& hint : {next.ptrs, odd}) {
        std::fill(got.begin(), got.end(), -1.0f);
        HP_ASSERT_OK(row_sum(target(), rows.ptrs, in, {},
                             TensorView(got.data(), DType::kFP32, {cols}), hint));
        ASSERT_EQ(std::memcmp(plain.data(), got.data(), plain.size() * sizeof(float)), 0)
            << to_string(in) << " cols=" << cols;
      }
    }
  }
}

// Rounding to bf16 at ties and NaN/infinity lanes match the reference too.
TEST_P(RowSum, SpecialValuesMatchTheReference) {
  const std::int64_t cols = 128;
  std::vector<float> a(static_cast<std::size_t>(cols)), b(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) {
    // halfway between two bf16
    const std::uint32_t tie = 0x3F808000u + std::uint32_t(c % 4) * 0x10000u;
    std::memcpy(&a[std::size_t(c)], &tie, 4);
    b[std::size_t(c)] = 0.0f;
  }
  a[3] = std::numeric_limits<float>::quiet_NaN();
  const std::uint32_t nan_payload = 0x7FC0FFFFu;  // rounding would carry into the payload
  std::memcpy(&a[5], &nan_payload, 4);
  a[17] = std::numeric_limits<float>::infinity();
  b[17] = -std::numeric_limits<float>::infinity();  // inf - inf: NaN
  a[40] = -std::numeric_limits<float>::infinity();
  a[70] = 3.0e38f;
  b[70] = 3.0e38f;  // overflows to infinity
  const void* rows[2] = {a.data(), b.data()};
  for (DType out : {DType::kFP32, DType::kBF16}) {
    std::vector<std::uint8_t> want(std::size_t(cols) * dtype_size(out)), got(want.size());
    HP_ASSERT_OK(
        row_sum(reference(), rows, DType::kFP32, {}, TensorView(want.data(), out, {cols})));
    HP_ASSERT_OK(row_sum(target(), rows, DType::kFP32, {}, TensorView(got.data(), out, {cols})));
    EXPECT_EQ(want, got) << to_string(out);
  }
}

TEST_P(RowSum, ComputesTheWeightedSumInOrder) {
  const float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {10.0f, 20.0f, 30.0f};
  const void* rows[2] = {a, b};
  const float w[2] = {0.5f, 0.25f};
  float out[3] = {};
  HP_ASSERT_OK(row_sum(target(), rows, DType::kFP32, w, TensorView(out, DType::kFP32, {3})));
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 6.0f);
  EXPECT_EQ(out[2], 9.0f);
  HP_ASSERT_OK(row_sum(target(), std::span<const void* const>(), DType::kFP32, {},
                       TensorView(out, DType::kFP32, {3})));
  EXPECT_EQ(out[0], 0.0f);  // no rows: zeros
}

TEST_P(RowSum, RejectsBadArguments) {
  const float a[4] = {};
  const void* rows[1] = {a};
  const float w[2] = {1.0f, 1.0f};
  float out[4];
  EXPECT_EQ(row_sum(target(), rows, DType::kInt8, {}, TensorView(out, DType::kFP32, {4})).code(),
            ErrorCode::kDTypeMismatch);
  EXPECT_EQ(row_sum(target(), rows, DType::kFP32, {}, TensorView(out, DType::kInt32, {4})).code(),
            ErrorCode::kDTypeMismatch);
  EXPECT_EQ(row_sum(target(), rows, DType::kFP32, w, TensorView(out, DType::kFP32, {4})).code(),
            ErrorCode::kShapeMismatch);
  EXPECT_EQ(row_sum(target(), rows, DType::kFP32, {}, TensorView(out, DType::kFP32, {2, 2})).code(),
            ErrorCode::kShapeMismatch);
  const void* null_rows[1] = {nullptr};
  EXPECT_EQ(
      row_sum(target(), null_rows, DType::kFP32, {}, TensorView(out, DType::kFP32, {4})).code(),
      ErrorCode::kInvalidArgument);
}

HP_INSTANTIATE_FOR_TARGETS(RowSum);

}  // namespace
}  // namespace hp::kernels::testing
