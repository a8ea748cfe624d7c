// ChipWorker: the runtime on one chip (docs/runtime.md). Callables are registered into
// integer slots (content-deduplicated, reference counted; see callable.h) and run SPMD on the
// chip, either one at a time with run(), or as tasks of an orchestration (orchestrator.h).
#ifndef HYPER_PARALLEL_RUNTIME_CHIP_WORKER_H_
#define HYPER_PARALLEL_RUNTIME_CHIP_WORKER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "platform/chip.h"
#include "runtime/callable.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime {

class CallableRegistry;
class Orchestrator;
class OrchestrationThread;
class TaskRing;

class HP_API ChipWorker {
 public:
  static Status create(const platform::ChipConfig& config, std::unique_ptr<ChipWorker>* worker);
  ~ChipWorker() noexcept;
  ChipWorker(const ChipWorker&) = delete;
  ChipWorker& operator=(const ChipWorker&) = delete;

  // The same handle registered again returns the same slot with one more reference.
  Status register_callable(const Callable& callable, int* slot);
  // Drops one reference; the slot is freed (and may be reused) when none is left. Tasks already
  // submitted keep their callable alive.
  Status unregister_callable(int slot);
  int callable_references(int slot) const;  // 0 when the slot is free
  Status callable(int slot, std::shared_ptr<const Callable>* out) const;
  // Changes whenever unregister_callable frees a slot: a slot -> callable mapping looked up
  // after reading a generation stays valid while the generation reads the same.
  std::uint64_t callable_generation() const noexcept;

  // Runs the callable once over config.block_num blocks and returns when every block finished
  // (the first block error, named). OUTPUT arguments need an orchestration's heap ring and are
  // refused here (INVALID_ARGUMENT): pass caller memory as OUTPUT_EXISTING.
  Status run(int slot, const TaskArgs& args, const CallConfig& config);

  platform::Chip& chip() noexcept { return *chip_; }

 private:
  friend class Orchestrator;
  ChipWorker(std::unique_ptr<platform::Chip> chip);
  // An orchestration run's task rings (several MiB of slots) are kept for the next run with the
  // same sizes: allocating and faulting them in cost each run about a millisecond.
  std::vector<std::unique_ptr<TaskRing>> take_rings(int slots, std::size_t heap_bytes);
  void keep_rings(std::vector<std::unique_ptr<TaskRing>> rings) noexcept;

  std::unique_ptr<platform::Chip> chip_;
  std::unique_ptr<CallableRegistry> registry_;
  // Where orchestration functions run, made by the first run and kept (a thread per run cost
  // each run more than the rest of its fixed cost).
  std::unique_ptr<OrchestrationThread> orchestration_thread_;
  std::mutex rings_mutex_;
  std::vector<std::unique_ptr<TaskRing>> idle_rings_;  // from the last run, or empty
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_CHIP_WORKER_H_
