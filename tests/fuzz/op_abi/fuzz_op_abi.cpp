// Fuzz target: the C op ABI (hyper_parallel_op_api.h) on a one-PE job: every op's
// GetWorkspaceSize and run, the creates and destroys, with fuzzed shapes, strides, dtypes,
// ranks, expert ids, weights, flags, workspaces and executors, and null and misaligned pointers.
//
// The caller's side of the ABI is kept: a tensor's data covers every element its shape and
// strides address (the ABI cannot check that), unless the extent overflows, where the data is
// an inaccessible page (the op must refuse the tensor without touching it). Inputs whose tensors
// address more than kMaxElements elements are skipped (a loop over them is not a finding).
//
// Expected: every call returns OK or a status of kAllowed with a message, never INTERNAL,
// TIMEOUT, ABORTED (there is no other PE), KERNEL_FAILED or SYSTEM_ERROR; no sanitizer report;
// after a failed call the buffer and the layer still serve a valid call.
#include <sys/mman.h>
#include <unistd.h>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/bfloat16.h"
#include "fuzz_check.h"
#include "hyper_parallel_op_api.h"
#include "ops/op_tensor.h"
#include "shmem/shmem.h"

namespace {

using hp::ops::testing::tensor;

constexpr std::int64_t kH = 64, kI = 32, kE = 8, kK = 2, kT = 16;  // the buffer's and the layer's
constexpr std::int64_t kMaxElements = 1 << 20;
constexpr std::int64_t kMaxBytes = std::int64_t(1) << 40;  // beyond: the input is skipped
constexpr std::int64_t kMallocBytes = std::int64_t(64) << 20;

const hpStatus kAllowed[] = {HP_STATUS_INVALID_ARGUMENT,    HP_STATUS_OUT_OF_RANGE,
                             HP_STATUS_SHAPE_MISMATCH,      HP_STATUS_DTYPE_MISMATCH,
                             HP_STATUS_UNSUPPORTED,         HP_STATUS_OUT_OF_MEMORY,
                             HP_STATUS_FAILED_PRECONDITION, hpStatus(hp::ErrorCode::kMisaligned)};

struct Skip {};  // thrown to abandon an input the harness cannot honour

constexpr hpStatus kNotRun = -1;  // the input destroyed the executor instead of running it

void expect(hpStatus s, const char* call) {
  if (s == HP_STATUS_OK || s == kNotRun) return;
  for (hpStatus a : kAllowed) {
    if (s == a) {
      const char* message = hpGetLastErrorMessage();
      if (message == nullptr || *message == '\0') {
        hp::fuzz::fail(std::string(call) + ": an error without a message");
      }
      return;
    }
  }
  hp::fuzz::fail(std::string(call) + " returned " + std::to_string(s) + ": " +
                 hpGetLastErrorMessage());
}

void expect_ok(hpStatus s, const char* call) {
  if (s != HP_STATUS_OK) {
    hp::fuzz::fail(std::string(call) +
                   " failed after an earlier bad call: " + hpGetLastErrorMessage());
  }
}

std::size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case HP_DTYPE_INT8:
    case HP_DTYPE_UINT8:
      return 1;
    case HP_DTYPE_BF16:
      return 2;
    case HP_DTYPE_INT32:
    case HP_DTYPE_FP32:
      return 4;
    default:
      return 8;
  }
}

// The memory of one input's tensors and workspaces, freed when the input is done.
class Arena {
 public:
  ~Arena() {
    for (auto& [p, n] : maps_) munmap(p, n);
  }
  // `bytes` of zeroed memory; large ones reserved (MAP_NORESERVE), touched only where written.
  std::byte* alloc(std::int64_t bytes) {
    if (bytes <= kMallocBytes) {
      blocks_.emplace_back(new std::byte[std::size_t(std::max<std::int64_t>(bytes, 1))]());
      return blocks_.back().get();
    }
    void* p = mmap(nullptr, std::size_t(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Skip{};
    maps_.emplace_back(p, std::size_t(bytes));
    return static_cast<std::byte*>(p);
  }
  // A page nothing may read or write.
  static void* guard() {
    static void* page = mmap(nullptr, std::size_t(sysconf(_SC_PAGESIZE)), PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return page;
  }

 private:
  std::vector<std::unique_ptr<std::byte[]>> blocks_;
  std::vector<std::pair<void*, std::size_t>> maps_;
};

enum class Fill { kZero, kIds, kWeights, kValues, kInt8 };

// Tensors as a caller builds them: mostly what the op expects, sometimes not.
class Maker {
 public:
  Maker(FuzzedDataProvider& in, Arena& arena) : in_(in), arena_(arena) {}

  std::int64_t pick(std::int64_t usual) {
    switch (in_.ConsumeIntegralInRange<int>(0, 15)) {
      case 1:
        return 0;
      case 2:
        return -1;
      case 3:  // (wrapping: usual may be a picked extreme already)
        return std::int64_t(std::uint64_t(usual) + 1);
      case 4:
        return std::int64_t(std::uint64_t(usual) - 1);
      case 5:
        return std::numeric_limits<std::int64_t>::max();
      case 6:
        return std::int64_t(1) << in_.ConsumeIntegralInRange<int>(20, 62);
      case 7:
        return in_.ConsumeIntegral<std::int64_t>();
      default:
        return usual;
    }
  }

  // A tensor of `dtype` and `shape`, row-major, filled as `fill` says; a mutation byte may
  // change its dtype, rank, a dim, a stride or its data pointer.
  hpTensor make(int32_t dtype, std::vector<std::int64_t> shape, Fill fill) {
    const auto mutation = in_.ConsumeIntegral<std::uint8_t>();
    const bool mutate = (mutation & 7) == 0;
    if (mutate && (mutation & 0x08)) dtype = in_.ConsumeIntegralInRange<int32_t>(-2, 9);
    if (mutate && (mutation & 0x10)) {
      shape.resize(std::size_t(in_.ConsumeIntegralInRange<int>(0, 3)) + shape.size() / 2, 1);
    }
    if (mutate && (mutation & 0x20) && !shape.empty()) {
      auto& d = shape[in_.ConsumeIntegralInRange<std::size_t>(0, shape.size() - 1)];
      d = pick(d);
    }
    hpTensor t{};
    t.dtype = dtype;
    t.ndim = int32_t(shape.size());
    if (mutate && (mutation & 0x40)) t.ndim = in_.ConsumeIntegralInRange<int32_t>(-1, 9);
    const int dims = std::min<int>(int(shape.size()), HP_TENSOR_MAX_DIMS);
    std::int64_t stride = 1;
    for (int i = dims - 1; i >= 0; --i) {
      t.shape[i] = shape[std::size_t(i)];
      t.strides[i] = stride;
      if (__builtin_mul_overflow(stride, std::max<std::int64_t>(t.shape[i], 1), &stride)) {
        stride = std::numeric_limits<std::int64_t>::max();
      }
    }
    if (mutate && (mutation & 0x80) && dims > 0) {
      auto& s = t.strides[in_.ConsumeIntegralInRange<int>(0, dims - 1)];
      s = pick(s);
    }
    // The memory covers the dims the op will read: ndim's, not the vector's (a mutated ndim).
    place(&t, std::clamp<int>(t.ndim, 0, HP_TENSOR_MAX_DIMS), fill,
          mutate ? in_.ConsumeIntegralInRange<int>(0, 2) : 0);
    return t;
  }

  const hpTensor* maybe_null(const hpTensor& t, std::vector<hpTensor>& keep) {
    if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) return nullptr;
    keep.push_back(t);
    return &keep.back();
  }

  struct Workspace {
    void* data;
    std::uint64_t bytes;
  };
  // A workspace for an op that asked for `needed` bytes, as a caller might pass one: that size,
  // half, none or a null pointer; 64-byte aligned or not.
  Workspace workspace(std::uint64_t needed) {
    std::uint64_t bytes = needed;
    switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
      case 1:
        bytes = needed / 2;
        break;
      case 2:
        bytes = 0;
        break;
      case 3:
        return {nullptr, needed};
      default:
        break;
    }
    if (bytes > std::uint64_t(kMaxBytes)) throw Skip{};
    std::byte* p = arena_.alloc(std::int64_t(bytes) + 128);
    auto aligned = (reinterpret_cast<std::uintptr_t>(p) + 63) & ~std::uintptr_t(63);
    if (in_.ConsumeIntegralInRange<int>(0, 7) == 0) aligned += 8;
    return {reinterpret_cast<void*>(aligned), bytes};
  }

  FuzzedDataProvider& in() { return in_; }

 private:
  // Sets t->data: memory for every element shape and strides address (data mode 0), null (1)
  // or misaligned by one byte (2); an inaccessible page when the extent overflows.
  void place(hpTensor* t, int dims, Fill fill, int mode) {
    const std::size_t elem = dtype_bytes(t->dtype);
    std::int64_t last = 0, numel = 1;  // the offset of the last element, in elements
    bool overflow = false, empty = false;
    for (int i = 0; i < dims; ++i) {
      const std::int64_t d = t->shape[i], s = t->strides[i];
      if (d <= 0) {
        empty = true;
        continue;
      }
      std::int64_t term = 0;
      overflow |= __builtin_mul_overflow(d - 1, std::max<std::int64_t>(s, 0), &term) ||
                  __builtin_add_overflow(last, term, &last) ||
                  __builtin_mul_overflow(numel, d, &numel);
    }
    std::int64_t bytes = 0;
    overflow |= __builtin_add_overflow(last, 1, &bytes) ||
                __builtin_mul_overflow(bytes, std::int64_t(elem), &bytes);
    if (empty) bytes = 0, numel = 0;
    if (overflow) {
      t->data = Arena::guard();
      return;
    }
    if (numel > kMaxElements || bytes > kMaxBytes) throw Skip{};
    if (mode == 1) {
      t->data = nullptr;
      return;
    }
    std::byte* p = arena_.alloc(bytes + 1);
    if (mode == 2) ++p;
    t->data = p;
    if (numel == 0 || bytes > kMallocBytes) return;
    fill_values(t, dims, fill, p, bytes);
  }

  // The values: ids mostly in [-1, kE), weights in [0, 1] with the odd NaN, int8 weights.
  void fill_values(const hpTensor* t, int dims, Fill fill, std::byte* p, std::int64_t bytes) {
    const std::int64_t n = dims == 0 ? 1 : bytes / std::int64_t(dtype_bytes(t->dtype));
    for (std::int64_t i = 0; i < n; ++i) {
      switch (fill) {
        case Fill::kZero:
          break;
        case Fill::kIds: {
          // Mostly valid ids and -1 (no expert); sometimes one past the last, -2 or extremes.
          const auto b = in_.ConsumeIntegral<std::uint8_t>();
          std::int64_t v = b % (kE + 1) - 1;
          if (b >= 240) {
            const std::int64_t bad[] = {kE, -2, std::numeric_limits<std::int64_t>::min(),
                                        std::int64_t(1) << 30};
            v = bad[b % 4];
          }
          store(t->dtype, p, i, double(v), v);
          break;
        }
        case Fill::kWeights: {
          const auto b = in_.ConsumeIntegral<std::uint8_t>();
          const double v = b == 255   ? std::numeric_limits<double>::quiet_NaN()
                           : b == 254 ? std::numeric_limits<double>::infinity()
                                      : b / 253.0;
          store(t->dtype, p, i, v, b);
          break;
        }
        case Fill::kValues:
          store(t->dtype, p, i, double((i * 37) % 17) / 8.0 - 1.0, (i * 37) % 17);
          break;
        case Fill::kInt8:
          store(t->dtype, p, i, double(int(i * 29 % 255) - 127), int(i * 29 % 255) - 127);
          break;
      }
    }
  }

  // By memcpy: a misaligned tensor's elements are stored byte by byte.
  template <typename T>
  static void put(std::byte* p, std::int64_t i, T x) {
    std::memcpy(p + i * std::int64_t(sizeof(T)), &x, sizeof(T));
  }
  static void store(int32_t dtype, std::byte* p, std::int64_t i, double f, std::int64_t v) {
    switch (dtype) {
      case HP_DTYPE_INT8:
      case HP_DTYPE_UINT8:
        return put(p, i, std::int8_t(v));
      case HP_DTYPE_INT32:
        return put(p, i, std::int32_t(v));
      case HP_DTYPE_FP32:
        return put(p, i, float(f));
      case HP_DTYPE_BF16:
        return put(p, i, hp::float_to_bf16(float(f)));
      default:
        return put(p, i, v);
    }
  }

  FuzzedDataProvider& in_;
  Arena& arena_;
};

struct Job {
  hpMoeBuffer* buffer = nullptr;
  hpHyperMegaMoeLayer* layer = nullptr;
  std::vector<std::int8_t> w1, w2;
  std::vector<float> s1, s2;
};

hpMoeBufferConfig buffer_config() {
  return {.hidden = kH,
          .max_tokens_per_rank = kT,
          .num_experts = kE,
          .topk = kK,
          .max_element_bytes = 4,
          .combine_element_bytes = 4,
          .comm = HP_MOE_COMM_WINDOW,
          .grow_on_overflow = 1,
          .capacity_factor = 0.0,
          .low_latency = 1};
}

hpHyperMegaMoeConfig layer_config() {
  return {.hidden = kH,
          .intermediate = kI,
          .num_experts = kE,
          .topk = kK,
          .max_tokens_per_rank = kT,
          .comm = HP_MOE_COMM_WINDOW,
          .backward = 1};
}

Job& job() {
  static Job j = [] {
    setenv("HP_SHMEM_HEAP_SIZE", "64M", 0);
    if (!hp::shmem::init().is_ok()) hp::fuzz::fail("shmem init (one-PE job)");
    Job made;
    const hpMoeBufferConfig bc = buffer_config();
    expect_ok(hpMoeBufferCreate(&bc, &made.buffer), "hpMoeBufferCreate");
    made.w1.resize(std::size_t(kE * kH * 2 * kI));
    made.w2.resize(std::size_t(kE * kI * kH));
    for (std::size_t i = 0; i < made.w1.size(); ++i) made.w1[i] = std::int8_t(i * 7 % 255 - 127);
    for (std::size_t i = 0; i < made.w2.size(); ++i) made.w2[i] = std::int8_t(i * 11 % 255 - 127);
    made.s1.assign(std::size_t(kE * 2 * kI), 1.0f / 512);
    made.s2.assign(std::size_t(kE * kH), 1.0f / 256);
    const hpTensor w1 = tensor(made.w1.data(), HP_DTYPE_INT8, {kE, kH, 2 * kI}),
                   s1 = tensor(made.s1.data(), HP_DTYPE_FP32, {kE, 2 * kI}),
                   w2 = tensor(made.w2.data(), HP_DTYPE_INT8, {kE, kI, kH}),
                   s2 = tensor(made.s2.data(), HP_DTYPE_FP32, {kE, kH});
    const hpHyperMegaMoeConfig lc = layer_config();
    expect_ok(hpHyperMegaMoeCreate(&lc, &w1, &s1, &w2, &s2, nullptr, nullptr, nullptr, nullptr,
                                   &made.layer),
              "hpHyperMegaMoeCreate");
    return made;
  }();
  return j;
}

using RunFn = hpStatus (*)(void*, uint64_t, hpOpExecutor*);

// Runs an executor as the fuzz input says: with a workspace for what it asked, or destroys it.
hpStatus run(Maker& m, RunFn op, hpOpExecutor* exec, uint64_t needed) {
  if (m.in().ConsumeIntegralInRange<int>(0, 31) == 0) {
    hpOpExecutorDestroy(exec);
    return kNotRun;  // the caller stops as after an error
  }
  Maker::Workspace ws{};
  try {
    ws = m.workspace(needed);
  } catch (const Skip&) {
    hpOpExecutorDestroy(exec);
    throw;
  }
  return op(ws.data, ws.bytes, exec);
}

// One op through both phases: `get(&workspaceSize, &executor)` (its GetWorkspaceSize with the
// round's tensors), then the run. Whether both succeeded; every status is checked by expect().
template <typename Get>
bool both_phases(Maker& m, const std::string& op, Get get, RunFn run_op) {
  uint64_t bytes = 0;
  hpOpExecutor* exec = nullptr;
  hpStatus s = get(&bytes, &exec);
  expect(s, (op + "GetWorkspaceSize").c_str());
  if (s != HP_STATUS_OK) return false;
  s = run(m, run_op, exec, bytes);
  expect(s, op.c_str());
  return s == HP_STATUS_OK;
}

std::int64_t tokens(Maker& m) { return m.in().ConsumeIntegralInRange<std::int64_t>(0, kT + 1); }

// The routing inputs every dispatch takes: x, topkIdx, topkWeights and an optional mask.
struct Routing {
  std::vector<hpTensor> keep;
  hpTensor x, idx, w;
  const hpTensor* mask = nullptr;
  int32_t quant = HP_MOE_QUANT_NONE;
  int32_t x_dtype = HP_DTYPE_FP32;
  std::int64_t t = 0;

  explicit Routing(Maker& m) {
    keep.reserve(4);
    t = tokens(m);
    x_dtype = m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16;
    x = m.make(x_dtype, {t, kH}, Fill::kValues);
    idx = m.make(m.in().ConsumeBool() ? HP_DTYPE_INT64 : HP_DTYPE_INT32, {t, kK}, Fill::kIds);
    w = m.make(HP_DTYPE_FP32, {t, kK}, Fill::kWeights);
    if (m.in().ConsumeBool()) {
      hpTensor mt = m.make(HP_DTYPE_UINT8, {t}, Fill::kIds);
      keep.push_back(mt);
      mask = &keep.back();
    }
    quant = int32_t(m.pick(m.in().ConsumeBool() ? HP_MOE_QUANT_DYNAMIC_INT8 : HP_MOE_QUANT_NONE));
  }
};

bool dispatch_layout(Maker& m) {
  const std::int64_t t = tokens(m), ranks = m.pick(1), experts = m.pick(kE);
  const hpTensor idx = m.make(HP_DTYPE_INT64, {t, kK}, Fill::kIds);
  const hpTensor per_rank = m.make(HP_DTYPE_INT64, {1}, Fill::kZero),
                 per_expert = m.make(HP_DTYPE_INT64, {kE}, Fill::kZero),
                 in_rank = m.make(HP_DTYPE_UINT8, {t, 1}, Fill::kZero);
  both_phases(
      m, "hpDispatchLayout",
      [&](uint64_t* bytes, hpOpExecutor** exec) {
        return hpDispatchLayoutGetWorkspaceSize(&idx, experts, ranks, &per_rank, &per_expert,
                                                &in_rank, bytes, exec);
      },
      hpDispatchLayout);
  return false;  // a local op: the buffer and layer are not involved
}

// notify -> dispatch -> combine, each with the fuzzed tensors, stopping at the first error.
bool normal_round(Maker& m, Job& j) {
  Routing r(m);
  const std::int64_t alignment = m.pick(m.in().ConsumeBool() ? 1 : 4);
  const hpTensor per = m.make(HP_DTYPE_INT64, {kE}, Fill::kZero),
                 off = m.make(HP_DTYPE_INT64, {kE + 1}, Fill::kZero);
  if (!both_phases(
          m, "hpNotifyDispatch",
          [&](uint64_t* bytes, hpOpExecutor** exec) {
            return hpNotifyDispatchGetWorkspaceSize(j.buffer, &r.x, &r.idx, &r.w, r.mask, r.quant,
                                                    alignment, &per, &off, bytes, exec);
          },
          hpNotifyDispatch)) {
    return true;
  }
  // The rows the dispatch writes: what the notify returned (its offsets tensor was valid).
  const std::int64_t rows = static_cast<const std::int64_t*>(off.data)[kE];
  if (rows < 0 || rows > kT * kK * kE) hp::fuzz::fail("notify returned rows out of range");
  const bool quantised = r.quant == HP_MOE_QUANT_DYNAMIC_INT8;
  std::vector<hpTensor> keep;
  keep.reserve(8);
  const hpTensor recv_x = m.make(quantised ? HP_DTYPE_INT8 : r.x_dtype, {rows, kH}, Fill::kZero);
  const hpTensor* recv_scale =
      quantised ? m.maybe_null(m.make(HP_DTYPE_FP32, {rows}, Fill::kZero), keep) : nullptr;
  const hpTensor recv_w = m.make(HP_DTYPE_FP32, {rows}, Fill::kZero);
  const hpTensor* src = m.maybe_null(m.make(HP_DTYPE_INT32, {rows, 2}, Fill::kZero), keep);
  if (!both_phases(
          m, "hpMoeDispatchNormal",
          [&](uint64_t* bytes, hpOpExecutor** exec) {
            return hpMoeDispatchNormalGetWorkspaceSize(j.buffer, &r.x, &r.idx, &r.w, r.mask,
                                                       r.quant, alignment, &recv_x, recv_scale,
                                                       &recv_w, src, bytes, exec);
          },
          hpMoeDispatchNormal)) {
    return true;
  }
  const hpTensor out =
      m.make(m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16, {rows, kH}, Fill::kValues);
  const hpTensor* weights = m.maybe_null(m.make(HP_DTYPE_FP32, {rows}, Fill::kWeights), keep);
  const hpTensor y =
      m.make(m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16, {r.t, kH}, Fill::kZero);
  return !both_phases(
      m, "hpMoeCombineNormal",
      [&](uint64_t* bytes, hpOpExecutor** exec) {
        return hpMoeCombineNormalGetWorkspaceSize(j.buffer, &out, weights, &y, bytes, exec);
      },
      hpMoeCombineNormal);
}

bool low_latency_round(Maker& m, Job& j) {
  Routing r(m);
  const bool quantised = r.quant == HP_MOE_QUANT_DYNAMIC_INT8;
  const std::int64_t rows = kT;  // ranks x max_tokens_per_rank
  std::vector<hpTensor> keep;
  keep.reserve(8);
  const hpTensor recv_x =
      m.make(quantised ? HP_DTYPE_INT8 : r.x_dtype, {kE, rows, kH}, Fill::kZero);
  const hpTensor* recv_scale =
      quantised ? m.maybe_null(m.make(HP_DTYPE_FP32, {kE, rows}, Fill::kZero), keep) : nullptr;
  const hpTensor count = m.make(HP_DTYPE_INT64, {kE}, Fill::kZero);
  const hpTensor* range = m.maybe_null(m.make(HP_DTYPE_INT64, {kE, 1, 2}, Fill::kZero), keep);
  const hpTensor* src = m.maybe_null(m.make(HP_DTYPE_INT32, {kE, rows, 2}, Fill::kZero), keep);
  if (!both_phases(
          m, "hpMoeDispatchLowLatency",
          [&](uint64_t* bytes, hpOpExecutor** exec) {
            return hpMoeDispatchLowLatencyGetWorkspaceSize(j.buffer, &r.x, &r.idx, &r.w, r.mask,
                                                           r.quant, &recv_x, recv_scale, &count,
                                                           range, src, bytes, exec);
          },
          hpMoeDispatchLowLatency)) {
    return true;
  }
  const hpTensor out =
      m.make(m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16, {kE, rows, kH}, Fill::kValues);
  const hpTensor y =
      m.make(m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16, {r.t, kH}, Fill::kZero);
  return !both_phases(
      m, "hpMoeCombineLowLatency",
      [&](uint64_t* bytes, hpOpExecutor** exec) {
        return hpMoeCombineLowLatencyGetWorkspaceSize(j.buffer, &out, &r.w, &y, bytes, exec);
      },
      hpMoeCombineLowLatency);
}

// The layer's forward, then (sometimes) its backward on the same inputs.
bool layer_round(Maker& m, Job& j) {
  Routing r(m);
  const hpTensor y = m.make(HP_DTYPE_FP32, {r.t, kH}, Fill::kZero);
  if (!both_phases(
          m, "hpHyperMegaMoe",
          [&](uint64_t* bytes, hpOpExecutor** exec) {
            return hpHyperMegaMoeGetWorkspaceSize(j.layer, &r.x, &r.idx, &r.w, r.mask, &y, bytes,
                                                  exec);
          },
          hpHyperMegaMoe)) {
    return true;
  }
  if (!m.in().ConsumeBool()) return false;
  const int32_t grad_dtype = m.in().ConsumeBool() ? HP_DTYPE_FP32 : HP_DTYPE_BF16;
  const hpTensor dy = m.make(grad_dtype, {r.t, kH}, Fill::kValues),
                 dx = m.make(grad_dtype, {r.t, kH}, Fill::kZero),
                 dw = m.make(HP_DTYPE_FP32, {r.t, kK}, Fill::kZero),
                 dw1 = m.make(grad_dtype, {kE, kH, 2 * kI}, Fill::kZero),
                 dw2 = m.make(grad_dtype, {kE, kI, kH}, Fill::kZero);
  return !both_phases(
      m, "hpHyperMegaMoeGrad",
      [&](uint64_t* bytes, hpOpExecutor** exec) {
        return hpHyperMegaMoeGradGetWorkspaceSize(j.layer, &r.x, &r.idx, &r.w, r.mask, &dy, &dx,
                                                  &dw, &dw1, &dw2, nullptr, nullptr, bytes, exec);
      },
      hpHyperMegaMoeGrad);
}

bool create_buffer(Maker& m) {
  hpMoeBufferConfig c = buffer_config();
  c.hidden = m.pick(c.hidden);
  c.max_tokens_per_rank = m.pick(c.max_tokens_per_rank);
  c.num_experts = m.pick(c.num_experts);
  c.topk = m.pick(c.topk);
  c.max_element_bytes = m.pick(c.max_element_bytes);
  c.combine_element_bytes = m.pick(c.combine_element_bytes);
  c.comm = int32_t(m.pick(c.comm));
  c.grow_on_overflow = int32_t(m.pick(1));
  c.capacity_factor = m.in().ConsumeBool() ? 0.0 : m.in().ConsumeFloatingPoint<double>();
  c.low_latency = int32_t(m.pick(1));
  hpMoeBuffer* buffer = nullptr;
  const hpStatus s =
      hpMoeBufferCreate(m.in().ConsumeIntegralInRange<int>(0, 31) ? &c : nullptr, &buffer);
  expect(s, "hpMoeBufferCreate");
  if (s == HP_STATUS_OK) expect(hpMoeBufferDestroy(buffer), "hpMoeBufferDestroy");
  return false;
}

// A layer of a fuzzed (small) config with weights of (mostly) its shapes, run once. (The
// package holds the base variant of the layer family: the others are not linked here.)
bool create_layer(Maker& m) {
  hpHyperMegaMoeConfig c = layer_config();
  FuzzedDataProvider& in = m.in();
  const std::int64_t h = in.ConsumeIntegralInRange<std::int64_t>(1, 96),
                     i = in.ConsumeIntegralInRange<std::int64_t>(1, 48),
                     e = in.ConsumeIntegralInRange<std::int64_t>(1, 8),
                     si = in.ConsumeIntegralInRange<std::int64_t>(0, 2) * 16;
  c.hidden = m.pick(h);
  c.intermediate = m.pick(i);
  c.num_experts = m.pick(e);
  c.topk = m.pick(std::min<std::int64_t>(2, e));
  c.max_tokens_per_rank = m.pick(4);
  c.shared_intermediate = m.pick(si);
  c.backward = int32_t(m.pick(0));
  c.path = int32_t(m.pick(HP_MOE_PATH_AUTO));
  c.capacity_factor = in.ConsumeBool() ? 0.0 : in.ConsumeFloatingPoint<double>();
  c.no_growth = int32_t(m.pick(0));
  const Fill w8 = Fill::kInt8;
  std::vector<hpTensor> keep;
  keep.reserve(16);
  hpHyperMegaMoeWeights w{};
  w.w1 = m.maybe_null(m.make(HP_DTYPE_INT8, {e, h, 2 * i}, w8), keep);
  w.w1Scale = m.maybe_null(m.make(HP_DTYPE_FP32, {e, 2 * i}, Fill::kWeights), keep);
  w.w2 = m.maybe_null(m.make(HP_DTYPE_INT8, {e, i, h}, w8), keep);
  w.w2Scale = m.maybe_null(m.make(HP_DTYPE_FP32, {e, h}, Fill::kWeights), keep);
  if (si > 0) {
    w.sharedW1 = m.maybe_null(m.make(HP_DTYPE_INT8, {1, h, 2 * si}, w8), keep);
    w.sharedW1Scale = m.maybe_null(m.make(HP_DTYPE_FP32, {1, 2 * si}, Fill::kWeights), keep);
    w.sharedW2 = m.maybe_null(m.make(HP_DTYPE_INT8, {1, si, h}, w8), keep);
    w.sharedW2Scale = m.maybe_null(m.make(HP_DTYPE_FP32, {1, h}, Fill::kWeights), keep);
  }
  if (in.ConsumeBool()) w.smooth1 = m.maybe_null(m.make(HP_DTYPE_FP32, {h}, Fill::kWeights), keep);
  if (in.ConsumeBool()) {
    w.smooth2 = m.maybe_null(m.make(HP_DTYPE_FP32, {e, i}, Fill::kWeights), keep);
  }
  hpHyperMegaMoeLayer* layer = nullptr;
  hpStatus s = hpHyperMegaMoeCreateWithWeights(
      &c, in.ConsumeIntegralInRange<int>(0, 31) ? &w : nullptr, &layer);
  expect(s, "hpHyperMegaMoeCreateWithWeights");
  if (s != HP_STATUS_OK) return false;
  struct Destroy {  // also when a later tensor makes the input one the harness skips
    hpHyperMegaMoeLayer* layer;
    ~Destroy() { expect_ok(hpHyperMegaMoeDestroy(layer), "hpHyperMegaMoeDestroy"); }
  } destroy{layer};
  const std::int64_t t = in.ConsumeIntegralInRange<std::int64_t>(0, 5);
  const hpTensor x = m.make(HP_DTYPE_FP32, {t, h}, Fill::kValues),
                 idx = m.make(HP_DTYPE_INT64, {t, std::min<std::int64_t>(2, e)}, Fill::kIds),
                 tw = m.make(HP_DTYPE_FP32, {t, std::min<std::int64_t>(2, e)}, Fill::kWeights),
                 y = m.make(HP_DTYPE_FP32, {t, h}, Fill::kZero);
  both_phases(
      m, "hpHyperMegaMoe",
      [&](uint64_t* bytes, hpOpExecutor** exec) {
        return hpHyperMegaMoeGetWorkspaceSize(layer, &x, &idx, &tw, nullptr, &y, bytes, exec);
      },
      hpHyperMegaMoe);
  return false;
}

// A valid call on the shared buffer and layer: they still serve after whatever came before.
void still_usable(Job& j) {
  std::vector<float> x(std::size_t(2 * kH), 0.5f), w(std::size_t(2 * kK), 0.5f),
      y(std::size_t(2 * kH));
  std::vector<std::int64_t> idx = {0, 3, 5, 7}, per(static_cast<std::size_t>(kE)),
                            off(static_cast<std::size_t>(kE + 1));
  const hpTensor tx = tensor(x.data(), HP_DTYPE_FP32, {2, kH}),
                 ti = tensor(idx.data(), HP_DTYPE_INT64, {2, kK}),
                 tw = tensor(w.data(), HP_DTYPE_FP32, {2, kK}),
                 ty = tensor(y.data(), HP_DTYPE_FP32, {2, kH}),
                 tp = tensor(per.data(), HP_DTYPE_INT64, {kE}),
                 to = tensor(off.data(), HP_DTYPE_INT64, {kE + 1});
  uint64_t bytes = 0;
  hpOpExecutor* exec = nullptr;
  expect_ok(hpNotifyDispatchGetWorkspaceSize(j.buffer, &tx, &ti, &tw, nullptr, HP_MOE_QUANT_NONE, 1,
                                             &tp, &to, &bytes, &exec),
            "hpNotifyDispatchGetWorkspaceSize");
  expect_ok(hpNotifyDispatch(nullptr, 0, exec), "hpNotifyDispatch");
  expect_ok(hpHyperMegaMoeGetWorkspaceSize(j.layer, &tx, &ti, &tw, nullptr, &ty, &bytes, &exec),
            "hpHyperMegaMoeGetWorkspaceSize");
  std::vector<std::byte> storage(bytes + 64);
  void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                     ~std::uintptr_t(63));
  expect_ok(hpHyperMegaMoe(ws, bytes, exec), "hpHyperMegaMoe");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Job& j = job();
  FuzzedDataProvider in(data, size);
  Arena arena;
  Maker m(in, arena);
  bool failed = false;
  try {
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
        failed = dispatch_layout(m);
        break;
      case 1:
        failed = normal_round(m, j);
        break;
      case 2:
        failed = low_latency_round(m, j);
        break;
      case 3:
        failed = layer_round(m, j);
        break;
      case 4:
        failed = create_buffer(m);
        break;
      case 5:
        failed = create_layer(m);
        break;
      default:
        // An executor that is not one, and a run without one.
        expect(hpDispatchLayout(nullptr, 0, nullptr), "hpDispatchLayout(NULL executor)");
        expect(hpMoeBufferDestroy(nullptr), "hpMoeBufferDestroy(NULL)");
        expect(hpHyperMegaMoeDestroy(nullptr), "hpHyperMegaMoeDestroy(NULL)");
        break;
    }
  } catch (const Skip&) {
    return -1;  // not added to the corpus
  }
  if (failed) still_usable(j);
  return 0;
}
