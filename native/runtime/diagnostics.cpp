#include "runtime/diagnostics.h"

#include <string>

#include "runtime/dep_graph_observer.h"
#include "runtime/diagnostic_output.h"
#include "runtime/scope_stats_observer.h"
#include "runtime/swimlane_observer.h"
#include "runtime/tensor_dump_observer.h"

namespace hp::runtime {

Status Diagnostics::open(const DiagnosticsConfig& config, std::unique_ptr<Diagnostics>* out) {
  out->reset();
  HP_ENSURE(config.runtime_level == 2 || config.runtime_level == 3, ErrorCode::kInvalidArgument,
            "DiagnosticsConfig.runtime_level={} must be 2 (a chip) or 3 (a node)",
            config.runtime_level);
  HP_ENSURE(config.dump_args >= 0 && config.dump_args <= 2, ErrorCode::kInvalidArgument,
            "OrchestratorConfig.diagnostics.dump_args={} must be 0 (off), 1 (arguments marked "
            "with TaskArgs::dump()) or 2 (every argument)",
            config.dump_args);
  if (!config.any()) return Status::ok();
  if (config.output_prefix.empty()) {
    std::string on;
    auto name = [&](bool enabled, const char* what) {
      if (!enabled) return;
      if (!on.empty()) on += ", ";
      on += what;
    };
    name(config.dump_args != 0, "dump_args");
    name(config.scope_stats, "scope_stats");
    name(config.dep_gen, "dep_gen");
    name(config.swimlane, "swimlane");
    return Status::error(ErrorCode::kInvalidArgument,
                         "diagnostics on ({}) but no output prefix: set "
                         "OrchestratorConfig.diagnostics.output_prefix to the directory the "
                         "files should be written to",
                         on);
  }
  HP_RETURN_IF_ERROR(prepare_output_prefix(config.output_prefix));
  auto diagnostics = std::unique_ptr<Diagnostics>(new Diagnostics());
  const std::string& prefix = config.output_prefix;
  if (config.dump_args != 0) {
    std::unique_ptr<TensorDumpObserver> o;
    HP_RETURN_IF_ERROR(TensorDumpObserver::create(prefix, config.dump_args, &o));
    diagnostics->observers_.push_back(std::move(o));
  }
  if (config.scope_stats) {
    std::unique_ptr<ScopeStatsObserver> o;
    HP_RETURN_IF_ERROR(ScopeStatsObserver::create(prefix, &o));
    diagnostics->observers_.push_back(std::move(o));
  }
  if (config.dep_gen) {
    std::unique_ptr<DepGraphObserver> o;
    HP_RETURN_IF_ERROR(DepGraphObserver::create(prefix, &o));
    diagnostics->observers_.push_back(std::move(o));
  }
  if (config.swimlane) {
    std::unique_ptr<SwimlaneObserver> o;
    HP_RETURN_IF_ERROR(SwimlaneObserver::create(prefix, &o));
    diagnostics->observers_.push_back(std::move(o));
  }
  for (const auto& o : diagnostics->observers_) o->set_runtime_level(config.runtime_level);
  *out = std::move(diagnostics);
  return Status::ok();
}

void Diagnostics::add_observers(std::vector<Observer*>* observers) const {
  for (const auto& o : observers_) observers->push_back(o.get());
}

Status Diagnostics::finish() {
  Status first;
  for (const auto& o : observers_) {
    Status s = o->finish();
    if (first.is_ok() && !s.is_ok()) first = std::move(s);
  }
  return first;
}

}  // namespace hp::runtime
