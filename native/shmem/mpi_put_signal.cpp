#include "shmem/mpi_put_signal.h"

#include <cstring>
#include <utility>

#include "common/logging.h"
#include "shmem/mpi_status.h"

namespace hp::shmem {

MpiPutSignal::MpiPutSignal(MPI_Comm comm, MPI_Win win, MPI_Aint own_disp, std::byte* segment,
                           std::size_t segment_bytes)
    : comm_(comm),
      win_(win),
      own_disp_(own_disp),
      segment_(segment),
      segment_bytes_(segment_bytes) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &n_pes_);
  sent_ = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t(n_pes_));
  acked_ = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t(n_pes_));
  applied_.assign(std::size_t(n_pes_), 0);
  requested_.assign(std::size_t(n_pes_), 0);
}

MpiPutSignal::~MpiPutSignal() {
  // Every message was applied before the world's last barrier (finalize quiets first), so its
  // send is complete or completes at once.
  for (Send& s : sends_) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm_);
}

Status MpiPutSignal::post(int pe, int tag, std::vector<std::byte> message, std::string_view what) {
  Send& s = sends_.emplace_back();
  s.message = std::move(message);
  const Status status = mpi_peer_status(
      MPI_Isend(s.message.data(), int(s.message.size()), MPI_BYTE, pe, tag, comm_, &s.request),
      what, pe, rank_);
  if (!status.is_ok()) sends_.pop_back();
  return status;
}

Status MpiPutSignal::send(int pe, std::size_t offset, const void* source, std::size_t bytes,
                          std::size_t signal_offset, std::uint64_t signal, bool add) {
  std::lock_guard lock(mutex_);
  HP_RETURN_IF_ERROR(complete_sends());
  std::vector<std::byte> message(sizeof(Header) + bytes);
  const Header header{.offset = offset,
                      .bytes = bytes,
                      .signal_offset = signal_offset,
                      .signal = signal,
                      .add = add ? 1u : 0u,
                      .applied = applied_[std::size_t(pe)]};
  std::memcpy(message.data(), &header, sizeof header);
  if (bytes > 0) std::memcpy(message.data() + sizeof header, source, bytes);
  HP_RETURN_IF_ERROR(post(pe, kData, std::move(message), "MPI_Isend of a put_signal"));
  ++sent_[std::size_t(pe)];
  return Status::ok();
}

Status MpiPutSignal::request_acks(int pe) {
  std::lock_guard lock(mutex_);
  for (int p = pe < 0 ? 0 : pe; p < (pe < 0 ? n_pes_ : pe + 1); ++p) {
    const std::uint64_t sent = sent_[std::size_t(p)].load();
    if (acked_[std::size_t(p)].load() >= sent || requested_[std::size_t(p)] >= sent) continue;
    HP_RETURN_IF_ERROR(
        post(p, kAckRequest, {}, "MPI_Isend of a put_signal acknowledgement request"));
    requested_[std::size_t(p)] = sent;
  }
  return Status::ok();
}

void MpiPutSignal::acknowledged(int pe, std::uint64_t count) noexcept {
  // Only drain() writes acked_, under the mutex: the counts need no compare-and-swap.
  std::atomic<std::uint64_t>& acked = acked_[std::size_t(pe)];
  if (count > acked.load()) acked.store(count);
}

Status MpiPutSignal::complete_sends() {
  while (!sends_.empty()) {
    int done = 0;
    HP_RETURN_IF_ERROR(mpi_status(MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE),
                                  "MPI_Test of a put_signal's send", -1));
    if (done == 0) break;
    sends_.pop_front();
  }
  return Status::ok();
}

Status MpiPutSignal::drain() {
  std::lock_guard lock(mutex_);
  if (!failed_.is_ok()) return failed_;
  Status status = drain_locked();
  if (!status.is_ok()) {
    // Kept: a PE that only waits on its words learns of it from no other call.
    HP_LOG_ERROR("shmem: PE {}: put_signal messages: {}", rank_, status.to_string());
    failed_ = status;
  }
  return status;
}

Status MpiPutSignal::drain_locked() {
  HP_RETURN_IF_ERROR(complete_sends());
  for (;;) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status probed;
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &message, &probed),
                   "MPI_Improbe of put_signal messages", -1));
    if (found == 0) return Status::ok();
    const int source = probed.MPI_SOURCE;
    int length = 0;
    MPI_Get_count(&probed, MPI_BYTE, &length);
    received_.resize(std::size_t(length));
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Mrecv(received_.data(), length, MPI_BYTE, &message, MPI_STATUS_IGNORE),
                   "MPI_Mrecv of a put_signal message", source));
    std::uint64_t count = 0;  // the sender's count of this PE's messages it applied
    switch (probed.MPI_TAG) {
      case kData:
        HP_RETURN_IF_ERROR(apply(source, received_, &count));
        ++applied_[std::size_t(source)];
        acknowledged(source, count);
        break;
      case kAck:
        HP_ENSURE(received_.size() == sizeof count, ErrorCode::kCorruptData,
                  "a put_signal acknowledgement from PE {} has {} bytes, not {}: a PE of another "
                  "build or a corrupted message; end the job",
                  source, received_.size(), sizeof count);
        std::memcpy(&count, received_.data(), sizeof count);
        acknowledged(source, count);
        break;
      case kAckRequest: {
        // Every message `source` sent before its request was applied above, in order.
        count = applied_[std::size_t(source)];
        std::vector<std::byte> answer(sizeof count);
        std::memcpy(answer.data(), &count, sizeof count);
        HP_RETURN_IF_ERROR(
            post(source, kAck, std::move(answer), "MPI_Isend of a put_signal acknowledgement"));
        break;
      }
      default:
        return Status::error(ErrorCode::kCorruptData,
                             "a put_signal message from PE {} has tag {}: a PE of another build; "
                             "end the job",
                             source, probed.MPI_TAG);
    }
  }
}

Status MpiPutSignal::apply(int source, const std::vector<std::byte>& message,
                           std::uint64_t* applied) {
  Header h{};
  const bool whole = message.size() >= sizeof h;
  if (whole) std::memcpy(&h, message.data(), sizeof h);
  if (!whole || message.size() - sizeof h != h.bytes || h.offset > segment_bytes_ ||
      h.bytes > segment_bytes_ - h.offset || h.signal_offset > segment_bytes_ - 8) {
    return Status::error(ErrorCode::kCorruptData,
                         "a put_signal message from PE {} to PE {} does not fit its segment "
                         "({} bytes): a PE of another build or a corrupted message; end the job",
                         source, rank_, message.size());
  }
  *applied = h.applied;
  if (h.bytes > 0) std::memcpy(segment_ + h.offset, message.data() + sizeof h, h.bytes);
  // The data is in the window before the signal says so.
  MPI_Win_sync(win_);
  const MPI_Aint disp = own_disp_ + MPI_Aint(h.signal_offset);
  HP_RETURN_IF_ERROR(
      mpi_status(MPI_Accumulate(&h.signal, 1, MPI_UINT64_T, rank_, disp, 1, MPI_UINT64_T,
                                h.add != 0 ? MPI_SUM : MPI_REPLACE, win_),
                 "MPI_Accumulate of a put_signal's signal", rank_));
  return mpi_status(MPI_Win_flush(rank_, win_), "MPI_Win_flush of a put_signal's signal", rank_);
}

std::uint64_t MpiPutSignal::unapplied(int pe) const noexcept {
  std::uint64_t n = 0;
  for (int p = pe < 0 ? 0 : pe; p < (pe < 0 ? n_pes_ : pe + 1); ++p) {
    // The acknowledgements first: a message is counted as sent before its acknowledgement can
    // arrive, so the count read after them is never below theirs.
    const std::uint64_t acked = acked_[std::size_t(p)].load();
    n += sent_[std::size_t(p)].load() - acked;
  }
  return n;
}

}  // namespace hp::shmem
