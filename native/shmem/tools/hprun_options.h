// hprun's command line: hprun [options] -n N prog [args...]
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OPTIONS_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

namespace hp::shmem::hprun {

struct Options {
  int n_ranks = 0;
  bool bind = false;                     // HP_CHIP_CPUS: a share of hprun's CPUs per rank
  bool tag_output = false;               // prefix every output line with "[rank] "
  std::optional<double> timeout_s;       // whole-job deadline
  std::optional<std::string> heap_size;  // HP_SHMEM_HEAP_SIZE for every rank (validated)
  std::vector<std::string> command;      // the program and its arguments, never empty
};

// Parses argv. Returns the exit code when hprun must stop here (0 after --help, kExitUsage
// after printing what is wrong), or std::nullopt when `out` describes a job to run.
std::optional<int> parse_options(int argc, char** argv, Options* out);

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OPTIONS_H_
