// Packing: round trips for every type and layout, the documented layout, and refusals.
#include <cstring>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

struct Weights {
  std::int64_t e, k, n, groups;
  std::vector<std::int8_t> w;
  std::vector<float> s;
  Weights(Rng& rng, std::int64_t e_, std::int64_t k_, std::int64_t n_, WeightType type,
          std::int64_t group_size)
      : e(e_), k(k_), n(n_), groups(group_size ? (k_ + group_size - 1) / group_size : 1) {
    w = type == WeightType::kInt4 ? rng.int8s(std::size_t(e * k * n), -8, 7)
                                  : rng.int8s(std::size_t(e * k * n));
    s = rng.reals(std::size_t(e * groups * n), 0.001f, 1.0f);
  }
  TensorView wv() { return TensorView(w.data(), DType::kInt8, {e, k, n}); }
  TensorView sv() { return TensorView(s.data(), DType::kFP32, {e, groups, n}); }
};

TEST(Packing, RoundTripsEveryTypeAndLayout) {
  Rng rng(21);
  for (WeightType type : {WeightType::kInt8, WeightType::kInt4}) {
    for (PackLayout layout : {PackLayout::kPlain, PackLayout::kSwigluHalves}) {
      for (std::int64_t group_size : {0, 64}) {
        Weights in(rng, 3, 130, 2 * 21, type, group_size);
        PackedWeights packed;
        HP_ASSERT_OK(pack_weights(
            in.wv(), in.sv(), {.type = type, .layout = layout, .group_size = group_size}, &packed));
        HP_ASSERT_OK(validate_packed(packed.header()));
        EXPECT_EQ(packed.header()->k_pad, 192);
        EXPECT_EQ(packed.header()->n_pad, layout == PackLayout::kPlain ? 48 : 64);
        std::vector<std::int8_t> w(in.w.size(), 0);
        std::vector<float> s(in.s.size(), 0.0f);
        HP_ASSERT_OK(unpack_weights(*packed.header(),
                                    TensorView(w.data(), DType::kInt8, {in.e, in.k, in.n}),
                                    TensorView(s.data(), DType::kFP32, {in.e, in.groups, in.n})));
        EXPECT_EQ(w, in.w);
        EXPECT_EQ(s, in.s);
      }
    }
  }
}

TEST(Packing, LayoutIsTheDocumentedOne) {
  // W[e][k][n] = k * 3 + n (mod 256 as int8): check a few packed bytes by hand.
  const std::int64_t e = 1, k = 8, n = 20;
  std::vector<std::int8_t> w(std::size_t(e * k * n));
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t c = 0; c < n; ++c) w[std::size_t(i * n + c)] = std::int8_t(i * 3 + c);
  }
  std::vector<float> s(std::size_t(n), 1.0f);
  PackedWeights packed;
  HP_ASSERT_OK(pack_weights(TensorView(w.data(), DType::kInt8, {e, k, n}),
                            TensorView(s.data(), DType::kFP32, {e, n}), {}, &packed));
  const PackedWeightsHeader& h = *packed.header();
  // Block 1 holds columns 16..31; its K row group 1 holds k = 4..7: byte (col 17, k 6) is at
  // index (17 - 16) * 4 + 2, biased by 128.
  const std::uint8_t* row = h.block(0, 1, 4);
  EXPECT_EQ(row[1 * 4 + 2], std::uint8_t(6 * 3 + 17 + 128));
  EXPECT_EQ(row[4 * 4 + 0], std::uint8_t(0 + 128));  // column 20: padding, weight 0
  EXPECT_EQ(h.value(0, 6, 17), 6 * 3 + 17);
}

TEST(Packing, StridedWeightsPackLikeContiguousOnes) {
  Rng rng(22);
  Weights in(rng, 2, 40, 24, WeightType::kInt8, 0);
  // The same weights stored [E][N][K] and viewed as [E, K, N].
  std::vector<std::int8_t> t(in.w.size());
  for (std::int64_t x = 0; x < in.e; ++x) {
    for (std::int64_t i = 0; i < in.k; ++i) {
      for (std::int64_t c = 0; c < in.n; ++c)
        t[std::size_t((x * in.n + c) * in.k + i)] = in.w[std::size_t((x * in.k + i) * in.n + c)];
    }
  }
  const std::int64_t shape[] = {in.e, in.k, in.n}, strides[] = {in.n * in.k, 1, in.k};
  PackedWeights a, b;
  HP_ASSERT_OK(pack_weights(in.wv(), in.sv(), {}, &a));
  HP_ASSERT_OK(pack_weights(TensorView(t.data(), DType::kInt8, shape, strides), in.sv(), {}, &b));
  ASSERT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(0, std::memcmp(a.header(), b.header(), a.bytes()));
}

TEST(Packing, BadInputIsRefusedWithANamedCode) {
  Rng rng(23);
  Weights in(rng, 1, 64, 6, WeightType::kInt8, 0);
  PackedWeights packed;
  EXPECT_EQ(pack_weights(in.wv(), in.sv(), {.type = WeightType::kInt4}, &packed).code(),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(pack_weights(in.wv(), in.sv(), {.group_size = 10}, &packed).code(),
            ErrorCode::kInvalidArgument);
  Weights odd(rng, 1, 64, 5, WeightType::kInt8, 0);
  EXPECT_EQ(pack_weights(odd.wv(), odd.sv(), {.layout = PackLayout::kSwigluHalves}, &packed).code(),
            ErrorCode::kShapeMismatch);
  in.s[2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(pack_weights(in.wv(), in.sv(), {}, &packed).code(), ErrorCode::kInvalidArgument);
  in.s[2] = 1.0f;
  EXPECT_EQ(
      pack_weights(in.wv(), TensorView(in.s.data(), DType::kFP32, {1, 7}), {}, &packed).code(),
      ErrorCode::kShapeMismatch);
  EXPECT_TRUE(packed.empty());
  HP_ASSERT_OK(pack_weights(in.wv(), in.sv(), {}, &packed));
  // A corrupted header is caught before a kernel reads it.
  std::vector<std::uint8_t> copy(packed.bytes());
  std::memcpy(copy.data(), packed.header(), copy.size());
  reinterpret_cast<PackedWeightsHeader*>(copy.data())->n = 7;
  EXPECT_EQ(validate_packed(reinterpret_cast<PackedWeightsHeader*>(copy.data())).code(),
            ErrorCode::kCorruptData);
  reinterpret_cast<PackedWeightsHeader*>(copy.data())->magic = 0;
  EXPECT_EQ(validate_packed(reinterpret_cast<PackedWeightsHeader*>(copy.data())).code(),
            ErrorCode::kCorruptData);
  EXPECT_EQ(validate_packed(nullptr).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hp::kernels::testing
