#include "runtime/orchestrator.h"

#include <cxxabi.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "common/settings.h"
#include "runtime/diagnostics.h"
#include "runtime/heap_ring.h"
#include "runtime/orchestration_thread.h"
#include "runtime/scheduler.h"
#include "runtime/tensor_map.h"

namespace hp::runtime {

using platform::LaunchMode;

namespace {
// The heap-ring bytes an OUTPUT tensor takes (contiguous, rounded to the ring's alignment).
std::size_t heap_bytes_of(const TensorView& t) noexcept {
  return HeapRing::rounded(static_cast<std::size_t>(t.numel()) * t.element_size());
}
}  // namespace

struct Orchestrator::Impl {
  Impl(ChipWorker& w, Scheduler::Options options, std::vector<std::unique_ptr<TaskRing>> rings)
      : worker(w),
        scheduler(w.chip(), std::move(options), std::move(rings)),
        callables_generation(w.callable_generation()) {}
  ChipWorker& worker;
  Scheduler scheduler;
  TensorMap tensor_map;
  std::vector<std::vector<TaskSlot*>> scopes;  // the tasks each open scope holds; [0] is the root
  std::vector<ScopeSite> scope_sites;          // parallel to scopes
  // Closed scopes' lists, emptied, for the next scopes to fill (no allocation per scope once
  // warm); its capacity covers every open scope, so that end_scope() never allocates.
  std::vector<std::vector<TaskSlot*>> spare_scopes;
  TaskId next_id = 0;
  std::size_t heap_capacity = 0;
  // The last CallConfig the chip accepted, and its gang: most submits repeat one, and then skip
  // the checks.
  std::optional<CallConfig> accepted_config;
  int accepted_gang = 0;
  // Reused by every submit (no allocation per task once warm).
  std::vector<TensorAccess> accesses;
  std::vector<Dependency> deps;

  // The callable cache: slot -> callable as the worker's registry had it at generation
  // `callables_generation`, so that a submit neither takes the registry's mutex nor touches a
  // shared_ptr's count (task slots point at the cached callable). When the generation moves (a
  // slot was freed), the cache is emptied; its callables are kept, `retired`, until every task
  // submitted before then is reclaimed (tasks in flight still run them).
  struct Retired {
    std::shared_ptr<const Callable> callable;
    TaskId before;  // tasks with smaller ids may use it
  };
  std::vector<std::shared_ptr<const Callable>> callables;
  std::uint64_t callables_generation = 0;
  std::vector<Retired> retired;

  Status callable(int slot, const Callable** out) {
    const std::uint64_t generation = worker.callable_generation();
    if (generation != callables_generation) {
      const TaskId oldest = scheduler.oldest_live_task();
      std::erase_if(retired, [&](const Retired& r) { return r.before <= oldest; });
      for (auto& c : callables) {
        if (c) retired.push_back({std::move(c), next_id});
      }
      callables.clear();
      callables_generation = generation;  // read before the lookups below: a change after it
                                          // is seen by the next submit
    }
    const auto index = static_cast<std::size_t>(slot);
    if (slot >= 0 && index < callables.size() && callables[index]) {
      *out = callables[index].get();
      return Status::ok();
    }
    std::shared_ptr<const Callable> found;
    HP_RETURN_IF_ERROR(worker.callable(slot, &found));
    if (index >= callables.size()) callables.resize(index + 1);
    *out = found.get();
    callables[index] = std::move(found);
    return Status::ok();
  }

  bool observed() const noexcept { return !scheduler.observers().empty(); }
  // Slots are reclaimed lazily (when a submit needs one), so a sample first reclaims what was
  // consumed: it counts what an eager reclaim would have left, with no lock (the rings are this
  // thread's). After a submit, the submit's own ring is kept as acquire() left it, reclaimed
  // right before the slot was taken: that sample is the ring's exact peak.
  Occupancy occupancy(int ring, bool after_submit) {
    scheduler.reclaim(tensor_map, after_submit ? ring : -1);
    const RingState r = scheduler.ring_state(ring);
    return {.ring = ring,
            .live_slots = r.live_slots,
            .heap_used = r.heap_used,
            .tensor_map_entries = tensor_map.size()};
  }
};

Scope::Scope(Orchestrator& orchestrator, ScopeSite site)
    : orchestrator_(orchestrator), depth_(orchestrator.begin_scope(site)) {}

Scope::~Scope() noexcept { orchestrator_.end_scope(); }

Orchestrator::Orchestrator(ChipWorker& worker, const OrchestratorConfig& config,
                           double wait_timeout_s)
    : impl_(std::make_unique<Impl>(
          worker,
          Scheduler::Options{
              .ring_slots = config.task_ring_slots,
              .heap_bytes = config.heap_ring_bytes,
              .wait_timeout_s = wait_timeout_s,
              .observers = config.observers,
          },
          worker.take_rings(config.task_ring_slots, config.heap_ring_bytes))) {
  impl_->heap_capacity = HeapRing::capacity_for(config.heap_ring_bytes);
}

// The run is over (execute() returned: no core touches a slot): the rings go back to the worker.
Orchestrator::~Orchestrator() noexcept { impl_->worker.keep_rings(impl_->scheduler.take_rings()); }

int Orchestrator::scope_depth() const noexcept {
  return static_cast<int>(impl_->scopes.size()) - 1;
}

int Orchestrator::begin_scope(ScopeSite site) {
  // Every allocation first: the pushes below cannot throw, so a failure leaves nothing opened.
  impl_->scopes.reserve(impl_->scopes.size() + 1);
  impl_->scope_sites.reserve(impl_->scope_sites.size() + 1);
  impl_->spare_scopes.reserve(impl_->spare_scopes.size() + impl_->scopes.size() + 1);
  if (impl_->spare_scopes.empty()) {
    impl_->scopes.emplace_back();
  } else {
    impl_->scopes.push_back(std::move(impl_->spare_scopes.back()));
    impl_->spare_scopes.pop_back();
  }
  impl_->scope_sites.push_back(site);
  const int depth = scope_depth();
  if (impl_->observed()) {
    const int ring = std::min(depth, kMaxRing);
    const ScopeInfo info{
        .depth = depth, .ring = ring, .site = site, .occupancy = impl_->occupancy(ring, false)};
    for (Observer* o : impl_->scheduler.observers()) {
      o->on_scope_begin(info);
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
    info = {.depth = depth,
            .ring = ring,
            .site = impl_->scope_sites.back(),
            .occupancy = impl_->occupancy(ring, false)};
  }
  impl_->scheduler.release_scope(impl_->scopes.back());
  impl_->scopes.back().clear();
  impl_->spare_scopes.push_back(std::move(impl_->scopes.back()));  // within its capacity
  impl_->scopes.pop_back();
  impl_->scope_sites.pop_back();
  for (Observer* o : impl_->scheduler.observers()) {
    o->on_scope_end(info);
  }
}

Status Orchestrator::escape(const TensorView& output) {
  const int depth = scope_depth();
  HP_ENSURE(depth > 0, ErrorCode::kInvalidArgument,
            "escape at the root scope: its outputs already live until the run ends");
  std::vector<TaskSlot*>& held = impl_->scopes.back();
  for (auto it = held.begin(); it != held.end(); ++it) {
    const TaskArgs& args = (*it)->args;
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
  const Callable* callable = nullptr;
  HP_RETURN_IF_ERROR(impl.callable(callable_slot, &callable));
  // Formatted only for an error.
  auto what = [&] { return fmt::format("submit(task {}, callable '{}')", id, callable->name()); };
  if (!args.well_formed()) return args.validate(what());
  platform::Chip& chip = impl.worker.chip();
  const platform::LaunchConfig launch_config{.mode = config.mode,
                                             .block_dim = config.block_num,
                                             .num_flags = config.num_flags,
                                             .wait_timeout_s = config.wait_timeout_s};
  if (!impl.accepted_config || !(*impl.accepted_config == config)) {
    HP_ENSURE(config.block_num >= 1, ErrorCode::kInvalidArgument, "{}: block_num={} must be >= 1",
              what(), config.block_num);
    if (Status s = chip.check_launch_config(launch_config); !s.is_ok())
      return s.with_context(what());
    impl.accepted_config = config;
    impl.accepted_gang = impl.scheduler.gang_of(config);
  }
  for (TaskId pred : args.explicit_dependencies()) {
    HP_ENSURE(pred < id, ErrorCode::kInvalidArgument,
              "{}: explicit dependency on task {}, which is not submitted yet (tasks can only "
              "depend on earlier tasks)",
              what(), pred);
  }
  std::size_t heap_bytes = 0;
  for (const TaskArgs::TensorArg& arg : args.tensor_args()) {
    if (arg.tag == ArgTag::kOutput) heap_bytes += heap_bytes_of(arg.view);
  }
  HP_ENSURE(heap_bytes <= impl.heap_capacity, ErrorCode::kOutOfMemory,
            "{}: its OUTPUT tensors need {} bytes, more than a heap ring holds ({} bytes); raise "
            "OrchestratorConfig.heap_ring_bytes",
            what(), heap_bytes, impl.heap_capacity);

  const int depth = scope_depth();
  const int ring = std::min(depth, kMaxRing);
  TaskSlot* slot = nullptr;
  std::byte* heap = nullptr;
  HP_RETURN_IF_ERROR(impl.scheduler.acquire(ring, id, heap_bytes, impl.tensor_map, &slot, &heap));
  ++impl.next_id;

  slot->args = args;      // reuses the slot's capacity
  if (heap_bytes != 0) {  // some OUTPUT tensors: give them their memory
    const std::span<const TaskArgs::TensorArg> given = args.tensor_args();
    std::size_t offset = 0;
    for (std::size_t i = 0; i < given.size(); ++i) {
      if (given[i].tag != ArgTag::kOutput) continue;
      slot->args.set_output_data(static_cast<int>(i), heap + offset);
      offset += heap_bytes_of(given[i].view);
    }
  }
  slot->callable = callable;
  slot->info = TaskInfo{.id = id,
                        .callable = slot->callable->name(),
                        .callable_slot = callable_slot,
                        .scope_depth = depth,
                        .ring = ring,
                        .config = config,
                        .args = &slot->args};
  slot->gang = impl.accepted_gang;
  slot->cores_outstanding.store(slot->gang, std::memory_order_relaxed);
  // A gang's launch is the slot's (its kernel runs whatever task the slot holds), made on the
  // slot's first use and re-armed after; the config was checked above, so this cannot fail.
  Status prepared;
  if (impl.scheduler.single_core(*slot)) {
    // runs through the core's own launch (scheduler.h)
  } else if (slot->launch) {
    slot->launch->rearm(launch_config, slot->gang);
  } else {
    prepared = chip.prepare_block_launch(
        launch_config,
        [slot](platform::BlockContext& block) {
          return slot->callable->function()(slot->args, block);
        },
        slot->gang, &slot->launch);
  }
  if (!prepared.is_ok()) {  // the task is still published, skipped, so that the ring stays sound
    prepared.with_context(what());
    slot->skip.store(true, std::memory_order_relaxed);
    slot->status = prepared;
  }

  const std::span<const TaskArgs::TensorArg> tensors = slot->args.tensor_args();
  impl.accesses.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    TensorAccess& access = impl.accesses[i];
    access.region.assign(tensors[i].view);
    access.tag = tensors[i].tag;
    access.arg_index = static_cast<int>(i);
  }
  impl.deps.clear();
  impl.scheduler.connect(slot, impl.tensor_map, impl.accesses,
                         impl.observed() ? &impl.deps : nullptr);
  impl.scopes.back().push_back(slot);
  if (impl.observed()) {
    const Occupancy occupancy = impl.occupancy(ring, true);
    for (Observer* o : impl.scheduler.observers())
      o->on_task_submit(slot->info, impl.deps, occupancy);
  }
  if (result != nullptr) {
    result->task = id;
    result->outputs.clear();
    for (int i = 0; i < args.num_tensors(); ++i) {
      if (args.tag(i) == ArgTag::kOutput) result->outputs.push_back(slot->args.tensor(i));
    }
  }
  impl.scheduler.publish(slot);
  return prepared;
}

Status Orchestrator::orchestrate(const Orchestration& orchestration) {
  begin_scope(ScopeSite());  // the root scope
  Status status;
  try {
    status = orchestration(*this);
  } catch (const abi::__forced_unwind&) {
    throw;
  } catch (const std::exception& e) {
    status =
        Status::error(ErrorCode::kKernelFailed, "the orchestration function threw: {}", e.what());
  } catch (...) {
    status = Status::error(ErrorCode::kKernelFailed,
                           "the orchestration function threw a non-std::exception");
  }
  while (!impl_->scopes.empty()) end_scope();
  Status drained = impl_->scheduler.wait_all();
  impl_->scheduler.close_deferrals();
  impl_->scheduler.stop();
  return status.is_ok() ? drained : status;
}

Status Orchestrator::execute(const Orchestration& orchestration) {
  Status orchestration_status;
  OrchestrationThread& thread = *impl_->worker.orchestration_thread_;
  HP_RETURN_IF_ERROR(thread.start([&] { orchestration_status = orchestrate(orchestration); }));
  platform::Chip& chip = impl_->worker.chip();
  // One block per core for the whole run: each loops over the tasks assigned to its core.
  Status launch_status = chip.launch(
      {.mode = LaunchMode::kMix, .block_dim = chip.num_cube(), .num_flags = 0},
      [this](platform::BlockContext& block) { return impl_->scheduler.core_main(block); });
  if (!launch_status.is_ok()) impl_->scheduler.abandon(launch_status);
  thread.wait();
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
            "OrchestratorConfig.task_ring_slots={} must be in [1, 1048576]",
            config.task_ring_slots);
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
  const RunInfo run_info{.num_cube = chip.num_cube(),
                         .num_vector = chip.num_vector(),
                         .ratio = chip.ratio(),
                         .num_rings = kMaxRing + 1,
                         .task_ring_slots = config.task_ring_slots,
                         .heap_ring_bytes = HeapRing::capacity_for(config.heap_ring_bytes)};
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
