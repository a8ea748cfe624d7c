// The inputs of the MoE communication tests: every rank's tokens and routing made from (seed,
// rank), so any rank computes what any other sends without communicating.
#ifndef HYPER_PARALLEL_TESTS_MOE_ROUTING_INPUTS_H_
#define HYPER_PARALLEL_TESTS_MOE_ROUTING_INPUTS_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "moe/buffer.h"
#include "shmem/shmem.h"

namespace hp::moe::testing {

enum class Routing { kUniform, kAllToExpert0, kSomeRanksEmpty };

struct Inputs {
  std::int64_t tokens = 0;
  std::vector<float> x;              // [T, H], small dyadic values: sums below are exact
  std::vector<std::int64_t> idx;     // [T, K]
  std::vector<float> weights;        // [T, K], dyadic, summing to 1 over a token's valid slots
  std::vector<std::uint8_t> active;  // [T]
};

struct Case {
  std::int64_t hidden = 64, tokens = 24, experts = 8, topk = 4;
  Routing routing = Routing::kUniform;
  bool masked = false;
  std::uint32_t seed = 1;
  int vector_cores = 0;  // > 0: dispatch and combine split their work over a chip's vector cores
  double capacity_factor = 0.0;  // BufferConfig's
  // BufferConfig::zero_copy_combine: combine reads the expert rows in place
  bool zero_copy = false;
  DispatchPath path = DispatchPath::kAuto;  // BufferConfig::dispatch_path
};

inline Inputs make_inputs(const Case& c, int rank, int ranks) {
  Inputs in;
  std::mt19937 rng(c.seed * 7919u + std::uint32_t(rank));
  // T differs by rank
  in.tokens = c.routing == Routing::kSomeRanksEmpty && rank % 2 == 1 ? 0 : c.tokens + rank;
  in.x.resize(std::size_t(in.tokens * c.hidden));
  for (auto& v : in.x) v = float(int(rng() % 129) - 64) / 8.0f;
  in.idx.assign(std::size_t(in.tokens * c.topk), -1);
  in.weights.assign(std::size_t(in.tokens * c.topk), 0.0f);
  in.active.assign(std::size_t(in.tokens), 1);
  static const float kDyadic[4] = {0.5f, 0.25f, 0.125f, 0.125f};
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    std::vector<std::int64_t> chosen;
    if (c.routing == Routing::kAllToExpert0) {
      chosen.push_back(0);
    } else {
      while (std::int64_t(chosen.size()) < c.topk) {
        // -1 sometimes
        const std::int64_t e = std::int64_t(rng() % std::uint32_t(c.experts + 1)) - 1;
        if (e >= 0 && std::find(chosen.begin(), chosen.end(), e) != chosen.end()) continue;
        chosen.push_back(e);
      }
    }
    float left = 1.0f;
    std::int64_t last = -1;
    for (std::size_t k = 0; k < chosen.size(); ++k) {
      in.idx[std::size_t(t * c.topk) + k] = chosen[k];
      if (chosen[k] < 0) continue;
      in.weights[std::size_t(t * c.topk) + k] = kDyadic[k % 4];
      left -= kDyadic[k % 4];
      last = std::int64_t(k);
    }
    if (last >= 0) in.weights[std::size_t(t * c.topk + last)] += left;  // sum exactly 1
    if (c.masked && t % 5 == 2) in.active[std::size_t(t)] = 0;
  }
  (void)ranks;
  return in;
}

// Whether every rank maps every other rank's heap (false on the mpi transport).
inline bool all_mapped() {
  void* probe = nullptr;
  if (!hp::shmem::malloc(64, &probe).is_ok()) return false;
  int mapped = 1;
  for (int pe = 0; pe < hp::shmem::n_pes(); ++pe) mapped &= hp::shmem::ptr(probe, pe) != nullptr;
  *static_cast<int*>(probe) = mapped;
  void* all = nullptr;
  (void)hp::shmem::calloc(std::size_t(hp::shmem::n_pes()), sizeof(int), &all);
  (void)hp::shmem::fcollect(hp::shmem::kTeamWorld, all, probe, sizeof(int));
  for (int pe = 0; pe < hp::shmem::n_pes(); ++pe) mapped &= static_cast<int*>(all)[pe];
  (void)hp::shmem::free(all);
  (void)hp::shmem::free(probe);
  return mapped != 0;
}

// A buffer for case c (lossless, fp32), on every rank.
inline Status make_case_buffer(const Case& c, CommKind comm, std::unique_ptr<Buffer>* buffer) {
  return Buffer::create({.hidden = c.hidden,
                         .max_tokens_per_rank = c.tokens + hp::shmem::n_pes(),
                         .num_experts = c.experts,
                         .topk = c.topk,
                         .comm = comm},
                        buffer);
}

// Views of a rank's fp32 inputs as dispatch arguments.
inline DispatchArgs input_args(const Inputs& in, const Case& c) {
  return {.x = TensorView(const_cast<float*>(in.x.data()), DType::kFP32, {in.tokens, c.hidden}),
          .topk_idx = TensorView(const_cast<std::int64_t*>(in.idx.data()), DType::kInt64,
                                 {in.tokens, c.topk}),
          .topk_weights =
              TensorView(const_cast<float*>(in.weights.data()), DType::kFP32, {in.tokens, c.topk})};
}

// The small batch of the error tests: 4 tokens of H = 16, top-2 of 2 x R experts, all on
// experts 0-3 (ranks 0 and 1).
struct SmallBatch {
  std::vector<float> x = std::vector<float>(4 * 16, 1.0f), w = std::vector<float>(8, 0.5f);
  std::vector<std::int64_t> idx = {0, 1, 1, 2, 0, 3, 1, 0};

  // The buffer such batches fit: H = 16, up to 8 tokens, top-2 of 2 experts per rank.
  static BufferConfig config(CommKind comm) {
    return {.hidden = 16,
            .max_tokens_per_rank = 8,
            .num_experts = 2 * hp::shmem::n_pes(),
            .topk = 2,
            .comm = comm};
  }

  DispatchArgs args() {
    return {.x = TensorView(x.data(), DType::kFP32, {4, 16}),
            .topk_idx = TensorView(idx.data(), DType::kInt64, {4, 2}),
            .topk_weights = TensorView(w.data(), DType::kFP32, {4, 2})};
  }
};

}  // namespace hp::moe::testing

#endif  // HYPER_PARALLEL_TESTS_MOE_ROUTING_INPUTS_H_
