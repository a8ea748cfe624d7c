// The staged MoE layer (dispatch -> GMM1 + SwiGLU -> GMM2 -> combine) on every rank of a
// threads, shm or mpi job, against the plain quantised reference (the same math: close to
// rounding) and the float reference (within quantisation error). Every rank makes every
// expert's weights and its own tokens from seeds.
#include <gtest/gtest.h>

#include <tuple>

#include <limits>

#include <cmath>
#include <random>
#include <vector>

#include "moe/layer_weights.h"
#include "moe/moe_layer.h"
#include "moe/moe_reference.h"
#include "moe/routing_inputs.h"
#include "shmem/scenario.h"

namespace hp::moe {
namespace {

using hp::moe::testing::all_mapped;
using hp::moe::testing::make_weights;
using hp::moe::testing::relative_error;
using hp::moe::testing::Weights;
using hp::shmem::testing::run_scenario;

struct Shape {
  std::int64_t hidden = 64, inter = 48, experts_per_rank = 2, topk = 3, tokens = 20;
  int vector_cores = 0;
  bool masked = false;
  std::int64_t shared_inter = 0;  // > 0: a shared expert
  bool smooth = false;            // smooth-quant scales
  int cube_cores = 1;             // of the chip (with vector_cores > 0)
  LayerPath path = LayerPath::kAuto;
};

// Smooth-quant scales in [0.5, 2): smooth1 [H], smooth2 [E, I] (every expert's), shared [1, Is].
struct Smooth {
  std::vector<float> s1, s2, shared;
};
Smooth make_smooth(std::int64_t hidden, std::int64_t inter, std::int64_t experts,
                   std::int64_t shared_inter) {
  Smooth s;
  std::mt19937 rng(99);
  auto fill = [&](std::vector<float>* v, std::int64_t n) {
    v->resize(std::size_t(n));
    for (auto& x : *v) x = 0.5f + 1.5f * float(rng() % 1000) / 1000.0f;
  };
  fill(&s.s1, hidden);
  fill(&s.s2, experts * inter);
  fill(&s.shared, std::max<std::int64_t>(shared_inter, 1));
  return s;
}

Status check_layer(const Shape& s, CommKind comm) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  if (comm == CommKind::kWindow && !all_mapped()) return Status::ok();
  const std::int64_t experts = s.experts_per_rank * ranks, local = s.experts_per_rank;
  const Weights w = make_weights(s.hidden, s.inter, experts);
  // The shared expert: one more expert of its own I, the same on every rank.
  const Weights sw = make_weights(s.hidden, std::max<std::int64_t>(s.shared_inter, 1), 1);
  const std::int64_t si = s.shared_inter;
  const auto shared_view = [&](const void* data, DType type,
                               std::initializer_list<std::int64_t> shape) {
    return si > 0 ? TensorView(const_cast<void*>(data), type, shape) : TensorView();
  };
  const std::size_t w1_per = std::size_t(s.hidden * 2 * s.inter),
                    w2_per = std::size_t(s.inter * s.hidden);
  std::unique_ptr<hp::platform::Chip> chip;
  if (s.vector_cores > 0) {
    HP_EXPECT_OK(hp::platform::Chip::create(
        {.num_cube = s.cube_cores, .num_vector = s.vector_cores}, &chip));
  }
  const Smooth sm = make_smooth(s.hidden, s.inter, experts, si);
  auto smooth_view = [&](const std::vector<float>& v, std::int64_t offset,
                         std::initializer_list<std::int64_t> shape) {
    return s.smooth ? TensorView(const_cast<float*>(v.data()) + offset, DType::kFP32, shape)
                    : TensorView();
  };
  std::unique_ptr<MoeLayer> layer;
  const auto* w1 = w.w1.data() + std::size_t(me * local) * w1_per;
  const auto* w2 = w.w2.data() + std::size_t(me * local) * w2_per;
  HP_RETURN_IF_ERROR(MoeLayer::create(
      {.hidden = s.hidden,
       .intermediate = s.inter,
       .num_experts = experts,
       .topk = s.topk,
       .max_tokens_per_rank = s.tokens + ranks,
       .shared_intermediate = si,
       .comm = comm,
       .chip = chip.get(),
       .path = s.path},
      {.w1 = TensorView(const_cast<std::int8_t*>(w1), DType::kInt8, {local, s.hidden, 2 * s.inter}),
       .w1_scale = TensorView(const_cast<float*>(w.s1.data()) + me * local * 2 * s.inter,
                              DType::kFP32, {local, 2 * s.inter}),
       .w2 = TensorView(const_cast<std::int8_t*>(w2), DType::kInt8, {local, s.inter, s.hidden}),
       .w2_scale = TensorView(const_cast<float*>(w.s2.data()) + me * local * s.hidden, DType::kFP32,
                              {local, s.hidden}),
       .shared_w1 = shared_view(sw.w1.data(), DType::kInt8, {1, s.hidden, 2 * si}),
       .shared_w1_scale = shared_view(sw.s1.data(), DType::kFP32, {1, 2 * si}),
       .shared_w2 = shared_view(sw.w2.data(), DType::kInt8, {1, si, s.hidden}),
       .shared_w2_scale = shared_view(sw.s2.data(), DType::kFP32, {1, s.hidden}),
       .smooth1 = smooth_view(sm.s1, 0, {s.hidden}),
       .smooth2 = smooth_view(sm.s2, me * local * s.inter, {local, s.inter}),
       .shared_smooth2 = si > 0 ? smooth_view(sm.shared, 0, {1, si}) : TensorView()},
      &layer));
  // This rank's tokens: normal x, distinct experts (some -1), softmax-like weights.
  const std::int64_t T = s.tokens + me;
  std::mt19937 rng(1000 + std::uint32_t(me));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(T * s.hidden)), weights(std::size_t(T * s.topk));
  std::vector<std::int64_t> idx(std::size_t(T * s.topk));
  std::vector<std::uint8_t> mask(std::size_t(T), 1);
  for (auto& v : x) v = normal(rng);
  std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::size_t e = 0; e < order.size(); ++e) order[e] = std::int64_t(e);
    std::shuffle(order.begin(), order.end(), rng);
    float sum = 0;
    for (std::int64_t k = 0; k < s.topk; ++k) {
      idx[std::size_t(t * s.topk + k)] = (t % 5 == 1 && k == 0) ? -1 : order[std::size_t(k)];
      sum += weights[std::size_t(t * s.topk + k)] = 0.2f + float(rng() % 80) / 100.0f;
    }
    for (std::int64_t k = 0; k < s.topk; ++k) weights[std::size_t(t * s.topk + k)] /= sum;
    if (s.masked && t % 4 == 3) mask[std::size_t(t)] = 0;
  }
  const TensorView xv(x.data(), DType::kFP32, {T, s.hidden}),
      iv(idx.data(), DType::kInt64, {T, s.topk}), wv(weights.data(), DType::kFP32, {T, s.topk}),
      mv = s.masked ? TensorView(mask.data(), DType::kUInt8, {T}) : TensorView();
  std::vector<float> y(std::size_t(T * s.hidden), -1.0f), y_quant(y.size()), y_float(y.size());
  for (int call = 0; call < 2; ++call) {  // twice: buffers and plans are reused
    HP_RETURN_IF_ERROR(
        layer->forward(xv, iv, wv, TensorView(y.data(), DType::kFP32, {T, s.hidden}), mv));
  }
  // The caller's workspace, poisoned first, gives the same y (every region is written before
  // it is read); one byte short on rank 0 fails every rank.
  std::vector<std::uint8_t> storage(layer->workspace_bytes() + 64, 0xAB);
  void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                     ~std::uintptr_t(63));
  std::vector<float> y_caller(y.size(), -2.0f);
  HP_RETURN_IF_ERROR(layer->forward(xv, iv, wv,
                                    TensorView(y_caller.data(), DType::kFP32, {T, s.hidden}), ws,
                                    layer->workspace_bytes(), mv));
  // The path: deep with a 1:2 chip and several experts per rank (unless forced), else staged.
  const bool deep_chip = s.vector_cores == 2 * s.cube_cores;
  EXPECT_EQ(layer->deep(),
            s.path == LayerPath::kDeep || (s.path == LayerPath::kAuto && deep_chip && local > 1));
  if (layer->deep()) {
    EXPECT_GE(layer->last_times().overlap, 0.0);
  }
  EXPECT_EQ(y_caller, y);
  const Status short_ws =
      layer->forward(xv, iv, wv, TensorView(y_caller.data(), DType::kFP32, {T, s.hidden}), ws,
                     layer->workspace_bytes() - (me == 0 ? 1 : 0), mv);
  EXPECT_EQ(short_ws.code(), me == 0 ? ErrorCode::kInvalidArgument : ErrorCode::kAborted)
      << short_ws.to_string();
  EXPECT_EQ(layer->workspace_bytes(), std::uint64_t(layer->plan().total_bytes));
  const MoeReferenceArgs ref{
      .w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8,
                       {experts, s.hidden, 2 * s.inter}),
      .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {experts, 2 * s.inter}),
      .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8,
                       {experts, s.inter, s.hidden}),
      .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {experts, s.hidden}),
      .shared_w1 = shared_view(sw.w1.data(), DType::kInt8, {1, s.hidden, 2 * si}),
      .shared_w1_scale = shared_view(sw.s1.data(), DType::kFP32, {1, 2 * si}),
      .shared_w2 = shared_view(sw.w2.data(), DType::kInt8, {1, si, s.hidden}),
      .shared_w2_scale = shared_view(sw.s2.data(), DType::kFP32, {1, s.hidden}),
      .x = xv,
      .topk_idx = iv,
      .topk_weights = wv,
      .x_active_mask = mv,
      .y = TensorView(y_quant.data(), DType::kFP32, {T, s.hidden}),
      .smooth1 = smooth_view(sm.s1, 0, {s.hidden}),
      .smooth2 = smooth_view(sm.s2, 0, {experts, s.inter}),
      .shared_smooth2 = si > 0 ? smooth_view(sm.shared, 0, {1, si}) : TensorView()};
  HP_RETURN_IF_ERROR(moe_reference_quantized(ref));
  MoeReferenceArgs ref_float = ref;
  ref_float.y = TensorView(y_float.data(), DType::kFP32, {T, s.hidden});
  HP_RETURN_IF_ERROR(moe_reference_float(ref_float));
  // The same quantised math up to fp32 summation order and the odd requantisation flip.
  EXPECT_LT(relative_error(y, y_quant), 2e-3) << "rank " << me;
  // Quantising activations to int8 twice costs about a percent.
  EXPECT_LT(relative_error(y, y_float), 4e-2) << "rank " << me;
  EXPECT_GT(relative_error(y_quant, y_float), 0.0);  // the references really differ
  for (std::int64_t t = 0; t < T; ++t) {
    if (mask[std::size_t(t)] == 0) {
      for (std::int64_t c = 0; c < s.hidden; ++c) EXPECT_EQ(y[std::size_t(t * s.hidden + c)], 0.0f);
    }
  }
  return layer->destroy();
}

class MoeLayerTest : public ::testing::TestWithParam<CommKind> {};

TEST_P(MoeLayerTest, SeveralExpertsPerRank) {
  run_scenario([&] { return check_layer(Shape{}, GetParam()); });
}
TEST_P(MoeLayerTest, OneExpertPerRankMasked) {
  run_scenario([&] {
    return check_layer(Shape{.experts_per_rank = 1, .topk = 1, .masked = true}, GetParam());
  });
}
TEST_P(MoeLayerTest, WithASharedExpertMasked) {
  run_scenario([&] { return check_layer(Shape{.masked = true, .shared_inter = 40}, GetParam()); });
}
TEST_P(MoeLayerTest, SmoothQuantWithASharedExpert) {
  run_scenario([&] { return check_layer(Shape{.shared_inter = 40, .smooth = true}, GetParam()); });
}
TEST_P(MoeLayerTest, OnAChip) {  // 1:2, two experts per rank: the deep-fuse path
  run_scenario([&] {
    return check_layer(Shape{.hidden = 128, .inter = 64, .vector_cores = 2}, GetParam());
  });
}
TEST_P(MoeLayerTest, StagedOnAChip) {
  run_scenario([&] {
    return check_layer(
        Shape{.hidden = 128, .inter = 64, .vector_cores = 2, .path = LayerPath::kStaged},
        GetParam());
  });
}
TEST_P(MoeLayerTest, DeepOnTwoCubesMaskedWithASharedExpert) {
  run_scenario([&] {
    return check_layer(Shape{.hidden = 128,
                             .inter = 64,
                             .experts_per_rank = 3,
                             .vector_cores = 4,
                             .masked = true,
                             .shared_inter = 40,
                             .smooth = true,
                             .cube_cores = 2},
                       GetParam());
  });
}
TEST_P(MoeLayerTest, DeepWithOneExpertPerRank) {  // forced: the auto choice would be staged
  run_scenario([&] {
    return check_layer(
        Shape{.experts_per_rank = 1, .topk = 1, .vector_cores = 2, .path = LayerPath::kDeep},
        GetParam());
  });
}
// A capacity factor below the load: the layer's buffer grows (the same y as lossless), or,
// without growth, every rank fails with OUT_OF_MEMORY and the layer stays usable for a batch
// that fits. Every token goes to expert 0 (rank 0 receives everything).
TEST_P(MoeLayerTest, CapacityFactorGrowsOrFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const std::int64_t H = 64, I = 32, T = 8, local = 1;
    const Weights w = make_weights(H, I, local);
    const ExpertWeights weights{
        .w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8, {local, H, 2 * I}),
        .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {local, 2 * I}),
        .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8, {local, I, H}),
        .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {local, H})};
    std::vector<float> x(std::size_t(T * H)), wts(std::size_t(T), 1.0f), y(x.size()),
        y_lossless(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 9) - 4) / 4;
    std::vector<std::int64_t> to_zero(std::size_t(T), 0),
        to_own(std::size_t(T), hp::shmem::my_pe());
    auto run = [&](double factor, bool grow, std::vector<std::int64_t>& idx,
                   std::vector<float>* out) -> Status {
      std::unique_ptr<MoeLayer> layer;
      HP_RETURN_IF_ERROR(MoeLayer::create({.hidden = H,
                                           .intermediate = I,
                                           .num_experts = ranks,
                                           .topk = 1,
                                           .max_tokens_per_rank = T,
                                           .comm = GetParam(),
                                           .capacity_factor = factor,
                                           .grow_on_overflow = grow},
                                          weights, &layer));
      const auto view = [&](std::vector<std::int64_t>& v) {
        return TensorView(v.data(), DType::kInt64, {T, 1});
      };
      Status s = layer->forward(TensorView(x.data(), DType::kFP32, {T, H}), view(idx),
                                TensorView(wts.data(), DType::kFP32, {T, 1}),
                                TensorView(out->data(), DType::kFP32, {T, H}));
      // the layer stays usable: each rank's tokens to its own expert fit
      if (!s.is_ok() && !grow) {
        EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory) << s.to_string();
        HP_EXPECT_OK(layer->forward(TensorView(x.data(), DType::kFP32, {T, H}), view(to_own),
                                    TensorView(wts.data(), DType::kFP32, {T, 1}),
                                    TensorView(out->data(), DType::kFP32, {T, H})));
        s = Status::error(ErrorCode::kOutOfMemory, "as expected");
      }
      const Status d = layer->destroy();
      return s.is_ok() ? d : s;
    };
    HP_RETURN_IF_ERROR(run(0.0, true, to_zero, &y_lossless));
    HP_RETURN_IF_ERROR(run(1.0, true, to_zero, &y));
    EXPECT_EQ(y, y_lossless);
    if (ranks > 1) {
      EXPECT_EQ(run(1.0, false, to_zero, &y).code(), ErrorCode::kOutOfMemory);
    }
    return Status::ok();
  });
}

// Rank 0 asks for the deep path without a 1:2 chip: FAILED_PRECONDITION there, and every
// other rank fails too (INVALID_ARGUMENT: the ranks' configs disagree) instead of waiting.
TEST_P(MoeLayerTest, DeepWithoutAOneToTwoChipIsRefused) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Weights w = make_weights(64, 32, 1);
    std::unique_ptr<MoeLayer> layer;
    const Status st = MoeLayer::create(
        {.hidden = 64,
         .intermediate = 32,
         .num_experts = ranks,
         .topk = 1,
         .max_tokens_per_rank = 8,
         .comm = GetParam(),
         .path = me == 0 ? LayerPath::kDeep : LayerPath::kAuto},
        {.w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8, {1, 64, 64}),
         .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {1, 64}),
         .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8, {1, 32, 64}),
         .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {1, 64})},
        &layer);
    EXPECT_EQ(st.code(), me == 0 ? ErrorCode::kFailedPrecondition : ErrorCode::kInvalidArgument)
        << st.to_string();
    return Status::ok();
  });
}

// Sizes past the limits (buffer_config.h): INVALID_ARGUMENT on every rank, before any shape
// is computed from them (2 x INT64_MAX intermediate would overflow).
TEST_P(MoeLayerTest, SizesPastTheLimitsAreRejected) {
  run_scenario([&]() -> Status {
    const int ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Weights w = make_weights(64, 32, 1);
    const auto huge = std::numeric_limits<std::int64_t>::max();
    for (auto [hidden, intermediate, shared] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t>{huge, 32, 0},
          {64, huge, 0},
          {64, 32, huge}}) {
      std::unique_ptr<MoeLayer> layer;
      const Status st = MoeLayer::create(
          {.hidden = hidden,
           .intermediate = intermediate,
           .num_experts = ranks,
           .topk = 1,
           .max_tokens_per_rank = 8,
           .shared_intermediate = shared,
           .comm = GetParam()},
          {.w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8, {1, 64, 64}),
           .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {1, 64}),
           .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8, {1, 32, 64}),
           .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {1, 64})},
          &layer);
      EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
      EXPECT_EQ(layer, nullptr);
    }
    return Status::ok();
  });
}

// TENSOR_LIST: weights as one tensor per local expert give the same y as stacked weights.
TEST_P(MoeLayerTest, TensorListMatchesStackedWeights) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Shape s;
    const std::int64_t local = s.experts_per_rank, H = s.hidden, I = s.inter, T = 10;
    const Weights w = make_weights(s.hidden, s.inter, local);
    const MoeLayerConfig config{.hidden = H,
                                .intermediate = I,
                                .num_experts = local * ranks,
                                .topk = 2,
                                .max_tokens_per_rank = T,
                                .comm = GetParam()};
    ExpertWeights stacked{
        .w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8, {local, H, 2 * I}),
        .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {local, 2 * I}),
        .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8, {local, I, H}),
        .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {local, H})};
    ExpertWeights listed;
    for (std::int64_t e = 0; e < local; ++e) {
      listed.w1_list.emplace_back(const_cast<std::int8_t*>(w.w1.data()) + e * H * 2 * I,
                                  DType::kInt8, std::initializer_list<std::int64_t>{H, 2 * I});
      listed.w1_scale_list.emplace_back(const_cast<float*>(w.s1.data()) + e * 2 * I, DType::kFP32,
                                        std::initializer_list<std::int64_t>{2 * I});
      listed.w2_list.emplace_back(const_cast<std::int8_t*>(w.w2.data()) + e * I * H, DType::kInt8,
                                  std::initializer_list<std::int64_t>{I, H});
      listed.w2_scale_list.emplace_back(const_cast<float*>(w.s2.data()) + e * H, DType::kFP32,
                                        std::initializer_list<std::int64_t>{H});
    }
    std::vector<float> x(std::size_t(T * H));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = float(int((i * 7 + std::size_t(me)) % 13) - 6) / 3;
    std::vector<std::int64_t> idx(std::size_t(T * 2));
    for (std::int64_t t = 0; t < T; ++t) {
      idx[std::size_t(2 * t)] = (t + me) % (local * ranks);
      idx[std::size_t(2 * t + 1)] = (t + me + 1) % (local * ranks);
    }
    std::vector<float> wts(std::size_t(T * 2), 0.5f), y1(x.size()), y2(x.size());
    std::vector<float>* outs[2] = {&y1, &y2};
    for (int variant = 0; variant < 2; ++variant) {
      std::unique_ptr<MoeLayer> layer;
      HP_RETURN_IF_ERROR(MoeLayer::create(config, variant == 0 ? stacked : listed, &layer));
      HP_RETURN_IF_ERROR(layer->forward(TensorView(x.data(), DType::kFP32, {T, H}),
                                        TensorView(idx.data(), DType::kInt64, {T, 2}),
                                        TensorView(wts.data(), DType::kFP32, {T, 2}),
                                        TensorView(outs[variant]->data(), DType::kFP32, {T, H})));
      HP_RETURN_IF_ERROR(layer->destroy());
    }
    EXPECT_EQ(y1, y2);
    // One tensor short on rank 0: SHAPE_MISMATCH there, INVALID_ARGUMENT (the configs disagree)
    // elsewhere.
    if (me == 0) listed.w2_list.pop_back();
    std::unique_ptr<MoeLayer> layer;
    const Status st = MoeLayer::create(config, listed, &layer);
    EXPECT_EQ(st.code(), me == 0 ? ErrorCode::kShapeMismatch : ErrorCode::kInvalidArgument)
        << st.to_string();
    return Status::ok();
  });
}

// W4A8: int4 weights (int8 tensors of values in [-8, 7], stored packed) give the same y as the
// same values stored as int8, bit for bit (the integer GEMMs are exact), on the staged and the
// deep path and with a shared expert; a value out of the int4 range on one rank fails every rank.
TEST_P(MoeLayerTest, Int4WeightsMatchTheirInt8Storage) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const std::int64_t local = 2, H = 128, I = 64, SI = 32, T = 12, K = 2;
    Weights w = make_weights(H, I, local, 5 + std::uint32_t(me), 7);
    const Weights sw = make_weights(H, SI, 1, 3, 7);
    std::vector<float> x(std::size_t(T * H));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = float(int((i * 5 + std::size_t(me)) % 11) - 5) / 4;
    std::vector<std::int64_t> idx(std::size_t(T * K));
    for (std::int64_t t = 0; t < T; ++t) {
      idx[std::size_t(K * t)] = (t + me) % (local * ranks);
      idx[std::size_t(K * t + 1)] = (t + me + 3) % (local * ranks) == idx[std::size_t(K * t)]
                                        ? -1
                                        : (t + me + 3) % (local * ranks);
    }
    std::vector<float> wts(std::size_t(T * K), 0.5f);
    std::unique_ptr<hp::platform::Chip> chip;
    HP_RETURN_IF_ERROR(hp::platform::Chip::create({.num_cube = 1, .num_vector = 2}, &chip));
    auto run = [&](hp::kernels::WeightType type, hp::platform::Chip* on, std::int64_t shared,
                   std::vector<float>* y) {
      std::unique_ptr<MoeLayer> layer;
      const auto sv = [&](const void* d, DType t, std::initializer_list<std::int64_t> shape) {
        return shared > 0 ? TensorView(const_cast<void*>(d), t, shape) : TensorView();
      };
      HP_RETURN_IF_ERROR(
          MoeLayer::create({.hidden = H,
                            .intermediate = I,
                            .num_experts = local * ranks,
                            .topk = K,
                            .max_tokens_per_rank = T,
                            .shared_intermediate = shared,
                            .comm = GetParam(),
                            .chip = on,
                            .weights = type},
                           {.w1 = TensorView(w.w1.data(), DType::kInt8, {local, H, 2 * I}),
                            .w1_scale = TensorView(w.s1.data(), DType::kFP32, {local, 2 * I}),
                            .w2 = TensorView(w.w2.data(), DType::kInt8, {local, I, H}),
                            .w2_scale = TensorView(w.s2.data(), DType::kFP32, {local, H}),
                            .shared_w1 = sv(sw.w1.data(), DType::kInt8, {1, H, 2 * shared}),
                            .shared_w1_scale = sv(sw.s1.data(), DType::kFP32, {1, 2 * shared}),
                            .shared_w2 = sv(sw.w2.data(), DType::kInt8, {1, shared, H}),
                            .shared_w2_scale = sv(sw.s2.data(), DType::kFP32, {1, H})},
                           &layer));
      y->assign(x.size(), -1.0f);
      HP_RETURN_IF_ERROR(layer->forward(TensorView(x.data(), DType::kFP32, {T, H}),
                                        TensorView(idx.data(), DType::kInt64, {T, K}),
                                        TensorView(wts.data(), DType::kFP32, {T, K}),
                                        TensorView(y->data(), DType::kFP32, {T, H})));
      EXPECT_EQ(layer->deep(), on != nullptr);
      return layer->destroy();
    };
    for (hp::platform::Chip* on : {static_cast<hp::platform::Chip*>(nullptr), chip.get()}) {
      for (std::int64_t shared : {std::int64_t(0), SI}) {
        std::vector<float> y8, y4;
        HP_RETURN_IF_ERROR(run(hp::kernels::WeightType::kInt8, on, shared, &y8));
        HP_RETURN_IF_ERROR(run(hp::kernels::WeightType::kInt4, on, shared, &y4));
        EXPECT_EQ(y4, y8) << "rank " << me << (on ? " deep" : " staged") << " shared " << shared;
        EXPECT_GT(relative_error(y8, std::vector<float>(y8.size(), 0.0f)), 0.0);  // not all zero
      }
    }
    if (me == 0) w.w2[5] = 8;  // not an int4 value
    std::vector<float> y;
    const Status st = run(hp::kernels::WeightType::kInt4, nullptr, 0, &y);
    EXPECT_EQ(st.code(), me == 0 ? ErrorCode::kOutOfRange : ErrorCode::kInvalidArgument)
        << st.to_string();
    return Status::ok();
  });
}

// Weights of the wrong shape on one rank: an error on every rank, at create.
TEST_P(MoeLayerTest, BadWeightsOnOneRankFailEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Shape s;
    const Weights w = make_weights(s.hidden, s.inter, 2);
    const std::int64_t inter = me == 0 ? s.inter + 1 : s.inter;
    std::unique_ptr<MoeLayer> layer;
    const Status st = MoeLayer::create(
        {.hidden = s.hidden,
         .intermediate = s.inter,
         .num_experts = 2 * ranks,
         .topk = 2,
         .max_tokens_per_rank = 8,
         .comm = GetParam()},
        {.w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8,
                          {2, s.hidden, 2 * inter}),
         .w1_scale = TensorView(const_cast<float*>(w.s1.data()), DType::kFP32, {2, 2 * s.inter}),
         .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8,
                          {2, s.inter, s.hidden}),
         .w2_scale = TensorView(const_cast<float*>(w.s2.data()), DType::kFP32, {2, s.hidden})},
        &layer);
    EXPECT_FALSE(st.is_ok());
    EXPECT_EQ(st.code(), me == 0 ? ErrorCode::kShapeMismatch : ErrorCode::kInvalidArgument)
        << st.to_string();
    return Status::ok();
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, MoeLayerTest, ::testing::Values(CommKind::kShmem, CommKind::kWindow),
                         [](const auto& info) {
                           return info.param == CommKind::kShmem ? "shmem" : "window";
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
