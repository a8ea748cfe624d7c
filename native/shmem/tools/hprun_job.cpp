#include "shmem/tools/hprun_job.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <fmt/core.h>

#include "common/settings.h"
#include "platform/cpu_placement.h"
#include "platform/cpu_topology.h"
#include "shmem/tools/hprun_report.h"

extern char** environ;

namespace hp::shmem::hprun {
namespace {

std::string_view name_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

bool has_variable(std::string_view name) {
  return std::getenv(std::string(name).c_str()) != nullptr;
}

}  // namespace

std::vector<std::string> JobPlan::environment_for(int rank) const {
  std::vector<std::string> env;
  env.reserve(inherited_env.size() + job_env.size() + 4);
  env.insert(env.end(), inherited_env.begin(), inherited_env.end());
  env.insert(env.end(), job_env.begin(), job_env.end());
  env.push_back(fmt::format("HP_RANK={}", rank));
  env.push_back(fmt::format("HP_LOCAL_RANK={}", rank));
  if (!rank_cpus.empty()) env.push_back("HP_CHIP_CPUS=" + rank_cpus[std::size_t(rank)]);
  if (!rank_mem_nodes.empty() && !rank_mem_nodes[std::size_t(rank)].empty()) {
    env.push_back("HP_MEM_NODES=" + rank_mem_nodes[std::size_t(rank)]);
  }
  return env;
}

Status make_job_plan(const Options& options, const std::string& program_path,
                     const std::string& job_id, JobPlan* plan) {
  plan->job_id = job_id;
  plan->n_ranks = options.n_ranks;
  plan->program_path = program_path;
  plan->argv = options.command;

  std::vector<std::string_view> replaced = {"HP_JOB_ID", "HP_RANK", "HP_WORLD_SIZE",
                                            "HP_LOCAL_RANK", "HP_LOCAL_SIZE"};
  plan->job_env = {
      "HP_JOB_ID=" + job_id,
      fmt::format("HP_WORLD_SIZE={}", options.n_ranks),
      fmt::format("HP_LOCAL_SIZE={}", options.n_ranks),
  };
  if (!has_variable("HP_SHMEM_TRANSPORT")) plan->job_env.push_back("HP_SHMEM_TRANSPORT=shm");
  if (options.heap_size) {
    replaced.push_back("HP_SHMEM_HEAP_SIZE");
    plan->job_env.push_back("HP_SHMEM_HEAP_SIZE=" + *options.heap_size);
  }
  plan->rank_cpus.clear();
  plan->rank_mem_nodes.clear();
  if (options.bind) {
    replaced.push_back("HP_CHIP_CPUS");
    replaced.push_back("HP_MEM_NODES");
    platform::CpuTopology topology;
    HP_RETURN_IF_ERROR(platform::load_cpu_topology(&topology).with_context("hprun --bind"));
    HP_ENSURE(!topology.is_synthetic(), ErrorCode::kInvalidSetting,
              "hprun --bind places real processes, but the topology is {}: unset HWLOC_SYNTHETIC "
              "(and HWLOC_XMLFILE, HWLOC_FSROOT), or print that topology's plan with "
              "hp-topology --ranks {}",
              topology.source, options.n_ranks);
    for (const platform::RankPlacement& p : platform::place_ranks(topology, options.n_ranks)) {
      plan->rank_cpus.push_back(format_cpu_list(p.cpus));
      plan->rank_mem_nodes.push_back(format_cpu_list(p.mem_nodes));
    }
  }
  plan->inherited_env.clear();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::find(replaced.begin(), replaced.end(), name_of(*entry)) == replaced.end()) {
      plan->inherited_env.emplace_back(*entry);
    }
  }
  return Status::ok();
}

int resolve_program(const std::string& name, std::string* path) {
  auto executable = [](const std::string& candidate) {
    struct stat st {};
    if (stat(candidate.c_str(), &st) != 0) return errno == EACCES ? EACCES : ENOENT;
    return S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0 ? 0 : EACCES;
  };
  if (name.empty()) return ENOENT;
  if (name.find('/') != std::string::npos) {
    *path = name;
    return executable(name);
  }
  const char* search = std::getenv("PATH");
  const std::string_view dirs = search != nullptr ? search : "/bin:/usr/bin";  // glibc's default
  int error = ENOENT;
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string_view dir = dirs.substr(start, end - start);
    const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, name);
    const int result = executable(candidate);
    if (result == 0) {
      *path = candidate;
      return 0;
    }
    if (result == EACCES) error = EACCES;  // execvp reports EACCES if nothing better is found
    start = end + 1;
  }
  return error;
}

std::string new_job_id() {
  std::uint32_t random = 0;
  if (getrandom(&random, sizeof random, 0) != sizeof random) {
    random = std::uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return fmt::format("{}-{:08x}", ::getpid(), random);
}

}  // namespace hp::shmem::hprun
