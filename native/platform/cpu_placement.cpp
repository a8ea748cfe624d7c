#include "platform/cpu_placement.h"

namespace hp::platform {
namespace {

// Share i of `count` items cut into `shares` contiguous shares: [begin, end).
std::pair<std::size_t, std::size_t> share(std::size_t i, std::size_t count, std::size_t shares) {
  return {i * count / shares, (i + 1) * count / shares};
}

// `k` ranks on one node, appended to `out`.
void place_on_node(const NumaNode& node, int k, bool bind, std::vector<RankPlacement>* out) {
  const std::vector<int> mem = bind ? std::vector<int>{node.os_index} : std::vector<int>{};
  const std::size_t n = std::size_t(k);
  const std::span<const CpuCore> cores = node.cores;
  if (n <= cores.size()) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto [begin, end] = share(i, cores.size(), n);
      out->push_back({cores_first(cores.subspan(begin, end - begin)), mem});
    }
    return;
  }
  const std::vector<int> cpus = cores_first(cores);
  for (std::size_t i = 0; i < n; ++i) {
    if (n <= cpus.size()) {
      const auto [begin, end] = share(i, cpus.size(), n);
      out->push_back(
          {{cpus.begin() + std::ptrdiff_t(begin), cpus.begin() + std::ptrdiff_t(end)}, mem});
    } else {
      out->push_back({{cpus[i % cpus.size()]}, mem});
    }
  }
}

}  // namespace

std::vector<int> cores_first(std::span<const CpuCore> cores) {
  std::vector<int> out;
  for (std::size_t thread = 0;; ++thread) {
    const std::size_t before = out.size();
    for (const CpuCore& core : cores) {
      if (thread < core.cpus.size()) out.push_back(core.cpus[thread]);
    }
    if (out.size() == before) return out;
  }
}

std::vector<RankPlacement> place_ranks(const CpuTopology& topology, int n_ranks) {
  std::vector<RankPlacement> out;
  const std::size_t nodes = topology.nodes.size();
  if (n_ranks <= 0 || nodes == 0) return out;
  const bool bind = nodes > 1;
  const std::size_t n = std::size_t(n_ranks);
  if (n >= nodes) {
    for (std::size_t k = 0; k < nodes; ++k) {
      place_on_node(topology.nodes[k], int(n / nodes + (k < n % nodes ? 1 : 0)), bind, &out);
    }
    return out;
  }
  for (std::size_t r = 0; r < n; ++r) {
    const auto [begin, end] = share(r, nodes, n);
    std::vector<CpuCore> cores;
    RankPlacement p;
    for (std::size_t k = begin; k < end; ++k) {
      const NumaNode& node = topology.nodes[k];
      cores.insert(cores.end(), node.cores.begin(), node.cores.end());
      p.mem_nodes.push_back(node.os_index);
    }
    p.cpus = cores_first(cores);
    out.push_back(std::move(p));
  }
  return out;
}

CpuPartition partition_cpus(const CpuTopology& topology) {
  const std::vector<CpuCore> cores = topology.cores();
  const std::span<const CpuCore> all = cores;
  if (cores.size() >= 2) {
    const std::size_t half = cores.size() / 2;
    return {cores_first(all.first(half)), cores_first(all.subspan(half))};
  }
  const std::vector<int> cpus = cores_first(all);
  if (cpus.size() <= 1) return {cpus, cpus};
  const auto half = std::ptrdiff_t(cpus.size() / 2);
  return {{cpus.begin(), cpus.begin() + half}, {cpus.begin() + half, cpus.end()}};
}

}  // namespace hp::platform
