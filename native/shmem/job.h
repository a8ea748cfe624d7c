// The job control segment: what hprun and every PE of a job share on one node.
//
// hprun creates it (shared memory "/hp.<job>.ctl") before it starts the PEs, and passes
// HP_JOB_ID, HP_RANK and HP_WORLD_SIZE to each. Threads jobs and single-PE jobs use the same
// layout in private memory. Layout (all offsets fixed by this header, version kJobVersion):
//
//   JobHeader                      one cache-line-aligned header
//   PeSlot[n_pes]                  one per PE, each on its own cache lines
//
// Protocol:
//   - hprun writes kStarting (and the pid) before it forks the PE, and touches the slot again
//     only after it reaped that PE; the PE moves it kStarting -> kReady (heap created and
//     published) -> kFinalized; hprun marks a PE kDead when its process ends before
//     kFinalized. A PE that ends with status 0 still kStarting never used symmetric memory
//     (hprun -n 2 hostname) and did not fail;
//   - launcher_pid is the creator's (hprun's) pid, so that a PE or a cleanup tool can tell
//     whether the launcher that owns the segment is alive;
//   - abort(): the first caller claims the abort, writes the PE and reason, then sets
//     abort_flag (release) and wakes every doorbell. Waiters poll abort_flag between bounded
//     sleeps, so an abort is seen within ~20 ms even when the wake races their sleep;
//   - each PE's doorbell is an eventcount (see platform/wait.h): whoever changes a PE's
//     symmetric memory while that PE sleeps in a wait bumps the doorbell and wakes it. Its
//     barrier bell is the same for its barrier slots alone: only a barrier arrival rings it, so
//     a PE waiting in a barrier sleeps through the data other PEs put into its heap meanwhile.
#ifndef HYPER_PARALLEL_SHMEM_JOB_H_
#define HYPER_PARALLEL_SHMEM_JOB_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/api.h"
#include "common/status.h"
#include "platform/wait.h"

namespace hp::shmem {

inline constexpr std::uint32_t kJobMagic = 0x424A5048;  // "HPJB" little-endian
inline constexpr std::uint32_t kJobVersion = 4;
inline constexpr int kMaxPes = 4096;

enum class PeState : std::uint32_t {
  kAbsent = 0,     // not started yet
  kStarting = 1,   // process started (hprun wrote its pid)
  kReady = 2,      // its heap is created and may be mapped by the others
  kFinalized = 3,  // called finalize (a later exit is normal)
  kDead = 4,       // its process ended before finalize (hprun marked it)
};

struct alignas(64) PeSlot {
  std::atomic<std::uint32_t> state{0};
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::int32_t> wait_status{-1};    // waitpid() status once it ended, else -1
  alignas(64) platform::WaitWord doorbell;      // eventcount of this PE's symmetric memory
  alignas(64) platform::WaitWord barrier_bell;  // eventcount of its barrier slots
};

struct alignas(64) JobHeader {
  std::uint32_t magic = kJobMagic;
  std::uint32_t version = kJobVersion;
  std::uint32_t header_bytes = sizeof(JobHeader);
  std::uint32_t n_pes = 0;
  std::uint64_t segment_bytes = 0;
  char job_id[48] = {};
  std::int32_t launcher_pid = 0;
  alignas(64) std::atomic<std::uint32_t> abort_claim{0};
  std::atomic<std::uint32_t> abort_flag{0};
  std::atomic<std::int32_t> abort_pe{-1};
  char abort_reason[256] = {};
  // shmem_global_exit: the calling PE and its status (written before the abort; rank last,
  // with release). hprun then exits with that status.
  std::atomic<std::int32_t> global_exit_status{0};
  std::atomic<std::int32_t> global_exit_pe{-1};
  alignas(64) platform::WaitWord ready_count;  // PEs that reached kReady (bootstrap barrier)
};

class HP_API JobSegment {
 public:
  // hprun: creates "/hp.<job_id>.ctl" (fails with ALREADY_EXISTS if it exists) for n_pes.
  static Status create(std::string_view job_id, int n_pes, std::unique_ptr<JobSegment>* out);
  // A PE: maps the existing segment; checks magic, version and that it holds n_pes PEs.
  static Status open(std::string_view job_id, int n_pes, std::unique_ptr<JobSegment>* out);
  // Threads and single-PE jobs: the same layout in private memory.
  static Status create_private(int n_pes, std::unique_ptr<JobSegment>* out);
  // Node jobs (node_job.h): the same layout in anonymous shared memory, for PEs forked by the
  // caller (they inherit it; it has no name). `job_id` only names the job in messages.
  static Status create_inherited(std::string_view job_id, int n_pes,
                                 std::unique_ptr<JobSegment>* out);
  ~JobSegment() noexcept;
  JobSegment(const JobSegment&) = delete;
  JobSegment& operator=(const JobSegment&) = delete;

  JobHeader& header() noexcept { return *header_; }
  PeSlot& pe(int index) noexcept { return slots_[index]; }
  int n_pes() const noexcept { return int(header_->n_pes); }
  std::string_view job_id() const noexcept { return job_id_; }
  bool is_shared() const noexcept { return shared_; }

  // First caller wins: records `pe` (-1: the job as a whole) and the reason, then wakes every
  // PE's doorbell and barrier bell. Returns false if the job was already aborted.
  bool abort(int pe, std::string_view reason) noexcept;
  bool aborted() const noexcept { return header_->abort_flag.load(std::memory_order_acquire) != 0; }
  // Records a global exit of `pe` with `status`, then aborts the job (the others stop).
  void global_exit(int pe, int status) noexcept;
  // "PE 2: <reason>" once aborted, else empty.
  std::string abort_message() const;
  void wake_all_doorbells() noexcept;

  // Shared-memory object names of a job.
  static std::string control_name(std::string_view job_id);       // "/hp.<job>.ctl"
  static std::string heap_name(std::string_view job_id, int pe);  // "/hp.<job>.heap.<pe>"
  // Removes every shared-memory object of the job ("/dev/shm/hp.<job>.*"); returns how many.
  static int unlink_all(std::string_view job_id) noexcept;
  // Job ids: [A-Za-z0-9_-], 1..40 characters.
  static Status validate_job_id(std::string_view job_id);
  // errno after a failed call on the job's shared-memory object `name` (its control segment or
  // a heap), as a status: EACCES/EPERM PERMISSION_DENIED (another user's job: the objects are
  // 0600), ENOENT NOT_FOUND, EEXIST ALREADY_EXISTS, ENOMEM/ENOSPC OUT_OF_MEMORY, else
  // SYSTEM_ERROR; the message is "<what> '<name>': <strerror>".
  static Status object_error(std::string_view what, std::string_view name);

 private:
  JobSegment(void* base, std::size_t bytes, bool shared, std::string job_id);
  static std::size_t bytes_for(int n_pes) noexcept;
  static Status create_anonymous(std::string_view job_id, int n_pes, bool shared,
                                 std::unique_ptr<JobSegment>* out);

  void* base_;
  std::size_t bytes_;
  bool shared_;
  std::string job_id_;
  JobHeader* header_;
  PeSlot* slots_;
};

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_JOB_H_
