// The C op ABI (hyper_parallel_op_api.h) of the payload's op package: the two phases of every
// op, full round trips through notify -> dispatch -> combine and the low-latency pair into
// tensors the caller allocates, checked against the reference, the layer ops against the C++
// layer, and bad inputs failing on every rank. op_api_header.c compiles the header as C.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <vector>

#include "hyper_parallel_op_api.h"
#include "moe/moe_layer.h"
#include "moe/routing_inputs.h"
#include "moe/workspace_plan.h"
#include "ops/op_tensor.h"
#include "shmem/scenario.h"

extern "C" int hp_op_api_header_is_c(void);

namespace hp::moe {
namespace {

using hp::moe::testing::all_mapped;
using hp::moe::testing::Case;
using hp::moe::testing::Inputs;
using hp::moe::testing::make_inputs;
using hp::ops::testing::tensor;
using hp::shmem::testing::run_scenario;

// Status of an op run through both phases.
template <typename Get, typename Run>
hpStatus two_phase(Get get, Run run) {
  uint64_t workspace = 99;
  hpOpExecutor* executor = nullptr;
  const hpStatus s = get(&workspace, &executor);
  if (s != HP_STATUS_OK) return s;
  EXPECT_EQ(workspace, 0u);
  return run(nullptr, workspace, executor);
}

TEST(OpApi, HeaderIsC) { EXPECT_EQ(hp_op_api_header_is_c(), 1); }

TEST(OpApi, DispatchLayout) {
  const std::vector<std::int64_t> idx = {0, 3, 2, -1, 1, 0};  // T = 3, K = 2, E = 4, R = 2
  std::vector<std::int64_t> per_rank(2), per_expert(4);
  std::vector<std::uint8_t> in_rank(6);
  const hpTensor t_idx = tensor(idx.data(), HP_DTYPE_INT64, {3, 2}),
                 t_rank = tensor(per_rank.data(), HP_DTYPE_INT64, {2}),
                 t_expert = tensor(per_expert.data(), HP_DTYPE_INT64, {4}),
                 t_in = tensor(in_rank.data(), HP_DTYPE_UINT8, {3, 2});
  ASSERT_EQ(two_phase(
                [&](uint64_t* w, hpOpExecutor** e) {
                  return hpDispatchLayoutGetWorkspaceSize(&t_idx, 4, 2, &t_rank, &t_expert, &t_in,
                                                          w, e);
                },
                hpDispatchLayout),
            HP_STATUS_OK)
      << hpGetLastErrorMessage();
  EXPECT_EQ(per_rank, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(per_expert, (std::vector<std::int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(in_rank, (std::vector<std::uint8_t>{1, 1, 0, 1, 1, 0}));
  // Bad shapes fail in GetWorkspaceSize (a local op), with the tensor named.
  const hpTensor short_rank = tensor(per_rank.data(), HP_DTYPE_INT64, {1});
  uint64_t w = 0;
  hpOpExecutor* e = nullptr;
  EXPECT_EQ(hpDispatchLayoutGetWorkspaceSize(&t_idx, 4, 2, &short_rank, &t_expert, &t_in, &w, &e),
            HP_STATUS_SHAPE_MISMATCH);
  EXPECT_NE(std::strstr(hpGetLastErrorMessage(), "tokensPerRank"), nullptr)
      << hpGetLastErrorMessage();
  // An id out of range fails in the run.
  const std::vector<std::int64_t> bad = {0, 9, 2, -1, 1, 0};
  const hpTensor t_bad = tensor(bad.data(), HP_DTYPE_INT64, {3, 2});
  EXPECT_EQ(two_phase(
                [&](uint64_t* w2, hpOpExecutor** e2) {
                  return hpDispatchLayoutGetWorkspaceSize(&t_bad, 4, 2, &t_rank, &t_expert, &t_in,
                                                          w2, e2);
                },
                hpDispatchLayout),
            HP_STATUS_OUT_OF_RANGE);
  // topkIdx at an address that is not a multiple of 8: MISALIGNED in the run, never a load of
  // a misaligned int64.
  std::vector<std::int64_t> shifted(idx.size() + 1);
  auto* odd = reinterpret_cast<std::byte*>(shifted.data()) + 4;
  std::memcpy(odd, idx.data(), idx.size() * sizeof(std::int64_t));
  const hpTensor t_odd = tensor(odd, HP_DTYPE_INT64, {3, 2});
  EXPECT_EQ(two_phase(
                [&](uint64_t* w2, hpOpExecutor** e2) {
                  return hpDispatchLayoutGetWorkspaceSize(&t_odd, 4, 2, &t_rank, &t_expert, &t_in,
                                                          w2, e2);
                },
                hpDispatchLayout),
            hpStatus(ErrorCode::kMisaligned));
  EXPECT_NE(std::strstr(hpGetLastErrorMessage(), "aligned"), nullptr) << hpGetLastErrorMessage();
  EXPECT_EQ(hpDispatchLayoutGetWorkspaceSize(&t_idx, 4, 2, &t_rank, &t_expert, &t_in, nullptr, &e),
            HP_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(hpDispatchLayout(nullptr, 0, nullptr), HP_STATUS_INVALID_ARGUMENT);
  ASSERT_EQ(hpDispatchLayoutGetWorkspaceSize(&t_idx, 4, 2, &t_rank, &t_expert, &t_in, &w, &e),
            HP_STATUS_OK);
  hpOpExecutorDestroy(e);  // never run
}

class OpApiRoundTrip : public ::testing::TestWithParam<int32_t> {};

// notify -> dispatch -> combine through the ABI, quantised, with expert alignment: the rows and
// their sources match the reference and combine(expert e's output = (e + 1) x) is exact.
TEST_P(OpApiRoundTrip, MatchesTheReference) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
    const Case c{.seed = 60};
    const std::int64_t local = c.experts / ranks;
    hpMoeBufferConfig config{.hidden = c.hidden,
                             .max_tokens_per_rank = c.tokens + ranks,
                             .num_experts = c.experts,
                             .topk = c.topk,
                             .max_element_bytes = 4,
                             .combine_element_bytes = 4,
                             .comm = GetParam(),
                             .grow_on_overflow = 1,
                             .capacity_factor = 0.0};
    hpMoeBuffer* buffer = nullptr;
    EXPECT_EQ(hpMoeBufferCreate(&config, &buffer), HP_STATUS_OK) << hpGetLastErrorMessage();
    const Inputs in = make_inputs(c, me, ranks);
    const hpTensor x = tensor(in.x.data(), HP_DTYPE_FP32, {in.tokens, c.hidden}),
                   idx = tensor(in.idx.data(), HP_DTYPE_INT64, {in.tokens, c.topk}),
                   w = tensor(in.weights.data(), HP_DTYPE_FP32, {in.tokens, c.topk});
    std::vector<std::int64_t> per_expert(static_cast<std::size_t>(local)),
        offsets(static_cast<std::size_t>(local + 1));
    const hpTensor t_per = tensor(per_expert.data(), HP_DTYPE_INT64, {local}),
                   t_off = tensor(offsets.data(), HP_DTYPE_INT64, {local + 1});
    EXPECT_EQ(two_phase(
                  [&](uint64_t* ws, hpOpExecutor** e) {
                    return hpNotifyDispatchGetWorkspaceSize(
                        buffer, &x, &idx, &w, nullptr, HP_MOE_QUANT_NONE, 4, &t_per, &t_off, ws, e);
                  },
                  hpNotifyDispatch),
              HP_STATUS_OK)
        << hpGetLastErrorMessage();
    const std::int64_t rows = offsets.back();
    std::vector<float> recv_x(std::size_t(rows * c.hidden), -1.0f),
        recv_w(std::size_t(rows), -1.0f);
    std::vector<std::int32_t> src(std::size_t(rows * 2), -7);
    const hpTensor t_x = tensor(recv_x.data(), HP_DTYPE_FP32, {rows, c.hidden}),
                   t_w = tensor(recv_w.data(), HP_DTYPE_FP32, {rows}),
                   t_src = tensor(src.data(), HP_DTYPE_INT32, {rows, 2});
    EXPECT_EQ(two_phase(
                  [&](uint64_t* ws, hpOpExecutor** e) {
                    return hpMoeDispatchNormalGetWorkspaceSize(buffer, &x, &idx, &w, nullptr,
                                                               HP_MOE_QUANT_NONE, 4, &t_x, nullptr,
                                                               &t_w, &t_src, ws, e);
                  },
                  hpMoeDispatchNormal),
              HP_STATUS_OK)
        << hpGetLastErrorMessage();
    // Rows: each local expert's, padded to 4; a real row holds its source token's x.
    std::vector<float> out(recv_x.size(), 0.0f);
    for (std::int64_t le = 0; le < local; ++le) {
      EXPECT_EQ(offsets[std::size_t(le) + 1] - offsets[std::size_t(le)],
                (per_expert[std::size_t(le)] + 3) / 4 * 4);
      for (std::int64_t r = offsets[std::size_t(le)]; r < offsets[std::size_t(le) + 1]; ++r) {
        const int s = src[std::size_t(r * 2)];
        const std::int32_t t = src[std::size_t(r * 2 + 1)];
        const bool pad = r >= offsets[std::size_t(le)] + per_expert[std::size_t(le)];
        EXPECT_EQ(s < 0, pad);
        if (pad) continue;
        const Inputs src_in = make_inputs(c, s, ranks);
        EXPECT_EQ(std::memcmp(recv_x.data() + r * c.hidden, src_in.x.data() + t * c.hidden,
                              std::size_t(c.hidden) * 4),
                  0);
        for (std::int64_t j = 0; j < c.hidden; ++j) {
          out[std::size_t(r * c.hidden + j)] =
              float(me * local + le + 1) * recv_x[std::size_t(r * c.hidden + j)];
        }
      }
    }
    std::vector<float> y(std::size_t(in.tokens * c.hidden), -1.0f);
    const hpTensor t_out = tensor(out.data(), HP_DTYPE_FP32, {rows, c.hidden}),
                   t_y = tensor(y.data(), HP_DTYPE_FP32, {in.tokens, c.hidden});
    EXPECT_EQ(two_phase(
                  [&](uint64_t* ws, hpOpExecutor** e) {
                    return hpMoeCombineNormalGetWorkspaceSize(buffer, &t_out, &t_w, &t_y, ws, e);
                  },
                  hpMoeCombineNormal),
              HP_STATUS_OK)
        << hpGetLastErrorMessage();
    for (std::int64_t t = 0; t < in.tokens; ++t) {
      for (std::int64_t j = 0; j < c.hidden; ++j) {
        double want = 0;
        for (std::int64_t k = 0; k < c.topk; ++k) {
          const std::int64_t e = in.idx[std::size_t(t * c.topk + k)];
          if (e >= 0)
            want += double(in.weights[std::size_t(t * c.topk + k)]) * double(e + 1) *
                    in.x[std::size_t(t * c.hidden + j)];
        }
        if (double(y[std::size_t(t * c.hidden + j)]) != want) {
          ADD_FAILURE() << "rank " << me << " y[" << t << "][" << j
                        << "] = " << y[std::size_t(t * c.hidden + j)] << ", expected " << want;
          return Status::ok();
        }
      }
    }
    EXPECT_EQ(hpMoeBufferDestroy(buffer), HP_STATUS_OK);
    return Status::ok();
  });
}

// The low-latency pair through the ABI: every rank's rows land in their expert's slots with
// their sources, and combine(expert e's output = (e + 1) x) is exact; twice (the halves
// alternate). A quantised dispatch needs recvXScale.
TEST_P(OpApiRoundTrip, LowLatencyMatchesTheReference) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
    const Case c{.seed = 61};
    const std::int64_t local = c.experts / ranks, t_max = c.tokens + ranks, rows = ranks * t_max;
    hpMoeBufferConfig config{.hidden = c.hidden,
                             .max_tokens_per_rank = t_max,
                             .num_experts = c.experts,
                             .topk = c.topk,
                             .max_element_bytes = 4,
                             .combine_element_bytes = 4,
                             .comm = GetParam(),
                             .grow_on_overflow = 1,
                             .capacity_factor = 0.0,
                             .low_latency = 1};
    hpMoeBuffer* buffer = nullptr;
    EXPECT_EQ(hpMoeBufferCreate(&config, &buffer), HP_STATUS_OK) << hpGetLastErrorMessage();
    const Inputs in = make_inputs(c, me, ranks);
    const hpTensor x = tensor(in.x.data(), HP_DTYPE_FP32, {in.tokens, c.hidden}),
                   idx = tensor(in.idx.data(), HP_DTYPE_INT64, {in.tokens, c.topk}),
                   w = tensor(in.weights.data(), HP_DTYPE_FP32, {in.tokens, c.topk});
    std::vector<float> recv_x(std::size_t(local * rows * c.hidden));
    std::vector<std::int64_t> count(static_cast<std::size_t>(local)),
        range(static_cast<std::size_t>(local * ranks * 2));
    std::vector<std::int32_t> src(std::size_t(local * rows * 2));
    const hpTensor t_x = tensor(recv_x.data(), HP_DTYPE_FP32, {local, rows, c.hidden}),
                   t_count = tensor(count.data(), HP_DTYPE_INT64, {local}),
                   t_range = tensor(range.data(), HP_DTYPE_INT64, {local, ranks, 2}),
                   t_src = tensor(src.data(), HP_DTYPE_INT32, {local, rows, 2});
    for (int call = 0; call < 2; ++call) {
      EXPECT_EQ(two_phase(
                    [&](uint64_t* ws, hpOpExecutor** e) {
                      return hpMoeDispatchLowLatencyGetWorkspaceSize(
                          buffer, &x, &idx, &w, nullptr, HP_MOE_QUANT_NONE, &t_x, nullptr, &t_count,
                          &t_range, &t_src, ws, e);
                    },
                    hpMoeDispatchLowLatency),
                HP_STATUS_OK)
          << hpGetLastErrorMessage();
      std::vector<float> out(recv_x.size(), 0.0f);
      for (std::int64_t le = 0; le < local; ++le) {
        std::int64_t from_ranks = 0;
        for (int s = 0; s < ranks; ++s) from_ranks += range[std::size_t((le * ranks + s) * 2 + 1)];
        EXPECT_EQ(from_ranks, count[std::size_t(le)]);
        for (std::int64_t r = 0; r < count[std::size_t(le)]; ++r) {
          const std::size_t row = std::size_t(le * rows + r);
          const int s = src[row * 2];
          const std::int32_t t = src[row * 2 + 1];
          EXPECT_GE(s, 0);
          if (s < 0) continue;
          const Inputs src_in = make_inputs(c, s, ranks);
          EXPECT_EQ(std::memcmp(recv_x.data() + row * std::size_t(c.hidden),
                                src_in.x.data() + t * c.hidden, std::size_t(c.hidden) * 4),
                    0);
          for (std::int64_t j = 0; j < c.hidden; ++j) {
            out[row * std::size_t(c.hidden) + std::size_t(j)] =
                float(me * local + le + 1) * recv_x[row * std::size_t(c.hidden) + std::size_t(j)];
          }
        }
      }
      std::vector<float> y(std::size_t(in.tokens * c.hidden), -1.0f);
      const hpTensor t_out = tensor(out.data(), HP_DTYPE_FP32, {local, rows, c.hidden}),
                     t_y = tensor(y.data(), HP_DTYPE_FP32, {in.tokens, c.hidden});
      EXPECT_EQ(two_phase(
                    [&](uint64_t* ws, hpOpExecutor** e) {
                      return hpMoeCombineLowLatencyGetWorkspaceSize(buffer, &t_out, &w, &t_y, ws,
                                                                    e);
                    },
                    hpMoeCombineLowLatency),
                HP_STATUS_OK)
          << hpGetLastErrorMessage();
      for (std::int64_t t = 0; t < in.tokens; ++t) {
        for (std::int64_t j = 0; j < c.hidden; ++j) {
          float want = 0;  // fp32, in k order, as the combine sums
          for (std::int64_t k = 0; k < c.topk; ++k) {
            const std::int64_t e = in.idx[std::size_t(t * c.topk + k)];
            if (e >= 0) {
              want += in.weights[std::size_t(t * c.topk + k)] *
                      (float(e + 1) * in.x[std::size_t(t * c.hidden + j)]);
            }
          }
          if (y[std::size_t(t * c.hidden + j)] != want) {
            ADD_FAILURE() << "rank " << me << " call " << call << " y[" << t << "][" << j
                          << "] = " << y[std::size_t(t * c.hidden + j)] << ", expected " << want;
            return Status::ok();
          }
        }
      }
    }
    // Quantised without recvXScale: this rank's error after the collective (every rank here).
    EXPECT_EQ(two_phase(
                  [&](uint64_t* ws, hpOpExecutor** e) {
                    return hpMoeDispatchLowLatencyGetWorkspaceSize(
                        buffer, &x, &idx, &w, nullptr, HP_MOE_QUANT_DYNAMIC_INT8, &t_x, nullptr,
                        &t_count, nullptr, nullptr, ws, e);
                  },
                  hpMoeDispatchLowLatency),
              HP_STATUS_DTYPE_MISMATCH)
        << hpGetLastErrorMessage();
    EXPECT_EQ(hpMoeBufferDestroy(buffer), HP_STATUS_OK);
    return Status::ok();
  });
}

// A bad expert id, or a bad notify output, on one rank: its own error there, ABORTED on the
// others, in the run (GetWorkspaceSize of a collective op never fails on contents).
TEST_P(OpApiRoundTrip, BadInputOnOneRankFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
    hpMoeBufferConfig config{.hidden = 16,
                             .max_tokens_per_rank = 8,
                             .num_experts = 2 * ranks,
                             .topk = 2,
                             .max_element_bytes = 4,
                             .combine_element_bytes = 4,
                             .comm = GetParam(),
                             .grow_on_overflow = 1,
                             .capacity_factor = 0.0};
    hpMoeBuffer* buffer = nullptr;
    EXPECT_EQ(hpMoeBufferCreate(&config, &buffer), HP_STATUS_OK) << hpGetLastErrorMessage();
    std::vector<float> xs(4 * 16, 1.0f), ws(8, 0.5f);
    std::vector<std::int64_t> ids = {0, 1, 1, 2, 0, 3, 1, 0};
    std::vector<std::int64_t> per_expert(2), offsets(3);
    const hpTensor x = tensor(xs.data(), HP_DTYPE_FP32, {4, 16}),
                   w = tensor(ws.data(), HP_DTYPE_FP32, {4, 2}),
                   t_per = tensor(per_expert.data(), HP_DTYPE_INT64, {2}),
                   t_off = tensor(offsets.data(), HP_DTYPE_INT64, {3}),
                   t_off_bad = tensor(offsets.data(), HP_DTYPE_INT64, {2});
    auto notify = [&](const hpTensor* idx, const hpTensor* off) {
      return two_phase(
          [&](uint64_t* wsz, hpOpExecutor** e) {
            return hpNotifyDispatchGetWorkspaceSize(buffer, &x, idx, &w, nullptr, HP_MOE_QUANT_NONE,
                                                    1, &t_per, off, wsz, e);
          },
          hpNotifyDispatch);
    };
    if (me == ranks - 1) ids[3] = 2 * ranks;
    const hpTensor idx = tensor(ids.data(), HP_DTYPE_INT64, {4, 2});
    EXPECT_EQ(notify(&idx, &t_off), me == ranks - 1 ? HP_STATUS_OUT_OF_RANGE : HP_STATUS_ABORTED);
    EXPECT_NE(std::strlen(hpGetLastErrorMessage()), 0u);
    ids[3] = 2;
    EXPECT_EQ(notify(&idx, me == 0 ? &t_off_bad : &t_off),
              me == 0 ? HP_STATUS_SHAPE_MISMATCH : HP_STATUS_ABORTED);
    EXPECT_EQ(notify(&idx, &t_off), HP_STATUS_OK) << hpGetLastErrorMessage();  // usable again
    EXPECT_EQ(hpMoeBufferDestroy(buffer), HP_STATUS_OK);
    return Status::ok();
  });
}

// The layer tests' case: this rank's 2 experts' int8 weights and scales, 12 tokens of H = 64
// routed top-2 over every rank's experts.
struct LayerCase {
  static constexpr std::int64_t H = 64, I = 32, local = 2, K = 2, T = 12;
  std::int64_t E;
  std::vector<std::int8_t> w1, w2;
  std::vector<float> s1, s2, x, w;
  std::vector<std::int64_t> idx;

  LayerCase(int me, int ranks)
      : E(local * ranks),
        w1(std::size_t(local * H * 2 * I)),
        w2(std::size_t(local * I * H)),
        s1(std::size_t(local * 2 * I), 1.0f / 1000),
        s2(std::size_t(local * H), 1.0f / 500),
        x(std::size_t(T * H)),
        w(std::size_t(T * K), 0.5f),
        idx(std::size_t(T * K)) {
    for (std::size_t i = 0; i < w1.size(); ++i)
      w1[i] = std::int8_t(int((i * 37 + std::size_t(me) * 11) % 255) - 127);
    for (std::size_t i = 0; i < w2.size(); ++i)
      w2[i] = std::int8_t(int((i * 53 + std::size_t(me) * 7) % 255) - 127);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = float(int((i * 13 + std::size_t(me)) % 17) - 8) / 4;
    for (std::int64_t t = 0; t < T; ++t) {
      idx[std::size_t(t * K)] = (t + me) % E;
      idx[std::size_t(t * K + 1)] = (t + me + 1 + t % 3) % E;
    }
  }
};

// hpHyperMegaMoe: the layer through the ABI in the caller's workspace (the plan's size) gives
// what the C++ layer gives; a short workspace on one rank fails every rank. hpHyperMegaMoeGrad
// gives the C++ layer's gradients too.
Status check_hyper_mega_moe(std::int32_t comm, bool int8) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  if (comm == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
  LayerCase c(me, ranks);
  const std::int64_t H = c.H, I = c.I, local = c.local, E = c.E, K = c.K, T = c.T;
  auto &w1 = c.w1, &w2 = c.w2;
  auto &s1 = c.s1, &s2 = c.s2, &x = c.x, &w = c.w;
  auto& idx = c.idx;
  const hpTensor t_w1 = tensor(w1.data(), HP_DTYPE_INT8, {local, H, 2 * I}),
                 t_s1 = tensor(s1.data(), HP_DTYPE_FP32, {local, 2 * I}),
                 t_w2 = tensor(w2.data(), HP_DTYPE_INT8, {local, I, H}),
                 t_s2 = tensor(s2.data(), HP_DTYPE_FP32, {local, H}),
                 t_x = tensor(x.data(), HP_DTYPE_FP32, {T, H}),
                 t_idx = tensor(idx.data(), HP_DTYPE_INT64, {T, K}),
                 t_w = tensor(w.data(), HP_DTYPE_FP32, {T, K});
  // A shared expert too (the same weights on every rank).
  const std::int64_t SI = 16;
  std::vector<std::int8_t> sw1(std::size_t(H * 2 * SI)), sw2(std::size_t(SI * H));
  for (std::size_t i = 0; i < sw1.size(); ++i) sw1[i] = std::int8_t(int((i * 29) % 255) - 127);
  for (std::size_t i = 0; i < sw2.size(); ++i) sw2[i] = std::int8_t(int((i * 31) % 255) - 127);
  std::vector<float> ss1(std::size_t(2 * SI), 1.0f / 1000), ss2(std::size_t(H), 1.0f / 300);
  const hpTensor t_sw1 = tensor(sw1.data(), HP_DTYPE_INT8, {1, H, 2 * SI}),
                 t_ss1 = tensor(ss1.data(), HP_DTYPE_FP32, {1, 2 * SI}),
                 t_sw2 = tensor(sw2.data(), HP_DTYPE_INT8, {1, SI, H}),
                 t_ss2 = tensor(ss2.data(), HP_DTYPE_FP32, {1, H});
  const hpHyperMegaMoeConfig config{.hidden = H,
                                    .intermediate = I,
                                    .num_experts = E,
                                    .topk = K,
                                    .max_tokens_per_rank = T,
                                    .comm = comm,
                                    .shared_intermediate = SI,
                                    .backward = HP_MOE_BACKWARD_KEEP_ACTIVATIONS |
                                                (int8 ? HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS : 0)};
  hpHyperMegaMoeLayer* layer = nullptr;
  EXPECT_EQ(hpHyperMegaMoeCreate(&config, &t_w1, &t_s1, &t_w2, &t_s2, &t_sw1, &t_ss1, &t_sw2,
                                 &t_ss2, &layer),
            HP_STATUS_OK)
      << hpGetLastErrorMessage();
  std::vector<float> y(std::size_t(T * H), -1.0f);
  const hpTensor t_y = tensor(y.data(), HP_DTYPE_FP32, {T, H});
  uint64_t bytes = 0;
  hpOpExecutor* exec = nullptr;
  EXPECT_EQ(hpHyperMegaMoeGetWorkspaceSize(layer, &t_x, &t_idx, &t_w, nullptr, &t_y, &bytes, &exec),
            HP_STATUS_OK);
  MoeTiling plan;
  HP_EXPECT_OK(plan_moe({.tokens = T,
                         .hidden = H,
                         .intermediate = I,
                         .topk = K,
                         .experts = E,
                         .ranks = ranks,
                         .shared_intermediate = SI},
                        &plan));
  EXPECT_EQ(bytes, std::uint64_t(plan.total_bytes));
  std::vector<std::uint8_t> storage(bytes + 64, 0xCD);
  void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                     ~std::uintptr_t(63));
  EXPECT_EQ(hpHyperMegaMoe(ws, bytes, exec), HP_STATUS_OK) << hpGetLastErrorMessage();
  // The C++ layer on the same weights and tokens.
  std::unique_ptr<MoeLayer> cpp;
  HP_RETURN_IF_ERROR(
      MoeLayer::create({.hidden = H,
                        .intermediate = I,
                        .num_experts = E,
                        .topk = K,
                        .max_tokens_per_rank = T,
                        .shared_intermediate = SI,
                        .comm = comm == HP_MOE_COMM_WINDOW ? CommKind::kWindow : CommKind::kShmem,
                        .backward = true,
                        .int8_activation_grads = int8},
                       {.w1 = TensorView(w1.data(), DType::kInt8, {local, H, 2 * I}),
                        .w1_scale = TensorView(s1.data(), DType::kFP32, {local, 2 * I}),
                        .w2 = TensorView(w2.data(), DType::kInt8, {local, I, H}),
                        .w2_scale = TensorView(s2.data(), DType::kFP32, {local, H}),
                        .shared_w1 = TensorView(sw1.data(), DType::kInt8, {1, H, 2 * SI}),
                        .shared_w1_scale = TensorView(ss1.data(), DType::kFP32, {1, 2 * SI}),
                        .shared_w2 = TensorView(sw2.data(), DType::kInt8, {1, SI, H}),
                        .shared_w2_scale = TensorView(ss2.data(), DType::kFP32, {1, H})},
                       &cpp));
  std::vector<float> y_cpp(y.size());
  HP_RETURN_IF_ERROR(cpp->forward(
      TensorView(x.data(), DType::kFP32, {T, H}), TensorView(idx.data(), DType::kInt64, {T, K}),
      TensorView(w.data(), DType::kFP32, {T, K}), TensorView(y_cpp.data(), DType::kFP32, {T, H})));
  EXPECT_EQ(y, y_cpp);
  // The backward, through the ABI (workspace 0; GMM1's output kept by its forward) and in C++
  // (recomputed): the same bits.
  std::vector<float> dy(y.size());
  for (std::size_t i = 0; i < dy.size(); ++i)
    dy[i] = float(int((i * 7 + std::size_t(me)) % 11) - 5) / 8;
  struct Grads {
    std::vector<float> dx, d_topk, dw1, dw2, sdw1, sdw2;
  };
  Grads abi{.dx = std::vector<float>(x.size()),
            .d_topk = std::vector<float>(w.size()),
            .dw1 = std::vector<float>(w1.size()),
            .dw2 = std::vector<float>(w2.size()),
            .sdw1 = std::vector<float>(sw1.size()),
            .sdw2 = std::vector<float>(sw2.size())};
  Grads cpp_grads = abi;
  const hpTensor t_dy = tensor(dy.data(), HP_DTYPE_FP32, {T, H}),
                 t_dx = tensor(abi.dx.data(), HP_DTYPE_FP32, {T, H}),
                 t_dtopk = tensor(abi.d_topk.data(), HP_DTYPE_FP32, {T, K}),
                 t_dw1 = tensor(abi.dw1.data(), HP_DTYPE_FP32, {local, H, 2 * I}),
                 t_dw2 = tensor(abi.dw2.data(), HP_DTYPE_FP32, {local, I, H}),
                 t_sdw1 = tensor(abi.sdw1.data(), HP_DTYPE_FP32, {1, H, 2 * SI}),
                 t_sdw2 = tensor(abi.sdw2.data(), HP_DTYPE_FP32, {1, SI, H});
  EXPECT_EQ(
      hpHyperMegaMoeGradGetWorkspaceSize(layer, &t_x, &t_idx, &t_w, nullptr, &t_dy, &t_dx, &t_dtopk,
                                         &t_dw1, &t_dw2, &t_sdw1, &t_sdw2, &bytes, &exec),
      HP_STATUS_OK);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(hpHyperMegaMoeGrad(nullptr, 0, exec), HP_STATUS_OK) << hpGetLastErrorMessage();
  auto tv = [](std::vector<float>& v, std::initializer_list<std::int64_t> shape) {
    return TensorView(v.data(), DType::kFP32, shape);
  };
  HP_RETURN_IF_ERROR(cpp->backward({.x = TensorView(x.data(), DType::kFP32, {T, H}),
                                    .topk_idx = TensorView(idx.data(), DType::kInt64, {T, K}),
                                    .topk_weights = TensorView(w.data(), DType::kFP32, {T, K}),
                                    .dy = tv(dy, {T, H}),
                                    .dx = tv(cpp_grads.dx, {T, H}),
                                    .d_topk_weights = tv(cpp_grads.d_topk, {T, K}),
                                    .dw1 = tv(cpp_grads.dw1, {local, H, 2 * I}),
                                    .dw2 = tv(cpp_grads.dw2, {local, I, H}),
                                    .shared_dw1 = tv(cpp_grads.sdw1, {1, H, 2 * SI}),
                                    .shared_dw2 = tv(cpp_grads.sdw2, {1, SI, H})}));
  EXPECT_EQ(abi.dx, cpp_grads.dx);
  EXPECT_EQ(abi.d_topk, cpp_grads.d_topk);
  EXPECT_EQ(abi.dw1, cpp_grads.dw1);
  EXPECT_EQ(abi.dw2, cpp_grads.dw2);
  EXPECT_EQ(abi.sdw1, cpp_grads.sdw1);
  EXPECT_EQ(abi.sdw2, cpp_grads.sdw2);
  EXPECT_NE(abi.dw1, std::vector<float>(abi.dw1.size(), 0.0f));
  HP_RETURN_IF_ERROR(cpp->destroy());
  // One byte short on rank 0.
  EXPECT_EQ(hpHyperMegaMoeGetWorkspaceSize(layer, &t_x, &t_idx, &t_w, nullptr, &t_y, &bytes, &exec),
            HP_STATUS_OK);
  EXPECT_EQ(hpHyperMegaMoe(ws, bytes - (me == 0 ? 1 : 0), exec),
            me == 0 ? HP_STATUS_INVALID_ARGUMENT : HP_STATUS_ABORTED);
  EXPECT_EQ(hpHyperMegaMoeDestroy(layer), HP_STATUS_OK);
  return Status::ok();
}

TEST_P(OpApiRoundTrip, HyperMegaMoeMatchesTheLayer) {
  run_scenario([&] { return check_hyper_mega_moe(GetParam(), false); });
}
// The same with HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS: the C++ layer with int8_activation_grads.
TEST_P(OpApiRoundTrip, HyperMegaMoeWithInt8ActivationGradsMatchesTheLayer) {
  run_scenario([&] { return check_hyper_mega_moe(GetParam(), true); });
}

// hpHyperMegaMoeCreateWithWeights: TENSOR_LIST weights, smooth-quant scales and the deep path on
// the layer's own 1:2 chip give the same y as the C++ layer made with the same (stacked)
// weights, scales and path.
TEST_P(OpApiRoundTrip, HyperMegaMoeWithWeightsListsSmoothAndTheDeepPath) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == HP_MOE_COMM_WINDOW && !all_mapped()) return Status::ok();
    LayerCase c(me, ranks);
    const std::int64_t H = c.H, I = c.I, local = c.local, E = c.E, K = c.K, T = c.T;
    auto &w1 = c.w1, &w2 = c.w2;
    auto &s1 = c.s1, &s2 = c.s2, &x = c.x, &w = c.w;
    auto& idx = c.idx;
    std::vector<float> smooth1(static_cast<std::size_t>(H)),
        smooth2(static_cast<std::size_t>(local * I));
    for (std::size_t i = 0; i < smooth1.size(); ++i) smooth1[i] = 0.5f + float(i % 7) / 4;
    for (std::size_t i = 0; i < smooth2.size(); ++i) smooth2[i] = 0.75f + float(i % 5) / 8;
    std::vector<hpTensor> w1_list, s1_list, w2_list, s2_list;
    for (std::int64_t e = 0; e < local; ++e) {
      w1_list.push_back(tensor(w1.data() + e * H * 2 * I, HP_DTYPE_INT8, {H, 2 * I}));
      s1_list.push_back(tensor(s1.data() + e * 2 * I, HP_DTYPE_FP32, {2 * I}));
      w2_list.push_back(tensor(w2.data() + e * I * H, HP_DTYPE_INT8, {I, H}));
      s2_list.push_back(tensor(s2.data() + e * H, HP_DTYPE_FP32, {H}));
    }
    const hpTensor t_smooth1 = tensor(smooth1.data(), HP_DTYPE_FP32, {H}),
                   t_smooth2 = tensor(smooth2.data(), HP_DTYPE_FP32, {local, I});
    const hpHyperMegaMoeWeights weights{.numListed = local,
                                        .w1List = w1_list.data(),
                                        .w1ScaleList = s1_list.data(),
                                        .w2List = w2_list.data(),
                                        .w2ScaleList = s2_list.data(),
                                        .smooth1 = &t_smooth1,
                                        .smooth2 = &t_smooth2};
    const hpHyperMegaMoeConfig config{.hidden = H,
                                      .intermediate = I,
                                      .num_experts = E,
                                      .topk = K,
                                      .max_tokens_per_rank = T,
                                      .comm = GetParam(),
                                      .path = HP_MOE_PATH_DEEP,
                                      .cube_cores = 1,
                                      .vector_cores = 2};
    hpHyperMegaMoeLayer* layer = nullptr;
    EXPECT_EQ(hpHyperMegaMoeCreateWithWeights(&config, &weights, &layer), HP_STATUS_OK)
        << hpGetLastErrorMessage();
    const hpTensor t_x = tensor(x.data(), HP_DTYPE_FP32, {T, H}),
                   t_idx = tensor(idx.data(), HP_DTYPE_INT64, {T, K}),
                   t_w = tensor(w.data(), HP_DTYPE_FP32, {T, K});
    std::vector<float> y(std::size_t(T * H), -1.0f);
    const hpTensor t_y = tensor(y.data(), HP_DTYPE_FP32, {T, H});
    uint64_t bytes = 0;
    hpOpExecutor* exec = nullptr;
    EXPECT_EQ(
        hpHyperMegaMoeGetWorkspaceSize(layer, &t_x, &t_idx, &t_w, nullptr, &t_y, &bytes, &exec),
        HP_STATUS_OK);
    std::vector<std::uint8_t> storage(bytes + 64);
    void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                       ~std::uintptr_t(63));
    EXPECT_EQ(hpHyperMegaMoe(ws, bytes, exec), HP_STATUS_OK) << hpGetLastErrorMessage();
    EXPECT_EQ(hpHyperMegaMoeDestroy(layer), HP_STATUS_OK);
    std::unique_ptr<hp::platform::Chip> chip;
    HP_RETURN_IF_ERROR(hp::platform::Chip::create({.num_cube = 1, .num_vector = 2}, &chip));
    std::unique_ptr<MoeLayer> cpp;
    HP_RETURN_IF_ERROR(MoeLayer::create(
        {.hidden = H,
         .intermediate = I,
         .num_experts = E,
         .topk = K,
         .max_tokens_per_rank = T,
         .comm = GetParam() == HP_MOE_COMM_WINDOW ? CommKind::kWindow : CommKind::kShmem,
         .chip = chip.get(),
         .path = LayerPath::kDeep},
        {.w1 = TensorView(w1.data(), DType::kInt8, {local, H, 2 * I}),
         .w1_scale = TensorView(s1.data(), DType::kFP32, {local, 2 * I}),
         .w2 = TensorView(w2.data(), DType::kInt8, {local, I, H}),
         .w2_scale = TensorView(s2.data(), DType::kFP32, {local, H}),
         .smooth1 = TensorView(smooth1.data(), DType::kFP32, {H}),
         .smooth2 = TensorView(smooth2.data(), DType::kFP32, {local, I})},
        &cpp));
    EXPECT_TRUE(cpp->deep());
    std::vector<float> y_cpp(y.size());
    HP_RETURN_IF_ERROR(cpp->forward(TensorView(x.data(), DType::kFP32, {T, H}),
                                    TensorView(idx.data(), DType::kInt64, {T, K}),
                                    TensorView(w.data(), DType::kFP32, {T, K}),
                                    TensorView(y_cpp.data(), DType::kFP32, {T, H})));
    EXPECT_EQ(y, y_cpp);
    HP_RETURN_IF_ERROR(cpp->destroy());
    // A bad core count on one rank: its error there, every other rank fails too.
    hpHyperMegaMoeConfig bad = config;
    if (me == 0) bad.vector_cores = 3;
    layer = nullptr;
    hpStatus st = hpHyperMegaMoeCreateWithWeights(&bad, &weights, &layer);
    EXPECT_NE(st, HP_STATUS_OK);
    EXPECT_EQ(layer, nullptr);
    // An unknown backward mode on one rank likewise (int8 activation gradients need a backward).
    for (const std::int32_t mode : {3, HP_MOE_BACKWARD_INT8_ACTIVATION_GRADS}) {
      bad = config;
      if (me == ranks - 1) bad.backward = mode;
      st = hpHyperMegaMoeCreateWithWeights(&bad, &weights, &layer);
      if (me == ranks - 1) {
        EXPECT_EQ(st, HP_STATUS_INVALID_ARGUMENT) << hpGetLastErrorMessage();
      } else {
        EXPECT_NE(st, HP_STATUS_OK);
      }
      EXPECT_EQ(layer, nullptr);
    }
    return Status::ok();
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, OpApiRoundTrip,
                         ::testing::Values(HP_MOE_COMM_SHMEM, HP_MOE_COMM_WINDOW),
                         [](const auto& info) {
                           return info.param == HP_MOE_COMM_SHMEM ? "shmem" : "window";
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
