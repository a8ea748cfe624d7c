// Tests of hp::DType and hp::TensorView (native/common/tensor_view.h).
#include "common/tensor_view.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "printers.h"

namespace hp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Storage for views that need a non-null data pointer; never read.
alignas(64) std::byte g_storage[1 << 12];

TensorView strided(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                   void* data = g_storage) {
  return TensorView(data, dtype, shape, strides);
}

TensorView contiguous(DType dtype, const std::vector<std::int64_t>& shape, void* data = g_storage) {
  return TensorView(data, dtype, std::span<const std::int64_t>(shape));
}

// ---- DType ----

TEST(DType, NumbersAreStable) {
  EXPECT_EQ(static_cast<int>(DType::kInt8), 0);
  EXPECT_EQ(static_cast<int>(DType::kUInt8), 1);
  EXPECT_EQ(static_cast<int>(DType::kInt32), 2);
  EXPECT_EQ(static_cast<int>(DType::kInt64), 3);
  EXPECT_EQ(static_cast<int>(DType::kBF16), 4);
  EXPECT_EQ(static_cast<int>(DType::kFP16), 5);
  EXPECT_EQ(static_cast<int>(DType::kFP32), 6);
  EXPECT_EQ(static_cast<int>(DType::kFP64), 7);
  EXPECT_EQ(static_cast<int>(DType::kCount), 8);
}

TEST(DType, SizesAndNames) {
  struct Case {
    DType dtype;
    std::size_t size;
    const char* name;
  };
  const Case cases[] = {
      {DType::kInt8, 1, "int8"},   {DType::kUInt8, 1, "uint8"}, {DType::kInt32, 4, "int32"},
      {DType::kInt64, 8, "int64"}, {DType::kBF16, 2, "bf16"},   {DType::kFP16, 2, "fp16"},
      {DType::kFP32, 4, "fp32"},   {DType::kFP64, 8, "fp64"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(dtype_size(c.dtype), c.size) << c.name;
    EXPECT_EQ(to_string(c.dtype), c.name);
  }
}

TEST(DType, InvalidValues) {
  EXPECT_EQ(dtype_size(DType::kCount), 0u);
  EXPECT_EQ(dtype_size(static_cast<DType>(200)), 0u);
  EXPECT_EQ(to_string(DType::kCount), "invalid");
  EXPECT_EQ(to_string(static_cast<DType>(255)), "invalid");
}

TEST(DType, ParseRoundTrips) {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(DType::kCount); ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_TRUE(names.insert(to_string(dtype)).second) << "duplicate " << to_string(dtype);
    DType parsed = DType::kCount;
    const Status status = parse_dtype(to_string(dtype), &parsed);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(parsed, dtype);
  }
}

TEST(DType, ParseRejectsUnknownNames) {
  for (const char* name : {"float32", "FP32", "", "bf16 ", "invalid", "int"}) {
    DType parsed = DType::kInt8;
    const Status status = parse_dtype(name, &parsed);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << "'" << name << "'";
    EXPECT_THAT(status.message(), HasSubstr(std::string("'") + name + "'"));
    EXPECT_EQ(parsed, DType::kInt8) << "output changed on error";
  }
}

// ---- construction, strides, numel ----

TEST(TensorView, DefaultIsAScalarWithoutData) {
  const TensorView view;
  EXPECT_EQ(view.ndim(), 0);
  EXPECT_EQ(view.data(), nullptr);
  EXPECT_EQ(view.numel(), 1);
  // One element and no data: not valid.
  EXPECT_EQ(view.validate("t").code(), ErrorCode::kInvalidArgument);
}

TEST(TensorView, ContiguousStrides) {
  const TensorView view(g_storage, DType::kBF16, {4, 7168});
  EXPECT_EQ(view.ndim(), 2);
  EXPECT_EQ(view.dtype(), DType::kBF16);
  EXPECT_EQ(view.data(), g_storage);
  EXPECT_THAT(view.shape(), ElementsAre(4, 7168));
  EXPECT_THAT(view.strides(), ElementsAre(7168, 1));
  EXPECT_EQ(view.dim(0), 4);
  EXPECT_EQ(view.stride(0), 7168);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(view.element_size(), 2u);

  const TensorView v3(g_storage, DType::kFP32, {2, 3, 5});
  EXPECT_THAT(v3.strides(), ElementsAre(15, 5, 1));
  EXPECT_TRUE(v3.is_contiguous());
}

TEST(TensorView, ContiguousStridesFromSpan) {
  const TensorView view = contiguous(DType::kInt32, {3, 1, 2});
  EXPECT_THAT(view.strides(), ElementsAre(2, 2, 1));
  EXPECT_TRUE(view.is_contiguous());
}

TEST(TensorView, ContiguousViewWithAZeroDimIsContiguous) {
  // An empty tensor is contiguous (as in PyTorch), and the contiguous constructor must build
  // views that is_contiguous() accepts, whichever dim is 0.
  for (const auto& shape : {std::vector<std::int64_t>{0, 3}, std::vector<std::int64_t>{2, 0, 3},
                            std::vector<std::int64_t>{4, 0}}) {
    const TensorView view = contiguous(DType::kFP32, shape, nullptr);
    EXPECT_EQ(view.numel(), 0);
    EXPECT_TRUE(view.validate("t").is_ok());
    EXPECT_TRUE(view.is_contiguous()) << view.to_string();
  }
}

TEST(TensorView, StridedViewIsNotContiguous) {
  // Every other column of a 4x8 matrix.
  const TensorView view = strided(DType::kFP32, {4, 4}, {8, 2});
  ASSERT_TRUE(view.validate("t").is_ok());
  EXPECT_FALSE(view.is_contiguous());
  // A transposed view.
  EXPECT_FALSE(strided(DType::kFP32, {3, 5}, {1, 3}).is_contiguous());
  // Rows of a wider matrix.
  EXPECT_FALSE(strided(DType::kFP32, {2, 3}, {5, 1}).is_contiguous());
  // Explicit row-major strides are contiguous; the stride of a size-1 dim does not matter.
  EXPECT_TRUE(strided(DType::kFP32, {2, 3}, {3, 1}).is_contiguous());
  EXPECT_TRUE(strided(DType::kFP32, {2, 1, 3}, {3, 99, 1}).is_contiguous());
}

TEST(TensorView, Numel) {
  EXPECT_EQ(contiguous(DType::kFP32, {}).numel(), 1);
  EXPECT_EQ(contiguous(DType::kFP32, {7}).numel(), 7);
  EXPECT_EQ(contiguous(DType::kFP32, {2, 3, 4}).numel(), 24);
  EXPECT_EQ(contiguous(DType::kFP32, {2, 0, 4}).numel(), 0);
  EXPECT_EQ(strided(DType::kFP32, {4, 4}, {8, 2}).numel(), 16);
}

// ---- span_bytes ----

TEST(TensorView, SpanBytesContiguous) {
  EXPECT_EQ(contiguous(DType::kBF16, {4, 7168}).span_bytes(), 4u * 7168u * 2u);
  EXPECT_EQ(contiguous(DType::kInt64, {3}).span_bytes(), 24u);
  EXPECT_EQ(contiguous(DType::kFP32, {}).span_bytes(), 4u);  // a scalar
}

TEST(TensorView, SpanBytesStrided) {
  // Every other column of a 4x8 fp32 matrix: the last element is at 3*8 + 3*2 = 30.
  EXPECT_EQ(strided(DType::kFP32, {4, 4}, {8, 2}).span_bytes(), 31u * 4u);
  // Transposed 3x5: the last element is at 2*1 + 4*3 = 14.
  EXPECT_EQ(strided(DType::kInt8, {3, 5}, {1, 3}).span_bytes(), 15u);
}

TEST(TensorView, SpanBytesEmpty) {
  EXPECT_EQ(contiguous(DType::kFP32, {0}, nullptr).span_bytes(), 0u);
  EXPECT_EQ(contiguous(DType::kFP32, {5, 0, 3}, nullptr).span_bytes(), 0u);
  EXPECT_EQ(strided(DType::kFP32, {0, 4}, {100, 1}).span_bytes(), 0u);
}

TEST(TensorView, SpanBytesBroadcast) {
  // Stride 0 repeats one element: 1000 elements read from 4 bytes.
  EXPECT_EQ(strided(DType::kFP32, {1000}, {0}).span_bytes(), 4u);
  // One row of 8 fp16 broadcast over 6 rows.
  EXPECT_EQ(strided(DType::kFP16, {6, 8}, {0, 1}).span_bytes(), 16u);
  EXPECT_FALSE(strided(DType::kFP16, {6, 8}, {0, 1}).is_contiguous());
}

// ---- validate ----

TEST(TensorView, ValidateAcceptsGoodViews) {
  EXPECT_TRUE(contiguous(DType::kFP32, {2, 3}).validate("x").is_ok());
  EXPECT_TRUE(strided(DType::kFP32, {6, 8}, {0, 1}).validate("x").is_ok());
  EXPECT_TRUE(contiguous(DType::kFP32, {0, 3}, nullptr).validate("x").is_ok());  // empty
  EXPECT_TRUE(contiguous(DType::kFP32, std::vector<std::int64_t>(8, 1)).validate("x").is_ok());
}

TEST(TensorView, ValidateRejectsNegativeDim) {
  const Status status = strided(DType::kFP32, {2, -1}, {1, 1}).validate("weights");
  EXPECT_EQ(status.code(), ErrorCode::kShapeMismatch);
  EXPECT_THAT(status.message(), HasSubstr("weights"));
  EXPECT_THAT(status.message(), HasSubstr("-1"));
  EXPECT_EQ(contiguous(DType::kFP32, {3, -2}).validate("w").code(), ErrorCode::kShapeMismatch);
}

TEST(TensorView, ValidateRejectsNegativeStride) {
  const Status status = strided(DType::kFP32, {2, 3}, {-3, 1}).validate("input");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input"));
  EXPECT_THAT(status.message(), HasSubstr("stride"));
}

TEST(TensorView, ValidateRejectsNullDataWhenNonEmpty) {
  const Status status = contiguous(DType::kFP32, {2, 3}, nullptr).validate("out");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("out"));
  EXPECT_THAT(status.message(), HasSubstr("null"));
}

// Data must be aligned to the element size: reading an int64 at an odd address is undefined
// behaviour (and a C ABI caller's mistake worth naming). A byte type is always aligned; an
// empty view addresses nothing, so any data does.
TEST(TensorView, ValidateRejectsDataNotAlignedToTheElement) {
  alignas(8) static std::byte bytes[64];
  const TensorView odd = contiguous(DType::kInt64, {2, 3}, bytes + 4);
  const Status status = odd.validate("topk_idx");
  EXPECT_EQ(status.code(), ErrorCode::kMisaligned);
  EXPECT_THAT(status.message(), HasSubstr("topk_idx"));
  EXPECT_FALSE(odd.well_formed());
  EXPECT_FALSE(odd.dense());
  EXPECT_TRUE(contiguous(DType::kInt8, {2, 3}, bytes + 1).validate("x").is_ok());
  EXPECT_TRUE(contiguous(DType::kBF16, {2, 3}, bytes + 2).validate("x").is_ok());
  EXPECT_TRUE(contiguous(DType::kFP32, {0, 3}, bytes + 1).validate("x").is_ok());
}

TEST(TensorView, ValidateRejectsRankAboveEight) {
  const std::vector<std::int64_t> nine(9, 1);
  const TensorView view = contiguous(DType::kFP32, nine);
  const Status status = view.validate("big");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("big"));
  EXPECT_EQ(view.to_string(), "invalid tensor view");
  EXPECT_EQ(strided(DType::kFP32, nine, nine).validate("big").code(), ErrorCode::kInvalidArgument);
}

TEST(TensorView, ValidateRejectsStridesOfAnotherRank) {
  EXPECT_EQ(strided(DType::kFP32, {2, 3}, {1}).validate("t").code(), ErrorCode::kInvalidArgument);
}

// Extents whose element count or byte span overflows int64 are rejected, not wrapped.
TEST(TensorView, ValidateRejectsOverflowingExtents) {
  alignas(4) char byte = 0;
  const std::int64_t big = std::int64_t(1) << 32;
  const std::int64_t shape2[] = {big, big};
  EXPECT_EQ(TensorView(nullptr, DType::kInt8, shape2).validate("t").code(),
            ErrorCode::kInvalidArgument);
  const std::int64_t shape[] = {4, 1024}, strides[] = {std::int64_t(1) << 62, 1};
  EXPECT_EQ(TensorView(&byte, DType::kFP32, shape, strides).validate("t").code(),
            ErrorCode::kInvalidArgument);
  const std::int64_t fits[] = {1, 1024};
  EXPECT_TRUE(TensorView(&byte, DType::kFP32, fits, strides).validate("t").is_ok());
}

TEST(TensorView, ValidateRejectsInvalidDType) {
  EXPECT_EQ(contiguous(DType::kCount, {2}).validate("t").code(), ErrorCode::kDTypeMismatch);
}

// The last element at offset INT64_MAX: one past it does not fit (it wrapped before).
TEST(TensorView, ValidateRejectsAnExtentEndingAtTheLastOffset) {
  char byte = 0;
  const std::int64_t shape[] = {2}, strides[] = {INT64_MAX};
  const TensorView view(&byte, DType::kInt8, shape, strides);
  EXPECT_EQ(view.validate("t").code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(view.well_formed());
}

// well_formed() is validate()'s verdict, over views good and bad in every way validate checks;
// a view is dense() exactly when it is well formed, has elements and row-major strides (its
// answers then come from the constructor, and must be those of the dims).
TEST(TensorView, WellFormedAgreesWithValidate) {
  std::mt19937_64 rng(5);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t sizes[] = {-1,       0, 1, 2, 7, std::int64_t(1) << 31, std::int64_t(1) << 40,
                                INT64_MAX};
  int good = 0, bad = 0, dense = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const auto dtype = static_cast<DType>(pick(0, static_cast<int>(DType::kCount)));
    std::vector<std::int64_t> shape(static_cast<std::size_t>(pick(0, 9)));
    std::vector<std::int64_t> strides(pick(0, 9) == 0 ? shape.size() + 1 : shape.size());
    for (std::int64_t& d : shape) d = pick(0, 5) == 0 ? sizes[pick(0, 7)] : pick(1, 8);
    for (std::int64_t& s : strides) s = pick(0, 5) == 0 ? sizes[pick(0, 7)] : pick(0, 64);
    void* data = pick(0, 9) == 0 ? nullptr : g_storage + pick(0, 9) / 8;  // some misaligned
    const TensorView view = pick(0, 1) == 0
                                ? TensorView(data, dtype, std::span<const std::int64_t>(shape))
                                : TensorView(data, dtype, shape, strides);
    const Status status = view.validate("t");
    ASSERT_EQ(view.well_formed(), status.is_ok()) << view.to_string() << ": " << status.message();
    ASSERT_NE(status.code(), ErrorCode::kInternal) << status.message();
    (status.is_ok() ? good : bad) += 1;
    if (!status.is_ok()) {
      ASSERT_FALSE(view.dense()) << view.to_string();
      continue;
    }
    // A good view's numel fits (validate checked it, outermost dim first); an empty one may
    // hold dims whose product overflows after its zero, so it is not multiplied out here.
    bool empty = false;
    for (int i = 0; i < view.ndim(); ++i) empty |= view.dim(i) == 0;
    std::int64_t numel = empty ? 0 : 1, expected = 1;
    bool row_major = true;
    for (int i = view.ndim() - 1; !empty && i >= 0; --i) {
      row_major &= view.dim(i) == 1 || view.stride(i) == expected;
      expected *= view.dim(i);
      numel *= view.dim(i);
    }
    ASSERT_EQ(view.numel(), numel) << view.to_string();
    ASSERT_EQ(view.is_contiguous(), empty || row_major) << view.to_string();
    ASSERT_EQ(view.dense(), !empty && row_major) << view.to_string();
    if (!view.dense()) continue;
    ++dense;
    ASSERT_EQ(view.span_bytes(), static_cast<std::size_t>(numel) * view.element_size());
  }
  EXPECT_GT(good, 1000);
  EXPECT_GT(bad, 1000);
  EXPECT_GT(dense, 1000);
}

// A contiguous view whose strides would overflow int64 has no elements (or fails validate for
// its extent): its strides saturate instead of wrapping negative, so an empty one is accepted.
TEST(TensorView, AnEmptyViewOfHugeDimsIsAccepted) {
  const std::int64_t huge = std::int64_t(1) << 62;
  const TensorView view(g_storage, DType::kFP32, {0, 3, huge});
  EXPECT_TRUE(view.validate("t").is_ok()) << view.validate("t").message();
  EXPECT_TRUE(view.well_formed());
  EXPECT_EQ(view.numel(), 0);
  EXPECT_EQ(view.span_bytes(), 0u);
  EXPECT_FALSE(view.dense());
  for (std::int64_t stride : view.strides()) EXPECT_GE(stride, 0);
  const TensorView too_big(g_storage, DType::kFP32, {3, huge});
  EXPECT_FALSE(too_big.well_formed());
  EXPECT_EQ(too_big.validate("t").code(), ErrorCode::kInvalidArgument);
}

// with_data: the same view over other memory, any rank error kept.
TEST(TensorView, WithDataKeepsTheLayoutAndTheRankError) {
  const TensorView no_data(nullptr, DType::kFP32, {4, 16});
  EXPECT_FALSE(no_data.well_formed());
  const TensorView moved = no_data.with_data(g_storage);
  EXPECT_EQ(moved.data(), static_cast<void*>(g_storage));
  EXPECT_TRUE(moved.dense());
  EXPECT_EQ(moved.to_string(), no_data.to_string());
  const TensorView bad_rank(nullptr, DType::kFP32,
                            std::vector<std::int64_t>(TensorView::kMaxDims + 1, 1));
  EXPECT_FALSE(bad_rank.with_data(g_storage).well_formed());
  EXPECT_FALSE(bad_rank.with_data(g_storage).dense());
}

TEST(TensorView, InvalidRankViewKeepsAccessorsInBounds) {
  // A rank-9 view is invalid, but its noexcept accessors must not reach past the 8-entry
  // shape/stride arrays: shape() and strides() are spans over them, and is_contiguous() and
  // span_bytes() index them up to ndim().
  const TensorView view = contiguous(DType::kFP32, std::vector<std::int64_t>(9, 1));
  EXPECT_LE(view.shape().size(), std::size_t(TensorView::kMaxDims));
  EXPECT_LE(view.strides().size(), std::size_t(TensorView::kMaxDims));
}

// copy_to and copy_over: what a copy gives, over a view of another rank, for every kind of view
// (dense, strided, empty, without data, of a rank error); copy_to zeroes the dims past ndim().
TEST(TensorView, CopyToAndCopyOverGiveWhatACopyGives) {
  const std::vector<TensorView> views = {
      TensorView(),
      contiguous(DType::kInt32, {5}),
      contiguous(DType::kBF16, {2, 3, 4, 5}),
      TensorView(g_storage, DType::kFP32, std::vector<std::int64_t>{4, 3},
                 std::vector<std::int64_t>{1, 4}),
      contiguous(DType::kInt8, {3, 0}),
      TensorView(nullptr, DType::kFP32, {7, 7}),
      contiguous(DType::kFP32, std::vector<std::int64_t>(TensorView::kMaxDims + 1, 1)),
      contiguous(DType::kFP64, std::vector<std::int64_t>(TensorView::kMaxDims, 2)),
  };
  for (const TensorView& from : views) {
    for (const TensorView& over : views) {
      for (const bool zeroing : {true, false}) {
        TensorView to = over;
        if (zeroing) {
          from.copy_to(&to);
        } else {
          from.copy_over(&to);
        }
        SCOPED_TRACE(from.to_string() + " over " + over.to_string() +
                     (zeroing ? " (copy_to)" : " (copy_over)"));
        EXPECT_EQ(to.data(), from.data());
        EXPECT_EQ(to.dtype(), from.dtype());
        EXPECT_EQ(to.to_string(), from.to_string());
        EXPECT_EQ(to.dense(), from.dense());
        EXPECT_EQ(to.well_formed(), from.well_formed());
        EXPECT_EQ(to.numel(), from.numel());
        EXPECT_EQ(to.span_bytes(), from.span_bytes());
        EXPECT_EQ(to.is_contiguous(), from.is_contiguous());
        for (int i = 0; i < (zeroing ? TensorView::kMaxDims : to.ndim()); ++i) {
          EXPECT_EQ(to.dim(i), from.dim(i)) << i;
          EXPECT_EQ(to.stride(i), from.stride(i)) << i;
        }
      }
    }
    TensorView self = from;
    self.copy_to(&self);
    EXPECT_EQ(self.to_string(), from.to_string());
  }
}

// ---- expect_shape / expect_dtype ----

TEST(TensorView, ExpectShapeExact) {
  const TensorView view(g_storage, DType::kFP32, {4, 16, 8});
  EXPECT_TRUE(view.expect_shape("x", {4, 16, 8}).is_ok());
}

TEST(TensorView, ExpectShapeWildcards) {
  const TensorView view(g_storage, DType::kFP32, {4, 16, 8});
  EXPECT_TRUE(view.expect_shape("x", {-1, 16, 8}).is_ok());
  EXPECT_TRUE(view.expect_shape("x", {4, -1, -1}).is_ok());
  EXPECT_TRUE(view.expect_shape("x", {-1, -1, -1}).is_ok());
}

TEST(TensorView, ExpectShapeMismatch) {
  const TensorView view(g_storage, DType::kFP32, {4, 16, 8});
  const Status size = view.expect_shape("x", {4, 15, -1});
  EXPECT_EQ(size.code(), ErrorCode::kShapeMismatch);
  EXPECT_THAT(size.message(), HasSubstr("x"));
  EXPECT_THAT(size.message(), HasSubstr("[4, 16, 8]"));
  EXPECT_THAT(size.message(), HasSubstr("[4, 15, -1]"));
  // A rank mismatch fails even with wildcards.
  EXPECT_EQ(view.expect_shape("x", {-1, -1}).code(), ErrorCode::kShapeMismatch);
  EXPECT_EQ(view.expect_shape("x", {-1, -1, -1, -1}).code(), ErrorCode::kShapeMismatch);
  EXPECT_EQ(view.expect_shape("x", {}).code(), ErrorCode::kShapeMismatch);
}

TEST(TensorView, ExpectShapeValidatesFirst) {
  const TensorView view = contiguous(DType::kFP32, {2, 2}, nullptr);
  EXPECT_EQ(view.expect_shape("x", {2, 2}).code(), ErrorCode::kInvalidArgument);
}

TEST(TensorView, ExpectDType) {
  const TensorView view(g_storage, DType::kBF16, {2});
  EXPECT_TRUE(view.expect_dtype("h", DType::kBF16).is_ok());
  const Status status = view.expect_dtype("h", DType::kFP32);
  EXPECT_EQ(status.code(), ErrorCode::kDTypeMismatch);
  EXPECT_THAT(status.message(), HasSubstr("h"));
  EXPECT_THAT(status.message(), HasSubstr("bf16"));
  EXPECT_THAT(status.message(), HasSubstr("fp32"));
}

// ---- to_string ----

TEST(TensorView, ToString) {
  EXPECT_EQ(contiguous(DType::kBF16, {4, 7168}).to_string(), "bf16[4, 7168] strides [7168, 1]");
  EXPECT_EQ(strided(DType::kInt8, {3, 5}, {1, 3}).to_string(), "int8[3, 5] strides [1, 3]");
  EXPECT_EQ(contiguous(DType::kFP32, {}).to_string(), "fp32[] strides []");
}

}  // namespace
}  // namespace hp
