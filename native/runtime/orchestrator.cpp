#include "orchestrator.h"

#include <cxxabi.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "../common/settings.h"
#include "diagnostics.h"
#include "heap_ring.h"
#include "scheduler.h"
#include "tensor_map.h"

namespace hp::runtime {

using platform::LaunchMode;

struct Orchestrator::Impl {
  Impl(ChipWorker& w, Scheduler::Options options)
      : worker(w), scheduler(w.chip(), std::move(options)) {}
  ChipWorker& worker;
  Scheduler scheduler;
  TensorMap tensor_map;
  std::vector<std::vector<TaskSlot*>> scopes;  // the tasks each open scope holds; [0] is the root
  std::vector<std::source_location> scope_sites;  // parallel to scopes
  TaskId next_id = 0;
  std::size_t heap_capacity = 0;

  bool observed() const noexcept { return !scheduler.observers().empty(); }
  Occupancy occupancy(int ring) {
    const RingState r = scheduler.ring_state(ring);
    return {.ring = ring, .live_slots = r.live_slots, .heap_used = r.heap_used,
            .tensor_map_entries = tensor_map.size()};
  }
};

Scope::Scope(Orchestrator& orchestrator, std::source_location site)
    : orchestrator_(orchestrator), depth_(orchestrator.begin_scope(site)) {}

Scope::~Scope() noexcept { orchestrator_.end_scope(); }

Orchestrator::Orchestrator(ChipWorker& worker, const OrchestratorConfig& config,
                           double wait_timeout_s)
    : impl_(std::make_unique<Impl>(worker, Scheduler::Options{
                                               .ring_slots = config.task_ring_slots,
                                               .heap_bytes = config.heap_ring_bytes,
                                               .wait_timeout_s = wait_timeout_s,
                                               .observers = config.observers,
                                           })) {
  impl_->heap_capacity = config.heap_ring_bytes / HeapRing::kAlignment * HeapRing::kAlignment;
}

Orchestrator::~Orchestrator() noexcept = default;

int Orchestrator::scope_depth() const noexcept {
  return static_cast<int>(impl_->scopes.size()) - 1;
}

int Orchestrator::begin_scope(std::source_location site) {
  impl_->scopes.emplace_back();
  impl_->scope_sites.push_back(site);
  const int depth = scope_depth();
  if (impl_->observed()) {
    const int ring = std::min(depth, kMaxRing);
    const ScopeInfo info{.depth = depth, .ring = ring, .site = site,
                         .occupancy = impl_->occupancy(ring)};
    for (Observer* o : impl_->scheduler.observers()) {
      o->on_scope_begin(depth);
      o->on_scope_opened(info);
    }
  }
  return depth;
}

void Orchestrator::end_scope() noexcept {
  if (impl_->scopes.empty()) return;
  const int depth = scope_depth();
  ScopeInfo info;
  if (impl_->observed()) {
    const int ring = std::min(depth, kMaxRing);
    info = {.depth = depth, .ring = ring, .site = impl_->scope_sites.back(),
            .occupancy = impl_->occupancy(ring)};
  }
  impl_->scheduler.release_scope(impl_->scopes.back());
  impl_->scopes.pop_back();
  impl_->scope_sites.pop_back();
  for (Observer* o : impl_->scheduler.observers()) {
    o->on_scope_end(depth);
    o->on_scope_closed(info);
  }
}

Status Orchestrator::escape(const TensorView& output) {
  const int depth = scope_depth();
  HP_ENSURE(depth > 0, ErrorCode::kInvalidArgument,
            "escape at the root scope: its outputs already live until the run ends");
  std::vector<TaskSlot*>& held = impl_->scopes.back();
  for (auto it = held.begin(); it != held.end(); ++it) {
    const TaskArgs& args = (*it)->body->args;
    for (int i = 0; i < args.num_tensors(); ++i) {
      if (args.tag(i) == ArgTag::kOutput && args.tensor(i).data() == output.data() &&
          output.data() != nullptr) {
        impl_->scopes[static_cast<std::size_t>(depth - 1)].push_back(*it);
        held.erase(it);
        return Status::ok();
      }
    }
  }
  return Status::error(ErrorCode::kNotFound,
                       "escape: no task of the current scope (depth {}) has an OUTPUT starting "
                       "at {}; escape the tensor submit() returned, in the scope that made it",
                       depth, output.data());
}

Status Orchestrator::submit(int callable_slot, const TaskArgs& args, const CallConfig& config,
                            SubmitResult* result) {
  Impl& impl = *impl_;
  HP_ENSURE(!impl.scopes.empty(), ErrorCode::kFailedPrecondition,
            "submit outside the orchestration function: call it from the function given to "
            "Orchestrator::run");
  const TaskId id = impl.next_id;
  std::shared_ptr<const Callable> callable;
  HP_RETURN_IF_ERROR(impl.worker.callable(callable_slot, &callable));
  const std::string what = fmt::format("submit(task {}, callable '{}')", id, callable->name());
  HP_RETURN_IF_ERROR(args.validate(what));
  platform::Chip& chip = impl.worker.chip();
  HP_ENSURE(config.block_num >= 1, ErrorCode::kInvalidArgument, "{}: block_num={} must be >= 1",
            what, config.block_num);
  for (TaskId pred : args.explicit_dependencies()) {
    HP_ENSURE(pred < id, ErrorCode::kInvalidArgument,
              "{}: explicit dependency on task {}, which is not submitted yet (tasks can only "
              "depend on earlier tasks)",
              what, pred);
  }
  std::size_t heap_bytes = 0;
  for (int i = 0; i < args.num_tensors(); ++i) {
    if (args.tag(i) != ArgTag::kOutput) continue;
    const TensorView& t = args.tensor(i);
    heap_bytes += HeapRing::rounded(static_cast<std::size_t>(t.numel()) * t.element_size());
  }
  HP_ENSURE(heap_bytes <= impl.heap_capacity, ErrorCode::kOutOfMemory,
            "{}: its OUTPUT tensors need {} bytes, more than a heap ring holds ({} bytes); raise "
            "OrchestratorConfig.heap_ring_bytes",
            what, heap_bytes, impl.heap_capacity);

  auto body = std::make_shared<TaskBody>(TaskBody{callable, args});
  int resident = config.block_num;
  switch (config.mode) {
    case LaunchMode::kCube: resident = std::min(config.block_num, chip.num_cube()); break;
    case LaunchMode::kVector: resident = std::min(config.block_num, chip.num_vector()); break;
    case LaunchMode::kMix: resident = config.block_num * (1 + chip.ratio()); break;
  }
  std::unique_ptr<platform::BlockLaunch> launch;
  {
    Status s = chip.prepare_block_launch(
        {.mode = config.mode, .block_dim = config.block_num, .num_flags = config.num_flags,
         .wait_timeout_s = config.wait_timeout_s},
        [body](platform::BlockContext& block) { return body->callable->function()(body->args, block); },
        resident, &launch);
    if (!s.is_ok()) return s.with_context(what);
  }

  const int depth = scope_depth();
  const int ring = std::min(depth, kMaxRing);
  TaskSlot* slot = nullptr;
  std::byte* heap = nullptr;
  HP_RETURN_IF_ERROR(impl.scheduler.acquire(ring, id, heap_bytes, &slot, &heap));
  ++impl.next_id;

  std::size_t offset = 0;
  for (int i = 0; i < args.num_tensors(); ++i) {
    if (args.tag(i) != ArgTag::kOutput) continue;
    const TensorView& t = args.tensor(i);
    body->args.set_output_data(i, heap + offset);
    offset += HeapRing::rounded(static_cast<std::size_t>(t.numel()) * t.element_size());
  }
  slot->info = TaskInfo{.id = id, .callable = callable->name(), .callable_slot = callable_slot,
                        .scope_depth = depth, .ring = ring, .config = config,
                        .args = &body->args};
  slot->body = body;
  slot->launch = std::move(launch);

  std::vector<TensorAccess> accesses;
  accesses.reserve(static_cast<std::size_t>(args.num_tensors()));
  for (int i = 0; i < args.num_tensors(); ++i) {
    accesses.push_back({TensorRegion::of(body->args.tensor(i)), args.tag(i), i});
  }
  std::vector<Dependency> deps;
  impl.scheduler.connect(slot, impl.tensor_map, accesses, &deps);
  impl.scopes.back().push_back(slot);
  if (impl.observed()) {
    for (Observer* o : impl.scheduler.observers()) o->on_task_submit(slot->info, deps);
    const Occupancy occupancy = impl.occupancy(ring);
    for (Observer* o : impl.scheduler.observers()) o->on_occupancy(occupancy);
  }
  if (result != nullptr) {
    result->task = id;
    result->outputs.clear();
    for (int i = 0; i < args.num_tensors(); ++i) {
      if (args.tag(i) == ArgTag::kOutput) result->outputs.push_back(body->args.tensor(i));
    }
  }
  impl.scheduler.publish(slot);
  return Status::ok();
}

Status Orchestrator::orchestrate(const Orchestration& orchestration) {
  begin_scope(std::source_location());  // the root scope
  Status status;
  try {
    status = orchestration(*this);
  } catch (const abi::__forced_unwind&) {
    throw;
  } catch (const std::exception& e) {
    status = Status::error(ErrorCode::kKernelFailed, "the orchestration function threw: {}",
                           e.what());
  } catch (...) {
    status = Status::error(ErrorCode::kKernelFailed,
                           "the orchestration function threw a non-std::exception");
  }
  while (!impl_->scopes.empty()) end_scope();
  Status drained = impl_->scheduler.wait_all();
  impl_->scheduler.stop();
  return status.is_ok() ? drained : status;
}

Status Orchestrator::execute(const Orchestration& orchestration) {
  Status orchestration_status;
  std::thread thread;
  try {
    thread = std::thread([&] { orchestration_status = orchestrate(orchestration); });
  } catch (const std::system_error& e) {
    return Status::error(ErrorCode::kSystemError, "cannot start the orchestration thread: {}",
                         e.what());
  }
  platform::Chip& chip = impl_->worker.chip();
  // One block per core for the whole run: each loops over the tasks assigned to its core.
  Status launch_status =
      chip.launch({.mode = LaunchMode::kMix, .block_dim = chip.num_cube(), .num_flags = 0},
                  [this](platform::BlockContext& block) { return impl_->scheduler.core_main(block); });
  if (!launch_status.is_ok()) impl_->scheduler.abandon(launch_status);
  thread.join();
  if (Status first = impl_->scheduler.first_error(); !first.is_ok()) return first;
  if (!orchestration_status.is_ok()) return orchestration_status;
  return launch_status;
}

Status Orchestrator::run(ChipWorker& worker, const Orchestration& orchestration,
                         const OrchestratorConfig& config) {
  HP_RETURN_IF_ERROR(settings_status());
  HP_ENSURE(bool(orchestration), ErrorCode::kInvalidArgument,
            "Orchestrator::run: the orchestration function is empty");
  HP_ENSURE(config.task_ring_slots >= 1 && config.task_ring_slots <= (1 << 20),
            ErrorCode::kInvalidArgument,
            "OrchestratorConfig.task_ring_slots={} must be in [1, 1048576]", config.task_ring_slots);
  const double timeout = config.wait_timeout_s.value_or(settings().wait_timeout_s);
  HP_ENSURE(timeout > 0, ErrorCode::kInvalidArgument,
            "OrchestratorConfig.wait_timeout_s={} must be > 0", timeout);
  for (Observer* o : config.observers) {
    HP_ENSURE(o != nullptr, ErrorCode::kInvalidArgument,
              "OrchestratorConfig.observers holds a null observer");
  }
  std::unique_ptr<Diagnostics> diagnostics;
  HP_RETURN_IF_ERROR(Diagnostics::open(config.diagnostics, &diagnostics));
  OrchestratorConfig effective = config;
  if (diagnostics) diagnostics->add_observers(&effective.observers);
  platform::Chip& chip = worker.chip();
  const RunInfo run_info{.num_cube = chip.num_cube(), .num_vector = chip.num_vector(),
                         .ratio = chip.ratio(), .num_rings = kMaxRing + 1,
                         .task_ring_slots = config.task_ring_slots,
                         .heap_ring_bytes = config.heap_ring_bytes / HeapRing::kAlignment *
                                            HeapRing::kAlignment};
  for (Observer* o : effective.observers) o->on_run_begin(run_info);
  Status status;
  {
    Orchestrator orchestrator(worker, effective, timeout);
    status = orchestrator.execute(orchestration);
  }
  for (Observer* o : effective.observers) o->on_run_end(status);
  if (!diagnostics) return status;
  Status written = diagnostics->finish();
  return status.is_ok() ? written : status;
}

}  // namespace hp::runtime
