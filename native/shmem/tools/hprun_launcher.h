// Running a job: start the ranks, supervise them until each has ended, report the outcome.
//
// Supervision is one poll() loop over a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP) and the
// output pipes, woken at the next deadline and at least every kAbortCheckInterval. Once the
// job fails (a rank failed, the job was aborted, hprun was interrupted) the remaining ranks get
// a grace period to exit by themselves, then SIGTERM, then SIGKILL, then hprun stops waiting:
// every wait is bounded from the first failure on, and by --timeout before it.
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_LAUNCHER_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_LAUNCHER_H_

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"
#include "shmem/job.h"
#include "shmem/tools/hprun_job.h"

namespace hp::shmem::hprun {

struct LaunchSettings {
  bool tag_output = false;
  std::optional<double> timeout_s;  // whole-job deadline
  double grace_s = 10;              // after the job failed, before SIGTERM
};

struct JobResult {
  int exit_code = 0;
  std::string message;  // the summary line for stderr; empty when the job succeeded
};

inline constexpr auto kTerminateToKill = std::chrono::seconds(2);
inline constexpr auto kKillToGiveUp = std::chrono::seconds(5);
inline constexpr auto kAbortCheckInterval = std::chrono::milliseconds(250);
inline constexpr auto kOutputDrain = std::chrono::seconds(2);  // pipes held by ranks' children
inline constexpr auto kOutputStall = std::chrono::seconds(5);  // hprun's reader not reading

// The signals hprun handles. Blocked before the job's shared memory exists, so that no signal
// ends hprun before it removes it; the ranks get the original mask back.
struct BlockedSignals {
  sigset_t handled;  // SIGCHLD, and SIGINT, SIGTERM, SIGHUP unless inherited as ignored
  sigset_t original_mask;
};
Status block_signals(BlockedSignals* out);

// Runs the job in `segment` (created for plan.n_ranks) to its end. Does not unlink the job's
// shared memory. An error means hprun itself could not supervise (no rank was started).
Status run_job(const JobPlan& plan, const LaunchSettings& settings, const BlockedSignals& signals,
               JobSegment& segment, JobResult* result);

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_LAUNCHER_H_
