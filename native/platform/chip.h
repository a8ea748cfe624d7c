// The chip: a set of worker threads ("cores") with roles, running SPMD kernels.
//
// A chip has num_cube cube cores (GEMM tiles) and num_vector vector cores (quantisation,
// epilogues, communication), in the ratio 1:1 or 1:2 (docs/platform.md). Each core is one
// thread, created once and reused by every launch.
//
// launch(config, kernel) runs `kernel` once per block:
//   kCube    block_dim blocks on the cube cores   (block i on cube core i % num_cube)
//   kVector  block_dim blocks on the vector cores (block i on vector core i % num_vector)
//   kMix     block_dim groups; group g is one cube block and `ratio` vector blocks that all
//            run at once (cube core g, vector cores g*ratio ... g*ratio+ratio-1), so a group
//            can hand tiles between its cube and vector blocks with flags. Needs
//            block_dim <= num_cube.
// When block_dim exceeds the cores of a kind, blocks run in waves; then blocks are not all
// resident at once and sync_all() refuses (FAILED_PRECONDITION) rather than deadlock.
//
// Failure: the first block that returns an error (or throws) fails the launch; every other
// block's pending wait is cancelled (ABORTED) and blocks not yet started are skipped. launch()
// returns that first error, with the block named. Every wait has a deadline; a kernel that
// computes forever without waiting is its own hang (it can poll BlockContext::cancelled()).
// launch() refuses (FAILED_PRECONDITION) when called from one of the chip's own blocks or in a
// forked child process, where the cores do not exist.
#ifndef HYPER_PARALLEL_PLATFORM_CHIP_H_
#define HYPER_PARALLEL_PLATFORM_CHIP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/api.h"
#include "common/settings.h"
#include "common/status.h"

namespace hp::platform {

enum class CoreType : std::uint8_t { kCube, kVector };
enum class LaunchMode : std::uint8_t { kCube, kVector, kMix };

HP_API std::string_view to_string(CoreType type) noexcept;
HP_API std::string_view to_string(LaunchMode mode) noexcept;

struct ChipConfig {
  int num_cube = 1;
  int num_vector = 2;  // num_cube (1:1) or 2 * num_cube (1:2)
  // in pinning order; empty: HP_CHIP_CPUS, else the process's CPUs
  std::vector<int> cpus;
  std::optional<PinMode> pin;                     // empty: HP_PIN_THREADS
  std::optional<double> wait_timeout_s;           // empty: HP_WAIT_TIMEOUT_S
  std::optional<std::int64_t> spin_before_block;  // empty: HP_SPIN_BEFORE_BLOCK
};

struct LaunchConfig {
  LaunchMode mode = LaunchMode::kMix;
  int block_dim = 1;
  int num_flags = 64;                    // flag counters available to the kernel, ids [0, n)
  std::optional<double> wait_timeout_s;  // empty: the chip's
};

class LaunchState;

// What a running block knows about itself, and its cross-core synchronization.
class HP_API BlockContext {
 public:
  int block_idx() const noexcept { return block_idx_; }  // the group index in kMix
  int block_dim() const noexcept { return block_dim_; }
  CoreType core_type() const noexcept { return core_type_; }
  // kMix vector blocks: 0 .. sub_block_dim()-1 within the group; otherwise 0.
  int sub_block_idx() const noexcept { return sub_block_idx_; }
  int sub_block_dim() const noexcept { return sub_block_dim_; }
  int core_idx() const noexcept { return core_idx_; }  // cube cores first, then vector cores

  // Adds `delta` to flag `id` (release). OUT_OF_RANGE for a bad id.
  Status set_flag(int id, std::uint32_t delta = 1);
  // Waits until flag `id` >= target (acquire). TIMEOUT past the deadline, ABORTED when
  // another block failed, OUT_OF_RANGE for a bad id.
  Status wait_flag(int id, std::uint32_t target);
  std::uint32_t flag_value(int id) const;
  // Barrier of every block of the launch (all must be resident). A timed-out sync_all breaks
  // the barrier for the rest of the launch.
  Status sync_all();
  // True once another block failed: a long-running kernel polls this to stop early (waits in
  // the launch notice it by themselves).
  bool cancelled() const noexcept;

  std::string describe() const;  // "block 3 (vector, sub-block 1 of 2, core 7)"

 private:
  friend class LaunchState;
  BlockContext(LaunchState& launch, int block_idx, CoreType type, int sub_block_idx, int core_idx);

  LaunchState& launch_;
  int block_idx_;
  int block_dim_;
  CoreType core_type_;
  int sub_block_idx_;
  int sub_block_dim_;
  int core_idx_;
};

using Kernel = std::function<Status(BlockContext&)>;

// One SPMD launch whose blocks the caller places on the chip's cores itself: a task runtime
// (native/runtime) runs several of them at once, each on the cores it reserved, from inside
// one long launch of its own. Same BlockContext, flags, sync_all, failure and cancellation
// semantics as Chip::launch; `resident_blocks` is how many of the blocks the caller runs at
// once (sync_all needs every block resident).
class HP_API BlockLaunch {
 public:
  ~BlockLaunch() noexcept;
  BlockLaunch(const BlockLaunch&) = delete;
  BlockLaunch& operator=(const BlockLaunch&) = delete;

  // Re-arms the launch for the next run of the same kernel with `config` (which must pass
  // Chip::check_launch_config for the chip that prepared it; none of its blocks may be running):
  // as prepare_block_launch re-arms, without replacing the kernel.
  void rearm(const LaunchConfig& config, int resident_blocks);

  // Runs one block on the calling thread. The first block that fails (error or exception)
  // fails the launch and cancels the other blocks' waits; blocks run after that are skipped.
  void run_block(int block_idx, CoreType type, int sub_block_idx, int core_idx);
  bool failed() const noexcept;
  Status result() const;  // the first block error, or OK

 private:
  friend class Chip;
  struct Impl;
  explicit BlockLaunch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class HP_API Chip {
 public:
  static Status create(const ChipConfig& config, std::unique_ptr<Chip>* chip);
  ~Chip() noexcept;
  Chip(const Chip&) = delete;
  Chip& operator=(const Chip&) = delete;

  int num_cube() const noexcept;
  int num_vector() const noexcept;
  int ratio() const noexcept;                  // vector cores per cube core: 1 or 2
  std::span<const int> cpus() const noexcept;  // the CPUs the chip's cores run on
  bool pinned() const noexcept;                // each core pinned to one CPU
  bool oversubscribed() const noexcept;        // more cores than CPUs

  // Runs the kernel SPMD and returns when every block has finished. Launches from several
  // threads are serialized.
  Status launch(const LaunchConfig& config, const Kernel& kernel);

  // A launch validated as launch() validates it, with this chip's ratio, wait policy and
  // deadline, whose blocks the caller runs (BlockLaunch::run_block). When *launch already holds
  // a launch (none of whose blocks is running), it is re-armed in place for the new kernel:
  // flags at 0, no failure, and no allocation unless it needs more flags than before (a task
  // runtime keeps one per task slot). A launch that fails validation is left as it was.
  Status prepare_block_launch(const LaunchConfig& config, Kernel kernel, int resident_blocks,
                              std::unique_ptr<BlockLaunch>* launch) const;
  // The checks launch() and prepare_block_launch() make of a config (INVALID_ARGUMENT), alone.
  Status check_launch_config(const LaunchConfig& config) const;

 private:
  struct Impl;
  explicit Chip(std::unique_ptr<Impl> impl);
  Status validate_launch(const LaunchConfig& config, const Kernel& kernel) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_CHIP_H_
