#include "tensor_map.h"

#include <algorithm>

namespace hp::runtime {

void TensorMap::find(std::span<const TensorAccess> accesses,
                     const std::function<bool(TaskId)>& retired,
                     std::vector<FoundDependency>* found) {
  std::erase_if(entries_, [&](const Entry& e) { return retired(e.task); });
  for (const TensorAccess& a : accesses) {
    if (a.tag == ArgTag::kOutput || a.region.empty()) continue;
    for (const Entry& e : entries_) {
      const bool no_dep = a.tag == ArgTag::kNoDep;
      if (no_dep && !e.creator) continue;
      if (!overlaps(a.region, e.region)) continue;
      FoundDependency f;
      f.dep.pred = e.task;
      f.dep.arg_index = a.arg_index;
      f.dep.source = e.creator ? DepSource::kCreator : DepSource::kTensorMap;
      f.keeps_alive = e.creator;
      f.orders = !no_dep;
      switch (a.tag) {
        case ArgTag::kInput:
          if (!e.write) f.orders = false;
          f.dep.kind = DepKind::kRaw;
          break;
        case ArgTag::kInOut:
          f.dep.kind = e.write ? DepKind::kRaw : DepKind::kWar;
          break;
        case ArgTag::kOutputExisting:
          f.dep.kind = e.write ? DepKind::kWaw : DepKind::kWar;
          break;
        case ArgTag::kNoDep:
        case ArgTag::kOutput:
          f.dep.kind = DepKind::kRaw;
          break;
      }
      if (f.orders || f.keeps_alive) found->push_back(f);
    }
  }
}

void TensorMap::record(TaskId task, std::span<const TensorAccess> accesses) {
  for (const TensorAccess& a : accesses) {
    if (a.tag == ArgTag::kNoDep || a.region.empty()) continue;
    const bool write = a.tag != ArgTag::kInput;
    if (write && a.region.contiguous()) {
      std::erase_if(entries_, [&](const Entry& e) {
        return !e.creator && e.task != task && covers(a.region, e.region);
      });
    }
    entries_.push_back({a.region, task, write, a.tag == ArgTag::kOutput});
  }
}

}  // namespace hp::runtime
