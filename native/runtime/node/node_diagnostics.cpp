#include "runtime/node/node_diagnostics.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "common/json_file.h"

namespace hp::runtime {
namespace {

constexpr int kChipPidStride = 100;
// Flow ids of one file are shifted by its index times this, so that files do not share ids.
constexpr std::uint64_t kFlowIdStride = 1'000'000'000;
constexpr const char* kNodeProcessNames[] = {"", "node: dispatcher", "node: sub-workers",
                                             "node: orchestrator", "node: scheduler"};

// One file's events onto the merged trace: pids and flow ids moved, times shifted, processes
// renamed by `rename(pid, name)`.
template <typename Rename>
void append_events(const Json& trace, int pid_base, std::uint64_t flow_base, double shift_us,
                   Rename rename, Json* events) {
  for (Json e : trace.at("traceEvents")) {
    const int pid = e.value("pid", 0);
    e["pid"] = pid_base + pid;
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + shift_us;
    if (e.contains("id") && e.value("cat", "") == "dependency") {
      e["id"] = flow_base + e["id"].get<std::uint64_t>();
    }
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      e["args"]["name"] = rename(pid, e["args"]["name"].get<std::string>());
    }
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_sort_index") {
      e["args"]["sort_index"] = pid_base + e["args"]["sort_index"].get<int>();
    }
    events->push_back(std::move(e));
  }
}

// The first task span of each task id in `events` of pids [pid_lo, pid_hi).
std::map<std::string, const Json*> first_spans(const Json& events, int pid_lo, int pid_hi) {
  std::map<std::string, const Json*> first;
  for (const Json& e : events) {
    const int pid = e.value("pid", 0);
    if (pid < pid_lo || pid >= pid_hi || e.value("cat", "") != "task") continue;
    const std::string task = e.at("args").at("task").get<std::string>();
    const Json*& f = first[task];
    if (f == nullptr || e["ts"].get<double>() < (*f)["ts"].get<double>()) f = &e;
  }
  return first;
}

Status merge_swimlane(const DiagnosticsConfig& config, const std::vector<Json>& spawned) {
  const std::string top = config.output_prefix + "/" + std::string(kSwimlaneFile);
  Json node;
  HP_RETURN_IF_ERROR(read_json_file(top, &node));
  // Every file on one time base: the earliest begin (a chip's session may begin first).
  std::vector<Json> chips(spawned.size());
  auto begin_of = [](const Json& trace) {
    return trace.at("otherData").at("begin_ns").get<std::int64_t>();
  };
  std::int64_t base = begin_of(node);
  for (std::size_t chip = 0; chip < chips.size(); ++chip) {
    HP_RETURN_IF_ERROR(read_json_file(
        chip_output_prefix(config.output_prefix, int(chip)) + "/" + std::string(kSwimlaneFile),
        &chips[chip]));
    base = std::min(base, begin_of(chips[chip]));
  }
  Json events = Json::array();
  append_events(
      node, 0, 0, double(begin_of(node) - base) / 1000.0,
      [](int pid, const std::string& name) {
        return pid >= 1 && pid <= 4 ? std::string(kNodeProcessNames[pid]) : "node: " + name;
      },
      &events);
  const std::size_t node_events = events.size();
  for (std::size_t chip = 0; chip < chips.size(); ++chip) {
    append_events(
        chips[chip], kChipPidStride * int(chip + 1), kFlowIdStride * (chip + 1),
        double(begin_of(chips[chip]) - base) / 1000.0,
        [chip](int, const std::string& name) { return fmt::format("chip {}: {}", chip, name); },
        &events);
  }
  // Spawn arrows: from the dispatch span of a next-level task to its chip task's first span.
  const Json node_view(events.begin(), events.begin() + std::ptrdiff_t(node_events));
  const auto dispatched = first_spans(node_view, 0, kChipPidStride);
  std::uint64_t flow = 0;
  Json arrows = Json::array();
  for (std::size_t chip = 0; chip < spawned.size(); ++chip) {
    const int lo = kChipPidStride * int(chip + 1);
    const auto ran = first_spans(events, lo, lo + kChipPidStride);
    for (const Json& s : spawned[chip].at("spawned")) {
      const auto from = dispatched.find(s.at("l3_task").get<std::string>());
      const auto to = ran.find(s.at("task").get<std::string>());
      if (from == dispatched.end() || to == ran.end()) continue;
      const Json args = {{"l3_task", s.at("l3_task")}, {"chip", chip}, {"task", s.at("task")}};
      auto at = [](const Json& span) {
        return span["ts"].get<double>() + span["dur"].get<double>() / 2;
      };
      arrows.push_back({{"ph", "s"},
                        {"cat", "spawn"},
                        {"name", "spawn"},
                        {"id", flow},
                        {"pid", (*from->second)["pid"]},
                        {"tid", (*from->second)["tid"]},
                        {"ts", at(*from->second)},
                        {"args", args}});
      arrows.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"cat", "spawn"},
                        {"name", "spawn"},
                        {"id", flow},
                        {"pid", (*to->second)["pid"]},
                        {"tid", (*to->second)["tid"]},
                        {"ts", at(*to->second)},
                        {"args", args}});
      ++flow;
    }
  }
  for (Json& a : arrows) events.push_back(std::move(a));
  node["traceEvents"] = std::move(events);
  node["otherData"]["chips"] = spawned.size();
  node["otherData"]["begin_ns"] = base;
  return write_json_file(top, node, 0);
}

Status merge_deps(const DiagnosticsConfig& config, const std::vector<Json>& spawned,
                  const std::vector<int>& pids) {
  const std::string top = config.output_prefix + "/" + std::string(kDepsFile);
  Json deps;
  HP_RETURN_IF_ERROR(read_json_file(top, &deps));
  Json chips = Json::array();
  Json edges = Json::array();
  for (std::size_t chip = 0; chip < spawned.size(); ++chip) {
    chips.push_back({{"chip", chip},
                     {"pid", chip < pids.size() ? pids[chip] : 0},
                     {"deps", fmt::format("chip{}/{}", chip, kDepsFile)}});
    for (const Json& s : spawned[chip].at("spawned")) {
      edges.push_back({{"l3_task", s.at("l3_task")}, {"chip", chip}, {"task", s.at("task")}});
    }
  }
  deps["chips"] = std::move(chips);
  deps["spawned"] = std::move(edges);
  return write_json_file(top, deps);
}

}  // namespace

std::string chip_output_prefix(const std::string& prefix, int chip) {
  return fmt::format("{}/chip{}", prefix, chip);
}

Status merge_node_diagnostics(const DiagnosticsConfig& config, const std::vector<int>& pids) {
  if (!config.dep_gen && !config.swimlane) return Status::ok();
  std::vector<Json> spawned(pids.size());
  for (std::size_t chip = 0; chip < pids.size(); ++chip) {
    HP_RETURN_IF_ERROR(read_json_file(
        chip_output_prefix(config.output_prefix, int(chip)) + "/" + std::string(kSpawnedFile),
        &spawned[chip]));
  }
  if (config.dep_gen) HP_RETURN_IF_ERROR(merge_deps(config, spawned, pids));
  if (config.swimlane) HP_RETURN_IF_ERROR(merge_swimlane(config, spawned));
  return Status::ok();
}

}  // namespace hp::runtime
