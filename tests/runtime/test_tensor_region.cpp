// TensorRegion: the overlap test dependency inference relies on, against a byte-by-byte
// enumeration of the views' elements.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "runtime/tensor_region.h"

namespace hp::runtime {
namespace {

// Every byte the view touches, by plain enumeration of its elements.
std::set<std::uintptr_t> bytes_of(const TensorView& v) {
  std::set<std::uintptr_t> bytes;
  std::vector<std::int64_t> index(static_cast<std::size_t>(v.ndim()), 0);
  if (v.numel() == 0) return bytes;
  for (;;) {
    std::int64_t offset = 0;
    for (int d = 0; d < v.ndim(); ++d) offset += index[static_cast<std::size_t>(d)] * v.stride(d);
    const auto start = reinterpret_cast<std::uintptr_t>(v.data()) +
                       static_cast<std::uintptr_t>(offset) * v.element_size();
    for (std::size_t b = 0; b < v.element_size(); ++b) bytes.insert(start + b);
    int d = v.ndim() - 1;
    for (; d >= 0; --d) {
      if (++index[static_cast<std::size_t>(d)] < v.dim(d)) break;
      index[static_cast<std::size_t>(d)] = 0;
    }
    if (d < 0) return bytes;
  }
}

bool really_overlap(const TensorView& a, const TensorView& b) {
  const auto x = bytes_of(a);
  for (std::uintptr_t byte : bytes_of(b)) {
    if (x.count(byte) != 0) return true;
  }
  return false;
}

TensorView view(float* base, std::int64_t offset, std::vector<std::int64_t> shape,
                std::vector<std::int64_t> strides) {
  return TensorView(base + offset, DType::kFP32, shape, strides);
}

class RuntimeTensorRegion : public ::testing::Test {
 protected:
  std::vector<float> buffer = std::vector<float>(static_cast<std::size_t>(64 * 64));
  float* base = buffer.data();
};

// A view with a zero dim has no bytes, whatever its other dims (their product may overflow).
TEST_F(RuntimeTensorRegion, AnEmptyViewOfHugeDimsHasNoBytes) {
  const std::int64_t huge = std::int64_t(1) << 40;
  for (const TensorView& v :
       {view(base, 0, {0, huge, huge}, {1, 1, 1}), view(base, 0, {huge, 0, huge}, {0, 1, 0})}) {
    ASSERT_TRUE(v.validate("v").is_ok()) << v.to_string();
    EXPECT_TRUE(TensorRegion::of(v).empty()) << v.to_string();
  }
}

TEST_F(RuntimeTensorRegion, ContiguousRangesOverlapExactlyWhenTheyShareBytes) {
  const TensorView a = view(base, 0, {16}, {1});
  const TensorView b = view(base, 16, {16}, {1});  // adjacent
  const TensorView c = view(base, 15, {4}, {1});   // straddles both
  EXPECT_FALSE(overlaps(TensorRegion::of(a), TensorRegion::of(b)));
  EXPECT_TRUE(overlaps(TensorRegion::of(a), TensorRegion::of(c)));
  EXPECT_TRUE(overlaps(TensorRegion::of(b), TensorRegion::of(c)));
  EXPECT_TRUE(TensorRegion::of(a).contiguous());
}

TEST_F(RuntimeTensorRegion, ColumnTilesOfAMatrixAreDisjointAndExact) {
  // 8 x 8 row-major matrix: columns [0, 4) and [4, 8) interleave in the bounding range but
  // share no byte.
  const TensorView left = view(base, 0, {8, 4}, {8, 1});
  const TensorView right = view(base, 4, {8, 4}, {8, 1});
  const TensorView middle = view(base, 3, {8, 2}, {8, 1});  // columns 3 and 4
  const TensorRegion l = TensorRegion::of(left), r = TensorRegion::of(right),
                     m = TensorRegion::of(middle);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(l.runs(), 8);
  EXPECT_FALSE(overlaps(l, r));
  EXPECT_TRUE(overlaps(l, m));
  EXPECT_TRUE(overlaps(r, m));
}

TEST_F(RuntimeTensorRegion, TransposedAndStridedViewsMatchEnumeration) {
  // Pairs of views over one 64 x 64 buffer, each checked against plain enumeration.
  const std::vector<TensorView> views = {
      view(base, 0, {8, 8}, {64, 1}),    // a tile
      view(base, 8, {8, 8}, {64, 1}),    // the tile to its right
      view(base, 0, {8, 8}, {1, 64}),    // the first tile, transposed
      view(base, 512, {8, 8}, {64, 1}),  // the tile below the first
      view(base, 0, {32}, {2}),          // even elements of row 0
      view(base, 1, {32}, {2}),          // odd elements of row 0
      view(base, 0, {4, 4, 4}, {128, 8, 2}),
      view(base, 2, {4, 4, 4}, {128, 8, 2}),
      view(base, 64, {4, 4, 4}, {128, 8, 2}),
      view(base, 0, {2, 3}, {0, 1}),  // broadcast over the first dim
      view(base, 0, {0, 8}, {8, 1}),  // empty
  };
  for (std::size_t i = 0; i < views.size(); ++i) {
    for (std::size_t j = 0; j < views.size(); ++j) {
      const TensorRegion a = TensorRegion::of(views[i]), b = TensorRegion::of(views[j]);
      ASSERT_TRUE(a.exact() && b.exact()) << i << " " << j;
      EXPECT_EQ(overlaps(a, b), really_overlap(views[i], views[j]))
          << "views " << i << " and " << j << ": " << a.to_string() << " / " << b.to_string();
    }
  }
}

TEST_F(RuntimeTensorRegion, InterleavedLayoutsAreConservative) {
  // Strides 1 and 2 over 4 x 4: elements overlap each other, the layout is not nested.
  const TensorView odd = view(base, 100, {4, 4}, {1, 2});
  const TensorView far_inside = view(base, 101, {1}, {1});  // a byte the view does touch
  const TensorRegion r = TensorRegion::of(odd);
  EXPECT_FALSE(r.nested());
  EXPECT_TRUE(overlaps(r, TensorRegion::of(far_inside)));
  // Outside the bounding range it is still exact "no".
  EXPECT_FALSE(overlaps(r, TensorRegion::of(view(base, 0, {100}, {1}))));
}

TEST_F(RuntimeTensorRegion, TooManyRunsIsConservativeButDisjointRangesAreNot) {
  std::vector<float> big(static_cast<std::size_t>(2 * (TensorRegion::kMaxExactRuns + 1)));
  const TensorView evens(big.data(), DType::kFP32,
                         std::vector<std::int64_t>{TensorRegion::kMaxExactRuns + 1},
                         std::vector<std::int64_t>{2});
  const TensorView odds(big.data() + 1, DType::kFP32,
                        std::vector<std::int64_t>{TensorRegion::kMaxExactRuns + 1},
                        std::vector<std::int64_t>{2});
  EXPECT_FALSE(TensorRegion::of(evens).exact());
  EXPECT_TRUE(overlaps(TensorRegion::of(evens), TensorRegion::of(odds)));  // conservative
  const TensorView elsewhere(base, DType::kFP32, {4});
  EXPECT_FALSE(overlaps(TensorRegion::of(evens), TensorRegion::of(elsewhere)));
}

TEST_F(RuntimeTensorRegion, CoversOnlyFromAContiguousOuterRegion) {
  const TensorRegion row = TensorRegion::of(view(base, 0, {64}, {1}));
  const TensorRegion part = TensorRegion::of(view(base, 8, {4, 2}, {8, 1}));
  const TensorRegion strided = TensorRegion::of(view(base, 0, {32}, {2}));
  EXPECT_TRUE(covers(row, part));
  EXPECT_FALSE(covers(part, row));
  EXPECT_FALSE(covers(strided, TensorRegion::of(view(base, 0, {1}, {1}))));
}

}  // namespace
}  // namespace hp::runtime
