#include "runtime/dep_graph_observer.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/diagnostic_output.h"

namespace hp::runtime {
namespace {

bool writes(ArgTag tag) {
  return tag == ArgTag::kOutput || tag == ArgTag::kInOut || tag == ArgTag::kOutputExisting;
}

// Whether a predecessor's access of `tag` can be the one behind an edge of this kind/source.
bool explains(ArgTag tag, const Dependency& dep) {
  if (tag == ArgTag::kNoDep) return false;
  if (dep.source == DepSource::kCreator) return tag == ArgTag::kOutput;
  if (dep.kind == DepKind::kWar) return tag == ArgTag::kInput;
  return writes(tag);
}

}  // namespace

Status DepGraphObserver::create(const std::string& prefix, std::unique_ptr<DepGraphObserver>* out) {
  HP_RETURN_IF_ERROR(probe_output_file(output_path(prefix, kDepsFile)));
  *out = std::unique_ptr<DepGraphObserver>(new DepGraphObserver(prefix));
  return Status::ok();
}

void DepGraphObserver::on_scope_begin(const ScopeInfo& scope) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_scope_++;
  scopes_.push_back(
      {{"id", id_string(id)},
       {"parent", open_scopes_.empty() ? Json(nullptr) : Json(id_string(open_scopes_.back()))},
       {"depth", scope.depth},
       {"site", site_string(scope.site)}});
  open_scopes_.push_back(id);
}

void DepGraphObserver::on_scope_end(const ScopeInfo&) {
  std::lock_guard lock(mu_);
  if (!open_scopes_.empty()) open_scopes_.pop_back();
}

std::uint64_t DepGraphObserver::tensor_id(const TensorView& view) {
  TensorKey key{reinterpret_cast<std::uintptr_t>(view.data()),
                static_cast<int>(view.dtype()),
                {view.shape().begin(), view.shape().end()},
                {view.strides().begin(), view.strides().end()}};
  auto [it, inserted] = tensor_ids_.try_emplace(std::move(key), tensor_ids_.size());
  if (inserted) {
    tensors_.push_back({{"id", id_string(it->second)},
                        {"buffer", address_string(reinterpret_cast<std::uintptr_t>(view.data()))},
                        {"dtype", std::string(to_string(view.dtype()))},
                        {"shape", std::get<2>(it->first)},
                        {"strides", std::get<3>(it->first)},
                        {"span_bytes", view.span_bytes()}});
  }
  return it->second;
}

Json DepGraphObserver::overlap(TaskId pred, const TensorRegion& succ_region,
                               const Dependency& dep) const {
  auto it = accesses_.find(pred);
  if (it == accesses_.end()) return nullptr;
  const std::vector<Access>& pred_accesses = it->second;
  // Prefer the argument whose access explains the edge; else any overlapping one.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t j = 0; j < pred_accesses.size(); ++j) {
      const Access& a = pred_accesses[j];
      if (pass == 0 && !explains(a.tag, dep)) continue;
      if (!overlaps(a.region, succ_region)) continue;
      return Json{{"pred_arg", j},
                  {"lo", address_string(std::max(a.region.lo(), succ_region.lo()))},
                  {"hi", address_string(std::min(a.region.hi(), succ_region.hi()))},
                  {"exact", a.region.exact() && succ_region.exact()}};
    }
  }
  return nullptr;
}

void DepGraphObserver::on_task_submit(const TaskInfo& task, std::span<const Dependency> deps,
                                      const Occupancy&) {
  std::lock_guard lock(mu_);
  Json args = Json::array();
  std::vector<Access> accesses;
  if (task.args != nullptr) {
    for (int i = 0; i < task.args->num_tensors(); ++i) {
      const TensorView& t = task.args->tensor(i);
      args.push_back({{"tensor", id_string(tensor_id(t))},
                      {"tag", std::string(to_string(task.args->tag(i)))}});
      accesses.push_back({TensorRegion::of(t), task.args->tag(i)});
    }
  }
  Json scalars = Json::array();
  for (int i = 0; task.args != nullptr && i < task.args->num_scalars(); ++i) {
    const auto dtype = task.args->scalar_dtype(i);
    scalars.push_back({{"bits", fmt::format("{:#x}", task.args->scalar_bits(i))},
                       {"dtype", dtype ? std::string(to_string(*dtype)) : "bits64"}});
  }
  tasks_.push_back(
      {{"id", id_string(task.id)},
       {"callable", std::string(task.callable)},
       {"scope", open_scopes_.empty() ? Json(nullptr) : Json(id_string(open_scopes_.back()))},
       {"scope_depth", task.scope_depth},
       {"block_num", task.config.block_num},
       {"mode", std::string(platform::to_string(task.config.mode))},
       {"num_flags", task.config.num_flags},
       {"args", std::move(args)},
       {"scalars", std::move(scalars)}});
  // The whole run's inferred edges (the runtime's, and those to retired tasks), then the
  // explicit ones.
  history_accesses_.clear();
  for (int i = 0; task.args != nullptr && i < task.args->num_tensors(); ++i) {
    history_accesses_.push_back(
        {TensorRegion::of(renamed(task.args->tensor(i), task.args->tag(i))), task.args->tag(i), i});
  }
  history_found_.clear();
  history_handles_.clear();
  history_.find_and_record(task.id, nullptr, history_accesses_, &history_found_, &history_handles_);
  auto add_edge = [&](const Dependency& d, bool retired) {
    Json overlap_json = nullptr;
    if (d.arg_index >= 0 && static_cast<std::size_t>(d.arg_index) < accesses.size()) {
      overlap_json = overlap(d.pred, accesses[static_cast<std::size_t>(d.arg_index)].region, d);
    }
    edges_.push_back({{"pred", id_string(d.pred)},
                      {"succ", id_string(task.id)},
                      {"retired", retired},
                      {"arg", d.arg_index},
                      {"source", std::string(to_string(d.source))},
                      {"kind", std::string(to_string(d.kind))},
                      {"overlap", std::move(overlap_json)}});
  };
  for (const FoundDependency& f : history_found_) {
    if (!f.orders) continue;
    const bool found_by_runtime = std::any_of(deps.begin(), deps.end(), [&](const Dependency& d) {
      return d.pred == f.dep.pred && d.arg_index == f.dep.arg_index;
    });
    add_edge(f.dep, !found_by_runtime);
  }
  for (const Dependency& d : deps) {
    if (d.source == DepSource::kExplicit) add_edge(d, false);
  }
  accesses_[task.id] = std::move(accesses);
}

TensorView DepGraphObserver::renamed(const TensorView& view, ArgTag tag) {
  const auto data = reinterpret_cast<std::uintptr_t>(view.data());
  if (tag == ArgTag::kOutput) {
    // A new object: earlier OUTPUTs' memory it reuses is forgotten, and it gets a name of its own.
    const std::uintptr_t hi = data + std::max<std::size_t>(view.span_bytes(), 1);
    auto it = outputs_.lower_bound(data);
    if (it != outputs_.begin() && std::prev(it)->second.first > data) --it;
    while (it != outputs_.end() && it->first < hi) it = outputs_.erase(it);
    const std::uintptr_t name = next_name_;
    next_name_ += (hi - data + 63) / 64 * 64;
    outputs_.emplace(data, std::make_pair(hi, name));
    return view.with_data(reinterpret_cast<void*>(name));
  }
  auto it = outputs_.upper_bound(data);
  if (it == outputs_.begin()) return view;
  --it;
  if (data >= it->second.first) return view;  // not in an OUTPUT's memory
  return view.with_data(reinterpret_cast<void*>(it->second.second + (data - it->first)));
}

Status DepGraphObserver::finish() {
  std::lock_guard lock(mu_);
  const Json doc = {{"schema_version", kSchemaVersion},
                    {"runtime_level", runtime_level_},
                    {"tasks", tasks_},
                    {"tensors", tensors_},
                    {"edges", edges_},
                    {"scopes", scopes_}};
  return write_json_file(output_path(prefix_, kDepsFile), doc);
}

}  // namespace hp::runtime
