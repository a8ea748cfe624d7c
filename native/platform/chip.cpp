#include "platform/chip.h"

#include <cxxabi.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>

#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/ranges.h>

#include "common/logging.h"
#include "platform/cpu_affinity.h"
#include "platform/cross_core_sync.h"
#include "platform/wait.h"

namespace hp::platform {

std::string_view to_string(CoreType type) noexcept {
  return type == CoreType::kCube ? "cube" : "vector";
}

std::string_view to_string(LaunchMode mode) noexcept {
  switch (mode) {
    case LaunchMode::kCube:
      return "cube";
    case LaunchMode::kVector:
      return "vector";
    case LaunchMode::kMix:
      return "mix";
  }
  return "unknown";
}

// Everything one launch shares between its blocks.
class LaunchState {
 public:
  LaunchState(const LaunchConfig& config, const Kernel& kernel, int ratio, int resident_blocks,
              int total_blocks, double timeout_s, const WaitPolicy& policy)
      : config_(config),
        kernel_(kernel),
        ratio_(ratio),
        all_resident_(resident_blocks >= total_blocks),
        timeout_s_(timeout_s),
        policy_(policy),
        flags_(config.num_flags),
        barrier_(total_blocks) {}

  // Ready for the next launch of the same config_ and kernel_ objects (which the caller has
  // reassigned); no block of the previous launch may still run.
  // Writes only what changes: the blocks of the next launch then read lines that stayed in
  // their caches.
  void rearm(int ratio, int resident_blocks, int total_blocks, double timeout_s,
             const WaitPolicy& policy) {
    if (ratio_ != ratio) ratio_ = ratio;
    if (all_resident_ != (resident_blocks >= total_blocks))
      all_resident_ = resident_blocks >= total_blocks;
    if (timeout_s_ != timeout_s) timeout_s_ = timeout_s;
    if (policy_.spin != policy.spin || policy_.yield_for != policy.yield_for ||
        policy_.process_shared != policy.process_shared) {
      policy_ = policy;
    }
    flags_.reset(config_.num_flags);
    barrier_.reset(total_blocks);
    if (aborted_.load(std::memory_order_relaxed)) aborted_.store(false, std::memory_order_relaxed);
    // No lock: the blocks that could write it are done, and the caller synchronised with them.
    if (!first_error_.is_ok()) first_error_ = Status::ok();
  }

  void run_block(int block_idx, CoreType type, int sub_block_idx, int core_idx) {
    if (aborted()) return;  // the launch already failed: do not start more work
    BlockContext ctx(*this, block_idx, type, sub_block_idx, core_idx);
    Status status;
    try {
      status = kernel_(ctx);
      if (!status.is_ok()) status.with_context("kernel " + ctx.describe());
    } catch (const abi::__forced_unwind&) {
      throw;  // thread cancellation must unwind
    } catch (const std::exception& e) {
      status = Status(ErrorCode::kKernelFailed,
                      "kernel " + ctx.describe() + ": threw an exception: " + e.what());
    } catch (...) {
      status = Status(ErrorCode::kKernelFailed,
                      "kernel " + ctx.describe() + ": threw a non-std::exception");
    }
    if (!status.is_ok()) fail(std::move(status));
  }

  Status result() {
    std::lock_guard lock(error_mutex_);
    return first_error_;
  }

  bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }

 private:
  friend class BlockContext;

  // Records the first error and cancels every pending wait. Later errors are consequences
  // (ABORTED waits, or blocks racing to fail) and are dropped.
  void fail(Status status) {
    {
      std::lock_guard lock(error_mutex_);
      if (!first_error_.is_ok()) return;
      first_error_ = std::move(status);
    }
    aborted_.store(true, std::memory_order_seq_cst);
    flags_.wake_all();
    barrier_.break_all();
  }

  Clock::time_point deadline() const noexcept { return deadline_after(timeout_s_); }
  std::function<bool()> cancelled() const {
    return [this] { return aborted(); };
  }

  const LaunchConfig& config_;
  const Kernel& kernel_;
  int ratio_;
  bool all_resident_;
  double timeout_s_;
  WaitPolicy policy_;
  FlagTable flags_;
  Barrier barrier_;
  std::atomic<bool> aborted_{false};
  std::mutex error_mutex_;
  Status first_error_;
};

BlockContext::BlockContext(LaunchState& launch, int block_idx, CoreType type, int sub_block_idx,
                           int core_idx)
    : launch_(launch),
      block_idx_(block_idx),
      block_dim_(launch.config_.block_dim),
      core_type_(type),
      sub_block_idx_(sub_block_idx),
      sub_block_dim_(
          launch.config_.mode == LaunchMode::kMix && type == CoreType::kVector ? launch.ratio_ : 1),
      core_idx_(core_idx) {}

std::string BlockContext::describe() const {
  if (sub_block_dim_ > 1) {
    return fmt::format("block {} ({}, sub-block {} of {}, core {})", block_idx_,
                       to_string(core_type_), sub_block_idx_, sub_block_dim_, core_idx_);
  }
  return fmt::format("block {} ({}, core {})", block_idx_, to_string(core_type_), core_idx_);
}

Status BlockContext::set_flag(int id, std::uint32_t delta) {
  HP_ENSURE(id >= 0 && id < launch_.flags_.size(), ErrorCode::kOutOfRange,
            "set_flag({}): flag ids are [0, {}) for this launch (LaunchConfig::num_flags)", id,
            launch_.flags_.size());
  HP_ENSURE(launch_.flags_.add(id, delta), ErrorCode::kOutOfRange,
            "set_flag({}, {}): the flag's 32-bit counter wrapped (it was at {}); counters must "
            "stay below 2^32 within a launch",
            id, delta, launch_.flags_.value(id) - delta);
  return Status::ok();
}

Status BlockContext::wait_flag(int id, std::uint32_t target) {
  HP_ENSURE(id >= 0 && id < launch_.flags_.size(), ErrorCode::kOutOfRange,
            "wait_flag({}): flag ids are [0, {}) for this launch (LaunchConfig::num_flags)", id,
            launch_.flags_.size());
  std::uint32_t last = 0;
  switch (launch_.flags_.wait_at_least(id, target, launch_.deadline(), launch_.policy_,
                                       launch_.cancelled(), &last)) {
    case WaitResult::kReady:
      return Status::ok();
    case WaitResult::kCancelled:
      return Status::error(ErrorCode::kAborted,
                           "wait_flag(flag {} >= {}) abandoned: another block failed", id, target);
    case WaitResult::kTimedOut:
      break;
  }
  return Status::error(
      ErrorCode::kTimeout,
      "wait_flag(flag {} >= {}) timed out after {} s with the flag at {}: no block "
      "set it far enough (HP_WAIT_TIMEOUT_S sets the deadline)",
      id, target, launch_.timeout_s_, last);
}

bool BlockContext::cancelled() const noexcept { return launch_.aborted(); }

std::uint32_t BlockContext::flag_value(int id) const {
  return id >= 0 && id < launch_.flags_.size() ? launch_.flags_.value(id) : 0;
}

Status BlockContext::sync_all() {
  HP_ENSURE(launch_.all_resident_, ErrorCode::kFailedPrecondition,
            "sync_all needs every block resident at once, but {} blocks of this {} launch run in "
            "waves; lower block_dim to the number of {} cores",
            launch_.barrier_.parties(), to_string(launch_.config_.mode),
            to_string(launch_.config_.mode));
  int arrived = 0;
  switch (launch_.barrier_.arrive_and_wait(launch_.deadline(), launch_.policy_, launch_.cancelled(),
                                           &arrived)) {
    case WaitResult::kReady:
      return Status::ok();
    case WaitResult::kCancelled:
      return Status::error(ErrorCode::kAborted,
                           "sync_all abandoned: another block failed or an earlier sync_all of "
                           "this launch timed out");
    case WaitResult::kTimedOut:
      break;
  }
  return Status::error(ErrorCode::kTimeout,
                       "sync_all timed out after {} s: {} of {} blocks arrived (HP_WAIT_TIMEOUT_S "
                       "sets the deadline)",
                       launch_.timeout_s_, arrived, launch_.barrier_.parties());
}

namespace {
// The chip whose core runs on this thread (null on other threads): a kernel that launches on
// its own chip would wait for itself.
thread_local const void* this_thread_core_of = nullptr;

// Takes the thread objects of a chip destroyed in a fork child, whose threads are the parent's:
// joining them would wait forever, destroying a joinable std::thread ends the process, and
// detaching a thread the process does not have is undefined (ThreadSanitizer's runtime stops
// the process). So they are kept where nothing destroys them, reachable (not a leak).
void keep_unjoined(std::vector<std::thread>& threads) {
  static std::mutex mutex;
  static auto* const kept = new std::vector<std::thread>;
  std::lock_guard lock(mutex);
  for (std::thread& t : threads) kept->push_back(std::move(t));
}
}  // namespace

struct Chip::Impl {
  int num_cube = 0;
  int num_vector = 0;
  std::vector<int> cpus;
  bool pinned = false;
  double wait_timeout_s = 0;
  WaitPolicy policy;

  std::mutex launch_mutex;         // one launch at a time
  WaitWord launch_generation;      // bumped to start a launch (and to stop)
  WaitWord cores_done;             // cores finished with the current launch
  LaunchState* current = nullptr;  // valid while a launch runs
  const LaunchConfig* current_config = nullptr;
  bool stopping = false;
  std::vector<std::thread> threads;

  int num_cores() const { return num_cube + num_vector; }

  pid_t owner_pid = ::getpid();  // worker threads exist only in this process, not in fork children

  void core_loop(int core) {
    this_thread_core_of = this;
    std::uint32_t seen = 0;
    const WaitPolicy idle_policy{.spin = policy.spin, .yield_for = policy.yield_for};
    for (;;) {
      std::uint32_t generation = 0;
      wait_word(
          launch_generation, [seen](std::uint32_t v) { return v != seen; },
          Clock::time_point::max(), idle_policy, nullptr, &generation);
      seen = generation;
      if (stopping) return;
      run_blocks(core);
      add_and_wake(cores_done, 1, false);
    }
  }

  void run_blocks(int core) {
    const LaunchConfig& config = *current_config;
    const bool is_cube = core < num_cube;
    const int index = is_cube ? core : core - num_cube;  // index among cores of its kind
    const int ratio = num_vector / num_cube;
    switch (config.mode) {
      case LaunchMode::kMix:
        if (is_cube && index < config.block_dim) {
          current->run_block(index, CoreType::kCube, 0, core);
        } else if (!is_cube && index / ratio < config.block_dim) {
          current->run_block(index / ratio, CoreType::kVector, index % ratio, core);
        }
        break;
      case LaunchMode::kCube:
      case LaunchMode::kVector: {
        const bool mine = is_cube == (config.mode == LaunchMode::kCube);
        const int cores_of_kind = is_cube ? num_cube : num_vector;
        const CoreType type = is_cube ? CoreType::kCube : CoreType::kVector;
        for (std::int64_t block = index; mine && block < config.block_dim && !current->aborted();
             block += cores_of_kind) {
          current->run_block(int(block), type, 0, core);
        }
        break;
      }
    }
  }
};

Chip::Chip(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Chip::~Chip() noexcept {
  if (::getpid() != impl_->owner_pid) {
    // A fork child: the worker threads were not copied, so there is nothing to stop or join.
    keep_unjoined(impl_->threads);
    return;
  }
  {
    std::lock_guard lock(impl_->launch_mutex);
    impl_->stopping = true;
    add_and_wake(impl_->launch_generation, 1, false);
  }
  for (auto& t : impl_->threads) t.join();
}

Status Chip::create(const ChipConfig& config, std::unique_ptr<Chip>* chip) {
  HP_RETURN_IF_ERROR(settings_status());
  const Settings& env = settings();
  HP_ENSURE(config.num_cube >= 1 && config.num_cube <= 1024, ErrorCode::kInvalidArgument,
            "ChipConfig.num_cube={} must be in [1, 1024]", config.num_cube);
  HP_ENSURE(config.num_vector == config.num_cube || config.num_vector == 2 * config.num_cube,
            ErrorCode::kInvalidArgument,
            "ChipConfig.num_vector={} must be num_cube ({}, ratio 1:1) or 2*num_cube ({}, ratio "
            "1:2)",
            config.num_vector, config.num_cube, 2 * config.num_cube);

  auto impl = std::make_unique<Impl>();
  impl->num_cube = config.num_cube;
  impl->num_vector = config.num_vector;

  std::vector<int> allowed;
  HP_RETURN_IF_ERROR(allowed_cpus(&allowed));
  // In the order given, a repeated CPU dropped: core i is pinned to the i-th CPU, so a list in
  // cores-first order (hprun --bind, the activation) gives cores distinct physical cores first.
  for (int c : !config.cpus.empty()     ? config.cpus
               : !env.chip_cpus.empty() ? env.chip_cpus
                                        : allowed) {
    if (std::find(impl->cpus.begin(), impl->cpus.end(), c) == impl->cpus.end())
      impl->cpus.push_back(c);
  }
  for (int c : impl->cpus) {
    HP_ENSURE(std::binary_search(allowed.begin(), allowed.end(), c), ErrorCode::kInvalidArgument,
              "the chip's CPUs [{}] include CPU {}, which this process may not use (allowed: "
              "[{}]); fix HP_CHIP_CPUS or ChipConfig.cpus",
              fmt::join(impl->cpus, ","), c, fmt::join(allowed, ","));
  }

  const double timeout = config.wait_timeout_s.value_or(env.wait_timeout_s);
  HP_ENSURE(timeout > 0, ErrorCode::kInvalidArgument, "wait_timeout_s={} must be > 0", timeout);
  impl->wait_timeout_s = timeout;

  const std::int64_t spin = config.spin_before_block.value_or(env.spin_before_block);
  HP_ENSURE(spin >= 0, ErrorCode::kInvalidArgument, "spin_before_block={} must be >= 0", spin);
  const bool oversubscribed = impl->num_cores() > int(impl->cpus.size());
  // A spinning waiter burns the time slice of the thread it waits for when they share a CPU.
  // The host thread that calls launch() shares the chip's CPUs too, so spinning pays only when
  // every core and the host have a CPU of their own (bench/platform/bench_chip.cpp compares
  // spinning with yielding on an oversubscribed chip).
  const bool host_shares_cpus = impl->num_cores() + 1 > int(impl->cpus.size());
  impl->policy.spin = host_shares_cpus ? 0 : spin;
  impl->policy.yield_for = std::chrono::microseconds(env.yield_before_sleep_us);

  const PinMode pin = config.pin.value_or(env.pin_threads);
  impl->pinned = pin == PinMode::kOn || (pin == PinMode::kAuto && !oversubscribed);

  Impl* raw = impl.get();
  // Owns the threads started so far: on any failure below its destructor stops and joins them.
  std::unique_ptr<Chip> built(new Chip(std::move(impl)));
  for (int core = 0; core < raw->num_cores(); ++core) {
    try {
      raw->threads.emplace_back([raw, core] { raw->core_loop(core); });
    } catch (const std::system_error& e) {
      return Status::error(ErrorCode::kSystemError,
                           "cannot start chip core {} of {}: {}; ask for fewer cores", core,
                           raw->num_cores(), e.what());
    }
    // Pinned: one CPU per core. Otherwise every core may run on any of the chip's CPUs (and
    // not merely on those of the thread that created the chip).
    const int cpu = raw->cpus[core % raw->cpus.size()];
    Status pinned =
        raw->pinned ? set_thread_affinity(raw->threads.back().native_handle(), std::span(&cpu, 1))
                    : set_thread_affinity(raw->threads.back().native_handle(), raw->cpus);
    if (!pinned.is_ok())
      return pinned.with_context("setting the CPUs of chip core " + std::to_string(core));
  }
  HP_LOG_DEBUG("chip: {} cube + {} vector cores on CPUs [{}], {}{}", raw->num_cube, raw->num_vector,
               fmt::join(raw->cpus, ","), raw->pinned ? "pinned" : "not pinned",
               oversubscribed ? ", oversubscribed" : "");
  *chip = std::move(built);
  return Status::ok();
}

int Chip::num_cube() const noexcept { return impl_->num_cube; }
int Chip::num_vector() const noexcept { return impl_->num_vector; }
int Chip::ratio() const noexcept { return impl_->num_vector / impl_->num_cube; }
std::span<const int> Chip::cpus() const noexcept { return impl_->cpus; }
bool Chip::pinned() const noexcept { return impl_->pinned; }
bool Chip::oversubscribed() const noexcept { return impl_->num_cores() > int(impl_->cpus.size()); }

Status Chip::validate_launch(const LaunchConfig& config, const Kernel& kernel) const {
  HP_ENSURE(bool(kernel), ErrorCode::kInvalidArgument, "launch: the kernel is empty");
  return check_launch_config(config);
}

Status Chip::check_launch_config(const LaunchConfig& config) const {
  HP_ENSURE(config.block_dim >= 1, ErrorCode::kInvalidArgument, "launch: block_dim={} must be >= 1",
            config.block_dim);
  HP_ENSURE(config.num_flags >= 0 && config.num_flags <= (1 << 16), ErrorCode::kInvalidArgument,
            "launch: num_flags={} must be in [0, 65536]", config.num_flags);
  HP_ENSURE(config.mode != LaunchMode::kMix || config.block_dim <= impl_->num_cube,
            ErrorCode::kInvalidArgument,
            "launch: a mix launch runs each group's cube and vector blocks at once, so block_dim "
            "({}) must be <= num_cube ({})",
            config.block_dim, impl_->num_cube);
  const double timeout = config.wait_timeout_s.value_or(impl_->wait_timeout_s);
  HP_ENSURE(timeout > 0, ErrorCode::kInvalidArgument, "launch: wait_timeout_s={} must be > 0",
            timeout);
  return Status::ok();
}

Status Chip::launch(const LaunchConfig& config, const Kernel& kernel) {
  HP_ENSURE(this_thread_core_of != impl_.get(), ErrorCode::kFailedPrecondition,
            "launch called from a kernel block running on the same chip: it would wait for "
            "itself; launch from the host thread");
  HP_ENSURE(::getpid() == impl_->owner_pid, ErrorCode::kFailedPrecondition,
            "launch in a forked child process: the chip's cores stayed in the parent (pid {}); "
            "create a new chip in the child",
            impl_->owner_pid);
  HP_RETURN_IF_ERROR(validate_launch(config, kernel));
  const double timeout = config.wait_timeout_s.value_or(impl_->wait_timeout_s);

  int total = config.block_dim, resident = config.block_dim;
  switch (config.mode) {
    case LaunchMode::kMix:
      total = config.block_dim * (1 + ratio());
      resident = total;
      break;
    case LaunchMode::kCube:
      resident = std::min(total, impl_->num_cube);
      break;
    case LaunchMode::kVector:
      resident = std::min(total, impl_->num_vector);
      break;
  }

  std::lock_guard lock(impl_->launch_mutex);
  LaunchState state(config, kernel, ratio(), resident, total, timeout, impl_->policy);
  impl_->current = &state;
  impl_->current_config = &config;
  impl_->cores_done.value.store(0, std::memory_order_relaxed);
  add_and_wake(impl_->launch_generation, 1, false);
  const std::uint32_t cores = std::uint32_t(impl_->num_cores());
  std::uint32_t done = 0;
  // No deadline here: every wait inside a block has one, so the blocks always finish. The host
  // never spins: it may share a CPU with the cores it waits for.
  wait_word(
      impl_->cores_done, [cores](std::uint32_t v) { return v == cores; }, Clock::time_point::max(),
      WaitPolicy{.spin = 0, .yield_for = impl_->policy.yield_for}, nullptr, &done);
  impl_->current = nullptr;
  impl_->current_config = nullptr;
  return state.result();
}

}  // namespace hp::platform

namespace hp::platform {

struct BlockLaunch::Impl {
  Impl(const LaunchConfig& launch_config, Kernel launch_kernel, int chip_ratio, int resident,
       int total, double timeout_s, double chip_timeout, const WaitPolicy& chip_policy)
      : config(launch_config),
        kernel(std::move(launch_kernel)),
        ratio(chip_ratio),
        chip_timeout_s(chip_timeout),
        policy(chip_policy),
        state(config, kernel, ratio, resident, total, timeout_s, policy) {}
  void rearm(const LaunchConfig& next, int resident) {
    if (config.mode != next.mode) config.mode = next.mode;
    if (config.block_dim != next.block_dim) config.block_dim = next.block_dim;
    if (config.num_flags != next.num_flags) config.num_flags = next.num_flags;
    if (config.wait_timeout_s != next.wait_timeout_s) config.wait_timeout_s = next.wait_timeout_s;
    const int total =
        config.mode == LaunchMode::kMix ? config.block_dim * (1 + ratio) : config.block_dim;
    state.rearm(ratio, resident, total, config.wait_timeout_s.value_or(chip_timeout_s), policy);
  }
  LaunchConfig config;  // state refers to config and kernel: declared before it
  Kernel kernel;
  const int ratio;
  const double chip_timeout_s;
  const WaitPolicy policy;
  LaunchState state;
};

BlockLaunch::BlockLaunch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BlockLaunch::~BlockLaunch() noexcept = default;

void BlockLaunch::rearm(const LaunchConfig& config, int resident_blocks) {
  impl_->rearm(config, resident_blocks);
}

void BlockLaunch::run_block(int block_idx, CoreType type, int sub_block_idx, int core_idx) {
  impl_->state.run_block(block_idx, type, sub_block_idx, core_idx);
}

bool BlockLaunch::failed() const noexcept { return impl_->state.aborted(); }

Status BlockLaunch::result() const { return impl_->state.result(); }

Status Chip::prepare_block_launch(const LaunchConfig& config, Kernel kernel, int resident_blocks,
                                  std::unique_ptr<BlockLaunch>* launch) const {
  HP_RETURN_IF_ERROR(validate_launch(config, kernel));
  const int total =
      config.mode == LaunchMode::kMix ? config.block_dim * (1 + ratio()) : config.block_dim;
  HP_ENSURE(resident_blocks >= 1 && resident_blocks <= total, ErrorCode::kInvalidArgument,
            "prepare_block_launch: resident_blocks={} must be in [1, {}] (the launch's blocks)",
            resident_blocks, total);
  const double timeout = config.wait_timeout_s.value_or(impl_->wait_timeout_s);
  if (*launch) {
    (*launch)->impl_->kernel = std::move(kernel);
    (*launch)->rearm(config, resident_blocks);
    return Status::ok();
  }
  launch->reset(new BlockLaunch(
      std::make_unique<BlockLaunch::Impl>(config, std::move(kernel), ratio(), resident_blocks,
                                          total, timeout, impl_->wait_timeout_s, impl_->policy)));
  return Status::ok();
}

}  // namespace hp::platform
