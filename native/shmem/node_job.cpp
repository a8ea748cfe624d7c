#include "shmem/node_job.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "shmem/context.h"
#include "shmem/heap_allocator.h"
#include "shmem/segment_map.h"

namespace hp::shmem {
namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// An anonymous shared segment of `bytes` (a memfd: shared with children forked later, named in
// no file system), its heap aligned as every PE's.
Status map_shared_segment(const std::string& name, std::size_t bytes,
                          std::span<const int> mem_nodes, std::byte** out) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return Status::error(ErrorCode::kSystemError, "memfd_create('{}'): {}", name,
                         std::strerror(errno));
  }
  if (ftruncate(fd, off_t(bytes)) != 0) {
    const int err = errno;
    close(fd);
    return Status::error(
        err == ENOMEM || err == ENOSPC ? ErrorCode::kOutOfMemory : ErrorCode::kSystemError,
        "cannot size node job segment '{}' to {} bytes: {}", name, bytes, std::strerror(err));
  }
  Status s = map_segment_aligned(fd, bytes, kControlBytes, /*reserve=*/true, out, mem_nodes);
  close(fd);
  return s.with_context("node job segment '" + name + "'");
}

}  // namespace

Status NodeJob::create(const NodeJobConfig& config, std::unique_ptr<NodeJob>* out) {
  HP_ENSURE(config.n_pes >= 1 && config.n_pes <= kMaxPes, ErrorCode::kInvalidArgument,
            "a node job has 1..{} PEs, not {}", kMaxPes, config.n_pes);
  HP_ENSURE(config.heap_bytes >= kPage, ErrorCode::kInvalidArgument,
            "a node job's heap of {} bytes is smaller than a page", config.heap_bytes);
  const std::size_t heap_bytes = round_up(config.heap_bytes, kPage);
  const std::size_t reserved = round_up(config.reserved_bytes, HeapAllocator::kMinAlignment);
  HP_ENSURE(reserved <= heap_bytes, ErrorCode::kInvalidArgument,
            "a node job's reserved part ({} bytes) does not fit its heap ({} bytes)", reserved,
            heap_bytes);
  HP_ENSURE(config.timeout_s > 0, ErrorCode::kInvalidArgument,
            "a node job's timeout_s={} must be > 0", config.timeout_s);
  std::unique_ptr<NodeJob> job(new NodeJob());
  job->config_ = config;
  job->heap_bytes_ = heap_bytes;
  job->reserved_bytes_ = reserved;
  job->segment_bytes_ = kControlBytes + heap_bytes;
  HP_RETURN_IF_ERROR(JobSegment::create_inherited(config.job_id, config.n_pes, &job->control_));
  job->segments_.assign(std::size_t(config.n_pes), nullptr);
  for (int pe = 0; pe < config.n_pes; ++pe) {
    HP_RETURN_IF_ERROR(map_shared_segment(fmt::format("hp.{}.heap.{}", config.job_id, pe),
                                          job->segment_bytes_, config.mem_nodes,
                                          &job->segments_[std::size_t(pe)]));
  }
  job->reserved_ = std::make_unique<HeapAllocator>(reserved, heap_alignment(heap_bytes));
  *out = std::move(job);
  return Status::ok();
}

NodeJob::~NodeJob() noexcept {
  for (std::byte* segment : segments_) {
    if (segment != nullptr) munmap(segment, segment_bytes_);
  }
}

std::byte* NodeJob::heap(int pe) const noexcept {
  return segments_[std::size_t(pe)] + kControlBytes;
}

bool NodeJob::locate(const void* p, std::size_t bytes, int* pe,
                     std::size_t* offset) const noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  for (int i = 0; i < n_pes(); ++i) {
    const std::byte* begin = heap(i);
    if (b >= begin && b <= begin + heap_bytes_ && bytes <= std::size_t(begin + heap_bytes_ - b)) {
      *pe = i;
      *offset = std::size_t(b - begin);
      return true;
    }
  }
  return false;
}

Status NodeJob::allocate(std::size_t bytes, std::size_t alignment, std::size_t* offset) {
  Status s = reserved_->allocate(bytes, alignment, offset);
  if (s.code() == ErrorCode::kOutOfMemory) {
    return Status::error(ErrorCode::kOutOfMemory,
                         "node job '{}': {} bytes do not fit the reserved part of the heaps ({} "
                         "of {} bytes in use, largest free block {}); give the job more reserved "
                         "bytes",
                         config_.job_id, bytes, reserved_->bytes_in_use(), reserved_->capacity(),
                         reserved_->largest_free_block());
  }
  return s;
}

Status NodeJob::release(std::size_t offset) { return reserved_->release(offset); }

std::size_t NodeJob::reserved_in_use() const noexcept { return reserved_->bytes_in_use(); }

void NodeJob::set_pid(int pe, int pid) noexcept {
  PeSlot& slot = control_->pe(pe);
  slot.pid.store(pid, std::memory_order_relaxed);
  slot.state.store(std::uint32_t(PeState::kStarting), std::memory_order_release);
}

void NodeJob::mark_dead(int pe, int wait_status, std::string_view reason) noexcept {
  PeSlot& slot = control_->pe(pe);
  slot.wait_status.store(wait_status, std::memory_order_relaxed);
  if (slot.state.load(std::memory_order_acquire) == std::uint32_t(PeState::kFinalized)) return;
  slot.state.store(std::uint32_t(PeState::kDead), std::memory_order_release);
  control_->abort(pe, reason);
}

Status NodeJob::join(int pe) {
  HP_ENSURE(pe >= 0 && pe < n_pes(), ErrorCode::kOutOfRange,
            "joining node job '{}' as PE {}: it has PEs 0..{}", config_.job_id, pe, n_pes() - 1);
  return init_inherited(InheritedPe{.job = control_.get(),
                                    .pe = pe,
                                    .segments = segments_,
                                    .segment_bytes = segment_bytes_,
                                    .reserved_bytes = reserved_bytes_,
                                    .timeout_s = config_.timeout_s});
}

}  // namespace hp::shmem
