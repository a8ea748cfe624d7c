#include "runtime/orchestration_thread.h"

#include <system_error>
#include <utility>

namespace hp::runtime {

OrchestrationThread::~OrchestrationThread() noexcept {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status OrchestrationThread::start(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error& e) {
      return Status::error(ErrorCode::kSystemError, "cannot start the orchestration thread: {}",
                           e.what());
    }
  }
  job_ = std::move(job);
  pending_ = true;
  running_ = true;
  changed_.notify_all();
  return Status::ok();
}

void OrchestrationThread::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !running_; });
}

void OrchestrationThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return pending_ || stop_; });
    if (stop_ && !pending_) return;
    std::function<void()> job = std::move(job_);
    pending_ = false;
    lock.unlock();
    job();
    job = nullptr;  // what the job captured goes before the run is reported over
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace hp::runtime
