#include "shmem/mpi_messages.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "common/logging.h"
#include "shmem/mpi_atomic.h"
#include "shmem/mpi_status.h"

namespace hp::shmem {
namespace {

// A message of one fixed-size value: its bytes.
template <typename T>
std::vector<std::byte> bytes_of(const T& value) {
  std::vector<std::byte> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

// The value a message of one fixed-size `T` holds (what: the message, for the error).
template <typename T>
Status read_value(const std::vector<std::byte>& message, std::string_view what, int source,
                  T* out) {
  HP_ENSURE(message.size() == sizeof(T), ErrorCode::kCorruptData,
            "{} from PE {} has {} bytes, not {}: a PE of another build or a corrupted message; "
            "end the job",
            what, source, message.size(), sizeof(T));
  std::memcpy(out, message.data(), sizeof(T));
  return Status::ok();
}

}  // namespace

MpiMessages::MpiMessages(MPI_Comm comm, MPI_Win win, MPI_Aint own_disp, std::byte* segment,
                         std::size_t segment_bytes, bool cpu_atomics)
    : comm_(comm),
      win_(win),
      own_disp_(own_disp),
      segment_(segment),
      segment_bytes_(segment_bytes),
      cpu_atomics_(cpu_atomics) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &n_pes_);
  sent_ = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t(n_pes_));
  acked_ = std::make_unique<std::atomic<std::uint64_t>[]>(std::size_t(n_pes_));
  applied_.assign(std::size_t(n_pes_), 0);
  requested_.assign(std::size_t(n_pes_), 0);
}

MpiMessages::~MpiMessages() {
  // Every message was applied before the world's last barrier (finalize quiets first), so its
  // send is complete or completes at once.
  for (Send& s : sends_) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm_);
}

Status MpiMessages::post(int pe, int tag, std::vector<std::byte> message, std::string_view what) {
  Send& s = sends_.emplace_back();
  s.message = std::move(message);
  const Status status = mpi_peer_status(
      MPI_Isend(s.message.data(), int(s.message.size()), MPI_BYTE, pe, tag, comm_, &s.request),
      what, pe, rank_);
  if (!status.is_ok()) sends_.pop_back();
  return status;
}

Status MpiMessages::send(int pe, std::size_t offset, const void* source, std::size_t bytes,
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

Status MpiMessages::send_atomic(int pe, std::size_t offset, AtomicOp op, std::size_t width,
                                const void* operand, const void* compare, std::uint64_t* ticket) {
  std::lock_guard lock(mutex_);
  HP_RETURN_IF_ERROR(complete_sends());
  AtomicHeader header{.offset = offset,
                      .op = std::uint64_t(op),
                      .width = width,
                      .operand = 0,
                      .compare = 0,
                      .ticket = 0,
                      .applied = applied_[std::size_t(pe)]};
  if (operand != nullptr) std::memcpy(&header.operand, operand, width);
  if (compare != nullptr) std::memcpy(&header.compare, compare, width);
  if (ticket != nullptr) header.ticket = *ticket = next_ticket_++;
  HP_RETURN_IF_ERROR(post(pe, kAtomic, bytes_of(header), "MPI_Isend of an atomic"));
  ++sent_[std::size_t(pe)];
  return Status::ok();
}

bool MpiMessages::take_result(std::uint64_t ticket, std::size_t width, void* result) {
  std::lock_guard lock(mutex_);
  const auto it = results_.find(ticket);
  if (it == results_.end()) return false;
  std::memcpy(result, &it->second, width);
  results_.erase(it);
  return true;
}

Status MpiMessages::request_acks(int pe) {
  std::lock_guard lock(mutex_);
  for (int p = pe < 0 ? 0 : pe; p < (pe < 0 ? n_pes_ : pe + 1); ++p) {
    const std::uint64_t sent = sent_[std::size_t(p)].load();
    if (acked_[std::size_t(p)].load() >= sent || requested_[std::size_t(p)] >= sent) continue;
    HP_RETURN_IF_ERROR(post(p, kAckRequest, {}, "MPI_Isend of an acknowledgement request"));
    requested_[std::size_t(p)] = sent;
  }
  return Status::ok();
}

void MpiMessages::acknowledged(int pe, std::uint64_t count) noexcept {
  // Only drain() writes acked_, under the mutex: the counts need no compare-and-swap.
  std::atomic<std::uint64_t>& acked = acked_[std::size_t(pe)];
  if (count > acked.load()) acked.store(count);
}

Status MpiMessages::complete_sends() {
  while (!sends_.empty()) {
    int done = 0;
    HP_RETURN_IF_ERROR(mpi_status(MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE),
                                  "MPI_Test of a message's send", -1));
    if (done == 0) break;
    sends_.pop_front();
  }
  return Status::ok();
}

Status MpiMessages::drain(bool* received) {
  std::lock_guard lock(mutex_);
  if (received != nullptr) *received = false;
  if (!failed_.is_ok()) return failed_;
  Status status = drain_locked(received);
  if (!status.is_ok()) {
    // Kept: a PE that only waits on its words learns of it from no other call.
    HP_LOG_ERROR("shmem: PE {}: one-sided messages: {}", rank_, status.to_string());
    failed_ = status;
  }
  return status;
}

Status MpiMessages::drain_locked(bool* received) {
  HP_RETURN_IF_ERROR(complete_sends());
  for (;;) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status probed;
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &message, &probed),
                   "MPI_Improbe of one-sided messages", -1));
    if (found == 0) return Status::ok();
    const int source = probed.MPI_SOURCE;
    int length = 0;
    MPI_Get_count(&probed, MPI_BYTE, &length);
    received_.resize(std::size_t(length));
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Mrecv(received_.data(), length, MPI_BYTE, &message, MPI_STATUS_IGNORE),
                   "MPI_Mrecv of a one-sided message", source));
    if (received != nullptr) *received = true;
    std::uint64_t count = 0;  // the sender's count of this PE's messages it applied
    switch (probed.MPI_TAG) {
      case kData:
        HP_RETURN_IF_ERROR(apply(source, received_, &count));
        ++applied_[std::size_t(source)];
        acknowledged(source, count);
        break;
      case kAtomic: {
        AtomicHeader h{};
        HP_RETURN_IF_ERROR(read_value(received_, "an atomic", source, &h));
        std::uint64_t old = 0;
        HP_RETURN_IF_ERROR(apply_atomic(source, h, &old));
        ++applied_[std::size_t(source)];
        acknowledged(source, h.applied);
        if (h.ticket != 0) {
          const AtomicResult answer{
              .ticket = h.ticket, .value = old, .applied = applied_[std::size_t(source)]};
          HP_RETURN_IF_ERROR(
              post(source, kAtomicResult, bytes_of(answer), "MPI_Isend of an atomic's result"));
        }
        break;
      }
      case kAtomicResult: {
        AtomicResult r{};
        HP_RETURN_IF_ERROR(read_value(received_, "an atomic's result", source, &r));
        results_[r.ticket] = r.value;
        acknowledged(source, r.applied);
        break;
      }
      case kAck:
        HP_RETURN_IF_ERROR(read_value(received_, "an acknowledgement", source, &count));
        acknowledged(source, count);
        break;
      case kAckRequest: {
        // Every message `source` sent before its request was applied above, in order.
        count = applied_[std::size_t(source)];
        HP_RETURN_IF_ERROR(post(source, kAck, bytes_of(count), "MPI_Isend of an acknowledgement"));
        break;
      }
      default:
        return Status::error(ErrorCode::kCorruptData,
                             "a one-sided message from PE {} has tag {}: a PE of another build; "
                             "end the job",
                             source, probed.MPI_TAG);
    }
  }
}

Status MpiMessages::apply(int source, const std::vector<std::byte>& message,
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
  const AtomicOp op = h.add != 0 ? AtomicOp::kAdd : AtomicOp::kSet;
  return update(h.signal_offset, op, 8, &h.signal, nullptr, nullptr);
}

Status MpiMessages::apply_atomic(int source, const AtomicHeader& h, std::uint64_t* old) {
  const bool known = h.op <= std::uint64_t(AtomicOp::kFetchAdd);
  if (!known || (h.width != 4 && h.width != 8) || h.offset % h.width != 0 ||
      h.offset > segment_bytes_ - h.width) {
    return Status::error(ErrorCode::kCorruptData,
                         "an atomic from PE {} to PE {} (op {}, {} bytes at offset {}) is not one "
                         "this build applies in its segment: a PE of another build or a "
                         "corrupted message; end the job",
                         source, rank_, h.op, h.width, h.offset);
  }
  return update(h.offset, AtomicOp(h.op), h.width, &h.operand, &h.compare, old);
}

namespace {

// `op` on the word at `word` with the CPU's atomics; returns its old value (0 for kSet, kAdd).
template <typename T>
T cpu_atomic(std::byte* word, AtomicOp op, T operand, T compare) {
  std::atomic_ref<T> w(*reinterpret_cast<T*>(word));
  switch (op) {
    case AtomicOp::kFetch:
      return w.load(std::memory_order_seq_cst);
    case AtomicOp::kSet:
      w.store(operand, std::memory_order_seq_cst);
      return 0;
    case AtomicOp::kAdd:
      w.fetch_add(operand, std::memory_order_seq_cst);
      return 0;
    case AtomicOp::kSwap:
      return w.exchange(operand, std::memory_order_seq_cst);
    case AtomicOp::kCompareSwap:
      w.compare_exchange_strong(compare, operand, std::memory_order_seq_cst);
      return compare;  // the old value, whether it matched or not
    case AtomicOp::kFetchAdd:
      return w.fetch_add(operand, std::memory_order_seq_cst);
  }
  return 0;
}

template <typename T>
void cpu_update(std::byte* word, AtomicOp op, const void* operand, const void* compare, void* old) {
  T value{}, expected{};
  if (operand != nullptr) std::memcpy(&value, operand, sizeof value);
  if (compare != nullptr) std::memcpy(&expected, compare, sizeof expected);
  const T was = cpu_atomic<T>(word, op, value, expected);
  if (old != nullptr) std::memcpy(old, &was, sizeof was);
}

}  // namespace

Status MpiMessages::update(std::size_t offset, AtomicOp op, std::size_t width, const void* operand,
                           const void* compare, void* old) {
  if (cpu_atomics_) {
    if (width == 4) {
      cpu_update<std::uint32_t>(segment_ + offset, op, operand, compare, old);
    } else {
      cpu_update<std::uint64_t>(segment_ + offset, op, operand, compare, old);
    }
    return Status::ok();
  }
  const MPI_Aint disp = own_disp_ + MPI_Aint(offset);
  HP_RETURN_IF_ERROR(mpi_status(mpi_atomic(win_, rank_, disp, op, width, operand, compare, old),
                                "an MPI atomic applying a message", rank_));
  return mpi_status(MPI_Win_flush(rank_, win_), "MPI_Win_flush of a message's atomic", rank_);
}

std::uint64_t MpiMessages::unapplied(int pe) const noexcept {
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
