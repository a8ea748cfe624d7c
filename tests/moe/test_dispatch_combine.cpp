// dispatch and combine on every rank of a threads job (2 and 4 ranks in-process), an shm job
// (hprun) or an mpi job (mpirun), with both comm contexts, against a plain reference: every
// rank generates every rank's inputs from (seed, rank), so the expected rows of any rank are
// computed locally without communication.
#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
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
using hp::moe::testing::input_args;
using hp::moe::testing::Inputs;
using hp::moe::testing::make_case_buffer;
using hp::moe::testing::make_inputs;
using hp::moe::testing::Routing;
using hp::moe::testing::SmallBatch;
using hp::shmem::testing::run_scenario;

// One expected received row: the source and token, its local expert and weight.
struct Expected {
  int src;
  std::int64_t token, expert;
  float weight;
};

// The rows rank `me` must receive, grouped by local expert, then by source rank and token.
std::vector<std::vector<Expected>> expected_rows(const Case& c, int me, int ranks) {
  const std::int64_t per_rank = c.experts / ranks;
  std::vector<std::vector<Expected>> rows(static_cast<std::size_t>(per_rank));
  for (int s = 0; s < ranks; ++s) {
    const Inputs in = make_inputs(c, s, ranks);
    for (std::int64_t t = 0; t < in.tokens; ++t) {
      if (!in.active[std::size_t(t)]) continue;
      for (std::int64_t k = 0; k < c.topk; ++k) {
        const std::int64_t e = in.idx[std::size_t(t * c.topk + k)];
        if (e / per_rank != me || e < 0) continue;
        rows[std::size_t(e % per_rank)].push_back(
            {s, t, e, in.weights[std::size_t(t * c.topk + k)]});
      }
    }
  }
  return rows;
}

// y [T, H] is exactly factor(t) x in.x for every token; the first mismatch is a failure named
// with `what` (false).
template <typename Factor>
bool y_is_scaled_x(const std::vector<float>& y, const Inputs& in, std::int64_t hidden,
                   Factor factor, const std::string& what) {
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    const float f = factor(t);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const float want = f * in.x[std::size_t(t * hidden + j)];
      if (y[std::size_t(t * hidden + j)] != want) {
        ADD_FAILURE() << what << " y[" << t << "][" << j << "] = " << y[std::size_t(t * hidden + j)]
                      << ", expected " << want;
        return false;
      }
    }
  }
  return true;
}

// r holds exactly the rows rank `me` must receive of every rank's inputs (`every`), grouped by
// local expert (padded to `alignment`), quantised or in x_dtype as dispatched.
Status expect_received_rows(const Case& c, const std::vector<Inputs>& every,
                            const DispatchResult& r, Quant quant, DType x_dtype,
                            std::int64_t alignment) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const auto expected = expected_rows(c, me, ranks);
  const hp::kernels::KernelTable* table = nullptr;
  HP_EXPECT_OK(hp::kernels::selected_target(&table));
  EXPECT_EQ(r.x_dtype, quant == Quant::kDynamicInt8 ? DType::kInt8 : x_dtype);
  for (std::size_t le = 0; le < expected.size(); ++le) {
    const std::int64_t first = r.expert_offsets[le];
    EXPECT_EQ(r.tokens_per_expert[le], std::int64_t(expected[le].size()));
    EXPECT_EQ(r.expert_offsets[le + 1] - first,
              (std::int64_t(expected[le].size()) + alignment - 1) / alignment * alignment);
    for (std::size_t i = 0; i < expected[le].size(); ++i) {
      const Expected& e = expected[le][i];
      const std::int64_t row = first + std::int64_t(i);
      EXPECT_EQ(r.handle.row_src_rank[std::size_t(row)], e.src);
      EXPECT_EQ(r.handle.row_src_token[std::size_t(row)], e.token);
      EXPECT_EQ(r.topk_weights[std::size_t(row)], e.weight);
      const Inputs& src = every[std::size_t(e.src)];
      const float* xs = src.x.data() + e.token * c.hidden;
      if (quant == Quant::kDynamicInt8) {
        // Bit for bit what quantising the source row gives.
        std::vector<std::int8_t> q(std::size_t(c.hidden));
        float scale = 0;
        std::vector<float> x_row(xs, xs + c.hidden);
        std::vector<std::uint16_t> x_row_bf16(std::size_t(c.hidden));
        for (std::int64_t j = 0; j < c.hidden; ++j)
          x_row_bf16[std::size_t(j)] = float_to_bf16(x_row[std::size_t(j)]);
        HP_EXPECT_OK(hp::kernels::quantize(
            *table,
            x_dtype == DType::kBF16 ? TensorView(x_row_bf16.data(), DType::kBF16, {1, c.hidden})
                                    : TensorView(x_row.data(), DType::kFP32, {1, c.hidden}),
            TensorView(q.data(), DType::kInt8, {1, c.hidden}),
            TensorView(&scale, DType::kFP32, {1})));
        EXPECT_EQ(std::memcmp(r.x_bytes.data() + row * c.hidden, q.data(), q.size()), 0)
            << "row " << row;
        EXPECT_EQ(r.x_scale[std::size_t(row)], scale);
      } else {
        for (std::int64_t j = 0; j < c.hidden; ++j) {
          const float got =
              x_dtype == DType::kBF16
                  ? bf16_to_float(reinterpret_cast<const std::uint16_t*>(
                        r.x_bytes.data())[row * c.hidden + j])
                  : reinterpret_cast<const float*>(r.x_bytes.data())[row * c.hidden + j];
          if (got != xs[j]) {
            ADD_FAILURE() << "rank " << me << " row " << row << " col " << j << ": " << got
                          << " vs " << xs[j];
            return Status::ok();
          }
        }
      }
    }
    for (std::int64_t row = first + std::int64_t(expected[le].size());
         row < r.expert_offsets[le + 1]; ++row) {
      EXPECT_EQ(r.handle.row_src_rank[std::size_t(row)], -1);  // pad rows
    }
  }
  return Status::ok();
}

// Runs one dispatch + combine with `comm` and checks everything against the reference.
Status check_round_trip(const Case& c, CommKind comm, Quant quant, DType x_dtype,
                        std::int64_t alignment) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  std::unique_ptr<hp::platform::Chip> chip;
  if (c.vector_cores > 0)
    HP_EXPECT_OK(hp::platform::Chip::create({.num_cube = 1, .num_vector = c.vector_cores}, &chip));
  std::unique_ptr<Buffer> buffer;
  // bf16 runs combine bf16 rows: their return rows are made 2 bytes wide.
  const Status created = Buffer::create({.hidden = c.hidden,
                                         .max_tokens_per_rank = c.tokens + ranks,
                                         .num_experts = c.experts,
                                         .topk = c.topk,
                                         .combine_element_bytes = x_dtype == DType::kBF16 ? 2 : 4,
                                         .comm = comm,
                                         .capacity_factor = c.capacity_factor,
                                         .chip = chip.get(),
                                         .zero_copy_combine = c.zero_copy,
                                         .dispatch_path = c.path},
                                        &buffer);
  if ((comm == CommKind::kWindow || c.path == DispatchPath::kPull) && !all_mapped()) {
    // Not every rank maps every peer's heap (the mpi transport): the window context and the
    // pull dispatch say so.
    EXPECT_EQ(created.code(), ErrorCode::kUnsupported) << created.to_string();
    return Status::ok();
  }
  HP_EXPECT_OK(created);
  // kAuto: the pull path wherever it can be taken.
  const bool pull = c.path == DispatchPath::kPull ||
                    (c.path == DispatchPath::kAuto && c.capacity_factor == 0.0 && all_mapped());
  EXPECT_EQ(buffer->dispatch_path(), pull ? DispatchPath::kPull : DispatchPath::kPush);
  std::vector<Inputs> every;  // every rank's inputs, made once
  for (int rank = 0; rank < ranks; ++rank) every.push_back(make_inputs(c, rank, ranks));
  Inputs& in = every[std::size_t(me)];
  std::vector<std::uint16_t> x_bf16(in.x.size());
  for (std::size_t i = 0; i < in.x.size(); ++i) x_bf16[i] = float_to_bf16(in.x[i]);
  DispatchArgs args;
  args.x = x_dtype == DType::kBF16 ? TensorView(x_bf16.data(), DType::kBF16, {in.tokens, c.hidden})
                                   : TensorView(in.x.data(), DType::kFP32, {in.tokens, c.hidden});
  args.topk_idx = TensorView(in.idx.data(), DType::kInt64, {in.tokens, c.topk});
  args.topk_weights = TensorView(in.weights.data(), DType::kFP32, {in.tokens, c.topk});
  if (c.masked) args.x_active_mask = TensorView(in.active.data(), DType::kUInt8, {in.tokens});
  args.quant = quant;
  args.expert_alignment = alignment;
  DispatchResult r;
  HP_EXPECT_OK(buffer->dispatch(args, &r));
  if (pull) {  // no records window, none grown
    EXPECT_EQ(buffer->record_capacity(), 0);
    EXPECT_EQ(buffer->times_grown(), 0);
  }
  HP_RETURN_IF_ERROR(expect_received_rows(c, every, r, quant, x_dtype, alignment));
  const auto expected = expected_rows(c, me, ranks);
  // ---- combine: expert e's output = (e + 1) x its input row; y = sum_k w_k (e_k + 1) x ------
  std::vector<float> out(std::size_t(r.rows * c.hidden), 0.0f);
  for (std::size_t le = 0; le < expected.size(); ++le) {
    for (std::size_t i = 0; i < expected[le].size(); ++i) {
      const Expected& e = expected[le][i];
      const Inputs& src = every[std::size_t(e.src)];
      for (std::int64_t j = 0; j < c.hidden; ++j) {
        out[std::size_t((r.expert_offsets[le] + std::int64_t(i)) * c.hidden + j)] =
            float(e.expert + 1) * src.x[std::size_t(e.token * c.hidden + j)];
      }
    }
  }
  std::vector<std::uint16_t> out_bf16(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out_bf16[i] = float_to_bf16(out[i]);
  std::vector<float> y(std::size_t(in.tokens * c.hidden), -1.0f);
  TensorView expert_out = x_dtype == DType::kBF16
                              ? TensorView(out_bf16.data(), DType::kBF16, {r.rows, c.hidden})
                              : TensorView(out.data(), DType::kFP32, {r.rows, c.hidden});
  if (c.zero_copy) {  // the same rows, written where combine reads them in place
    TensorView rows;
    HP_EXPECT_OK(buffer->combine_buffer(r.handle, &rows));
    EXPECT_EQ(rows.dtype(), expert_out.dtype());
    EXPECT_EQ(rows.dim(0), r.rows);
    std::memcpy(rows.data(), expert_out.data(),
                std::size_t(r.rows * c.hidden) * expert_out.element_size());
    expert_out = rows;
  }
  HP_EXPECT_OK(buffer->combine(expert_out, r.handle,
                               TensorView(y.data(), DType::kFP32, {in.tokens, c.hidden}),
                               TensorView(r.topk_weights.data(), DType::kFP32, {r.rows})));
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      double want = 0;
      if (in.active[std::size_t(t)]) {
        for (std::int64_t k = 0; k < c.topk; ++k) {
          const std::int64_t e = in.idx[std::size_t(t * c.topk + k)];
          if (e < 0) continue;
          const double xe = x_dtype == DType::kBF16
                                ? double(bf16_to_float(float_to_bf16(
                                      float(e + 1) * in.x[std::size_t(t * c.hidden + j)])))
                                : double(e + 1) * in.x[std::size_t(t * c.hidden + j)];
          want += double(in.weights[std::size_t(t * c.topk + k)]) * xe;
        }
      }
      // fp32: exact (dyadic weights, few-bit values). bf16: partial rows are rounded once.
      const double tol = x_dtype == DType::kBF16 ? 1e-2 * (std::fabs(want) + 1) : 0.0;
      if (std::fabs(double(y[std::size_t(t * c.hidden + j)]) - want) > tol) {
        ADD_FAILURE() << "rank " << me << " y[" << t << "][" << j
                      << "] = " << y[std::size_t(t * c.hidden + j)] << ", expected " << want;
        return Status::ok();
      }
    }
  }
  return buffer->destroy();
}

class DispatchCombine : public ::testing::TestWithParam<CommKind> {};

TEST_P(DispatchCombine, UniformFp32) {
  run_scenario([&] { return check_round_trip(Case{}, GetParam(), Quant::kNone, DType::kFP32, 1); });
}
TEST_P(DispatchCombine, UniformBf16Aligned) {
  run_scenario([&] {
    return check_round_trip(Case{.seed = 2}, GetParam(), Quant::kNone, DType::kBF16, 16);
  });
}
TEST_P(DispatchCombine, QuantisedInt8) {
  run_scenario([&] {
    return check_round_trip(Case{.seed = 3}, GetParam(), Quant::kDynamicInt8, DType::kFP32, 1);
  });
}
TEST_P(DispatchCombine, AllTokensToExpertZero) {
  run_scenario([&] {
    return check_round_trip(Case{.routing = Routing::kAllToExpert0, .seed = 4}, GetParam(),
                            Quant::kNone, DType::kFP32, 1);
  });
}
TEST_P(DispatchCombine, EmptyRanksAndMask) {
  run_scenario([&] {
    return check_round_trip(Case{.routing = Routing::kSomeRanksEmpty, .masked = true, .seed = 5},
                            GetParam(), Quant::kDynamicInt8, DType::kBF16, 4);
  });
}
TEST_P(DispatchCombine, RepeatedCallsOnOneBuffer) {
  run_scenario([&]() -> Status {
    for (std::uint32_t seed = 10; seed < 14; ++seed) {
      HP_RETURN_IF_ERROR(check_round_trip(Case{.tokens = 7, .seed = seed}, GetParam(), Quant::kNone,
                                          DType::kFP32, 1));
    }
    return Status::ok();
  });
}

// Both dispatch paths, chosen explicitly, give the same rows and y for every routing, dtype,
// alignment and quantisation; the pull path where peers are not mapped is UNSUPPORTED.
TEST_P(DispatchCombine, PushAndPullPaths) {
  run_scenario([&]() -> Status {
    for (DispatchPath path : {DispatchPath::kPush, DispatchPath::kPull}) {
      HP_RETURN_IF_ERROR(
          check_round_trip(Case{.path = path}, GetParam(), Quant::kNone, DType::kFP32, 1));
      HP_RETURN_IF_ERROR(check_round_trip(Case{.seed = 2, .path = path}, GetParam(), Quant::kNone,
                                          DType::kBF16, 16));
      HP_RETURN_IF_ERROR(check_round_trip(Case{.seed = 3, .path = path}, GetParam(),
                                          Quant::kDynamicInt8, DType::kBF16, 1));
      HP_RETURN_IF_ERROR(
          check_round_trip(Case{.routing = Routing::kAllToExpert0, .seed = 4, .path = path},
                           GetParam(), Quant::kNone, DType::kFP32, 4));
      HP_RETURN_IF_ERROR(check_round_trip(
          Case{.routing = Routing::kSomeRanksEmpty, .masked = true, .seed = 5, .path = path},
          GetParam(), Quant::kDynamicInt8, DType::kFP32, 1));
      HP_RETURN_IF_ERROR(
          check_round_trip(Case{.seed = 6, .vector_cores = 2, .zero_copy = true, .path = path},
                           GetParam(), Quant::kDynamicInt8, DType::kFP32, 1));
    }
    return Status::ok();
  });
}

// A buffer larger than the heap is OUT_OF_MEMORY on every rank, naming the region and the
// setting to raise, whichever path it takes; the heap is whole again afterwards.
TEST_P(DispatchCombine, BufferLargerThanTheHeapFailsEveryRank) {
  run_scenario([&]() -> Status {
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    for (DispatchPath path : {DispatchPath::kPush, DispatchPath::kPull}) {
      if (path == DispatchPath::kPull && !all_mapped()) continue;
      // zero_copy_combine: no return rows in the window, so the records or the send window fail.
      std::unique_ptr<Buffer> buffer;
      const Status s = Buffer::create({.hidden = 4096,
                                       .max_tokens_per_rank = 1 << 20,
                                       .num_experts = 2 * hp::shmem::n_pes(),
                                       .topk = 2,
                                       .comm = GetParam(),
                                       .zero_copy_combine = true,
                                       .dispatch_path = path},
                                      &buffer);
      EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory) << s.to_string();
      EXPECT_NE(s.message().find(path == DispatchPath::kPull ? "send window" : "records"),
                std::string::npos)
          << s.to_string();
      EXPECT_NE(s.message().find("HP_SHMEM_HEAP_SIZE"), std::string::npos) << s.to_string();
      EXPECT_EQ(buffer, nullptr);
    }
    std::unique_ptr<Buffer> small;
    HP_EXPECT_OK(Buffer::create(SmallBatch::config(GetParam()), &small));
    return small->destroy();
  });
}

// A capacity factor bounds the push path's records window; asking for the pull path with one
// is INVALID_ARGUMENT on every rank.
TEST_P(DispatchCombine, PullWithACapacityFactorIsRejected) {
  run_scenario([&]() -> Status {
    BufferConfig config = SmallBatch::config(GetParam());
    config.capacity_factor = 1.0;
    config.dispatch_path = DispatchPath::kPull;
    std::unique_ptr<Buffer> buffer;
    const Status s = Buffer::create(config, &buffer);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("capacity_factor"), std::string::npos) << s.to_string();
    EXPECT_EQ(buffer, nullptr);
    return Status::ok();
  });
}

// Sizes past the buffer's limits (buffer_config.h) are INVALID_ARGUMENT on every rank, before
// any byte count is computed from them (INT64_MAX hidden would overflow the window's plan).
TEST_P(DispatchCombine, SizesPastTheLimitsAreRejected) {
  run_scenario([&]() -> Status {
    const auto huge = std::numeric_limits<std::int64_t>::max();
    for (auto set : std::initializer_list<void (*)(BufferConfig&, std::int64_t)>{
             [](BufferConfig&c, std::int64_t v) { c.hidden = v; },
             [](BufferConfig&c, std::int64_t v) { c.max_tokens_per_rank = v; },
             [](BufferConfig&c, std::int64_t v) { c.topk = v; },
             [](BufferConfig&c, std::int64_t v) { c.num_experts = v; }}) {
      BufferConfig config = SmallBatch::config(GetParam());
      set(config, huge);
      std::unique_ptr<Buffer> buffer;
      const Status s = Buffer::create(config, &buffer);
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
      EXPECT_EQ(buffer, nullptr);
    }
    return Status::ok();
  });
}

// Dispatches back to back with a slow rank: rank 1 stops after its first expert's rows of
// each dispatch, so the others publish the next dispatch's tokens (pull: into the other half
// of their send windows) while it still reads this one's. Every dispatch's rows stay its own.
TEST_P(DispatchCombine, BackToBackDispatchesWithASlowRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    for (DispatchPath path : {DispatchPath::kPush, DispatchPath::kPull}) {
      if (path == DispatchPath::kPull && !all_mapped()) continue;
      const Case base{.path = path};
      std::unique_ptr<Buffer> buffer;
      HP_RETURN_IF_ERROR(Buffer::create({.hidden = base.hidden,
                                         .max_tokens_per_rank = base.tokens + ranks,
                                         .num_experts = base.experts,
                                         .topk = base.topk,
                                         .comm = GetParam(),
                                         .dispatch_path = path},
                                        &buffer));
      for (std::uint32_t seed = 50; seed < 54; ++seed) {
        const Case c{.seed = seed, .path = path};
        std::vector<Inputs> every;
        for (int rank = 0; rank < ranks; ++rank) every.push_back(make_inputs(c, rank, ranks));
        const DispatchArgs args = input_args(every[std::size_t(me)], c);
        DispatchResult r;
        HP_EXPECT_OK(buffer->notify_dispatch(args, &r.handle));
        r.x_dtype = DType::kFP32;
        r.rows = r.handle.rows;
        r.hidden = c.hidden;
        r.x_bytes.resize(std::size_t(r.rows * c.hidden) * sizeof(float));
        r.topk_weights.resize(std::size_t(r.rows));
        r.expert_offsets = r.handle.expert_offsets;
        r.tokens_per_expert = r.handle.tokens_per_expert;
        HP_EXPECT_OK(buffer->dispatch_data(
            args, &r.handle,
            {.x = r.x(), .topk_weights = TensorView(r.topk_weights.data(), DType::kFP32, {r.rows})},
            [&](std::int64_t local_expert) {
              if (me == 1 && local_expert == 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
              }
              return Status::ok();
            }));
        HP_RETURN_IF_ERROR(expect_received_rows(c, every, r, Quant::kNone, DType::kFP32, 1));
      }
      HP_RETURN_IF_ERROR(buffer->destroy());
    }
    return Status::ok();
  });
}

// The same results with the work split over a chip's vector cores (1:1 and 1:2 chips; tokens
// fewer than cores on some ranks).
TEST_P(DispatchCombine, OnVectorCores) {
  run_scenario([&]() -> Status {
    HP_RETURN_IF_ERROR(check_round_trip(Case{.seed = 20, .vector_cores = 2}, GetParam(),
                                        Quant::kDynamicInt8, DType::kBF16, 4));
    HP_RETURN_IF_ERROR(check_round_trip(Case{.tokens = 1, .seed = 21, .vector_cores = 2},
                                        GetParam(), Quant::kNone, DType::kFP32, 1));
    return check_round_trip(
        Case{.routing = Routing::kSomeRanksEmpty, .masked = true, .seed = 22, .vector_cores = 1},
        GetParam(), Quant::kNone, DType::kFP32, 1);
  });
}

// The zero-copy combine (expert rows read in place from each rank's combine rows): the same
// results as the copying one, for every routing, dtype, alignment and quantisation above, on
// the calling thread and on vector cores; all tokens to expert 0 grows the combine rows.
TEST_P(DispatchCombine, ZeroCopyCombine) {
  run_scenario([&]() -> Status {
    const CommKind comm = GetParam();
    HP_RETURN_IF_ERROR(
        check_round_trip(Case{.zero_copy = true}, comm, Quant::kNone, DType::kFP32, 1));
    HP_RETURN_IF_ERROR(
        check_round_trip(Case{.seed = 2, .zero_copy = true}, comm, Quant::kNone, DType::kBF16, 16));
    HP_RETURN_IF_ERROR(check_round_trip(Case{.seed = 3, .zero_copy = true}, comm,
                                        Quant::kDynamicInt8, DType::kFP32, 1));
    HP_RETURN_IF_ERROR(
        check_round_trip(Case{.routing = Routing::kAllToExpert0, .seed = 4, .zero_copy = true},
                         comm, Quant::kNone, DType::kFP32, 1));
    HP_RETURN_IF_ERROR(check_round_trip(
        Case{.routing = Routing::kSomeRanksEmpty, .masked = true, .seed = 5, .zero_copy = true},
        comm, Quant::kDynamicInt8, DType::kBF16, 4));
    return check_round_trip(Case{.seed = 20, .vector_cores = 2, .zero_copy = true}, comm,
                            Quant::kDynamicInt8, DType::kBF16, 4);
  });
}

// One zero-copy buffer over many calls: routings that grow its combine rows and shrink again,
// two combines of one dispatch (the second's combine_buffer waits until every rank has read
// the first's rows), weighted and not; y is exactly x (dyadic weights summing to 1), 2x.
TEST_P(DispatchCombine, ZeroCopyCombineOverManyCalls) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    const Case base{.zero_copy = true};
    HP_RETURN_IF_ERROR(Buffer::create({.hidden = base.hidden,
                                       .max_tokens_per_rank = base.tokens + ranks,
                                       .num_experts = base.experts,
                                       .topk = base.topk,
                                       .comm = GetParam(),
                                       .zero_copy_combine = true},
                                      &buffer));
    const Routing routings[] = {Routing::kUniform, Routing::kAllToExpert0, Routing::kUniform,
                                Routing::kSomeRanksEmpty};
    DispatchResult r;
    for (std::uint32_t round = 0; round < 4; ++round) {
      Case c = base;
      c.routing = routings[round];
      c.seed = 80 + round;
      const Inputs in = make_inputs(c, me, ranks);
      DispatchArgs args = input_args(in, c);
      args.expert_alignment = round == 2 ? 8 : 1;
      HP_RETURN_IF_ERROR(buffer->dispatch(args, &r));
      for (int pass = 0; pass < 2; ++pass) {
        TensorView rows;
        HP_RETURN_IF_ERROR(buffer->combine_buffer(r.handle, &rows));
        const auto* x_rows = reinterpret_cast<const float*>(r.x_bytes.data());
        auto* dst = static_cast<float*>(rows.data());
        for (std::int64_t i = 0; i < r.rows * c.hidden; ++i) dst[i] = float(pass + 1) * x_rows[i];
        std::vector<float> y(in.x.size(), -1.0f);
        HP_RETURN_IF_ERROR(buffer->combine(
            rows, r.handle, TensorView(y.data(), DType::kFP32, {in.tokens, c.hidden}),
            TensorView(r.topk_weights.data(), DType::kFP32, {r.rows}), pass == 0));
        const auto factor = [&](std::int64_t t) {
          float weight = 0;  // unweighted: the number of experts the token went to
          for (std::int64_t k = 0; k < c.topk; ++k) {
            if (in.idx[std::size_t(t * c.topk + k)] >= 0)
              weight += pass == 0 ? in.weights[std::size_t(t * c.topk + k)] : 1.0f;
          }
          return float(pass + 1) * weight;
        };
        const std::string what = "rank " + std::to_string(me) + " round " + std::to_string(round) +
                                 " pass " + std::to_string(pass);
        if (!y_is_scaled_x(y, in, c.hidden, factor, what)) return Status::ok();
      }
    }
    return buffer->destroy();
  });
}

// Two combines of one dispatch reading the same rows, with no combine_buffer between them: the
// second rewrites the rows' weights only after every rank has read the first's. Rank 0 has
// 2048 tokens, the others one, so they reach their second combine while rank 0 still reads.
TEST_P(DispatchCombine, ZeroCopyTwoCombinesOfTheSameRows) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const std::int64_t hidden = 256, tokens = me == 0 ? 2048 : 1, experts = 2 * ranks;
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(Buffer::create({.hidden = hidden,
                                       .max_tokens_per_rank = 2048,
                                       .num_experts = experts,
                                       .topk = 2,
                                       .comm = GetParam(),
                                       .zero_copy_combine = true},
                                      &buffer));
    std::vector<float> x(std::size_t(tokens * hidden)), w(std::size_t(tokens * 2), 0.5f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6);
    std::vector<std::int64_t> idx(std::size_t(tokens * 2));
    for (std::int64_t t = 0; t < tokens; ++t) {
      idx[std::size_t(2 * t)] = t % experts;
      idx[std::size_t(2 * t + 1)] = (t + 1) % experts;
    }
    DispatchResult r;
    HP_RETURN_IF_ERROR(
        buffer->dispatch({.x = TensorView(x.data(), DType::kFP32, {tokens, hidden}),
                          .topk_idx = TensorView(idx.data(), DType::kInt64, {tokens, 2}),
                          .topk_weights = TensorView(w.data(), DType::kFP32, {tokens, 2})},
                         &r));
    TensorView rows;
    HP_RETURN_IF_ERROR(buffer->combine_buffer(r.handle, &rows));
    std::memcpy(rows.data(), r.x_bytes.data(), r.x_bytes.size());
    std::vector<float> weighted(x.size(), -1.0f), plain(x.size(), -1.0f);
    const TensorView row_weights(r.topk_weights.data(), DType::kFP32, {r.rows});
    HP_RETURN_IF_ERROR(buffer->combine(
        rows, r.handle, TensorView(weighted.data(), DType::kFP32, {tokens, hidden}), row_weights));
    HP_RETURN_IF_ERROR(buffer->combine(rows, r.handle,
                                       TensorView(plain.data(), DType::kFP32, {tokens, hidden}),
                                       row_weights, /*weighted=*/false));
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (weighted[i] != x[i] || plain[i] != 2 * x[i]) {
        ADD_FAILURE() << "rank " << me << " element " << i << ": weighted " << weighted[i]
                      << ", plain " << plain[i] << ", x " << x[i];
        break;
      }
    }
    return buffer->destroy();
  });
}

// Zero-copy misuse: expert_out that is not combine_buffer()'s tensor on one rank is that
// rank's INVALID_ARGUMENT and ABORTED elsewhere, and the buffer works afterwards; a stale
// handle is INVALID_ARGUMENT; combine_buffer on a copying buffer is FAILED_PRECONDITION.
TEST_P(DispatchCombine, ZeroCopyCombineMisuse) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    BufferConfig config = SmallBatch::config(GetParam());
    config.zero_copy_combine = true;
    HP_RETURN_IF_ERROR(Buffer::create(config, &buffer));
    SmallBatch batch;
    DispatchResult r;
    for (int round = 0; round < 2; ++round) {
      HP_RETURN_IF_ERROR(buffer->dispatch(batch.args(), &r));
      TensorView rows;
      HP_RETURN_IF_ERROR(buffer->combine_buffer(r.handle, &rows));
      std::fill_n(static_cast<float*>(rows.data()), r.rows * 16, 1.0f);
      std::vector<float> own(std::size_t(r.rows * 16), 1.0f), y(4 * 16, -1.0f);
      const bool bad = round == 0 && me == ranks - 1;
      const Status s =
          buffer->combine(bad ? TensorView(own.data(), DType::kFP32, {r.rows, 16}) : rows, r.handle,
                          TensorView(y.data(), DType::kFP32, {4, 16}),
                          TensorView(r.topk_weights.data(), DType::kFP32, {r.rows}));
      if (round == 0) {
        EXPECT_EQ(s.code(), bad ? ErrorCode::kInvalidArgument : ErrorCode::kAborted)
            << s.to_string();
      } else {
        HP_EXPECT_OK(s);
        EXPECT_EQ(y[0], 1.0f);  // the token's two weights sum to 1
      }
    }
    const Handle stale = r.handle;
    HP_RETURN_IF_ERROR(buffer->dispatch(batch.args(), &r));
    TensorView rows;
    EXPECT_EQ(buffer->combine_buffer(stale, &rows).code(), ErrorCode::kInvalidArgument);
    HP_RETURN_IF_ERROR(buffer->destroy());
    std::unique_ptr<Buffer> copying;
    HP_RETURN_IF_ERROR(Buffer::create(SmallBatch::config(GetParam()), &copying));
    HP_RETURN_IF_ERROR(copying->dispatch(batch.args(), &r));
    EXPECT_EQ(copying->combine_buffer(r.handle, &rows).code(), ErrorCode::kFailedPrecondition);
    return copying->destroy();
  });
}

// Every token to expert 0 overflows a capacity of one average load: the records region grows
// (x1.25 steps, collectively) and the results are exact; nothing is dropped.
TEST_P(DispatchCombine, CapacityGrowsOnOverflow) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    const Case c{.topk = 1, .routing = Routing::kAllToExpert0, .seed = 40, .capacity_factor = 1.0};
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    const std::int64_t tmax = c.tokens + ranks;
    HP_RETURN_IF_ERROR(Buffer::create({.hidden = c.hidden,
                                       .max_tokens_per_rank = tmax,
                                       .num_experts = c.experts,
                                       .topk = c.topk,
                                       .comm = GetParam(),
                                       .capacity_factor = 1.0},
                                      &buffer));
    EXPECT_EQ(buffer->record_capacity(), tmax);  // 1.0 x T_max x min(K = 1, R)
    const Inputs in = make_inputs(c, me, ranks);
    DispatchResult r;
    HP_RETURN_IF_ERROR(buffer->dispatch(input_args(in, c), &r));
    std::int64_t all_tokens = 0;
    for (int s = 0; s < ranks; ++s) all_tokens += c.tokens + s;
    EXPECT_EQ(r.rows, me == 0 ? all_tokens : 0);
    EXPECT_EQ(buffer->times_grown(), 1);
    EXPECT_GE(buffer->record_capacity(), all_tokens);
    EXPECT_LE(buffer->record_capacity(), ranks * tmax);
    HP_RETURN_IF_ERROR(buffer->destroy());
    // The whole round trip, exact, on a buffer that grows during it.
    return check_round_trip(c, GetParam(), Quant::kNone, DType::kFP32, 1);
  });
}

// Without growth, an overflow is OUT_OF_MEMORY on every rank before any token moves, and the
// buffer stays usable for batches that fit.
TEST_P(DispatchCombine, CapacityOverflowWithoutGrowthFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(Buffer::create({.hidden = 16,
                                       .max_tokens_per_rank = 8,
                                       .num_experts = 2 * ranks,
                                       .topk = 1,
                                       .comm = GetParam(),
                                       .capacity_factor = 1.0,
                                       .grow_on_overflow = false},
                                      &buffer));
    std::vector<float> x(8 * 16, 1.0f), w(8, 1.0f);
    std::vector<std::int64_t> to_zero(8, 0), to_own(8, 2 * me);
    auto dispatch = [&](std::vector<std::int64_t>& idx, DispatchResult* r) {
      return buffer->dispatch({.x = TensorView(x.data(), DType::kFP32, {8, 16}),
                               .topk_idx = TensorView(idx.data(), DType::kInt64, {8, 1}),
                               .topk_weights = TensorView(w.data(), DType::kFP32, {8, 1})},
                              r);
    };
    DispatchResult r;
    const Status s = dispatch(to_zero, &r);  // rank 0 would receive 8 x R > 8
    EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory) << s.to_string();
    EXPECT_NE(s.message().find("capacity"), std::string::npos) << s.to_string();
    HP_EXPECT_OK(dispatch(to_own, &r));  // each rank's tokens to its own expert: fits
    EXPECT_EQ(r.rows, 8);
    EXPECT_EQ(buffer->times_grown(), 0);
    return buffer->destroy();
  });
}

// combine(dispatch(x)) with the identity as every expert and weights summing to 1 is x, bit
// for bit (fp32, unquantised).
TEST_P(DispatchCombine, RoundTripOfTheIdentityIsX) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Case c{.seed = 70};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_case_buffer(c, GetParam(), &buffer));
    const Inputs in = make_inputs(c, me, ranks);
    DispatchResult r;
    DispatchArgs args = input_args(in, c);
    args.expert_alignment = 3;
    HP_RETURN_IF_ERROR(buffer->dispatch(args, &r));
    std::vector<float> y(in.x.size(), -1.0f);
    HP_RETURN_IF_ERROR(buffer->combine(r.x(), r.handle,
                                       TensorView(y.data(), DType::kFP32, {in.tokens, c.hidden}),
                                       TensorView(r.topk_weights.data(), DType::kFP32, {r.rows})));
    const auto sent = [&](std::int64_t t) {  // 1 for tokens that went to an expert, else 0
      bool any = false;
      for (std::int64_t k = 0; k < c.topk; ++k) any |= in.idx[std::size_t(t * c.topk + k)] >= 0;
      return any ? 1.0f : 0.0f;
    };
    if (!y_is_scaled_x(y, in, c.hidden, sent, "rank " + std::to_string(me))) return Status::ok();
    return buffer->destroy();
  });
}

// The streamed combine (rows sent as they are ready, in any order) of weighted identity rows is
// x, bit for bit; dispatch_data's per-expert callback fires once per local expert, in order,
// with that expert's rows already written; masked tokens and tokens without an expert get 0.
TEST_P(DispatchCombine, StreamedCombineOfTheIdentityIsX) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    for (const Case c : {Case{.masked = true, .seed = 71},
                         Case{.routing = Routing::kSomeRanksEmpty, .seed = 72}}) {
      std::unique_ptr<Buffer> buffer;
      HP_RETURN_IF_ERROR(Buffer::create({.hidden = c.hidden,
                                         .max_tokens_per_rank = c.tokens + ranks,
                                         .num_experts = c.experts,
                                         .topk = c.topk,
                                         .comm = GetParam(),
                                         .streamed_combine = true},
                                        &buffer));
      const Inputs in = make_inputs(c, me, ranks);
      DispatchArgs args = input_args(in, c);
      if (c.masked)
        args.x_active_mask =
            TensorView(const_cast<std::uint8_t*>(in.active.data()), DType::kUInt8, {in.tokens});
      const auto expected = expected_rows(c, me, ranks);
      // both halves of the pair region, then the first again
      for (int round = 0; round < 3; ++round) {
        Handle h;
        HP_RETURN_IF_ERROR(buffer->notify_dispatch(args, &h));
        std::vector<float> rows(std::size_t(h.rows * c.hidden)), scale(std::size_t(h.rows)),
            weight(std::size_t(h.rows));
        std::vector<std::int64_t> ready;
        HP_RETURN_IF_ERROR(buffer->dispatch_data(
            args, &h,
            {.x = TensorView(rows.data(), DType::kFP32, {h.rows, c.hidden}),
             .topk_weights = TensorView(weight.data(), DType::kFP32, {h.rows})},
            [&](std::int64_t le) -> Status {
              ready.push_back(le);
              // This expert's rows are in place: each is its source token's x.
              const std::int64_t first = h.expert_offsets[std::size_t(le)];
              for (std::size_t i = 0; i < expected[std::size_t(le)].size(); ++i) {
                const Expected& e = expected[std::size_t(le)][i];
                const Inputs src = make_inputs(c, e.src, ranks);
                EXPECT_EQ(rows[std::size_t((first + std::int64_t(i)) * c.hidden)],
                          src.x[std::size_t(e.token * c.hidden)])
                    << "rank " << me << " expert " << le << " row " << i;
              }
              return Status::ok();
            }));
        std::vector<std::int64_t> in_order(std::size_t(c.experts / ranks));
        std::iota(in_order.begin(), in_order.end(), 0);
        EXPECT_EQ(ready, in_order);
        // Each row times its weight, streamed in batches from the last rows to the first.
        for (std::int64_t r = 0; r < h.rows; ++r) {
          for (std::int64_t j = 0; j < c.hidden; ++j)
            rows[std::size_t(r * c.hidden + j)] *= weight[std::size_t(r)];
        }
        std::vector<float> y(in.x.size(), -1.0f);
        HP_RETURN_IF_ERROR(buffer->combine_stream_begin(
            h, TensorView(rows.data(), DType::kFP32, {h.rows, c.hidden}),
            TensorView(y.data(), DType::kFP32, {in.tokens, c.hidden})));
        for (std::int64_t end = h.rows; end > 0; end -= 5)
          HP_RETURN_IF_ERROR(buffer->combine_stream_rows(std::max<std::int64_t>(0, end - 5), end));
        HP_RETURN_IF_ERROR(buffer->combine_stream_end());
        // 1 for active tokens that went to an expert, else 0
        const auto sent = [&](std::int64_t t) {
          bool any = false;
          for (std::int64_t k = 0; k < c.topk; ++k) any |= in.idx[std::size_t(t * c.topk + k)] >= 0;
          any &= !c.masked || in.active[std::size_t(t)] != 0;
          return any ? 1.0f : 0.0f;
        };
        if (!y_is_scaled_x(y, in, c.hidden, sent,
                           "rank " + std::to_string(me) + " round " + std::to_string(round))) {
          return Status::ok();
        }
      }
      HP_RETURN_IF_ERROR(buffer->destroy());
    }
    return Status::ok();
  });
}

// A rank whose streamed combine inputs are bad fails its end; the others' end returns ABORTED
// at once; the buffer stays usable. Without streamed_combine, begin is FAILED_PRECONDITION.
TEST_P(DispatchCombine, StreamedCombineRejections) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    SmallBatch batch;
    {
      std::unique_ptr<Buffer> plain;
      HP_RETURN_IF_ERROR(Buffer::create(SmallBatch::config(GetParam()), &plain));
      DispatchResult r;
      HP_RETURN_IF_ERROR(plain->dispatch(batch.args(), &r));
      std::vector<float> y(4 * 16);
      const Status s =
          plain->combine_stream_begin(r.handle, r.x(), TensorView(y.data(), DType::kFP32, {4, 16}));
      EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
      HP_RETURN_IF_ERROR(plain->destroy());
    }
    std::unique_ptr<Buffer> buffer;
    BufferConfig config = SmallBatch::config(GetParam());
    config.streamed_combine = true;
    HP_RETURN_IF_ERROR(Buffer::create(config, &buffer));
    for (int round = 0; round < 2; ++round) {
      DispatchResult r;
      HP_RETURN_IF_ERROR(buffer->dispatch(batch.args(), &r));
      std::vector<float> out(std::size_t(r.rows * 16), 0.5f), y(4 * 16, -1.0f);
      const bool bad = round == 0 && me == ranks - 1;
      HP_RETURN_IF_ERROR(
          buffer->combine_stream_begin(r.handle, TensorView(out.data(), DType::kFP32, {r.rows, 16}),
                                       TensorView(y.data(), DType::kFP32, {bad ? 3 : 4, 16})));
      HP_RETURN_IF_ERROR(buffer->combine_stream_rows(0, r.rows));
      const Status s = buffer->combine_stream_end();
      if (round == 0) {
        EXPECT_EQ(s.code(), bad ? ErrorCode::kShapeMismatch : ErrorCode::kAborted) << s.to_string();
      } else {
        HP_EXPECT_OK(s);
        EXPECT_EQ(y[0], 1.0f);  // token 0's two rows of 0.5
      }
    }
    return buffer->destroy();
  });
}

// dispatch and combine are adjoint: <combine(e), y> = <e, dispatch(y)> for any rows e and
// tokens y (unweighted), and with weights <combine_w(e), y> = <e, w x dispatch(y)>, summed over
// every rank. Small integers keep the sums exact.
TEST_P(DispatchCombine, DispatchAndCombineAreAdjoint) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Case c{.seed = 71};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_case_buffer(c, GetParam(), &buffer));
    const Inputs in = make_inputs(c, me, ranks);
    std::vector<float> yv(in.x.size());
    for (std::size_t i = 0; i < yv.size(); ++i)
      yv[i] = float(int((i * 7 + std::size_t(me) * 3) % 11) - 5);
    DispatchResult r;  // dispatch(y): y's rows at the experts
    HP_RETURN_IF_ERROR(buffer->dispatch(
        {.x = TensorView(yv.data(), DType::kFP32, {in.tokens, c.hidden}),
         .topk_idx = TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64,
                                {in.tokens, c.topk}),
         .topk_weights =
             TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {in.tokens, c.topk})},
        &r));
    std::vector<float> e(std::size_t(r.rows * c.hidden));
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = float(int((i * 5 + std::size_t(me)) % 9) - 4);
    const auto* dy = reinterpret_cast<const float*>(r.x_bytes.data());
    for (bool weighted : {false, true}) {
      std::vector<float> ce(yv.size());
      HP_RETURN_IF_ERROR(
          buffer->combine(TensorView(e.data(), DType::kFP32, {r.rows, c.hidden}), r.handle,
                          TensorView(ce.data(), DType::kFP32, {in.tokens, c.hidden}),
                          TensorView(r.topk_weights.data(), DType::kFP32, {r.rows}), weighted));
      // [0]: <combine(e), y> on this rank; [1]: <e, (w x) dispatch(y)> on this rank.
      double local[2] = {0, 0};
      for (std::size_t i = 0; i < yv.size(); ++i) local[0] += double(ce[i]) * double(yv[i]);
      for (std::int64_t row = 0; row < r.rows; ++row) {
        const double w = weighted ? double(r.topk_weights[std::size_t(row)]) : 1.0;
        for (std::int64_t j = 0; j < c.hidden; ++j) {
          local[1] +=
              w * double(e[std::size_t(row * c.hidden + j)]) * double(dy[row * c.hidden + j]);
        }
      }
      void* sym = nullptr;
      HP_RETURN_IF_ERROR(hp::shmem::calloc(std::size_t(2 * ranks + 2), sizeof(double), &sym));
      auto* all = static_cast<double*>(sym);
      std::memcpy(all + 2 * ranks, local, sizeof(local));
      HP_RETURN_IF_ERROR(
          hp::shmem::fcollect(hp::shmem::kTeamWorld, all, all + 2 * ranks, sizeof(local)));
      double sums[2] = {0, 0};
      for (int rank = 0; rank < ranks; ++rank) {
        sums[0] += all[2 * rank];
        sums[1] += all[2 * rank + 1];
      }
      HP_RETURN_IF_ERROR(hp::shmem::free(sym));
      EXPECT_EQ(sums[0], sums[1]) << (weighted ? "weighted" : "unweighted");
      EXPECT_NE(sums[0], 0.0);
    }
    return buffer->destroy();
  });
}

// Every kind of bad input on one rank: that rank's own named error, ABORTED on the others, and
// the buffer still works afterwards.
TEST_P(DispatchCombine, EachBadInputFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(Buffer::create(SmallBatch::config(GetParam()), &buffer));
    std::vector<float> x(4 * 17, 1.0f), w(8, 0.5f);
    std::vector<std::int32_t> w_int(8, 1);
    struct Bad {
      const char* what;
      ErrorCode code;
      std::vector<std::int64_t> idx;
      std::int64_t hidden = 16;
      bool int_weights = false;
      std::int64_t idx_cols = 2;
    };
    const std::vector<Bad> cases = {
        {"expert id out of range", ErrorCode::kOutOfRange, {0, 1, 1, 2 * ranks, 0, 3, 1, 0}},
        {"negative expert id other than -1", ErrorCode::kOutOfRange, {0, 1, 1, -2, 0, 3, 1, 0}},
        {"an expert twice in one token", ErrorCode::kInvalidArgument, {0, 1, 1, 1, 0, 3, 1, 0}},
        {"x with another H than the buffer's",
         ErrorCode::kShapeMismatch,
         {0, 1, 1, 2, 0, 3, 1, 0},
         17},
        {"weights of the wrong dtype",
         ErrorCode::kDTypeMismatch,
         {0, 1, 1, 2, 0, 3, 1, 0},
         16,
         true},
        {"topk_idx of the wrong shape",
         ErrorCode::kShapeMismatch,
         {0, 1, 1, 2, 0, 3, 1, 0},
         16,
         false,
         1},
    };
    const std::vector<std::int64_t> good = {0, 1, 1, 2, 0, 3, 1, 0};
    for (const Bad& bad : cases) {
      const bool mine = me == ranks - 1;
      const std::vector<std::int64_t>& idx = mine ? bad.idx : good;
      const std::int64_t hidden = mine ? bad.hidden : 16;
      const std::int64_t cols = mine ? bad.idx_cols : 2;
      DispatchResult r;
      const Status s = buffer->dispatch(
          {.x = TensorView(x.data(), DType::kFP32, {4, hidden}),
           .topk_idx =
               TensorView(const_cast<std::int64_t*>(idx.data()), DType::kInt64, {8 / cols, cols}),
           .topk_weights = mine && bad.int_weights ? TensorView(w_int.data(), DType::kInt32, {4, 2})
                                                   : TensorView(w.data(), DType::kFP32, {4, 2})},
          &r);
      EXPECT_EQ(s.code(), mine ? bad.code : ErrorCode::kAborted)
          << bad.what << ": " << s.to_string();
    }
    DispatchResult r;
    HP_EXPECT_OK(buffer->dispatch(
        {.x = TensorView(x.data(), DType::kFP32, {4, 16}),
         .topk_idx = TensorView(const_cast<std::int64_t*>(good.data()), DType::kInt64, {4, 2}),
         .topk_weights = TensorView(w.data(), DType::kFP32, {4, 2})},
        &r));
    return buffer->destroy();
  });
}

// An expert_alignment past the bound (padded counts could overflow) is that rank's
// INVALID_ARGUMENT and ABORTED on the others.
TEST_P(DispatchCombine, ExpertAlignmentOutOfRangeFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    BufferConfig config = SmallBatch::config(GetParam());
    config.zero_copy_combine = true;
    HP_RETURN_IF_ERROR(Buffer::create(config, &buffer));
    SmallBatch batch;
    DispatchArgs args = batch.args();
    const bool mine = me == ranks - 1;
    args.expert_alignment = mine ? (std::int64_t{1} << 62) : 1;
    DispatchResult r;
    const Status s = buffer->dispatch(args, &r);
    EXPECT_EQ(s.code(), mine ? ErrorCode::kInvalidArgument : ErrorCode::kAborted) << s.to_string();
    args.expert_alignment = 1;
    HP_EXPECT_OK(buffer->dispatch(args, &r));
    return buffer->destroy();
  });
}

// A rank with a bad expert id fails with OUT_OF_RANGE; every other rank gets ABORTED naming it.
TEST_P(DispatchCombine, BadExpertIdOnOneRankFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    HP_EXPECT_OK(Buffer::create(SmallBatch::config(GetParam()), &buffer));
    SmallBatch batch;
    if (me == ranks - 1) batch.idx[3] = 2 * ranks;  // out of range
    DispatchResult r;
    const Status s = buffer->dispatch(batch.args(), &r);
    EXPECT_EQ(s.code(), me == ranks - 1 ? ErrorCode::kOutOfRange : ErrorCode::kAborted)
        << s.to_string();
    // The buffer stays usable: a good dispatch afterwards works on every rank.
    batch.idx[3] = 2;
    HP_EXPECT_OK(buffer->dispatch(batch.args(), &r));
    return buffer->destroy();
  });
}

// Ranks disagreeing on x's dtype or quantisation (each valid alone) would read each other's rows
// wrongly: INVALID_ARGUMENT on every rank, on both dispatch paths; the buffer stays usable.
TEST_P(DispatchCombine, RanksDisagreeingOnTheRowsFailEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    for (DispatchPath path : {DispatchPath::kPush, DispatchPath::kPull}) {
      if (path == DispatchPath::kPull && !all_mapped()) continue;
      BufferConfig config = SmallBatch::config(GetParam());
      config.dispatch_path = path;
      std::unique_ptr<Buffer> buffer;
      HP_EXPECT_OK(Buffer::create(config, &buffer));
      SmallBatch batch;
      std::vector<std::uint16_t> x_bf16(batch.x.size(), 0x3F80);  // 1.0
      DispatchResult r;
      for (int variant = 0; variant < 2; ++variant) {
        DispatchArgs a = batch.args();
        if (me == 0 && variant == 0) a.quant = Quant::kDynamicInt8;
        if (me == 0 && variant == 1) a.x = TensorView(x_bf16.data(), DType::kBF16, {4, 16});
        const Status s = buffer->dispatch(a, &r);
        EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
        EXPECT_NE(s.message().find("the same x dtype and quant"), std::string::npos)
            << s.to_string();
      }
      HP_EXPECT_OK(buffer->dispatch(batch.args(), &r));
      HP_RETURN_IF_ERROR(buffer->destroy());
    }
    return Status::ok();
  });
}

// A rank whose combine inputs are bad returns its own error, every other rank ABORTED naming it
// (at once, not at a deadline), and the buffer stays usable.
TEST_P(DispatchCombine, BadCombineInputOnOneRankFailsEveryRank) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(Buffer::create(SmallBatch::config(GetParam()), &buffer));
    SmallBatch batch;
    for (int round = 0; round < 2; ++round) {
      DispatchResult r;
      HP_RETURN_IF_ERROR(buffer->dispatch(batch.args(), &r));
      std::vector<float> out(std::size_t(r.rows * 16), 1.0f), y(4 * 16, -1.0f);
      const bool bad = round == 0 && me == ranks - 1;
      const Status s =
          buffer->combine(TensorView(out.data(), bad ? DType::kInt32 : DType::kFP32, {r.rows, 16}),
                          r.handle, TensorView(y.data(), DType::kFP32, {4, 16}),
                          TensorView(r.topk_weights.data(), DType::kFP32, {r.rows}));
      if (round == 0) {
        EXPECT_EQ(s.code(), bad ? ErrorCode::kDTypeMismatch : ErrorCode::kAborted) << s.to_string();
      } else {
        HP_EXPECT_OK(s);  // usable again: y = sum of the (two) weights x 1
        EXPECT_EQ(y[0], 1.0f);
      }
    }
    return buffer->destroy();
  });
}

// notify_dispatch + dispatch_data into outputs the caller allocated (the op ABI's way) gives
// what dispatch gives; a bad output on one rank is that rank's error only; dispatch_data
// without a notify_dispatch is FAILED_PRECONDITION.
TEST_P(DispatchCombine, TwoPhaseIntoCallerOutputs) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    const Case c{.seed = 50};
    std::unique_ptr<Buffer> buffer;
    HP_RETURN_IF_ERROR(make_case_buffer(c, GetParam(), &buffer));
    const Inputs in = make_inputs(c, me, ranks);
    DispatchArgs args = input_args(in, c);
    args.quant = Quant::kDynamicInt8;
    args.expert_alignment = 8;
    DispatchResult whole;
    HP_RETURN_IF_ERROR(buffer->dispatch(args, &whole));
    Handle h;
    EXPECT_EQ(buffer->dispatch_data(args, &h, {}).code(), ErrorCode::kFailedPrecondition);
    for (int round = 0; round < 2; ++round) {
      HP_RETURN_IF_ERROR(buffer->notify_dispatch(args, &h));
      EXPECT_EQ(h.rows, whole.rows);
      EXPECT_EQ(h.expert_offsets, whole.expert_offsets);
      std::vector<std::int8_t> x(std::size_t(h.rows * c.hidden), 7);
      std::vector<float> scale(std::size_t(h.rows), 7.0f), w(std::size_t(h.rows), 7.0f);
      const bool bad = round == 0 && me == 0;
      const Status s = buffer->dispatch_data(
          args, &h,
          {.x = TensorView(x.data(), DType::kInt8, {bad ? h.rows + 1 : h.rows, c.hidden}),
           .x_scale = TensorView(scale.data(), DType::kFP32, {h.rows}),
           .topk_weights = TensorView(w.data(), DType::kFP32, {h.rows})});
      if (bad) {
        EXPECT_EQ(s.code(), ErrorCode::kShapeMismatch) << s.to_string();
        continue;
      }
      HP_EXPECT_OK(s);
      EXPECT_EQ(std::memcmp(x.data(), whole.x_bytes.data(), x.size()), 0);  // pad rows zero too
      EXPECT_EQ(scale, whole.x_scale);
      EXPECT_EQ(w, whole.topk_weights);
      EXPECT_EQ(h.row_src_token, whole.handle.row_src_token);
    }
    return buffer->destroy();
  });
}

TEST_P(DispatchCombine, RanksDisagreeingOnConfigFailEverywhere) {
  run_scenario([&]() -> Status {
    const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    // Rank 0's config differs from the others' in one field: every rank names that field.
    const std::vector<std::pair<std::string, std::function<void(BufferConfig&)>>> fields = {
        {"num_experts", [&](BufferConfig& c) { c.num_experts = 4 * ranks; }},
        {"zero_copy_combine", [](BufferConfig& c) { c.zero_copy_combine = true; }},
        {"dispatch_path", [](BufferConfig& c) { c.dispatch_path = DispatchPath::kPush; }}};
    for (const auto& [name, change] : fields) {
      BufferConfig config{.hidden = 16,
                          .max_tokens_per_rank = 8,
                          .num_experts = 2 * ranks,
                          .topk = 2,
                          .comm = GetParam()};
      if (me == 0) change(config);
      std::unique_ptr<Buffer> buffer;
      const Status s = Buffer::create(config, &buffer);
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
      EXPECT_NE(s.message().find("disagree on " + name), std::string::npos) << s.to_string();
      EXPECT_EQ(buffer, nullptr);
    }
    return Status::ok();
  });
}

// Combine rows wider than the buffer's combine_element_bytes are INVALID_ARGUMENT (before any
// rank communicates, so every rank sees it alike).
TEST_P(DispatchCombine, CombineWiderThanTheBufferIsRejected) {
  run_scenario([&]() -> Status {
    if (GetParam() == CommKind::kWindow && !all_mapped()) return Status::ok();
    std::unique_ptr<Buffer> buffer;
    BufferConfig config = SmallBatch::config(GetParam());
    config.combine_element_bytes = 2;
    HP_EXPECT_OK(Buffer::create(config, &buffer));
    SmallBatch batch;
    DispatchResult r;
    HP_EXPECT_OK(buffer->dispatch(batch.args(), &r));
    std::vector<float> out(std::size_t(r.rows * 16), 1.0f), y(4 * 16);
    const Status s = buffer->combine(TensorView(out.data(), DType::kFP32, {r.rows, 16}), r.handle,
                                     TensorView(y.data(), DType::kFP32, {4, 16}),
                                     TensorView(r.topk_weights.data(), DType::kFP32, {r.rows}));
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("combine_element_bytes"), std::string::npos) << s.to_string();
    return buffer->destroy();
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, DispatchCombine,
                         ::testing::Values(CommKind::kShmem, CommKind::kWindow),
                         [](const auto& info) {
                           return info.param == CommKind::kShmem ? "shmem" : "window";
                         });

}  // namespace
}  // namespace hp::moe

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
