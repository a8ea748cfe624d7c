// The callables registered on one ChipWorker, by integer slot, deduplicated by handle:
// registering a callable whose handle is already registered returns the same slot and adds a
// reference; unregister drops one reference and frees the slot at zero. Freed slots are reused.
// Thread-safe.
//
// generation() changes whenever a slot is freed (the only way a slot's callable can change), so
// a reader may cache slot -> callable and reuse it while the generation it read before looking
// the slot up is still current (Orchestrator's per-run cache does this, sparing the mutex).
#ifndef HYPER_PARALLEL_RUNTIME_CALLABLE_REGISTRY_H_
#define HYPER_PARALLEL_RUNTIME_CALLABLE_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "runtime/callable.h"

namespace hp::runtime {

class CallableRegistry {
 public:
  Status add(const Callable& callable, int* slot);
  Status remove(int slot);
  // The callable in `slot` (shared: it stays valid for tasks in flight after remove()).
  Status get(int slot, std::shared_ptr<const Callable>* out) const;
  int references(int slot) const;  // 0 for a free or invalid slot
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    std::shared_ptr<const Callable> callable;  // null: free slot
    int references = 0;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  std::map<Sha256Digest, int> slot_of_;
  std::vector<int> free_slots_;
  std::atomic<std::uint64_t> generation_{0};  // bumped (under mutex_) when a slot is freed
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_CALLABLE_REGISTRY_H_
