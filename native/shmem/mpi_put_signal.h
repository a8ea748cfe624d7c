// put_signal as one MPI message, for the MPI transport (transport_mpi.cpp; part of its plugin).
//
// Over MPI-3 RMA a put_signal is a put, a flush of it (a round trip: MPI orders accumulates
// only to one location, so nothing cheaper orders the data before the signal) and then the
// signal's accumulate. Where the target applies RMA only in its own MPI calls anyway (the
// pt2pt and ucx one-sided components over a network), the message path sends data and signal
// together in one message on a communicator of its own: one way instead of a round trip.
//
// The target applies a message in its progress (the transport's progress(), called by every
// wait, and by every call that waits for messages itself): it copies the data into its segment,
// then updates the signal with an MPI atomic on its own window (the word stays atomic with the
// other PEs' MPI atomics on it). One sender's messages arrive in the order they were sent
// (MPI's non-overtaking rule). The sender counts what it sent and what the target applied, per
// PE: remote completion (the transport's flush of the PE, quiet) and the calls that read the
// target (get, fetching atomics) first wait until every message to it was applied.
//
// Acknowledgements cost no message of their own where the traffic goes both ways: every
// message carries how many of its target's messages its sender has applied. A sender that must
// know more asks (request_acks): the target answers in its next progress with its count, which
// covers every message sent before the request (they arrive before it). A message acknowledged
// by one of its own would add a send and a receive to every put_signal's path (a third of a
// ping-pong's round trip over TCP); asking costs one round trip per completion instead, as a
// flush of RMA does, and, like one over the components that need this path, needs the
// target's progress.
//
// Wire format (tags): kData: Header then `bytes` bytes of data; kAckRequest: empty; kAck: the
// count of the receiver's messages applied (8 bytes). The transport calls it under its MPI
// lock, a mutex only below MPI_THREAD_MULTIPLE; this class's own mutex guards its state for
// threads calling at once.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hp::shmem {

class MpiPutSignal {
 public:
  // Data above this goes by RMA (then a flush and the signal): a larger message is not sent
  // eagerly, it waits for the target's progress before its data moves.
  static constexpr std::size_t kMaxBytes = std::size_t(32) << 10;

  // comm: a communicator of the world's PEs for these messages only (freed by the destructor);
  // win, own_disp: this PE's window and the displacement of its segment in it; segment,
  // segment_bytes: this PE's segment.
  MpiPutSignal(MPI_Comm comm, MPI_Win win, MPI_Aint own_disp, std::byte* segment,
               std::size_t segment_bytes);
  ~MpiPutSignal();
  MpiPutSignal(const MpiPutSignal&) = delete;
  MpiPutSignal& operator=(const MpiPutSignal&) = delete;

  // Sends `bytes` of `source` for segment offset `offset` of `pe`, then its signal (add or
  // set) at `signal_offset`; `source` may be reused on return (the message holds a copy).
  Status send(int pe, std::size_t offset, const void* source, std::size_t bytes,
              std::size_t signal_offset, std::uint64_t signal, bool add);
  // Applies the messages that arrived, answers requests for acknowledgements, and counts the
  // acknowledgements received. A failure is kept (logged once) and returned by every later call.
  Status drain();
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
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> message;  // Header + data, alive until the send completes
  };
  static constexpr int kData = 1;
  static constexpr int kAck = 2;
  static constexpr int kAckRequest = 3;

  Status drain_locked();
  // Applies a kData message; *applied: the sender's count of this PE's messages it applied.
  Status apply(int source, const std::vector<std::byte>& message, std::uint64_t* applied);
  Status complete_sends();  // frees the buffers of the sends MPI completed
  // Sends `message` with `tag` to `pe`, its buffer kept in sends_ until the send completes.
  Status post(int pe, int tag, std::vector<std::byte> message, std::string_view what);
  void acknowledged(int pe, std::uint64_t count) noexcept;  // raises acked_[pe] to count (locked)

  MPI_Comm comm_;
  MPI_Win win_;
  MPI_Aint own_disp_;
  std::byte* segment_;
  std::size_t segment_bytes_;
  int rank_ = -1;
  std::mutex mutex_;  // sends_, received_, failed_, applied_, requested_; writes of sent_, acked_
  std::deque<Send> sends_;
  std::vector<std::byte> received_;
  Status failed_;  // the first failure of drain()
  // Per PE: messages sent to it, and how many of them it acknowledged.
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> acked_;
  // Per PE: its messages applied here, and the sent_ count the last request to it covers.
  std::vector<std::uint64_t> applied_;
  std::vector<std::uint64_t> requested_;
  int n_pes_ = 0;
};

}  // namespace hp::shmem
