#include "platform/cpu_topology.h"

#include <hwloc.h>

static_assert(HWLOC_API_VERSION >= 0x00020000, "hwloc 2.x: NUMA nodes are memory children");

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "platform/cpu_affinity.h"

namespace hp::platform {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// The cores (or, on a machine hwloc reports no cores for, the PUs) inside `cpuset`.
std::vector<hwloc_obj_t> cores_inside(hwloc_topology_t t, hwloc_const_cpuset_t cpuset) {
  std::vector<hwloc_obj_t> cores;
  const hwloc_obj_type_t type =
      hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t o = nullptr;
       (o = hwloc_get_next_obj_inside_cpuset_by_type(t, cpuset, type, o));) {
    cores.push_back(o);
  }
  return cores;
}

// Reads the loaded topology `t`, keeping the CPUs of `keep` (all of them when null).
CpuTopology read_topology(hwloc_topology_t t, const std::set<int>* keep, std::string source) {
  CpuTopology out;
  out.source = std::move(source);
  std::set<unsigned> seen_cores;  // global indices of cores already under an earlier node
  std::set<int> packages;
  const int n_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n_nodes; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(i));
    NumaNode n{.os_index = int(node->os_index), .cores = {}};
    for (hwloc_obj_t core : cores_inside(t, node->cpuset)) {
      if (!seen_cores.insert(core->gp_index).second) continue;
      CpuCore c;
      for (hwloc_obj_t pu = nullptr;
           (pu = hwloc_get_next_obj_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU, pu));) {
        if (keep == nullptr || keep->count(int(pu->os_index))) c.cpus.push_back(int(pu->os_index));
      }
      if (c.cpus.empty()) continue;
      if (hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, core)) {
        packages.insert(int(package->logical_index));
      }
      n.cores.push_back(std::move(c));
    }
    if (!n.cores.empty()) out.nodes.push_back(std::move(n));
  }
  out.packages = std::max<int>(1, int(packages.size()));
  return out;
}

Status load(const char* synthetic, const std::set<int>* keep, ErrorCode bad_description,
            CpuTopology* out) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status::error(ErrorCode::kSystemError, "hwloc_topology_init failed: {}",
                         std::strerror(errno));
  }
  TopologyHandle t(raw);
  if (synthetic != nullptr && hwloc_topology_set_synthetic(raw, synthetic) != 0) {
    return Status::error(bad_description,
                         "'{}' is not a synthetic topology hwloc accepts (e.g. \"package:2 numa:2 "
                         "core:8 pu:2\")",
                         synthetic);
  }
  if (hwloc_topology_load(raw) != 0) {
    return Status::error(ErrorCode::kSystemError, "hwloc_topology_load failed: {}",
                         std::strerror(errno));
  }
  // HWLOC_XMLFILE or HWLOC_FSROOT make hwloc describe another machine: nothing of it is ours.
  const bool this_system = synthetic == nullptr && hwloc_topology_is_thissystem(raw) != 0;
  *out =
      read_topology(raw, this_system ? keep : nullptr,
                    synthetic != nullptr ? fmt::format("synthetic: {}", synthetic)
                    : this_system        ? std::string("this system")
                                  : std::string("another system (HWLOC_XMLFILE or HWLOC_FSROOT)"));
  HP_ENSURE(!out->nodes.empty(), ErrorCode::kInternal,
            "hwloc reports no NUMA node holding any of this process's CPUs");
  return Status::ok();
}

}  // namespace

int CpuTopology::core_count() const {
  int n = 0;
  for (const NumaNode& node : nodes) n += int(node.cores.size());
  return n;
}

int CpuTopology::cpu_count() const {
  int n = 0;
  for (const NumaNode& node : nodes) {
    for (const CpuCore& core : node.cores) n += int(core.cpus.size());
  }
  return n;
}

std::vector<CpuCore> CpuTopology::cores() const {
  std::vector<CpuCore> out;
  for (const NumaNode& node : nodes) out.insert(out.end(), node.cores.begin(), node.cores.end());
  return out;
}

Status load_cpu_topology(CpuTopology* out) {
  const char* synthetic = std::getenv("HWLOC_SYNTHETIC");
  if (synthetic != nullptr && *synthetic != '\0') {
    return load(synthetic, nullptr, ErrorCode::kInvalidSetting, out)
        .with_context("HWLOC_SYNTHETIC (fix or unset it)");
  }
  std::vector<int> allowed;
  HP_RETURN_IF_ERROR(allowed_cpus(&allowed));
  const std::set<int> keep(allowed.begin(), allowed.end());
  return load(nullptr, &keep, ErrorCode::kInternal, out);
}

Status synthetic_cpu_topology(std::string_view description, CpuTopology* out) {
  const std::string text(description);
  return load(text.c_str(), nullptr, ErrorCode::kInvalidArgument, out);
}

}  // namespace hp::platform
