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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/aligned_allocator.h"
#include "moe/moe_layer.h"
#include "moe/moe_reference.h"
#include "moe/tools/moe_checks.h"
#include "moe/tools/moe_report.h"
#include "moe/tools/moe_workload.h"
#include "moe/workspace_plan.h"
#include "shmem/shmem.h"

namespace hp::moe::tools {
namespace {

struct Options {
  int ranks = 4;
  WorkloadShape shape;
  int iterations = 10, warmup = 2, check_tokens = 8, vector_cores = 0;
  bool check = true, json = false, backward = false, keep_activations = false;
  bool int8_activation_grads = false;
  std::string grad_dtype = "fp32";  // dX and the weight gradients
  std::string comm = "shmem", path = "auto", trace;
};

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

// This rank's layer, on a chip of its own when the options ask for one.
struct RankLayer {
  std::unique_ptr<hp::platform::Chip> chip;
  std::unique_ptr<MoeLayer> layer;
  std::string planned;  // the path the workspace planner picks for the shape
  int vector_cores = 0;
};

Status make_layer(const Options& o, RankLayer* out) {
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
  out->planned = kPathNames[int(plan.path)];
  // A chip per rank: 1 cube core and --vector-cores vector cores; the deep path needs 2.
  std::unique_ptr<hp::platform::Chip>& chip = out->chip;
  const bool fused = o.path == "deep" || o.path == "shared";
  const int vector_cores = fused && o.vector_cores == 0 ? 2 : o.vector_cores;
  out->vector_cores = vector_cores;
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
  return MoeLayer::create(
      {.hidden = s.hidden,
       .intermediate = s.intermediate,
       .num_experts = s.experts,
       .topk = s.topk,
       .max_tokens_per_rank = s.tokens,
       .shared_intermediate = si,
       .comm = o.comm == "window" ? CommKind::kWindow : CommKind::kShmem,
       .chip = chip.get(),
       .backward = o.backward,
       .keep_activations = o.keep_activations,
       .int8_activation_grads = o.int8_activation_grads,
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
      &out->layer);
}

// This rank's tokens, its output and, with --backward, dY and the gradients, with their views.
struct RankData {
  RankInputs in;
  std::vector<float> y, dy, dx, d_topk;
  AlignedVector<float> dw1, dw2, sdw1, sdw2;  // 64-byte aligned, as a framework's tensors are
                                              // (bf16 gradients use the first half)
  TensorView x, topk_idx, topk_weights, y_view;
  MoeGradArgs grad;
};

void make_rank_data(const Options& o, RankData* d) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const WorkloadShape& s = o.shape;
  const std::int64_t T = s.tokens, H = s.hidden, I = s.intermediate, K = s.topk;
  const std::int64_t local = s.experts / ranks, si = s.shared_intermediate;
  const DType grad = o.grad_dtype == "bf16" ? DType::kBF16 : DType::kFP32;
  auto shared_view = [&](void* data, std::initializer_list<std::int64_t> shape) {
    return si > 0 ? TensorView(data, grad, shape) : TensorView();
  };
  d->in = make_rank_inputs(s, me);
  d->y.resize(std::size_t(T * H));
  d->x = TensorView(d->in.x.data(), DType::kFP32, {T, H});
  d->topk_idx = TensorView(d->in.topk_idx.data(), DType::kInt64, {T, K});
  d->topk_weights = TensorView(d->in.topk_weights.data(), DType::kFP32, {T, K});
  d->y_view = TensorView(d->y.data(), DType::kFP32, {T, H});
  if (!o.backward) return;
  d->dy = make_dy(s, me);
  d->dx.resize(std::size_t(T * H));
  d->d_topk.resize(std::size_t(T * K));
  d->dw1.resize(std::size_t(local * H * 2 * I));
  d->dw2.resize(std::size_t(local * I * H));
  d->sdw1.resize(std::size_t(H * 2 * si));
  d->sdw2.resize(std::size_t(si * H));
  d->grad = {.x = d->x,
             .topk_idx = d->topk_idx,
             .topk_weights = d->topk_weights,
             .dy = TensorView(d->dy.data(), DType::kFP32, {T, H}),
             .dx = TensorView(d->dx.data(), grad, {T, H}),
             .d_topk_weights = TensorView(d->d_topk.data(), DType::kFP32, {T, K}),
             .dw1 = TensorView(d->dw1.data(), grad, {local, H, 2 * I}),
             .dw2 = TensorView(d->dw2.data(), grad, {local, I, H}),
             .shared_dw1 = shared_view(d->sdw1.data(), {1, H, 2 * si}),
             .shared_dw2 = shared_view(d->sdw2.data(), {1, si, H})};
}

// The warm-up and the timed iterations: kRecord doubles per timed one into *record and, with
// --trace, its spans into *spans (moe_report.h).
Status run_iterations(const Options& o, MoeLayer& layer, const RankData& d,
                      std::vector<double>* record, std::vector<double>* spans) {
  const int me = hp::shmem::my_pe();
  const auto origin = std::chrono::steady_clock::now();
  const double origin_s = std::chrono::duration<double>(origin.time_since_epoch()).count();
  const int total = o.warmup + o.iterations;
  for (int it = 0; it < total; ++it) {
    HP_RETURN_IF_ERROR(hp::shmem::barrier_all());
    const double start =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    HP_RETURN_IF_ERROR(layer.forward(d.x, d.topk_idx, d.topk_weights, d.y_view));
    if (o.backward) HP_RETURN_IF_ERROR(layer.backward(d.grad));
    if (it >= o.warmup) {
      const MoeStageTimes& t = layer.last_times();
      const MoeGradStageTimes& g = layer.last_grad_times();
      record->insert(record->end(), {start, t.dispatch, t.gmm1, t.gmm2, t.combine,
                                     double(layer.last_rows()), g.dispatch, g.recompute, g.act_grad,
                                     g.weight_grad, g.combine, t.overlap, g.overlap});
      if (!o.trace.empty()) {
        const std::vector<CoreSpan> last = layer.last_spans();
        for (std::size_t k = 0; k < kMaxSpans; ++k) {
          if (k < last.size()) {
            spans->insert(spans->end(), {double(last[k].core), double(last[k].phase),
                                         last[k].begin - origin_s, last[k].end - origin_s});
          } else {
            spans->insert(spans->end(), {-2.0, 0.0, 0.0, 0.0});
          }
        }
      }
    }
    if (me == 0 && !o.json && total >= 20 && isatty(2))
      fmt::print(stderr, "\riteration {}/{}", it + 1, total);
  }
  if (me == 0 && !o.json && total >= 20 && isatty(2)) fmt::print(stderr, "\n");
  return Status::ok();
}

Status run_rank(const Options& o) {
  const int me = hp::shmem::my_pe(), ranks = hp::shmem::n_pes();
  const WorkloadShape& s = o.shape;
  RankLayer l;
  HP_RETURN_IF_ERROR(make_layer(o, &l));
  MoeLayer& layer = *l.layer;
  RankData d;
  make_rank_data(o, &d);
  std::vector<double> record, spans;
  HP_RETURN_IF_ERROR(run_iterations(o, layer, d, &record, &spans));
  std::vector<double> errors = {0, 0}, grad_errors(kGrads, 0.0);
  if (o.check) HP_RETURN_IF_ERROR(check_against_references(s, o.check_tokens, d.in, d.y, &errors));
  if (o.check && o.backward)
    HP_RETURN_IF_ERROR(check_gradients(s, o.check_tokens, layer, &grad_errors));
  errors.insert(errors.end(), grad_errors.begin(), grad_errors.end());
  std::vector<double> all_records, all_errors, all_spans;
  HP_RETURN_IF_ERROR(gather(record, &all_records));
  if (!o.trace.empty()) HP_RETURN_IF_ERROR(gather(spans, &all_spans));
  HP_RETURN_IF_ERROR(gather(errors, &all_errors));
  const bool deep = layer.deep();
  const RunFacts run{
      .shape = s,
      .ranks = ranks,
      .iterations = o.iterations,
      .warmup = o.warmup,
      .check_tokens = o.check_tokens,
      .check = o.check,
      .backward = o.backward,
      .keep_activations = o.keep_activations,
      .int8_activation_grads = o.int8_activation_grads,
      .grad_dtype = o.grad_dtype,
      .json = o.json,
      .deep = deep,
      .transport = std::string(hp::shmem::transport_name((me + 1) % ranks)),
      // The layer's three paths: the deep-fuse one with a shared expert is the shared path.
      .layer_path = !deep                       ? "staged"
                    : s.shared_intermediate > 0 ? "shared"
                                                : "deep",
      .planned_path = l.planned,
      .trace = o.trace,
      .cube_cores = l.chip ? l.chip->num_cube() : 0,
      .vector_cores = l.chip ? l.chip->num_vector() : 0};
  HP_RETURN_IF_ERROR(layer.destroy());
  const CheckVerdict verdict = judge(all_errors, ranks, o.check);
  if (me != 0) {
    return verdict.passed ? Status::ok()
                          : Status::error(ErrorCode::kInternal, "the check failed (see rank 0)");
  }
  HP_RETURN_IF_ERROR(report(run, verdict, all_records, all_spans));
  return verdict.passed
             ? Status::ok()
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
  app.add_flag("--keep-activations", o.keep_activations,
               "the forward keeps GMM1's output for the backward instead of its recompute "
               "(needs --backward)")
      ->needs("--backward");
  app.add_option("--grad-dtype", o.grad_dtype,
                 "dX's and the weight gradients' dtype (the check's own backward is fp32)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->needs("--backward");
  app.add_flag("--int8-act-grads", o.int8_activation_grads,
               "the backward's activation-gradient GEMMs (dY W2^T, dA W1^T) in int8 instead of "
               "bf16 (needs --backward)")
      ->needs("--backward");
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
  // After a failed job (a peer gone, a wait past its deadline) finalize returns at once.
  const Status f = hp::shmem::finalize();
  return s.is_ok() && f.is_ok() ? 0 : 1;
}

}  // namespace
}  // namespace hp::moe::tools

int main(int argc, char** argv) { return hp::moe::tools::run(argc, argv); }
