// Fuzz target: a PE joining a job whose control segment ("/dev/shm/hp.<job>.ctl", which hprun
// writes and every PE of the job maps) holds anything at all. Input: one byte, the world size
// the PE was told (HP_WORLD_SIZE, 1..8), then the segment's bytes (its size is the input's).
//
// Expected: JobSegment::open maps it or fails with CORRUPT_DATA (too small, another magic,
// version or header size, another number of PEs than the PE was told); once open, what a PE
// reads and writes there (the abort state and reason, its slot, the doorbells) stays inside the
// segment.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_check.h"
#include "shmem/job.h"

using hp::ErrorCode;
using hp::shmem::JobSegment;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int world_size = 1 + data[0] % 8;
  const std::string job_id = "fuzz-" + std::to_string(::getpid());
  const std::string name = JobSegment::control_name(job_id);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) hp::fuzz::fail("cannot create " + name);
  const bool written = ::write(fd, data + 1, size - 1) == ssize_t(size - 1);
  ::close(fd);
  if (!written) hp::fuzz::fail("cannot write " + name);

  std::unique_ptr<JobSegment> job;
  const hp::Status s = JobSegment::open(job_id, world_size, &job);
  shm_unlink(name.c_str());
  hp::fuzz::expect_status(s, {ErrorCode::kCorruptData}, "JobSegment::open");
  if (!s.is_ok()) return 0;

  // What a joining PE does with it: read the job's state, take its slot (rank 0), and, as any
  // PE may, abort the job and wake every PE.
  if (job->n_pes() != world_size) hp::fuzz::fail("open() accepted another number of PEs");
  (void)job->aborted();
  (void)job->abort_message();
  job->pe(0).pid.store(::getpid(), std::memory_order_relaxed);
  job->pe(0).state.store(std::uint32_t(hp::shmem::PeState::kReady), std::memory_order_release);
  job->wake_all_doorbells();
  job->abort(0, "fuzz");
  (void)job->abort_message();
  return 0;
}
