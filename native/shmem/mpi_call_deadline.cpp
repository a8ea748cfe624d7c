#include "shmem/mpi_call_deadline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/status.h"

namespace hp::shmem {
namespace {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

MpiCallDeadline::MpiCallDeadline(double timeout_s, int pe)
    : timeout_ns_(std::int64_t(timeout_s * 1e9)), pe_(pe), thread_([this] { watch(); }) {}

MpiCallDeadline::~MpiCallDeadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
}

MpiCallDeadline::Call::Call(MpiCallDeadline& deadline, const char* what, int target) noexcept
    : deadline_(deadline) {
  deadline_.what_.store(what, std::memory_order_relaxed);
  deadline_.target_.store(target, std::memory_order_relaxed);
  deadline_.started_ns_.store(now_ns(), std::memory_order_release);
}

MpiCallDeadline::Call::~Call() { deadline_.started_ns_.store(0, std::memory_order_release); }

void MpiCallDeadline::watch() {
  // Checked a few times per deadline (at least once a second), so that a stuck call ends
  // within a small fraction past it.
  const auto period =
      std::chrono::nanoseconds(std::clamp<std::int64_t>(timeout_ns_ / 8, 1'000'000, 1'000'000'000));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, period, [this] { return stopping_; })) {
    const std::int64_t started = started_ns_.load(std::memory_order_acquire);
    if (started == 0 || now_ns() - started <= timeout_ns_) continue;
    const char* what = what_.load(std::memory_order_relaxed);
    const int target = target_.load(std::memory_order_relaxed);
    const Status status(
        ErrorCode::kTimeout,
        fmt::format("{}{} did not return within {} s on PE {} (HP_SHMEM_TIMEOUT_S sets the "
                    "deadline): a PE, or the link to its host, stopped; ending this process",
                    what, target >= 0 ? fmt::format(" to PE {}", target) : std::string(),
                    timeout_s(), pe_));
    std::fprintf(stderr, "hp shmem: MPI transport: %s\n", status.to_string().c_str());
    std::fflush(nullptr);
    std::_Exit(1);
  }
}

}  // namespace hp::shmem
