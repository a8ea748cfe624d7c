#include "scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include "../common/logging.h"
#include "../common/settings.h"

namespace hp::runtime {

using platform::CoreType;
using platform::LaunchMode;

namespace {

int queue_of(LaunchMode mode) { return static_cast<int>(mode); }

template <typename T>
bool contains(const std::vector<T*>& v, const T* x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

Scheduler::Scheduler(platform::Chip& chip, Options options)
    : chip_(chip),
      options_(std::move(options)),
      num_cube_(chip.num_cube()),
      num_vector_(chip.num_vector()),
      ratio_(chip.ratio()),
      cores_(std::make_unique<Core[]>(static_cast<std::size_t>(num_cube_ + num_vector_))) {
  for (int i = 0; i < kRings; ++i) {
    rings_.push_back(std::make_unique<TaskRing>(i, options_.ring_slots, options_.heap_bytes));
  }
  // Spinning pays only when every core and the orchestration thread have a CPU of their own.
  const bool shared_cpus = num_cube_ + num_vector_ + 1 > static_cast<int>(chip.cpus().size());
  policy_.spin = shared_cpus ? 0 : settings().spin_before_block;
  policy_.yield_for = std::chrono::microseconds(settings().yield_before_sleep_us);
}

Scheduler::~Scheduler() noexcept = default;

std::string Scheduler::describe(const TaskSlot& slot) const {
  return fmt::format("task {} (callable '{}')", slot.id, slot.info.callable);
}

std::string Scheduler::describe_ring(TaskRing& ring) {
  std::string text = fmt::format("ring {} (scope depth {}{}): {} of {} slots live", ring.index(),
                                 ring.index(), ring.index() == kRings - 1 ? " and deeper" : "",
                                 ring.live(), ring.capacity());
  if (TaskSlot* oldest = ring.oldest()) {
    text += fmt::format(", oldest {} {}{}", describe(*oldest), to_string(oldest->state),
                        oldest->scope_held ? " and held by its open scope" : "");
  }
  if (ring.heap().capacity() > 0) text += fmt::format("; heap {}", ring.heap().to_string());
  return text;
}

Status Scheduler::first_error() const {
  std::lock_guard lock(mutex_);
  return first_error_;
}

void Scheduler::note_progress() {
  progress_.fetch_add(1, std::memory_order_seq_cst);
  platform::notify_event(progress_event_, false);
}

void Scheduler::fail_run(const Status& status) {
  if (first_error_.is_ok()) first_error_ = status;
  failed_.store(true, std::memory_order_release);
  note_progress();  // a submit waiting for ring space gives up
}

Status Scheduler::wait_for_progress(std::uint64_t seen, bool wake_on_failure,
                                    std::string_view what) {
  const auto result = platform::wait_event(
      progress_event_,
      [&] {
        return progress_.load(std::memory_order_acquire) != seen ||
               (wake_on_failure && failed());
      },
      platform::deadline_after(options_.wait_timeout_s), policy_, nullptr);
  if (result == platform::WaitResult::kReady) return Status::ok();
  std::lock_guard lock(mutex_);
  std::string rings;
  for (auto& ring : rings_) {
    if (ring->live() > 0) rings += "; " + describe_ring(*ring);
  }
  return Status::error(ErrorCode::kTimeout,
                       "{}: no task completed for {} s ({} of {} published tasks completed{}); a "
                       "task may be stuck (OrchestratorConfig.wait_timeout_s or HP_WAIT_TIMEOUT_S "
                       "sets the deadline)",
                       what, options_.wait_timeout_s, completed_, published_, rings);
}

Status Scheduler::acquire(int ring_index, TaskId id, std::size_t heap_bytes, TaskSlot** slot,
                          std::byte** heap) {
  std::unique_lock lock(mutex_);
  TaskRing& ring = *rings_[static_cast<std::size_t>(ring_index)];
  for (;;) {
    if (failed()) {
      return Status::error(ErrorCode::kAborted, "submit of task {} refused: the run failed: {}", id,
                           first_error_.message());
    }
    if (!ring.full()) {
      std::byte* data = nullptr;
      std::uint64_t mark = ring.heap().current_mark();
      if (heap_bytes == 0 || ring.heap().allocate(heap_bytes, &data, &mark)) {
        TaskSlot* s = ring.take();
        s->id = id;
        s->heap_mark = mark;
        s->state = TaskState::kPending;
        s->fanin = 1;  // the submission guard
        s->refs = 2;   // not completed + held by its scope
        s->scope_held = true;
        live_[id] = s;
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
          id, heap_bytes > 0 ? fmt::format(" and {} heap bytes", HeapRing::rounded(heap_bytes)) : "",
          describe_ring(ring));
    }
    const RingState state = ring.state();
    const std::uint64_t seen = progress_.load(std::memory_order_acquire);
    lock.unlock();
    for (Observer* o : options_.observers) o->on_submit_blocked(state);
    HP_RETURN_IF_ERROR(wait_for_progress(
        seen, true, fmt::format("submit of task {} waiting for ring {} to reclaim a slot", id, ring_index)));
    lock.lock();
  }
}

void Scheduler::connect(TaskSlot* slot, TensorMap& map, std::span<const TensorAccess> accesses,
                        std::vector<Dependency>* deps) {
  std::lock_guard lock(mutex_);
  std::vector<TaskSlot*> ordered_after;
  auto order_after = [&](TaskSlot* pred) {
    if (contains(ordered_after, pred)) return;
    ordered_after.push_back(pred);
    if (pred->state < TaskState::kCompleted) {
      ++slot->fanin;
      pred->consumers.push_back(slot);
    } else if (!pred->status.is_ok() && !slot->skip) {
      slot->skip = true;
      slot->status = Status::error(ErrorCode::kAborted, "{} skipped: its predecessor {} failed",
                                   describe(*slot), describe(*pred));
    }
  };
  std::vector<FoundDependency> found;
  map.find(accesses, [&](TaskId task) { return live_.find(task) == live_.end(); }, &found);
  for (const FoundDependency& f : found) {
    TaskSlot* pred = live_.at(f.dep.pred);
    if (f.orders) {
      deps->push_back(f.dep);
      order_after(pred);
    }
    if (f.keeps_alive && pred->state != TaskState::kConsumed && !contains(slot->kept_alive, pred)) {
      ++pred->refs;
      slot->kept_alive.push_back(pred);
    }
  }
  for (TaskId id : slot->body->args.explicit_dependencies()) {
    deps->push_back({.pred = id, .arg_index = -1, .source = DepSource::kExplicit,
                     .kind = DepKind::kOrder});
    if (auto it = live_.find(id); it != live_.end()) order_after(it->second);
  }
  map.record(slot->id, accesses);
}

void Scheduler::publish(TaskSlot* slot) {
  std::lock_guard lock(mutex_);
  ++published_;
  if (--slot->fanin == 0) make_ready(slot);
}

void Scheduler::skip(TaskSlot* slot) {
  if (!slot->skip) {
    slot->skip = true;
    slot->status = Status::error(ErrorCode::kAborted, "{} skipped: {}", describe(*slot),
                                 no_cores_ ? "the chip's cores never started"
                                           : "the run already failed");
  }
  complete(slot, slot->status, false);
}

void Scheduler::make_ready(TaskSlot* slot) {
  if (slot->skip || failed() || no_cores_) {
    skip(slot);
    return;
  }
  slot->state = TaskState::kReady;
  ready_[queue_of(slot->info.config.mode)].push_back(slot);
  for (Observer* o : options_.observers) o->on_task_ready(slot->info);
  dispatch();
}

bool Scheduler::fits(const TaskSlot& slot) const {
  const int blocks = slot.info.config.block_num;
  int free_cube = 0, free_vector = 0, free_clusters = 0;
  for (int c = 0; c < num_cube_ + num_vector_; ++c) {
    if (!cores_[static_cast<std::size_t>(c)].busy) ++(c < num_cube_ ? free_cube : free_vector);
  }
  switch (slot.info.config.mode) {
    case LaunchMode::kCube: return free_cube >= std::min(blocks, num_cube_);
    case LaunchMode::kVector: return free_vector >= std::min(blocks, num_vector_);
    case LaunchMode::kMix:
      for (int g = 0; g < num_cube_; ++g) {
        bool free = !cores_[static_cast<std::size_t>(g)].busy;
        for (int s = 0; s < ratio_; ++s) {
          free = free && !cores_[static_cast<std::size_t>(num_cube_ + g * ratio_ + s)].busy;
        }
        free_clusters += free ? 1 : 0;
      }
      return free_clusters >= blocks;
  }
  return false;
}

void Scheduler::assign(int core, TaskSlot* slot, int gang_pos, int gang_size) {
  Core& c = cores_[static_cast<std::size_t>(core)];
  c.busy = true;
  c.task = slot;
  c.gang_pos = gang_pos;
  c.gang_size = gang_size;
  c.assigned.store(true, std::memory_order_release);
  platform::notify_event(c.event, false);
}

void Scheduler::place(TaskSlot* slot) {
  slot->state = TaskState::kRunning;
  const int blocks = slot->info.config.block_num;
  const LaunchMode mode = slot->info.config.mode;
  if (mode == LaunchMode::kMix) {
    slot->cores_outstanding = blocks * (1 + ratio_);
    int group = 0;
    for (int g = 0; g < num_cube_ && group < blocks; ++g) {
      bool free = !cores_[static_cast<std::size_t>(g)].busy;
      for (int s = 0; s < ratio_; ++s) {
        free = free && !cores_[static_cast<std::size_t>(num_cube_ + g * ratio_ + s)].busy;
      }
      if (!free) continue;
      assign(g, slot, group, blocks);
      for (int s = 0; s < ratio_; ++s) assign(num_cube_ + g * ratio_ + s, slot, group, blocks);
      ++group;
    }
    return;
  }
  const bool cube = mode == LaunchMode::kCube;
  const int first = cube ? 0 : num_cube_;
  const int count = cube ? num_cube_ : num_vector_;
  const int gang = std::min(blocks, count);
  slot->cores_outstanding = gang;
  // Highest free cores first: keeps low-numbered clusters whole for mix tasks.
  int pos = 0;
  for (int c = first + count - 1; c >= first && pos < gang; --c) {
    if (!cores_[static_cast<std::size_t>(c)].busy) assign(c, slot, pos++, gang);
  }
}

void Scheduler::dispatch() {
  if (failed() || no_cores_) {
    for (auto& queue : ready_) {
      while (!queue.empty()) {
        TaskSlot* slot = queue.front();
        queue.pop_front();
        skip(slot);
      }
    }
    return;
  }
  for (;;) {
    TaskSlot* best = nullptr;
    int best_queue = -1;
    for (int q = 0; q < 3; ++q) {
      if (ready_[q].empty()) continue;
      TaskSlot* head = ready_[q].front();
      if ((best == nullptr || head->id < best->id) && fits(*head)) {
        best = head;
        best_queue = q;
      }
    }
    if (best == nullptr) return;
    ready_[best_queue].pop_front();
    place(best);
  }
}

void Scheduler::complete(TaskSlot* slot, Status status, bool ran) {
  completing_.push_back({slot, std::move(status), ran});
  if (in_complete_) return;
  in_complete_ = true;
  while (!completing_.empty()) {
    Completion done = std::move(completing_.back());
    completing_.pop_back();
    TaskSlot* t = done.slot;
    if (done.ran && !done.status.is_ok()) {
      done.status = Status(done.status.code(),
                           fmt::format("{} failed: {}", describe(*t), done.status.message()));
      fail_run(done.status);
    }
    t->status = std::move(done.status);
    t->state = TaskState::kCompleted;
    ++completed_;
    for (Observer* o : options_.observers) o->on_task_complete(t->info, t->status);
    for (TaskSlot* c : t->consumers) {
      if (!t->status.is_ok() && !c->skip) {
        c->skip = true;
        c->status = Status::error(ErrorCode::kAborted, "{} skipped: its predecessor {} failed",
                                  describe(*c), describe(*t));
      }
      if (--c->fanin == 0) make_ready(c);
    }
    t->consumers.clear();
    for (TaskSlot* p : t->kept_alive) unref(p);
    t->kept_alive.clear();
    unref(t);
  }
  in_complete_ = false;
  note_progress();
}

void Scheduler::unref(TaskSlot* slot) {
  if (--slot->refs > 0) return;
  slot->state = TaskState::kConsumed;
  TaskRing& ring = *rings_[static_cast<std::size_t>(slot->info.ring)];
  bool reclaimed = false;
  for (TaskSlot* s = ring.oldest(); s != nullptr && s->state == TaskState::kConsumed;
       s = ring.oldest()) {
    live_.erase(s->id);
    ring.reclaim_oldest();
    reclaimed = true;
  }
  if (reclaimed) note_progress();
}

void Scheduler::release_scope(std::span<TaskSlot* const> held) {
  std::lock_guard lock(mutex_);
  for (TaskSlot* slot : held) {
    slot->scope_held = false;
    unref(slot);
  }
}

RingState Scheduler::ring_state(int ring) {
  std::lock_guard lock(mutex_);
  return rings_[static_cast<std::size_t>(ring)]->state();
}

Status Scheduler::wait_all() {
  Status timeout;
  for (;;) {
    std::uint64_t seen;
    {
      std::lock_guard lock(mutex_);
      if (completed_ == published_) return timeout;
      seen = progress_.load(std::memory_order_acquire);
    }
    if (!timeout.is_ok()) {  // tasks still running after the timeout: their own waits end them
      platform::wait_event(
          progress_event_, [&] { return progress_.load(std::memory_order_acquire) != seen; },
          platform::Clock::time_point::max(), policy_, nullptr);
      continue;
    }
    Status s = wait_for_progress(seen, false, "waiting for the run's tasks to complete");
    if (!s.is_ok()) {
      timeout = s;
      std::lock_guard lock(mutex_);
      fail_run(timeout);
      dispatch();  // skips every task not running yet
    }
  }
}

void Scheduler::stop() {
  stopping_.store(true, std::memory_order_release);
  for (int c = 0; c < num_cube_ + num_vector_; ++c) {
    platform::notify_event(cores_[static_cast<std::size_t>(c)].event, false);
  }
}

void Scheduler::abandon(const Status& why) {
  std::lock_guard lock(mutex_);
  no_cores_ = true;
  fail_run(Status(why.code(), "the chip launch for the run's cores failed: " + why.message()));
  for (int c = 0; c < num_cube_ + num_vector_; ++c) {
    Core& core = cores_[static_cast<std::size_t>(c)];
    if (!core.busy) continue;
    TaskSlot* t = core.task;
    core.busy = false;
    core.assigned.store(false, std::memory_order_relaxed);
    if (--t->cores_outstanding == 0) skip(t);
  }
  dispatch();
}

Status Scheduler::core_main(platform::BlockContext& block) {
  const int index = block.core_idx();
  Core& core = cores_[static_cast<std::size_t>(index)];
  const bool cube = index < num_cube_;
  const int sub_block = cube ? 0 : (index - num_cube_) % ratio_;
  for (;;) {
    platform::wait_event(
        core.event,
        [&] {
          return core.assigned.load(std::memory_order_acquire) ||
                 stopping_.load(std::memory_order_acquire);
        },
        platform::Clock::time_point::max(), policy_, nullptr);
    if (!core.assigned.load(std::memory_order_acquire)) return Status::ok();  // stopping
    TaskSlot* task = core.task;
    for (Observer* o : options_.observers) o->on_task_start(task->info, index);
    const CallConfig& config = task->info.config;
    if (config.mode == LaunchMode::kMix) {
      task->launch->run_block(core.gang_pos, cube ? CoreType::kCube : CoreType::kVector,
                              sub_block, index);
    } else {
      for (int b = core.gang_pos; b < config.block_num; b += core.gang_size) {
        task->launch->run_block(b, cube ? CoreType::kCube : CoreType::kVector, 0, index);
      }
    }
    for (Observer* o : options_.observers) o->on_task_end(task->info, index);
    std::lock_guard lock(mutex_);
    core.busy = false;
    core.task = nullptr;
    core.assigned.store(false, std::memory_order_relaxed);
    if (--task->cores_outstanding == 0) complete(task, task->launch->result(), true);
    dispatch();
  }
}

}  // namespace hp::runtime
