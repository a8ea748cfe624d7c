// The machine's CPUs as NUMA nodes, cores and hardware threads, read from hwloc.
//
// Layout: nodes in hwloc's logical order, each holding the cores whose CPUs it is local to,
// each core its hardware threads (PUs) as the kernel's CPU numbers. A core is listed under the
// first node that holds it (a memory-only node, e.g. high-bandwidth memory sharing CPUs with
// another node, then has no cores and is left out). On this system only the CPUs of the
// process's affinity mask are kept, and nodes and cores left without CPUs are dropped.
#ifndef HYPER_PARALLEL_PLATFORM_CPU_TOPOLOGY_H_
#define HYPER_PARALLEL_PLATFORM_CPU_TOPOLOGY_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp::platform {

struct CpuCore {
  std::vector<int> cpus;  // its hardware threads (kernel CPU numbers), hwloc's order
};

struct NumaNode {
  int os_index = -1;  // the kernel's node number (mbind, /sys/devices/system/node/node<N>)
  std::vector<CpuCore> cores;
};

struct HP_API CpuTopology {
  std::vector<NumaNode> nodes;  // never empty for a loaded topology
  int packages = 0;             // processor packages (sockets) holding a kept CPU
  // "this system", or "synthetic: <description>" (HWLOC_SYNTHETIC): a synthetic topology
  // describes no real CPUs, so nothing may be bound or placed by it.
  std::string source;

  bool is_synthetic() const { return source != "this system"; }
  int core_count() const;
  int cpu_count() const;
  std::vector<CpuCore> cores() const;  // every node's, node by node
};

// This machine's topology (HWLOC_SYNTHETIC, when set, describes it instead: the tests use it
// for machines they do not run on). A description hwloc rejects is INVALID_SETTING.
HP_API Status load_cpu_topology(CpuTopology* out);

// The topology of hwloc's synthetic description, e.g. "package:2 numa:2 core:8 pu:2" (CPUs
// numbered in logical order). A description hwloc rejects is INVALID_ARGUMENT.
HP_API Status synthetic_cpu_topology(std::string_view description, CpuTopology* out);

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_CPU_TOPOLOGY_H_
