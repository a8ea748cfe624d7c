#include "shmem/tools/hprun_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/settings.h"
#include "shmem/tools/hprun_output.h"
#include "shmem/tools/hprun_report.h"
#include "shmem/tools/hprun_spawn.h"

namespace hp::shmem::hprun {
namespace {

using Clock = std::chrono::steady_clock;

// What ended the job first; it decides the exit code and the summary line.
enum class Cause { kNone, kRankFailed, kLaunchFailed, kAborted, kInterrupted, kTimedOut };

// kRunning until the job fails. Then, while ranks still run, each later phase starts at
// step_at_: kGrace (ranks may exit by themselves) -> kTerminating (SIGTERM sent) ->
// kKilling (SIGKILL sent) -> kGivenUp (hprun stops waiting).
enum class Phase { kRunning, kGrace, kTerminating, kKilling, kGivenUp };

struct Rank {
  RankEnd end;
  bool running = false;
};

class Supervisor {
 public:
  Supervisor(const JobPlan& plan, const LaunchSettings& settings, const BlockedSignals& signals,
             JobSegment& segment)
      : plan_(plan),
        settings_(settings),
        signals_(signals),
        segment_(segment),
        ranks_(std::size_t(plan.n_ranks)) {
    for (int r = 0; r < plan.n_ranks; ++r) ranks_[std::size_t(r)].end.rank = r;
  }
  ~Supervisor() {
    if (signal_fd_ >= 0) close(signal_fd_);
    if (dev_null_ >= 0) close(dev_null_);
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  Status setup();
  void start_ranks();
  void supervise();
  JobResult result() const;

 private:
  Status reserve_output_fds();
  bool start_rank(int rank);
  void reap();
  void on_rank_ended(Rank& rank, int wait_status);
  void handle_signals();
  void on_interrupt(int signo, bool from_terminal);
  void on_timeout(Clock::time_point now);
  void advance(Clock::time_point now);
  void fail_job(Cause cause, Clock::time_point now);
  void enter_phase(Phase phase, Clock::time_point now);
  void signal_running(int signo, bool from_termination);
  bool ranks_done() const noexcept { return running_ == 0 || phase_ == Phase::kGivenUp; }

  const JobPlan& plan_;
  const LaunchSettings& settings_;
  const BlockedSignals& signals_;
  JobSegment& segment_;
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, int> rank_of_pid_;
  int running_ = 0;
  OutputRelay relay_;  // --tag-output only

  int signal_fd_ = -1;
  int dev_null_ = -1;
  std::optional<rlimit> original_nofile_;

  Cause cause_ = Cause::kNone;
  int first_failed_ = -1;  // the first rank that failed, whatever the cause
  std::string launch_error_;
  int interrupt_signal_ = 0;
  std::vector<int> running_at_timeout_;
  Phase phase_ = Phase::kRunning;
  Clock::time_point step_at_{};
  std::optional<Clock::time_point> timeout_at_;
  std::optional<Clock::time_point> ranks_done_at_;
};

Status Supervisor::setup() {
  signal_fd_ = signalfd(-1, &signals_.handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) {
    return Status::error(ErrorCode::kSystemError, "signalfd failed: {}", std::strerror(errno));
  }
  dev_null_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (dev_null_ < 0) {
    return Status::error(ErrorCode::kSystemError, "cannot open /dev/null: {}",
                         std::strerror(errno));
  }
  if (settings_.tag_output) HP_RETURN_IF_ERROR(reserve_output_fds());
  if (settings_.timeout_s) timeout_at_ = platform::deadline_after(*settings_.timeout_s);
  return Status::ok();
}

// Two pipes per rank stay open in hprun: raise the soft limit when needed (the ranks get the
// original one back).
Status Supervisor::reserve_output_fds() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Status::error(ErrorCode::kSystemError, "getrlimit failed: {}", std::strerror(errno));
  }
  const rlim_t needed = rlim_t(plan_.n_ranks) * 2 + 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    HP_ENSURE(limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= needed, ErrorCode::kUnsupported,
              "--tag-output for {} ranks needs {} open files, but the hard limit is {} "
              "(ulimit -Hn): raise it or run without --tag-output",
              plan_.n_ranks, needed, limit.rlim_max);
    original_nofile_ = limit;
    const rlimit raised{.rlim_cur = needed, .rlim_max = limit.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return Status::error(ErrorCode::kSystemError, "setrlimit(RLIMIT_NOFILE, {}) failed: {}",
                           needed, std::strerror(errno));
    }
  }
  return Status::ok();
}

// Every rank starts even when another failed meanwhile (it sees the abort and exits), so a
// failure is reported the same way whatever its timing; an interrupt stops the start.
void Supervisor::start_ranks() {
  for (int r = 0; r < plan_.n_ranks; ++r) {
    handle_signals();
    reap();
    if (interrupt_signal_ != 0 || !start_rank(r)) return;
  }
}

bool Supervisor::start_rank(int r) {
  Rank& rank = ranks_[std::size_t(r)];
  PeSlot& slot = segment_.pe(r);
  slot.wait_status.store(-1, std::memory_order_relaxed);
  // Before fork: the rank itself moves its slot on from kStarting, so hprun never writes the
  // state of a running rank.
  slot.state.store(std::uint32_t(PeState::kStarting), std::memory_order_release);
  auto fail = [&](const Status& status) {
    slot.state.store(std::uint32_t(PeState::kDead), std::memory_order_release);
    if (first_failed_ < 0) first_failed_ = r;
    launch_error_ = status.message();
    segment_.abort(r, fmt::format("could not be started by hprun: {}", status.message()));
    fail_job(Cause::kLaunchFailed, Clock::now());
    return false;
  };

  int output_fds[2] = {-1, -1};
  if (settings_.tag_output) {
    if (Status s = relay_.add_rank(r, output_fds); !s.is_ok()) return fail(s);
  }
  const std::vector<std::string> env = plan_.environment_for(r);
  const CStringArray envp(env);
  const CStringArray argv(plan_.argv);
  ChildSetup setup;
  setup.program = plan_.program_path.c_str();
  setup.shown_name = plan_.argv.front().c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.stdio[0] = r == 0 ? -1 : dev_null_;  // only rank 0 reads hprun's stdin
  setup.stdio[1] = output_fds[0];
  setup.stdio[2] = output_fds[1];
  setup.signal_mask = &signals_.original_mask;
  setup.nofile = original_nofile_ ? &*original_nofile_ : nullptr;
  setup.parent = getpid();
  setup.slot = &slot;
  pid_t pid = -1;
  const Status spawned = spawn_rank(setup, &pid);
  for (int fd : output_fds) {
    if (fd >= 0) close(fd);
  }
  if (!spawned.is_ok()) return fail(spawned);
  slot.pid.store(pid, std::memory_order_relaxed);
  rank.end.pid = pid;
  rank.running = true;
  rank_of_pid_[pid] = r;
  ++running_;
  return true;
}

void Supervisor::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (auto it = rank_of_pid_.find(pid); it != rank_of_pid_.end()) {
      on_rank_ended(ranks_[std::size_t(it->second)], status);
    }
  }
}

void Supervisor::on_rank_ended(Rank& rank, int wait_status) {
  rank.running = false;
  --running_;
  rank.end.reaped = true;
  rank.end.wait_status = wait_status;
  PeSlot& slot = segment_.pe(rank.end.rank);
  slot.wait_status.store(wait_status, std::memory_order_release);
  const std::uint32_t state = slot.state.load(std::memory_order_acquire);
  rank.end.finalized = state == std::uint32_t(PeState::kFinalized);
  rank.end.initialized = state >= std::uint32_t(PeState::kReady);
  if (!rank.end.finalized)
    slot.state.store(std::uint32_t(PeState::kDead), std::memory_order_release);
  if (rank_succeeded(rank.end)) return;
  if (first_failed_ < 0) first_failed_ = rank.end.rank;
  segment_.abort(rank.end.rank, describe_end(rank.end));
  fail_job(Cause::kRankFailed, Clock::now());
}

void Supervisor::handle_signals() {
  signalfd_siginfo infos[16];
  for (;;) {
    const ssize_t n = read(signal_fd_, infos, sizeof infos);
    if (n <= 0) return;
    for (std::size_t i = 0; i < std::size_t(n) / sizeof infos[0]; ++i) {
      const int signo = int(infos[i].ssi_signo);
      if (signo != SIGCHLD) on_interrupt(signo, infos[i].ssi_code == SI_KERNEL);
    }
  }
}

void Supervisor::on_interrupt(int signo, bool from_terminal) {
  const auto now = Clock::now();
  if (interrupt_signal_ != 0 && signo == SIGINT) {  // a second SIGINT: no more patience
    if (phase_ < Phase::kKilling) {
      signal_running(SIGKILL, true);
      enter_phase(Phase::kKilling, now);
    }
    return;
  }
  if (interrupt_signal_ == 0) interrupt_signal_ = signo;
  // The terminal signals its whole foreground process group, the ranks included (they stay
  // in hprun's group): forwarding would deliver the signal twice.
  if (!from_terminal) signal_running(signo, false);
  fail_job(Cause::kInterrupted, now);
}

void Supervisor::on_timeout(Clock::time_point now) {
  for (const Rank& rank : ranks_) {
    if (rank.running) running_at_timeout_.push_back(rank.end.rank);
  }
  fail_job(Cause::kTimedOut, now);
  segment_.abort(-1, fmt::format("the job ran past hprun --timeout {} s", *settings_.timeout_s));
  if (phase_ < Phase::kTerminating) {
    signal_running(SIGTERM, true);
    enter_phase(Phase::kTerminating, now);
  }
}

void Supervisor::fail_job(Cause cause, Clock::time_point now) {
  if (cause_ == Cause::kNone) cause_ = cause;
  if (phase_ == Phase::kRunning) enter_phase(Phase::kGrace, now);
}

void Supervisor::enter_phase(Phase phase, Clock::time_point now) {
  phase_ = phase;
  switch (phase) {
    case Phase::kGrace:
      step_at_ = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(settings_.grace_s));
      break;
    case Phase::kTerminating:
      step_at_ = now + kTerminateToKill;
      break;
    case Phase::kKilling:
      step_at_ = now + kKillToGiveUp;
      break;
    case Phase::kRunning:
    case Phase::kGivenUp:
      break;
  }
}

void Supervisor::signal_running(int signo, bool from_termination) {
  for (Rank& rank : ranks_) {
    if (!rank.running) continue;
    kill(rank.end.pid, signo);  // not reaped yet, so the pid is still this rank's
    if (from_termination) rank.end.hprun_signal = signo;
  }
}

void Supervisor::advance(Clock::time_point now) {
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    if (running_ > 0) on_timeout(now);
  }
  if (running_ > 0 && phase_ == Phase::kRunning && segment_.aborted()) {
    fail_job(Cause::kAborted, now);  // a rank aborted the job itself
  }
  if (running_ > 0 && phase_ != Phase::kRunning && phase_ != Phase::kGivenUp && now >= step_at_) {
    switch (phase_) {
      case Phase::kGrace:
        signal_running(SIGTERM, true);
        enter_phase(Phase::kTerminating, now);
        break;
      case Phase::kTerminating:
        signal_running(SIGKILL, true);
        enter_phase(Phase::kKilling, now);
        break;
      default:
        enter_phase(Phase::kGivenUp, now);
        break;
    }
  }
  if (ranks_done()) {
    if (!ranks_done_at_) ranks_done_at_ = now;
    if (relay_.has_open_sources() && now >= *ranks_done_at_ + kOutputDrain) relay_.close_sources();
    if (relay_.has_queued_output() &&
        now >= std::max(*ranks_done_at_, relay_.last_write()) + kOutputStall) {
      relay_.drop_queued_output();
    }
  }
}

void Supervisor::supervise() {
  std::vector<pollfd> fds;
  for (;;) {
    reap();
    const auto now = Clock::now();
    advance(now);
    if (ranks_done() && !relay_.has_open_sources() && !relay_.has_queued_output()) return;

    auto wake = now + kAbortCheckInterval;
    if (timeout_at_) wake = std::min(wake, *timeout_at_);
    if (phase_ != Phase::kRunning && !ranks_done()) wake = std::min(wake, step_at_);
    const auto wait_ms =
        std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - now, Clock::duration::zero()));

    fds.clear();
    fds.push_back(pollfd{.fd = signal_fd_, .events = POLLIN, .revents = 0});
    relay_.add_poll_fds(&fds);
    if (poll(fds.data(), fds.size(), int(wait_ms.count())) < 0) {
      std::this_thread::sleep_for(kAbortCheckInterval);  // ENOMEM: retry without spinning
      continue;
    }
    if (fds[0].revents != 0) handle_signals();
    relay_.handle(std::span<const pollfd>(fds).subspan(1));
  }
}

JobResult Supervisor::result() const {
  std::vector<RankEnd> ends;
  for (const Rank& rank : ranks_) ends.push_back(rank.end);
  auto line = [&](std::string head, int except_rank) {
    const std::string others = summarize_ranks(ends, except_rank);
    return others.empty() ? head : fmt::format("{}; {}", head, others);
  };
  const int failed_exit = first_failed_ >= 0 ? exit_code_of(ends[std::size_t(first_failed_)]) : 1;
  // A rank's shmem_global_exit ends the job with its status (the others' ends follow from it),
  // unless hprun itself was interrupted or timed out first.
  const int global_pe = segment_.header().global_exit_pe.load(std::memory_order_acquire);
  if (global_pe >= 0 && cause_ != Cause::kInterrupted && cause_ != Cause::kTimedOut) {
    const int status = segment_.header().global_exit_status.load(std::memory_order_relaxed);
    return {status,
            line(fmt::format("hprun: rank {} called shmem_global_exit({})", global_pe, status),
                 global_pe)};
  }
  switch (cause_) {
    case Cause::kNone:
      return {};
    case Cause::kRankFailed: {
      const RankEnd& end = ends[std::size_t(first_failed_)];
      return {failed_exit,
              line(fmt::format("hprun: rank {} (pid {}) {}", end.rank, end.pid, describe_end(end)),
                   end.rank)};
    }
    case Cause::kLaunchFailed:
      return {kExitLaunchFailed,
              line(fmt::format("hprun: could not start rank {}: {}", first_failed_, launch_error_),
                   first_failed_)};
    case Cause::kAborted:
      return {failed_exit,
              line(fmt::format("hprun: the job was aborted ({})", segment_.abort_message()), -1)};
    case Cause::kInterrupted:
      return {kExitSignalBase + interrupt_signal_,
              line(fmt::format("hprun: interrupted by {}", signal_name(interrupt_signal_)), -1)};
    case Cause::kTimedOut:
      return {kExitTimedOut,
              line(fmt::format("hprun: the job ran past --timeout {} s; rank(s) {} were still "
                               "running",
                               *settings_.timeout_s, format_cpu_list(running_at_timeout_)),
                   -1)};
  }
  return {};
}

}  // namespace

Status block_signals(BlockedSignals* out) {
  // An inherited SIG_IGN for SIGCHLD would make the kernel reap the ranks before hprun sees
  // how they ended.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &default_action, nullptr);

  sigemptyset(&out->handled);
  sigaddset(&out->handled, SIGCHLD);
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
    // An inherited SIG_IGN (nohup, a background job of a script) holds for the whole job:
    // blocked, the signal would reach hprun's signalfd anyway.
    struct sigaction current {};
    if (sigaction(signo, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&out->handled, signo);
  }
  sigset_t blocked = out->handled;
  sigaddset(&blocked, SIGPIPE);  // a closed stdout is EPIPE, not the end of hprun's cleanup
  if (sigprocmask(SIG_BLOCK, &blocked, &out->original_mask) != 0) {
    return Status::error(ErrorCode::kSystemError, "sigprocmask failed: {}", std::strerror(errno));
  }
  return Status::ok();
}

Status run_job(const JobPlan& plan, const LaunchSettings& settings, const BlockedSignals& signals,
               JobSegment& segment, JobResult* result) {
  Supervisor supervisor(plan, settings, signals, segment);
  HP_RETURN_IF_ERROR(supervisor.setup());
  supervisor.start_ranks();
  supervisor.supervise();
  *result = supervisor.result();
  return Status::ok();
}

}  // namespace hp::shmem::hprun
