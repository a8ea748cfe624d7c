// Where a job's ranks and a process's framework threads run, planned on a CpuTopology.
//
// Ranks (place_ranks): NUMA node by NUMA node. With at least as many ranks as nodes, node k
// gets ranks floor(n/N) or one more (the first n mod N nodes the extra one), consecutive ranks
// on the same node, and a node's cores are split into contiguous shares of sizes that differ
// by at most one; a rank's memory is bound to its node. With fewer ranks than nodes, each rank
// gets a contiguous group of whole nodes and its memory is bound to them. Inside a share the
// cores come first (each core's first hardware thread), their SMT siblings after: a chip pins
// its i-th core to the i-th CPU, so its cores take distinct physical cores before siblings.
// A node with fewer cores than ranks splits its CPUs (cores first) instead; fewer CPUs than
// ranks: the ranks share them round-robin, one CPU each. On a one-node machine no rank's
// memory is bound (mem_nodes empty): binding would change nothing.
//
// The framework/chip partition (partition_cpus): the cores, node by node, split into halves,
// the framework the first floor(C/2) cores and the chip the rest, each core with its siblings.
// One core: its threads split the same way (cores first); one CPU: both get it.
#ifndef HYPER_PARALLEL_PLATFORM_CPU_PLACEMENT_H_
#define HYPER_PARALLEL_PLATFORM_CPU_PLACEMENT_H_

#include <span>
#include <vector>

#include "common/api.h"
#include "platform/cpu_topology.h"

namespace hp::platform {

struct RankPlacement {
  std::vector<int> cpus;       // cores first, then SMT siblings (the chip's pinning order)
  std::vector<int> mem_nodes;  // NUMA nodes (os_index) its memory is bound to; empty: unbound
};

// The placement of ranks 0..n_ranks-1 (n_ranks >= 1).
HP_API std::vector<RankPlacement> place_ranks(const CpuTopology& topology, int n_ranks);

struct CpuPartition {
  std::vector<int> framework;  // the framework's thread pool (OMP_NUM_THREADS = its size)
  std::vector<int> chip;       // the chip's cores (HP_CHIP_CPUS)
};

HP_API CpuPartition partition_cpus(const CpuTopology& topology);

// The cores' CPUs, cores first: every core's first hardware thread in order, then every
// second thread, and so on.
HP_API std::vector<int> cores_first(std::span<const CpuCore> cores);

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_CPU_PLACEMENT_H_
