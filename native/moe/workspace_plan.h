// The fused MoE layer's tiling and workspace plan (docs/moe.md; the region names:
// docs/design.md): a pure function from the problem to the execution path and the workspace
// regions, in the upstream layout and with its reuse mode.
//
// Regions, in order (sizes in bytes; bs = this rank's tokens, m = max_recv_rows, the rows a
// rank's experts can receive; sbs = shared-expert tokens, 0 without one; gmm1 = 2 x I):
//   shareX1 / x1 token   int8 GMM1 inputs: sbs x H, m x H
//   shareX1 / x1 scale   fp32 per-token scales: sbs, m
//   shareSwiglu / swiglu GMM1 outputs (fp32): sbs x gmm1, m x gmm1
//   shareX2 / x2 token   int8 GMM2 inputs: sbs x I, m x I
//   shareX2 / x2 scale   fp32: sbs, m
//   swap                 cube -> vector exchange of GMM2 (int32/fp32): m x max(gmm1, H)
//   y2                   GMM2 output of the non-deep path (bf16): m x H when E_local == 1
//   groupList            int64 prefix sums of the local experts' rows: E_local
//   expandIdx            int32 remote token index of each (token, k): bs x K
//   epSendCount          int32 rows per (rank, local expert): R x E_local
//   reserved             256 KiB
// Without reuse every region has its own space (each rounded up to kRegionAlign). With reuse
// (ENABLE_REUSE_MEMORY upstream) regions never live at the same time share: shareX1/x1 with
// shareX2/x2 tokens (x1 is dead once GMM1 has run), their scales likewise, and shareSwiglu/
// swiglu with swap (GMM2's exchange starts after the SwiGLU outputs were quantised into x2).
// Phases, for the live ranges: 0 dispatch, 1 GMM1 + SwiGLU, 2 requantisation, 3 GMM2,
// 4 combine. The total is the system bytes (the caller's kernel scratch) + the user regions.
#ifndef HYPER_PARALLEL_MOE_WORKSPACE_PLAN_H_
#define HYPER_PARALLEL_MOE_WORKSPACE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp::moe {

// ExecFlags bits: what a plan runs.
inline constexpr std::uint32_t kExecDeepFuse = 1u << 0;
inline constexpr std::uint32_t kExecTensorList = 1u << 1;
inline constexpr std::uint32_t kExecXActiveMask = 1u << 2;
inline constexpr std::uint32_t kExecSharedExpert = 1u << 3;
inline constexpr std::uint32_t kExecSmoothQuant = 1u << 4;

inline constexpr std::int64_t kRegionAlign = 512;
inline constexpr std::int64_t kReservedBytes = 256 << 10;

struct MoeProblem {
  std::int64_t tokens = 0;               // bs: this rank's tokens (max over calls)
  std::int64_t hidden = 0;               // H
  std::int64_t intermediate = 0;         // I (GMM1 has N = 2I: gate and up halves)
  std::int64_t topk = 0;                 // K
  std::int64_t experts = 0;              // E (a multiple of ranks)
  std::int64_t ranks = 0;                // R
  std::int64_t max_recv_rows = 0;        // rows a rank's experts may receive; 0: lossless
  std::int64_t expert_alignment = 1;     // each expert's rows padded to this
  std::int64_t shared_intermediate = 0;  // the shared expert's I; 0: none
  bool tensor_list = false;              // weights as per-expert tensors
  bool x_active_mask = false;
  bool smooth_quant = false;
  bool reuse = true;  // ENABLE_REUSE_MEMORY
  // scratch the kernels need, placed before the user regions
  std::int64_t system_bytes = 0;
};

enum class MoePath : std::int32_t { kNonDeep = 0, kDeep = 1, kShared = 2 };

struct WorkspaceOffsets {  // bytes from the workspace start
  std::int64_t share_x1_token = 0, x1_token = 0, share_x1_scale = 0, x1_scale = 0;
  std::int64_t share_swiglu = 0, swiglu = 0;
  std::int64_t share_x2_token = 0, x2_token = 0, share_x2_scale = 0, x2_scale = 0;
  std::int64_t swap_space = 0, y2_token = 0, group_list = 0, expand_idx = 0, ep_send_count = 0;
  std::int64_t reserved = 0;
};

struct MoeTiling {
  std::uint32_t exec_flags = 0;
  MoePath path = MoePath::kNonDeep;
  int vector_per_cube = 1;  // 1 (non-deep) or 2 (deep fuse, shared expert)
  std::int64_t experts_per_rank = 0;
  std::int64_t max_recv_rows = 0;
  std::int64_t shared_tokens = 0;
  WorkspaceOffsets offsets;
  std::int64_t user_bytes = 0;   // reserved + 256 KiB
  std::int64_t total_bytes = 0;  // system + user
  std::int64_t saved_bytes = 0;  // reuse: what sharing saves against separate regions
};

// One region of a plan: where it is, how big, and the phases it is live in.
struct WorkspaceRegion {
  std::string name;
  std::int64_t offset = 0, bytes = 0;
  int first_phase = 0, last_phase = 0;
};

// INVALID_ARGUMENT names the field that is out of range.
HP_API Status plan_moe(const MoeProblem& problem, MoeTiling* out);
// The regions of a plan (problem: the one it was planned from), for checks and diagnostics.
HP_API std::vector<WorkspaceRegion> workspace_regions(const MoeProblem& problem,
                                                      const MoeTiling& tiling);

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_WORKSPACE_PLAN_H_
