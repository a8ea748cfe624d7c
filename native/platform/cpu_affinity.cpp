#include "platform/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include <fmt/ranges.h>

namespace hp::platform {
namespace {

// Large enough for any machine we run on; CPU_ALLOC sizes the set dynamically.
constexpr int kMaxCpus = 4096;

struct CpuSet {
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  std::size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
  CpuSet() {
    if (set == nullptr) throw std::bad_alloc();
    CPU_ZERO_S(bytes, set);
  }
  ~CpuSet() { CPU_FREE(set); }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;

  std::vector<int> list() const {
    std::vector<int> cpus;
    for (int c = 0; c < kMaxCpus; ++c) {
      if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
    }
    return cpus;
  }
};

}  // namespace

Status allowed_cpus(std::vector<int>* cpus) {
  CpuSet s;
  // The process's mask is its main thread's (getpid() is the main thread's tid), not the mask
  // of whichever thread asks.
  if (sched_getaffinity(::getpid(), s.bytes, s.set) != 0) {
    return Status::error(ErrorCode::kSystemError, "sched_getaffinity failed: {}",
                         std::strerror(errno));
  }
  *cpus = s.list();
  return Status::ok();
}

Status set_thread_affinity(pthread_t thread, std::span<const int> cpus) {
  CpuSet s;
  for (int c : cpus) {
    HP_ENSURE(c >= 0 && c < kMaxCpus, ErrorCode::kOutOfRange, "CPU {} is out of range", c);
    CPU_SET_S(c, s.bytes, s.set);
  }
  const int err = pthread_setaffinity_np(thread, s.bytes, s.set);
  HP_ENSURE(err == 0, ErrorCode::kSystemError, "pthread_setaffinity_np({}) failed: {}",
            fmt::join(cpus, ","), std::strerror(err));
  return Status::ok();
}

Status current_thread_affinity(std::vector<int>* cpus) {
  CpuSet s;
  const int err = pthread_getaffinity_np(pthread_self(), s.bytes, s.set);
  HP_ENSURE(err == 0, ErrorCode::kSystemError, "pthread_getaffinity_np failed: {}",
            std::strerror(err));
  *cpus = s.list();
  return Status::ok();
}

}  // namespace hp::platform
