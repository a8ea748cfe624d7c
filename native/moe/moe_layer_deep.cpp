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

using hp::platform::BlockContext;
using hp::platform::CoreType;
using hp::platform::LaunchMode;

bool is_sender(const BlockContext& b) {
  return b.core_type() == CoreType::kVector && b.block_idx() == 0 && b.sub_block_idx() == 0;
}

}  // namespace

// One deep forward call: its inputs, the plans and rows its launches share, and each stage's
// time.
struct MoeLayer::DeepForward {
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

  MoeLayer& layer;
  const DispatchArgs& args;
  const TensorView& y;
  std::uint8_t* ws;
  hp::platform::Chip& chip;
  const int cubes;
  // Flags after the cubes' own: the count exchange done, local experts ready, cubes past the
  // shared expert's GMM1, cubes past moving its rows to shareX2.
  const int kNotified = cubes, kExpertsReady = cubes + 1, kSharedGmm1 = cubes + 2,
            kSharedMoved = cubes + 3;
  const bool shared;
  const std::int64_t si, tokens, inter, hidden;
  const WorkspaceOffsets& at;
  // Dispatch and combine run inside the launches, on a vector block bound to this PE.
  const hp::shmem::PeBinding pe = hp::shmem::pe_binding();

  // The shared expert's GEMMs (its own tokens: they need no dispatch).
  hp::kernels::GroupedGemmPlan shared1, shared2;
  std::uint8_t* share_h;
  float* share_h_scale;
  std::int64_t shared_groups[2];
  bool run_shared = false;
  TileOrder shared_tiles;
  // GMM1 (planned by the sender in launch 1) and the rows it writes.
  hp::kernels::GroupedGemmPlan gmm1;
  std::vector<std::int64_t> tile_expert;
  std::int64_t rows = 0;
  std::uint8_t* h;
  float* h_scale = nullptr;
  double dispatch_s = 0, gmm1_s = 0, shared_s = 0, wall1 = 0, copy_s = 0, gmm2_s = 0, send_s = 0,
         wall2 = 0, end_s = 0;

  DeepForward(MoeLayer& l, const DispatchArgs& a, const TensorView& out, std::uint8_t* w)
      : layer(l),
        args(a),
        y(out),
        ws(w),
        chip(*l.config_.chip),
        cubes(chip.num_cube()),
        shared(l.config_.shared_intermediate > 0),
        si(l.config_.shared_intermediate),
        tokens(a.x.ndim() == 2 ? a.x.dim(0) : 0),
        inter(l.config_.intermediate),
        hidden(l.config_.hidden),
        at(l.plan_.offsets),
        share_h(w + at.share_swiglu),
        share_h_scale(reinterpret_cast<float*>(share_h + ((tokens * si + 63) & ~std::int64_t(63)))),
        shared_groups{0, tokens},
        h(w + at.swiglu) {}

  Status plan_shared();
  Status launch1(const Status& verdict);
  Status sender1(BlockContext& b, const Status& verdict);
  Status cube1(BlockContext& b);
  void move_rows();
  Status launch2();
};

// x quantised into shareX1 here; in launch 1 the cube cores run its GMM1, move its rows to
// shareX2 (which shares shareX1's bytes: after every cube's GMM1) and run its GMM2 while the
// dispatch waits for the other ranks; its rows join the combine's reduce (ProcessCombine).
Status MoeLayer::DeepForward::plan_shared() {
  const TensorView offsets(shared_groups, DType::kInt64, {2});
  const TensorView share_x1(ws + at.share_x1_token, DType::kInt8, {tokens, hidden});
  const TensorView share_x1_scale(ws + at.share_x1_scale, DType::kFP32, {tokens});
  HP_RETURN_IF_ERROR(
      hp::kernels::quantize(*layer.table_, args.x, share_x1, share_x1_scale, layer.smooth1()));
  HP_RETURN_IF_ERROR(hp::kernels::plan_grouped_gemm(
      *layer.table_,
      {.a = share_x1,
       .a_scale = share_x1_scale,
       .offsets = offsets,
       .weights = layer.shared_w1_.header(),
       .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
       .out = TensorView(share_h, DType::kInt8, {tokens, si}),
       .out_scale = TensorView(share_h_scale, DType::kFP32, {tokens}),
       .smooth = layer.shared_smooth2()},
      cubes, &shared1));
  layer.shared_out_.resize(std::size_t(tokens * hidden));
  return hp::kernels::plan_grouped_gemm(
      *layer.table_,
      {.a = TensorView(ws + at.share_x2_token, DType::kInt8, {tokens, si}),
       .a_scale = TensorView(ws + at.share_x2_scale, DType::kFP32, {tokens}),
       .offsets = offsets,
       .weights = layer.shared_w2_.header(),
       .epilogue = hp::kernels::Epilogue::kDequant,
       .out = TensorView(layer.shared_out_.data(), DType::kFP32, {tokens, hidden})},
      cubes, &shared2);
}

// Launch 1: dispatch, GMM1 expert by expert as the rows arrive (and the shared expert).
Status MoeLayer::DeepForward::launch1(const Status& verdict) {
  run_shared = shared && verdict.is_ok();
  if (run_shared) shared_tiles = TileOrder(shared1);
  // each cube core grows its own
  layer.workspaces_.resize(std::max(layer.workspaces_.size(), std::size_t(cubes)));
  PhaseTimer wall(&layer, &wall1, std::nullopt);
  return chip.launch({.mode = LaunchMode::kMix, .block_dim = cubes, .num_flags = cubes + 4},
                     [&](BlockContext& b) -> Status {
                       if (is_sender(b)) return sender1(b, verdict);
                       if (b.core_type() == CoreType::kVector) return Status::ok();
                       return cube1(b);
                     });
}

// The count exchange, GMM1's plan (kNotified), then the rows expert by expert (kExpertsReady).
Status MoeLayer::DeepForward::sender1(BlockContext& b, const Status& verdict) {
  const hp::shmem::ThreadBinding bound(pe);
  const PhaseTimer span(&layer, &dispatch_s, CorePhase::kDispatch, b.core_idx());
  Buffer& buffer = *layer.buffer_;
  Handle& handle = layer.handle_;
  HP_RETURN_IF_ERROR(buffer.notify_dispatch(args, &handle, verdict));
  rows = handle.rows;
  HP_ENSURE(rows <= layer.plan_.max_recv_rows, ErrorCode::kInternal,
            "MoeLayer: {} rows past the plan's {}", rows, layer.plan_.max_recv_rows);
  const std::int64_t local = std::int64_t(handle.expert_offsets.size()) - 1;
  layer.recv_weights_.resize(std::size_t(rows));
  h_scale = reinterpret_cast<float*>(h + ((rows * inter + 63) & ~std::int64_t(63)));
  const TensorView x1(ws + at.x1_token, DType::kInt8, {rows, hidden});
  const TensorView x1_scale(ws + at.x1_scale, DType::kFP32, {rows});
  HP_RETURN_IF_ERROR(hp::kernels::plan_grouped_gemm(
      *layer.table_,
      {.a = x1,
       .a_scale = x1_scale,
       .offsets = TensorView(handle.expert_offsets.data(), DType::kInt64, {local + 1}),
       .weights = layer.w1_.header(),
       .epilogue = hp::kernels::Epilogue::kDequantSwigluQuant,
       .out = TensorView(h, DType::kInt8, {rows, inter}),
       .out_scale = TensorView(h_scale, DType::kFP32, {rows}),
       .smooth = layer.smooth2(),
       .preact = layer.kept_preact(rows)},
      cubes, &gmm1));
  tile_expert.clear();
  for (const hp::kernels::Tile& t : TileOrder(gmm1).tiles) tile_expert.push_back(t.expert);
  HP_RETURN_IF_ERROR(b.set_flag(kNotified));
  return buffer.dispatch_data(
      args, &handle,
      {.x = x1,
       .x_scale = x1_scale,
       .topk_weights = TensorView(layer.recv_weights_.data(), DType::kFP32, {rows})},
      [&](std::int64_t) { return b.set_flag(kExpertsReady); });
}

// A cube block: its share of the shared expert, then of GMM1's tiles as their experts arrive.
Status MoeLayer::DeepForward::cube1(BlockContext& b) {
  if (run_shared) {
    const PhaseTimer span(&layer, b.block_idx() == 0 ? &shared_s : nullptr,
                          CorePhase::kSharedExpert, b.core_idx());
    const auto [s_first, s_last] = shared1.worker_tiles(b.block_idx());
    shared1.call(s_first, s_last, layer.worker_workspace(b.block_idx(), shared1.workspace_bytes()));
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
    shared2.run(b.block_idx(), layer.worker_workspace(b.block_idx(), shared2.workspace_bytes()));
  }
  HP_RETURN_IF_ERROR(b.wait_flag(kNotified, 1));
  const auto [first, last] = gmm1.worker_tiles(b.block_idx());
  void* w = layer.worker_workspace(b.block_idx(), gmm1.workspace_bytes());
  double busy = 0;
  for (std::int64_t j = first; j < last; ++j) {
    HP_RETURN_IF_ERROR(b.wait_flag(kExpertsReady, std::uint32_t(tile_expert[std::size_t(j)] + 1)));
    const PhaseTimer span(&layer, &busy, CorePhase::kGmm1, b.core_idx());
    gmm1.call(j, j + 1, w);
  }
  if (b.block_idx() == 0) gmm1_s = busy;
  return Status::ok();
}

// Between the launches: x1's and h's rows kept (keep_activations), then the requantised rows to x2
// (which shares x1's bytes: GMM1 is done).
void MoeLayer::DeepForward::move_rows() {
  const PhaseTimer span(&layer, &copy_s, CorePhase::kGmm1);
  layer.keep_rows(ws + at.x1_token, reinterpret_cast<const float*>(ws + at.x1_scale), h, h_scale,
                  layer.handle_.expert_offsets);
  std::memcpy(ws + at.x2_token, h, std::size_t(rows * inter));
  std::memcpy(ws + at.x2_scale, h_scale, std::size_t(rows) * sizeof(float));
}

// Launch 2: GMM2, its rows streamed back as its tiles complete; then the streamed combine ends
// on the calling thread.
Status MoeLayer::DeepForward::launch2() {
  Buffer& buffer = *layer.buffer_;
  Handle& handle = layer.handle_;
  auto* out = reinterpret_cast<float*>(ws + at.swap_space);
  const std::int64_t local = std::int64_t(handle.expert_offsets.size()) - 1;
  hp::kernels::GroupedGemmPlan gmm2;
  const Status planned = hp::kernels::plan_grouped_gemm(
      *layer.table_,
      {.a = TensorView(ws + at.x2_token, DType::kInt8, {rows, inter}),
       .a_scale = TensorView(ws + at.x2_scale, DType::kFP32, {rows}),
       .offsets = TensorView(handle.expert_offsets.data(), DType::kInt64, {local + 1}),
       .weights = layer.w2_.header(),
       .epilogue = hp::kernels::Epilogue::kDequantScale,
       .out = TensorView(out, DType::kFP32, {rows, hidden}),
       .row_factor = TensorView(layer.recv_weights_.data(), DType::kFP32, {rows})},
      cubes, &gmm2);
  HP_RETURN_IF_ERROR(
      buffer.combine_stream_begin(handle, TensorView(out, DType::kFP32, {rows, hidden}), y));
  TileOrder order;
  if (planned.is_ok()) order = TileOrder(gmm2);
  PhaseTimer wall(&layer, &wall2, std::nullopt);
  const auto sender = [&](BlockContext& b) -> Status {
    const hp::shmem::ThreadBinding bound(pe);
    for (std::size_t j = 0; j < order.tiles.size(); ++j) {
      HP_RETURN_IF_ERROR(b.wait_flag(order.owner[j], order.place[j]));
      const hp::kernels::Tile& t = order.tiles[j];
      if (t.col_end != hidden) continue;
      const PhaseTimer span(&layer, &send_s, CorePhase::kCombine, b.core_idx());
      HP_RETURN_IF_ERROR(buffer.combine_stream_rows(t.row_begin, t.row_end));
    }
    return Status::ok();
  };
  const auto cube = [&](BlockContext& b) -> Status {
    const auto [first, last] = gmm2.worker_tiles(b.block_idx());
    void* w = layer.worker_workspace(b.block_idx(), gmm2.workspace_bytes());
    PhaseTimer total(&layer, b.block_idx() == 0 ? &gmm2_s : nullptr, std::nullopt);
    for (std::int64_t j = first; j < last; ++j) {
      {
        const PhaseTimer span(&layer, nullptr, CorePhase::kGmm2, b.core_idx());
        gmm2.call(j, j + 1, w);
      }
      HP_RETURN_IF_ERROR(b.set_flag(b.block_idx()));
    }
    return Status::ok();
  };
  const Status launched =
      !planned.is_ok()
          ? planned
          : chip.launch({.mode = LaunchMode::kMix, .block_dim = cubes, .num_flags = cubes},
                        [&](BlockContext& b) -> Status {
                          if (is_sender(b)) return sender(b);
                          if (b.core_type() == CoreType::kVector) return Status::ok();
                          return cube(b);
                        });
  wall.stop();
  buffer.use_chip(layer.config_.chip);  // the reduce splits over the vector cores
  const PhaseTimer end(&layer, &end_s, CorePhase::kCombine);
  return buffer.combine_stream_end(
      launched,
      shared ? TensorView(layer.shared_out_.data(), DType::kFP32, {tokens, hidden}) : TensorView());
}

Status MoeLayer::forward_deep(const DispatchArgs& args, const TensorView& y, std::uint8_t* ws,
                              const Status& workspace_ok) {
  DeepForward call(*this, args, y, ws);
  // Dispatch and combine run inside the launches, on a vector block: not on the chip again.
  buffer_->use_chip(nullptr);
  struct RestoreChip {
    Buffer* buffer;
    hp::platform::Chip* chip;
    ~RestoreChip() { buffer->use_chip(chip); }
  } restore{buffer_.get(), config_.chip};
  const Status verdict = !call.shared || !workspace_ok.is_ok() ? workspace_ok : call.plan_shared();
  HP_RETURN_IF_ERROR(call.launch1(verdict));
  rows_ = call.rows;
  call.move_rows();
  HP_RETURN_IF_ERROR(call.launch2());
  // Each stage's own time; overlap is how much of it ran at once with another's.
  times_.dispatch += call.dispatch_s;
  times_.gmm1 += call.gmm1_s + call.copy_s + call.shared_s;
  times_.gmm2 += call.gmm2_s;
  times_.combine += call.send_s + call.end_s;
  times_.overlap = std::max(0.0, call.dispatch_s + call.gmm1_s + call.shared_s - call.wall1) +
                   std::max(0.0, call.gmm2_s + call.send_s - call.wall2);
  return Status::ok();
}

}  // namespace hp::moe
