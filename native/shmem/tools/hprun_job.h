// What hprun launches: the job id, the program, and the environment of each rank.
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_JOB_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_JOB_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "shmem/tools/hprun_options.h"

namespace hp::shmem::hprun {

struct JobPlan {
  std::string job_id;
  int n_ranks = 0;
  std::string program_path;                 // resolved like execvp; contains a '/'
  std::vector<std::string> argv;            // argv[0] as the user wrote it
  std::vector<std::string> inherited_env;   // hprun's environment minus what the job sets
  std::vector<std::string> job_env;         // the same for every rank (HP_JOB_ID, ...)
  std::vector<std::string> rank_cpus;       // --bind: HP_CHIP_CPUS per rank; else empty
  std::vector<std::string> rank_mem_nodes;  // --bind: HP_MEM_NODES per rank ("": unbound)

  // The complete environment of one rank ("NAME=value" entries).
  std::vector<std::string> environment_for(int rank) const;
};

// Builds the plan of `options` for the job `job_id`. With --bind the ranks' CPUs and memory
// nodes come from place_ranks over this machine's topology (platform/cpu_placement.h).
Status make_job_plan(const Options& options, const std::string& program_path,
                     const std::string& job_id, JobPlan* plan);

// Finds `name` the way execvp would: as a path when it contains '/', else in PATH. Returns 0
// and the path, or the errno execvp would fail with (ENOENT, EACCES).
int resolve_program(const std::string& name, std::string* path);

// "<pid>-<8 random hex digits>"; JobSegment::create (O_EXCL) catches the unlikely clash.
std::string new_job_id();

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_JOB_H_
