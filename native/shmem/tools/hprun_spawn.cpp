#include "shmem/tools/hprun_spawn.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "shmem/tools/hprun_report.h"

namespace hp::shmem::hprun {
namespace {

[[noreturn]] void child_fail(const ChildSetup& setup, int exit_code, const char* what, int err) {
  char message[512];
  const auto written = fmt::format_to_n(message, sizeof message - 1, "hprun: {} '{}': {}\n", what,
                                        setup.shown_name, std::strerror(err));
  const ssize_t ignored = ::write(STDERR_FILENO, message, written.size);
  static_cast<void>(ignored);
  _exit(exit_code);
}

// Runs in the child between fork and exec. hprun is single-threaded, so the child may call
// anything the parent could, but it only touches memory the parent prepared.
[[noreturn]] void run_child(const ChildSetup& setup) {
  // Dies with hprun; the getppid() check closes the race with a parent that died just before.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != setup.parent) _exit(kExitLaunchFailed);
  // The library writes it too; writing it before exec means the slot never shows a started
  // rank without its pid.
  setup.slot->pid.store(getpid(), std::memory_order_relaxed);
  for (int fd = 0; fd < 3; ++fd) {
    if (setup.stdio[fd] >= 0 && dup2(setup.stdio[fd], fd) < 0) {
      child_fail(setup, kExitLaunchFailed, "cannot redirect the output of", errno);
    }
  }
  if (sigprocmask(SIG_SETMASK, setup.signal_mask, nullptr) != 0 ||
      (setup.nofile != nullptr && setrlimit(RLIMIT_NOFILE, setup.nofile) != 0)) {
    child_fail(setup, kExitLaunchFailed, "cannot restore the signal mask or limits for", errno);
  }
  // The path contains a '/': no PATH search, and a script without "#!" still runs via sh.
  execvpe(setup.program, setup.argv, setup.envp);
  child_fail(setup, kExitNotFound, "cannot run", errno);
}

}  // namespace

CStringArray::CStringArray(const std::vector<std::string>& strings) {
  pointers_.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers_.push_back(const_cast<char*>(s.c_str()));
  pointers_.push_back(nullptr);
}

Status spawn_rank(const ChildSetup& setup, pid_t* pid) {
  const pid_t child = fork();
  if (child < 0) {
    return Status::error(ErrorCode::kSystemError, "fork failed: {}", std::strerror(errno));
  }
  if (child == 0) run_child(setup);
  *pid = child;
  return Status::ok();
}

}  // namespace hp::shmem::hprun
