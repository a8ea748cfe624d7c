// The low-latency mode (low_latency_dispatch / low_latency_combine) on every rank of a threads,
// shm or mpi job, with both comm contexts, against a plain reference computed from every rank's
// inputs (routing_inputs.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/bfloat16.h"
#include "kernels/ops.h"
#include "kernels/targets.h"
#include "moe/buffer.h"
#include "moe/routing_inputs.h"
#include "shmem/scenario.h"

namespace hp::moe {
namespace {

using hp::moe::testing::all_mapped;
using hp::moe::testing::Case;
using hp::moe::testing::Inputs;
using hp::moe::testing::make_inputs;
using hp::moe::testing::Routing;
using hp::moe::testing::SmallBatch;
using hp::shmem::testing::run_scenario;

// A buffer with the low-latency regions for case c (window: UNSUPPORTED where ranks are not
// mapped; then *buffer stays null and the caller skips).
Status make_buffer(const Case& c, CommKind comm, DType x_dtype, hp::platform::Chip* chip,
                   std::unique_ptr<Buffer>* buffer) {
  const int ranks = hp::shmem::n_pes();
  const Status created = Buffer::create({.hidden = c.hidden,
                                         .max_tokens_per_rank = c.tokens + ranks,
                                         .num_experts = c.experts,
                                         .topk = c.topk,
                                         .combine_element_bytes = x_dtype == DType::kBF16 ? 2 : 4,
                                         .comm = comm,
                                         .low_latency = true,
                                         .chip = chip},
                                        buffer);
  if (comm == CommKind::kWindow && !all_mapped()) {
    EXPECT_EQ(created.code(), ErrorCode::kUnsupported) << created.to_string();
    return Status::ok();
  }
  HP_EXPECT_OK(created);
  return created;
}

// One low-latency dispatch + combine of case c on `buffer`, checked against the reference.
Status check_low_latency(Buffer& buffer, const Case& c, Quant quant, DType x_dtype) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const std::int64_t local = c.experts / ranks,
                     per_expert = std::int64_t(ranks) * (c.tokens + ranks);
  std::vector<Inputs> every;
  for (int rank = 0; rank < ranks; ++rank) every.push_back(make_inputs(c, rank, ranks));
  const Inputs& in = every[std::size_t(me)];
  std::vector<std::uint16_t> x_bf16(in.x.size());
  for (std::size_t i = 0; i < in.x.size(); ++i) x_bf16[i] = float_to_bf16(in.x[i]);
  const TensorView x =
      x_dtype == DType::kBF16
          ? TensorView(x_bf16.data(), DType::kBF16, {in.tokens, c.hidden})
          : TensorView(const_cast<float*>(in.x.data()), DType::kFP32, {in.tokens, c.hidden});
  LowLatencyResult r;
  HP_RETURN_IF_ERROR(buffer.low_latency_dispatch(
      {.x = x,
       .topk_idx =
           TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64, {in.tokens, c.topk}),
       .topk_weights =
           TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {in.tokens, c.topk}),
       .x_active_mask = c.masked ? TensorView(const_cast<std::uint8_t*>(in.active.data()),
                                              DType::kUInt8, {in.tokens})
                                 : TensorView(),
       .quant = quant},
      &r));
  const hp::kernels::KernelTable* table = nullptr;
  HP_RETURN_IF_ERROR(hp::kernels::selected_target(&table));
  EXPECT_EQ(r.rows_per_expert, per_expert);
  EXPECT_EQ(r.x_dtype, quant == Quant::kDynamicInt8 ? DType::kInt8 : x_dtype);
  const std::size_t elem = dtype_size(r.x_dtype);
  // ---- dispatch: expert le's rows are every source's pairs for it, by source then token -------
  std::vector<float> out(std::size_t(local * per_expert * c.hidden), 0.0f);
  for (std::int64_t le = 0; le < local; ++le) {
    const std::int64_t e = me * local + le;
    std::int64_t row = 0;
    for (int s = 0; s < ranks; ++s) {
      const Inputs& src = every[std::size_t(s)];
      const std::int64_t first = row;
      for (std::int64_t t = 0; t < src.tokens; ++t) {
        if (c.masked && !src.active[std::size_t(t)]) continue;
        for (std::int64_t k = 0; k < c.topk; ++k) {
          if (src.idx[std::size_t(t * c.topk + k)] != e) continue;
          const auto at = std::size_t(le * per_expert + row);
          EXPECT_EQ(r.handle.row_src_rank[at], s);
          EXPECT_EQ(r.handle.row_src_token[at], t);
          const float* xs = src.x.data() + t * c.hidden;
          if (quant == Quant::kDynamicInt8) {
            std::vector<std::int8_t> q(std::size_t(c.hidden));
            std::vector<std::uint16_t> xb(std::size_t(c.hidden));
            for (std::int64_t j = 0; j < c.hidden; ++j) xb[std::size_t(j)] = float_to_bf16(xs[j]);
            float scale = 0;
            HP_EXPECT_OK(hp::kernels::quantize(
                *table,
                x_dtype == DType::kBF16
                    ? TensorView(xb.data(), DType::kBF16, {1, c.hidden})
                    : TensorView(const_cast<float*>(xs), DType::kFP32, {1, c.hidden}),
                TensorView(q.data(), DType::kInt8, {1, c.hidden}),
                TensorView(&scale, DType::kFP32, {1})));
            EXPECT_EQ(
                std::memcmp(r.x_bytes.data() + at * std::size_t(c.hidden), q.data(), q.size()), 0)
                << "row " << at;
            EXPECT_EQ(r.x_scale[at], scale);
          } else {
            for (std::int64_t j = 0; j < c.hidden; ++j) {
              const std::uint8_t* p =
                  r.x_bytes.data() + (at * std::size_t(c.hidden) + std::size_t(j)) * elem;
              float got;
              if (x_dtype == DType::kBF16) {
                std::uint16_t b;
                std::memcpy(&b, p, 2);
                got = bf16_to_float(b);
              } else {
                std::memcpy(&got, p, 4);
              }
              if (got != xs[j]) {
                ADD_FAILURE() << "rank " << me << " expert " << le << " row " << row << " col "
                              << j;
                return Status::ok();
              }
            }
          }
          // The expert's output: (e + 1) x its input.
          for (std::int64_t j = 0; j < c.hidden; ++j)
            out[at * std::size_t(c.hidden) + std::size_t(j)] = float(e + 1) * xs[j];
          ++row;
        }
      }
      EXPECT_EQ(r.layout_range[(std::size_t(le) * std::size_t(ranks) + std::size_t(s)) * 2], first);
      EXPECT_EQ(r.layout_range[(std::size_t(le) * std::size_t(ranks) + std::size_t(s)) * 2 + 1],
                row - first);
    }
    EXPECT_EQ(r.tokens_per_expert[std::size_t(le)], row);
  }
  // ---- combine: y[t] = sum_k w_k (e_k + 1) x[t] (exact: dyadic weights, few-bit values) -----
  std::vector<std::uint16_t> out_bf16(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out_bf16[i] = float_to_bf16(out[i]);
  const TensorView expert_out =
      x_dtype == DType::kBF16
          ? TensorView(out_bf16.data(), DType::kBF16, {local, per_expert, c.hidden})
          : TensorView(out.data(), DType::kFP32, {local, per_expert, c.hidden});
  std::vector<float> y(std::size_t(in.tokens * c.hidden), -1.0f);
  HP_RETURN_IF_ERROR(buffer.low_latency_combine(
      expert_out,
      TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {in.tokens, c.topk}),
      r.handle, TensorView(y.data(), DType::kFP32, {in.tokens, c.hidden})));
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      double want = 0;
      if (!c.masked || in.active[std::size_t(t)]) {
        for (std::int64_t k = 0; k < c.topk; ++k) {
          const std::int64_t e = in.idx[std::size_t(t * c.topk + k)];
          if (e < 0) continue;
          const float xe = float(e + 1) * in.x[std::size_t(t * c.hidden + j)];
          want += double(in.weights[std::size_t(t * c.topk + k)]) *
                  (x_dtype == DType::kBF16 ? bf16_to_float(float_to_bf16(xe)) : xe);
        }
      }
      const double tol = x_dtype == DType::kBF16 ? 1e-2 * (std::fabs(want) + 1) : 0.0;
      if (std::fabs(double(y[std::size_t(t * c.hidden + j)]) - want) > tol) {
        ADD_FAILURE() << "rank " << me << " y[" << t << "][" << j
                      << "] = " << y[std::size_t(t * c.hidden + j)] << ", expected " << want;
        return Status::ok();
      }
    }
  }
  return Status::ok();
}

Status run_case(const Case& c, CommKind comm, Quant quant, DType x_dtype) {
  std::unique_ptr<hp::platform::Chip> chip;
  if (c.vector_cores > 0)
    HP_EXPECT_OK(hp::platform::Chip::create({.num_cube = 1, .num_vector = c.vector_cores}, &chip));
  std::unique_ptr<Buffer> buffer;
  HP_RETURN_IF_ERROR(make_buffer(c, comm, x_dtype, chip.get(), &buffer));
  if (buffer == nullptr) return Status::ok();
  HP_RETURN_IF_ERROR(check_low_latency(*buffer, c, quant, x_dtype));
  return buffer->destroy();
}

class LowLatency : public ::testing::TestWithParam<CommKind> {};

TEST_P(LowLatency, UniformFp32) {
  run_scenario([&] { return run_case(Case{}, GetParam(), Quant::kNone, DType::kFP32); });
}
TEST_P(LowLatency, QuantisedBf16) {
  run_scenario(
      [&] { return run_case(Case{.seed = 3}, GetParam(), Quant::kDynamicInt8, DType::kBF16); });
}
TEST_P(LowLatency, AllTokensToExpertZero) {
  run_scenario([&] {
    return run_case(Case{.routing = Routing::kAllToExpert0, .seed = 4}, GetParam(), Quant::kNone,
                    DType::kFP32);
  });
}
TEST_P(LowLatency, EmptyRanksAndMaskOnVectorCores) {
  run_scenario([&] {
    return run_case(
        Case{.routing = Routing::kSomeRanksEmpty, .masked = true, .seed = 5, .vector_cores = 2},
        GetParam(), Quant::kDynamicInt8, DType::kFP32);
  });
}
// Calls alternate the halves of the window: several in a row on one buffer, mixed with the
// normal mode.
TEST_P(LowLatency, RepeatedCallsMixedWithNormalMode) {
  run_scenario([&]() -> Status {
    const Case base{.tokens = 9};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_buffer(base, GetParam(), DType::kFP32, nullptr, &buffer));
    if (buffer == nullptr) return Status::ok();
    for (std::uint32_t seed = 30; seed < 34; ++seed) {
      HP_RETURN_IF_ERROR(
          check_low_latency(*buffer, Case{.tokens = 9, .seed = seed}, Quant::kNone, DType::kFP32));
      const Inputs in =
          make_inputs(Case{.tokens = 9, .seed = seed}, hp::shmem::my_pe(), hp::shmem::n_pes());
      DispatchResult r;
      HP_RETURN_IF_ERROR(buffer->dispatch(
          {.x = TensorView(const_cast<float*>(in.x.data()), DType::kFP32, {in.tokens, base.hidden}),
           .topk_idx = TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64,
                                  {in.tokens, base.topk}),
           .topk_weights = TensorView(const_cast<float*>(in.weights.data()), DType::kFP32,
                                      {in.tokens, base.topk})},
          &r));
    }
    return buffer->destroy();
  });
}

// A rank whose inputs are bad (an expert id out of range, too many tokens) fails with its own
// error; every other rank gets ABORTED naming it; the buffer stays usable.
TEST_P(LowLatency, BadInputOnOneRankFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    const Case c{.hidden = 16, .tokens = 4, .experts = 2 * ranks, .topk = 2};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_buffer(c, GetParam(), DType::kFP32, nullptr, &buffer));
    if (buffer == nullptr) return Status::ok();
    const std::int64_t too_many = c.tokens + ranks + 1;
    std::vector<float> x(std::size_t(too_many * 16), 1.0f), w(std::size_t(too_many * 2), 0.5f);
    std::vector<std::int64_t> idx(std::size_t(too_many * 2));
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = std::int64_t(i % 2 == 0 ? 0 : 1);
    auto args = [&](std::int64_t tokens) {
      return DispatchArgs{.x = TensorView(x.data(), DType::kFP32, {tokens, 16}),
                          .topk_idx = TensorView(idx.data(), DType::kInt64, {tokens, 2}),
                          .topk_weights = TensorView(w.data(), DType::kFP32, {tokens, 2})};
    };
    LowLatencyResult r;
    idx[1] = me == ranks - 1 ? 2 * ranks : 1;  // out of range on the last rank
    Status s = buffer->low_latency_dispatch(args(4), &r);
    EXPECT_EQ(s.code(), me == ranks - 1 ? ErrorCode::kOutOfRange : ErrorCode::kAborted)
        << s.to_string();
    idx[1] = 1;
    s = buffer->low_latency_dispatch(args(me == 0 ? too_many : 4), &r);  // rank 0: more than T_max
    EXPECT_EQ(s.code(), me == 0 ? ErrorCode::kOutOfRange : ErrorCode::kAborted) << s.to_string();
    HP_EXPECT_OK(buffer->low_latency_dispatch(args(4), &r));
    // Ranks disagreeing on x's dtype or quantisation: INVALID_ARGUMENT on every rank, naming both.
    std::vector<std::uint16_t> x_bf16(x.size(), 0x3F80);  // 1.0
    for (int variant = 0; variant < 2; ++variant) {
      DispatchArgs a = args(4);
      if (me == 0 && variant == 0) a.quant = Quant::kDynamicInt8;
      if (me == 0 && variant == 1) a.x = TensorView(x_bf16.data(), DType::kBF16, {4, 16});
      s = buffer->low_latency_dispatch(a, &r);
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
      EXPECT_NE(s.message().find("the same x dtype and quant"), std::string::npos) << s.to_string();
    }
    HP_EXPECT_OK(buffer->low_latency_dispatch(args(4), &r));
    return buffer->destroy();
  });
}

// A rank whose low_latency_combine inputs are bad returns its own error, the others ABORTED at
// once; the buffer stays usable.
TEST_P(LowLatency, BadCombineInputOnOneRankFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    const Case c{.hidden = 16, .tokens = 4, .experts = 2 * ranks, .topk = 2};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_buffer(c, GetParam(), DType::kFP32, nullptr, &buffer));
    if (buffer == nullptr) return Status::ok();
    SmallBatch batch;
    for (int round = 0; round < 2; ++round) {
      LowLatencyResult r;
      HP_RETURN_IF_ERROR(buffer->low_latency_dispatch(batch.args(), &r));
      std::vector<float> out(std::size_t(2 * r.rows_per_expert * 16), 1.0f), y(4 * 16, -1.0f);
      const bool bad = round == 0 && me == 0;
      const Status s = buffer->low_latency_combine(
          TensorView(out.data(), DType::kFP32, {2, r.rows_per_expert, 16}),
          TensorView(batch.w.data(), DType::kFP32, {bad ? 3 : 4, 2}), r.handle,
          TensorView(y.data(), DType::kFP32, {4, 16}));
      if (round == 0) {
        EXPECT_EQ(s.code(), bad ? ErrorCode::kShapeMismatch : ErrorCode::kAborted) << s.to_string();
      } else {
        HP_EXPECT_OK(s);
        EXPECT_EQ(y[0], 1.0f);
      }
    }
    return buffer->destroy();
  });
}

TEST_P(LowLatency, BufferWithoutLowLatencyRegionsIsRejected) {
  run_scenario([&]() -> Status {
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    HP_EXPECT_OK(Buffer::create({.hidden = 16,
                                 .max_tokens_per_rank = 4,
                                 .num_experts = 2 * hp::shmem::n_pes(),
                                 .topk = 2,
                                 .comm = GetParam()},
                                &buffer));
    LowLatencyResult r;
    EXPECT_EQ(buffer->low_latency_dispatch({}, &r).code(), ErrorCode::kFailedPrecondition);
    return buffer->destroy();
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, LowLatency, ::testing::Values(CommKind::kShmem, CommKind::kWindow),
                         [](const auto& info) {
                           return info.param == CommKind::kShmem ? "shmem" : "window";
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
