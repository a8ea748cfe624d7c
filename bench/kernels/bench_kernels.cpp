// The grouped int8 GEMM of the selected kernel target against oneDNN 2.6, in the same run.
//
// oneDNN's side is the fairest equivalent a user would write: an s8 x s8 -> f32 matmul with the
// weights reordered once into its preferred layout, per-N output scales, and the per-token
// scales applied after in an OpenMP pass on the same threads. Ours is one grouped GEMM with the
// dequant epilogue, its tiles split over the chip's cube cores. Shapes: GMM1 (K=2048, N=2816)
// and GMM2 (K=1408, N=2048), M in {64, 256, 1024}, 1 and 2 threads, 1 expert or 8 experts
// cycling (each call uses the next expert's weights, so they come from memory, not cache).
// Then the fused dequant + SwiGLU + requant epilogue against oneDNN's GEMM plus a separate
// SwiGLU + quantisation pass, and the backward's bf16 GEMMs (activation and weight gradients)
// against oneDNN's bf16 matmul. Peak loops (AVX-512 VNNI, and AMX when present) run in the
// same binary; each row prints GOPS
// (2 MNK / time), the ratio to oneDNN, and % of the peak of the instructions each side uses
// (ours: its target's; oneDNN: the best it has on this CPU). Without VNNI the weights are 7-bit
// and oneDNN's bf16 side is its f32 matmul (see make_experts' caller and DnnlBf16Gemm).
//
// Samples alternate ours, oneDNN, ours, ... and the table shows medians.
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/aligned_allocator.h"
#include "common/bfloat16.h"
#include "common/compare.h"
#include "common/cpu_features.h"
#include "common/dnnl_int8.h"
#include "kernels/kernel_math.h"
#include "kernels/kernels.h"
#include "platform/chip.h"

namespace {

using hp::DType;
using hp::Status;
using hp::TensorView;
namespace hk = hp::kernels;

void check(const Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "bench_kernels: %s\n", s.to_string().c_str());
    std::exit(1);
  }
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- peaks ------------------------------------------------------------------------------------

// 24 independent vpdpbusd chains in zmm0-23 (written in assembly: with intrinsics GCC keeps
// an array of accumulators on the stack), 8 per iteration x 3.
__attribute__((target("avx512f,avx512vnni"))) double vnni_loop(std::int64_t iters) {
  const double t0 = now();
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      ".irp r, 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
      "vmovdqa64 %%zmm0, %%zmm\\r\n\t"
      ".endr\n\t"
      "vpternlogd $0xff, %%zmm24, %%zmm24, %%zmm24\n\t"
      "vpternlogd $0xff, %%zmm25, %%zmm25, %%zmm25\n\t"
      "1:\n\t"
      ".irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
      "vpdpbusd %%zmm24, %%zmm25, %%zmm\\r\n\t"
      ".endr\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(iters)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19",
        "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25");
  return now() - t0;
}

double vnni_ops(std::int64_t iters) {
  const double t = vnni_loop(iters);
  return double(iters) * 24 * 64 * 2 / t;  // ops per second
}

// ldtilecfg's operand: palette 1, tiles 0-7 of 16 rows x 64 bytes (both AMX loops below).
struct alignas(64) AmxConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
const AmxConfig kAmxConfig{};

__attribute__((target("amx-tile,amx-int8"))) double amx_loop(std::int64_t iters) {
  alignas(64) static std::int8_t data[16 * 64] = {};
  _tile_loadconfig(&kAmxConfig);
  _tile_loadd(4, data, 64);
  _tile_loadd(5, data, 64);
  _tile_loadd(6, data, 64);
  _tile_loadd(7, data, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const double t0 = now();
  for (std::int64_t i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  const double t = now() - t0;
  _tile_release();
  return double(iters) * 4 * 16 * 16 * 64 * 2 / t;
}

// The loop above with its four tiles loaded every step from two buffers of `bytes` each (64-byte
// aligned, each 1 KiB tile contiguous, cycled): what tdpbusd sustains when its operands come
// from L1 (16 KiB buffers) or from L2 (512 KiB) instead of from the tile registers. These bound
// what any 2 x 2 tile GEMM kernel reaches, where one operand at least streams from L2.
__attribute__((target("amx-tile,amx-int8"))) double amx_stream_loop(std::int64_t iters,
                                                                    std::int64_t bytes) {
  auto* a = static_cast<std::int8_t*>(std::aligned_alloc(64, std::size_t(bytes)));
  auto* b = static_cast<std::int8_t*>(std::aligned_alloc(64, std::size_t(bytes)));
  if (a == nullptr || b == nullptr) {
    std::fprintf(stderr, "bench_kernels: no memory for the AMX stream loop\n");
    std::exit(1);
  }
  for (std::int64_t i = 0; i < bytes; ++i) a[i] = b[i] = std::int8_t(i * 7 + 3);
  __asm__ volatile("" ::: "memory");  // the tile loads below read the buffers (no memory operand)
  _tile_loadconfig(&kAmxConfig);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const std::int64_t pairs = bytes / 2048;
  const double t0 = now();
  for (std::int64_t i = 0; i < iters; ++i) {
    const std::int8_t* pa = a + (i % pairs) * 2048;
    const std::int8_t* pb = b + (i % pairs) * 2048;
    _tile_loadd(4, pa, 64);
    _tile_loadd(6, pb, 64);
    _tile_loadd(7, pb + 1024, 64);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_loadd(5, pa + 1024, 64);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  const double t = now() - t0;
  _tile_release();
  std::free(a);
  std::free(b);
  return double(iters) * 4 * 16 * 16 * 64 * 2 / t;
}

// Runs `fn(worker)` on `threads` cube cores of the chip and returns after all finished.
template <typename F>
void on_cores(hp::platform::Chip& chip, int threads, F&& fn) {
  check(chip.launch({.mode = hp::platform::LaunchMode::kCube, .block_dim = threads},
                    [&](hp::platform::BlockContext& ctx) {
                      fn(ctx.block_idx());
                      return Status::ok();
                    }));
}

// Total ops per second of `threads` cores each running `loop`, the median of a few runs.
template <typename Loop>
double peak(hp::platform::Chip& chip, int threads, Loop loop, std::int64_t iters) {
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    std::vector<double> per(static_cast<std::size_t>(threads));
    on_cores(chip, threads, [&](int w) { per[std::size_t(w)] = loop(iters); });
    double sum = 0;
    for (double p : per) sum += p;
    runs.push_back(sum);
  }
  return hp::bench::median(runs);
}

// "42%" of a measured peak, "n/a" where there is none (the CPU lacks those instructions).
std::string percent_of_peak(double ops_per_s, double peak_ops_per_s) {
  if (peak_ops_per_s <= 0) return "n/a";
  return std::to_string(static_cast<long long>(std::lround(100 * ops_per_s / peak_ops_per_s))) +
         "%";
}

// ---- data -------------------------------------------------------------------------------------

struct Expert {
  std::vector<std::int8_t> w;  // [K, N]
  std::vector<float> scale;    // [N]
};

struct Shape {
  const char* name;
  std::int64_t k, n;
};

// oneDNN: one matmul per expert over shared a and out buffers (bench/common/dnnl_int8.h).
struct DnnlGemm {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<hp::bench::DnnlInt8Matmul> prims;
  const std::int8_t* a;
  float* out;
  std::string impl;

  DnnlGemm(std::int64_t m, const Shape& s, std::vector<Expert>& experts, std::int8_t* a_in,
           float* out_in)
      : a(a_in), out(out_in) {
    for (Expert& e : experts) prims.emplace_back(engine, stream, m, s.k, s.n, e.w.data(), e.scale);
    impl = prims.front().impl();
  }
  void run(int expert) { prims[std::size_t(expert)].run(stream, a, out); }
};

struct Result {
  double ours_s, peer_s;
};

// Alternating samples of about `sample_s` seconds each (the batch is calibrated on the first
// calls); medians of seconds per call.
template <typename A, typename B>
Result interleave(int rounds, double sample_s, A ours, B peer) {
  double t0 = now();
  ours(0);
  peer(0);
  const int batch = std::max(1, int(sample_s / std::max(now() - t0, 1e-6) * 2));
  std::vector<double> a, b;
  int call = 0;
  for (int r = 0; r < rounds; ++r) {
    t0 = now();
    for (int i = 0; i < batch; ++i) ours(++call);
    a.push_back((now() - t0) / batch);
    t0 = now();
    for (int i = 0; i < batch; ++i) peer(++call);
    b.push_back((now() - t0) / batch);
  }
  return {hp::bench::median(a), hp::bench::median(b)};
}

using hp::bench::swiglu_quant_pass;

// Random int8 weights [E, K, N] with per-N scales: oneDNN's copies per expert, and ours packed.
struct ExpertSet {
  std::vector<Expert> experts;
  hk::PackedWeights packed;
};

// weight_max: the weights are drawn from [-weight_max, weight_max].
ExpertSet make_experts(std::mt19937& rng, const Shape& s, int experts, hk::PackLayout layout,
                       int weight_max) {
  std::uniform_int_distribution<int> i8(-weight_max, weight_max);
  std::uniform_real_distribution<float> real(0.001f, 0.01f);
  ExpertSet set;
  set.experts.resize(static_cast<std::size_t>(experts));
  std::vector<std::int8_t> all_w(std::size_t(experts * s.k * s.n));
  std::vector<float> all_s(std::size_t(experts * s.n));
  for (auto& v : all_w) v = std::int8_t(i8(rng));
  for (auto& v : all_s) v = real(rng);
  for (int e = 0; e < experts; ++e) {
    set.experts[std::size_t(e)].w.assign(all_w.begin() + e * s.k * s.n,
                                         all_w.begin() + (e + 1) * s.k * s.n);
    set.experts[std::size_t(e)].scale.assign(all_s.begin() + e * s.n,
                                             all_s.begin() + (e + 1) * s.n);
  }
  check(hk::pack_weights(TensorView(all_w.data(), DType::kInt8, {experts, s.k, s.n}),
                         TensorView(all_s.data(), DType::kFP32, {experts, s.n}), {.layout = layout},
                         &set.packed));
  return set;
}

// Random int8 activations [M, K] and their per-row scales.
struct Activations {
  std::vector<std::int8_t> a;
  std::vector<float> scale;
};

Activations make_activations(std::mt19937& rng, std::int64_t m, std::int64_t k) {
  std::uniform_int_distribution<int> i8(-127, 127);
  std::uniform_real_distribution<float> real(0.001f, 0.01f);
  Activations x{std::vector<std::int8_t>(static_cast<std::size_t>(m * k)),
                std::vector<float>(static_cast<std::size_t>(m))};
  for (auto& v : x.a) v = std::int8_t(i8(rng));
  for (auto& v : x.scale) v = real(rng);
  return x;
}

// Group offsets that give all m rows to expert e, one set per expert (call c uses expert c % E).
std::vector<std::vector<std::int64_t>> offsets_per_expert(int experts, std::int64_t m) {
  std::vector<std::vector<std::int64_t>> offsets(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    for (int x = 0; x <= experts; ++x) offsets[std::size_t(e)].push_back(x <= e ? 0 : m);
  }
  return offsets;
}

// Our side of a row: one plan per expert's problem, a workspace per worker; run(call) runs the
// plan of expert call % E on the chip's cube cores.
class OursRunner {
 public:
  template <typename Problem>
  OursRunner(const hk::KernelTable& table, hp::platform::Chip& chip, int experts, int threads,
             Problem problem)
      : chip_(chip), threads_(threads), plans_(static_cast<std::size_t>(experts)) {
    std::uint64_t ws_bytes = 0;
    for (int e = 0; e < experts; ++e) {
      check(hk::plan_grouped_gemm(table, problem(e), threads, &plans_[std::size_t(e)]));
      ws_bytes = std::max(ws_bytes, plans_[std::size_t(e)].workspace_bytes());
    }
    for (int t = 0; t < threads; ++t)
      ws_.emplace_back(std::aligned_alloc(64, ws_bytes), &std::free);
  }
  void run(int call) {
    const hk::GroupedGemmPlan& plan = plans_[std::size_t(call) % plans_.size()];
    on_cores(chip_, threads_, [&](int w) { plan.run(w, ws_[std::size_t(w)].get()); });
  }

 private:
  hp::platform::Chip& chip_;
  int threads_;
  std::vector<hk::GroupedGemmPlan> plans_;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> ws_;
};

// oneDNN: bf16 [M, K] x bf16 [K, N] -> f32 [M, N]. kInput: A row-major and the weights
// reordered once (they are constant); kWeight (dW = X^T dY): A is X^T, a transposed view of X
// [K rows][M], and B is dY as it is, row-major (both change every step, so nothing is
// reordered). Where this CPU has no bf16 matmul (oneDNN 2.6 needs AVX-512 for it), its f32
// matmul over the same values widened to f32 once, untimed (exact: a bf16 is an f32 with a
// shorter mantissa), which is what a user of such a CPU would run.
struct DnnlBf16Gemm {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory src, weights, dst;
  std::vector<float> a_f32, w_f32;  // the widened inputs of the f32 matmul
  std::string impl;

  DnnlBf16Gemm(hk::Bf16GemmKind kind, std::int64_t m, std::int64_t k, std::int64_t n,
               std::uint16_t* a, std::uint16_t* w, float* out) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const bool weight_grad = kind == hk::Bf16GemmKind::kWeight;
    const tag a_tag = weight_grad ? tag::ba : tag::ab, w_tag = weight_grad ? tag::ab : tag::any;
    const auto matmul_of = [&](dt in) {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc({{m, k}, in, a_tag}, {{k, n}, in, w_tag}, {{m, n}, dt::f32, tag::ab}),
          engine);
    };
    dt in = dt::bf16;
    void* a_data = a;
    void* w_data = w;
    std::optional<dnnl::matmul::primitive_desc> pd;
    try {
      pd = matmul_of(dt::bf16);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      in = dt::f32;
      a_f32.resize(std::size_t(m * k));
      w_f32.resize(std::size_t(k * n));
      for (std::size_t i = 0; i < a_f32.size(); ++i) a_f32[i] = hp::bf16_to_float(a[i]);
      for (std::size_t i = 0; i < w_f32.size(); ++i) w_f32[i] = hp::bf16_to_float(w[i]);
      a_data = a_f32.data();
      w_data = w_f32.data();
      pd = matmul_of(dt::f32);
    }
    impl = pd->impl_info_str();
    if (in == dt::f32) impl += " (f32 matmul: no bf16 matmul on this CPU)";
    src = dnnl::memory(pd->src_desc(), engine, a_data);
    dst = dnnl::memory(pd->dst_desc(), engine, out);
    dnnl::memory plain({{k, n}, in, tag::ab}, engine, w_data);
    if (weight_grad) {
      weights = plain;
    } else {
      weights = dnnl::memory(pd->weights_desc(), engine);
      dnnl::reorder(plain, weights).execute(stream, plain, weights);
    }
    prim = dnnl::matmul(*pd);
    stream.wait();
  }
  void run() {
    prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

// Our bf16 GEMM (one expert): planned once, a workspace per worker.
class OursBf16Runner {
 public:
  OursBf16Runner(const hk::KernelTable& table, hp::platform::Chip& chip, int threads,
                 const hk::Bf16GemmProblem& p)
      : chip_(chip), threads_(threads) {
    check(hk::plan_bf16_gemm(table, p, threads, &plan_));
    for (int t = 0; t < threads; ++t) {
      ws_.emplace_back(std::aligned_alloc(64, std::max<std::uint64_t>(64, plan_.workspace_bytes())),
                       &std::free);
    }
  }
  void run() {
    on_cores(chip_, threads_, [&](int w) { plan_.run(w, ws_[std::size_t(w)].get()); });
  }

 private:
  hp::platform::Chip& chip_;
  int threads_;
  hk::Bf16GemmPlan plan_;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> ws_;
};

}  // namespace

int main(int argc, char** argv) {
  // OpenMP workers (oneDNN's) spin for a long time after each parallel region by default,
  // taking the CPUs from the chip's cores in the interleaved samples (and the chip's from
  // them): both sides block when idle. libgomp reads this once, at load: re-exec with it set.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::perror("bench_kernels: re-exec with OMP_WAIT_POLICY=passive");
    return 1;
  }
  bool quick = false;
  std::int64_t only_m = 0;
  int only_experts = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg.rfind("--m=", 0) == 0 && std::atoll(arg.c_str() + 4) > 0) {
      only_m = std::atoll(arg.c_str() + 4);
    } else if (arg.rfind("--experts=", 0) == 0 && std::atoi(arg.c_str() + 10) > 0) {
      only_experts = std::atoi(arg.c_str() + 10);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--m=M] [--experts=E]\n"
                   "  --quick: M=64, 1 expert, 1 thread, few samples; --m, --experts: only that M "
                   "/ expert count\n"
                   "  (HP_KERNEL_TARGET picks the kernel target)\n",
                   argv[0]);
      return 2;
    }
  }
  const int rounds = quick ? 2 : 9, max_threads = quick ? 1 : 2;
  const double sample_s = quick ? 0.002 : 0.03;
  const hk::KernelTable* table = nullptr;
  check(hk::selected_target(&table));
  const bool amx = std::string(table->target) == "x86_64_amx";
  const hp::CpuFeatures& cpu = hp::cpu_features();

  std::unique_ptr<hp::platform::Chip> chip;
  check(hp::platform::Chip::create({.num_cube = max_threads, .num_vector = max_threads}, &chip));

  std::printf("kernel target: %s   cpu: %s\n", table->target, cpu.to_string().c_str());
  double vnni_peak[3] = {0, 0, 0}, amx_peak[3] = {0, 0, 0};
  for (int t = 1; t <= max_threads; ++t) {
    if (cpu.avx512_vnni) vnni_peak[t] = peak(*chip, t, vnni_ops, quick ? 10000 : 2000000);
    if (cpu.amx_int8 && hk::request_amx_permission().is_ok())
      amx_peak[t] = peak(*chip, t, amx_loop, quick ? 1000 : 200000);
    std::printf("measured peak, %d thread(s): AVX-512 VNNI %s, AMX-INT8 %s\n", t,
                vnni_peak[t] > 0 ? std::to_string(int(vnni_peak[t] / 1e9)).append(" GOPS").c_str()
                                 : "n/a (no VNNI here)",
                amx_peak[t] > 0 ? std::to_string(int(amx_peak[t] / 1e9)).append(" GOPS").c_str()
                                : "n/a (no AMX here)");
  }
  if (amx_peak[1] > 0) {
    const std::int64_t iters = quick ? 20000 : 400000;
    const double l1 = peak(
        *chip, 1, [](std::int64_t n) { return amx_stream_loop(n, 16 << 10); }, iters);
    const double l2 = peak(
        *chip, 1, [](std::int64_t n) { return amx_stream_loop(n, 512 << 10); }, iters);
    std::printf(
        "AMX-INT8, 1 thread, 2 x 2 tiles loaded every step: from L1 %d GOPS (%s of peak), from L2 "
        "%d GOPS (%s)\n",
        int(l1 / 1e9), percent_of_peak(l1, amx_peak[1]).c_str(), int(l2 / 1e9),
        percent_of_peak(l2, amx_peak[1]).c_str());
  }
  // A kernel's peak: AMX for the AMX target, else VNNI. oneDNN uses AMX when the CPU has it.
  const auto ours_peak = [&](int t) { return amx ? amx_peak[t] : vnni_peak[t]; };
  const auto dnnl_peak = [&](int t) { return amx_peak[t] > 0 ? amx_peak[t] : vnni_peak[t]; };
  // Both sides get weights oneDNN multiplies exactly (bench/common/dnnl_int8.h).
  const int weight_max = hp::bench::dnnl_exact_int8_weight_max();
  if (const std::string note = hp::bench::dnnl_weight_range_note(weight_max); !note.empty())
    std::printf("%s\n", note.c_str());

  const Shape shapes[] = {{"GMM1", 2048, 2816}, {"GMM2", 1408, 2048}};
  const std::vector<std::int64_t> ms = only_m  ? std::vector<std::int64_t>{only_m}
                                       : quick ? std::vector<std::int64_t>{64}
                                               : std::vector<std::int64_t>{64, 256, 1024};
  const std::vector<int> expert_counts = only_experts ? std::vector<int>{only_experts}
                                         : quick      ? std::vector<int>{1}
                                                      : std::vector<int>{1, 8};
  std::mt19937 rng(1);

  std::printf("\n%-5s %5s %3s %3s %10s %10s %8s %9s %9s   %s\n", "shape", "M", "thr", "exp",
              "hp GOPS", "dnnl GOPS", "hp/dnnl", "hp %peak", "dnnl %pk", "");
  std::string dnnl_impl;
  for (const Shape& s : shapes) {
    for (int experts : expert_counts) {
      ExpertSet w = make_experts(rng, s, experts, hk::PackLayout::kPlain, weight_max);
      for (std::int64_t m : ms) {
        Activations x = make_activations(rng, m, s.k);
        std::vector<float> out(std::size_t(m * s.n)), dnnl_out(std::size_t(m * s.n));
        DnnlGemm dnnl(m, s, w.experts, x.a.data(), dnnl_out.data());
        dnnl_impl = dnnl.impl;
        auto offsets = offsets_per_expert(experts, m);
        const auto problem = [&](int e) {
          hk::GroupedGemmProblem p;
          p.a = TensorView(x.a.data(), DType::kInt8, {m, s.k});
          p.a_scale = TensorView(x.scale.data(), DType::kFP32, {m});
          p.offsets = TensorView(offsets[std::size_t(e)].data(), DType::kInt64, {experts + 1});
          p.weights = w.packed.header();
          p.out = TensorView(out.data(), DType::kFP32, {m, s.n});
          return p;
        };
        const auto dnnl_row_scales = [&](int threads) {
#pragma omp parallel for num_threads(threads)
          for (std::int64_t row = 0; row < m; ++row) {
            float* o = dnnl_out.data() + row * s.n;
            const float f = x.scale[std::size_t(row)];
            for (std::int64_t c = 0; c < s.n; ++c) o[c] *= f;
          }
        };
        for (int threads = 1; threads <= max_threads; ++threads) {
          OursRunner ours(*table, *chip, experts, threads, problem);
          omp_set_num_threads(threads);
          const Result r = interleave(
              rounds, sample_s, [&](int call) { ours.run(call); },
              [&](int call) {
                dnnl.run(call % experts);
                dnnl_row_scales(threads);
              });
          const double ops = 2.0 * double(m) * double(s.n) * double(s.k);
          std::printf("%-5s %5lld %3d %3d %10.0f %10.0f %8.2f %9s %9s\n", s.name,
                      static_cast<long long>(m), threads, experts, ops / r.ours_s / 1e9,
                      ops / r.peer_s / 1e9, r.peer_s / r.ours_s,
                      percent_of_peak(ops / r.ours_s, ours_peak(threads)).c_str(),
                      percent_of_peak(ops / r.peer_s, dnnl_peak(threads)).c_str());
          std::fflush(stdout);
        }
        // Both sides compute the same product: spot-check expert 0's result.
        check(hk::grouped_gemm(*table, problem(0)));
        dnnl.run(0);
        dnnl_row_scales(1);
        for (std::int64_t c = 0; c < m * s.n; c += 97) {
          const float a = out[std::size_t(c)], b = dnnl_out[std::size_t(c)];
          if (std::fabs(a - b) > 1e-3f * (std::fabs(b) + 1e-3f)) {
            std::fprintf(stderr, "bench_kernels: results differ at element %lld: %g vs %g\n",
                         static_cast<long long>(c), a, b);
            return 1;
          }
        }
      }
    }
  }
  // ---- GMM1 with the fused dequant + SwiGLU + requant epilogue --------------------------------
  std::printf(
      "\nGMM1 + SwiGLU + int8 requant: fused epilogue vs oneDNN GEMM then a SwiGLU+quant pass\n");
  std::printf("%-5s %5s %3s %3s %10s %10s %8s\n", "shape", "M", "thr", "exp", "hp GOPS",
              "dnnl GOPS", "hp/dnnl");
  const Shape& gmm1 = shapes[0];
  const std::int64_t inter = gmm1.n / 2;
  for (int experts : expert_counts) {
    ExpertSet w = make_experts(rng, gmm1, experts, hk::PackLayout::kSwigluHalves, weight_max);
    for (std::int64_t m : ms) {
      Activations x = make_activations(rng, m, gmm1.k);
      std::vector<std::int8_t> q(std::size_t(m * inter)), dnnl_q(std::size_t(m * inter));
      std::vector<float> q_scale(static_cast<std::size_t>(m)),
          dnnl_q_scale(static_cast<std::size_t>(m));
      std::vector<float> gemm(std::size_t(m * gmm1.n)), h(std::size_t(m * inter));
      DnnlGemm dnnl(m, gmm1, w.experts, x.a.data(), gemm.data());
      auto offsets = offsets_per_expert(experts, m);
      const auto problem = [&](int e) {
        hk::GroupedGemmProblem p;
        p.a = TensorView(x.a.data(), DType::kInt8, {m, gmm1.k});
        p.a_scale = TensorView(x.scale.data(), DType::kFP32, {m});
        p.offsets = TensorView(offsets[std::size_t(e)].data(), DType::kInt64, {experts + 1});
        p.weights = w.packed.header();
        p.epilogue = hk::Epilogue::kDequantSwigluQuant;
        p.out = TensorView(q.data(), DType::kInt8, {m, inter});
        p.out_scale = TensorView(q_scale.data(), DType::kFP32, {m});
        return p;
      };
      const auto peer = [&](int expert, int threads) {
        dnnl.run(expert);
        swiglu_quant_pass(gemm.data(), m, inter, x.scale.data(), h.data(), dnnl_q.data(),
                          dnnl_q_scale.data(), threads);
      };
      for (int threads = 1; threads <= max_threads; ++threads) {
        OursRunner ours(*table, *chip, experts, threads, problem);
        omp_set_num_threads(threads);
        const Result r = interleave(
            rounds, sample_s, [&](int call) { ours.run(call); },
            [&](int call) { peer(call % experts, threads); });
        const double ops = 2.0 * double(m) * double(gmm1.n) * double(gmm1.k);
        std::printf("%-5s %5lld %3d %3d %10.0f %10.0f %8.2f\n", "GMM1s", static_cast<long long>(m),
                    threads, experts, ops / r.ours_s / 1e9, ops / r.peer_s / 1e9,
                    r.peer_s / r.ours_s);
        std::fflush(stdout);
      }
      // The same int8 rows within one step of rounding, the same scales to 1e-3.
      check(hk::grouped_gemm(*table, problem(0)));
      peer(0, 1);
      for (std::int64_t r = 0; r < m; r += 17) {
        bool same = std::fabs(q_scale[std::size_t(r)] - dnnl_q_scale[std::size_t(r)]) <=
                    1e-3f * std::fabs(dnnl_q_scale[std::size_t(r)]);
        for (std::int64_t c = 0; c < inter; ++c) {
          same = same &&
                 std::abs(q[std::size_t(r * inter + c)] - dnnl_q[std::size_t(r * inter + c)]) <= 1;
        }
        if (!same) {
          std::fprintf(stderr,
                       "bench_kernels: fused SwiGLU rows differ from oneDNN + pass at row %lld\n",
                       static_cast<long long>(r));
          return 1;
        }
      }
    }
  }
  // ---- the backward's bf16 GEMMs ---------------------------------------------------------------
  // kInput: dG = dY . W2^T (K = H, N = I) and dX = dA . W1^T (K = 2I, N = H), W^T stored
  // row-major and, as the MoE layer keeps it and as oneDNN's weights are reordered once, packed
  // once into the target's panels where it has them. kWeight: dW2 = h^T . dY (I x H) and
  // dW1 = x^T . dA (H x 2I) over the M rows of one expert; the outputs 64-byte aligned, as a
  // framework's tensors are.
  std::printf(
      "\nbf16 GEMMs of the backward pass (bf16 x bf16 -> fp32, one expert) vs oneDNN bf16 matmul\n"
      "(kInput: M rows x K -> N; kWeight: K x N summed over M rows)\n");
  std::printf("%-6s %5s %3s %10s %10s %8s\n", "shape", "M", "thr", "hp GFLOPS", "dnnl GFLOP",
              "hp/dnnl");
  struct Bf16Shape {
    const char* name;
    hk::Bf16GemmKind kind;
    std::int64_t k, n;
  };
  const Bf16Shape bf16_shapes[] = {{"dY.W2T", hk::Bf16GemmKind::kInput, 2048, 1408},
                                   {"dA.W1T", hk::Bf16GemmKind::kInput, 2816, 2048},
                                   {"hT.dY", hk::Bf16GemmKind::kWeight, 1408, 2048},
                                   {"xT.dA", hk::Bf16GemmKind::kWeight, 2048, 2816}};
  std::string dnnl_bf16_impl;
  for (const Bf16Shape& s : bf16_shapes) {
    const bool weight_grad = s.kind == hk::Bf16GemmKind::kWeight;
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    // kInput: a [M, K], w = W^T [K, N]; kWeight: a = x [M, K] (dW's rows), w = dY [M, N].
    std::vector<std::uint16_t> w_input(weight_grad ? 0 : std::size_t(s.k * s.n));
    for (auto& v : w_input) v = hp::float_to_bf16(real(rng));
    for (std::int64_t m : ms) {
      std::vector<std::uint16_t> a(std::size_t(m * s.k));
      for (auto& v : a) v = hp::float_to_bf16(real(rng));
      std::vector<std::uint16_t> w_weight(weight_grad ? std::size_t(m * s.n) : 0);
      for (auto& v : w_weight) v = hp::float_to_bf16(real(rng));
      std::vector<std::uint16_t>& w = weight_grad ? w_weight : w_input;
      const std::int64_t out_rows = weight_grad ? s.k : m;
      hp::AlignedVector<float> out(std::size_t(out_rows * s.n)),
          dnnl_out(std::size_t(out_rows * s.n));
      std::vector<std::int64_t> offsets = {0, m};
      hk::Bf16GemmProblem p;
      p.kind = s.kind;
      p.a = TensorView(a.data(), DType::kBF16, {m, s.k});
      p.offsets = TensorView(offsets.data(), DType::kInt64, {2});
      hk::Bf16Panels panels;
      if (weight_grad) {
        p.b = TensorView(w.data(), DType::kBF16, {m, s.n});
        p.out = TensorView(out.data(), DType::kFP32, {1, s.k, s.n});
      } else {
        p.b = TensorView(w.data(), DType::kBF16, {1, s.k, s.n});
        p.out = TensorView(out.data(), DType::kFP32, {m, s.n});
        check(hk::pack_bf16_panels(*table, p.b, &panels));
        if (!panels.empty()) {
          p.b = TensorView();
          p.b_panels = &panels;
        }
      }
      // oneDNN's GEMM: [out_rows, K'] x [K', N] with K' = M for the weight gradient.
      DnnlBf16Gemm dnnl(s.kind, out_rows, weight_grad ? m : s.k, s.n, a.data(), w.data(),
                        dnnl_out.data());
      dnnl_bf16_impl = dnnl.impl;
      for (int threads = 1; threads <= max_threads; ++threads) {
        OursBf16Runner ours(*table, *chip, threads, p);
        omp_set_num_threads(threads);
        const Result r = interleave(
            rounds, sample_s, [&](int) { ours.run(); }, [&](int) { dnnl.run(); });
        const double flops = 2.0 * double(m) * double(s.n) * double(s.k);
        std::printf("%-6s %5lld %3d %10.0f %10.0f %8.2f\n", s.name, static_cast<long long>(m),
                    threads, flops / r.ours_s / 1e9, flops / r.peer_s / 1e9, r.peer_s / r.ours_s);
        std::fflush(stdout);
      }
      // The same sums of exact products, in different orders.
      for (std::int64_t c = 0; c < out_rows * s.n; c += 97) {
        const float x = out[std::size_t(c)], y = dnnl_out[std::size_t(c)];
        if (std::fabs(x - y) > 1e-3f * (std::fabs(y) + 1.0f)) {
          std::fprintf(stderr, "bench_kernels: bf16 %s results differ at element %lld: %g vs %g\n",
                       s.name, static_cast<long long>(c), x, y);
          return 1;
        }
      }
    }
  }
  std::printf("oneDNN implementation: %s (int8), %s (bf16)\n", dnnl_impl.c_str(),
              dnnl_bf16_impl.c_str());
  return 0;
}
