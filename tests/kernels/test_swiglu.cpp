// The SwiGLU's element-wise steps of the MoE backward (swiglu, swiglu_grad): every target
// against the reference bit for bit, the reference against the formulas in double precision,
// and the argument checks of the front end.
#include <cmath>
#include <cstring>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

// Rows of 4 experts (one without rows) of GMM1's gate | up, its G, quantised h, weights and
// smooth2.
struct Gmm1Rows {
  std::vector<std::int64_t> offsets;
  std::int64_t rows, inter, experts;
  std::vector<float> a, g, h_scale, weight, smooth;
  std::vector<std::int8_t> h_q;

  Gmm1Rows(Rng& rng, std::int64_t inter_)
      : offsets(prefix_sums({3, 0, 5, 1})), rows(offsets.back()), inter(inter_), experts(4) {
    a = rng.reals(std::size_t(rows * 2 * inter), -6.0f, 6.0f);
    a[0] = -100.0f;  // exp's clamp on both sides
    a[1] = 100.0f;
    g = rng.reals(std::size_t(rows * inter), -2.0f, 2.0f);
    h_q = rng.int8s(std::size_t(rows * inter), -127, 127);
    h_scale = rng.reals(std::size_t(rows), 0.001f, 0.1f);
    weight = rng.reals(std::size_t(rows), 0.0f, 1.0f);
    smooth = rng.reals(std::size_t(experts * inter), 0.25f, 4.0f);
  }
  TensorView a_view() { return TensorView(a.data(), DType::kFP32, {rows, 2 * inter}); }
  TensorView offsets_view() { return TensorView(offsets.data(), DType::kInt64, {experts + 1}); }
  TensorView smooth_view(bool with) {
    return with ? TensorView(smooth.data(), DType::kFP32, {experts, inter}) : TensorView();
  }
  std::int64_t expert_of(std::int64_t r) const {
    std::int64_t e = 0;
    while (offsets[std::size_t(e + 1)] <= r) ++e;
    return e;
  }
};

struct GradOut {
  std::vector<std::uint16_t> da;
  std::vector<float> dw;
};

class Swiglu : public TargetTest {
 protected:
  std::vector<float> run_swiglu(const KernelTable& t, Gmm1Rows& x, bool smooth) {
    std::vector<float> h(std::size_t(x.rows * x.inter), -7.0f);
    const Status s = swiglu(t, x.a_view(), x.offsets_view(), x.smooth_view(smooth),
                            TensorView(h.data(), DType::kFP32, {x.rows, x.inter}));
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return h;
  }
  GradOut run_grad(const KernelTable& t, Gmm1Rows& x, bool smooth, bool weighted) {
    GradOut out{std::vector<std::uint16_t>(std::size_t(x.rows * 2 * x.inter), 0xFFFF),
                std::vector<float>(std::size_t(x.rows), -7.0f)};
    const Status s =
        swiglu_grad(t, {.a = x.a_view(),
                        .offsets = x.offsets_view(),
                        .smooth = x.smooth_view(smooth),
                        .g = TensorView(x.g.data(), DType::kFP32, {x.rows, x.inter}),
                        .h_q = TensorView(x.h_q.data(), DType::kInt8, {x.rows, x.inter}),
                        .h_scale = TensorView(x.h_scale.data(), DType::kFP32, {x.rows}),
                        .row_weight = weighted ? TensorView(x.weight.data(), DType::kFP32, {x.rows})
                                               : TensorView(),
                        .da = TensorView(out.da.data(), DType::kBF16, {x.rows, 2 * x.inter}),
                        .d_row_weight = TensorView(out.dw.data(), DType::kFP32, {x.rows})});
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }
};

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST_P(Swiglu, ForwardMatchesReferenceBitForBit) {
  Rng rng(41);
  for (std::int64_t inter : {1, 7, 16, 100, 768}) {
    Gmm1Rows x(rng, inter);
    for (bool smooth : {false, true}) {
      const std::vector<float> want = run_swiglu(reference(), x, smooth);
      const std::vector<float> got = run_swiglu(target(), x, smooth);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
          << "I " << inter << " smooth " << smooth;
      // The reference is the formula.
      for (std::int64_t r = 0; r < x.rows; ++r) {
        for (std::int64_t i = 0; i < inter; ++i) {
          const double g = x.a[std::size_t(r * 2 * inter + i)],
                       u = x.a[std::size_t(r * 2 * inter + inter + i)];
          const double sm = smooth ? x.smooth[std::size_t(x.expert_of(r) * inter + i)] : 1.0;
          const double h = silu(g) * u * sm;
          ASSERT_NEAR(want[std::size_t(r * inter + i)], h, 1e-5 * (std::fabs(h) + 1e-3))
              << "row " << r << " column " << i;
        }
      }
    }
  }
}

TEST_P(Swiglu, GradientMatchesReferenceBitForBit) {
  Rng rng(42);
  for (std::int64_t inter : {1, 7, 16, 100, 768}) {
    Gmm1Rows x(rng, inter);
    for (bool smooth : {false, true}) {
      for (bool weighted : {false, true}) {
        const GradOut want = run_grad(reference(), x, smooth, weighted);
        const GradOut got = run_grad(target(), x, smooth, weighted);
        ASSERT_EQ(want.da, got.da) << "I " << inter << " smooth " << smooth;
        ASSERT_EQ(0, std::memcmp(want.dw.data(), got.dw.data(), want.dw.size() * sizeof(float)))
            << "I " << inter << " smooth " << smooth;
        for (std::int64_t r = 0; r < x.rows; ++r) {
          const double w = weighted ? x.weight[std::size_t(r)] : 1.0;
          double dw = 0, magnitude = 0;
          for (std::int64_t i = 0; i < inter; ++i) {
            const double g = x.a[std::size_t(r * 2 * inter + i)],
                         u = x.a[std::size_t(r * 2 * inter + inter + i)];
            const double sm = smooth ? x.smooth[std::size_t(x.expert_of(r) * inter + i)] : 1.0;
            const double grad = x.g[std::size_t(r * inter + i)];
            const double dh = w * grad * sm, s = 1.0 / (1.0 + std::exp(-g));
            const double dg = dh * u * s * (1.0 + g * (1.0 - s)), du = dh * g * s;
            // bf16 keeps 8 significant bits.
            ASSERT_NEAR(bf16_to_float(want.da[std::size_t(r * 2 * inter + i)]), dg,
                        std::fabs(dg) / 128 + 1e-6)
                << "row " << r << " column " << i;
            ASSERT_NEAR(bf16_to_float(want.da[std::size_t(r * 2 * inter + inter + i)]), du,
                        std::fabs(du) / 128 + 1e-6)
                << "row " << r << " column " << i;
            const double term =
                grad * x.h_q[std::size_t(r * inter + i)] * x.h_scale[std::size_t(r)];
            dw += term;
            magnitude += std::fabs(term);
          }
          ASSERT_NEAR(want.dw[std::size_t(r)], dw, 1e-5 * magnitude + 1e-9) << "row " << r;
        }
      }
    }
  }
}

TEST_P(Swiglu, BadArgumentsAreNamedErrors) {
  Rng rng(43);
  Gmm1Rows x(rng, 8);
  std::vector<float> h(std::size_t(x.rows * x.inter));
  const TensorView hv(h.data(), DType::kFP32, {x.rows, x.inter});
  // a must be [rows, 2I].
  EXPECT_EQ(swiglu(target(), TensorView(x.a.data(), DType::kFP32, {x.rows, 2 * x.inter - 1}),
                   x.offsets_view(), {}, hv)
                .code(),
            ErrorCode::kShapeMismatch);
  // offsets must end at the rows.
  std::vector<std::int64_t> short_offsets = {0, 3, 3, 8, 8};
  EXPECT_EQ(swiglu(target(), x.a_view(),
                   TensorView(short_offsets.data(), DType::kInt64, {x.experts + 1}), {}, hv)
                .code(),
            ErrorCode::kShapeMismatch);
  // smooth is [E, I].
  EXPECT_EQ(swiglu(target(), x.a_view(), x.offsets_view(),
                   TensorView(x.smooth.data(), DType::kFP32, {x.experts, x.inter + 1}), hv)
                .code(),
            ErrorCode::kShapeMismatch);
  std::vector<float> da_f32(std::size_t(x.rows * 2 * x.inter));
  SwigluGradProblem p{.a = x.a_view(),
                      .offsets = x.offsets_view(),
                      .g = TensorView(x.g.data(), DType::kFP32, {x.rows, x.inter}),
                      .da = TensorView(da_f32.data(), DType::kFP32, {x.rows, 2 * x.inter})};
  EXPECT_EQ(swiglu_grad(target(), p).code(), ErrorCode::kDTypeMismatch);  // da is bf16
  std::vector<std::uint16_t> da(std::size_t(x.rows * 2 * x.inter));
  std::vector<float> dw(std::size_t(x.rows));
  p.da = TensorView(da.data(), DType::kBF16, {x.rows, 2 * x.inter});
  p.d_row_weight = TensorView(dw.data(), DType::kFP32, {x.rows});
  // d_row_weight needs the quantised h.
  EXPECT_FALSE(swiglu_grad(target(), p).is_ok());
  p.d_row_weight = {};
  EXPECT_TRUE(swiglu_grad(target(), p).is_ok());
}

HP_INSTANTIATE_FOR_TARGETS(Swiglu);

}  // namespace
}  // namespace hp::kernels::testing
