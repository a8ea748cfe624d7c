// One-sided operations as MPI messages the target applies, for the MPI transport
// (transport_mpi.cpp; part of its plugin): put_signal, and the atomics.
//
// Where the target applies RMA only in its own MPI calls anyway (the pt2pt and ucx one-sided
// components over a network), a message costs no more target progress than RMA does and saves
// round trips:
// - put_signal over MPI-3 RMA is a put, a flush of it (a round trip: MPI orders accumulates
//   only to one location, so nothing cheaper orders the data before the signal) and then the
//   signal's accumulate. As a message, data and signal go together: one way.
// - an MPI atomic over osc/ucx without network atomics (TCP) is three round trips, each served
//   by the target's progress: the window's accumulate lock taken by compare-and-swap (retried
//   while another PE holds it), the atomic, the lock's release. As a message it is one way (a
//   non-fetching one) or one round trip (a fetching one: the target answers with the old
//   value).
//
// The target applies a message in its progress (the transport's progress(), called by every
// wait, and by every call that waits for messages itself): it copies a put_signal's data into
// its segment, then does the signal update or the atomic with the CPU's atomics, or, when the
// job's atomics are MPI's (the transport's mpi_atomics_), with an MPI atomic on its own window:
// either way, the kind the other PEs' atomics on that word take. One
// sender's messages arrive in the order they were sent (MPI's non-overtaking rule), so its
// atomics on one word apply in the order it issued them. The sender counts what it sent and
// what the target applied, per PE: remote completion (the transport's flush of the PE, quiet)
// and the calls that read the target by RMA (get) first wait until every message to it was
// applied.
//
// Acknowledgements cost no message of their own where the traffic goes both ways: every
// message carries how many of its target's messages its sender has applied (a fetching
// atomic's answer too). A sender that must know more asks (request_acks): the target answers
// in its next progress with its count, which covers every message sent before the request
// (they arrive before it). A message acknowledged by one of its own would add a send and a
// receive to every put_signal's path (bench/shmem/RESULTS.md, the TCP rows); asking
// costs one round trip per completion instead, as a flush of RMA does, and, like one over the
// components that need this path, needs the target's progress.
//
// Wire format (tags): kData: Header then `bytes` bytes of data; kAtomic: AtomicHeader;
// kAtomicResult: AtomicResult; kAckRequest: empty; kAck: the count of the receiver's messages
// applied (8 bytes). The transport calls it under its MPI lock, a mutex only below
// MPI_THREAD_MULTIPLE; this class's own mutex guards its state for threads calling at once.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "shmem/transport.h"

namespace hp::shmem {

class MpiMessages {
 public:
  // Data above this goes by RMA (then a flush and the signal): a larger message is not sent
  // eagerly, it waits for the target's progress before its data moves.
  static constexpr std::size_t kMaxBytes = std::size_t(32) << 10;

  // comm: a communicator of the world's PEs for these messages only (freed by the destructor);
  // win, own_disp: this PE's window and the displacement of its segment in it; segment,
  // segment_bytes: this PE's segment. cpu_atomics: the messages' atomics and signal updates
  // apply with the CPU's atomics (no PE reaches this one by MPI atomics), otherwise with MPI
  // atomics on `win`.
  MpiMessages(MPI_Comm comm, MPI_Win win, MPI_Aint own_disp, std::byte* segment,
              std::size_t segment_bytes, bool cpu_atomics);
  ~MpiMessages();
  MpiMessages(const MpiMessages&) = delete;
  MpiMessages& operator=(const MpiMessages&) = delete;

  // Sends `bytes` of `source` for segment offset `offset` of `pe`, then its signal (add or
  // set) at `signal_offset`; `source` may be reused on return (the message holds a copy).
  Status send(int pe, std::size_t offset, const void* source, std::size_t bytes,
              std::size_t signal_offset, std::uint64_t signal, bool add);
  // Sends the atomic `op` on the `width`-byte word at segment offset `offset` of `pe` (operand,
  // compare: width bytes each, where `op` takes them). A fetching op gets a ticket: its old
  // value arrives by drain(), and take_result() hands it over.
  Status send_atomic(int pe, std::size_t offset, AtomicOp op, std::size_t width,
                     const void* operand, const void* compare, std::uint64_t* ticket);
  // Whether the old value of the fetching atomic `ticket` arrived; if so, writes its `width`
  // bytes to `result` and forgets it.
  bool take_result(std::uint64_t ticket, std::size_t width, void* result);
  // Applies the messages that arrived, answers requests for acknowledgements, and counts the
  // acknowledgements received; *received (optional): whether any message arrived. A failure is
  // kept (logged once) and returned by every later call.
  Status drain(bool* received = nullptr);
  // Asks `pe` (-1: every PE) to acknowledge what it applied, unless nothing sent to it is
  // unacknowledged or an earlier request covers it all; drain() counts the answers.
  Status request_acks(int pe);
  // Messages sent to `pe` (-1: to any PE) not acknowledged yet.
  std::uint64_t unapplied(int pe) const noexcept;

 private:
  struct Header {
    std::uint64_t offset;
    std::uint64_t bytes;
    std::uint64_t signal_offset;
    std::uint64_t signal;
    std::uint64_t add;      // 1: add, 0: set
    std::uint64_t applied;  // messages of the receiver the sender has applied
  };
  struct AtomicHeader {
    std::uint64_t offset;
    std::uint64_t op;       // AtomicOp
    std::uint64_t width;    // 4 or 8
    std::uint64_t operand;  // the low `width` bytes (where op takes one)
    std::uint64_t compare;  // the low `width` bytes (kCompareSwap)
    std::uint64_t ticket;   // 0: a non-fetching op, no answer
    std::uint64_t applied;  // messages of the receiver the sender has applied
  };
  struct AtomicResult {
    std::uint64_t ticket;
    std::uint64_t value;    // the word's old value, in the low `width` bytes
    std::uint64_t applied;  // messages of the receiver the sender has applied (this one's too)
  };
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> message;  // Header + data, alive until the send completes
  };
  static constexpr int kData = 1;
  static constexpr int kAck = 2;
  static constexpr int kAckRequest = 3;
  static constexpr int kAtomic = 4;
  static constexpr int kAtomicResult = 5;

  Status drain_locked(bool* received);
  // Applies a kData message; *applied: the sender's count of this PE's messages it applied.
  Status apply(int source, const std::vector<std::byte>& message, std::uint64_t* applied);
  // Applies a kAtomic message (h: its header, checked); *old: the word's old value for a
  // fetching op.
  Status apply_atomic(int source, const AtomicHeader& h, std::uint64_t* old);
  // `op` on this PE's `width`-byte word at segment offset `offset`, with the CPU's atomics or an
  // MPI atomic (cpu_atomics_); old: null, or where its old value goes.
  Status update(std::size_t offset, AtomicOp op, std::size_t width, const void* operand,
                const void* compare, void* old);
  Status complete_sends();  // frees the buffers of the sends MPI completed
  // Sends `message` with `tag` to `pe`, its buffer kept in sends_ until the send completes.
  Status post(int pe, int tag, std::vector<std::byte> message, std::string_view what);
  void acknowledged(int pe, std::uint64_t count) noexcept;  // raises acked_[pe] to count (locked)

  MPI_Comm comm_;
  MPI_Win win_;
  MPI_Aint own_disp_;
  std::byte* segment_;
  std::size_t segment_bytes_;
  bool cpu_atomics_;
  int rank_ = -1;
  std::mutex mutex_;  // sends_, received_, failed_, applied_, requested_, next_ticket_,
                      // results_; writes of sent_, acked_
  std::deque<Send> sends_;
  std::vector<std::byte> received_;
  Status failed_;  // the first failure of drain()
  // Per PE: messages sent to it, and how many of them it acknowledged.
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> acked_;
  // Per PE: its messages applied here, and the sent_ count the last request to it covers.
  std::vector<std::uint64_t> applied_;
  std::vector<std::uint64_t> requested_;
  std::uint64_t next_ticket_ = 1;
  std::unordered_map<std::uint64_t, std::uint64_t> results_;  // ticket -> old value, arrived
  int n_pes_ = 0;
};

}  // namespace hp::shmem
