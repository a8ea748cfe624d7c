// hp moe (the binary hp-moe): the main job. Runs the MoE layer on N ranks of this machine
// (started under the payload's hprun unless it already is a rank of an hprun or mpirun job),
// with realistic shapes, seeded weights and a random softmax router; checks the first
// iteration against the plain references; prints where the time went. With --backward every
// iteration runs the layer's backward too (for a seeded dY), checked against the fp64 gradient
// reference.
//
//   hp moe [--ranks 4] [--tokens 256] [--hidden 2048] [--intermediate 768] [--experts 32]
//          [--topk 8] [--shared-intermediate 0] [--skew 0] [--iterations 10] [--warmup 2]
//          [--no-check] [--check-tokens 8]
//          [--comm shmem|window] [--vector-cores 0] [--path auto|non-deep|deep|shared]
//          [--trace out.json] [--json] [--backward]
#include <unistd.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "moe/moe_layer.h"
#include "moe/moe_reference.h"
#include "moe/tools/moe_workload.h"
#include "moe/workspace_plan.h"
#include "shmem/shmem.h"

namespace hp::moe::tools {
namespace {

struct Options {
  int ranks = 4;
  WorkloadShape shape;
  int iterations = 10, warmup = 2, check_tokens = 8, vector_cores = 0;
  bool check = true, json = false, backward = false;
  std::string comm = "shmem", path = "auto", trace;
};

constexpr int kPhases = 4;  // dispatch, GMM1, GMM2, combine
constexpr const char* kPhaseNames[kPhases] = {"dispatch", "GMM1+SwiGLU", "GMM2", "combine"};
constexpr int kGradPhases = 5;  // MoeGradStageTimes
constexpr const char* kGradPhaseNames[kGradPhases] = {
    "bwd dispatch", "bwd recompute", "bwd act grad", "bwd weight grad", "bwd combine"};
// Per timed iteration and rank: start (s since the first barrier), the forward's phases, its
// expert rows, the backward's phases (0 without --backward), the forward's and the backward's
// overlap.
constexpr std::size_t kRecord = 4 + kPhases + kGradPhases;
constexpr std::size_t kSpanFields = 4, kMaxSpans = 512;  // --trace

bool inside_a_job() {
  for (const char* name : {"HP_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// Re-runs this program as `ranks` ranks under the payload's hprun (next to this slice).
int launch(const Options& o, int argc, char** argv) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path hprun =
      self.parent_path().parent_path().parent_path() / "symmetric_memory" / "bin" / "hprun";
  // The heap: two halves of records (int8 rows; bf16 dY rows for the backward) and return rows
  // per buffer, generously.
  const std::int64_t T = o.shape.tokens, H = o.shape.hidden, element = o.backward ? 2 : 1;
  const std::int64_t heap_mb = (std::int64_t(o.ranks) * T * (element * H + 256) +
                                2 * T * std::min<std::int64_t>(o.shape.topk, o.ranks) * H * 4) /
                                   (1 << 20) * 2 +
                               64;
  std::vector<std::string> args = {
      hprun.string(), "-n", std::to_string(o.ranks), "--heap-size", std::to_string(heap_mb) + "M",
      self.string()};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  execv(c_args[0], c_args.data());
  fmt::print(stderr, "hp moe: cannot run {}: {}\n", hprun.string(), std::strerror(errno));
  return 127;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Every rank's doubles gathered on every rank (fcollect through the symmetric heap).
Status gather(const std::vector<double>& mine, std::vector<double>* all) {
  const int n = hp::shmem::n_pes();
  void* sym = nullptr;
  const std::size_t count = mine.size();
  HP_RETURN_IF_ERROR(hp::shmem::calloc(count * std::size_t(n + 1) + 1, sizeof(double), &sym));
  auto* p = static_cast<double*>(sym);
  std::copy(mine.begin(), mine.end(), p + count * std::size_t(n));
  Status s = hp::shmem::fcollect(hp::shmem::kTeamWorld, p, p + count * std::size_t(n),
                                 count * sizeof(double));
  if (s.is_ok()) all->assign(p, p + count * std::size_t(n));
  HP_RETURN_IF_ERROR(hp::shmem::free(sym));
  return s;
}

double relative_error(const float* got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// The first check_tokens tokens of this rank against both references: {quantised, float} errors.
Status check_against_references(const Options& o, const RankInputs& in, const std::vector<float>& y,
                                std::vector<double>* errors) {
  const WorkloadShape& s = o.shape;
  const std::int64_t T = std::min<std::int64_t>(o.check_tokens, s.tokens);
  const ExpertWeightsData all = make_expert_weights(s, 0, s.experts, s.intermediate);
  const std::int64_t si = s.shared_intermediate;
  const ExpertWeightsData shared = make_expert_weights(s, s.experts, si > 0 ? 1 : 0, si);
  auto shared_view = [&](const void* data, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? TensorView(const_cast<void*>(data), type, shape) : TensorView();
  };
  std::vector<float> ref_q(std::size_t(T * s.hidden)), ref_f(ref_q.size());
  MoeReferenceArgs args{
      .w1 = TensorView(const_cast<std::int8_t*>(all.w1.data()), DType::kInt8,
                       {s.experts, s.hidden, 2 * s.intermediate}),
      .w1_scale = TensorView(const_cast<float*>(all.w1_scale.data()), DType::kFP32,
                             {s.experts, 2 * s.intermediate}),
      .w2 = TensorView(const_cast<std::int8_t*>(all.w2.data()), DType::kInt8,
                       {s.experts, s.intermediate, s.hidden}),
      .w2_scale =
          TensorView(const_cast<float*>(all.w2_scale.data()), DType::kFP32, {s.experts, s.hidden}),
      .shared_w1 = shared_view(shared.w1.data(), DType::kInt8, {1, s.hidden, 2 * si}),
      .shared_w1_scale = shared_view(shared.w1_scale.data(), DType::kFP32, {1, 2 * si}),
      .shared_w2 = shared_view(shared.w2.data(), DType::kInt8, {1, si, s.hidden}),
      .shared_w2_scale = shared_view(shared.w2_scale.data(), DType::kFP32, {1, s.hidden}),
      .x = TensorView(const_cast<float*>(in.x.data()), DType::kFP32, {T, s.hidden}),
      .topk_idx =
          TensorView(const_cast<std::int64_t*>(in.topk_idx.data()), DType::kInt64, {T, s.topk}),
      .topk_weights =
          TensorView(const_cast<float*>(in.topk_weights.data()), DType::kFP32, {T, s.topk}),
      .y = TensorView(ref_q.data(), DType::kFP32, {T, s.hidden})};
  HP_RETURN_IF_ERROR(moe_reference_quantized(args));
  args.y = TensorView(ref_f.data(), DType::kFP32, {T, s.hidden});
  HP_RETURN_IF_ERROR(moe_reference_float(args));
  *errors = {relative_error(y.data(), ref_q), relative_error(y.data(), ref_f)};
  return Status::ok();
}

std::vector<float> make_dy(const WorkloadShape& s, int rank) {
  std::mt19937 rng(s.seed * 104729u + std::uint32_t(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dy(std::size_t(s.tokens * s.hidden));
  for (auto& v : dy) v = normal(rng);
  return dy;
}

// The backward with dY only on the first check_tokens tokens of every rank, against the fp64
// gradient reference over those tokens of every rank: {dx, d topk_weights, dW1, dW2} errors (the
// shared expert's weights' gradients are checked with dW1/dW2's).
Status check_gradients(const Options& o, MoeLayer& layer, std::vector<double>* errors) {
  const WorkloadShape& s = o.shape;
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const std::int64_t T = s.tokens, H = s.hidden, I = s.intermediate, K = s.topk, E = s.experts,
                     local = E / ranks;
  const std::int64_t C = std::min<std::int64_t>(o.check_tokens, T), si = s.shared_intermediate,
                     Is = std::max<std::int64_t>(si, 1);
  const ExpertWeightsData all = make_expert_weights(s, 0, E, I);
  const ExpertWeightsData shared = make_expert_weights(s, E, si > 0 ? 1 : 0, si);
  auto view = [](const auto& v, DType type, std::initializer_list<std::int64_t> shape) {
    return TensorView(const_cast<void*>(static_cast<const void*>(v.data())), type, shape);
  };
  auto shared_view = [&](const auto& v, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? view(v, type, shape) : TensorView();
  };
  // The layer.
  const RankInputs in = make_rank_inputs(s, me);
  std::vector<float> dy = make_dy(s, me);
  std::fill(dy.begin() + C * H, dy.end(), 0.0f);
  std::vector<float> dx(std::size_t(T * H)), d_topk(std::size_t(T * K)),
      dw1(std::size_t(local * H * 2 * I)), dw2(std::size_t(local * I * H)),
      sdw1(std::size_t(H * 2 * Is)), sdw2(std::size_t(Is * H));
  HP_RETURN_IF_ERROR(layer.backward({.x = view(in.x, DType::kFP32, {T, H}),
                                     .topk_idx = view(in.topk_idx, DType::kInt64, {T, K}),
                                     .topk_weights = view(in.topk_weights, DType::kFP32, {T, K}),
                                     .dy = view(dy, DType::kFP32, {T, H}),
                                     .dx = view(dx, DType::kFP32, {T, H}),
                                     .d_topk_weights = view(d_topk, DType::kFP32, {T, K}),
                                     .dw1 = view(dw1, DType::kFP32, {local, H, 2 * I}),
                                     .dw2 = view(dw2, DType::kFP32, {local, I, H}),
                                     .shared_dw1 = shared_view(sdw1, DType::kFP32, {1, H, 2 * si}),
                                     .shared_dw2 = shared_view(sdw2, DType::kFP32, {1, si, H})}));
  // The reference: this rank's experts' weights' gradients need every rank's check tokens.
  std::vector<float> ref_dw1(std::size_t(E * H * 2 * I), 0.0f),
      ref_dw2(std::size_t(E * I * H), 0.0f), ref_sdw1(sdw1.size(), 0.0f),
      ref_sdw2(sdw2.size(), 0.0f), scratch_sdw1(sdw1.size()), scratch_sdw2(sdw2.size());
  std::vector<float> ref_dx, ref_dtopk;
  for (int r = 0; r < ranks; ++r) {
    const RankInputs rin = r == me ? in : make_rank_inputs(s, r);
    const std::vector<float> rdy = make_dy(s, r);
    std::vector<float> rdx(std::size_t(C * H)), rdtopk(std::size_t(C * K));
    std::fill(scratch_sdw1.begin(), scratch_sdw1.end(), 0.0f);
    std::fill(scratch_sdw2.begin(), scratch_sdw2.end(), 0.0f);
    HP_RETURN_IF_ERROR(moe_reference_quantized_grad(
        {.forward = {.w1 = view(all.w1, DType::kInt8, {E, H, 2 * I}),
                     .w1_scale = view(all.w1_scale, DType::kFP32, {E, 2 * I}),
                     .w2 = view(all.w2, DType::kInt8, {E, I, H}),
                     .w2_scale = view(all.w2_scale, DType::kFP32, {E, H}),
                     .shared_w1 = shared_view(shared.w1, DType::kInt8, {1, H, 2 * si}),
                     .shared_w1_scale = shared_view(shared.w1_scale, DType::kFP32, {1, 2 * si}),
                     .shared_w2 = shared_view(shared.w2, DType::kInt8, {1, si, H}),
                     .shared_w2_scale = shared_view(shared.w2_scale, DType::kFP32, {1, H}),
                     .x = view(rin.x, DType::kFP32, {C, H}),
                     .topk_idx = view(rin.topk_idx, DType::kInt64, {C, K}),
                     .topk_weights = view(rin.topk_weights, DType::kFP32, {C, K})},
         .dy = view(rdy, DType::kFP32, {C, H}),
         .dx = view(rdx, DType::kFP32, {C, H}),
         .d_topk_weights = view(rdtopk, DType::kFP32, {C, K}),
         .dw1 = view(ref_dw1, DType::kFP32, {E, H, 2 * I}),
         .dw2 = view(ref_dw2, DType::kFP32, {E, I, H}),
         .shared_dw1 = shared_view(scratch_sdw1, DType::kFP32, {1, H, 2 * si}),
         .shared_dw2 = shared_view(scratch_sdw2, DType::kFP32, {1, si, H})}));
    if (r == me) {
      ref_dx = std::move(rdx);
      ref_dtopk = std::move(rdtopk);
      ref_sdw1 = scratch_sdw1;
      ref_sdw2 = scratch_sdw2;
    }
  }
  // Every gradient the layer wrote, with its reference (the routed and shared weights' together).
  auto concat = [](std::vector<float> a, const std::vector<float>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<float> got_dw1 = concat(dw1, si > 0 ? sdw1 : std::vector<float>{});
  const std::vector<float> got_dw2 = concat(dw2, si > 0 ? sdw2 : std::vector<float>{});
  const std::vector<float> want_dw1 =
      concat(std::vector<float>(ref_dw1.begin() + me * local * H * 2 * I,
                                ref_dw1.begin() + (me + 1) * local * H * 2 * I),
             si > 0 ? ref_sdw1 : std::vector<float>{});
  const std::vector<float> want_dw2 =
      concat(std::vector<float>(ref_dw2.begin() + me * local * I * H,
                                ref_dw2.begin() + (me + 1) * local * I * H),
             si > 0 ? ref_sdw2 : std::vector<float>{});
  *errors = {relative_error(dx.data(), ref_dx), relative_error(d_topk.data(), ref_dtopk),
             relative_error(got_dw1.data(), want_dw1), relative_error(got_dw2.data(), want_dw2)};
  return Status::ok();
}

Status run_rank(const Options& o) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const WorkloadShape& s = o.shape;
  MoeTiling plan;
  HP_RETURN_IF_ERROR(plan_moe({.tokens = s.tokens,
                               .hidden = s.hidden,
                               .intermediate = s.intermediate,
                               .topk = s.topk,
                               .experts = s.experts,
                               .ranks = ranks,
                               .shared_intermediate = s.shared_intermediate},
                              &plan));
  static constexpr const char* kPathNames[] = {"non-deep", "deep", "shared"};
  const std::string planned = kPathNames[int(plan.path)];
  // A chip per rank: 1 cube core and --vector-cores vector cores; the deep path needs 2.
  std::unique_ptr<hp::platform::Chip> chip;
  const bool fused = o.path == "deep" || o.path == "shared";
  const int vector_cores = fused && o.vector_cores == 0 ? 2 : o.vector_cores;
  if (vector_cores > 0) {
    HP_RETURN_IF_ERROR(
        hp::platform::Chip::create({.num_cube = 1, .num_vector = vector_cores}, &chip));
  }
  const LayerPath path = fused                  ? LayerPath::kDeep
                         : o.path == "non-deep" ? LayerPath::kStaged
                                                : LayerPath::kAuto;
  const std::int64_t local = s.experts / ranks;
  const ExpertWeightsData w = make_expert_weights(s, me * local, local, s.intermediate);
  const std::int64_t si = s.shared_intermediate;
  const ExpertWeightsData shared = make_expert_weights(s, s.experts, si > 0 ? 1 : 0, si);
  auto shared_view = [&](const void* data, DType type, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? TensorView(const_cast<void*>(data), type, shape) : TensorView();
  };
  std::unique_ptr<MoeLayer> layer;
  HP_RETURN_IF_ERROR(MoeLayer::create(
      {.hidden = s.hidden,
       .intermediate = s.intermediate,
       .num_experts = s.experts,
       .topk = s.topk,
       .max_tokens_per_rank = s.tokens,
       .shared_intermediate = si,
       .comm = o.comm == "window" ? CommKind::kWindow : CommKind::kShmem,
       .chip = chip.get(),
       .backward = o.backward,
       .path = path},
      {.w1 = TensorView(const_cast<std::int8_t*>(w.w1.data()), DType::kInt8,
                        {local, s.hidden, 2 * s.intermediate}),
       .w1_scale = TensorView(const_cast<float*>(w.w1_scale.data()), DType::kFP32,
                              {local, 2 * s.intermediate}),
       .w2 = TensorView(const_cast<std::int8_t*>(w.w2.data()), DType::kInt8,
                        {local, s.intermediate, s.hidden}),
       .w2_scale =
           TensorView(const_cast<float*>(w.w2_scale.data()), DType::kFP32, {local, s.hidden}),
       .shared_w1 = shared_view(shared.w1.data(), DType::kInt8, {1, s.hidden, 2 * si}),
       .shared_w1_scale = shared_view(shared.w1_scale.data(), DType::kFP32, {1, 2 * si}),
       .shared_w2 = shared_view(shared.w2.data(), DType::kInt8, {1, si, s.hidden}),
       .shared_w2_scale = shared_view(shared.w2_scale.data(), DType::kFP32, {1, s.hidden})},
      &layer));
  const RankInputs in = make_rank_inputs(s, me);
  std::vector<float> y(std::size_t(s.tokens * s.hidden));
  const TensorView xv(const_cast<float*>(in.x.data()), DType::kFP32, {s.tokens, s.hidden});
  const TensorView iv(const_cast<std::int64_t*>(in.topk_idx.data()), DType::kInt64,
                      {s.tokens, s.topk});
  const TensorView wv(const_cast<float*>(in.topk_weights.data()), DType::kFP32, {s.tokens, s.topk});
  const TensorView yv(y.data(), DType::kFP32, {s.tokens, s.hidden});
  // The backward's dY and gradients (with --backward).
  const std::int64_t T = s.tokens, H = s.hidden, I = s.intermediate, K = s.topk;
  const std::vector<float> dy = o.backward ? make_dy(s, me) : std::vector<float>{};
  std::vector<float> dx, d_topk, dw1, dw2, sdw1, sdw2;
  MoeGradArgs grad_args;
  if (o.backward) {
    dx.resize(std::size_t(T * H));
    d_topk.resize(std::size_t(T * K));
    dw1.resize(std::size_t(local * H * 2 * I));
    dw2.resize(std::size_t(local * I * H));
    sdw1.resize(std::size_t(H * 2 * si));
    sdw2.resize(std::size_t(si * H));
    grad_args = {.x = xv,
                 .topk_idx = iv,
                 .topk_weights = wv,
                 .dy = TensorView(const_cast<float*>(dy.data()), DType::kFP32, {T, H}),
                 .dx = TensorView(dx.data(), DType::kFP32, {T, H}),
                 .d_topk_weights = TensorView(d_topk.data(), DType::kFP32, {T, K}),
                 .dw1 = TensorView(dw1.data(), DType::kFP32, {local, H, 2 * I}),
                 .dw2 = TensorView(dw2.data(), DType::kFP32, {local, I, H}),
                 .shared_dw1 = shared_view(sdw1.data(), DType::kFP32, {1, H, 2 * si}),
                 .shared_dw2 = shared_view(sdw2.data(), DType::kFP32, {1, si, H})};
  }
  const auto origin = std::chrono::steady_clock::now();
  const double origin_s = std::chrono::duration<double>(origin.time_since_epoch()).count();
  std::vector<double> record;
  // --trace: every core's spans of each timed iteration, kSpanFields doubles each (core, phase,
  // begin, end; s since origin), kMaxSpans per iteration (the rest padded with core -2).
  std::vector<double> spans;
  const int total = o.warmup + o.iterations;
  for (int it = 0; it < total; ++it) {
    HP_RETURN_IF_ERROR(hp::shmem::barrier_all());
    const double start =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    HP_RETURN_IF_ERROR(layer->forward(xv, iv, wv, yv));
    if (o.backward) HP_RETURN_IF_ERROR(layer->backward(grad_args));
    if (it >= o.warmup) {
      const MoeStageTimes& t = layer->last_times();
      const MoeGradStageTimes& g = layer->last_grad_times();
      record.insert(record.end(), {start, t.dispatch, t.gmm1, t.gmm2, t.combine,
                                   double(layer->last_rows()), g.dispatch, g.recompute, g.act_grad,
                                   g.weight_grad, g.combine, t.overlap, g.overlap});
      if (!o.trace.empty()) {
        const std::vector<CoreSpan> last = layer->last_spans();
        for (std::size_t k = 0; k < kMaxSpans; ++k) {
          if (k < last.size()) {
            spans.insert(spans.end(), {double(last[k].core), double(last[k].phase),
                                       last[k].begin - origin_s, last[k].end - origin_s});
          } else {
            spans.insert(spans.end(), {-2.0, 0.0, 0.0, 0.0});
          }
        }
      }
    }
    if (me == 0 && !o.json && total >= 20 && isatty(2))
      fmt::print(stderr, "\riteration {}/{}", it + 1, total);
  }
  if (me == 0 && !o.json && total >= 20 && isatty(2)) fmt::print(stderr, "\n");
  std::vector<double> errors = {0, 0}, grad_errors = {0, 0, 0, 0};
  if (o.check) HP_RETURN_IF_ERROR(check_against_references(o, in, y, &errors));
  if (o.check && o.backward) HP_RETURN_IF_ERROR(check_gradients(o, *layer, &grad_errors));
  errors.insert(errors.end(), grad_errors.begin(), grad_errors.end());
  std::vector<double> all_records, all_errors, all_spans;
  HP_RETURN_IF_ERROR(gather(record, &all_records));
  if (!o.trace.empty()) HP_RETURN_IF_ERROR(gather(spans, &all_spans));
  HP_RETURN_IF_ERROR(gather(errors, &all_errors));
  const bool deep = layer->deep();
  // The layer's three paths: the deep-fuse one with a shared expert is the shared path.
  const std::string layer_path = !deep ? "staged" : si > 0 ? "shared" : "deep";
  HP_RETURN_IF_ERROR(layer->destroy());
  // Quantising the activations twice costs about a percent against the float reference; the
  // same quantised math differs only by rounding order (and the odd requantisation flip).
  // The gradients: bf16 GEMM inputs against fp64, about a percent.
  constexpr double kQuantizedTolerance = 5e-3, kFloatTolerance = 6e-2, kGradTolerance = 3e-2;
  constexpr const char* kGradNames[4] = {"dx", "d_topk_weights", "dw1", "dw2"};
  double worst_q = 0, worst_f = 0, worst_grad[4] = {0, 0, 0, 0};
  for (int r = 0; r < ranks; ++r) {
    worst_q = std::max(worst_q, all_errors[std::size_t(6 * r)]);
    worst_f = std::max(worst_f, all_errors[std::size_t(6 * r + 1)]);
    for (int g = 0; g < 4; ++g)
      worst_grad[g] = std::max(worst_grad[g], all_errors[std::size_t(6 * r + 2 + g)]);
  }
  const bool grads_passed = std::all_of(std::begin(worst_grad), std::end(worst_grad),
                                        [&](double e) { return e < kGradTolerance; });
  const bool passed =
      !o.check || (worst_q < kQuantizedTolerance && worst_f < kFloatTolerance && grads_passed);
  if (me != 0)
    return passed ? Status::ok()
                  : Status::error(ErrorCode::kInternal, "the check failed (see rank 0)");
  // ---- report: per phase, the slowest rank's time, median over iterations -----------------
  const std::size_t per = kRecord, iters = std::size_t(o.iterations);
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
  std::vector<double> phase_ms(kPhases), grad_ms(kGradPhases);
  for (int p = 0; p < kPhases; ++p) phase_ms[std::size_t(p)] = phase_median(1 + std::size_t(p));
  for (int p = 0; p < kGradPhases; ++p)
    grad_ms[std::size_t(p)] = phase_median(2 + kPhases + std::size_t(p));
  const std::size_t overlap_field = 2 + kPhases + kGradPhases,
                    grad_overlap_field = overlap_field + 1;
  const double overlap_ms = phase_median(overlap_field),
               grad_overlap_ms = phase_median(grad_overlap_field);
  const double total_ms = total_median(1, kPhases, overlap_field);
  const double grad_total_ms = total_median(2 + kPhases, kGradPhases, grad_overlap_field);
  double rows_total = 0;
  for (int r = 0; r < ranks; ++r) rows_total += all_records[(std::size_t(r) * iters) * per + 5];
  const double Hd = double(H), Id = double(I);
  // The shared expert's GEMMs run in the same phases, over every rank's tokens.
  const double shared_rows = si > 0 ? double(ranks) * double(s.tokens) : 0.0, SI = double(si);
  const double gmm1_ops = 2.0 * rows_total * Hd * 2 * Id + 2.0 * shared_rows * Hd * 2 * SI;
  const double gmm2_ops = 2.0 * rows_total * Id * Hd + 2.0 * shared_rows * SI * Hd;
  const double dispatch_bytes = rows_total * Hd, combine_bytes = rows_total * Hd * 4;
  const std::vector<std::string> rate = {
      fmt::format("{:.2f} GB/s", dispatch_bytes / (phase_ms[0] * 1e-3) / 1e9),
      fmt::format("{:.3f} TOPS", gmm1_ops / (phase_ms[1] * 1e-3) / 1e12),
      fmt::format("{:.3f} TOPS", gmm2_ops / (phase_ms[2] * 1e-3) / 1e12),
      fmt::format("{:.2f} GB/s", combine_bytes / (phase_ms[3] * 1e-3) / 1e9)};
  // The backward's (the shared expert's GEMMs in the same stages): dispatch moves int8 x and bf16
  // dY rows; the recompute is GMM1; act grad is dY W2^T and dA W1^T; weight grad is dW2 and dW1.
  const double grad_gemm_flops = 2.0 * rows_total * Hd * 3 * Id + 2.0 * shared_rows * Hd * 3 * SI;
  const std::vector<std::string> grad_rate = {
      fmt::format("{:.2f} GB/s", rows_total * Hd * 3 / (grad_ms[0] * 1e-3) / 1e9),
      fmt::format("{:.3f} TOPS", gmm1_ops / (grad_ms[1] * 1e-3) / 1e12),
      fmt::format("{:.3f} TFLOPS", grad_gemm_flops / (grad_ms[2] * 1e-3) / 1e12),
      fmt::format("{:.3f} TFLOPS", grad_gemm_flops / (grad_ms[3] * 1e-3) / 1e12),
      fmt::format("{:.2f} GB/s", combine_bytes / (grad_ms[4] * 1e-3) / 1e9)};
  if (o.json) {
    nlohmann::json j = {{"ranks", ranks},
                        {"transport", std::string(hp::shmem::transport_name((me + 1) % ranks))},
                        {"tokens_per_rank", s.tokens},
                        {"hidden", s.hidden},
                        {"intermediate", s.intermediate},
                        {"experts", s.experts},
                        {"topk", s.topk},
                        {"iterations", o.iterations},
                        {"path", layer_path},
                        {"planned_path", planned},
                        {"rows", rows_total},
                        {"overlap_ms", overlap_ms},
                        {"total_ms", total_ms},
                        {"check", o.check ? (passed ? "passed" : "failed") : "skipped"},
                        {"check_error_quantized", worst_q},
                        {"check_error_float", worst_f}};
    for (int p = 0; p < kPhases; ++p)
      j["phases"][kPhaseNames[p]] = {{"ms", phase_ms[std::size_t(p)]},
                                     {"rate", rate[std::size_t(p)]}};
    if (o.backward) {
      j["backward"]["total_ms"] = grad_total_ms;
      j["backward"]["overlap_ms"] = grad_overlap_ms;
      for (int p = 0; p < kGradPhases; ++p) {
        j["backward"]["phases"][kGradPhaseNames[p]] = {{"ms", grad_ms[std::size_t(p)]},
                                                       {"rate", grad_rate[std::size_t(p)]}};
      }
      for (int g = 0; g < 4; ++g) j["backward"]["check_error"][kGradNames[g]] = worst_grad[g];
    }
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "MoE layer: {} ranks ({} transport), {} tokens per rank, H={} I={}, top-{} of {} experts "
        "({} per rank){}, int8; {} iterations after {} warm-up\n",
        ranks, hp::shmem::transport_name((me + 1) % ranks), s.tokens, s.hidden, s.intermediate,
        s.topk, s.experts, s.experts / ranks,
        si > 0 ? fmt::format(" + a shared expert (I={})", si) : std::string(), o.iterations,
        o.warmup);
    if (deep) {
      fmt::print(
          "path: {} (GMM1 under the dispatch, the combine under GMM2{}; a chip of 1 cube and {} "
          "vector "
          "cores per rank)\n",
          layer_path,
          si > 0
              ? "; the shared expert's GEMMs under the dispatch, its rows in the combine's reduce"
              : "",
          vector_cores);
    } else {
      fmt::print(
          "path: staged (dispatch, GMM1, GMM2, combine one after another); the planner's path is "
          "{}\n",
          planned);
    }
    fmt::print("{:<14} {:>10}  {}\n", "phase", "ms", "rate (slowest rank, median)");
    for (int p = 0; p < kPhases; ++p) {
      fmt::print("{:<14} {:>10.3f}  {}\n", kPhaseNames[p], phase_ms[std::size_t(p)],
                 rate[std::size_t(p)]);
    }
    if (deep) {
      fmt::print("{:<14} {:>10.3f}  communication under the GEMMs\n", "overlap", overlap_ms);
    } else {
      fmt::print("{:<14} {:>10}  {}\n", "overlap", "-",
                 "none: the staged path does not overlap phases");
    }
    fmt::print("{:<14} {:>10.3f}  {:.0f} expert rows over all ranks\n", "total", total_ms,
               rows_total);
    if (o.backward) {
      for (int p = 0; p < kGradPhases; ++p) {
        fmt::print("{:<16} {:>8.3f}  {}\n", kGradPhaseNames[p], grad_ms[std::size_t(p)],
                   grad_rate[std::size_t(p)]);
      }
      if (chip) {
        fmt::print("{:<14} {:>10.3f}  dW1 on the cube core under the combine\n", "bwd overlap",
                   grad_overlap_ms);
      }
      fmt::print("{:<14} {:>10.3f}  dX, dW1, dW2, d topk_weights{}\n", "bwd total", grad_total_ms,
                 si > 0 ? " and the shared expert's" : "");
    }
    if (o.check) {
      fmt::print(
          "check (first {} tokens of every rank): {} - relative error {:.2e} vs the quantised "
          "reference "
          "(< {:.0e}), {:.2e} vs the float reference (< {:.0e})",
          std::min<std::int64_t>(o.check_tokens, s.tokens), passed ? "passed" : "FAILED", worst_q,
          kQuantizedTolerance, worst_f, kFloatTolerance);
      if (o.backward) {
        fmt::print("; gradients vs the fp64 reference (< {:.0e}):", kGradTolerance);
        for (int g = 0; g < 4; ++g) fmt::print(" {} {:.2e}", kGradNames[g], worst_grad[g]);
      }
      fmt::print("\n");
    }
  }
  if (!o.trace.empty()) {
    // Rows per rank: the rank's thread (tid 0), then each core of its chip (tid 1 + core index:
    // cube cores first, then vector cores). Spans are each core's work, as the layer recorded it.
    const int cube_cores = chip ? chip->num_cube() : 0,
              cores = chip ? chip->num_cube() + chip->num_vector() : 0;
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
    std::ofstream out(o.trace);
    out << nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump() << "\n";
    HP_ENSURE(out.good(), ErrorCode::kIoError, "--trace {}: cannot write it", o.trace);
    fmt::print(o.json ? stderr : stdout, "trace: {} (open it in Perfetto or chrome://tracing)\n",
               o.trace);
  }
  return passed ? Status::ok()
                : Status::error(ErrorCode::kInternal,
                                "the check failed: the layer's output differs from the references");
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{
      "hp moe: the MoE layer on N ranks of this machine, checked against references, timed by "
      "phase"};
  app.add_option("--ranks", o.ranks, "ranks to start (ignored under mpirun or hprun)")
      ->check(CLI::Range(1, 256));
  app.add_option("--tokens", o.shape.tokens, "tokens per rank")->check(CLI::Range(1, 1 << 20));
  app.add_option("--hidden", o.shape.hidden, "H")->check(CLI::Range(16, 1 << 16));
  app.add_option("--intermediate", o.shape.intermediate, "I (GMM1 has 2I columns)")
      ->check(CLI::Range(16, 1 << 16));
  app.add_option("--experts", o.shape.experts, "experts (a multiple of the ranks)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--topk", o.shape.topk, "experts per token")->check(CLI::Range(1, 64));
  app.add_option("--shared-intermediate", o.shape.shared_intermediate,
                 "a shared expert of this I (0: none)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--skew", o.shape.skew, "router skew toward low expert ids (0: none)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--seed", o.shape.seed, "seed of weights and tokens");
  app.add_option("--iterations", o.iterations, "timed iterations")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed iterations first")->check(CLI::Range(0, 1000));
  app.add_flag("!--no-check", o.check, "skip the check against the references");
  app.add_option("--check-tokens", o.check_tokens, "tokens of each rank the check computes plainly")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--comm", o.comm, "communication context")
      ->check(CLI::IsMember({"shmem", "window"}));
  app.add_option("--vector-cores", o.vector_cores,
                 "a chip per rank: 1 cube core and this many vector cores (0: none)")
      ->check(CLI::Range(0, 64));
  app.add_option(
         "--path", o.path,
         "execution path: auto (deep with a 1:2 chip and several experts per rank), non-deep "
         "(staged), "
         "deep (makes a 1:2 chip per rank), shared (deep with the shared expert fused; needs "
         "--shared-intermediate)")
      ->check(CLI::IsMember({"auto", "non-deep", "deep", "shared"}));
  app.add_option("--trace", o.trace, "write a Chrome trace of every rank's and core's phases");
  app.add_flag("--json", o.json, "one JSON object instead of the table");
  app.add_flag("--backward", o.backward,
               "also run the backward (a seeded dY; gradients checked with --check)");
  CLI11_PARSE(app, argc, argv);
  if (o.shape.experts % o.ranks != 0 && !inside_a_job()) {
    fmt::print(stderr, "hp moe: --experts {} is not a multiple of --ranks {}\n", o.shape.experts,
               o.ranks);
    return 2;
  }
  if (o.shape.topk > o.shape.experts) {
    fmt::print(stderr, "hp moe: --topk {} is more than --experts {}\n", o.shape.topk,
               o.shape.experts);
    return 2;
  }
  // Requests this build cannot serve are refused before any rank starts.
  if (o.path == "shared" && o.shape.shared_intermediate == 0) {
    fmt::print(stderr,
               "hp moe: --path shared needs a shared expert: add --shared-intermediate N\n");
    return 2;
  }
  if ((o.path == "deep" || o.path == "shared") && o.vector_cores != 0 && o.vector_cores != 2) {
    fmt::print(
        stderr,
        "hp moe: --path {} runs on a chip of 1 cube and 2 vector cores: --vector-cores {} does "
        "not fit (leave it out)\n",
        o.path, o.vector_cores);
    return 2;
  }
  if (!inside_a_job()) return launch(o, argc, argv);
  if (Status s = hp::shmem::init(); !s.is_ok()) {
    fmt::print(stderr, "hp moe: {}\n", s.to_string());
    return 1;
  }
  const Status s = run_rank(o);
  if (!s.is_ok()) fmt::print(stderr, "hp moe: rank {}: {}\n", hp::shmem::my_pe(), s.to_string());
  const Status f = hp::shmem::finalize();
  return s.is_ok() && f.is_ok() ? 0 : 1;
}

}  // namespace
}  // namespace hp::moe::tools

int main(int argc, char** argv) { return hp::moe::tools::run(argc, argv); }
