#include "moe/workspace_plan.h"

#include <algorithm>
#include <limits>

#include "kernels/tiles.h"

namespace hp::moe {
namespace {

constexpr std::int64_t kLimit = std::int64_t(1) << 62;

using hp::kernels::round_up;

// a x b ... with an error past kLimit (sizes stay far below int64 overflow).
Status product(std::initializer_list<std::int64_t> factors, std::int64_t* out) {
  __int128 p = 1;
  for (std::int64_t f : factors) {
    p *= f;
    if (p > kLimit) {
      return Status::error(
          ErrorCode::kInvalidArgument,
          "the MoE workspace would exceed 2^62 bytes: lower tokens, hidden or max_recv_rows");
    }
  }
  *out = std::int64_t(p);
  return Status::ok();
}

// The bytes of each region, before placement.
struct Sizes {
  std::int64_t share_x1 = 0, x1 = 0, share_x1_scale = 0, x1_scale = 0, share_swiglu = 0, swiglu = 0;
  std::int64_t share_x2 = 0, x2 = 0, share_x2_scale = 0, x2_scale = 0, swap = 0, y2 = 0;
  std::int64_t group_list = 0, expand_idx = 0, ep_send_count = 0;
};

Status sizes_of(const MoeProblem& p, const MoeTiling& t, Sizes* s) {
  const std::int64_t m = t.max_recv_rows, sbs = t.shared_tokens, local = t.experts_per_rank;
  const std::int64_t gmm1 = 2 * p.intermediate, share_gmm1 = 2 * p.shared_intermediate;
  HP_RETURN_IF_ERROR(product({sbs, p.hidden}, &s->share_x1));
  HP_RETURN_IF_ERROR(product({m, p.hidden}, &s->x1));
  HP_RETURN_IF_ERROR(product({sbs, 4}, &s->share_x1_scale));
  HP_RETURN_IF_ERROR(product({m, 4}, &s->x1_scale));
  HP_RETURN_IF_ERROR(product({sbs, share_gmm1, 4}, &s->share_swiglu));
  HP_RETURN_IF_ERROR(product({m, gmm1, 4}, &s->swiglu));
  HP_RETURN_IF_ERROR(product({sbs, p.shared_intermediate}, &s->share_x2));
  HP_RETURN_IF_ERROR(product({m, p.intermediate}, &s->x2));
  s->share_x2_scale = s->share_x1_scale;
  s->x2_scale = s->x1_scale;
  HP_RETURN_IF_ERROR(product({m, std::max(gmm1, p.hidden), 4}, &s->swap));
  if (local == 1) HP_RETURN_IF_ERROR(product({m, p.hidden, 2}, &s->y2));
  HP_RETURN_IF_ERROR(product({local, 8}, &s->group_list));
  HP_RETURN_IF_ERROR(product({p.tokens, p.topk, 4}, &s->expand_idx));
  HP_RETURN_IF_ERROR(product({p.ranks, local, 4}, &s->ep_send_count));
  return Status::ok();
}

// Places regions one after another, each at a kRegionAlign boundary.
class Cursor {
 public:
  explicit Cursor(std::int64_t start) : at_(start) {}
  std::int64_t take(std::int64_t bytes) {
    const std::int64_t here = at_;
    at_ = round_up(at_ + bytes, kRegionAlign);
    return here;
  }
  std::int64_t at() const { return at_; }

 private:
  std::int64_t at_;
};

std::int64_t place(const Sizes& s, bool reuse, WorkspaceOffsets* o) {
  Cursor c(0);
  if (!reuse) {
    o->share_x1_token = c.take(s.share_x1);
    o->x1_token = c.take(s.x1);
    o->share_x1_scale = c.take(s.share_x1_scale);
    o->x1_scale = c.take(s.x1_scale);
    o->share_swiglu = c.take(s.share_swiglu);
    o->swiglu = c.take(s.swiglu);
    o->share_x2_token = c.take(s.share_x2);
    o->x2_token = c.take(s.x2);
    o->share_x2_scale = c.take(s.share_x2_scale);
    o->x2_scale = c.take(s.x2_scale);
    o->swap_space = c.take(s.swap);
  } else {
    // x1 and x2 tokens (shared expert's first), scales, then swap over the SwiGLU outputs; the
    // routed part starts at a 64-byte boundary after the shared part.
    const std::int64_t tokens =
        c.take(std::max(round_up(s.share_x1, 64) + s.x1, round_up(s.share_x2, 64) + s.x2));
    o->share_x1_token = o->share_x2_token = tokens;
    o->x1_token = tokens + round_up(s.share_x1, 64);
    o->x2_token = tokens + round_up(s.share_x2, 64);
    const std::int64_t scales = c.take(round_up(s.share_x1_scale, 64) + s.x1_scale);
    o->share_x1_scale = o->share_x2_scale = scales;
    o->x1_scale = o->x2_scale = scales + round_up(s.share_x1_scale, 64);
    const std::int64_t swap = c.take(std::max(s.swap, round_up(s.share_swiglu, 64) + s.swiglu));
    o->swap_space = o->share_swiglu = swap;
    o->swiglu = swap + round_up(s.share_swiglu, 64);
  }
  o->y2_token = c.take(s.y2);
  o->group_list = c.take(s.group_list);
  o->expand_idx = c.take(s.expand_idx);
  o->ep_send_count = c.take(s.ep_send_count);
  o->reserved = c.take(kReservedBytes);
  return c.at();
}

Status check_problem(const MoeProblem& p) {
  auto field = [](const char* name, std::int64_t value, std::int64_t min) -> Status {
    HP_ENSURE(value >= min, ErrorCode::kInvalidArgument, "MoeProblem {} = {}: expected >= {}", name,
              value, min);
    return Status::ok();
  };
  HP_RETURN_IF_ERROR(field("tokens", p.tokens, 0));
  HP_RETURN_IF_ERROR(field("hidden", p.hidden, 1));
  HP_RETURN_IF_ERROR(field("intermediate", p.intermediate, 1));
  HP_RETURN_IF_ERROR(field("ranks", p.ranks, 1));
  HP_RETURN_IF_ERROR(field("experts", p.experts, 1));
  HP_RETURN_IF_ERROR(field("topk", p.topk, 1));
  HP_RETURN_IF_ERROR(field("max_recv_rows", p.max_recv_rows, 0));
  HP_RETURN_IF_ERROR(field("expert_alignment", p.expert_alignment, 1));
  HP_RETURN_IF_ERROR(field("shared_intermediate", p.shared_intermediate, 0));
  HP_RETURN_IF_ERROR(field("system_bytes", p.system_bytes, 0));
  HP_ENSURE(p.experts % p.ranks == 0, ErrorCode::kInvalidArgument,
            "MoeProblem experts = {}: expected a multiple of ranks = {}", p.experts, p.ranks);
  HP_ENSURE(p.topk <= p.experts, ErrorCode::kInvalidArgument,
            "MoeProblem topk = {}: more than experts = {}", p.topk, p.experts);
  HP_ENSURE(p.system_bytes <= kLimit, ErrorCode::kInvalidArgument,
            "MoeProblem system_bytes = {}: too large", p.system_bytes);
  return Status::ok();
}

}  // namespace

Status plan_moe(const MoeProblem& p, MoeTiling* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "plan_moe: out is null");
  HP_RETURN_IF_ERROR(check_problem(p));
  MoeTiling t;
  t.experts_per_rank = p.experts / p.ranks;
  const bool shared = p.shared_intermediate > 0;
  t.exec_flags = (t.experts_per_rank > 1 ? kExecDeepFuse : 0u) |
                 (p.tensor_list ? kExecTensorList : 0u) |
                 (p.x_active_mask ? kExecXActiveMask : 0u) | (shared ? kExecSharedExpert : 0u) |
                 (p.smooth_quant ? kExecSmoothQuant : 0u);
  t.path = shared ? MoePath::kShared : t.experts_per_rank > 1 ? MoePath::kDeep : MoePath::kNonDeep;
  t.vector_per_cube = t.path == MoePath::kNonDeep ? 1 : 2;
  t.shared_tokens = shared ? p.tokens : 0;
  // Lossless: every rank's tokens to this rank, each to at most min(K, E_local) of its experts,
  // plus each expert's alignment padding.
  std::int64_t lossless = 0;
  HP_RETURN_IF_ERROR(product({p.ranks, p.tokens, std::min(p.topk, t.experts_per_rank)}, &lossless));
  lossless += t.experts_per_rank * (p.expert_alignment - 1);
  t.max_recv_rows = p.max_recv_rows == 0 ? lossless : std::min(p.max_recv_rows, lossless);
  Sizes sizes;
  HP_RETURN_IF_ERROR(sizes_of(p, t, &sizes));
  WorkspaceOffsets separate;
  const std::int64_t separate_bytes = place(sizes, false, &separate);
  const std::int64_t user = p.reuse ? place(sizes, true, &t.offsets) : separate_bytes;
  if (!p.reuse) t.offsets = separate;
  HP_ENSURE(user <= kLimit - p.system_bytes, ErrorCode::kInvalidArgument,
            "the MoE workspace would exceed 2^62 bytes: lower tokens, hidden or max_recv_rows");
  // Offsets are from the workspace start: the system part comes first.
  for (std::int64_t* o :
       {&t.offsets.share_x1_token, &t.offsets.x1_token, &t.offsets.share_x1_scale,
        &t.offsets.x1_scale, &t.offsets.share_swiglu, &t.offsets.swiglu, &t.offsets.share_x2_token,
        &t.offsets.x2_token, &t.offsets.share_x2_scale, &t.offsets.x2_scale, &t.offsets.swap_space,
        &t.offsets.y2_token, &t.offsets.group_list, &t.offsets.expand_idx, &t.offsets.ep_send_count,
        &t.offsets.reserved}) {
    *o += round_up(p.system_bytes, kRegionAlign);
  }
  t.user_bytes = user;
  t.total_bytes = round_up(p.system_bytes, kRegionAlign) + user;
  t.saved_bytes = separate_bytes - user;
  *out = t;
  return Status::ok();
}

std::vector<WorkspaceRegion> workspace_regions(const MoeProblem& p, const MoeTiling& t) {
  Sizes s;
  if (!sizes_of(p, t, &s).is_ok()) return {};
  const WorkspaceOffsets& o = t.offsets;
  // Phases: 0 dispatch, 1 GMM1 + SwiGLU, 2 requantisation, 3 GMM2, 4 combine.
  return {
      {"shareX1Token", o.share_x1_token, s.share_x1, 0, 1},
      {"x1Token", o.x1_token, s.x1, 0, 1},
      {"shareX1Scale", o.share_x1_scale, s.share_x1_scale, 0, 1},
      {"x1Scale", o.x1_scale, s.x1_scale, 0, 1},
      {"shareSwiglu", o.share_swiglu, s.share_swiglu, 1, 2},
      {"swiglu", o.swiglu, s.swiglu, 1, 2},
      {"shareX2Token", o.share_x2_token, s.share_x2, 2, 3},
      {"x2Token", o.x2_token, s.x2, 2, 3},
      {"shareX2Scale", o.share_x2_scale, s.share_x2_scale, 2, 3},
      {"x2Scale", o.x2_scale, s.x2_scale, 2, 3},
      {"swapSpace", o.swap_space, s.swap, 3, 3},
      {"y2Token", o.y2_token, s.y2, 3, 4},
      {"groupList", o.group_list, s.group_list, 0, 3},
      {"expandIdx", o.expand_idx, s.expand_idx, 0, 4},
      {"epSendCount", o.ep_send_count, s.ep_send_count, 0, 4},
      {"reserved", o.reserved, kReservedBytes, 0, 4},
  };
}

}  // namespace hp::moe
