// dispatch_layout: counts, is_token_in_rank, -1 ids, masks, and its errors.
#include <gtest/gtest.h>

#include <vector>

#include "moe/layout.h"

namespace hp::moe {
namespace {

TEST(DispatchLayout, CountsTokensOncePerRank) {
  // 8 experts on 4 ranks (2 each); token 0 -> experts 0, 1 (rank 0 twice), 5; token 1 -> -1, 7.
  std::vector<std::int64_t> idx = {0, 1, 5, -1, 7, -1};
  DispatchLayout l;
  ASSERT_TRUE(dispatch_layout(TensorView(idx.data(), DType::kInt64, {2, 3}), 8, 4, &l).is_ok());
  EXPECT_EQ(l.tokens_per_rank, (std::vector<std::int64_t>{1, 0, 1, 1}));
  EXPECT_EQ(l.tokens_per_expert, (std::vector<std::int64_t>{1, 1, 0, 0, 0, 1, 0, 1}));
  EXPECT_TRUE(l.in_rank(0, 0));
  EXPECT_FALSE(l.in_rank(0, 1));
  EXPECT_TRUE(l.in_rank(0, 2));
  EXPECT_FALSE(l.in_rank(1, 0));
  EXPECT_TRUE(l.in_rank(1, 3));
}

TEST(DispatchLayout, MaskedTokensGoNowhere) {
  std::vector<std::int32_t> idx = {0, 3, 2, 1};
  std::vector<std::uint8_t> mask = {0, 1};
  DispatchLayout l;
  ASSERT_TRUE(dispatch_layout(TensorView(idx.data(), DType::kInt32, {2, 2}), 4, 2, &l,
                              TensorView(mask.data(), DType::kUInt8, {2}))
                  .is_ok());
  EXPECT_EQ(l.tokens_per_rank, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(l.tokens_per_expert, (std::vector<std::int64_t>{0, 1, 1, 0}));
  EXPECT_FALSE(l.in_rank(0, 0));
  EXPECT_FALSE(l.in_rank(0, 1));
}

TEST(DispatchLayout, Errors) {
  DispatchLayout l;
  std::vector<std::int64_t> out_of_range = {0, 8};
  EXPECT_EQ(
      dispatch_layout(TensorView(out_of_range.data(), DType::kInt64, {1, 2}), 8, 2, &l).code(),
      ErrorCode::kOutOfRange);
  std::vector<std::int64_t> negative = {-2, 1};
  EXPECT_EQ(dispatch_layout(TensorView(negative.data(), DType::kInt64, {1, 2}), 8, 2, &l).code(),
            ErrorCode::kOutOfRange);
  std::vector<std::int64_t> twice = {3, 3};
  EXPECT_EQ(dispatch_layout(TensorView(twice.data(), DType::kInt64, {1, 2}), 8, 2, &l).code(),
            ErrorCode::kInvalidArgument);
  std::vector<std::int64_t> ok = {0, 1};
  EXPECT_EQ(dispatch_layout(TensorView(ok.data(), DType::kInt64, {1, 2}), 6, 4, &l).code(),
            ErrorCode::kInvalidArgument);  // 6 experts on 4 ranks
  std::vector<float> floats = {0, 1};
  EXPECT_EQ(dispatch_layout(TensorView(floats.data(), DType::kFP32, {1, 2}), 8, 2, &l).code(),
            ErrorCode::kDTypeMismatch);
  EXPECT_EQ(dispatch_layout(TensorView(ok.data(), DType::kInt64, {2}), 8, 2, &l).code(),
            ErrorCode::kShapeMismatch);
}

}  // namespace
}  // namespace hp::moe
