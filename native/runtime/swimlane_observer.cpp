#include "runtime/swimlane_observer.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "runtime/diagnostic_output.h"

namespace hp::runtime {
namespace {

double micros(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

Json metadata(const char* what, int pid, int tid, Json args) {
  return Json{{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

Status SwimlaneObserver::create(const std::string& prefix, std::unique_ptr<SwimlaneObserver>* out) {
  HP_RETURN_IF_ERROR(probe_output_file(output_path(prefix, kSwimlaneFile)));
  *out = std::unique_ptr<SwimlaneObserver>(new SwimlaneObserver(prefix));
  return Status::ok();
}

std::int64_t SwimlaneObserver::now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
}

void SwimlaneObserver::on_run_begin(const RunInfo& run) {
  std::lock_guard lock(mu_);
  t0_ = Clock::now();
  run_ = run;
  core_started_.assign(static_cast<std::size_t>(run.num_cube + run.num_vector), kNever);
}

void SwimlaneObserver::end_blocked(std::int64_t t) {
  if (!blocked_open_) return;
  blocked_.end = t;
  orchestrator_spans_.push_back(blocked_);
  blocked_open_ = false;
}

void SwimlaneObserver::on_run_end(const Status&) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  end_blocked(t);
  while (!open_scopes_.empty()) {  // only when a scope's end was never reported
    open_scopes_.back().end = t;
    orchestrator_spans_.push_back(std::move(open_scopes_.back()));
    open_scopes_.pop_back();
  }
}

void SwimlaneObserver::on_scope_begin(const ScopeInfo& scope) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  end_blocked(t);
  open_scopes_.push_back(
      {.name = fmt::format("scope {} @ {}", scope.depth, site_string(scope.site)), .start = t});
}

void SwimlaneObserver::on_scope_end(const ScopeInfo&) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  end_blocked(t);
  if (open_scopes_.empty()) return;
  open_scopes_.back().end = t;
  orchestrator_spans_.push_back(std::move(open_scopes_.back()));
  open_scopes_.pop_back();
}

void SwimlaneObserver::on_submit_blocked(const RingState& ring) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  if (blocked_open_) return;  // the same submit, waiting again
  blocked_ = {.name = fmt::format("submit waits: ring {} full", ring.ring), .start = t};
  blocked_open_ = true;
}

void SwimlaneObserver::on_task_submit(const TaskInfo& task, std::span<const Dependency> deps,
                                      const Occupancy&) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  end_blocked(t);
  Task& entry = tasks_[task.id];
  entry.callable = std::string(task.callable);
  entry.block_num = task.config.block_num;
  entry.mode = task.config.mode;
  entry.submit = t;
  for (const Dependency& d : deps) {
    if (std::find(entry.preds.begin(), entry.preds.end(), d.pred) == entry.preds.end()) {
      entry.preds.push_back(d.pred);
    }
  }
  task_order_.push_back(task.id);
  submits_.push_back(
      {.name = fmt::format("submit task {}", task.id), .start = t, .end = t, .task = task.id});
}

void SwimlaneObserver::on_task_ready(const TaskInfo& task) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  tasks_[task.id].ready = t;
}

void SwimlaneObserver::on_task_start(const TaskInfo& task, int core_idx) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  if (core_idx < 0 || static_cast<std::size_t>(core_idx) >= core_started_.size()) return;
  core_started_[static_cast<std::size_t>(core_idx)] = t;
  Task& entry = tasks_[task.id];
  if (entry.first_start == kNever || t < entry.first_start) entry.first_start = t;
}

void SwimlaneObserver::on_task_end(const TaskInfo& task, int core_idx) {
  const std::int64_t t = now();
  std::lock_guard lock(mu_);
  if (core_idx < 0 || static_cast<std::size_t>(core_idx) >= core_started_.size()) return;
  std::int64_t& started = core_started_[static_cast<std::size_t>(core_idx)];
  if (started == kNever) return;
  core_spans_.push_back({.name = std::string(task.callable),
                         .start = started,
                         .end = t,
                         .task = task.id,
                         .core = core_idx});
  started = kNever;
}

void SwimlaneObserver::on_task_complete(const TaskInfo& task, const Status& status) {
  std::lock_guard lock(mu_);
  tasks_[task.id].status = std::string(status.is_ok() ? "OK" : to_string(status.code()));
}

Json SwimlaneObserver::build_trace() const {
  Json events = Json::array();
  const int cores = run_.num_cube + run_.num_vector;
  auto pid_of = [&](int core) { return core < run_.num_cube ? kCubePid : kVectorPid; };

  // Metadata: processes in the order orchestrator, scheduler, cube cores, vector cores.
  const std::pair<int, const char*> processes[] = {{kOrchestratorPid, "orchestrator"},
                                                   {kSchedulerPid, "scheduler"},
                                                   {kCubePid, "cube cores"},
                                                   {kVectorPid, "vector cores"}};
  int order = 0;
  for (const auto& [pid, name] : processes) {
    events.push_back(metadata("process_name", pid, 0, {{"name", name}}));
    events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", order++}}));
  }
  for (int c = 0; c < cores; ++c) {
    const std::string name =
        c < run_.num_cube ? fmt::format("cube core {}", c)
                          : fmt::format("vector core {} (cluster {})", c,
                                        run_.ratio > 0 ? (c - run_.num_cube) / run_.ratio : 0);
    events.push_back(metadata("thread_name", pid_of(c), c, {{"name", name}}));
  }
  events.push_back(
      metadata("thread_name", kOrchestratorPid, 0, {{"name", "orchestration thread"}}));

  // Core rows.
  std::unordered_map<TaskId, const Span*> first_span;
  for (const Span& s : core_spans_) {
    const Span*& first = first_span[s.task];
    if (first == nullptr || s.start < first->start) first = &s;
    const auto it = tasks_.find(s.task);
    const Task* task = it == tasks_.end() ? nullptr : &it->second;
    events.push_back({{"ph", "X"},
                      {"cat", "task"},
                      {"name", s.name},
                      {"pid", pid_of(s.core)},
                      {"tid", s.core},
                      {"ts", micros(s.start)},
                      {"dur", micros(s.end - s.start)},
                      {"args",
                       {{"task", id_string(s.task)},
                        {"callable", s.name},
                        {"block_num", task ? task->block_num : 0},
                        {"mode", task ? std::string(platform::to_string(task->mode)) : ""},
                        {"status", task ? task->status : ""}}}});
  }

  // Orchestrator row (scopes and waits nest: they all happen on the orchestration thread).
  for (const Span& s : orchestrator_spans_) {
    events.push_back({{"ph", "X"},
                      {"cat", "orchestrator"},
                      {"name", s.name},
                      {"pid", kOrchestratorPid},
                      {"tid", 0},
                      {"ts", micros(s.start)},
                      {"dur", micros(s.end - s.start)}});
  }
  for (const Span& s : submits_) {
    events.push_back({{"ph", "i"},
                      {"s", "t"},
                      {"cat", "orchestrator"},
                      {"name", s.name},
                      {"pid", kOrchestratorPid},
                      {"tid", 0},
                      {"ts", micros(s.start)},
                      {"args", {{"task", id_string(s.task)}}}});
  }

  // Scheduler rows: pending and queued spans, each kind packed greedily into lanes.
  auto lanes = [&](const char* phase, const char* lane_name, int tid_base, std::int64_t Task::*from,
                   std::int64_t Task::*to) {
    std::vector<std::pair<std::int64_t, TaskId>> starts;
    for (TaskId id : task_order_) {
      const Task& t = tasks_.at(id);
      if (t.*from != kNever && t.*to != kNever) starts.push_back({t.*from, id});
    }
    std::sort(starts.begin(), starts.end());
    std::vector<std::int64_t> lane_end;
    for (const auto& [start, id] : starts) {
      const Task& t = tasks_.at(id);
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > start) ++lane;
      if (lane == lane_end.size()) {
        lane_end.push_back(0);
        events.push_back(metadata("thread_name", kSchedulerPid, tid_base + static_cast<int>(lane),
                                  {{"name", fmt::format("{} {}", lane_name, lane)}}));
      }
      lane_end[lane] = t.*to;
      events.push_back({{"ph", "X"},
                        {"cat", "scheduler"},
                        {"name", fmt::format("{} task {}", phase, id)},
                        {"pid", kSchedulerPid},
                        {"tid", tid_base + static_cast<int>(lane)},
                        {"ts", micros(start)},
                        {"dur", micros(t.*to - start)},
                        {"args", {{"task", id_string(id)}, {"callable", t.callable}}}});
    }
  };
  lanes("pending", "pending", 0, &Task::submit, &Task::ready);
  lanes("queued", "ready queue", kQueuedTidBase, &Task::ready, &Task::first_start);

  // Flow arrows along the dependency edges of tasks that both ran.
  std::uint64_t flow = 0;
  auto mid = [](const Span& s) { return micros(s.start) + micros(s.end - s.start) / 2; };
  for (TaskId succ : task_order_) {
    const auto succ_span = first_span.find(succ);
    if (succ_span == first_span.end()) continue;
    for (TaskId pred : tasks_.at(succ).preds) {
      const auto pred_span = first_span.find(pred);
      if (pred_span == first_span.end()) continue;
      const Span& p = *pred_span->second;
      const Span& s = *succ_span->second;
      const Json args = {{"pred", id_string(pred)}, {"succ", id_string(succ)}};
      events.push_back({{"ph", "s"},
                        {"cat", "dependency"},
                        {"name", "dep"},
                        {"id", flow},
                        {"pid", pid_of(p.core)},
                        {"tid", p.core},
                        {"ts", mid(p)},
                        {"args", args}});
      events.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"cat", "dependency"},
                        {"name", "dep"},
                        {"id", flow},
                        {"pid", pid_of(s.core)},
                        {"tid", s.core},
                        {"ts", mid(s)},
                        {"args", args}});
      ++flow;
    }
  }
  return Json{
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ns"},
      {"otherData",
       {{"schema", "hyper_parallel.swimlane"},
        {"schema_version", kSchemaVersion},
        {"runtime_level", runtime_level_},
        {"begin_ns",
         std::chrono::duration_cast<std::chrono::nanoseconds>(t0_.time_since_epoch()).count()}}}};
}

Status SwimlaneObserver::finish() {
  std::lock_guard lock(mu_);
  return write_json_file(output_path(prefix_, kSwimlaneFile), build_trace(), 0);
}

}  // namespace hp::runtime
