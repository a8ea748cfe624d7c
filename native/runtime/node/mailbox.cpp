#include "runtime/node/mailbox.h"

#include <cstring>
#include <new>

namespace hp::runtime::node {
namespace {

constexpr std::size_t kRecordHeader = 8;  // u32 payload bytes, u32 type

std::size_t padded(std::size_t bytes) noexcept { return (bytes + 7) / 8 * 8; }

}  // namespace

Ring::Ring(RingControl* control, std::byte* data, std::size_t capacity,
           platform::WaitWord* data_event, platform::WaitPolicy policy)
    : control_(control),
      data_(data),
      capacity_(capacity),
      data_event_(data_event),
      policy_(policy) {}

Status Ring::write(std::uint32_t type, std::span<const std::byte> payload,
                   platform::Clock::time_point deadline, const std::function<Status()>& cancelled) {
  const std::size_t record = kRecordHeader + padded(payload.size());
  HP_ENSURE(record <= capacity_ / 2, ErrorCode::kInvalidArgument,
            "a mailbox frame of {} bytes does not fit a ring of {} bytes (at most half of it)",
            payload.size(), capacity_);
  std::lock_guard lock(producers_);
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);
  const std::size_t position = std::size_t(head % capacity_);
  // A record never straddles the end: a wrap record fills what is left before it.
  const std::size_t wrap = capacity_ - position < record ? capacity_ - position : 0;
  const std::size_t needed = wrap + record;
  auto has_room = [&] {
    return head + needed - control_->tail.load(std::memory_order_acquire) <= capacity_;
  };
  if (!has_room()) {
    Status why;
    const auto result = platform::wait_event(control_->space, has_room, deadline, policy_, [&] {
      if (cancelled) why = cancelled();
      return !why.is_ok();
    });
    if (result == platform::WaitResult::kCancelled) return why;
    if (result == platform::WaitResult::kTimedOut) {
      return Status::error(ErrorCode::kTimeout,
                           "the mailbox ring stayed full ({} bytes): its reader does not read",
                           capacity_);
    }
  }
  std::byte* at = data_ + position;
  if (wrap != 0) {
    const std::uint32_t words[2] = {std::uint32_t(wrap - kRecordHeader), kWrap};
    std::memcpy(at, words, kRecordHeader);
    at = data_;
  }
  const std::uint32_t words[2] = {std::uint32_t(payload.size()), type};
  std::memcpy(at, words, kRecordHeader);
  if (!payload.empty()) std::memcpy(at + kRecordHeader, payload.data(), payload.size());
  control_->head.store(head + needed, std::memory_order_release);
  platform::notify_event(*data_event_, true);
  return Status::ok();
}

bool Ring::read(Frame* frame) {
  for (;;) {
    const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
    if (control_->head.load(std::memory_order_acquire) == tail) return false;
    const std::byte* at = data_ + tail % capacity_;
    std::uint32_t words[2];
    std::memcpy(words, at, kRecordHeader);
    const std::uint64_t record = kRecordHeader + padded(words[0]);
    if (words[1] != kWrap) {
      frame->type = words[1];
      frame->payload.assign(at + kRecordHeader, at + kRecordHeader + words[0]);
    }
    control_->tail.store(tail + record, std::memory_order_release);
    platform::notify_event(control_->space, true);
    if (words[1] != kWrap) return true;
  }
}

bool Ring::empty() const noexcept {
  return control_->head.load(std::memory_order_acquire) ==
         control_->tail.load(std::memory_order_relaxed);
}

std::size_t mailbox_bytes(std::size_t capacity) noexcept {
  return sizeof(MailboxHeader) + 2 * capacity;
}

Mailbox::Mailbox(std::byte* memory, std::size_t capacity, platform::WaitWord* reply_event,
                 platform::WaitPolicy policy)
    : header(reinterpret_cast<MailboxHeader*>(memory)),
      request(&header->request, memory + sizeof(MailboxHeader), capacity, &header->request_event,
              policy),
      reply(&header->reply, memory + sizeof(MailboxHeader) + capacity, capacity, reply_event,
            policy) {}

platform::WaitPolicy mailbox_policy() noexcept {
  return platform::WaitPolicy{
      .spin = 0, .yield_for = std::chrono::microseconds(50), .process_shared = true};
}

}  // namespace hp::runtime::node
