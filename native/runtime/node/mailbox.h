// Mailbox: the shared-memory rings between the node worker (the parent process) and one chip
// process (internal to the node runtime).
//
// The parent maps every mailbox (anonymous shared memory) before it forks the chips, so both
// sides see it at the same address. Layout of one mailbox:
//
//   MailboxHeader        the chip's state word and init error, the one-way shutdown flag, the
//                        two rings' control words (each group on its own cache lines)
//   request data         `capacity` bytes: parent -> chip frames
//   reply data           `capacity` bytes: chip -> parent frames
//
// A ring is a byte ring of records: u32 payload bytes, u32 frame type, the payload, padded to
// 8 bytes. head and tail count bytes written and consumed (64-bit, never wrap); a record that
// does not fit before the end of the data is preceded by a wrap record that fills the rest.
// One consumer per ring; producers of one process serialise on the Ring object's mutex (the
// request ring's are the parent's threads, the reply ring's the chip's).
//
// Ordering: the producer writes the record, then head (release), then notifies the ring's data
// event; the consumer reads head (acquire), copies the record out, then moves tail (release) and
// notifies the space event. Every wait has a deadline and a cancellation test (the peer died,
// or shutdown), and the words live in shared memory: process-shared futexes.
#ifndef HYPER_PARALLEL_RUNTIME_NODE_MAILBOX_H_
#define HYPER_PARALLEL_RUNTIME_NODE_MAILBOX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "platform/wait.h"

namespace hp::runtime::node {

// The life of a chip process, in MailboxHeader::state.
enum class ChipState : std::uint32_t { kStarting = 0, kReady = 1, kFailed = 2 };

struct alignas(64) RingControl {
  alignas(64) std::atomic<std::uint64_t> head{0};  // bytes written
  alignas(64) std::atomic<std::uint64_t> tail{0};  // bytes consumed
  alignas(64) platform::WaitWord space;            // bumped when tail moves
};

struct alignas(64) MailboxHeader {
  std::atomic<std::uint32_t> state{0};      // ChipState, written by the chip
  std::atomic<std::uint32_t> init_code{0};  // its ErrorCode (state kFailed), before state
  char init_error[1024] = {};               // why the chip failed to start (state kFailed)
  alignas(64) std::atomic<std::uint32_t> shutdown{0};  // set once by the parent, never cleared
  alignas(64) platform::WaitWord state_event;          // bumped with state
  alignas(64) platform::WaitWord request_event;        // bumped with request.head
  RingControl request;
  RingControl reply;
};

struct Frame {
  std::uint32_t type = 0;
  std::vector<std::byte> payload;
};

class Ring {
 public:
  static constexpr std::uint32_t kWrap = 0;  // the frame type of a wrap record

  // `data_event`: what the consumer waits on (the parent's consumer waits on one event for every
  // chip's reply ring).
  Ring(RingControl* control, std::byte* data, std::size_t capacity, platform::WaitWord* data_event,
       platform::WaitPolicy policy);

  // Producer: appends a frame, waiting for space until `deadline` (TIMEOUT) or `cancelled()`
  // (which returns the reason; OK: not cancelled). A frame larger than half the ring is
  // INVALID_ARGUMENT.
  Status write(std::uint32_t type, std::span<const std::byte> payload,
               platform::Clock::time_point deadline, const std::function<Status()>& cancelled);
  // Consumer: takes the next frame if there is one.
  bool read(Frame* frame);
  bool empty() const noexcept;

 private:
  RingControl* control_;
  std::byte* data_;
  std::size_t capacity_;
  platform::WaitWord* data_event_;
  platform::WaitPolicy policy_;
  std::mutex producers_;
};

// The bytes one mailbox of rings of `capacity` bytes takes (capacity: a multiple of 64).
std::size_t mailbox_bytes(std::size_t capacity) noexcept;

// One chip's mailbox, viewed from either side.
struct Mailbox {
  Mailbox(std::byte* memory, std::size_t capacity, platform::WaitWord* reply_event,
          platform::WaitPolicy policy);
  MailboxHeader* header;
  Ring request;
  Ring reply;
};

// The waits of a party whose peer may run on the same CPUs: no spinning, a short yield.
platform::WaitPolicy mailbox_policy() noexcept;

}  // namespace hp::runtime::node

#endif  // HYPER_PARALLEL_RUNTIME_NODE_MAILBOX_H_
