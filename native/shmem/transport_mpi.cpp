// The MPI transport: MPI-3 RMA, passive target (one lock_all epoch for the job's life), for
// the PEs this process does not map. Built as the plugin libhyper_parallel_shmem_mpi.so, so
// that only jobs that ask for MPI load libmpi; init_process.cpp loads it and calls
// hp_shmem_mpi_start.
//
// Windows:
//   all_remote (HP_SHMEM_TRANSPORT=mpi): one window over the world; every other PE through RMA.
//     With every PE on one host, MPI_Win_allocate (osc/sm: shared memory, RMA by load/store);
//     otherwise MPI_Win_create on a shared mapping this transport makes.
//   otherwise (started by mpirun): MPI_Win_allocate_shared per host, so the PEs of a host map
//     each other's segments, plus a world window created over the same memory for the PEs of
//     other hosts (on one host, the shared window is the world window). A PE alone on its host
//     gets a window created on its own shared mapping.
// The heap memory is always shared (MAP_SHARED): the C API maps the program's data segment onto
// pages of it (a second mapping of the same pages), which private memory cannot give. MPI backs
// MPI_Win_allocate with private memory unless every PE is on one host (osc/sm), and a
// one-process shared window too.
// Puts and gets to mapped PEs are copies; atomics on them are the CPU's, unless some PE
// reaches another by RMA: then every atomic goes through the world window (MPI atomics are not
// atomic with respect to the CPU's; see mpi_atomics_).
// To a PE on another host (to every PE with HP_SHMEM_MPI_MESSAGES=message), atomics and
// signal updates are messages the target applies (mpi_messages.h), and so is a put_signal of
// up to MpiMessages::kMaxBytes, data and signal in one; reading such a PE by RMA (get) and
// completing (flush, quiet) first wait until it applied them.
// Errors return (MPI_ERRORS_RETURN on the communicator and the windows) and become SYSTEM_ERROR
// naming the call, the PE and MPI's message; a one-sided call to another PE that fails inside
// MPI becomes PEER_DEAD naming that PE (rma_status). With less than MPI_THREAD_MULTIPLE (this
// library asks for MPI_THREAD_SERIALIZED when it initializes MPI), every call is serialized by a
// mutex.
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/logging.h"
#include "platform/wait.h"
#include "shmem/mpi_atomic.h"
#include "shmem/mpi_call_deadline.h"
#include "shmem/mpi_messages.h"
#include "shmem/mpi_status.h"
#include "shmem/segment_map.h"
#include "shmem/transport.h"

namespace hp::shmem {
namespace {

// Set when a transport was abandoned: an MPI this library initialized is then not finalized
// at exit, since MPI_Finalize is collective and the PEs of a failed job may never call theirs.
std::atomic<bool> g_mpi_abandoned{false};

// Registers (once) the MPI_Finalize of an MPI this library initialized, at process exit.
void finalize_mpi_at_exit() {
  static const bool registered = [] {
    return std::atexit([] {
             if (g_mpi_abandoned.load()) return;
             int initialized = 0, finalized = 0;
             MPI_Initialized(&initialized);
             MPI_Finalized(&finalized);
             if (initialized && !finalized) MPI_Finalize();
           }) == 0;
  }();
  (void)registered;
}

// The world rank of each rank of `node` (MPI_UNDEFINED where it has none).
std::vector<int> world_ranks_of(MPI_Comm node, MPI_Comm world) {
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  const auto n = static_cast<std::size_t>(node_size);
  std::vector<int> node_ranks(n), ranks(n);
  std::iota(node_ranks.begin(), node_ranks.end(), 0);
  MPI_Group node_group, world_group;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(world, &world_group);
  MPI_Group_translate_ranks(node_group, node_size, node_ranks.data(), world_group, ranks.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&world_group);
  return ranks;
}

// Anonymous shared memory for a window this transport creates (MPI_Win_create); unmapped by
// its destructor.
class SharedMapping {
 public:
  SharedMapping() = default;
  SharedMapping(SharedMapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  SharedMapping& operator=(SharedMapping&& other) noexcept {
    if (this != &other) {
      reset();
      base_ = std::exchange(other.base_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~SharedMapping() { reset(); }

  static Status create(std::size_t bytes, int pe, SharedMapping* out) {
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      return Status::error(ErrorCode::kOutOfMemory,
                           "cannot map {} bytes of shared memory for the symmetric heap (PE {}): "
                           "{}; lower HP_SHMEM_HEAP_SIZE",
                           bytes, pe, std::strerror(errno));
    }
    *out = {};
    out->base_ = base;
    out->bytes_ = bytes;
    return Status::ok();
  }
  void* base() const noexcept { return base_; }
  // Forgets the mapping without unmapping it: it stays until the process ends.
  void leak() noexcept {
    base_ = nullptr;
    bytes_ = 0;
  }

 private:
  void reset() noexcept {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = nullptr;
    bytes_ = 0;
  }
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

class MpiTransport final : public RemoteTransport {
 public:
  MpiTransport(MPI_Comm world, MPI_Comm node, MPI_Win win, MPI_Win shared_win,
               SharedMapping mapping, bool owns_mpi, bool serialize, std::vector<std::size_t> pads,
               std::unique_ptr<MpiCallDeadline> deadline, std::unique_ptr<MpiMessages> messages,
               std::vector<char> by_message, bool mpi_atomics)
      : deadline_(std::move(deadline)),
        messages_(std::move(messages)),
        by_message_(std::move(by_message)),
        mpi_atomics_(mpi_atomics),
        world_(world),
        node_(node),
        win_(win),
        shared_win_(shared_win),
        mapping_(std::move(mapping)),
        owns_mpi_(owns_mpi),
        pads_(std::move(pads)) {
    if (serialize) mutex_.emplace();
    MPI_Comm_rank(world_, &rank_);
    int size = 0;
    MPI_Comm_size(world_, &size);
    counts_ = std::make_unique<Counts[]>(std::size_t(size));
  }

  ~MpiTransport() override {
    if (abandoned_) {
      // The MPI objects, and the memory under the windows (MPI may still write into it), stay
      // as they are until the process ends.
      (void)messages_.release();
      mapping_.leak();
      g_mpi_abandoned.store(true);  // an MPI initialized here (this job's or an earlier one's)
      return;
    }
    Lock lock(this, "MPI_Win_free", -1);
    if (barrier_ != MPI_REQUEST_NULL) MPI_Wait(&barrier_, MPI_STATUS_IGNORE);
    messages_.reset();
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
    if (shared_win_ != MPI_WIN_NULL) MPI_Win_free(&shared_win_);
    if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
    MPI_Comm_free(&world_);
    mapping_ = {};  // after the windows over it are freed
    // MPI cannot be initialized twice, and OpenSHMEM lets a program initialize again after
    // finalizing: MPI initialized here stays up until the process exits.
    if (owns_mpi_) finalize_mpi_at_exit();
  }

  std::string_view name() const noexcept override { return "mpi"; }

  Status put(int pe, std::size_t offset, const void* source, std::size_t bytes) override {
    Lock lock(this, "MPI_Put", pe);
    Status status;
    std::size_t done = 0;
    while (done < bytes && status.is_ok()) {
      const int n = int(std::min<std::size_t>(bytes - done, INT_MAX));
      status = rma_status(MPI_Put(static_cast<const char*>(source) + done, n, MPI_BYTE, pe,
                                  at(pe, offset + done), n, MPI_BYTE, win_),
                          "MPI_Put", pe);
      if (status.is_ok()) done += std::size_t(n);
    }
    if (done > 0) issued(pe);  // what went out is completed by the next flush all the same
    HP_RETURN_IF_ERROR(status);
    return flush_local(pe);
  }

  Status put_blocks(int pe, std::size_t offset, const void* source, std::ptrdiff_t dest_stride,
                    std::ptrdiff_t source_stride, std::size_t block_bytes,
                    std::size_t nblocks) override {
    // Blocks that overlap at the target are one put each, in order (MPI leaves overlapping
    // entries of one put undefined); so are counts beyond one datatype's.
    const auto span = std::size_t(dest_stride < 0 ? -dest_stride : dest_stride);
    if (span < block_bytes || block_bytes > INT_MAX || nblocks > INT_MAX ||
        block_bytes * nblocks > INT_MAX) {
      for (std::size_t b = 0; b < nblocks; ++b) {
        HP_RETURN_IF_ERROR(
            put(pe, std::size_t(std::ptrdiff_t(offset) + std::ptrdiff_t(b) * dest_stride),
                static_cast<const std::byte*>(source) + std::ptrdiff_t(b) * source_stride,
                block_bytes));
      }
      return Status::ok();
    }
    Lock lock(this, "MPI_Put", pe);
    // One message: the blocks as a vector type on each side. The types may be freed at once:
    // MPI keeps what a pending operation uses.
    MPI_Datatype from = MPI_DATATYPE_NULL, to = MPI_DATATYPE_NULL;
    auto vector = [&](std::ptrdiff_t stride, MPI_Datatype* type) {
      int rc =
          MPI_Type_create_hvector(int(nblocks), int(block_bytes), MPI_Aint(stride), MPI_BYTE, type);
      if (rc == MPI_SUCCESS) rc = MPI_Type_commit(type);
      return mpi_status(rc, "MPI_Type_create_hvector", pe);
    };
    Status status = vector(source_stride, &from);
    if (status.is_ok()) status = vector(dest_stride, &to);
    if (status.is_ok()) {
      status = rma_status(MPI_Put(source, 1, from, pe, at(pe, offset), 1, to, win_), "MPI_Put", pe);
    }
    if (from != MPI_DATATYPE_NULL) MPI_Type_free(&from);
    if (to != MPI_DATATYPE_NULL) MPI_Type_free(&to);
    HP_RETURN_IF_ERROR(status);
    issued(pe);
    return flush_local(pe);
  }

  Status get(int pe, std::size_t offset, void* dest, std::size_t bytes) override {
    HP_RETURN_IF_ERROR(await_applied(pe, "get"));
    Lock lock(this, "MPI_Get", pe);
    for (std::size_t done = 0; done < bytes;) {
      const int n = int(std::min<std::size_t>(bytes - done, INT_MAX));
      HP_RETURN_IF_ERROR(rma_status(MPI_Get(static_cast<char*>(dest) + done, n, MPI_BYTE, pe,
                                            at(pe, offset + done), n, MPI_BYTE, win_),
                                    "MPI_Get", pe));
      done += std::size_t(n);
    }
    return settled(pe, flush_counted(pe));
  }

  Status atomic(int pe, std::size_t offset, AtomicOp op, std::size_t width, const void* operand,
                const void* compare, void* result) override {
    const bool fetching = op != AtomicOp::kSet && op != AtomicOp::kAdd;
    if (!mpi_atomics_) {
      HP_ENSURE(messages_ && by_message_[std::size_t(pe)], ErrorCode::kInternal,
                "PE {}: an atomic on PE {}, which this PE maps, reached the MPI transport", rank_,
                pe);
      return message_atomic(pe, offset, op, width, operand, compare, fetching ? result : nullptr);
    }
    if (fetching) HP_RETURN_IF_ERROR(await_applied(pe, "a fetching atomic"));
    Lock lock(this, "an MPI atomic", pe);
    HP_RETURN_IF_ERROR(
        rma_status(mpi_atomic(win_, pe, at(pe, offset), op, width, operand, compare, result),
                   "an MPI atomic", pe));
    if (!fetching && pe != rank_) {
      // Another PE's word: complete at the next flush or quiet. Only the operand (the
      // caller's) must be done with before returning, which costs no round trip.
      issued(pe);
      return flush_local(pe);
    }
    return settled(pe, flush_counted(pe));
  }

  Status put_signal(int pe, std::size_t offset, const void* source, std::size_t bytes,
                    std::size_t signal_offset, std::uint64_t signal, AtomicOp op) override {
    if (messages_ && by_message_[std::size_t(pe)] && bytes <= MpiMessages::kMaxBytes) {
      // The RMA issued to `pe` before (puts, a larger put_signal's data) lands before this
      // one's signal, as the flush on the RMA path below orders it.
      HP_RETURN_IF_ERROR(flush_issued(pe));
      Lock lock(this, "MPI_Isend of a put_signal", pe);
      return noted(
          messages_->send(pe, offset, source, bytes, signal_offset, signal, op == AtomicOp::kAdd));
    }
    // The data must have arrived before the signal is written.
    if (bytes > 0) {
      HP_RETURN_IF_ERROR(put(pe, offset, source, bytes));
      HP_RETURN_IF_ERROR(flush(pe));
    }
    return atomic(pe, signal_offset, op, 8, &signal, nullptr, nullptr);
  }

  Status flush(int pe) override {
    HP_RETURN_IF_ERROR(await_applied(pe, "flush"));
    return flush_issued(pe);
  }

  Status quiet() override {
    HP_RETURN_IF_ERROR(await_applied(-1, "quiet"));
    const std::uint64_t issued = all_.issued.load();
    if (all_.flushed.load() >= issued) return Status::ok();
    Lock lock(this, "MPI_Win_flush_all", -1);
    HP_RETURN_IF_ERROR(mpi_status(MPI_Win_flush_all(win_), "MPI_Win_flush_all", -1));
    raise(all_.flushed, issued);
    return Status::ok();
  }

  Status start_barrier() override {
    Lock lock(this, "MPI_Ibarrier", -1);
    HP_ENSURE(barrier_ == MPI_REQUEST_NULL, ErrorCode::kFailedPrecondition,
              "PE {}: an earlier barrier never completed (it timed out); the PEs cannot "
              "synchronize again: end the job",
              rank_);
    return mpi_status(MPI_Ibarrier(world_, &barrier_), "MPI_Ibarrier", -1);
  }

  Status barrier_done(bool* done) override {
    Lock lock(this, "MPI_Test", -1);
    int flag = 0;
    HP_RETURN_IF_ERROR(mpi_status(MPI_Test(&barrier_, &flag, MPI_STATUS_IGNORE), "MPI_Test", -1));
    if (flag != 0) MPI_Win_sync(win_);  // the others' completed RMA, to this PE's loads
    *done = flag != 0;
    return Status::ok();
  }

  bool progress() noexcept override {
    Lock lock(this, "MPI_Win_sync", -1);
    MPI_Win_sync(win_);  // this PE's loads see what RMA wrote into its window
    return drive_progress();
  }

  bool owns_atomics() const noexcept override { return mpi_atomics_; }

  Status failure() const override {
    if (!failed_.load(std::memory_order_acquire)) return Status::ok();
    std::lock_guard lock(failure_mutex_);
    return failure_;
  }

  void abandon() noexcept override { abandoned_ = true; }

 private:
  // `status`, the first lost PE or missed deadline remembered (failure()).
  Status noted(Status status) {
    if ((status.code() == ErrorCode::kPeerDead || status.code() == ErrorCode::kTimeout) &&
        !failed_.load(std::memory_order_relaxed)) {
      std::lock_guard lock(failure_mutex_);
      if (failure_.is_ok()) failure_ = status;
      failed_.store(true, std::memory_order_release);
    }
    return status;
  }

  // The displacement in `pe`'s window of its segment offset `offset` (see the pads below).
  MPI_Aint at(int pe, std::size_t offset) const {
    return MPI_Aint(pads_[std::size_t(pe)] + offset);
  }

  // The status of a one-sided call to `pe` (PEER_DEAD when its connection broke).
  Status rma_status(int rc, std::string_view call, int pe) {
    return noted(mpi_peer_status(rc, call, pe, rank_));
  }

  // Counts RMA that only a flush completes, once it is issued (to another PE). A flush reads
  // the count before it starts and, once it succeeded, records that count as flushed: every
  // operation counted by then was issued before the flush began, so it is complete, whichever
  // thread issued it; one counted later stays ahead of the flushed count.
  void issued(int pe) noexcept {
    if (pe == rank_) return;
    ++counts_[std::size_t(pe)].issued;
    ++all_.issued;
  }
  static void raise(std::atomic<std::uint64_t>& flushed, std::uint64_t to) noexcept {
    std::uint64_t now = flushed.load();
    while (now < to && !flushed.compare_exchange_weak(now, to)) {
    }
  }
  // What was issued to `pe` is done with its source buffers (no round trip; the caller holds
  // the lock).
  Status flush_local(int pe) {
    return settled(pe, rma_status(MPI_Win_flush_local(pe, win_), "MPI_Win_flush_local", pe));
  }
  // Remote completion of the RMA issued to `pe` (the caller does not hold the lock).
  Status flush_issued(int pe) {
    const auto& c = counts_[std::size_t(pe)];
    if (c.flushed.load() >= c.issued.load()) return Status::ok();  // no round trip for nothing
    Lock lock(this, "MPI_Win_flush", pe);
    return flush_counted(pe);
  }
  // MPI_Win_flush of `pe` (the caller holds the lock).
  Status flush_counted(int pe) {
    Counts& c = counts_[std::size_t(pe)];
    const std::uint64_t issued = c.issued.load();
    HP_RETURN_IF_ERROR(rma_status(MPI_Win_flush(pe, win_), "MPI_Win_flush", pe));
    raise(c.flushed, issued);
    return Status::ok();
  }

  // How an origin waits for a fetching atomic's answer: it comes after a round trip, so the
  // origin yields its CPU for that long rather than sleeping (a sleep that outlasts the answer
  // adds to every atomic).
  static constexpr platform::WaitPolicy kAnswerWait{.yield_for = std::chrono::milliseconds(1)};

  // An atomic on `pe` by message (mpi_messages.h); result: null for a non-fetching op, which
  // completes at the next flush or quiet; otherwise waits for the old value, applying what
  // arrives here meanwhile (its target may be waiting on this PE in the same way).
  Status message_atomic(int pe, std::size_t offset, AtomicOp op, std::size_t width,
                        const void* operand, const void* compare, void* result) {
    std::uint64_t ticket = 0;
    {
      Lock lock(this, "MPI_Isend of an atomic", pe);
      HP_RETURN_IF_ERROR(noted(messages_->send_atomic(pe, offset, op, width, operand, compare,
                                                      result != nullptr ? &ticket : nullptr)));
    }
    if (result == nullptr) return Status::ok();
    return serve_messages_until(
        pe, kAnswerWait, [] { return Status::ok(); },
        [&] { return messages_->take_result(ticket, width, result); },
        [&] {
          return fmt::format("an atomic of PE {} on PE {}: no result after {} s", rank_, pe,
                             deadline_->timeout_s());
        });
  }

  // An MPI call that drives progress for the one-sided components that need it, and the
  // messages that arrived applied (a failure is kept for the next call that waits
  // on them, see MpiMessages::drain). The caller holds the lock.
  // Returns whether a message arrived.
  bool drive_progress() noexcept {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, world_, &flag, MPI_STATUS_IGNORE);
    bool received = false;
    if (messages_) (void)messages_->drain(&received);
    return received;
  }

  // Waits until `pe` (-1: every PE) applied this PE's messages to it: asks for their
  // acknowledgement, then applies what arrives here meanwhile and answers the others' requests
  // (their sender may be waiting on this PE in the same way). The caller does not hold the
  // lock.
  Status await_applied(int pe, std::string_view what) {
    if (!messages_ || messages_->unapplied(pe) == 0) return Status::ok();
    return serve_messages_until(
        pe, platform::WaitPolicy{},
        // Asked again each round: another thread may have sent more since the last request.
        [&] { return messages_->request_acks(pe); }, [&] { return messages_->unapplied(pe) == 0; },
        [&] {
          return fmt::format("{} on PE {}: {} one-sided messages to {} not applied after {} s",
                             what, rank_, messages_->unapplied(pe),
                             pe < 0 ? std::string("the other PEs") : fmt::format("PE {}", pe),
                             deadline_->timeout_s());
        });
  }

  // Waits under the transport's deadline until done() holds, each round calling `ask`, then
  // applying the messages that arrived (their senders may wait on this PE in the same way; a
  // round that received some polls again without sleeping). TIMEOUT with describe()'s words.
  // pe: the PE waited on (-1: every PE), for the call deadline. The caller does not hold the
  // lock.
  Status serve_messages_until(int pe, const platform::WaitPolicy& how,
                              const std::function<Status()>& ask, const std::function<bool()>& done,
                              const std::function<std::string()>& describe) {
    Status status;
    const platform::WaitResult r = platform::poll_until(
        [&] {
          Lock lock(this, "MPI_Improbe of one-sided messages", pe);
          bool received = false;
          status = ask();
          if (status.is_ok()) status = messages_->drain(&received);
          if (!status.is_ok() || done()) return platform::PollState::kReady;
          return received ? platform::PollState::kWorked : platform::PollState::kIdle;
        },
        platform::deadline_after(deadline_->timeout_s()), how, [] { return false; });
    HP_RETURN_IF_ERROR(noted(status));
    if (r == platform::WaitResult::kReady) return Status::ok();
    return noted(Status::error(ErrorCode::kTimeout,
                               "{} (a PE applies the messages sent to it inside its shmem calls; "
                               "HP_SHMEM_TIMEOUT_S sets the deadline)",
                               describe()));
  }

  // An operation on this PE's own window completes inside the call, without progressing what
  // other PEs sent here. Where the other PEs' atomics and puts are messages this process must
  // apply (osc/ucx and osc/pt2pt over TCP), a PE that spins on its own words (a lock's home
  // polling its tail, a lock node) would starve them, the window's accumulate lock included:
  // every other PE then waits on this one forever. So such an operation ends with progress.
  Status settled(int pe, Status status) noexcept {
    if (pe == rank_) drive_progress();
    return status;
  }

  // Holds the mutex when MPI lacks MPI_THREAD_MULTIPLE, and marks the MPI call in progress for
  // the deadline (what: the call; target: its PE, -1 for none).
  struct Lock {
    Lock(MpiTransport* t, const char* what, int target)
        : guard(t->mutex_ ? std::unique_lock<std::mutex>(*t->mutex_)
                          : std::unique_lock<std::mutex>()),
          call(*t->deadline_, what, target) {}
    std::unique_lock<std::mutex> guard;
    MpiCallDeadline::Call call;
  };

  std::unique_ptr<MpiCallDeadline> deadline_;  // outlives every call: destroyed last
  std::unique_ptr<MpiMessages> messages_;      // null: no PE sends any by message
  std::vector<char> by_message_;               // [pe]: its atomics and put_signal by message
  // Some PE reaches another by RMA (not mapped, not by message): every atomic is then an MPI
  // atomic (MPI's are not atomic with the CPU's). Otherwise the CPU's atomics do every atomic:
  // on the mapped PEs directly, on the others by message, applied by their target.
  bool mpi_atomics_;
  MPI_Comm world_;
  MPI_Comm node_;
  MPI_Win win_;
  MPI_Win shared_win_;
  SharedMapping mapping_;
  bool owns_mpi_;
  // Each PE's segment starts where its heap is heap_alignment()-aligned within its window memory
  // (MPI aligns the memory it allocates much less): the bytes before it, per PE.
  std::vector<std::size_t> pads_;
  std::optional<std::mutex> mutex_;
  int rank_ = -1;  // this PE, in world_
  // Puts and non-fetching atomics issued, and how many of them a flush completed: per PE
  // (flush) and in all (quiet). Atomics: with MPI_THREAD_MULTIPLE, threads issue without the
  // mutex.
  struct Counts {
    std::atomic<std::uint64_t> issued{0};
    std::atomic<std::uint64_t> flushed{0};
  };
  std::unique_ptr<Counts[]> counts_;
  Counts all_;
  MPI_Request barrier_ = MPI_REQUEST_NULL;  // the barrier in progress (start_barrier)
  std::atomic<bool> failed_{false};         // failure_ is set
  mutable std::mutex failure_mutex_;
  Status failure_;          // failure()
  bool abandoned_ = false;  // abandon(): the destructor frees nothing
};

}  // namespace

extern "C" HP_API Status hp_shmem_mpi_start(std::size_t segment_bytes, std::size_t heap_offset,
                                            bool all_remote, double timeout_s,
                                            MpiMessagePath messages_path, MpiStart* out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // SERIALIZED, not MULTIPLE: every MPI call here holds the transport's mutex anyway, and some
    // one-sided components (osc/pt2pt over TCP) refuse MPI_THREAD_MULTIPLE.
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                   "MPI_Init_thread", -1));
  } else {
    MPI_Query_thread(&provided);
  }
  MPI_Comm world = MPI_COMM_NULL, node = MPI_COMM_NULL;
  HP_RETURN_IF_ERROR(mpi_status(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup", -1));
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  out->pe = rank;
  out->n_pes = size;
  out->segments.assign(std::size_t(size), nullptr);
  auto deadline = std::make_unique<MpiCallDeadline>(timeout_s, rank);
  std::optional<MpiCallDeadline::Call> starting;  // the collective calls that make the windows
  starting.emplace(*deadline, "creating the symmetric heap's MPI windows", -1);

  void* base = nullptr;
  MPI_Win win = MPI_WIN_NULL, shared_win = MPI_WIN_NULL;
  // Room to start the segment where its heap is heap_alignment()-aligned (MPI aligns less); the
  // room before the segment is never touched.
  const std::size_t alignment = heap_alignment(segment_bytes - heap_offset);
  const auto bytes = MPI_Aint(segment_bytes + alignment);
  int node_size = 1;
  HP_RETURN_IF_ERROR(
      mpi_status(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                 "MPI_Comm_split_type", rank));
  MPI_Comm_size(node, &node_size);
  // Who gets atomics and put_signal by message: see HP_SHMEM_MPI_MESSAGES.
  std::vector<char> by_message(std::size_t(size), messages_path == MpiMessagePath::kMessage);
  const std::vector<int> node_world_ranks = world_ranks_of(node, world);
  if (messages_path == MpiMessagePath::kAuto) {
    by_message.assign(std::size_t(size), 1);
    for (int world_rank : node_world_ranks) {
      if (world_rank != MPI_UNDEFINED) by_message[std::size_t(world_rank)] = 0;
    }
  }
  by_message[std::size_t(rank)] = 0;
  if (all_remote) MPI_Comm_free(&node);
  SharedMapping mapping;
  if (all_remote && node_size == size && size > 1) {
    HP_RETURN_IF_ERROR(mpi_status(MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, world, &base, &win),
                                  "MPI_Win_allocate of the symmetric heap", rank));
  } else if (all_remote || node_size == 1) {
    HP_RETURN_IF_ERROR(SharedMapping::create(std::size_t(bytes), rank, &mapping));
    base = mapping.base();
    HP_RETURN_IF_ERROR(mpi_status(MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, world, &win),
                                  "MPI_Win_create of the symmetric heap", rank));
  } else {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    const int rc = MPI_Win_allocate_shared(bytes, 1, info, node, &base, &shared_win);
    MPI_Info_free(&info);
    HP_RETURN_IF_ERROR(mpi_status(rc, "MPI_Win_allocate_shared of the symmetric heap", rank));
    MPI_Win_set_errhandler(shared_win, MPI_ERRORS_RETURN);
  }
  // Every PE's pad: the bytes from its window memory to its segment, in its own process.
  std::vector<std::size_t> pads(std::size_t(size), 0);
  const std::size_t my_pad = alignment_skip(base, heap_offset, alignment);
  HP_RETURN_IF_ERROR(mpi_status(
      MPI_Allgather(&my_pad, sizeof my_pad, MPI_BYTE, pads.data(), sizeof my_pad, MPI_BYTE, world),
      "MPI_Allgather of the segment offsets", rank));
  if (shared_win != MPI_WIN_NULL) {
    for (int r = 0; r < node_size; ++r) {
      MPI_Aint peer_bytes = 0;
      int disp = 0;
      void* peer = nullptr;
      MPI_Win_shared_query(shared_win, r, &peer_bytes, &disp, &peer);
      const int world_rank = node_world_ranks[std::size_t(r)];
      // The peer's own pad: the shared memory may sit at another address in its process,
      // and the segment offsets must be the same for both of us.
      if (world_rank != MPI_UNDEFINED) {
        out->segments[std::size_t(world_rank)] =
            static_cast<std::byte*>(peer) + pads[std::size_t(world_rank)];
      }
    }
    if (node_size == size) {
      // One host: the shared window serves every PE (osc/sm: RMA and atomics by load/store,
      // no target progress needed).
      win = shared_win;
      shared_win = MPI_WIN_NULL;
    } else {
      HP_RETURN_IF_ERROR(mpi_status(MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, world, &win),
                                    "MPI_Win_create over the shared heap", rank));
    }
  }
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  std::byte* segment = static_cast<std::byte*>(base) + pads[std::size_t(rank)];
  out->segments[std::size_t(rank)] = segment;
  std::memset(segment, 0, segment_bytes);
  HP_RETURN_IF_ERROR(mpi_status(MPI_Win_lock_all(MPI_MODE_NOCHECK, win), "MPI_Win_lock_all", rank));
  MPI_Win_sync(win);
  // Every segment is zero before anybody writes into one.
  HP_RETURN_IF_ERROR(mpi_status(MPI_Barrier(world), "MPI_Barrier", rank));
  // Whether any PE reaches another by RMA: then so do all atomics (see mpi_atomics_). The
  // mapping and the message paths are symmetric, so what this PE sees holds for its own words.
  bool mpi_atomics = false;
  for (int p = 0; p < size; ++p) {
    if (p != rank && out->segments[std::size_t(p)] == nullptr && !by_message[std::size_t(p)]) {
      mpi_atomics = true;
    }
  }
  // The messages' communicator, when any PE sends by message (every PE then receives).
  int local_sends = std::any_of(by_message.begin(), by_message.end(), [](char b) { return b; });
  int any_sends = 0;
  HP_RETURN_IF_ERROR(mpi_status(MPI_Allreduce(&local_sends, &any_sends, 1, MPI_INT, MPI_LOR, world),
                                "MPI_Allreduce of the message paths", rank));
  std::unique_ptr<MpiMessages> messages;
  if (any_sends != 0) {
    MPI_Comm comm = MPI_COMM_NULL;
    HP_RETURN_IF_ERROR(
        mpi_status(MPI_Comm_dup(world, &comm), "MPI_Comm_dup for one-sided messages", rank));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    messages = std::make_unique<MpiMessages>(comm, win, MPI_Aint(pads[std::size_t(rank)]), segment,
                                             segment_bytes, !mpi_atomics);
  }
  starting.reset();
  out->transport = std::make_unique<MpiTransport>(
      world, node, win, shared_win, std::move(mapping), !initialized,
      provided < MPI_THREAD_MULTIPLE, std::move(pads), std::move(deadline), std::move(messages),
      std::move(by_message), mpi_atomics);
  HP_LOG_DEBUG("shmem: MPI transport, PE {} of {}, {}, thread level {}", rank, size,
               all_remote ? "all PEs through RMA" : "this host's PEs mapped", provided);
  return Status::ok();
}

static_assert(std::is_same_v<decltype(&hp_shmem_mpi_start), MpiStartFn>);

}  // namespace hp::shmem
