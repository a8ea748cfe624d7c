// How hprun describes the end of a job: each rank's end as a phrase, and the one summary line
// printed when the job did not succeed.
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_REPORT_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_REPORT_H_

#include <sys/types.h>

#include <span>
#include <string>
#include <vector>

namespace hp::shmem::hprun {

// hprun's own exit codes; otherwise it exits with the status of the rank that failed first.
inline constexpr int kExitUsage = 2;            // bad options or settings
inline constexpr int kExitTimedOut = 124;       // --timeout passed
inline constexpr int kExitLaunchFailed = 125;   // hprun itself failed (resources, fork)
inline constexpr int kExitCannotExecute = 126;  // the program is not executable
inline constexpr int kExitNotFound = 127;       // the program does not exist
inline constexpr int kExitSignalBase = 128;     // + the signal that interrupted the job

// What hprun knows about one rank's process once the job is over.
struct RankEnd {
  int rank = -1;
  pid_t pid = -1;            // -1: never started
  bool reaped = false;       // false with pid > 0: still running when hprun gave up on it
  int wait_status = -1;      // waitpid() status once reaped
  bool initialized = false;  // its slot reached kReady (the program called shmem init)
  bool finalized = false;    // its slot was kFinalized when it ended
  int hprun_signal = 0;      // the last signal of hprun's termination sequence it was sent
};

// Exited 0 after shmem_finalize, or without ever initializing symmetric memory (a program that
// does not use it, like `hprun -n 2 hostname`).
bool rank_succeeded(const RankEnd& end) noexcept;
// hprun's exit code for a failed rank: its exit status (1 when it exited 0 without
// finalizing), or 128 + the signal that killed it.
int exit_code_of(const RankEnd& end) noexcept;
// "exited with status 3 before shmem_finalize", "killed by signal 11 (SIGSEGV)",
// "killed by signal 9 (SIGKILL) from hprun", "finished", "never started", ...
std::string describe_end(const RankEnd& end);

// "SIGSEGV"; "SIG<n>" for a number without a name.
std::string signal_name(int signo);
// The ranks of `ends` other than `except_rank` (-1: none left out) grouped by how they ended,
// e.g. "3 other rank(s): 2 exited with status 7 before shmem_finalize (ranks 0,2), 1 killed by
// signal 9 (SIGKILL) from hprun (rank 3)"; without "other" when none is left out. Empty when
// no rank is left to describe.
std::string summarize_ranks(std::span<const RankEnd> ends, int except_rank);

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_REPORT_H_
