// NodeJob: a symmetric memory job whose PEs are child processes of the process that made it
// (the node-level task runtime's chips, native/runtime/node).
//
// The parent creates the job before it forks: the control segment and every PE's segment are
// anonymous shared memory (memfd_create: no name in /dev/shm, nothing for another process to
// open), mapped by the parent, so a child forked after create() has every mapping at the same
// address as the parent and every other child. A child then join()s as its PE, and hp::shmem
// works in it as in an hprun job on the shm transport (every PE mapped: direct copies, futex
// doorbells, the job's abort). The parent is not a PE: it reads and writes the heaps directly
// (heap(pe): a pointer valid in every process of the job), and it is the job's launcher: when a
// child ends before it finalized, mark_dead() aborts the job, so the others' waits end with
// PEER_DEAD naming it. The memory goes away with the last process that maps it.
//
// Heap layout, the same on every PE: [0, reserved_bytes) is allocated by the parent
// (allocate/release: the same offset on every PE, so an allocation is symmetric); the PEs'
// own hp::shmem::malloc starts after it. Memory is zero when the job is created.
#ifndef HYPER_PARALLEL_SHMEM_NODE_JOB_H_
#define HYPER_PARALLEL_SHMEM_NODE_JOB_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "shmem/job.h"

namespace hp::shmem {

class HeapAllocator;

struct NodeJobConfig {
  int n_pes = 1;
  std::size_t heap_bytes = 64u << 20;  // per PE (rounded up to a page)
  std::size_t reserved_bytes = 0;      // the parent's part of each heap (rounded up to 64)
  std::vector<int> mem_nodes;          // NUMA nodes the segments are bound to (empty: any)
  double timeout_s = 120;              // the PEs' waits (join's barrier, hp::shmem waits)
  std::string job_id = "node";         // names the job in messages
};

class HP_API NodeJob {
 public:
  static Status create(const NodeJobConfig& config, std::unique_ptr<NodeJob>* out);
  ~NodeJob() noexcept;
  NodeJob(const NodeJob&) = delete;
  NodeJob& operator=(const NodeJob&) = delete;

  int n_pes() const noexcept { return config_.n_pes; }
  std::size_t heap_bytes() const noexcept { return heap_bytes_; }
  std::size_t reserved_bytes() const noexcept { return reserved_bytes_; }
  // PE `pe`'s heap (its symmetric offset 0), valid in every process of the job.
  std::byte* heap(int pe) const noexcept;
  // The PE whose heap holds all of [p, p + bytes) and the offset there; false when none does.
  bool locate(const void* p, std::size_t bytes, int* pe, std::size_t* offset) const noexcept;
  JobSegment& control() noexcept { return *control_; }
  const std::string& job_id() const noexcept { return config_.job_id; }

  // --- the parent ---
  // Allocates `bytes` at the same offset of every PE's reserved part (OUT_OF_MEMORY naming
  // what is left when it does not fit).
  Status allocate(std::size_t bytes, std::size_t alignment, std::size_t* offset);
  Status release(std::size_t offset);
  std::size_t reserved_in_use() const noexcept;
  // PE `pe` runs in process `pid` (before it can join).
  void set_pid(int pe, int pid) noexcept;
  // PE `pe`'s process ended with `wait_status` (waitpid): unless it finalized, it is dead and
  // the job is aborted with `reason` (the first abort wins).
  void mark_dead(int pe, int wait_status, std::string_view reason) noexcept;

  // --- a child forked after create() ---
  // hp::shmem::init() for this process as PE `pe`: every PE joins, then passes a barrier
  // (TIMEOUT after timeout_s, PEER_DEAD when the job was aborted). FAILED_PRECONDITION when
  // this process already is a PE.
  Status join(int pe);

 private:
  NodeJob() = default;

  NodeJobConfig config_;
  std::size_t heap_bytes_ = 0;
  std::size_t reserved_bytes_ = 0;
  std::size_t segment_bytes_ = 0;
  std::unique_ptr<JobSegment> control_;
  std::vector<std::byte*> segments_;  // each PE's segment (control area, then heap)
  std::unique_ptr<HeapAllocator> reserved_;
};

}  // namespace hp::shmem

#endif  // HYPER_PARALLEL_SHMEM_NODE_JOB_H_
