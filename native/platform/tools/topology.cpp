// hp-topology: this machine's CPU topology (hwloc; HWLOC_SYNTHETIC describes another one), the
// framework/chip partition the activation uses and, with --ranks N, the placement
// `hprun --bind -n N` uses. JSON by default; --partition prints the two cpulists of the
// partition as "framework <list>" and "chip <list>" lines for the activation script (this
// system's topology only).
// Exit status 0, 1 when the topology cannot be read (the error on stderr), 2 on bad usage.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/settings.h"
#include "platform/cpu_placement.h"
#include "platform/cpu_topology.h"

namespace {

nlohmann::json topology_json(const hp::platform::CpuTopology& t) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : t.nodes) {
    nlohmann::json cores = nlohmann::json::array();
    for (const auto& core : node.cores) cores.push_back(core.cpus);
    nodes.push_back({{"os_index", node.os_index}, {"cores", cores}});
  }
  return {{"source", t.source},      {"packages", t.packages}, {"numa_nodes", t.nodes.size()},
          {"cores", t.core_count()}, {"cpus", t.cpu_count()},  {"nodes", nodes}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "hp-topology: the CPU topology, the framework/chip partition and the rank placement"};
  int ranks = 0;
  bool partition_only = false;
  app.add_option("--ranks", ranks, "also print the placement of N ranks (hprun --bind -n N)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--partition", partition_only,
               "print the partition as two lines: framework <cpus>, chip <cpus>");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  hp::platform::CpuTopology topology;
  if (const hp::Status s = hp::platform::load_cpu_topology(&topology); !s.is_ok()) {
    std::fprintf(stderr, "hp-topology: %s\n", s.to_string().c_str());
    return 1;
  }
  const hp::platform::CpuPartition partition = hp::platform::partition_cpus(topology);
  if (partition_only) {
    if (topology.is_synthetic()) {  // the activation exports these CPUs: they must be real
      std::fprintf(stderr,
                   "hp-topology: --partition needs this system's topology, not %s: unset "
                   "HWLOC_SYNTHETIC (and HWLOC_XMLFILE, HWLOC_FSROOT)\n",
                   topology.source.c_str());
      return 1;
    }
    std::printf("framework %s\nchip %s\n", hp::format_cpu_list(partition.framework).c_str(),
                hp::format_cpu_list(partition.chip).c_str());
    return 0;
  }
  nlohmann::json out = topology_json(topology);
  out["partition"] = {{"framework", hp::format_cpu_list(partition.framework)},
                      {"chip", hp::format_cpu_list(partition.chip)}};
  if (ranks > 0) {
    nlohmann::json placed = nlohmann::json::array();
    int rank = 0;
    for (const auto& p : hp::platform::place_ranks(topology, ranks)) {
      placed.push_back(
          {{"rank", rank++}, {"cpus", hp::format_cpu_list(p.cpus)}, {"mem_nodes", p.mem_nodes}});
    }
    out["ranks"] = placed;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
