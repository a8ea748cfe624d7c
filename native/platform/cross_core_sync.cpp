#include "platform/cross_core_sync.h"

namespace hp::platform {

FlagTable::FlagTable(int count)
    : count_(count), capacity_(count), slots_(std::make_unique<Slot[]>(count)) {}

void FlagTable::reset(int count) {
  if (count > capacity_) {
    slots_ = std::make_unique<Slot[]>(count);
    capacity_ = count;
  } else if (dirty_.load(std::memory_order_relaxed)) {
    for (int i = 0; i < count_; ++i) slots_[i].word.value.store(0, std::memory_order_relaxed);
  }
  if (dirty_.load(std::memory_order_relaxed)) dirty_.store(false, std::memory_order_relaxed);
  if (count_ != count) count_ = count;
}

std::uint32_t FlagTable::value(int id) const noexcept {
  return slots_[id].word.value.load(std::memory_order_acquire);
}

bool FlagTable::add(int id, std::uint32_t delta) noexcept {
  if (!dirty_.load(std::memory_order_relaxed)) dirty_.store(true, std::memory_order_relaxed);
  const std::uint32_t now = add_and_wake(slots_[id].word, delta, /*process_shared=*/false);
  return now >= delta;  // unsigned wrap-around leaves the sum below the addend
}

WaitResult FlagTable::wait_at_least(int id, std::uint32_t target, Clock::time_point deadline,
                                    const WaitPolicy& policy,
                                    const std::function<bool()>& cancelled, std::uint32_t* last) {
  return wait_word(
      slots_[id].word, [target](std::uint32_t v) { return v >= target; }, deadline, policy,
      cancelled, last);
}

void FlagTable::wake_all() noexcept {
  for (int i = 0; i < count_; ++i) platform::wake_all(slots_[i].word, false);
}

WaitResult Barrier::arrive_and_wait(Clock::time_point deadline, const WaitPolicy& policy,
                                    const std::function<bool()>& cancelled, int* arrived) {
  if (broken_.load(std::memory_order_acquire)) {
    *arrived = int(count_.load(std::memory_order_relaxed));
    return WaitResult::kCancelled;
  }
  const std::uint32_t generation = generation_.value.load(std::memory_order_acquire);
  const std::uint32_t count = count_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (count == std::uint32_t(parties_)) {
    // Reset before releasing the others: a party that passes and arrives again at the next
    // barrier increments the fresh count only after it has seen the new generation.
    count_.store(0, std::memory_order_relaxed);
    add_and_wake(generation_, 1, false);
    *arrived = parties_;
    return WaitResult::kReady;
  }
  auto stop = [&] { return broken_.load(std::memory_order_acquire) || (cancelled && cancelled()); };
  std::uint32_t last = 0;
  WaitResult r = wait_word(
      generation_, [generation](std::uint32_t v) { return v != generation; }, deadline, policy,
      stop, &last);
  *arrived = r == WaitResult::kReady ? parties_ : int(count_.load(std::memory_order_relaxed));
  if (r == WaitResult::kTimedOut) break_all();
  return r;
}

void Barrier::break_all() noexcept {
  broken_.store(true, std::memory_order_seq_cst);
  platform::wake_all(generation_, false);
}

}  // namespace hp::platform
