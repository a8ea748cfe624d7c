// hprun [options] -n N prog [args...]: launches N processes of `prog` on this host as one
// symmetric-memory job. The options are in hprun_options.cpp, the supervision in
// hprun_launcher.cpp, the shared job control segment in shmem/job.h.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "common/settings.h"
#include "shmem/job.h"
#include "shmem/tools/hprun_job.h"
#include "shmem/tools/hprun_launcher.h"
#include "shmem/tools/hprun_options.h"
#include "shmem/tools/hprun_report.h"

namespace hp::shmem::hprun {
namespace {

constexpr int kJobIdAttempts = 8;
constexpr double kMaxGraceSeconds = 10;

// Removes every shared-memory object of the job, whichever way hprun ends.
class JobCleanup {
 public:
  explicit JobCleanup(std::string job_id) : job_id_(std::move(job_id)) {}
  ~JobCleanup() { JobSegment::unlink_all(job_id_); }
  JobCleanup(const JobCleanup&) = delete;
  JobCleanup& operator=(const JobCleanup&) = delete;

 private:
  std::string job_id_;
};

// With 0, 1 or 2 closed, hprun's own pipes would take those numbers and be mistaken for them.
void ensure_standard_fds() {
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return;
  }
}

int report(const Status& status, int exit_code) {
  fmt::print(stderr, "hprun: {}\n", status.to_string());
  return exit_code;
}

int run(int argc, char** argv) {
  ensure_standard_fds();
  Options options;
  if (auto exit_code = parse_options(argc, argv, &options)) return *exit_code;
  if (const Status& s = settings_status(); !s.is_ok()) return report(s, kExitUsage);
  std::string program;
  if (const int err = resolve_program(options.command.front(), &program); err != 0) {
    fmt::print(stderr, "hprun: cannot run '{}': {}\n", options.command.front(), std::strerror(err));
    return err == EACCES ? kExitCannotExecute : kExitNotFound;
  }

  // Blocked for good: hprun reads them from a signalfd until it exits.
  BlockedSignals signals;
  if (Status s = block_signals(&signals); !s.is_ok()) return report(s, kExitLaunchFailed);

  std::unique_ptr<JobSegment> segment;
  std::string job_id;
  Status created;
  for (int attempt = 0; attempt < kJobIdAttempts; ++attempt) {
    job_id = new_job_id();
    created = JobSegment::create(job_id, options.n_ranks, &segment);
    if (created.code() != ErrorCode::kAlreadyExists) break;
  }
  if (!created.is_ok()) return report(created, kExitLaunchFailed);
  const JobCleanup cleanup(job_id);

  JobPlan plan;
  if (Status s = make_job_plan(options, program, job_id, &plan); !s.is_ok()) {
    return report(s, kExitLaunchFailed);
  }
  const LaunchSettings launch{
      .tag_output = options.tag_output,
      .timeout_s = options.timeout_s,
      .grace_s = std::min(settings().shmem_timeout_s, kMaxGraceSeconds),
  };
  JobResult result;
  if (Status s = run_job(plan, launch, signals, *segment, &result); !s.is_ok()) {
    return report(s, kExitLaunchFailed);
  }
  if (!result.message.empty()) fmt::print(stderr, "{}\n", result.message);
  return result.exit_code;
}

}  // namespace
}  // namespace hp::shmem::hprun

int main(int argc, char** argv) { return hp::shmem::hprun::run(argc, argv); }
