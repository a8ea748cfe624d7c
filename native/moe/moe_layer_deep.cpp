// MoeLayer's deep-fuse forward (LayerPath::kDeep, moe_layer.h): two mixed launches of the chip.
//
// Launch 1, GMM1 under the dispatch. Vector block 0 of group 0 runs the count exchange, plans
// GMM1 and sets flag kNotified, then writes the received rows expert by expert, adding 1 to
// flag kExpertsReady as each local expert's rows are complete. Each cube block runs its share
// of GMM1's tiles (numbered expert by expert) and waits, before a tile of expert e, for
// kExpertsReady > e.
// Launch 2, the combine under GMM2. Cube block c runs its share of GMM2's tiles in order and
// adds 1 to flag c after each. Vector block 0 of group 0 walks the tiles in order, waits for
// each (flag owner >= its place in the owner's share), and streams the rows of a row block
// back to their tokens' ranks once its last column tile is done. Then, on the calling thread,
// the streamed combine ends: every rank's rows are in, and y is reduced on the vector cores.
// The other vector blocks have no work (the deep path's chip ratio is 1:2). The calling
// thread (the PE) waits in the launch meanwhile, so the sender's shmem calls never overlap
// the PE's.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/ops.h"
#include "moe/moe_layer.h"
#include "shmem/shmem.h"

namespace hp::moe {
namespace {

using Clock = std::chrono::steady_clock;
using hp::platform::BlockContext;
using hp::platform::CoreType;
using hp::platform::LaunchMode;

bool is_sender(const BlockContext& b) {
  return b.core_type() == CoreType::kVector && b.block_idx() == 0 && b.sub_block_idx() == 0;
}

// The tiles of a plan: each one's expert and rows, whether it is its row block's last column
// tile, and which worker (cube block) runs it, at which place in its share.
struct TileOrder {
  std::vector<hp::kernels::Tile> tiles;
  std::vector<int> owner;
  std::vector<std::uint32_t> place;  // 1-based: the owner's flag reaches it when the tile is done

  TileOrder() = default;
  template <typename Plan>
  explicit TileOrder(const Plan& plan) {
    const hp::kernels::TileSpace space = hp::kernels::gemm_tile_space(plan.args(), plan.grid());
    space.for_each(0, plan.tiles(), [&](const hp::kernels::Tile& t) { tiles.push_back(t); });
    owner.resize(tiles.size());
    place.resize(tiles.size());
    for (int w = 0; w < plan.workers(); ++w) {
      const auto [first, last] = plan.worker_tiles(w);
      for (std::int64_t j = first; j < last; ++j) {
        owner[std::size_t(j)] = w;
        place[std::size_t(j)] = std::uint32_t(j - first + 1);
      }
    }
  }
};

}  // namespace

Status MoeLayer::forward_deep(const DispatchArgs& args, const TensorView& y, std::uint8_t* ws,
                              const Status& workspace_ok) {
  hp::platform::Chip& chip = *config_.chip;
  const int cubes = chip.num_cube();
  // Flags after the cubes' own: the count exchange done, local experts ready, cubes past the
  // shared expert's GMM1, cubes past moving its rows to shareX2.
  const int kNotified = cubes, kExpertsReady = cubes + 1, kSharedGmm1 = cubes + 2,
            kSharedMoved = cubes + 3;
  const bool shared = config_.shared_intermediate > 0;
  const std::int64_t si = config_.shared_intermediate,
                     tokens = args.x.ndim() == 2 ? args.x.dim(0) : 0;
  const std::int64_t inter = config_.intermediate, hidden = config_.hidden;
  const WorkspaceOffsets& at = plan_.offsets;
  // Dispatch and combine run inside the launches, on a vector block (bound to this PE): not on
  // the chip again.
  const hp::shmem::PeBinding pe = hp::shmem::pe_binding();
  buffer_->use_chip(nullptr);
  struct RestoreChip {
    Buffer* buffer;
    hp::platform::Chip* chip;
    ~RestoreChip() { buffer->use_chip(chip); }
  } restore{buffer_.get(), config_.chip};

  // ---- the shared expert's GEMMs (its own tokens: they need no dispatch) ----------------------
  // x quantised into shareX1 here; in launch 1 the cube cores run its GMM1, move its rows to
  // shareX2 (which shares shareX1's bytes: after every cube's GMM1) and run its GMM2 while the
  // dispatch waits for the other ranks; its rows join the combine's reduce (ProcessCombine).
  hp::kernels::GroupedGemmPlan shared1, shared2;
  std::uint8_t* share_h = ws + at.share_swiglu;
  auto* share_h_scale =
      reinterpret_cast<float*>(share_h + ((tokens * si + 63) & ~std::int64_t(63)));
  const std::int64_t shared_groups[2] = {0, tokens};
  const Status verdict = !shared || !workspace_ok.is_ok() ? workspace_ok : [&]() -> Status {
    const TensorView offsets(const_cast<std::int64_t*>(shared_groups), DType::kInt64, {2});
    const TensorView share_x1(ws + at.share_x1_token, DType::kInt8, {tokens, hidden});
    const TensorView share_x1_scale(ws + at.share_x1_scale, DType::kFP32, {tokens});
    HP_RETURN_IF_ERROR(hp::kernels::quantize(*table_, args.x, share_x1, share_x1_scale, smooth1()));
    HP_RETURN_IF_ERROR(hp::kernels::plan_grouped_gemm(
        *table_,
        {.a = share_x1,
         .a_scale = share_x1_scale,
         .offsets = offsets,
         .weights = shared_w1_.header(),
         .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
         .out = TensorView(share_h, DType::kInt8, {tokens, si}),
         .out_scale = TensorView(share_h_scale, DType::kFP32, {tokens}),
         .smooth = shared_smooth2()},
        cubes, &shared1));
    shared_out_.resize(std::size_t(tokens * hidden));
    return hp::kernels::plan_grouped_gemm(
        *table_,
        {.a = TensorView(ws + at.share_x2_token, DType::kInt8, {tokens, si}),
         .a_scale = TensorView(ws + at.share_x2_scale, DType::kFP32, {tokens}),
         .offsets = offsets,
         .weights = shared_w2_.header(),
         .epilogue = hp::kernels::Epilogue::kDequant,
         .out = TensorView(shared_out_.data(), DType::kFP32, {tokens, hidden})},
        cubes, &shared2);
  }();
  const bool run_shared = shared && verdict.is_ok();
  const TileOrder shared_tiles = run_shared ? TileOrder(shared1) : TileOrder();
  // each cube core grows its own
  workspaces_.resize(std::max(workspaces_.size(), std::size_t(cubes)));
  double shared_s = 0;

  // ---- launch 1: dispatch, GMM1 expert by expert as the rows arrive --------------------------
  hp::kernels::GroupedGemmPlan gmm1;
  std::vector<std::int64_t> tile_expert;
  std::int64_t rows = 0;
  std::uint8_t* h = ws + at.swiglu;
  float* h_scale = nullptr;
  double dispatch_s = 0, gmm1_s = 0;
  const auto start1 = Clock::now();
  HP_RETURN_IF_ERROR(chip.launch(
      {.mode = LaunchMode::kMix, .block_dim = cubes, .num_flags = cubes + 4},
      [&](BlockContext& b) -> Status {
        if (is_sender(b)) {
          const hp::shmem::ThreadBinding bound(pe);
          const auto t0 = Clock::now();
          HP_RETURN_IF_ERROR(buffer_->notify_dispatch(args, &handle_, verdict));
          rows = handle_.rows;
          HP_ENSURE(rows <= plan_.max_recv_rows, ErrorCode::kInternal,
                    "MoeLayer: {} rows past the plan's {}", rows, plan_.max_recv_rows);
          const std::int64_t local = std::int64_t(handle_.expert_offsets.size()) - 1;
          recv_weights_.resize(std::size_t(rows));
          h_scale = reinterpret_cast<float*>(h + ((rows * inter + 63) & ~std::int64_t(63)));
          const TensorView x1(ws + at.x1_token, DType::kInt8, {rows, hidden});
          const TensorView x1_scale(ws + at.x1_scale, DType::kFP32, {rows});
          HP_RETURN_IF_ERROR(hp::kernels::plan_grouped_gemm(
              *table_,
              {.a = x1,
               .a_scale = x1_scale,
               .offsets = TensorView(handle_.expert_offsets.data(), DType::kInt64, {local + 1}),
               .weights = w1_.header(),
               .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
               .out = TensorView(h, DType::kInt8, {rows, inter}),
               .out_scale = TensorView(h_scale, DType::kFP32, {rows}),
               .smooth = smooth2()},
              cubes, &gmm1));
          tile_expert.clear();
          for (const hp::kernels::Tile& t : TileOrder(gmm1).tiles) tile_expert.push_back(t.expert);
          HP_RETURN_IF_ERROR(b.set_flag(kNotified));
          HP_RETURN_IF_ERROR(buffer_->dispatch_data(
              args, &handle_,
              {.x = x1,
               .x_scale = x1_scale,
               .topk_weights = TensorView(recv_weights_.data(), DType::kFP32, {rows})},
              [&](std::int64_t) { return b.set_flag(kExpertsReady); }));
          dispatch_s = seconds_since(t0);
          add_span(b.core_idx(), CorePhase::kDispatch, t0);
          return Status::ok();
        }
        if (b.core_type() == CoreType::kVector) return Status::ok();
        if (run_shared) {
          const auto t0 = Clock::now();
          const auto [s_first, s_last] = shared1.worker_tiles(b.block_idx());
          shared1.call(s_first, s_last, worker_workspace(b.block_idx(), shared1.workspace_bytes()));
          HP_RETURN_IF_ERROR(b.set_flag(kSharedGmm1));
          HP_RETURN_IF_ERROR(b.wait_flag(kSharedGmm1, std::uint32_t(cubes)));
          for (std::int64_t j = s_first; j < s_last; ++j) {  // full-width tiles: whole rows
            const hp::kernels::Tile& t = shared_tiles.tiles[std::size_t(j)];
            std::memcpy(ws + at.share_x2_token + t.row_begin * si, share_h + t.row_begin * si,
                        std::size_t((t.row_end - t.row_begin) * si));
            std::memcpy(reinterpret_cast<float*>(ws + at.share_x2_scale) + t.row_begin,
                        share_h_scale + t.row_begin,
                        std::size_t(t.row_end - t.row_begin) * sizeof(float));
          }
          HP_RETURN_IF_ERROR(b.set_flag(kSharedMoved));
          HP_RETURN_IF_ERROR(b.wait_flag(kSharedMoved, std::uint32_t(cubes)));
          shared2.run(b.block_idx(), worker_workspace(b.block_idx(), shared2.workspace_bytes()));
          if (b.block_idx() == 0) shared_s = seconds_since(t0);
          add_span(b.core_idx(), CorePhase::kSharedExpert, t0);
        }
        HP_RETURN_IF_ERROR(b.wait_flag(kNotified, 1));
        const auto [first, last] = gmm1.worker_tiles(b.block_idx());
        void* w = worker_workspace(b.block_idx(), gmm1.workspace_bytes());
        double busy = 0;
        for (std::int64_t j = first; j < last; ++j) {
          HP_RETURN_IF_ERROR(
              b.wait_flag(kExpertsReady, std::uint32_t(tile_expert[std::size_t(j)] + 1)));
          const auto t0 = Clock::now();
          gmm1.call(j, j + 1, w);
          busy += seconds_since(t0);
          add_span(b.core_idx(), CorePhase::kGmm1, t0);
        }
        if (b.block_idx() == 0) gmm1_s = busy;
        return Status::ok();
      }));
  const double wall1 = seconds_since(start1);
  rows_ = rows;

  // ---- between: the requantised rows to x2 (which shares x1's bytes: GMM1 is done) --------
  const auto start_copy = Clock::now();
  std::memcpy(ws + at.x2_token, h, std::size_t(rows * inter));
  std::memcpy(ws + at.x2_scale, h_scale, std::size_t(rows) * sizeof(float));
  const double copy_s = seconds_since(start_copy);
  add_span(-1, CorePhase::kGmm1, start_copy);

  // ---- launch 2: GMM2, its rows streamed back as its tiles complete ----------------------------
  auto* out = reinterpret_cast<float*>(ws + at.swap_space);
  const std::int64_t local = std::int64_t(handle_.expert_offsets.size()) - 1;
  hp::kernels::GroupedGemmPlan gmm2;
  const Status planned = hp::kernels::plan_grouped_gemm(
      *table_,
      {.a = TensorView(ws + at.x2_token, DType::kInt8, {rows, inter}),
       .a_scale = TensorView(ws + at.x2_scale, DType::kFP32, {rows}),
       .offsets = TensorView(handle_.expert_offsets.data(), DType::kInt64, {local + 1}),
       .weights = w2_.header(),
       .epilogue = hp::kernels::Epilogue::kDequantScale,
       .out = TensorView(out, DType::kFP32, {rows, hidden}),
       .row_factor = TensorView(recv_weights_.data(), DType::kFP32, {rows})},
      cubes, &gmm2);
  HP_RETURN_IF_ERROR(
      buffer_->combine_stream_begin(handle_, TensorView(out, DType::kFP32, {rows, hidden}), y));
  TileOrder order;
  if (planned.is_ok()) order = TileOrder(gmm2);
  double gmm2_s = 0, send_s = 0;
  const auto start2 = Clock::now();
  const Status launched =
      !planned.is_ok()
          ? planned
          : chip.launch(
                {.mode = LaunchMode::kMix, .block_dim = cubes, .num_flags = cubes},
                [&](BlockContext& b) -> Status {
                  if (is_sender(b)) {
                    const hp::shmem::ThreadBinding bound(pe);
                    const std::int64_t cols = hidden;
                    for (std::size_t j = 0; j < order.tiles.size(); ++j) {
                      HP_RETURN_IF_ERROR(b.wait_flag(order.owner[j], order.place[j]));
                      const hp::kernels::Tile& t = order.tiles[j];
                      if (t.col_end != cols) continue;
                      const auto t0 = Clock::now();
                      HP_RETURN_IF_ERROR(buffer_->combine_stream_rows(t.row_begin, t.row_end));
                      send_s += seconds_since(t0);
                      add_span(b.core_idx(), CorePhase::kCombine, t0);
                    }
                    return Status::ok();
                  }
                  if (b.core_type() == CoreType::kVector) return Status::ok();
                  const auto [first, last] = gmm2.worker_tiles(b.block_idx());
                  void* w = worker_workspace(b.block_idx(), gmm2.workspace_bytes());
                  const auto t0 = Clock::now();
                  for (std::int64_t j = first; j < last; ++j) {
                    const auto tile_start = Clock::now();
                    gmm2.call(j, j + 1, w);
                    add_span(b.core_idx(), CorePhase::kGmm2, tile_start);
                    HP_RETURN_IF_ERROR(b.set_flag(b.block_idx()));
                  }
                  if (b.block_idx() == 0) gmm2_s = seconds_since(t0);
                  return Status::ok();
                });
  const double wall2 = seconds_since(start2);
  buffer_->use_chip(config_.chip);  // the reduce splits over the vector cores
  const auto start_end = Clock::now();
  HP_RETURN_IF_ERROR(buffer_->combine_stream_end(
      launched,
      shared ? TensorView(shared_out_.data(), DType::kFP32, {tokens, hidden}) : TensorView()));
  const double end_s = seconds_since(start_end);
  add_span(-1, CorePhase::kCombine, start_end);
  // Each stage's own time; overlap is how much of it ran at once with another's.
  times_.dispatch += dispatch_s;
  times_.gmm1 += gmm1_s + copy_s + shared_s;
  times_.gmm2 += gmm2_s;
  times_.combine += send_s + end_s;
  times_.overlap = std::max(0.0, dispatch_s + gmm1_s + shared_s - wall1) +
                   std::max(0.0, gmm2_s + send_s - wall2);
  return Status::ok();
}

}  // namespace hp::moe
