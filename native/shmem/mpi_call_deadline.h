// The deadline of the MPI transport's calls. An MPI call cannot be cancelled: a one-sided
// operation to a PE that stopped, or across a link that went down, blocks inside MPI (Open
// MPI's TCP paths retry forever), and so does a one-sided component that waits on a target
// which never progresses. The transport's waits have the job's deadline; its MPI calls get the
// same one from this watchdog: a thread that, when one call has lasted longer than the deadline,
// prints a TIMEOUT naming the call, its target PE and this PE, and ends the process with status
// 1 (what the C API does on any error). The launcher (mpirun) then ends the job.
//
// One call is watched at a time: the transport serializes its calls unless the program gave MPI
// MPI_THREAD_MULTIPLE; then calls that overlap are watched from the latest start, and one that
// ends clears the mark for all: a call stuck past an overlapping one is not noticed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace hp::shmem {

class MpiCallDeadline {
 public:
  // timeout_s > 0; pe: this PE, for the message.
  MpiCallDeadline(double timeout_s, int pe);
  double timeout_s() const noexcept { return double(timeout_ns_) / 1e9; }
  ~MpiCallDeadline();
  MpiCallDeadline(const MpiCallDeadline&) = delete;
  MpiCallDeadline& operator=(const MpiCallDeadline&) = delete;

  // Marks one MPI call (what: a static string; target: its PE, -1 for none) while it lives.
  class Call {
   public:
    Call(MpiCallDeadline& deadline, const char* what, int target) noexcept;
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    MpiCallDeadline& deadline_;
  };

 private:
  void watch();

  const std::int64_t timeout_ns_;
  const int pe_;
  // The call in progress: started_ns_ (steady clock) is 0 when there is none; what_ and
  // target_ are written before it is set (release) and read after it is seen (acquire).
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<const char*> what_{nullptr};
  std::atomic<int> target_{-1};
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hp::shmem
