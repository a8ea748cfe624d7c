#include "runtime/node/node_worker.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/settings.h"
#include "platform/cpu_affinity.h"
#include "platform/cpu_placement.h"
#include "platform/cpu_topology.h"
#include "runtime/node/frames.h"
#include "runtime/node/node_diagnostics.h"
#include "runtime/node/node_worker_impl.h"
#include "runtime/replay.h"

namespace hp::runtime {

using node::FrameWriter;

namespace {

constexpr std::string_view kProxyNamespace = "hp.runtime.node.next_level";

// Each chip's CPUs: its share as hprun --bind gives ranks (the process's CPUs when the topology
// cannot be read).
std::vector<platform::RankPlacement> chip_placements(int chips) {
  platform::CpuTopology topology;
  if (platform::load_cpu_topology(&topology).is_ok()) return platform::place_ranks(topology, chips);
  std::vector<int> cpus;
  if (!platform::allowed_cpus(&cpus).is_ok() || cpus.empty()) cpus = {0};
  std::vector<platform::RankPlacement> out;
  out.resize(std::size_t(chips));
  for (int c = 0; c < chips; ++c) out[std::size_t(c)].cpus = {cpus[std::size_t(c) % cpus.size()]};
  return out;
}

}  // namespace

std::string describe_wait_status(int status) {
  if (status == kWaitStatusCollectedElsewhere) {
    return "ended, its exit status collected by someone else (does the process ignore SIGCHLD?)";
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("ended with wait status {:#x}", status);
}

std::array<std::uint64_t, kHiddenScalars> encode_next_level(const NextLevelShape& shape) {
  const double timeout =
      shape.config.wait_timeout_s.value_or(std::numeric_limits<double>::quiet_NaN());
  std::uint64_t timeout_bits = 0;
  std::memcpy(&timeout_bits, &timeout, sizeof(timeout));
  return {std::uint64_t(std::int64_t(shape.chip)),
          std::uint64_t(shape.config.mode) | std::uint64_t(shape.config.block_num) << 8 |
              std::uint64_t(shape.config.num_flags) << 40,
          timeout_bits};
}

NextLevelShape decode_next_level(std::span<const std::uint64_t, kHiddenScalars> bits) {
  NextLevelShape shape;
  shape.chip = int(std::int64_t(bits[0]));
  shape.config.mode = static_cast<platform::LaunchMode>(bits[1] & 0xff);
  shape.config.block_num = int((bits[1] >> 8) & 0xffffffff);
  shape.config.num_flags = int(bits[1] >> 40);
  double timeout = 0;
  std::memcpy(&timeout, &bits[2], sizeof(timeout));
  if (!std::isnan(timeout)) shape.config.wait_timeout_s = timeout;
  return shape;
}

// --- SymmetricTensor -------------------------------------------------------------------------

TensorView SymmetricTensor::on(int chip) const {
  return TensorView(worker->chip_heap(chip) + offset, dtype, shape);
}

std::size_t SymmetricTensor::bytes() const {
  std::size_t n = dtype_size(dtype);
  for (std::int64_t d : shape) n *= std::size_t(d);
  return n;
}

// --- NodeWorker: creation, callables, tensors -------------------------------------------------

NodeWorker::NodeWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NodeWorker::~NodeWorker() noexcept {
  if (Status s = close(); !s.is_ok()) HP_LOG_WARN("NodeWorker: {}", s.to_string());
}

int NodeWorker::chips() const noexcept { return impl_->config.chips; }

int NodeWorker::chip_pid(int chip) const noexcept {
  return chip >= 0 && std::size_t(chip) < impl_->pids.size() ? impl_->pids[std::size_t(chip)] : 0;
}

std::byte* NodeWorker::chip_heap(int chip) const noexcept {
  return impl_->job ? impl_->job->heap(chip) : nullptr;
}

bool NodeWorker::started() const noexcept { return impl_->started && !impl_->closed; }

Status NodeWorker::create(const NodeWorkerConfig& config, std::unique_ptr<NodeWorker>* out) {
  HP_RETURN_IF_ERROR(settings_status());
  HP_ENSURE(config.chips >= 1 && config.chips <= 64, ErrorCode::kInvalidArgument,
            "NodeWorkerConfig.chips={} must be in [1, 64]", config.chips);
  HP_ENSURE(config.sub_workers == 1 || config.sub_workers == 2, ErrorCode::kInvalidArgument,
            "NodeWorkerConfig.sub_workers={} must be 1 or 2", config.sub_workers);
  HP_ENSURE(config.tensor_bytes + config.scratch_bytes + (64u << 10) <= config.heap_bytes,
            ErrorCode::kInvalidArgument,
            "NodeWorkerConfig: tensor_bytes ({}) + scratch_bytes ({}) must leave room in "
            "heap_bytes ({}) for the chips' own allocations",
            config.tensor_bytes, config.scratch_bytes, config.heap_bytes);
  HP_ENSURE(config.start_timeout_s > 0, ErrorCode::kInvalidArgument,
            "NodeWorkerConfig.start_timeout_s={} must be > 0", config.start_timeout_s);
  HP_ENSURE(config.mailbox_bytes >= (64u << 10) && config.mailbox_bytes % 64 == 0,
            ErrorCode::kInvalidArgument,
            "NodeWorkerConfig.mailbox_bytes={} must be a multiple of 64, at least 64 KiB",
            config.mailbox_bytes);
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->timeout_s = config.wait_timeout_s.value_or(settings().wait_timeout_s);
  HP_ENSURE(impl->timeout_s > 0, ErrorCode::kInvalidArgument,
            "NodeWorkerConfig.wait_timeout_s={} must be > 0", impl->timeout_s);
  impl->parent_pid = ::getpid();
  impl->loads = std::make_unique<std::atomic<int>[]>(std::size_t(config.chips));
  impl->to_reap = std::make_unique<std::atomic<bool>[]>(std::size_t(config.chips));
  std::unique_ptr<NodeWorker> worker(new NodeWorker(std::move(impl)));
  HP_RETURN_IF_ERROR(register_collectives(*worker, &worker->impl_->builtins));
  *out = std::move(worker);
  return Status::ok();
}

std::string NodeWorker::Impl::describe_chip(int chip) const {
  const int pid = std::size_t(chip) < pids.size() ? pids[std::size_t(chip)] : 0;
  return fmt::format("chip {} (pid {})", chip, pid);
}

Status NodeWorker::Impl::check_usable(std::string_view what) {
  HP_ENSURE(started && !closed, ErrorCode::kFailedPrecondition, "{}: the node worker is {}", what,
            closed ? "closed" : "not started (call start() first)");
  std::lock_guard lock(health_mutex);
  if (!broken.is_ok()) {
    return Status::error(ErrorCode::kFailedPrecondition,
                         "{}: the node worker lost a chip ({}); close it and create another", what,
                         broken.message());
  }
  return Status::ok();
}

Status NodeWorker::Impl::register_on_host(const Sha256Digest& digest, Entry& entry) {
  HP_RETURN_IF_ERROR(host->register_callable(*entry.callable, &entry.sub_slot));
  Impl* self = this;
  return host->register_callable(
      Callable::from_function(
          entry.callable->name(),
          [self, digest](const TaskArgs& args, platform::BlockContext&) {
            return self->dispatch(digest, args);
          },
          std::as_bytes(std::span(digest)), std::string(kProxyNamespace)),
      &entry.proxy_slot);
}

Status NodeWorker::Impl::host_slot(const CallableHandle& handle, bool proxy, std::string_view what,
                                   int* slot) {
  std::lock_guard lock(callables_mutex);
  auto it = callables.find(handle.digest);
  HP_ENSURE(it != callables.end(), ErrorCode::kNotFound,
            "{}: {} is not registered with this node worker", what, handle.hashid());
  *slot = proxy ? it->second.proxy_slot : it->second.sub_slot;
  return Status::ok();
}

Status NodeWorker::register_callable(const Callable& callable, CallableHandle* handle) {
  HP_ENSURE(!callable.empty(), ErrorCode::kInvalidArgument,
            "register_callable: the callable '{}' has no function", callable.name());
  Impl& impl = *impl_;
  HP_ENSURE(!impl.closed, ErrorCode::kFailedPrecondition,
            "register_callable: the worker is closed");
  const Sha256Digest& digest = callable.handle().digest;
  std::lock_guard lock(impl.callables_mutex);
  auto it = impl.callables.find(digest);
  if (it != impl.callables.end()) {
    ++it->second.references;
    *handle = callable.handle();
    return Status::ok();
  }
  HP_ENSURE(!impl.started || callable.kind() == CallableKind::kLibrarySymbol ||
                impl.inherited.contains(digest),
            ErrorCode::kFailedPrecondition,
            "register_callable('{}'): a function callable registered after start() cannot reach "
            "the chips (they are forked processes that only have the functions registered before "
            "start()); register it before start(), or make it a library symbol "
            "(Callable::from_library), which chips load when they first need it",
            callable.name());
  Impl::Entry entry;
  entry.callable = std::make_shared<const Callable>(callable);
  entry.references = 1;
  entry.known.assign(std::size_t(impl.config.chips), 0);
  if (impl.host) HP_RETURN_IF_ERROR(impl.register_on_host(digest, entry));
  impl.callables.emplace(digest, std::move(entry));
  *handle = callable.handle();
  return Status::ok();
}

Status NodeWorker::unregister_callable(const CallableHandle& handle) {
  Impl& impl = *impl_;
  Impl::Entry removed;
  {
    std::lock_guard lock(impl.callables_mutex);
    auto it = impl.callables.find(handle.digest);
    HP_ENSURE(it != impl.callables.end(), ErrorCode::kNotFound,
              "unregister_callable: {} is not registered", handle.hashid());
    if (--it->second.references > 0) return Status::ok();
    removed = std::move(it->second);
    impl.callables.erase(it);
  }
  if (impl.host) {
    HP_RETURN_IF_ERROR(impl.host->unregister_callable(removed.sub_slot));
    HP_RETURN_IF_ERROR(impl.host->unregister_callable(removed.proxy_slot));
  }
  if (!impl.started || impl.closed) return Status::ok();
  FrameWriter frame;
  frame.put(handle.digest);
  for (int chip = 0; chip < impl.config.chips; ++chip) {
    if (removed.known[std::size_t(chip)]) {
      HP_RETURN_IF_ERROR(impl.send(chip, node::kUnregister, frame.bytes()));
    }
  }
  return Status::ok();
}

int NodeWorker::callable_references(const CallableHandle& handle) const {
  std::lock_guard lock(impl_->callables_mutex);
  auto it = impl_->callables.find(handle.digest);
  return it == impl_->callables.end() ? 0 : it->second.references;
}

Status NodeWorker::alloc(DType dtype, std::span<const std::int64_t> shape, SymmetricTensor* out) {
  Impl& impl = *impl_;
  HP_RETURN_IF_ERROR(impl.check_usable("alloc"));
  HP_ENSURE(dtype_size(dtype) != 0, ErrorCode::kDTypeMismatch, "alloc: invalid dtype");
  HP_ENSURE(!shape.empty() && shape.size() <= std::size_t(TensorView::kMaxDims),
            ErrorCode::kShapeMismatch, "alloc: a shape of 1..{} dims, not {}", TensorView::kMaxDims,
            shape.size());
  SymmetricTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.worker = this;
  for (std::int64_t d : shape) {
    HP_ENSURE(d >= 1 && d <= (std::int64_t(1) << 40), ErrorCode::kShapeMismatch,
              "alloc: dimension {} is out of range", d);
  }
  const std::size_t bytes = t.bytes();
  HP_RETURN_IF_ERROR(impl.job->allocate(bytes, 64, &t.offset).with_context("alloc"));
  for (int chip = 0; chip < impl.config.chips; ++chip) {
    std::memset(impl.job->heap(chip) + t.offset, 0, bytes);
  }
  *out = std::move(t);
  return Status::ok();
}

Status NodeWorker::free(const SymmetricTensor& tensor) {
  HP_ENSURE(tensor.worker == this, ErrorCode::kInvalidArgument,
            "free: the tensor belongs to another node worker");
  HP_ENSURE(impl_->job != nullptr, ErrorCode::kFailedPrecondition, "free: the worker is closed");
  return impl_->job->release(tensor.offset);
}

// --- start and close --------------------------------------------------------------------------

Status NodeWorker::start() {
  Impl& impl = *impl_;
  HP_ENSURE(!impl.started && !impl.closed, ErrorCode::kFailedPrecondition,
            "start: the node worker was {}", impl.closed ? "closed" : "started already");
  const NodeWorkerConfig& config = impl.config;
  const int chips = config.chips;

  // Shared memory: the chips' heaps (with the L3 tensors and the scratch window in their
  // reserved part), then the mailboxes.
  const std::size_t signal_bytes = std::size_t(3 * chips + 1) * 64;
  impl.scratch_total = config.scratch_bytes + signal_bytes;
  HP_RETURN_IF_ERROR(
      shmem::NodeJob::create({.n_pes = chips,
                              .heap_bytes = config.heap_bytes,
                              .reserved_bytes = config.tensor_bytes + impl.scratch_total,
                              .timeout_s = impl.timeout_s,
                              .job_id = fmt::format("node-{}", impl.parent_pid)},
                             &impl.job));
  HP_RETURN_IF_ERROR(impl.job->allocate(impl.scratch_total, 64, &impl.scratch_offset));
  impl.mail_bytes =
      sizeof(NodeShared) + std::size_t(chips) * node::mailbox_bytes(config.mailbox_bytes);
  void* mail =
      mmap(nullptr, impl.mail_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  HP_ENSURE(mail != MAP_FAILED, ErrorCode::kOutOfMemory, "cannot map the mailboxes ({} bytes): {}",
            impl.mail_bytes, std::strerror(errno));
  impl.mail_memory = static_cast<std::byte*>(mail);
  impl.shared = new (impl.mail_memory) NodeShared();
  for (int chip = 0; chip < chips; ++chip) {
    std::byte* at = impl.mail_memory + sizeof(NodeShared) +
                    std::size_t(chip) * node::mailbox_bytes(config.mailbox_bytes);
    new (at) node::MailboxHeader();
    impl.mailboxes.push_back(std::make_unique<node::Mailbox>(
        at, config.mailbox_bytes, &impl.shared->reply_event, node::mailbox_policy()));
  }

  // Each chip's cores and CPUs.
  const auto placements = chip_placements(chips);
  for (int chip = 0; chip < chips; ++chip) {
    platform::ChipConfig c = config.chip;
    if (c.cpus.empty()) c.cpus = placements[std::size_t(chip)].cpus;
    if (!c.wait_timeout_s) c.wait_timeout_s = impl.timeout_s;
    impl.chip_configs.push_back(std::move(c));
  }
  {
    std::lock_guard lock(impl.callables_mutex);
    for (const auto& [digest, entry] : impl.callables) {
      if (entry.callable->kind() == CallableKind::kFunction)
        impl.inherited[digest] = entry.callable;
    }
  }

  // The fork: no thread of ours runs yet (the reader and the host's cores come after it).
  impl.wait_status.assign(std::size_t(chips), -1);
  impl.sessions_ended.assign(std::size_t(chips), 0);
  impl.session_status.assign(std::size_t(chips), Status::ok());
  impl.started = true;  // from here on, close() cleans up
  std::fflush(nullptr);
  if (config.before_fork) config.before_fork();
  Status forked;
  for (int chip = 0; chip < chips; ++chip) {
    const pid_t pid = fork();
    if (pid == 0) run_chip_process(impl, chip);
    if (pid < 0) {
      forked = Status::error(ErrorCode::kSystemError, "cannot fork chip {}: {}", chip,
                             std::strerror(errno));
      break;
    }
    impl.pids.push_back(pid);
    impl.job->set_pid(chip, pid);
  }
  if (config.after_fork_parent) config.after_fork_parent();
  impl.wait_status.resize(impl.pids.size());
  // A pidfd per chip, opened before anything reaps it, so each names its chip's process.
  for (std::size_t chip = 0; chip < impl.pids.size(); ++chip) {
    // (glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage: the system call.)
    const int fd = int(syscall(SYS_pidfd_open, impl.pids[chip], 0));
    impl.pidfds.push_back(fd);
    if (fd >= 0) continue;
    // ESRCH: the chip has ended already and the kernel reaped it (a host ignoring SIGCHLD).
    // Otherwise nothing would notice its end: it is stopped now. Either way it is reaped here.
    const int error = errno;
    if (error != ESRCH) ::kill(impl.pids[chip], SIGKILL);
    int status = 0;
    if (waitpid(impl.pids[chip], &status, 0) != impl.pids[chip])
      status = kWaitStatusCollectedElsewhere;
    impl.chip_ended(int(chip), status);
    if (error != ESRCH && forked.is_ok()) {
      forked = Status::error(ErrorCode::kSystemError,
                             "cannot watch chip {}'s process (pidfd_open: {}; the node worker "
                             "needs Linux 5.3 or later)",
                             chip, std::strerror(error));
    }
  }
  impl.watcher = std::thread([&impl] { impl.watch_chips(); });
  impl.reader = std::thread([&impl] { impl.read_replies(); });
  if (!forked.is_ok()) {
    (void)close();
    return forked;
  }

  // Every chip ready, or the start's failure. A chip whose job another chip's end aborted fails
  // with PEER_DEAD, a consequence; the chip that caused it wrote its state and ended before the
  // abort reached its peers. So once one failure is seen, every chip is looked at and the cause
  // is reported: a chip's own failure first, then a chip that ended before it was ready, then a
  // PEER_DEAD failure, then a timeout (lower chips first within each).
  constexpr int kNoFailure = 4;  // ranks 0..3 as above: lower is more of a cause
  struct StartFailure {
    int rank = kNoFailure;
    Status status;
  };
  const auto failure_of = [&impl](int chip) {
    const node::MailboxHeader& header = *impl.mailboxes[std::size_t(chip)]->header;
    StartFailure f;
    if (header.state.load(std::memory_order_acquire) == std::uint32_t(node::ChipState::kFailed)) {
      const auto code = ErrorCode(header.init_code.load(std::memory_order_relaxed));
      f.rank = code == ErrorCode::kPeerDead ? 2 : 0;
      f.status = Status::error(
          ErrorCode::kFailedPrecondition, "{} failed to start: {}", impl.describe_chip(chip),
          std::string(header.init_error, strnlen(header.init_error, sizeof(header.init_error))));
      return f;
    }
    std::lock_guard lock(impl.health_mutex);
    if (impl.wait_status[std::size_t(chip)] != -1) {
      f.rank = 1;
      f.status =
          Status::error(ErrorCode::kPeerDead, "{} {} before it was ready", impl.describe_chip(chip),
                        describe_wait_status(impl.wait_status[std::size_t(chip)]));
    }
    return f;
  };
  StartFailure failed;
  for (int chip = 0; chip < chips && failed.rank == kNoFailure; ++chip) {
    node::MailboxHeader& header = *impl.mailboxes[std::size_t(chip)]->header;
    const auto result = platform::wait_event(
        header.state_event,
        [&] {
          return header.state.load(std::memory_order_acquire) !=
                 std::uint32_t(node::ChipState::kStarting);
        },
        platform::deadline_after(config.start_timeout_s), node::mailbox_policy(),
        [&] {
          std::lock_guard lock(impl.health_mutex);
          return impl.wait_status[std::size_t(chip)] != -1;
        });
    failed = failure_of(chip);
    if (failed.rank == kNoFailure && result == platform::WaitResult::kTimedOut) {
      failed.rank = 3;
      failed.status = Status::error(ErrorCode::kTimeout,
                                    "{} did not report ready within {} s "
                                    "(NodeWorkerConfig.start_timeout_s)",
                                    impl.describe_chip(chip), config.start_timeout_s);
    }
  }
  for (int chip = 0; chip < chips && failed.rank != kNoFailure; ++chip) {
    StartFailure f = failure_of(chip);
    if (f.rank < failed.rank) failed = std::move(f);
  }
  Status ready = failed.status;
  if (ready.is_ok()) {
    // The L3 orchestration's chip: one dispatcher core (cube) and the sub-workers (vector).
    ready = ChipWorker::create({.num_cube = 1,
                                .num_vector = config.sub_workers,
                                .pin = PinMode::kOff,
                                .wait_timeout_s = impl.timeout_s},
                               &impl.host);
  }
  if (ready.is_ok()) {
    std::lock_guard lock(impl.callables_mutex);
    for (auto& [digest, entry] : impl.callables) {
      ready = impl.register_on_host(digest, entry);
      if (!ready.is_ok()) break;
    }
  }
  if (ready.is_ok()) ready = impl.cycle_sessions({}, {});
  if (!ready.is_ok()) {
    (void)close();
    return ready.with_context("NodeWorker::start");
  }
  return Status::ok();
}

Status NodeWorker::close() {
  Impl& impl = *impl_;
  if (impl.closed) return Status::ok();
  std::lock_guard run_lock(impl.run_mutex);
  impl.closed = true;
  if (!impl.started) return Status::ok();
  impl.closing.store(true, std::memory_order_release);
  for (auto& mailbox : impl.mailboxes) {
    mailbox->header->shutdown.store(1, std::memory_order_release);
    platform::notify_event(mailbox->header->request_event, true);
  }
  // Every chip exits (the reader reaps them), or is killed at the deadline.
  Status status;
  {
    std::unique_lock lock(impl.health_mutex);
    auto all_ended = [&] {
      return std::all_of(impl.wait_status.begin(), impl.wait_status.end(),
                         [](int s) { return s != -1; });
    };
    if (!impl.health_changed.wait_for(lock, std::chrono::duration<double>(impl.timeout_s),
                                      all_ended)) {
      for (std::size_t chip = 0; chip < impl.pids.size(); ++chip) {
        if (impl.wait_status[chip] != -1) continue;
        status = Status::error(ErrorCode::kTimeout,
                               "close: {} did not exit within {} s of its shutdown; killed",
                               impl.describe_chip(int(chip)), impl.timeout_s);
        ::kill(impl.pids[chip], SIGKILL);
      }
      impl.health_changed.wait(lock, all_ended);
    }
    if (status.is_ok() && !impl.broken.is_ok()) status = impl.broken;
  }
  impl.stopping.store(true, std::memory_order_release);
  platform::notify_event(impl.shared->reply_event, true);
  if (impl.reader.joinable()) impl.reader.join();
  if (impl.watcher.joinable()) impl.watcher.join();  // every chip has ended
  for (int fd : impl.pidfds) {
    if (fd >= 0) ::close(fd);
  }
  impl.pidfds.clear();
  impl.host.reset();
  impl.mailboxes.clear();
  if (impl.mail_memory != nullptr) munmap(impl.mail_memory, impl.mail_bytes);
  impl.mail_memory = nullptr;
  impl.job.reset();
  return status;
}

// --- runs --------------------------------------------------------------------------------------

Status NodeWorker::run(const NodeOrchestration& orchestration, const OrchestratorConfig& config) {
  Impl& impl = *impl_;
  std::lock_guard run_lock(impl.run_mutex);
  HP_RETURN_IF_ERROR(impl.check_usable("run"));
  HP_ENSURE(bool(orchestration), ErrorCode::kInvalidArgument,
            "NodeWorker::run: the orchestration function is empty");
  OrchestratorConfig l3 = config;
  if (!l3.wait_timeout_s) l3.wait_timeout_s = impl.timeout_s;
  l3.diagnostics.runtime_level = 3;
  const bool diagnosed = config.diagnostics.any();
  if (diagnosed) {
    HP_ENSURE(!config.diagnostics.output_prefix.empty(), ErrorCode::kInvalidArgument,
              "diagnostics need an output prefix (OrchestratorConfig.diagnostics.output_prefix)");
    HP_RETURN_IF_ERROR(impl.cycle_sessions(config.diagnostics, config));
  }
  Status status = Orchestrator::run(
      *impl.host,
      [&](Orchestrator& o) {
        NodeOrchestrator node(*this, o);
        return orchestration(node);
      },
      l3);
  if (diagnosed) {
    Status ended = impl.cycle_sessions({}, {});
    if (ended.is_ok()) ended = merge_node_diagnostics(l3.diagnostics, impl.pids);
    if (status.is_ok()) status = ended;
  }
  return status;
}

Status NodeWorker::Impl::cycle_sessions(const DiagnosticsConfig& next,
                                        const OrchestratorConfig& rings) {
  std::vector<int> expected;
  {
    std::lock_guard lock(health_mutex);
    expected = sessions_ended;
  }
  for (int chip = 0; chip < config.chips; ++chip) {
    FrameWriter end;
    HP_RETURN_IF_ERROR(send(chip, node::kEndSession, end.bytes()));
    node::SessionFrame session;
    session.diagnostics = next;
    if (next.any()) {
      session.diagnostics.output_prefix = chip_output_prefix(next.output_prefix, chip);
      session.diagnostics.runtime_level = 2;
      session.task_ring_slots = rings.task_ring_slots;
      session.heap_ring_bytes = rings.heap_ring_bytes;
    }
    FrameWriter begin;
    node::encode_session(session, &begin);
    HP_RETURN_IF_ERROR(send(chip, node::kBeginSession, begin.bytes()));
  }
  // The ended sessions' files are written when each chip answers.
  std::unique_lock lock(health_mutex);
  Status status;
  for (int chip = 0; chip < config.chips; ++chip) {
    const bool answered =
        health_changed.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
          return sessions_ended[std::size_t(chip)] > expected[std::size_t(chip)] || !broken.is_ok();
        });
    if (!broken.is_ok()) return broken;
    if (!answered) {
      return Status::error(ErrorCode::kTimeout, "{} did not end its session within {} s",
                           describe_chip(chip), timeout_s);
    }
    if (status.is_ok() && !session_status[std::size_t(chip)].is_ok()) {
      status = session_status[std::size_t(chip)];
      status.with_context(describe_chip(chip));
    }
  }
  return status;
}

Status NodeWorker::replay(const std::string& deps_path, const NodeReplayBindings& bindings,
                          const OrchestratorConfig& config) {
  return run(
      [&](NodeOrchestrator& o) {
        return replay_into(
            o.l3(), deps_path, bindings.buffers,
            [&](const ReplayTask& task, SubmitResult* result) -> Status {
              CallableHandle handle;
              if (auto it = bindings.callables.find(task.callable);
                  it != bindings.callables.end()) {
                handle = it->second;
              } else {  // a collective's builtin kernel
                HP_RETURN_IF_ERROR(collective_handle(*impl_, task.callable, &handle));
              }
              // A next-level task's dispatch (a sub task is a vector task of the host).
              if (task.config.mode != platform::LaunchMode::kCube) {
                return o.submit_sub(handle, task.args(), task.config, result);
              }
              const std::size_t n = task.scalars.size();
              HP_ENSURE(n >= std::size_t(kHiddenScalars), ErrorCode::kCorruptData,
                        "replay: next-level task of '{}' without its launch scalars",
                        task.callable);
              std::array<std::uint64_t, kHiddenScalars> bits;
              for (int i = 0; i < kHiddenScalars; ++i) bits[i] = task.scalars[n - 3 + i].first;
              const NextLevelShape shape = decode_next_level(bits);
              return o.submit_next_level(handle, task.args(n - kHiddenScalars), shape.config,
                                         shape.chip, result);
            });
      },
      config);
}

// --- the L3 orchestration --------------------------------------------------------------------

int NodeOrchestrator::chips() const noexcept { return worker_.chips(); }

Status NodeOrchestrator::submit_next_level(const CallableHandle& handle, const TaskArgs& args,
                                           const CallConfig& config, int chip,
                                           SubmitResult* result) {
  NodeWorker::Impl& impl = *worker_.impl_;
  HP_ENSURE(chip == kAnyChip || (chip >= 0 && chip < impl.config.chips), ErrorCode::kOutOfRange,
            "submit_next_level: chip {} is out of range; this node has chips 0..{} (or kAnyChip)",
            chip, impl.config.chips - 1);
  HP_ENSURE(config.block_num >= 1 && config.block_num < (1 << 24) && config.num_flags >= 0 &&
                config.num_flags < (1 << 20),
            ErrorCode::kInvalidArgument,
            "submit_next_level: block_num={} / num_flags={} out of range", config.block_num,
            config.num_flags);
  int slot = -1;
  HP_RETURN_IF_ERROR(impl.host_slot(handle, true, "submit_next_level", &slot));
  for (int i = 0; i < args.num_tensors(); ++i) {
    const TensorView& t = args.tensor(i);
    HP_ENSURE(args.tag(i) != ArgTag::kOutput, ErrorCode::kInvalidArgument,
              "submit_next_level: tensor {} is an OUTPUT: a chip cannot see this process's "
              "heap ring; alloc() a tensor and pass it as OUTPUT_EXISTING",
              i);
    int pe = -1;
    std::size_t offset = 0;
    HP_ENSURE(t.data() == nullptr || impl.job->locate(t.data(), t.span_bytes(), &pe, &offset),
              ErrorCode::kInvalidArgument,
              "submit_next_level: tensor {} ({} at {}) is not in the node's shared memory: a chip "
              "process cannot see this process's own memory; alloc() it (NodeWorker::alloc)",
              i, t.to_string(), t.data());
  }
  TaskArgs with_config = args;
  const auto bits = encode_next_level({.chip = chip, .config = config});
  with_config.scalar(std::int64_t(bits[0])).scalar(bits[1]).scalar(bits[2]);
  return l3_.submit(slot, with_config,
                    {.mode = platform::LaunchMode::kCube, .block_num = 1, .num_flags = 0}, result);
}

Status NodeOrchestrator::submit_sub(const CallableHandle& handle, const TaskArgs& args,
                                    const CallConfig& config, SubmitResult* result) {
  NodeWorker::Impl& impl = *worker_.impl_;
  int slot = -1;
  HP_RETURN_IF_ERROR(impl.host_slot(handle, false, "submit_sub", &slot));
  CallConfig on_sub_workers = config;
  on_sub_workers.mode = platform::LaunchMode::kVector;
  return l3_.submit(slot, args, on_sub_workers, result);
}

}  // namespace hp::runtime
