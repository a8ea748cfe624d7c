// MoE communication benchmark: dispatch + combine of hp::moe::Buffer (window and shmem comm
// contexts, zero-copy combine, and the low-latency mode at T <= 512) against a careful user's
// MPI_Alltoallv pipeline (alltoallv_pipeline.h) and against memcpy of the same bytes, in the
// same run, on every rank of an mpirun job:
//
//   mpirun -np 4 bench_moe_comm [--tokens 128,512,4096] [--hidden 2048,7168] [--experts 32]
//                               [--topk 8] [--rounds 7]
//                               [--impls window,shmem,zero-copy,low-latency,alltoallv,memcpy]
//                               [--vector-cores N] [--quick] [--json]
//
// Per shape every rank routes T tokens of bf16 x to K of E experts (uniform, seeded by rank);
// dispatch quantises to int8, combine sends bf16 expert outputs back. Rounds interleave the
// implementations (window, shmem, alltoallv, memcpy, window, ...); a phase's sample is the
// slowest rank's time from a common barrier, and the table shows medians. GB/s counts the same
// bytes for every implementation: what the phases deliver and consume, summed over ranks: the
// int8 rows of recv_x (one per (token, expert) pair, grouped by expert) that dispatch delivers
// and the bf16 expert-output rows that combine consumes. The memcpy peer copies exactly those
// bytes on every rank at once (the cost of the data products if no rank had to move them).
// Before timing, each implementation's y is checked against x (weights sum to 1, so
// combine(dispatch(x)) is x up to int8/bf16 rounding).
#include <mpi.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/bfloat16.h"
#include "common/compare.h"
#include "common/mpi_timed.h"
#include "kernels/ops.h"
#include "kernels/targets.h"
#include "moe/buffer.h"
#include "moe_comm/alltoallv_pipeline.h"
#include "platform/chip.h"
#include "shmem/shmem.h"

namespace hp::bench {
namespace {

// The largest batch the low-latency rows run at (its regions grow with R x T_max per expert).
constexpr std::int64_t kLowLatencyMaxTokens = 512;

struct Shape {
  std::int64_t tokens, hidden, experts, topk;
};

struct Inputs {
  std::vector<std::uint16_t> x;   // bf16 [T, H]
  std::vector<std::int64_t> idx;  // [T, K], distinct experts
  std::vector<float> weights;     // [T, K], positive, summing to 1
};

Inputs make_inputs(const Shape& s, int rank) {
  Inputs in;
  std::mt19937 rng(1234u + std::uint32_t(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  in.x.resize(std::size_t(s.tokens * s.hidden));
  for (auto& v : in.x) v = float_to_bf16(normal(rng));
  in.idx.resize(std::size_t(s.tokens * s.topk));
  in.weights.resize(in.idx.size());
  std::vector<std::int64_t> experts(static_cast<std::size_t>(s.experts));
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    for (std::size_t e = 0; e < experts.size(); ++e) experts[e] = std::int64_t(e);
    std::shuffle(experts.begin(), experts.end(), rng);
    float sum = 0;
    for (std::int64_t k = 0; k < s.topk; ++k) {
      in.idx[std::size_t(t * s.topk + k)] = experts[std::size_t(k)];
      sum += in.weights[std::size_t(t * s.topk + k)] = 0.5f + float(rng() % 1000) / 1000.0f;
    }
    for (std::int64_t k = 0; k < s.topk; ++k) in.weights[std::size_t(t * s.topk + k)] /= sum;
  }
  return in;
}

void check(const Status& s, const char* what) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "bench_moe_comm: %s: %s\n", what, s.to_string().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Whether y is x up to the rounding of int8 dispatch and bf16 combine, on every rank.
bool close_to_x(const std::vector<std::uint16_t>& y, const Inputs& in, const Shape& s) {
  int bad = 0;
  for (std::int64_t t = 0; t < s.tokens && bad == 0; ++t) {
    float amax = 0;
    for (std::int64_t c = 0; c < s.hidden; ++c)
      amax = std::max(amax, std::fabs(bf16_to_float(in.x[std::size_t(t * s.hidden + c)])));
    for (std::int64_t c = 0; c < s.hidden; ++c) {
      const auto i = std::size_t(t * s.hidden + c);
      if (std::fabs(bf16_to_float(y[i]) - bf16_to_float(in.x[i])) > 0.02f * amax) bad = 1;
    }
  }
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any == 0;
}

// expert_out rows = bf16(dequantised dispatched rows): combine then returns ~x.
std::vector<std::uint16_t> expert_rows(const std::int8_t* q, const float* scale, std::int64_t rows,
                                       std::int64_t hidden) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < hidden; ++c) {
      out[std::size_t(r * hidden + c)] = float_to_bf16(float(q[r * hidden + c]) * scale[r]);
    }
  }
  return out;
}

struct Phases {
  std::vector<double> dispatch, combine;
};

// One implementation under test: a dispatch and a combine step over fixed inputs.
struct Impl {
  std::string name;
  std::function<void()> dispatch, combine;
  Phases samples;
};

// Ours on one comm context: checked, then wrapped as dispatch/combine steps.
struct Ours {
  std::unique_ptr<hp::moe::Buffer> buffer;
  hp::moe::DispatchResult result;
  std::shared_ptr<const std::vector<std::uint16_t>> expert_out;  // every context shares one
  const std::uint16_t* rows = nullptr;  // expert_out's rows, wherever they are now
  std::vector<std::uint16_t> y;
};

// `expert_out`: rows of an earlier context's dispatch of the same inputs (the same row order on
// every context), or null to make them from this one.
Status make_ours(hp::moe::CommKind kind, const Shape& s, const Inputs& in,
                 std::shared_ptr<const std::vector<std::uint16_t>> expert_out,
                 hp::platform::Chip* chip, Ours* o, bool zero_copy = false) {
  hp::moe::BufferConfig config{.hidden = s.hidden,
                               .max_tokens_per_rank = s.tokens,
                               .num_experts = s.experts,
                               .topk = s.topk,
                               .max_element_bytes = 1,
                               .combine_element_bytes = 2,
                               .comm = kind,
                               .chip = chip,
                               .zero_copy_combine = zero_copy};
  HP_RETURN_IF_ERROR(hp::moe::Buffer::create(config, &o->buffer));
  hp::moe::DispatchArgs args;
  args.x = TensorView(const_cast<std::uint16_t*>(in.x.data()), DType::kBF16, {s.tokens, s.hidden});
  args.topk_idx =
      TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64, {s.tokens, s.topk});
  args.topk_weights =
      TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {s.tokens, s.topk});
  args.quant = hp::moe::Quant::kDynamicInt8;
  HP_RETURN_IF_ERROR(o->buffer->dispatch(args, &o->result));
  const auto& r = o->result;
  if (expert_out == nullptr) {
    expert_out = std::make_shared<const std::vector<std::uint16_t>>(
        expert_rows(reinterpret_cast<const std::int8_t*>(r.x_bytes.data()), r.x_scale.data(),
                    r.rows, s.hidden));
  }
  HP_ENSURE(std::int64_t(expert_out->size()) == r.rows * s.hidden, ErrorCode::kInternal,
            "the comm contexts dispatched different rows");
  o->expert_out = std::move(expert_out);
  o->rows = o->expert_out->data();
  o->y.assign(in.x.size(), 0);
  return Status::ok();
}

Status ours_combine(Ours& o, const Shape& s) {
  TensorView expert_out(const_cast<std::uint16_t*>(o.rows), DType::kBF16,
                        {o.result.rows, s.hidden});
  if (o.buffer->config().zero_copy_combine) {  // rows: the buffer's combine rows
    TensorView rows;
    HP_RETURN_IF_ERROR(o.buffer->combine_buffer(o.result.handle, &rows));
    // the first call: the rows go where the GEMM making them would write them
    if (rows.data() != o.rows) {
      HP_ENSURE(o.expert_out != nullptr, ErrorCode::kInternal,
                "the combine rows moved (a dispatch of the same inputs grew them)");
      std::memcpy(rows.data(), o.rows, rows.span_bytes());
      o.rows = static_cast<const std::uint16_t*>(rows.data());
    }
    expert_out = rows;
  }
  return o.buffer->combine(expert_out, o.result.handle,
                           TensorView(o.y.data(), DType::kBF16, {s.tokens, s.hidden}),
                           TensorView(o.result.topk_weights.data(), DType::kFP32, {o.result.rows}));
}

// Ours in the low-latency mode (the decode path): expert rows in its [E_local, R x T_max, H]
// layout, made from its own dispatch.
struct LowLatency {
  std::unique_ptr<hp::moe::Buffer> buffer;
  hp::moe::LowLatencyResult result;
  std::vector<std::uint16_t> expert_out, y;
};

Status make_low_latency(const Shape& s, const hp::moe::DispatchArgs& args, hp::platform::Chip* chip,
                        LowLatency* o) {
  hp::moe::BufferConfig config{.hidden = s.hidden,
                               .max_tokens_per_rank = s.tokens,
                               .num_experts = s.experts,
                               .topk = s.topk,
                               .max_element_bytes = 1,
                               .combine_element_bytes = 2,
                               .comm = hp::moe::CommKind::kShmem,
                               .low_latency = true,
                               .chip = chip};
  HP_RETURN_IF_ERROR(hp::moe::Buffer::create(config, &o->buffer));
  HP_RETURN_IF_ERROR(o->buffer->low_latency_dispatch(args, &o->result));
  const auto& r = o->result;
  o->expert_out.assign(
      std::size_t(std::int64_t(r.tokens_per_expert.size()) * r.rows_per_expert * s.hidden), 0);
  for (std::size_t le = 0; le < r.tokens_per_expert.size(); ++le) {
    const auto first = std::int64_t(le) * r.rows_per_expert;
    const std::vector<std::uint16_t> rows =
        expert_rows(reinterpret_cast<const std::int8_t*>(r.x_bytes.data()) + first * s.hidden,
                    r.x_scale.data() + first, r.tokens_per_expert[le], s.hidden);
    std::copy(rows.begin(), rows.end(), o->expert_out.begin() + first * s.hidden);
  }
  o->y.assign(std::size_t(s.tokens * s.hidden), 0);
  return Status::ok();
}

Status low_latency_combine(LowLatency& o, const Shape& s, const hp::moe::DispatchArgs& args) {
  const auto& r = o.result;
  return o.buffer->low_latency_combine(
      TensorView(o.expert_out.data(), DType::kBF16,
                 {std::int64_t(r.tokens_per_expert.size()), r.rows_per_expert, s.hidden}),
      args.topk_weights, r.handle, TensorView(o.y.data(), DType::kBF16, {s.tokens, s.hidden}));
}

struct Row {
  Shape shape;
  double bytes;  // summed over ranks: dispatch + combine
  // name -> (dispatch, combine) s
  std::vector<std::pair<std::string, std::pair<double, double>>> medians;
};

Row run_shape(const Shape& s, int rounds, bool window_ok, const std::set<std::string>& selected,
              hp::platform::Chip* chip) {
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Inputs in = make_inputs(s, rank);
  std::vector<Impl> impls;
  Ours window, shmem, zero_copy;
  if (window_ok && selected.contains("window")) {
    check(make_ours(hp::moe::CommKind::kWindow, s, in, nullptr, chip, &window), "window dispatch");
  }
  if (selected.contains("shmem")) {
    check(make_ours(hp::moe::CommKind::kShmem, s, in, window.expert_out, chip, &shmem),
          "shmem dispatch");
  }
  if (selected.contains("zero-copy")) {
    check(
        make_ours(hp::moe::CommKind::kShmem, s, in,
                  window.expert_out ? window.expert_out : shmem.expert_out, chip, &zero_copy, true),
        "zero-copy dispatch");
  }
  const Shape shape = s;
  const hp::moe::DispatchArgs args{
      .x = TensorView(const_cast<std::uint16_t*>(in.x.data()), DType::kBF16, {s.tokens, s.hidden}),
      .topk_idx =
          TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64, {s.tokens, s.topk}),
      .topk_weights =
          TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {s.tokens, s.topk}),
      .quant = hp::moe::Quant::kDynamicInt8};
  for (Ours* o : {&window, &shmem, &zero_copy}) {
    if (o->buffer == nullptr) continue;
    check(ours_combine(*o, s), "combine");
    if (!close_to_x(o->y, in, s))
      check(Status::error(ErrorCode::kInternal, "ours: y is not x"), "check");
    impls.push_back({o == &window  ? "window"
                     : o == &shmem ? "shmem"
                                   : "zero-copy",
                     [o, &args] { check(o->buffer->dispatch(args, &o->result), "dispatch"); },
                     [o, shape] { check(ours_combine(*o, shape), "combine"); },
                     {}});
  }
  // The low-latency mode's regions hold R x T_max rows per expert: decode batches only.
  LowLatency low_latency;
  if (selected.contains("low-latency") && s.tokens <= kLowLatencyMaxTokens) {
    check(make_low_latency(s, args, chip, &low_latency), "low-latency dispatch");
    check(low_latency_combine(low_latency, s, args), "low-latency combine");
    if (!close_to_x(low_latency.y, in, s))
      check(Status::error(ErrorCode::kInternal, "low-latency: y is not x"), "check");
    impls.push_back({"low-latency",
                     [&] {
                       check(low_latency.buffer->low_latency_dispatch(args, &low_latency.result),
                             "low-latency dispatch");
                     },
                     [&, shape] {
                       check(low_latency_combine(low_latency, shape, args), "low-latency combine");
                     },
                     {}});
  }
  // With the zero-copy context, every context reads the expert rows where it keeps them (the
  // private copy is freed: four ranks of the largest shape fit in this machine's memory).
  if (zero_copy.buffer != nullptr) {
    for (Ours* o : {&window, &shmem, &zero_copy}) {
      o->rows = zero_copy.rows;
      o->expert_out.reset();
    }
  }
  AlltoallvPipeline pipeline(MPI_COMM_WORLD, s.hidden, s.experts, s.topk,
                             chip ? chip->num_vector() : 1);
  check(pipeline.dispatch(in.x.data(), in.idx.data(), in.weights.data(), s.tokens),
        "alltoallv dispatch");
  const std::vector<std::uint16_t> pipe_out =
      expert_rows(pipeline.recv_x(), pipeline.recv_scale(), pipeline.rows(), s.hidden);
  std::vector<std::uint16_t> pipe_y(in.x.size());
  check(pipeline.combine(pipe_out.data(), pipe_y.data()), "alltoallv combine");
  if (!close_to_x(pipe_y, in, s))
    check(Status::error(ErrorCode::kInternal, "alltoallv: y is not x"), "check");
  impls.push_back(
      {"alltoallv",
       [&] {
         check(pipeline.dispatch(in.x.data(), in.idx.data(), in.weights.data(), s.tokens),
               "alltoallv dispatch");
       },
       [&] { check(pipeline.combine(pipe_out.data(), pipe_y.data()), "alltoallv combine"); },
       {}});
  // memcpy of this rank's data products: int8 recv_x rows (dispatch), bf16 expert rows (combine).
  const std::size_t d_bytes = std::size_t(pipeline.rows() * s.hidden), c_bytes = 2 * d_bytes;
  // (The source is the pipeline's expert rows, c_bytes long: memory is short at the largest shape.)
  std::vector<std::uint8_t> dst(c_bytes, 0);
  impls.push_back({"memcpy",
                   [&] { std::memcpy(dst.data(), pipe_out.data(), d_bytes); },
                   [&] { std::memcpy(dst.data(), pipe_out.data(), c_bytes); },
                   {}});
  std::erase_if(impls, [&](const Impl& impl) { return !selected.contains(impl.name); });
  for (int r = 0; r < rounds; ++r) {
    for (Impl& impl : impls) {
      impl.samples.dispatch.push_back(timed(impl.dispatch));
      impl.samples.combine.push_back(timed(impl.combine));
    }
  }
  Row row{s, double(d_bytes + c_bytes), {}};
  double all_bytes = 0;
  MPI_Allreduce(&row.bytes, &all_bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  row.bytes = all_bytes;
  for (Impl& impl : impls)
    row.medians.push_back(
        {impl.name, {median(impl.samples.dispatch), median(impl.samples.combine)}});
  for (Ours* o : {&window, &shmem, &zero_copy}) {
    if (o->buffer) check(o->buffer->destroy(), "destroy");
  }
  if (low_latency.buffer) check(low_latency.buffer->destroy(), "destroy");
  return row;
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(std::stoll(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"MoE dispatch + combine vs an MPI_Alltoallv pipeline and memcpy (run under mpirun)"};
  std::string tokens = "128,512,4096", hidden = "2048,7168";
  std::int64_t experts = 32, topk = 8;
  int rounds = 7, vector_cores = 0;
  bool quick = false, json = false;
  std::vector<std::string> impl_names = {"window",      "shmem",     "zero-copy",
                                         "low-latency", "alltoallv", "memcpy"};
  app.add_option("--tokens", tokens, "tokens per rank, comma-separated");
  app.add_option("--hidden", hidden, "hidden sizes, comma-separated");
  app.add_option("--experts", experts, "experts (a multiple of the ranks)");
  app.add_option("--topk", topk, "experts per token");
  app.add_option("--rounds", rounds, "interleaved rounds (the table shows medians)")
      ->check(CLI::PositiveNumber);
  app.add_option("--impls", impl_names, "the implementations to time (profiling one)")
      ->delimiter(',')
      ->check(
          CLI::IsMember({"window", "shmem", "zero-copy", "low-latency", "alltoallv", "memcpy"}));
  app.add_option("--vector-cores", vector_cores,
                 "split ours over a chip of this many vector cores per rank")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quick", quick, "one small shape, 2 rounds (the smoke test)");
  app.add_flag("--json", json, "one JSON line per shape instead of the table");
  CLI11_PARSE(app, argc, argv);
  const std::set<std::string> impls(impl_names.begin(), impl_names.end());
  if (quick) {
    tokens = "128";
    hidden = "2048";
    rounds = 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  check(hp::shmem::init(), "hp::shmem::init");
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  bool window_ok = true;
  for (int pe = 0; pe < ranks; ++pe)
    window_ok = window_ok && hp::shmem::transport_name(pe) != "mpi";
  const std::string transport(hp::shmem::transport_name((rank + 1) % ranks));
  const hp::kernels::KernelTable* table = nullptr;
  check(hp::kernels::selected_target(&table), "kernel target");
  std::unique_ptr<hp::platform::Chip> chip;
  if (vector_cores > 0)
    check(hp::platform::Chip::create({.num_cube = 1, .num_vector = vector_cores}, &chip), "chip");
  if (rank == 0 && !json) {
    fmt::print(
        "{} ranks ({} transport{}), E={} K={}, int8 dispatch, bf16 combine; medians of {} "
        "interleaved rounds\n"
        "GB/s: int8 recv_x rows dispatch delivers + bf16 expert rows combine consumes, all ranks\n",
        ranks, transport, window_ok ? "" : ": the window context needs mapped peers, skipped",
        experts, topk, rounds);
    fmt::print("{:>5} {:>5} {:>10} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10}\n", "T", "H", "impl",
               "dispatch us", "combine us", "total us", "GB/s", "a2av/this", "this/memcpy");
  }
  for (std::int64_t h : parse_list(hidden)) {
    for (std::int64_t t : parse_list(tokens)) {
      const Row row = run_shape({t, h, experts, topk}, rounds, window_ok, impls, chip.get());
      if (rank != 0) continue;
      auto total = [&](const std::string& name) {
        for (const auto& [n, m] : row.medians) {
          if (n == name) return m.first + m.second;
        }
        return 0.0;
      };
      // peer time / this time, blank for the peers themselves and for a peer not run.
      auto ratio = [&](const std::string& name, const std::string& peer, double sum,
                       const char* unit) {
        const bool is_peer = name == "alltoallv" || name == "memcpy";
        return is_peer || total(peer) == 0 ? std::string()
                                           : fmt::format("{:.2f}{}", total(peer) / sum, unit);
      };
      if (json) {
        std::string fields;
        for (const auto& [n, m] : row.medians) {
          fields += fmt::format(R"(, "{}_dispatch_us": {:.1f}, "{}_combine_us": {:.1f})", n,
                                m.first * 1e6, n, m.second * 1e6);
        }
        fmt::print(
            R"({{"ranks": {}, "transport": "{}", "tokens": {}, "hidden": {}, "bytes": {:.0f}{}}})"
            "\n",
            ranks, transport, t, h, row.bytes, fields);
        continue;
      }
      for (const auto& [n, m] : row.medians) {
        const double sum = m.first + m.second;
        fmt::print("{:>5} {:>5} {:>10} {:>12.1f} {:>12.1f} {:>12.1f} {:>8.2f} {:>10} {:>10}\n", t,
                   h, n, m.first * 1e6, m.second * 1e6, sum * 1e6, row.bytes / sum / 1e9,
                   ratio(n, "alltoallv", sum, "x"), ratio(n, "memcpy", sum, ""));
      }
    }
  }
  check(hp::shmem::finalize(), "hp::shmem::finalize");
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace hp::bench

int main(int argc, char** argv) { return hp::bench::run(argc, argv); }
