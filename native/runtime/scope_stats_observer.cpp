#include "runtime/scope_stats_observer.h"

#include <algorithm>

#include "common/json_file.h"

namespace hp::runtime {

Status ScopeStatsObserver::create(const std::string& prefix,
                                  std::unique_ptr<ScopeStatsObserver>* out) {
  auto o = std::unique_ptr<ScopeStatsObserver>(new ScopeStatsObserver());
  HP_RETURN_IF_ERROR(o->file_.open(output_path(prefix, kScopeStatsFile)));
  *out = std::move(o);
  return Status::ok();
}

void ScopeStatsObserver::on_run_begin(const RunInfo& run) {
  const Json line = {{"type", "metadata"},
                     {"schema_version", kSchemaVersion},
                     {"runtime_level", runtime_level_},
                     {"rings", run.num_rings},
                     {"capacities",
                      {{"task_window", run.task_ring_slots},
                       {"heap_bytes", run.heap_ring_bytes},
                       {"tensormap_entries", nullptr}}}};
  std::lock_guard lock(mu_);
  file_.write(line.dump() + "\n");
}

void ScopeStatsObserver::absorb(Frame& frame, const Occupancy& occupancy) const {
  if (occupancy.ring == frame.ring) {
    frame.task_window = std::max(frame.task_window, occupancy.live_slots);
    frame.heap_bytes = std::max(frame.heap_bytes, occupancy.heap_used);
  }
  frame.tensormap_entries = std::max(frame.tensormap_entries, occupancy.tensor_map_entries);
}

void ScopeStatsObserver::write_line(const char* type, const Frame& frame) {
  const Json line = {
      {"type", type},
      {"scope", id_string(frame.id)},
      {"parent", frame.parent < 0 ? Json(nullptr)
                                  : Json(id_string(static_cast<std::uint64_t>(frame.parent)))},
      {"site", frame.site},
      {"depth", frame.depth},
      {"ring", frame.ring},
      {"tasks", frame.tasks},
      {"hwm",
       {{"task_window", frame.task_window},
        {"heap_bytes", frame.heap_bytes},
        {"tensormap_entries", frame.tensormap_entries}}}};
  file_.write(line.dump() + "\n");
}

void ScopeStatsObserver::on_scope_begin(const ScopeInfo& scope) {
  std::lock_guard lock(mu_);
  Frame frame{.id = next_id_++,
              .parent = open_.empty() ? -1 : static_cast<std::int64_t>(open_.back().id),
              .site = site_string(scope.site),
              .depth = scope.depth,
              .ring = scope.ring};
  absorb(frame, scope.occupancy);
  write_line("scope_begin", frame);
  open_.push_back(std::move(frame));
}

void ScopeStatsObserver::on_scope_end(const ScopeInfo& scope) {
  std::lock_guard lock(mu_);
  if (open_.empty()) return;
  Frame frame = std::move(open_.back());
  open_.pop_back();
  absorb(frame, scope.occupancy);
  write_line("scope_end", frame);
}

void ScopeStatsObserver::on_task_submit(const TaskInfo&, std::span<const Dependency>,
                                        const Occupancy& occupancy) {
  std::lock_guard lock(mu_);
  if (!open_.empty()) ++open_.back().tasks;
  for (Frame& frame : open_) absorb(frame, occupancy);
}

void ScopeStatsObserver::on_submit_blocked(const RingState& ring) {
  const Occupancy full{.ring = ring.ring,
                       .live_slots = ring.live_slots,
                       .heap_used = ring.heap_used,
                       .tensor_map_entries = 0};
  std::lock_guard lock(mu_);
  for (Frame& frame : open_) absorb(frame, full);
}

Status ScopeStatsObserver::finish() {
  std::lock_guard lock(mu_);
  return file_.close();
}

}  // namespace hp::runtime
