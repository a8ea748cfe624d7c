#include "runtime/scheduler.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "common/cpu_features.h"
#include "common/logging.h"
#include "common/prefetch.h"
#include "common/settings.h"

namespace hp::runtime {

using platform::CoreType;
using platform::LaunchMode;

Scheduler::Scheduler(platform::Chip& chip, Options options,
                     std::vector<std::unique_ptr<TaskRing>> rings)
    : chip_(chip),
      options_(std::move(options)),
      num_cube_(chip.num_cube()),
      num_vector_(chip.num_vector()),
      ratio_(chip.ratio()),
      cores_(std::make_unique<Core[]>(static_cast<std::size_t>(num_cube_ + num_vector_))) {
  if (static_cast<int>(rings.size()) == kRings) {
    rings_ = std::move(rings);
  } else {
    for (int i = 0; i < kRings; ++i) {
      rings_.push_back(std::make_unique<TaskRing>(i, options_.ring_slots, options_.heap_bytes));
    }
  }
  for (int c = 0; c < num_cube_ + num_vector_; ++c) {
    cores_[static_cast<std::size_t>(c)].type = c < num_cube_ ? 0 : 1;
  }
  // Spinning pays only when every core and the orchestration thread have a CPU of their own.
  const bool shared_cpus = num_cube_ + num_vector_ + 1 > static_cast<int>(chip.cpus().size());
  policy_.spin = shared_cpus ? 0 : settings().spin_before_block;
  policy_.yield_for = std::chrono::microseconds(settings().yield_before_sleep_us);
  // The cores notify their completions, and the orchestration thread its ready-at-submit tasks,
  // with light notifies where the kernel lets the waiters fence for them.
  policy_.light_notifiers = platform::light_notify_available();
  if (policy_.light_notifiers) lanes_ = std::make_unique<ReadyLane[]>(2);
  core_policy_ = policy_;
  core_policy_.poll_interval = std::chrono::microseconds(settings().idle_poll_us);
  prefetch_owned_ = cpu_features().prfchw;
  deferrals_ = std::make_shared<DeferralRegistry>(
      options_.wait_timeout_s,
      [this](TaskSlot* slot, Status status) { finish_deferred(slot, std::move(status)); });
}

Scheduler::~Scheduler() noexcept { deferrals_->close(); }

namespace {
// The task whose block runs on this thread, for defer_current().
struct RunningTask {
  Scheduler* scheduler = nullptr;
  TaskSlot* slot = nullptr;
};
thread_local RunningTask t_running;

// Sets t_running while a core runs blocks of a task.
class RunningScope {
 public:
  RunningScope(Scheduler* scheduler, TaskSlot* slot) noexcept : saved_(t_running) {
    t_running = {scheduler, slot};
  }
  ~RunningScope() { t_running = saved_; }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;

 private:
  RunningTask saved_;
};
}  // namespace

int Scheduler::gang_of(const CallConfig& config) const noexcept {
  switch (config.mode) {
    case LaunchMode::kCube:
      return std::min(config.block_num, num_cube_);
    case LaunchMode::kVector:
      return std::min(config.block_num, num_vector_);
    case LaunchMode::kMix:
      return config.block_num * (1 + ratio_);
  }
  return 1;
}

std::string Scheduler::describe(const TaskSlot& slot) const {
  return fmt::format("task {} (callable '{}')", slot.info.id, slot.info.callable);
}

std::string Scheduler::describe_ring(TaskRing& ring) {
  std::string text =
      fmt::format("ring {} (scope depth {}{}): {} of {} slots live", ring.index(), ring.index(),
                  ring.index() == kRings - 1 ? " and deeper" : "", ring.live(), ring.capacity());
  if (TaskSlot* oldest = ring.oldest()) {
    text += fmt::format(", oldest {} {}{}", describe(*oldest), to_string(oldest->observed_state()),
                        oldest->scope_held ? " and held by its open scope" : "");
  }
  if (ring.heap().capacity() > 0) text += fmt::format("; heap {}", ring.heap().to_string());
  return text;
}

Status Scheduler::first_error() const {
  std::lock_guard lock(error_mutex_);
  return first_error_;
}

void Scheduler::fail_run(const Status& status) {
  {
    std::lock_guard lock(error_mutex_);
    if (first_error_.is_ok()) first_error_ = status;
  }
  failed_.store(true, std::memory_order_seq_cst);
  platform::notify_event(progress_event_, false);  // a submit waiting for ring space gives up
  deferrals_->cancel_words();
}

std::uint64_t Scheduler::completed() const noexcept {
  std::uint64_t sum = completed_.load(std::memory_order_acquire);
  for (int c = 0; c < num_cube_ + num_vector_; ++c) {
    sum += cores_[static_cast<std::size_t>(c)].completed.load(std::memory_order_acquire);
  }
  return sum;
}

Status Scheduler::wait_for_progress(std::uint64_t seen, bool wake_on_failure,
                                    std::string_view what) {
  const auto result = platform::wait_event(
      progress_event_, [&] { return completed() != seen || (wake_on_failure && failed()); },
      platform::deadline_after(options_.wait_timeout_s), policy_, nullptr);
  if (result == platform::WaitResult::kReady) return Status::ok();
  std::string rings;
  for (auto& ring : rings_) {
    if (ring->live() > 0) rings += "; " + describe_ring(*ring);
  }
  return Status::error(ErrorCode::kTimeout,
                       "{}: no task completed for {} s ({} of {} published tasks completed{}); a "
                       "task may be stuck (OrchestratorConfig.wait_timeout_s or HP_WAIT_TIMEOUT_S "
                       "sets the deadline)",
                       what, options_.wait_timeout_s, completed(), published_, rings);
}

// --- orchestration thread: slots, edges, publication, scopes ---

void Scheduler::sweep(TaskRing& ring, TensorMap& map) {
  for (TaskSlot* s = ring.oldest(); s != nullptr && s->consumed(); s = ring.oldest()) {
    map.remove(s->id, s->map_entries);
    ring.reclaim_oldest();
  }
}

void Scheduler::reclaim(TensorMap& map, int keep) {
  for (auto& ring : rings_) {
    if (ring->index() != keep) sweep(*ring, map);
  }
}

RingState Scheduler::ring_state(int ring) {
  return rings_[static_cast<std::size_t>(ring)]->state();
}

TaskId Scheduler::oldest_live_task() {
  TaskId oldest = kNoTask;
  for (auto& ring : rings_) {
    if (TaskSlot* s = ring->oldest()) oldest = std::min(oldest, s->id);
  }
  return oldest;
}

TaskSlot* Scheduler::find_live(TaskId id) {
  for (auto& ring : rings_) {
    if (TaskSlot* s = ring->find(id)) return s;
  }
  return nullptr;
}

Status Scheduler::acquire(int ring_index, TaskId id, std::size_t heap_bytes, TensorMap& map,
                          TaskSlot** slot, std::byte** heap) {
  TaskRing& ring = *rings_[static_cast<std::size_t>(ring_index)];
  // Other rings are swept now and then, so that their consumed tasks' entries leave the map.
  if ((++acquired_ & 63) == 0) {
    for (auto& r : rings_) sweep(*r, map);
  }
  for (;;) {
    if (failed()) {
      return Status::error(ErrorCode::kAborted, "submit of task {} refused: the run failed: {}", id,
                           first_error().message());
    }
    sweep(ring, map);
    if (!ring.full()) {
      std::byte* data = nullptr;
      std::uint64_t mark = ring.heap().current_mark();
      if (heap_bytes == 0 || ring.heap().allocate(heap_bytes, &data, &mark)) {
        TaskSlot* s = ring.take(id, mark);
        // The next submit writes the next slot: its lines (last written a ring's length of
        // tasks ago, long out of this core's cache, and some still held by the core that ran
        // that task) load, owned, while this task is submitted.
        prefetch_for_write<sizeof(TaskSlot)>(ring.upcoming(), prefetch_owned_);
        *slot = s;
        *heap = data;
        return Status::ok();
      }
    }
    TaskSlot* oldest = ring.oldest();
    HP_ENSURE(oldest != nullptr, ErrorCode::kInternal,
              "ring {} is empty yet cannot give {} heap bytes ({})", ring_index, heap_bytes,
              ring.heap().to_string());
    if (oldest->scope_held) {
      return Status::error(
          ErrorCode::kOutOfMemory,
          "deadlock: task {} needs a slot{} in {}, and nothing in that ring can ever be "
          "reclaimed: its oldest task is held by a scope that is still open (slots are reclaimed "
          "in submission order). Give the ring more room (OrchestratorConfig.task_ring_slots / "
          "heap_ring_bytes) or hold fewer tasks per scope (open a nested scope per loop "
          "iteration)",
          id,
          heap_bytes > 0 ? fmt::format(" and {} heap bytes", HeapRing::rounded(heap_bytes)) : "",
          describe_ring(ring));
    }
    const std::uint64_t seen = completed();
    // The oldest task may have been consumed since the sweep: look again before blocking.
    if (oldest->consumed()) continue;
    const RingState state = ring.state();
    for (Observer* o : options_.observers) o->on_submit_blocked(state);
    HP_RETURN_IF_ERROR(wait_for_progress(
        seen, true,
        fmt::format("submit of task {} waiting for ring {} to reclaim a slot", id, ring_index)));
  }
}

// Inline in connect() (its only caller): the submitting thread is bound by its stores, and a
// call's saved registers would add stores to every edge of a submit.
[[gnu::always_inline]] inline void Scheduler::order_after(TaskSlot* slot, TaskSlot* pred) {
  // A load first: a predecessor that already completed (most, when the cores keep up with the
  // submitter) then costs a shared read of its line, and no edge, stamp or locked write.
  Edge* head = pred->consumers.load(std::memory_order_acquire);
  if (head != kClosedEdges && link_edge(slot, pred, head)) return;
  // Completed: its status was written before it closed.
  if (!pred->status.is_ok()) skip_after_failed(slot, pred);
}

bool Scheduler::link_edge(TaskSlot* slot, TaskSlot* pred, Edge* head) {
  if (pred->connect_stamp == slot->id) return true;  // already ordered after it
  pred->connect_stamp = slot->id;
  // The first edge linked is first_wait; connect() reserved room in `waits` for the others:
  // `waits` does not move while its edges are linked.
  const bool first = slot->edges_linked == 0;
  Edge* edge = first ? &slot->first_wait : &slot->waits.emplace_back();
  edge->consumer = slot;
  do {
    edge->next = head;
    if (pred->consumers.compare_exchange_weak(head, edge, std::memory_order_release,
                                              std::memory_order_acquire)) {
      ++slot->edges_linked;
      return true;
    }
  } while (head != kClosedEdges);
  if (!first) slot->waits.pop_back();
  return false;
}

void Scheduler::skip_after_failed(TaskSlot* slot, TaskSlot* pred) {
  if (!slot->skip.exchange(true, std::memory_order_acq_rel)) {
    slot->status = Status::error(ErrorCode::kAborted, "{} skipped: its predecessor {} failed",
                                 describe(*slot), describe(*pred));
  }
}

void Scheduler::connect(TaskSlot* slot, TensorMap& map, std::span<const TensorAccess> accesses,
                        std::vector<Dependency>* deps) {
  found_.clear();
  map.find_and_record(slot->id, slot, accesses, &found_, &slot->map_entries);
  std::size_t most_edges = slot->args.explicit_dependencies().size();
  for (const FoundDependency& f : found_) most_edges += f.orders ? 1 : 0;
  slot->waits.reserve(most_edges);  // before any edge is linked (task_slot.h)
  for (const FoundDependency& f : found_) {
    TaskSlot* pred = f.pred;
    if (f.orders) {
      if (deps != nullptr) deps->push_back(f.dep);
      order_after(slot, pred);
    }
    if (f.keeps_alive && std::find(slot->kept_alive.begin(), slot->kept_alive.end(), pred) ==
                             slot->kept_alive.end()) {
      // Only while the creator is not consumed (its memory is still there). At refs 0 with its
      // scope open, no other thread can change refs (nothing of theirs holds it).
      int refs = pred->refs.load(std::memory_order_relaxed);
      bool kept = false;
      while (!kept && (refs > 0 || pred->scope_held)) {
        kept = pred->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_relaxed);
      }
      if (kept) slot->kept_alive.push_back(pred);
    }
  }
  for (TaskId id : slot->args.explicit_dependencies()) {
    if (deps != nullptr) {
      deps->push_back(
          {.pred = id, .arg_index = -1, .source = DepSource::kExplicit, .kind = DepKind::kOrder});
    }
    if (TaskSlot* pred = find_live(id)) order_after(slot, pred);
  }
}

void Scheduler::publish(TaskSlot* slot) {
  ++published_;
  if (slot->edges_linked == 0) {
    // No edge links the slot anywhere: no other thread can reach its fanin (the ready queue's
    // lock publishes the slot to the core that takes it).
    slot->fanin.store(0, std::memory_order_relaxed);
  } else {
    const int guard = kFaninGuard - slot->edges_linked;
    if (slot->fanin.fetch_sub(guard, std::memory_order_acq_rel) != guard) return;
  }
  Released released;
  released.by_orchestration_thread = true;
  make_ready(slot, nullptr, released);
  hand_out(released, nullptr);
}

void Scheduler::release_scope(std::span<TaskSlot* const> held) {
  for (TaskSlot* slot : held) slot->scope_held = false;
}

void Scheduler::unref(TaskSlot* slot) noexcept {
  slot->refs.fetch_sub(1, std::memory_order_release);  // TaskSlot::consumed() acquires it
}

// --- readiness, completion ---

void Scheduler::mark_skipped(TaskSlot* slot) {
  if (!slot->skip.exchange(true, std::memory_order_acq_rel)) {
    slot->status =
        Status::error(ErrorCode::kAborted, "{} skipped: {}", describe(*slot),
                      no_cores_.load(std::memory_order_acquire) ? "the chip's cores never started"
                                                                : "the run already failed");
  }
}

void Scheduler::make_ready(TaskSlot* slot, Core* me, Released& released) {
  if (slot->skip.load(std::memory_order_acquire) || failed() ||
      no_cores_.load(std::memory_order_acquire)) {
    released.skipped.push_back(slot);
    return;
  }
  slot->state.store(TaskState::kReady, std::memory_order_relaxed);
  for (Observer* o : options_.observers) o->on_task_ready(slot->info);
  if (!single_core(*slot)) {
    enqueue_gang(slot);
    return;
  }
  const int type = type_of(slot->info.config.mode);
  if (released.by_orchestration_thread && lanes_ && lanes_[type].push(slot)) {
    released.lane[type] = true;
    return;
  }
  if (me != nullptr && me->type == type && me->continuation == nullptr &&
      gangs_waiting_[type].load(std::memory_order_relaxed) == 0) {
    me->continuation = slot;
  } else {
    released.ready[type].add(slot);
  }
}

void Scheduler::hand_out(Released& released, Core* me) {
  while (!released.skipped.empty()) {
    TaskSlot* slot = released.skipped.back();
    released.skipped.pop_back();
    mark_skipped(slot);
    complete_one(slot, slot->status, false, me, released);
  }
  for (int type = 0; type < 2; ++type) {
    ready_[type].push(released.ready[type]);
    if (released.lane[type]) platform::notify_event_light(ready_[type].event());
  }
}

void Scheduler::complete(TaskSlot* slot, Status status, bool ran, Core* me) {
  Released released;
  complete_one(slot, std::move(status), ran, me, released);
  hand_out(released, me);
  platform::notify_event_light(progress_event_);
}

void Scheduler::complete_one(TaskSlot* t, Status status, bool ran, Core* me, Released& released) {
  if (ran && !status.is_ok()) {
    status = Status(status.code(), fmt::format("{} failed: {}", describe(*t), status.message()));
    fail_run(status);
    std::vector<TaskSlot*> skipped;  // waiting gangs are skipped now
    {
      std::lock_guard lock(mutex_);
      dispatch_gangs(skipped);
    }
    released.skipped.insert(released.skipped.end(), skipped.begin(), skipped.end());
  }
  // Observers see the completion before any successor can become ready.
  for (Observer* o : options_.observers) o->on_task_complete(t->info, status);
  t->status = std::move(status);
  t->state.store(TaskState::kCompleted, std::memory_order_release);
  // Closing `consumers` publishes status and takes every edge added so far; none is added
  // after (task_slot.h).
  Edge* taken = t->consumers.exchange(kClosedEdges, std::memory_order_acq_rel);
  // The stack holds the newest edge first: reversed, successors become ready in submission
  // order. The edges are only this thread's now (until their consumers' fanin drops).
  Edge* edge = nullptr;
  while (taken != nullptr) {
    Edge* next = taken->next;
    taken->next = edge;
    edge = taken;
    taken = next;
  }
  const bool ok = t->status.is_ok();
  while (edge != nullptr) {
    TaskSlot* c = edge->consumer;
    edge = edge->next;  // read before the decrement: then `c` may retire, and its edges with it
    // The lines a core reads of a task it runs (task_slot.h), requested before the decrement
    // that may make `c` this core's next task (a continuation): the two misses overlap.
    prefetch_for_read<kCoreReadBytes>(c);
    if (!ok) skip_after_failed(c, t);
    if (c->fanin.fetch_sub(1, std::memory_order_acq_rel) == 1) make_ready(c, me, released);
  }
  for (TaskSlot* p : t->kept_alive) unref(p);
  unref(t);  // the last touch of t
  // Counted after the unref: a submit waiting for ring space wakes on this count, so by then
  // the slot must be CONSUMED if it is ever going to be by this completion (counted before, the
  // submit could look, find the slot not consumed yet, and wait for a completion that never
  // comes).
  if (me != nullptr) {  // the calling thread is that core's (only it counts there)
    me->completed.store(me->completed.load(std::memory_order_relaxed) + 1,
                        std::memory_order_release);
  } else {
    completed_.fetch_add(1, std::memory_order_acq_rel);
  }
}

// --- gangs ---

void Scheduler::enqueue_gang(TaskSlot* slot) {
  const LaunchMode mode = slot->info.config.mode;
  std::vector<TaskSlot*> skipped;
  {
    std::lock_guard lock(mutex_);
    gangs_[static_cast<int>(mode)].push_back(slot);
    if (mode != LaunchMode::kVector) gangs_waiting_[0].fetch_add(1, std::memory_order_seq_cst);
    if (mode != LaunchMode::kCube) gangs_waiting_[1].fetch_add(1, std::memory_order_seq_cst);
    dispatch_gangs(skipped);
  }
  for (TaskSlot* s : skipped) {
    mark_skipped(s);
    complete(s, s->status, false, nullptr);
  }
}

bool Scheduler::try_place(TaskSlot* slot) {
  std::vector<int> claimed;
  auto claim = [&](int c) {
    CoreState idle = CoreState::kIdle;
    if (!cores_[static_cast<std::size_t>(c)].state.compare_exchange_strong(
            idle, CoreState::kReserved, std::memory_order_acq_rel)) {
      return false;
    }
    claimed.push_back(c);
    return true;
  };
  auto release = [&](std::size_t keep) {
    while (claimed.size() > keep) {
      cores_[static_cast<std::size_t>(claimed.back())].state.store(CoreState::kIdle,
                                                                   std::memory_order_release);
      claimed.pop_back();
    }
  };
  const int blocks = slot->info.config.block_num;
  const LaunchMode mode = slot->info.config.mode;
  int groups = 0;
  if (mode == LaunchMode::kMix) {
    for (int g = 0; g < num_cube_ && groups < blocks; ++g) {
      const std::size_t keep = claimed.size();
      bool whole = claim(g);
      for (int s = 0; s < ratio_ && whole; ++s) whole = claim(num_cube_ + g * ratio_ + s);
      if (whole) {
        ++groups;
      } else {
        release(keep);
      }
    }
  } else {
    // Highest free cores first: keeps low-numbered clusters whole for mix tasks.
    const bool cube = mode == LaunchMode::kCube;
    const int first = cube ? 0 : num_cube_;
    const int count = cube ? num_cube_ : num_vector_;
    for (int c = first + count - 1; c >= first && groups < slot->gang; --c)
      groups += claim(c) ? 1 : 0;
  }
  const int needed = mode == LaunchMode::kMix ? blocks : slot->gang;
  if (groups < needed) {
    if (!claimed.empty()) {
      release(0);  // the released cores may take single-core work again
      platform::notify_event(ready_[0].event(), false);
      platform::notify_event(ready_[1].event(), false);
    }
    return false;
  }
  slot->state.store(TaskState::kRunning, std::memory_order_relaxed);
  slot->cores_outstanding.store(static_cast<int>(claimed.size()), std::memory_order_relaxed);
  const int group_size = mode == LaunchMode::kMix ? 1 + ratio_ : 1;
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    Core& core = cores_[static_cast<std::size_t>(claimed[i])];
    core.task = slot;
    core.gang_pos = static_cast<int>(i) / group_size;
    core.gang_size = needed;
    core.state.store(CoreState::kAssigned, std::memory_order_release);
  }
  platform::notify_event(ready_[0].event(), false);
  platform::notify_event(ready_[1].event(), false);
  return true;
}

void Scheduler::dispatch_gangs(std::vector<TaskSlot*>& skipped) {
  bool dequeued = false;
  auto dequeue = [&](int q) {
    dequeued = true;
    TaskSlot* slot = gangs_[q].front();
    gangs_[q].pop_front();
    const auto mode = static_cast<LaunchMode>(q);
    if (mode != LaunchMode::kVector) gangs_waiting_[0].fetch_sub(1, std::memory_order_seq_cst);
    if (mode != LaunchMode::kCube) gangs_waiting_[1].fetch_sub(1, std::memory_order_seq_cst);
    return slot;
  };
  if (failed() || no_cores_.load(std::memory_order_acquire)) {
    for (int q = 0; q < 3; ++q) {
      while (!gangs_[q].empty()) skipped.push_back(dequeue(q));
    }
  } else {
    for (;;) {
      // Heads in submission order; the oldest that fits is placed first.
      int order[3] = {0, 1, 2};
      std::sort(order, order + 3, [&](int a, int b) {
        const TaskId ia = gangs_[a].empty() ? kNoTask : gangs_[a].front()->info.id;
        const TaskId ib = gangs_[b].empty() ? kNoTask : gangs_[b].front()->info.id;
        return ia < ib;
      });
      bool placed = false;
      for (int q : order) {
        if (gangs_[q].empty() || !try_place(gangs_[q].front())) continue;
        dequeue(q);
        placed = true;
        break;
      }
      if (!placed) break;
    }
  }
  if (dequeued) {  // cores that held back single-core work for a gang may take it now
    platform::notify_event(ready_[0].event(), false);
    platform::notify_event(ready_[1].event(), false);
  }
}

// --- cores ---

Scheduler::Work Scheduler::next_work(Core& me) {
  const int type = me.type;
  ReadyQueue& queue = ready_[type];
  for (;;) {
    if (TaskSlot* next = me.continuation) {
      me.continuation = nullptr;
      return {next, 0, 1};
    }
    if (gangs_waiting_[type].load(std::memory_order_acquire) == 0) {
      if (lanes_) {
        if (TaskSlot* next = lanes_[type].pop(me.lane_tail_seen)) return {next, 0, 1};
      }
      if (TaskSlot* next = queue.pop()) return {next, 0, 1};
    }
    me.state.store(CoreState::kIdle, std::memory_order_seq_cst);
    if (gangs_waiting_[type].load(std::memory_order_seq_cst) > 0) {
      std::vector<TaskSlot*> skipped;
      {
        std::lock_guard lock(mutex_);
        dispatch_gangs(skipped);
      }
      for (TaskSlot* s : skipped) {
        mark_skipped(s);
        complete(s, s->status, false, nullptr);
      }
    }
    for (;;) {
      platform::wait_event(
          queue.event(),
          [&] {
            const CoreState s = me.state.load(std::memory_order_acquire);
            return s == CoreState::kAssigned || stopping_.load(std::memory_order_acquire) ||
                   (s == CoreState::kIdle &&
                    (queue.size() > 0 || (lanes_ && !lanes_[type].empty())) &&
                    gangs_waiting_[type].load(std::memory_order_acquire) == 0);
          },
          platform::Clock::time_point::max(), core_policy_, nullptr);
      CoreState s = me.state.load(std::memory_order_acquire);
      if (s == CoreState::kAssigned) {
        me.state.store(CoreState::kBusy, std::memory_order_relaxed);
        return {me.task, me.gang_pos, me.gang_size};
      }
      if (stopping_.load(std::memory_order_acquire)) return {};
      if (s == CoreState::kIdle &&
          me.state.compare_exchange_strong(s, CoreState::kBusy, std::memory_order_acq_rel)) {
        break;  // look for work again
      }
    }
  }
}

void Scheduler::execute(const Work& work, Core& me, int core_index) {
  TaskSlot* task = work.task;
  const CallConfig& config = task->info.config;
  const bool cube = me.type == 0;
  if (work.gang_size == 1 && single_core(*task)) {
    if (failed() || no_cores_.load(std::memory_order_acquire)) {  // do not start more work
      mark_skipped(task);
      complete(task, task->status, false, &me);
      return;
    }
    task->state.store(TaskState::kRunning, std::memory_order_relaxed);
  }
  for (Observer* o : options_.observers) o->on_task_start(task->info, core_index);
  if (work.gang_size == 1 && single_core(*task)) {
    const platform::LaunchConfig launch_config{.mode = config.mode,
                                               .block_dim = config.block_num,
                                               .num_flags = config.num_flags,
                                               .wait_timeout_s = config.wait_timeout_s};
    me.current = task;
    if (me.launch) {
      me.launch->rearm(launch_config, 1);
    } else {
      Core* core = &me;
      Status prepared = chip_.prepare_block_launch(
          launch_config,
          [core](platform::BlockContext& block) {
            return core->current->callable->function()(core->current->args, block);
          },
          1, &me.launch);
      if (!prepared.is_ok()) {  // checked at submit: cannot happen
        complete(task, prepared, true, &me);
        return;
      }
    }
    {
      const RunningScope running(this, task);
      for (int b = 0; b < config.block_num; ++b) {
        me.launch->run_block(b, cube ? CoreType::kCube : CoreType::kVector, 0, core_index);
      }
    }
    for (Observer* o : options_.observers) o->on_task_end(task->info, core_index);
    finish_blocks(task, me.launch->failed() ? me.launch->result() : Status::ok(), &me);
    return;
  }
  {
    const RunningScope running(this, task);
    if (config.mode == LaunchMode::kMix) {
      const int sub_block = cube ? 0 : (core_index - num_cube_) % ratio_;
      task->launch->run_block(work.gang_pos, cube ? CoreType::kCube : CoreType::kVector, sub_block,
                              core_index);
    } else {
      for (int b = work.gang_pos; b < config.block_num; b += work.gang_size) {
        task->launch->run_block(b, cube ? CoreType::kCube : CoreType::kVector, 0, core_index);
      }
    }
  }
  for (Observer* o : options_.observers) o->on_task_end(task->info, core_index);
  if (task->cores_outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // failed() first: result() takes the launch's error lock.
    finish_blocks(task, task->launch->failed() ? task->launch->result() : Status::ok(), &me);
  }
}

// --- deferred completion ---

void Scheduler::finish_blocks(TaskSlot* task, Status status, Core* me) {
  if (task->deferred.load(std::memory_order_acquire) == 0) {
    complete(task, std::move(status), true, me);
    return;
  }
  // Failed blocks complete the task now, unless the event already claimed its half.
  if (!status.is_ok() && deferrals_->withdraw(task->deferral_key)) {
    complete(task, std::move(status), true, me);
    return;
  }
  task->block_status = std::move(status);
  if (task->deferred.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    complete(task, task->block_status.is_ok() ? task->deferred_status : task->block_status, true,
             me);
  }
}

void Scheduler::finish_deferred(TaskSlot* task, Status status) {
  task->deferred_status = std::move(status);
  if (task->deferred.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    complete(task, task->block_status.is_ok() ? task->deferred_status : task->block_status, true,
             nullptr);
  }
}

Status Scheduler::defer_current(const std::uint64_t* word, std::uint64_t target,
                                DeferredCompletion* done, std::string_view waits_for) {
  const RunningTask running = t_running;
  HP_ENSURE(running.scheduler != nullptr, ErrorCode::kFailedPrecondition,
            "defer_completion / defer_until outside a block of an orchestrated task: only a task "
            "submitted in Orchestrator::run can complete after its blocks return");
  TaskSlot* slot = running.slot;
  int none = 0;
  HP_ENSURE(slot->deferred.compare_exchange_strong(none, 2, std::memory_order_acq_rel),
            ErrorCode::kFailedPrecondition,
            "task {} (callable '{}') already deferred its completion: a task defers once",
            slot->info.id, slot->info.callable);
  slot->block_status = Status::ok();
  slot->deferred_status = Status::ok();
  DeferralRegistry& registry = *running.scheduler->deferrals_;
  slot->deferral_key = registry.add(slot, slot->info.id, std::string(slot->info.callable), word,
                                    target, std::string(waits_for));
  if (done != nullptr) *done = registry.handle(slot->deferral_key, slot->info.id);
  return Status::ok();
}

Status defer_completion(DeferredCompletion* done, std::string_view waits_for) {
  HP_ENSURE(done != nullptr, ErrorCode::kInvalidArgument, "defer_completion: done is null");
  return Scheduler::defer_current(nullptr, 0, done, waits_for);
}

Status defer_until(const std::uint64_t* word, std::uint64_t target) {
  HP_ENSURE(word != nullptr, ErrorCode::kInvalidArgument, "defer_until: the word is null");
  return Scheduler::defer_current(word, target, nullptr);
}

Status Scheduler::core_main(platform::BlockContext& block) {
  const int index = block.core_idx();
  Core& me = cores_[static_cast<std::size_t>(index)];
  for (;;) {
    const Work work = next_work(me);
    if (work.task == nullptr) return Status::ok();  // stopping
    execute(work, me, index);
  }
}

// --- the end of the run ---

void Scheduler::drain_ready(std::vector<TaskSlot*>& skipped) {
  for (int type = 0; type < 2; ++type) {
    while (TaskSlot* slot = ready_[type].pop()) skipped.push_back(slot);
    while (TaskSlot* slot = lanes_ ? lanes_[type].pop() : nullptr) skipped.push_back(slot);
  }
  std::lock_guard lock(mutex_);
  dispatch_gangs(skipped);
}

Status Scheduler::wait_all() {
  Status timeout;
  for (;;) {
    if (no_cores_.load(std::memory_order_acquire)) {  // nobody else will ever skip them
      std::vector<TaskSlot*> skipped;
      drain_ready(skipped);
      for (TaskSlot* s : skipped) {
        mark_skipped(s);
        complete(s, s->status, false, nullptr);
      }
    }
    const std::uint64_t seen = completed();
    if (seen == published_) return timeout;
    if (no_cores_.load(std::memory_order_acquire)) {
      std::this_thread::yield();
      continue;
    }
    if (!timeout.is_ok()) {  // tasks still running after the timeout: their own waits end them
      platform::wait_event(
          progress_event_, [&] { return completed() != seen; }, platform::Clock::time_point::max(),
          policy_, nullptr);
      continue;
    }
    Status s = wait_for_progress(seen, false, "waiting for the run's tasks to complete");
    // Deferred tasks end by their own deadlines, with a message naming what they waited for.
    if (!s.is_ok() && deferrals_->pending()) continue;
    if (!s.is_ok()) {
      timeout = s;
      fail_run(timeout);
      std::vector<TaskSlot*> skipped;  // every task not running yet
      drain_ready(skipped);
      for (TaskSlot* t : skipped) {
        mark_skipped(t);
        complete(t, t->status, false, nullptr);
      }
    }
  }
}

void Scheduler::stop() {
  stopping_.store(true, std::memory_order_seq_cst);
  platform::notify_event(ready_[0].event(), false);
  platform::notify_event(ready_[1].event(), false);
}

std::vector<std::unique_ptr<TaskRing>> Scheduler::take_rings() {
  for (auto& ring : rings_) {
    if (!ring->clear()) return {};
  }
  return std::move(rings_);
}

void Scheduler::abandon(const Status& why) {
  no_cores_.store(true, std::memory_order_seq_cst);
  fail_run(Status(why.code(), "the chip launch for the run's cores failed: " + why.message()));
  std::vector<TaskSlot*> skipped;
  {
    std::lock_guard lock(mutex_);
    for (int c = 0; c < num_cube_ + num_vector_; ++c) {
      Core& core = cores_[static_cast<std::size_t>(c)];
      if (core.state.load(std::memory_order_acquire) != CoreState::kAssigned) continue;
      TaskSlot* t = core.task;
      core.state.store(CoreState::kIdle, std::memory_order_relaxed);
      if (t->cores_outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) skipped.push_back(t);
    }
  }
  drain_ready(skipped);
  for (TaskSlot* s : skipped) {
    mark_skipped(s);
    complete(s, s->status, false, nullptr);
  }
}

}  // namespace hp::runtime
