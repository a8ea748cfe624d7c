#include "moe/tools/moe_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

namespace hp::moe::tools {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Per phase, the slowest rank's time, median over iterations, and the rate it stands for.
struct Timings {
  std::vector<double> phase_ms, grad_ms;
  double overlap_ms = 0, grad_overlap_ms = 0, total_ms = 0, grad_total_ms = 0, rows_total = 0;
  std::vector<std::string> rate, grad_rate;
};

Timings summarize(const RunFacts& run, const std::vector<double>& all_records) {
  const WorkloadShape& s = run.shape;
  const int ranks = run.ranks;
  const std::int64_t si = s.shared_intermediate, H = s.hidden, I = s.intermediate;
  const std::size_t per = kRecord, iters = std::size_t(run.iterations);
  // The slowest rank's time of record field `field`, median over iterations, in ms.
  auto phase_median = [&](std::size_t field) {
    std::vector<double> slowest(iters, 0.0);
    for (std::size_t i = 0; i < iters; ++i) {
      for (int r = 0; r < ranks; ++r)
        slowest[i] = std::max(slowest[i], all_records[(std::size_t(r) * iters + i) * per + field]);
    }
    return median(slowest) * 1e3;
  };
  // The slowest rank's sum of fields [first, first + count) minus field `overlap` (the time
  // those stages ran at once), median over iterations, in ms.
  auto total_median = [&](std::size_t first, std::size_t count, std::size_t overlap) {
    std::vector<double> slowest(iters, 0.0);
    for (std::size_t i = 0; i < iters; ++i) {
      for (int r = 0; r < ranks; ++r) {
        const double* rec = &all_records[(std::size_t(r) * iters + i) * per];
        slowest[i] = std::max(
            slowest[i], std::accumulate(rec + first, rec + first + count, 0.0) - rec[overlap]);
      }
    }
    return median(slowest) * 1e3;
  };
  Timings t;
  t.phase_ms.resize(kPhases);
  t.grad_ms.resize(kGradPhases);
  for (int p = 0; p < kPhases; ++p) t.phase_ms[std::size_t(p)] = phase_median(1 + std::size_t(p));
  for (int p = 0; p < kGradPhases; ++p)
    t.grad_ms[std::size_t(p)] = phase_median(2 + kPhases + std::size_t(p));
  const std::size_t overlap_field = 2 + kPhases + kGradPhases,
                    grad_overlap_field = overlap_field + 1;
  t.overlap_ms = phase_median(overlap_field);
  t.grad_overlap_ms = phase_median(grad_overlap_field);
  t.total_ms = total_median(1, kPhases, overlap_field);
  t.grad_total_ms = total_median(2 + kPhases, kGradPhases, grad_overlap_field);
  for (int r = 0; r < ranks; ++r) t.rows_total += all_records[(std::size_t(r) * iters) * per + 5];
  const double Hd = double(H), Id = double(I);
  // The shared expert's GEMMs run in the same phases, over every rank's tokens.
  const double shared_rows = si > 0 ? double(ranks) * double(s.tokens) : 0.0, SI = double(si);
  const double gmm1_ops = 2.0 * t.rows_total * Hd * 2 * Id + 2.0 * shared_rows * Hd * 2 * SI;
  const double gmm2_ops = 2.0 * t.rows_total * Id * Hd + 2.0 * shared_rows * SI * Hd;
  const double dispatch_bytes = t.rows_total * Hd, combine_bytes = t.rows_total * Hd * 4;
  t.rate = {fmt::format("{:.2f} GB/s", dispatch_bytes / (t.phase_ms[0] * 1e-3) / 1e9),
            fmt::format("{:.3f} TOPS", gmm1_ops / (t.phase_ms[1] * 1e-3) / 1e12),
            fmt::format("{:.3f} TOPS", gmm2_ops / (t.phase_ms[2] * 1e-3) / 1e12),
            fmt::format("{:.2f} GB/s", combine_bytes / (t.phase_ms[3] * 1e-3) / 1e9)};
  // The backward's (the shared expert's GEMMs in the same stages): dispatch moves int8 x and bf16
  // dY rows; the recompute is GMM1; act grad is dY W2^T and dA W1^T; weight grad is dW2 and dW1.
  const double grad_gemm_flops = 2.0 * t.rows_total * Hd * 3 * Id + 2.0 * shared_rows * Hd * 3 * SI;
  t.grad_rate = {fmt::format("{:.2f} GB/s", t.rows_total * Hd * 3 / (t.grad_ms[0] * 1e-3) / 1e9),
                 run.keep_activations
                     ? std::string(si > 0 ? "GMM1 + SwiGLU kept by the forward (the shared "
                                            "expert's recomputed)"
                                          : "GMM1 + SwiGLU kept by the forward")
                     : fmt::format("{:.3f} TOPS", gmm1_ops / (t.grad_ms[1] * 1e-3) / 1e12),
                 fmt::format("{:.3f} {}", grad_gemm_flops / (t.grad_ms[2] * 1e-3) / 1e12,
                             run.int8_activation_grads ? "TOPS" : "TFLOPS"),
                 fmt::format("{:.3f} TFLOPS", grad_gemm_flops / (t.grad_ms[3] * 1e-3) / 1e12),
                 fmt::format("{:.2f} GB/s", combine_bytes / (t.grad_ms[4] * 1e-3) / 1e9)};
  return t;
}

void print_json(const RunFacts& run, const CheckVerdict& check, const Timings& t) {
  const WorkloadShape& s = run.shape;
  const int ranks = run.ranks;
  nlohmann::json j = {{"ranks", ranks},
                      {"transport", run.transport},
                      {"tokens_per_rank", s.tokens},
                      {"hidden", s.hidden},
                      {"intermediate", s.intermediate},
                      {"experts", s.experts},
                      {"topk", s.topk},
                      {"iterations", run.iterations},
                      {"path", run.layer_path},
                      {"planned_path", run.planned_path},
                      {"rows", t.rows_total},
                      {"overlap_ms", t.overlap_ms},
                      {"total_ms", t.total_ms},
                      {"check", run.check ? (check.passed ? "passed" : "failed") : "skipped"},
                      {"check_error_quantized", check.quantized},
                      {"check_error_float", check.floating}};
  for (int p = 0; p < kPhases; ++p)
    j["phases"][kPhaseNames[p]] = {{"ms", t.phase_ms[std::size_t(p)]},
                                   {"rate", t.rate[std::size_t(p)]}};
  if (run.backward) {
    j["backward"]["keep_activations"] = run.keep_activations;
    j["backward"]["int8_activation_grads"] = run.int8_activation_grads;
    j["backward"]["grad_dtype"] = run.grad_dtype;
    j["backward"]["total_ms"] = t.grad_total_ms;
    j["backward"]["overlap_ms"] = t.grad_overlap_ms;
    for (int p = 0; p < kGradPhases; ++p) {
      j["backward"]["phases"][kGradPhaseNames[p]] = {{"ms", t.grad_ms[std::size_t(p)]},
                                                     {"rate", t.grad_rate[std::size_t(p)]}};
    }
    for (int g = 0; g < kGrads; ++g) j["backward"]["check_error"][kGradNames[g]] = check.grads[g];
  }
  fmt::print("{}\n", j.dump());
}

void print_text(const RunFacts& run, const CheckVerdict& check, const Timings& t) {
  const WorkloadShape& s = run.shape;
  const int ranks = run.ranks;
  const std::int64_t si = s.shared_intermediate;
  fmt::print(
      "MoE layer: {} ranks ({} transport), {} tokens per rank, H={} I={}, top-{} of {} experts "
      "({} per rank){}, int8; {} iterations after {} warm-up\n",
      ranks, run.transport, s.tokens, s.hidden, s.intermediate, s.topk, s.experts,
      s.experts / ranks, si > 0 ? fmt::format(" + a shared expert (I={})", si) : std::string(),
      run.iterations, run.warmup);
  if (run.deep) {
    fmt::print(
        "path: {} (GMM1 under the dispatch, the combine under GMM2{}; a chip of 1 cube and {} "
        "vector "
        "cores per rank)\n",
        run.layer_path,
        si > 0 ? "; the shared expert's GEMMs under the dispatch, its rows in the combine's reduce"
               : "",
        run.vector_cores);
  } else {
    fmt::print(
        "path: staged (dispatch, GMM1, GMM2, combine one after another); the planner's path is "
        "{}\n",
        run.planned_path);
  }
  fmt::print("{:<14} {:>10}  {}\n", "phase", "ms", "rate (slowest rank, median)");
  for (int p = 0; p < kPhases; ++p) {
    fmt::print("{:<14} {:>10.3f}  {}\n", kPhaseNames[p], t.phase_ms[std::size_t(p)],
               t.rate[std::size_t(p)]);
  }
  if (run.deep) {
    fmt::print("{:<14} {:>10.3f}  communication under the GEMMs\n", "overlap", t.overlap_ms);
  } else {
    fmt::print("{:<14} {:>10}  {}\n", "overlap", "-",
               "none: the staged path does not overlap phases");
  }
  fmt::print("{:<14} {:>10.3f}  {:.0f} expert rows over all ranks\n", "total", t.total_ms,
             t.rows_total);
  if (run.backward) {
    for (int p = 0; p < kGradPhases; ++p) {
      fmt::print("{:<16} {:>8.3f}  {}\n", kGradPhaseNames[p], t.grad_ms[std::size_t(p)],
                 t.grad_rate[std::size_t(p)]);
    }
    if (run.cube_cores > 0) {
      fmt::print("{:<14} {:>10.3f}  dW1 on the cube core under the combine\n", "bwd overlap",
                 t.grad_overlap_ms);
    }
    fmt::print("{:<14} {:>10.3f}  dX, dW1, dW2, d topk_weights{}\n", "bwd total", t.grad_total_ms,
               si > 0 ? " and the shared expert's" : "");
  }
  if (run.check) {
    fmt::print(
        "check (first {} tokens of every rank): {} - relative error {:.2e} vs the quantised "
        "reference "
        "(< {:.0e}), {:.2e} vs the float reference (< {:.0e})",
        std::min<std::int64_t>(run.check_tokens, s.tokens), check.passed ? "passed" : "FAILED",
        check.quantized, kQuantizedTolerance, check.floating, kFloatTolerance);
    if (run.backward) {
      fmt::print("; gradients vs the fp64 reference (< {:.0e}):", kGradTolerance);
      for (int g = 0; g < kGrads; ++g) fmt::print(" {} {:.2e}", kGradNames[g], check.grads[g]);
    }
    fmt::print("\n");
  }
}

Status write_trace(const RunFacts& run, const std::vector<double>& all_spans) {
  const int ranks = run.ranks;
  const std::size_t iters = std::size_t(run.iterations);
  // Rows per rank: the rank's thread (tid 0), then each core of its chip (tid 1 + core index:
  // cube cores first, then vector cores). Spans are each core's work, as the layer recorded it.
  const int cube_cores = run.cube_cores, cores = run.cube_cores + run.vector_cores;
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", r},
                      {"args", {{"name", fmt::format("rank {}", r)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", "rank thread"}}}});
    for (int c = 0; c < cores; ++c) {
      const std::string name = c < cube_cores ? fmt::format("cube core {}", c)
                                              : fmt::format("vector core {}", c - cube_cores);
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", r},
                        {"tid", c + 1},
                        {"args", {{"name", name}}}});
    }
    for (std::size_t i = 0; i < iters; ++i) {
      const double* span = &all_spans[((std::size_t(r) * iters + i) * kMaxSpans) * kSpanFields];
      for (std::size_t k = 0; k < kMaxSpans; ++k, span += kSpanFields) {
        if (span[0] < -1) continue;
        events.push_back({{"ph", "X"},
                          {"name", to_string(CorePhase(int(span[1])))},
                          {"pid", r},
                          {"tid", int(span[0]) + 1},
                          {"ts", span[2] * 1e6},
                          {"dur", (span[3] - span[2]) * 1e6},
                          {"args", {{"iteration", i}}}});
      }
    }
  }
  std::ofstream out(run.trace);
  out << nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump() << "\n";
  HP_ENSURE(out.good(), ErrorCode::kIoError, "--trace {}: cannot write it", run.trace);
  fmt::print(run.json ? stderr : stdout, "trace: {} (open it in Perfetto or chrome://tracing)\n",
             run.trace);
  return Status::ok();
}

}  // namespace

Status report(const RunFacts& run, const CheckVerdict& check,
              const std::vector<double>& all_records, const std::vector<double>& all_spans) {
  const Timings t = summarize(run, all_records);
  if (run.json) {
    print_json(run, check, t);
  } else {
    print_text(run, check, t);
  }
  return run.trace.empty() ? Status::ok() : write_trace(run, all_spans);
}

}  // namespace hp::moe::tools
