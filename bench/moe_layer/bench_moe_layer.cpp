// The C++ worker of the layer benchmark (run.py drives it): on every rank of an mpirun job it
// builds one MoE layer shape from the workload's formulas (workload.h) and hosts
//   fused       hp::moe::MoeLayer's forward (x bf16 -> y fp32)
//   fused+bwd   its forward and backward (dy bf16; dx fp32, bf16 weight gradients)
//   fused+bwd-kept  the same on a second layer made with keep_activations (the backward takes
//               GMM1's output from its forward instead of recomputing it)
//   fused+bwd-int8  the same on a third, with keep_activations and int8_activation_grads (the
//               activation-gradient GEMMs in int8)
//   unfused     the standard-parts pipeline of unfused_layer.h (x bf16 -> y bf16)
// then serves run.py's commands, read by rank 0 from stdin and broadcast, one JSON object per
// line (the protocol peers.py serves too):
//   {"cmd": "run", "impl": NAME, "iterations": n}  -> {"impl": NAME, "seconds": [...]}: per
//       iteration, the slowest rank's time from a common barrier
//   {"cmd": "check", "impl": NAME}                 -> {"impl": NAME, "y": [[...], [...]]}: y of
//       global tokens 0 and 1 from NAME's last forward
//   {"cmd": "quit"}
// It first prints {"ready": [names], "prepare_s": s, "info": "...", "weight_max": W} (W: the
// workload's weight range, which the peers must use too); a failure prints
// {"error": "..."} and ends the job. Each rank has --tokens tokens (global tokens rank x T + i).
//
//   mpirun -np R bench_moe_layer --hidden H --intermediate I --experts E --topk K --tokens T
//                                [--threads N] [--impls
//                                fused,fused+bwd,fused+bwd-kept,fused+bwd-int8,
//                                 unfused]
//   bench_moe_layer --quick   (the smoke test: a tiny shape, every impl twice, fused against
//                              unfused, no stdin)
#include <mpi.h>
#include <omp.h>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/aligned_allocator.h"
#include "common/bfloat16.h"
#include "common/dnnl_int8.h"
#include "common/mpi_timed.h"
#include "moe/moe_layer.h"
#include "moe_layer/unfused_layer.h"
#include "moe_layer/workload.h"
#include "platform/chip.h"
#include "shmem/shmem.h"

namespace hp::bench::moe_layer {
namespace {

using json = nlohmann::json;

int rank_ = 0, ranks_ = 1;

void print_line(const json& j) {
  if (rank_ != 0) return;
  std::cout << j.dump() << std::endl;
}

[[noreturn]] void fail(const std::string& what) {
  fmt::print(stderr, "bench_moe_layer (rank {}): {}\n", rank_, what);
  if (rank_ == 0) std::cout << json{{"error", what}}.dump() << std::endl;
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void check(const Status& s, const char* what) {
  if (!s.is_ok()) fail(fmt::format("{}: {}", what, s.to_string()));
}

struct Options {
  LayerShape shape;
  std::int64_t tokens = 0;
  int threads = 1;
  std::vector<std::string> impls = {"fused", "fused+bwd", "fused+bwd-kept", "fused+bwd-int8",
                                    "unfused"};
  bool quick = false;
};

// Everything the three implementations need on this rank.
class Worker {
 public:
  explicit Worker(const Options& o) : o_(o) {
    const LayerShape& s = o.shape;
    const std::int64_t T = o.tokens, H = s.hidden, I = s.intermediate, K = s.topk;
    local_ = s.experts / ranks_;
    experts_ = make_experts(s, rank_ * local_, local_);
    tokens_ = make_tokens(s, rank_ * T, T);
    const bool kept = has("fused+bwd-kept"), int8 = has("fused+bwd-int8");
    const bool fused = has("fused") || has("fused+bwd"),
               backward = has("fused+bwd") || kept || int8;
    // One rank's threads: the calling thread, or a chip whose cube cores share the GEMMs.
    if ((fused || backward) && o.threads > 1) {
      check(hp::platform::Chip::create({.num_cube = o.threads, .num_vector = o.threads}, &chip_),
            "chip");
    }
    auto make_layer = [&](bool with_backward, bool keep, bool int8_grads,
                          std::unique_ptr<hp::moe::MoeLayer>* out) {
      check(hp::moe::MoeLayer::create(
                {.hidden = H,
                 .intermediate = I,
                 .num_experts = s.experts,
                 .topk = K,
                 .max_tokens_per_rank = T,
                 .comm = hp::moe::CommKind::kShmem,
                 .chip = chip_.get(),
                 .backward = with_backward,
                 .keep_activations = keep,
                 .int8_activation_grads = int8_grads},
                {.w1 = TensorView(experts_.w1.data(), DType::kInt8, {local_, H, 2 * I}),
                 .w1_scale = TensorView(experts_.w1_scale.data(), DType::kFP32, {local_, 2 * I}),
                 .w2 = TensorView(experts_.w2.data(), DType::kInt8, {local_, I, H}),
                 .w2_scale = TensorView(experts_.w2_scale.data(), DType::kFP32, {local_, H})},
                out),
            "MoeLayer::create");
    };
    if (fused) make_layer(has("fused+bwd"), false, false, &layer_);
    if (kept) make_layer(true, true, false, &kept_layer_);
    if (int8) make_layer(true, true, true, &int8_layer_);
    if (fused || backward) y_fused_.resize(std::size_t(T * H));
    if (backward) {
      dy_ = make_dy(s, rank_ * T, T);
      dx_.resize(std::size_t(T * H));
      d_topk_.resize(std::size_t(T * K));
      dw1_.resize(std::size_t(local_ * H * 2 * I));
      dw2_.resize(std::size_t(local_ * I * H));
    }
    if (has("unfused")) {
      unfused_ = std::make_unique<UnfusedLayer>(MPI_COMM_WORLD, s, experts_, o.threads);
      y_unfused_.resize(std::size_t(T * H));
    }
    // The layer packed its own copy of the weights; the unfused peer's oneDNN primitives
    // (made for the fixed routing by one forward) theirs.
    if (unfused_ != nullptr) {
      forward_unfused();
      unfused_->freeze();
    }
    experts_ = Experts{};
  }

  ~Worker() {
    for (auto* layer : {&layer_, &kept_layer_, &int8_layer_}) {
      if (*layer != nullptr) check((*layer)->destroy(), "MoeLayer::destroy");
    }
  }

  bool has(const std::string& name) const {
    return std::find(o_.impls.begin(), o_.impls.end(), name) != o_.impls.end();
  }

  void forward_fused(hp::moe::MoeLayer& layer) {
    check(layer.forward(view(tokens_.x, DType::kBF16, {o_.tokens, o_.shape.hidden}),
                        view(tokens_.topk_idx, DType::kInt64, {o_.tokens, o_.shape.topk}),
                        view(tokens_.topk_weights, DType::kFP32, {o_.tokens, o_.shape.topk}),
                        view(y_fused_, DType::kFP32, {o_.tokens, o_.shape.hidden})),
          "fused forward");
  }

  void backward_fused(hp::moe::MoeLayer& layer) {
    const std::int64_t T = o_.tokens, H = o_.shape.hidden, I = o_.shape.intermediate,
                       K = o_.shape.topk;
    check(layer.backward({.x = view(tokens_.x, DType::kBF16, {T, H}),
                          .topk_idx = view(tokens_.topk_idx, DType::kInt64, {T, K}),
                          .topk_weights = view(tokens_.topk_weights, DType::kFP32, {T, K}),
                          .dy = view(dy_, DType::kBF16, {T, H}),
                          .dx = view(dx_, DType::kFP32, {T, H}),
                          .d_topk_weights = view(d_topk_, DType::kFP32, {T, K}),
                          .dw1 = view(dw1_, DType::kBF16, {local_, H, 2 * I}),
                          .dw2 = view(dw2_, DType::kBF16, {local_, I, H})}),
          "fused backward");
  }

  void forward_unfused() {
    check(unfused_->forward(tokens_.x.data(), tokens_.topk_idx.data(), tokens_.topk_weights.data(),
                            o_.tokens, y_unfused_.data()),
          "unfused forward");
  }

  double run_once(const std::string& impl) {
    if (impl == "fused") return timed([&] { forward_fused(*layer_); });
    if (impl == "fused+bwd" || impl == "fused+bwd-kept" || impl == "fused+bwd-int8") {
      hp::moe::MoeLayer& layer = impl == "fused+bwd"        ? *layer_
                                 : impl == "fused+bwd-kept" ? *kept_layer_
                                                            : *int8_layer_;
      return timed([&] {
        forward_fused(layer);
        backward_fused(layer);
      });
    }
    return timed([&] { forward_unfused(); });
  }

  // y of this rank's first two tokens from impl's last forward.
  std::vector<std::vector<float>> first_rows(const std::string& impl) const {
    const auto H = std::size_t(o_.shape.hidden);
    std::vector<std::vector<float>> rows;
    for (std::size_t t = 0; t < std::min<std::size_t>(2, std::size_t(o_.tokens)); ++t) {
      std::vector<float> row(H);
      for (std::size_t c = 0; c < H; ++c) {
        row[c] = impl == "unfused" ? bf16_to_float(y_unfused_[t * H + c]) : y_fused_[t * H + c];
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  std::string info() const {
    const std::string range = dnnl_weight_range_note(o_.shape.weight_max);
    return fmt::format("{} rank(s) x {} thread(s), fused path {}{}{}", ranks_, o_.threads,
                       layer_ == nullptr ? "-"
                       : layer_->deep()  ? "deep"
                                         : "staged",
                       range.empty() ? "" : ", ", range);
  }

 private:
  template <typename V>
  static TensorView view(V& v, DType type, std::initializer_list<std::int64_t> shape) {
    return TensorView(const_cast<void*>(static_cast<const void*>(v.data())), type, shape);
  }

  Options o_;
  std::int64_t local_ = 0;
  Experts experts_;
  Tokens tokens_;
  std::unique_ptr<hp::platform::Chip> chip_;
  std::unique_ptr<hp::moe::MoeLayer> layer_, kept_layer_, int8_layer_;
  std::unique_ptr<UnfusedLayer> unfused_;
  // 64-byte aligned, as a framework's tensors are (the kernels stream aligned weight
  // gradients past the caches).
  AlignedVector<float> y_fused_, dx_, d_topk_;
  std::vector<std::uint16_t> y_unfused_, dy_;
  AlignedVector<std::uint16_t> dw1_, dw2_;
};

// Rank 0's next stdin line on every rank ("" at the end of stdin).
std::string next_command() {
  std::string line;
  int size = 0;
  if (rank_ == 0) {
    if (std::getline(std::cin, line))
      size = int(line.size());
    else
      size = -1;
  }
  MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (size < 0) return "";
  line.resize(std::size_t(size));
  MPI_Bcast(line.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
  return line;
}

void serve(Worker& worker, const Options& o) {
  for (std::string line; !(line = next_command()).empty();) {
    const json cmd = json::parse(line, nullptr, false);
    if (cmd.is_discarded() || !cmd.contains("cmd")) fail("not a command: " + line);
    const std::string what = cmd["cmd"];
    if (what == "quit") return;
    const std::string impl = cmd.value("impl", "");
    if (!worker.has(impl))
      fail(fmt::format("unknown impl '{}' (this worker has {})", impl, fmt::join(o.impls, ", ")));
    if (what == "run") {
      std::vector<double> seconds;
      for (int i = 0; i < cmd.value("iterations", 1); ++i) seconds.push_back(worker.run_once(impl));
      print_line({{"impl", impl}, {"seconds", seconds}});
    } else if (what == "check") {
      print_line({{"impl", impl}, {"y", worker.first_rows(impl)}});
    } else {
      fail("unknown command: " + what);
    }
  }
}

// The smoke test: every impl twice on a tiny shape; fused and unfused compute the same layer.
int quick(Worker& worker, const Options& o) {
  for (const std::string& impl : o.impls) {
    for (int i = 0; i < 2; ++i) worker.run_once(impl);
  }
  const auto fused = worker.first_rows("fused"), unfused = worker.first_rows("unfused");
  double diff = 0, norm = 0;
  for (std::size_t t = 0; t < fused.size(); ++t) {
    for (std::size_t c = 0; c < fused[t].size(); ++c) {
      diff += std::pow(double(fused[t][c]) - unfused[t][c], 2);
      norm += std::pow(double(fused[t][c]), 2);
    }
  }
  const double error = std::sqrt(diff / std::max(norm, 1e-30));
  if (rank_ == 0)
    fmt::print("bench_moe_layer --quick: fused vs unfused relative error {:.2e}\n", error);
  // Both quantise the same way; they differ by bf16 rounding and summation order.
  return error < 2e-2 && norm > 0 ? 0 : 1;
}

int run(int argc, char** argv) {
  CLI::App app{"the C++ worker of the MoE layer benchmark (bench/moe_layer/run.py drives it)"};
  Options o;
  app.add_option("--hidden", o.shape.hidden, "H")->check(CLI::PositiveNumber);
  app.add_option("--intermediate", o.shape.intermediate, "I")->check(CLI::PositiveNumber);
  app.add_option("--experts", o.shape.experts, "E (a multiple of the ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--topk", o.shape.topk, "K")->check(CLI::PositiveNumber);
  app.add_option("--tokens", o.tokens, "tokens per rank")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "threads per rank")->check(CLI::PositiveNumber);
  app.add_option("--impls", o.impls, "the implementations to prepare")
      ->delimiter(',')
      ->check(CLI::IsMember({"fused", "fused+bwd", "fused+bwd-kept", "fused+bwd-int8", "unfused"}));
  app.add_flag("--quick", o.quick, "the smoke test (a tiny shape, no stdin)");
  CLI11_PARSE(app, argc, argv);
  if (o.quick)
    o = {.shape = {.hidden = 256, .intermediate = 128, .experts = 8, .topk = 2},
         .tokens = 32,
         .quick = true};
  // Weights the unfused peer's oneDNN matmul multiplies exactly, for every implementation.
  o.shape.weight_max = dnnl_exact_int8_weight_max();
  if (o.shape.hidden == 0 || o.shape.intermediate == 0 || o.shape.experts == 0 ||
      o.shape.topk == 0 || o.tokens == 0) {
    fmt::print(
        stderr,
        "bench_moe_layer: --hidden, --intermediate, --experts, --topk and --tokens are required\n");
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  if (o.shape.experts % ranks_ != 0)
    fail(fmt::format("--experts {} is not a multiple of {} ranks", o.shape.experts, ranks_));
  // The heap: the dispatch's records (bf16 rows for the backward's dY) from every rank and
  // the zero-copy combine's fp32 rows (T x K to start with, room to grow to twice that), twice
  // over.
  if (std::getenv("HP_SHMEM_HEAP_SIZE") == nullptr) {
    const std::int64_t T = o.tokens, H = o.shape.hidden, K = o.shape.topk;
    const std::int64_t mb = 2 * (ranks_ * T * (2 * H + 256) + 2 * T * K * H * 4) / (1 << 20) + 64;
    setenv("HP_SHMEM_HEAP_SIZE", fmt::format("{}M", mb).c_str(), 1);
  }
  check(hp::shmem::init(), "hp::shmem::init");
  omp_set_num_threads(o.threads);
  int rc = 0;
  {
    const double start = MPI_Wtime();
    Worker worker(o);
    MPI_Barrier(MPI_COMM_WORLD);
    if (o.quick) {
      rc = quick(worker, o);
    } else {
      print_line({{"ready", o.impls},
                  {"prepare_s", MPI_Wtime() - start},
                  {"info", worker.info()},
                  {"weight_max", o.shape.weight_max}});
      serve(worker, o);
    }
  }
  check(hp::shmem::finalize(), "hp::shmem::finalize");
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace hp::bench::moe_layer

int main(int argc, char** argv) { return hp::bench::moe_layer::run(argc, argv); }
