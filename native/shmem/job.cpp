#include "shmem/job.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <new>

namespace hp::shmem {

std::size_t JobSegment::bytes_for(int n_pes) noexcept {
  return sizeof(JobHeader) + sizeof(PeSlot) * std::size_t(n_pes);
}

JobSegment::JobSegment(void* base, std::size_t bytes, bool shared, std::string job_id)
    : base_(base),
      bytes_(bytes),
      shared_(shared),
      job_id_(std::move(job_id)),
      header_(static_cast<JobHeader*>(base)),
      slots_(reinterpret_cast<PeSlot*>(static_cast<char*>(base) + sizeof(JobHeader))) {}

JobSegment::~JobSegment() noexcept { munmap(base_, bytes_); }

Status JobSegment::validate_job_id(std::string_view job_id) {
  const bool ok = !job_id.empty() && job_id.size() <= 40 &&
                  std::all_of(job_id.begin(), job_id.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                  });
  HP_ENSURE(ok, ErrorCode::kInvalidArgument,
            "job id '{}' must be 1..40 characters of [A-Za-z0-9_-]", job_id);
  return Status::ok();
}

std::string JobSegment::control_name(std::string_view job_id) {
  return fmt::format("/hp.{}.ctl", job_id);
}

std::string JobSegment::heap_name(std::string_view job_id, int pe) {
  return fmt::format("/hp.{}.heap.{}", job_id, pe);
}

Status JobSegment::create(std::string_view job_id, int n_pes, std::unique_ptr<JobSegment>* out) {
  HP_RETURN_IF_ERROR(validate_job_id(job_id));
  HP_ENSURE(n_pes >= 1 && n_pes <= kMaxPes, ErrorCode::kInvalidArgument,
            "a job has 1..{} PEs, not {}", kMaxPes, n_pes);
  const std::string name = control_name(job_id);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return object_error("cannot create the job segment", name);
  const std::size_t bytes = bytes_for(n_pes);
  if (ftruncate(fd, off_t(bytes)) != 0) {
    Status s = object_error("cannot size the job segment", name);
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    Status s = object_error("cannot map the job segment", name);
    shm_unlink(name.c_str());
    return s;
  }
  auto* header = new (base) JobHeader();
  header->n_pes = std::uint32_t(n_pes);
  header->segment_bytes = bytes;
  header->launcher_pid = ::getpid();
  std::memcpy(header->job_id, job_id.data(), job_id.size());
  auto* slots = reinterpret_cast<PeSlot*>(static_cast<char*>(base) + sizeof(JobHeader));
  for (int i = 0; i < n_pes; ++i) new (&slots[i]) PeSlot();
  out->reset(new JobSegment(base, bytes, true, std::string(job_id)));
  return Status::ok();
}

Status JobSegment::open(std::string_view job_id, int n_pes, std::unique_ptr<JobSegment>* out) {
  HP_RETURN_IF_ERROR(validate_job_id(job_id));
  const std::string name = control_name(job_id);
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return object_error("cannot open the job segment (is this process started by hprun?)", name);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || std::size_t(st.st_size) < sizeof(JobHeader)) {
    close(fd);
    return Status::error(ErrorCode::kCorruptData, "job segment '{}' is too small ({} bytes)", name,
                         std::int64_t(st.st_size));
  }
  const std::size_t bytes = std::size_t(st.st_size);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return object_error("cannot map the job segment", name);
  std::unique_ptr<JobSegment> segment(new JobSegment(base, bytes, true, std::string(job_id)));
  const JobHeader& h = segment->header();
  HP_ENSURE(h.magic == kJobMagic && h.version == kJobVersion && h.header_bytes == sizeof(JobHeader),
            ErrorCode::kCorruptData,
            "job segment '{}' has magic {:#x} version {} header {} bytes; this library expects "
            "{:#x} version {} header {} bytes (hprun and the library must be the same build)",
            name, h.magic, h.version, h.header_bytes, kJobMagic, kJobVersion, sizeof(JobHeader));
  HP_ENSURE(int(h.n_pes) == n_pes && bytes >= bytes_for(n_pes), ErrorCode::kCorruptData,
            "job segment '{}' is for {} PEs, HP_WORLD_SIZE says {}", name, h.n_pes, n_pes);
  *out = std::move(segment);
  return Status::ok();
}

Status JobSegment::create_anonymous(std::string_view job_id, int n_pes, bool shared,
                                    std::unique_ptr<JobSegment>* out) {
  HP_ENSURE(n_pes >= 1 && n_pes <= kMaxPes, ErrorCode::kInvalidArgument,
            "a job has 1..{} PEs, not {}", kMaxPes, n_pes);
  const std::size_t bytes = bytes_for(n_pes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return object_error("cannot map an anonymous job segment", job_id);
  auto* header = new (base) JobHeader();
  header->n_pes = std::uint32_t(n_pes);
  header->segment_bytes = bytes;
  header->launcher_pid = shared ? ::getpid() : 0;
  std::memcpy(header->job_id, job_id.data(), std::min(job_id.size(), sizeof(header->job_id) - 1));
  auto* slots = reinterpret_cast<PeSlot*>(static_cast<char*>(base) + sizeof(JobHeader));
  for (int i = 0; i < n_pes; ++i) new (&slots[i]) PeSlot();
  out->reset(new JobSegment(base, bytes, shared, std::string(job_id)));
  return Status::ok();
}

Status JobSegment::create_private(int n_pes, std::unique_ptr<JobSegment>* out) {
  return create_anonymous("private", n_pes, false, out);
}

Status JobSegment::create_inherited(std::string_view job_id, int n_pes,
                                    std::unique_ptr<JobSegment>* out) {
  return create_anonymous(job_id, n_pes, true, out);
}

bool JobSegment::abort(int pe, std::string_view reason) noexcept {
  std::uint32_t expected = 0;
  if (!header_->abort_claim.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    return false;
  }
  header_->abort_pe.store(pe, std::memory_order_relaxed);
  const std::size_t n = std::min(reason.size(), sizeof(header_->abort_reason) - 1);
  std::memcpy(header_->abort_reason, reason.data(), n);
  header_->abort_reason[n] = '\0';
  header_->abort_flag.store(1, std::memory_order_seq_cst);
  wake_all_doorbells();
  return true;
}

void JobSegment::global_exit(int pe, int status) noexcept {
  header_->global_exit_status.store(status, std::memory_order_relaxed);
  header_->global_exit_pe.store(pe, std::memory_order_release);
  abort(pe, fmt::format("called global_exit({})", status));
}

std::string JobSegment::abort_message() const {
  if (!aborted()) return {};
  const int pe = header_->abort_pe.load(std::memory_order_relaxed);
  const std::string reason(header_->abort_reason,
                           strnlen(header_->abort_reason, sizeof(header_->abort_reason)));
  return pe >= 0 ? fmt::format("PE {}: {}", pe, reason) : reason;
}

void JobSegment::wake_all_doorbells() noexcept {
  for (int i = 0; i < n_pes(); ++i) {
    platform::add_and_wake(slots_[i].doorbell, 1, shared_);
    platform::add_and_wake(slots_[i].barrier_bell, 1, shared_);
  }
  platform::add_and_wake(header_->ready_count, 0, shared_);
}

int JobSegment::unlink_all(std::string_view job_id) noexcept {
  if (!validate_job_id(job_id).is_ok()) return 0;
  const std::string prefix = fmt::format("hp.{}.", job_id);
  // The control segment by name: a readdir() racing with the PEs unlinking their heaps may
  // not return every entry (POSIX leaves it unspecified), and a left .ctl was seen.
  int removed = shm_unlink(control_name(job_id).c_str()) == 0 ? 1 : 0;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  while (dirent* entry = readdir(dir)) {
    if (std::string_view(entry->d_name).substr(0, prefix.size()) == prefix) {
      if (shm_unlink(("/" + std::string(entry->d_name)).c_str()) == 0) ++removed;
    }
  }
  closedir(dir);
  return removed;
}

Status JobSegment::object_error(std::string_view what, std::string_view name) {
  const int err = errno;
  if (err == EACCES || err == EPERM) {
    return Status::error(ErrorCode::kPermissionDenied,
                         "{} '{}': {}: the job belongs to another user; only the user that "
                         "started it may join it",
                         what, name, std::strerror(err));
  }
  return Status::error(err == ENOENT                    ? ErrorCode::kNotFound
                       : err == EEXIST                  ? ErrorCode::kAlreadyExists
                       : err == ENOMEM || err == ENOSPC ? ErrorCode::kOutOfMemory
                                                        : ErrorCode::kSystemError,
                       "{} '{}': {}", what, name, std::strerror(err));
}

}  // namespace hp::shmem
