#include "runtime/deferral_registry.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "common/logging.h"

namespace hp::runtime {

namespace {
constexpr auto kMinPoll = std::chrono::microseconds(1);
constexpr auto kMaxPoll = std::chrono::microseconds(100);
}  // namespace

bool DeferredCompletion::complete(Status status) noexcept {
  if (registry_ == nullptr) return false;
  return registry_->complete(key_, std::move(status));
}

DeferralRegistry::DeferralRegistry(double timeout_s, Finish finish)
    : timeout_s_(timeout_s), finish_(std::move(finish)) {}

DeferralRegistry::~DeferralRegistry() noexcept { close(); }

std::string DeferralRegistry::waits_for(const Entry& e) {
  if (e.word == nullptr) return e.waits_for.empty() ? "its DeferredCompletion" : e.waits_for;
  return fmt::format("the word at {} to reach {} (it holds {})", static_cast<const void*>(e.word),
                     e.target, __atomic_load_n(e.word, __ATOMIC_ACQUIRE));
}

std::uint64_t DeferralRegistry::add(TaskSlot* slot, TaskId id, std::string name,
                                    const std::uint64_t* word, std::uint64_t target,
                                    std::string waits_for) {
  std::unique_lock lock(mutex_);
  const std::uint64_t key = next_key_++;
  entries_.emplace(key, Entry{.slot = slot,
                              .id = id,
                              .name = std::move(name),
                              .word = word,
                              .waits_for = std::move(waits_for),
                              .target = target,
                              .deadline = platform::deadline_after(timeout_s_)});
  if (word != nullptr) ++words_;
  if (!watcher_.joinable() && !closed_) {
    watcher_ = std::thread([this] { watch(); });
  } else if (word != nullptr || entries_.at(key).deadline < wakes_at_) {
    // The watcher sleeps until wakes_at_, or polls words: a DeferredCompletion's deadline
    // (later than every earlier one's) needs no earlier look.
    changed_.notify_all();
  }
  return key;
}

DeferredCompletion DeferralRegistry::handle(std::uint64_t key, TaskId id) {
  return DeferredCompletion(shared_from_this(), key, id);
}

void DeferralRegistry::finish_claimed(std::unique_lock<std::mutex>& lock, std::uint64_t key,
                                      Status status) {
  auto it = entries_.find(key);
  TaskSlot* slot = it->second.slot;
  if (it->second.word != nullptr) --words_;
  entries_.erase(it);
  ++active_;
  lock.unlock();
  finish_(slot, std::move(status));
  lock.lock();
  if (--active_ == 0 && closed_) changed_.notify_all();  // close() waits for none inside
}

bool DeferralRegistry::complete(std::uint64_t key, Status status) noexcept {
  std::unique_lock lock(mutex_);
  if (closed_ || !entries_.contains(key)) return false;
  finish_claimed(lock, key, std::move(status));
  return true;
}

bool DeferralRegistry::withdraw(std::uint64_t key) noexcept {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  if (it->second.word != nullptr) --words_;
  entries_.erase(it);
  return true;
}

bool DeferralRegistry::pending() noexcept {
  std::lock_guard lock(mutex_);
  return !entries_.empty() || active_ > 0;
}

void DeferralRegistry::cancel_words() noexcept {
  std::lock_guard lock(mutex_);
  cancel_ = true;
  changed_.notify_all();
}

void DeferralRegistry::close() noexcept {
  std::thread watcher;
  {
    std::unique_lock lock(mutex_);
    closed_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return active_ == 0; });
    watcher = std::move(watcher_);
  }
  if (watcher.joinable()) watcher.join();
}

void DeferralRegistry::watch() noexcept {
  std::unique_lock lock(mutex_);
  auto poll = kMinPoll;
  while (!closed_) {
    const auto now = platform::Clock::now();
    // One due entry per pass: finishing it releases the lock, and the map may change meanwhile.
    std::uint64_t due = 0;
    Status why;
    auto nearest = platform::Clock::time_point::max();
    for (const auto& [key, e] : entries_) {
      if (e.word != nullptr && __atomic_load_n(e.word, __ATOMIC_ACQUIRE) >= e.target) {
        due = key;
        break;
      }
      if (e.word != nullptr && cancel_) {
        due = key;
        why = Status::error(ErrorCode::kAborted,
                            "task {} (callable '{}') skipped the rest of its wait for {}: the run "
                            "already failed",
                            e.id, e.name, waits_for(e));
        break;
      }
      if (now >= e.deadline) {
        due = key;
        why = Status::error(ErrorCode::kTimeout,
                            "task {} (callable '{}') deferred its completion and did not complete "
                            "within {} s: it waited for {} (OrchestratorConfig.wait_timeout_s or "
                            "HP_WAIT_TIMEOUT_S sets the deadline)",
                            e.id, e.name, timeout_s_, waits_for(e));
        break;
      }
      nearest = std::min(nearest, e.deadline);
    }
    if (due != 0) {
      finish_claimed(lock, due, std::move(why));
      poll = kMinPoll;
      continue;
    }
    if (words_ > 0) {
      // Nobody wakes us for a word: look again soon, less often the longer nothing comes.
      wakes_at_ = std::min(nearest, now + poll);  // nearest may be max()
      changed_.wait_until(lock, wakes_at_);
      poll = std::min(poll * 2, std::chrono::duration_cast<std::chrono::microseconds>(kMaxPoll));
    } else if (nearest == platform::Clock::time_point::max()) {
      wakes_at_ = nearest;
      changed_.wait(lock);
      poll = kMinPoll;
    } else {
      wakes_at_ = nearest;
      changed_.wait_until(lock, nearest);
      poll = kMinPoll;
    }
    wakes_at_ = platform::Clock::time_point::min();  // awake: add() need not wake it
  }
}

}  // namespace hp::runtime
