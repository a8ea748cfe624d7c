// Cross-core synchronization of one launch: flag counters and an all-block barrier.
//
// Flags have soft-sync semantics (docs/design.md, glossary): each flag is a monotonically
// increasing 32-bit counter; set_flag adds to it with release ordering, wait_flag(target) returns
// once the counter reaches `target` with acquire ordering (it does not consume). Everything a block
// wrote before set_flag is visible to a block whose wait_flag saw that set. Counters start at
// 0 for every launch; they must not wrap within a launch (2^32 sets).
#ifndef HYPER_PARALLEL_PLATFORM_CROSS_CORE_SYNC_H_
#define HYPER_PARALLEL_PLATFORM_CROSS_CORE_SYNC_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "platform/wait.h"

namespace hp::platform {

class FlagTable {
 public:
  explicit FlagTable(int count);

  // Back to `count` flags at 0, for the next launch (no waiter may remain). Allocates only when
  // the table grows; zeroes only when a flag was set since the last reset.
  void reset(int count);
  int size() const noexcept { return count_; }
  std::uint32_t value(int id) const noexcept;
  // False when the counter wrapped past 2^32 - 1 (the flag is then meaningless).
  bool add(int id, std::uint32_t delta) noexcept;
  WaitResult wait_at_least(int id, std::uint32_t target, Clock::time_point deadline,
                           const WaitPolicy& policy, const std::function<bool()>& cancelled,
                           std::uint32_t* last);
  void wake_all() noexcept;  // after a cancellation

 private:
  struct alignas(64) Slot {  // one cache line per flag: no false sharing between flags
    WaitWord word;
  };
  int count_;
  int capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<bool> dirty_{false};  // a flag was set since the last reset
};

// A reusable barrier for a fixed number of parties (generation counting). A party that times
// out cannot withdraw its arrival, so a timeout breaks the barrier: every later or pending
// arrive_and_wait returns kCancelled instead of passing with a party missing.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}

  // A fresh barrier for `parties`, for the next launch (no waiter may remain).
  void reset(int parties) noexcept {  // writes only what changes (see LaunchState::rearm)
    if (count_.load(std::memory_order_relaxed) != 0) count_.store(0, std::memory_order_relaxed);
    if (broken_.load(std::memory_order_relaxed)) broken_.store(false, std::memory_order_relaxed);
    if (parties_ != parties) parties_ = parties;
  }
  // `arrived` receives how many parties had arrived when the wait ended.
  WaitResult arrive_and_wait(Clock::time_point deadline, const WaitPolicy& policy,
                             const std::function<bool()>& cancelled, int* arrived);
  // Breaks the barrier and wakes every waiter (after a failure elsewhere).
  void break_all() noexcept;
  int parties() const noexcept { return parties_; }

 private:
  alignas(64) WaitWord generation_;
  alignas(64) std::atomic<std::uint32_t> count_{0};
  std::atomic<bool> broken_{false};
  int parties_;
};

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_CROSS_CORE_SYNC_H_
