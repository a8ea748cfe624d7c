// OrchestrationThread: the thread a ChipWorker's runs execute their orchestration function on
// (internal to the runtime). Made by the first run and kept until the worker is destroyed, so
// that a run does not pay for creating and joining a thread: start() hands it one job, wait()
// returns when the job returned. One job at a time (a ChipWorker runs one orchestration at a
// time).
#ifndef HYPER_PARALLEL_RUNTIME_ORCHESTRATION_THREAD_H_
#define HYPER_PARALLEL_RUNTIME_ORCHESTRATION_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace hp::runtime {

class OrchestrationThread {
 public:
  OrchestrationThread() = default;
  ~OrchestrationThread() noexcept;
  OrchestrationThread(const OrchestrationThread&) = delete;
  OrchestrationThread& operator=(const OrchestrationThread&) = delete;

  // SYSTEM_ERROR when the thread cannot be created.
  Status start(std::function<void()> job);
  void wait();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;
  bool pending_ = false;  // job_ is waiting to run
  bool running_ = false;  // a job started and has not returned
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_ORCHESTRATION_THREAD_H_
