// A stand-in PE for the hprun tests (tests/python/test_hprun.py): joins the job's control
// segment the way the library does, then behaves as its arguments say.
//
//   job_probe [--heap] MODE [ARGS...]
//   job_probe [--heap] rank R MODE [ARGS...] -- MODE [ARGS...]   rank R runs the first mode,
//                                                                the others the second
// --heap first creates "/hp.<job>.heap.<rank>" as the library would (hprun must remove it).
//
// Modes ("finalize" = mark the slot kReady, then kFinalized, and exit 0):
//   ready-finalize           finalize
//   exit CODE                exit CODE without ever initializing (never marks kReady)
//   ready-exit CODE          mark kReady, then exit CODE without finalizing
//   crash | abort            raise SIGSEGV | call abort()
//   wait-abort SECONDS       mark kReady, wait on the doorbell until the job is aborted: print
//                            "rank R saw the abort: <message>" and exit 7; 8 at the deadline
//   print TEXT               lines "TEXT R 0..2" to stdout and stderr, then "TEXT R end" without
//                            a newline to stdout; finalize
//   env                      one line "env R NAME=value ..." of the HP_* variables; finalize
//   sleep SECONDS            print "rank R pid P sleeping", sleep, finalize
//   ignore-signals SECONDS   like sleep, ignoring SIGINT and SIGTERM
//   echo-args ARGS...        one line "args R: <ARGS joined by '|'>"; finalize
// Exit 9: the probe could not join the job or was called wrongly.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "platform/wait.h"
#include "shmem/job.h"

extern char** environ;

namespace {

using hp::shmem::JobSegment;
using hp::shmem::PeState;

constexpr int kExitSawAbort = 7;
constexpr int kExitNoAbort = 8;
constexpr int kExitProbeError = 9;

[[noreturn]] void fail(std::string_view message) {
  fmt::print(stderr, "job_probe: {}\n", message);
  std::exit(kExitProbeError);
}

int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) fail(fmt::format("{} is not set (run me under hprun)", name));
  return std::atoi(value);
}

double number(std::span<const std::string> args, std::size_t index) {
  if (index >= args.size()) fail("a mode argument is missing");
  return std::atof(args[index].c_str());
}

// One write(2), so lines of several ranks sharing a pipe never interleave.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(std::size_t(n));
  }
}

class Probe {
 public:
  Probe() : rank_(env_int("HP_RANK")), world_(env_int("HP_WORLD_SIZE")) {
    const char* job_id = std::getenv("HP_JOB_ID");
    if (job_id == nullptr) fail("HP_JOB_ID is not set (run me under hprun)");
    hp::Status s = JobSegment::open(job_id, world_, &job_);
    if (!s.is_ok()) fail(s.to_string());
  }

  void create_heap_segment() {
    const std::string name = JobSegment::heap_name(job_->job_id(), rank_);
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) fail(fmt::format("cannot create {}", name));
    close(fd);
  }

  int run(std::span<const std::string> args) {
    if (args.empty()) fail("no mode given");
    const std::string& mode = args[0];
    if (mode == "ready-finalize") return finalize();
    if (mode == "exit") return int(number(args, 1));
    if (mode == "ready-exit") {
      set_state(PeState::kReady);
      return int(number(args, 1));
    }
    if (mode == "crash") {
      signal(SIGSEGV, SIG_DFL);
      raise(SIGSEGV);
    }
    if (mode == "abort") std::abort();
    if (mode == "wait-abort") return wait_abort(number(args, 1));
    if (mode == "print") return print(args.size() > 1 ? args[1] : "text");
    if (mode == "env") return print_env();
    if (mode == "echo-args") {
      const std::vector<std::string> rest(args.begin() + 1, args.end());
      write_all(1, fmt::format("args {}: {}\n", rank_, fmt::join(rest, "|")));
      return finalize();
    }
    if (mode == "sleep" || mode == "ignore-signals") {
      if (mode == "ignore-signals") {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
      }
      write_all(1, fmt::format("rank {} pid {} sleeping\n", rank_, ::getpid()));
      std::this_thread::sleep_for(std::chrono::duration<double>(number(args, 1)));
      return finalize();
    }
    fail(fmt::format("unknown mode '{}'", mode));
  }

 private:
  void set_state(PeState state) {
    job_->pe(rank_).state.store(std::uint32_t(state), std::memory_order_release);
  }

  int finalize() {
    set_state(PeState::kReady);
    set_state(PeState::kFinalized);
    return 0;
  }

  int wait_abort(double seconds) {
    set_state(PeState::kReady);
    hp::platform::WaitWord& doorbell = job_->pe(rank_).doorbell;
    const auto deadline = hp::platform::deadline_after(seconds);
    hp::platform::WaitPolicy policy;
    policy.spin = 0;
    policy.process_shared = true;
    std::uint32_t seen = doorbell.value.load(std::memory_order_acquire);
    while (!job_->aborted()) {
      const auto result = hp::platform::wait_word(
          doorbell, [&](std::uint32_t v) { return v != seen; }, deadline, policy,
          [&] { return job_->aborted(); }, &seen);
      if (result == hp::platform::WaitResult::kTimedOut) {
        write_all(1, fmt::format("rank {} saw no abort within {} s\n", rank_, seconds));
        return kExitNoAbort;
      }
    }
    write_all(1, fmt::format("rank {} saw the abort: {}\n", rank_, job_->abort_message()));
    return kExitSawAbort;
  }

  int print(const std::string& text) {
    std::string lines;
    for (int i = 0; i < 3; ++i) lines += fmt::format("{} {} {}\n", text, rank_, i);
    write_all(2, lines);
    write_all(1, lines + fmt::format("{} {} end", text, rank_));
    return finalize();
  }

  int print_env() {
    std::vector<std::string> variables;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (std::string_view(*entry).starts_with("HP_")) variables.emplace_back(*entry);
    }
    std::sort(variables.begin(), variables.end());
    write_all(1, fmt::format("env {} {}\n", rank_, fmt::join(variables, " ")));
    return finalize();
  }

  int rank_;
  int world_;
  std::unique_ptr<JobSegment> job_;
};

// "rank R A... -- B...": the arguments this rank acts on.
std::vector<std::string> arguments_for(int rank, std::vector<std::string> args) {
  if (args.empty() || args[0] != "rank") return args;
  if (args.size() < 2) fail("rank: the rank number is missing");
  const int chosen = std::atoi(args[1].c_str());
  const auto separator = std::find(args.begin() + 2, args.end(), "--");
  if (separator == args.end()) fail("rank R A... -- B...: the '--' is missing");
  return rank == chosen ? std::vector<std::string>(args.begin() + 2, separator)
                        : std::vector<std::string>(separator + 1, args.end());
}

}  // namespace

int main(int argc, char** argv) {
  Probe probe;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--heap") {
    probe.create_heap_segment();
    args.erase(args.begin());
  }
  return probe.run(arguments_for(env_int("HP_RANK"), std::move(args)));
}
