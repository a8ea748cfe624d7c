#include "runtime/replay.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "common/json_file.h"

namespace hp::runtime {
namespace {

struct RecordedTensor {
  std::uintptr_t address = 0;
  DType dtype = DType::kFP32;
  std::vector<std::int64_t> shape, strides;
  std::size_t span_bytes = 0;
};

struct RecordedTask {
  std::string id;
  std::string callable;
  std::string scope;  // empty: none
  CallConfig config;
  std::vector<std::pair<std::string, ArgTag>> args;  // tensor id, tag
  std::vector<std::pair<std::uint64_t, std::optional<DType>>> scalars;
};

struct RecordedScope {
  std::string parent;  // empty: the root
  std::string file;    // the site "file:line", split when read
  std::uint32_t line = 0;
};

struct Recording {
  std::unordered_map<std::string, RecordedTensor> tensors;
  std::unordered_map<std::string, RecordedScope> scopes;
  std::vector<RecordedTask> tasks;
  std::unordered_map<std::string, std::set<std::string>> preds;  // succ -> preds
};

Status parse_mode(const std::string& name, platform::LaunchMode* mode) {
  for (auto m :
       {platform::LaunchMode::kCube, platform::LaunchMode::kVector, platform::LaunchMode::kMix}) {
    if (platform::to_string(m) == name) {
      *mode = m;
      return Status::ok();
    }
  }
  return Status::error(ErrorCode::kCorruptData, "launch mode '{}'", name);
}

Status parse_tag(const std::string& name, ArgTag* tag) {
  for (auto t :
       {ArgTag::kInput, ArgTag::kOutput, ArgTag::kInOut, ArgTag::kOutputExisting, ArgTag::kNoDep}) {
    if (to_string(t) == name) {
      *tag = t;
      return Status::ok();
    }
  }
  return Status::error(ErrorCode::kCorruptData, "argument tag '{}'", name);
}

std::string opt_string(const Json& j) { return j.is_null() ? std::string() : j.get<std::string>(); }

Status parse(const Json& doc, Recording* out) {
  HP_ENSURE(doc.is_object() && doc.contains("schema_version") && doc["schema_version"] == 1,
            ErrorCode::kCorruptData, "schema_version {} (this build reads 1)",
            doc.is_object() && doc.contains("schema_version") ? doc["schema_version"].dump()
                                                              : std::string("missing"));
  for (const Json& t : doc.at("tensors")) {
    RecordedTensor r;
    r.address = std::stoull(t.at("buffer").get<std::string>(), nullptr, 16);
    HP_RETURN_IF_ERROR(parse_dtype(t.at("dtype").get<std::string>(), &r.dtype));
    r.shape = json_integers<std::int64_t>(t.at("shape"));
    r.strides = json_integers<std::int64_t>(t.at("strides"));
    r.span_bytes = json_integer<std::size_t>(t.at("span_bytes"));
    out->tensors[t.at("id").get<std::string>()] = std::move(r);
  }
  for (const Json& s : doc.at("scopes")) {
    const std::string id = s.at("id").get<std::string>(), site = s.at("site").get<std::string>();
    RecordedScope& scope = out->scopes[id];
    scope.parent = opt_string(s.at("parent"));
    // "file:line"; the line after the last ':' must be a number ("<root>" has none).
    const std::size_t colon = site.rfind(':');
    scope.file = site.substr(0, colon);
    if (colon != std::string::npos) {
      const char* end = site.data() + site.size();
      const auto [ptr, ec] = std::from_chars(site.data() + colon + 1, end, scope.line);
      HP_ENSURE(ec == std::errc() && ptr == end, ErrorCode::kCorruptData,
                "scope {}: site '{}' does not end in a line number", id, site);
    }
  }
  // Every scope's chain of parents ends (at the root or an unlisted id) within as many steps as
  // there are scopes.
  for (const auto& [id, scope] : out->scopes) {
    std::size_t steps = 0;
    for (auto it = out->scopes.find(id); it != out->scopes.end() && !it->second.parent.empty();
         it = out->scopes.find(it->second.parent)) {
      HP_ENSURE(++steps <= out->scopes.size(), ErrorCode::kCorruptData,
                "scope {}: its chain of parents loops", id);
    }
  }
  for (const Json& t : doc.at("tasks")) {
    RecordedTask r;
    r.id = t.at("id").get<std::string>();
    r.callable = t.at("callable").get<std::string>();
    r.scope = opt_string(t.at("scope"));
    r.config.block_num = json_integer<int>(t.at("block_num"));
    r.config.num_flags = json_integer<int>(t.at("num_flags"));
    HP_RETURN_IF_ERROR(parse_mode(t.at("mode").get<std::string>(), &r.config.mode));
    for (const Json& a : t.at("args")) {
      ArgTag tag{};
      HP_RETURN_IF_ERROR(parse_tag(a.at("tag").get<std::string>(), &tag));
      r.args.emplace_back(a.at("tensor").get<std::string>(), tag);
    }
    for (const Json& s : t.at("scalars")) {
      const std::string name = s.at("dtype").get<std::string>();
      std::optional<DType> dtype;
      if (name != "bits64") {
        DType d{};
        HP_RETURN_IF_ERROR(parse_dtype(name, &d));
        dtype = d;
      }
      r.scalars.emplace_back(std::stoull(s.at("bits").get<std::string>(), nullptr, 16), dtype);
    }
    out->tasks.push_back(std::move(r));
  }
  for (const Json& e : doc.at("edges")) {
    out->preds[e.at("succ").get<std::string>()].insert(e.at("pred").get<std::string>());
  }
  return Status::ok();
}

// The orchestration that replays `rec` through `submit`.
class Replayer {
 public:
  Replayer(const Recording& rec, std::span<const Rebase> buffers, const ReplaySubmit& submit)
      : rec_(rec), buffers_(buffers), submit_(submit) {}

  // Every scope it opened ends before it returns (a Scope must not outlive its run).
  Status run(Orchestrator& o) {
    Status s = submit_all(o);
    while (!open_.empty()) close_innermost();
    return s;
  }

 private:
  Status submit_all(Orchestrator& o) {
    for (const RecordedTask& task : rec_.tasks) {
      enter_scope(o, task.scope);
      ReplayTask replayed{.callable = task.callable, .config = task.config};
      std::vector<const RecordedTensor*> outputs;
      for (const auto& [tensor_id, tag] : task.args) {
        auto it = rec_.tensors.find(tensor_id);
        HP_ENSURE(it != rec_.tensors.end(), ErrorCode::kCorruptData,
                  "replay: task {} passes tensor {}, which the file does not list", task.id,
                  tensor_id);
        const RecordedTensor& t = it->second;
        if (tag == ArgTag::kOutput) {
          replayed.tensors.push_back({TensorView(nullptr, t.dtype, t.shape), ArgTag::kOutput});
          outputs.push_back(&t);
        } else {
          replayed.tensors.push_back(
              {TensorView(rebase(t.address), t.dtype, t.shape, t.strides), ArgTag::kNoDep});
        }
      }
      replayed.scalars = task.scalars;
      if (auto p = rec_.preds.find(task.id); p != rec_.preds.end()) {
        for (const std::string& pred : p->second) {
          auto id = replayed_.find(pred);
          HP_ENSURE(id != replayed_.end(), ErrorCode::kCorruptData,
                    "replay: task {} depends on task {}, which comes after it in the file", task.id,
                    pred);
          replayed.predecessors.push_back(id->second);
        }
      }
      SubmitResult result;
      HP_RETURN_IF_ERROR(
          submit_(replayed, &result).with_context(fmt::format("replaying task {}", task.id)));
      replayed_[task.id] = result.task;
      for (std::size_t i = 0; i < outputs.size() && i < result.outputs.size(); ++i) {
        outputs_.push_back({outputs[i]->address, outputs[i]->span_bytes,
                            static_cast<std::byte*>(result.outputs[i].data())});
      }
    }
    return Status::ok();
  }

  struct Output {
    std::uintptr_t recorded;
    std::size_t bytes;
    std::byte* now;
  };

  void* rebase(std::uintptr_t address) const {
    for (const Rebase& r : buffers_) {
      if (address >= r.recorded && address - r.recorded < r.bytes) {
        return static_cast<std::byte*>(r.now) + (address - r.recorded);
      }
    }
    for (auto it = outputs_.rbegin(); it != outputs_.rend(); ++it) {
      if (address >= it->recorded && address - it->recorded < it->bytes) {
        return it->now + (address - it->recorded);
      }
    }
    return reinterpret_cast<void*>(address);
  }

  // Opens and closes scopes so that the innermost open one is `scope` (the root is the
  // orchestration's own; its recorded id has no parent).
  void enter_scope(Orchestrator& o, const std::string& scope) {
    std::vector<std::string> chain;  // innermost first, without the root
    for (std::string s = scope; !s.empty();) {
      auto it = rec_.scopes.find(s);
      if (it == rec_.scopes.end() || it->second.parent.empty()) break;
      chain.push_back(s);
      s = it->second.parent;
    }
    std::reverse(chain.begin(), chain.end());
    std::size_t keep = 0;
    while (keep < open_.size() && keep < chain.size() && open_[keep].first == chain[keep]) ++keep;
    while (open_.size() > keep) close_innermost();
    for (std::size_t i = keep; i < chain.size(); ++i) {
      // The site's file lives in rec_, which outlives every scope opened here. new Scope(prvalue)
      // initialises in place: a Scope can be neither copied nor moved.
      const RecordedScope& scope = rec_.scopes.at(chain[i]);
      open_.emplace_back(
          chain[i],
          std::unique_ptr<Scope>(new Scope(o.scope(ScopeSite(scope.file.c_str(), scope.line)))));
    }
  }
  void close_innermost() { open_.pop_back(); }

  const Recording& rec_;
  std::span<const Rebase> buffers_;
  const ReplaySubmit& submit_;
  std::unordered_map<std::string, TaskId> replayed_;  // recorded id -> replayed id
  std::vector<Output> outputs_;
  std::vector<std::pair<std::string, std::unique_ptr<Scope>>> open_;
};

}  // namespace

TaskArgs ReplayTask::args(std::size_t num_scalars) const {
  TaskArgs out;
  for (const TaskArgs::TensorArg& t : tensors) {
    if (t.tag == ArgTag::kOutput) {
      out.output(t.view.dtype(), t.view.shape());
    } else {
      out.no_dep(t.view);
    }
  }
  for (std::size_t i = 0; i < scalars.size() && i < num_scalars; ++i) {
    out.scalar_bits_of(scalars[i].first, scalars[i].second);
  }
  out.set_dependencies(predecessors);
  return out;
}

Status replay_into(Orchestrator& o, const std::string& deps_path, std::span<const Rebase> buffers,
                   const ReplaySubmit& submit) {
  Json doc;
  HP_RETURN_IF_ERROR(read_json_file(deps_path, &doc));
  Recording rec;
  try {
    HP_RETURN_IF_ERROR(parse(doc, &rec).with_context("replay: " + deps_path));
  } catch (const Json::exception& e) {
    return Status::error(ErrorCode::kCorruptData,
                         "replay: {} is not a deps.json this build reads ({}): record it again "
                         "with dep_gen on",
                         deps_path, e.what());
  } catch (const std::logic_error& e) {  // std::stoull, json_integer
    return Status::error(ErrorCode::kCorruptData, "replay: {}: a number does not parse ({})",
                         deps_path, e.what());
  }
  Replayer replayer(rec, buffers, submit);
  return replayer.run(o);
}

Status replay(ChipWorker& worker, const std::string& deps_path, const ReplayBindings& bindings,
              const OrchestratorConfig& config) {
  return Orchestrator::run(
      worker,
      [&](Orchestrator& o) {
        return replay_into(o, deps_path, bindings.buffers,
                           [&](const ReplayTask& task, SubmitResult* result) -> Status {
                             auto slot = bindings.callables.find(task.callable);
                             HP_ENSURE(slot != bindings.callables.end(), ErrorCode::kNotFound,
                                       "replay: callable '{}' has no slot in the bindings",
                                       task.callable);
                             return o.submit(slot->second, task.args(), task.config, result);
                           });
      },
      config);
}

}  // namespace hp::runtime
