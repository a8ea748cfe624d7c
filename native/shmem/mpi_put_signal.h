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
// other PEs' MPI atomics on it), then acknowledges with an empty message. One sender's messages
// arrive in the order they were sent (MPI's non-overtaking rule). The sender counts what it
// sent and what was acknowledged, per PE: remote completion (the transport's flush of the PE,
// quiet) and the calls that read the target (get, fetching atomics) first wait until every
// message to it was applied.
//
// Wire format: Header then `bytes` bytes of data (tag kData); an acknowledgement is an empty
// message (tag kAck). The transport calls it under its MPI lock, a mutex only below
// MPI_THREAD_MULTIPLE; this class's own mutex guards its state for threads calling at once.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
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
  // Applies the messages that arrived, acknowledges them, and counts acknowledgements. A
  // failure is kept (logged once) and returned by every later call.
  Status drain();
  // Messages sent to `pe` (-1: to any PE) not acknowledged yet.
  std::uint64_t unapplied(int pe) const noexcept;

 private:
  struct Header {
    std::uint64_t offset;
    std::uint64_t bytes;
    std::uint64_t signal_offset;
    std::uint64_t signal;
    std::uint64_t add;  // 1: add, 0: set
  };
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> message;  // Header + data, alive until the send completes
  };
  static constexpr int kData = 1;
  static constexpr int kAck = 2;

  Status drain_locked();
  Status apply(int source, const std::vector<std::byte>& message);
  Status complete_sends();  // frees the buffers of the sends MPI completed

  MPI_Comm comm_;
  MPI_Win win_;
  MPI_Aint own_disp_;
  std::byte* segment_;
  std::size_t segment_bytes_;
  int rank_ = -1;
  std::mutex mutex_;  // sends_, received_ and failed_
  std::deque<Send> sends_;
  std::vector<std::byte> received_;
  Status failed_;  // the first failure of drain()
  // Per PE: messages sent to it, and acknowledgements received from it.
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> acked_;
  int n_pes_ = 0;
};

}  // namespace hp::shmem
