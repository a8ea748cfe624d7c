#include "runtime/chip_worker.h"

#include <utility>

#include "runtime/callable_registry.h"
#include "runtime/orchestration_thread.h"
#include "runtime/task_ring.h"

namespace hp::runtime {

ChipWorker::ChipWorker(std::unique_ptr<platform::Chip> chip)
    : chip_(std::move(chip)),
      registry_(std::make_unique<CallableRegistry>()),
      orchestration_thread_(std::make_unique<OrchestrationThread>()) {}

ChipWorker::~ChipWorker() noexcept = default;

std::vector<std::unique_ptr<TaskRing>> ChipWorker::take_rings(int slots, std::size_t heap_bytes) {
  std::lock_guard lock(rings_mutex_);
  // A run's rings all have its sizes: another size and the next run makes its own.
  if (!idle_rings_.empty() &&
      (idle_rings_.front()->capacity() != slots ||
       idle_rings_.front()->heap().capacity() != HeapRing::capacity_for(heap_bytes))) {
    idle_rings_.clear();
  }
  return std::exchange(idle_rings_, {});
}

void ChipWorker::keep_rings(std::vector<std::unique_ptr<TaskRing>> rings) noexcept {
  std::lock_guard lock(rings_mutex_);
  idle_rings_ = std::move(rings);
}

Status ChipWorker::create(const platform::ChipConfig& config, std::unique_ptr<ChipWorker>* worker) {
  std::unique_ptr<platform::Chip> chip;
  HP_RETURN_IF_ERROR(platform::Chip::create(config, &chip));
  worker->reset(new ChipWorker(std::move(chip)));
  return Status::ok();
}

Status ChipWorker::register_callable(const Callable& callable, int* slot) {
  return registry_->add(callable, slot);
}

Status ChipWorker::unregister_callable(int slot) { return registry_->remove(slot); }

int ChipWorker::callable_references(int slot) const { return registry_->references(slot); }

std::uint64_t ChipWorker::callable_generation() const noexcept { return registry_->generation(); }

Status ChipWorker::callable(int slot, std::shared_ptr<const Callable>* out) const {
  return registry_->get(slot, out);
}

Status ChipWorker::run(int slot, const TaskArgs& args, const CallConfig& config) {
  std::shared_ptr<const Callable> callable;
  HP_RETURN_IF_ERROR(registry_->get(slot, &callable));
  const std::string what = fmt::format("run(callable '{}')", callable->name());
  HP_RETURN_IF_ERROR(args.validate(what));
  for (int i = 0; i < args.num_tensors(); ++i) {
    HP_ENSURE(args.tag(i) != ArgTag::kOutput, ErrorCode::kInvalidArgument,
              "{}: tensor argument {} is OUTPUT, which needs an orchestration's heap ring; pass "
              "caller memory tagged OUTPUT_EXISTING",
              what, i);
  }
  const TaskFunction& function = callable->function();
  Status s = chip_->launch({.mode = config.mode,
                            .block_dim = config.block_num,
                            .num_flags = config.num_flags,
                            .wait_timeout_s = config.wait_timeout_s},
                           [&](platform::BlockContext& block) { return function(args, block); });
  if (!s.is_ok()) s.with_context(what);
  return s;
}

}  // namespace hp::runtime
