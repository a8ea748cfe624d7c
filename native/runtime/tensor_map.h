// TensorMap: which earlier tasks touched which memory, for inferring a new task's dependencies
// from its tensor arguments (orchestrator thread only; not thread-safe).
//
// Each recorded access is an entry {region, task, write?, creator?}. For a new access A and an
// entry E whose regions overlap (tensor_region.h):
//   A INPUT            E writes -> RAW
//   A INOUT            E writes -> RAW, E only reads -> WAR
//   A OUTPUT_EXISTING  E writes -> WAW, E only reads -> WAR
//   A OUTPUT           nothing (fresh memory from the heap ring)
//   A NO_DEP           no ordering; but when E created the memory (an OUTPUT), the new task
//                      keeps E's memory alive until it completes (keeps_alive)
// Every access that overlaps a creator entry keeps the creator's memory alive too.
// Entries of retired tasks (slot reclaimed) are dropped when met. A write with a contiguous
// region drops older non-creator entries it covers: whoever touches that memory later overlaps
// the new write and is ordered after it, hence after them. Creator entries stay until their
// task retires (they carry the memory's lifetime).
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_

#include <functional>
#include <span>
#include <vector>

#include "task_args.h"
#include "task_types.h"
#include "tensor_region.h"

namespace hp::runtime {

struct TensorAccess {
  TensorRegion region;
  ArgTag tag = ArgTag::kInput;
  int arg_index = 0;
};

struct FoundDependency {
  Dependency dep;
  bool orders = true;        // the new task must wait for dep.pred
  bool keeps_alive = false;  // the new task holds dep.pred's memory until it completes
};

class TensorMap {
 public:
  // Appends the new task's dependencies on entries of tasks for which retired() is false.
  void find(std::span<const TensorAccess> accesses, const std::function<bool(TaskId)>& retired,
            std::vector<FoundDependency>* found);
  // Records the task's accesses (NO_DEP ones are not recorded).
  void record(TaskId task, std::span<const TensorAccess> accesses);
  std::size_t size() const noexcept { return entries_.size(); }
  void clear() noexcept { entries_.clear(); }

 private:
  struct Entry {
    TensorRegion region;
    TaskId task;
    bool write;
    bool creator;
  };
  std::vector<Entry> entries_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_
