#include "runtime/callable_registry.h"

namespace hp::runtime {

Status CallableRegistry::add(const Callable& callable, int* slot) {
  HP_ENSURE(!callable.empty(), ErrorCode::kInvalidArgument,
            "register_callable: callable '{}' has no function", callable.name());
  std::lock_guard lock(mutex_);
  if (auto it = slot_of_.find(callable.handle().digest); it != slot_of_.end()) {
    ++entries_[static_cast<std::size_t>(it->second)].references;
    *slot = it->second;
    return Status::ok();
  }
  int s;
  if (!free_slots_.empty()) {
    s = free_slots_.back();
    free_slots_.pop_back();
  } else {
    s = static_cast<int>(entries_.size());
    entries_.emplace_back();
  }
  entries_[static_cast<std::size_t>(s)] = {std::make_shared<const Callable>(callable), 1};
  slot_of_.emplace(callable.handle().digest, s);
  *slot = s;
  return Status::ok();
}

Status CallableRegistry::remove(int slot) {
  std::lock_guard lock(mutex_);
  HP_ENSURE(slot >= 0 && slot < static_cast<int>(entries_.size()) &&
                entries_[static_cast<std::size_t>(slot)].callable,
            ErrorCode::kNotFound, "unregister_callable({}): no callable is registered in that slot",
            slot);
  Entry& entry = entries_[static_cast<std::size_t>(slot)];
  if (--entry.references == 0) {
    slot_of_.erase(entry.callable->handle().digest);
    entry.callable.reset();
    free_slots_.push_back(slot);
    generation_.fetch_add(1, std::memory_order_release);
  }
  return Status::ok();
}

Status CallableRegistry::get(int slot, std::shared_ptr<const Callable>* out) const {
  std::lock_guard lock(mutex_);
  HP_ENSURE(slot >= 0 && slot < static_cast<int>(entries_.size()) &&
                entries_[static_cast<std::size_t>(slot)].callable,
            ErrorCode::kNotFound,
            "callable slot {} is not registered (register_callable returns the slot)", slot);
  *out = entries_[static_cast<std::size_t>(slot)].callable;
  return Status::ok();
}

int CallableRegistry::references(int slot) const {
  std::lock_guard lock(mutex_);
  if (slot < 0 || slot >= static_cast<int>(entries_.size())) return 0;
  return entries_[static_cast<std::size_t>(slot)].references;
}

}  // namespace hp::runtime
