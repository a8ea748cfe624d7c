// Diagnostics: the built-in diagnostic observers of one orchestration run (internal to the
// runtime), created from DiagnosticsConfig before the run and asked to write their files after.
//
// Each diagnostic is an ordinary Observer (observer.h) plus finish(): the run adds them after
// the user's observers, so they see exactly what a user's observer sees.
#ifndef HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_H_
#define HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_H_

#include <memory>
#include <vector>

#include "common/status.h"
#include "runtime/diagnostics_config.h"
#include "runtime/observer.h"

namespace hp::runtime {

class DiagnosticObserver : public Observer {
 public:
  // After on_run_end: completes and closes the observer's files.
  virtual Status finish() = 0;
  // The runtime level the files describe (DiagnosticsConfig::runtime_level), in their headers.
  void set_runtime_level(int level) noexcept { runtime_level_ = level; }

 protected:
  int runtime_level_ = 2;
};

class Diagnostics {
 public:
  // Checks the config and creates the output prefix and every file the enabled diagnostics
  // write (so an unwritable prefix fails before any task runs). No diagnostic on: no files.
  static Status open(const DiagnosticsConfig& config, std::unique_ptr<Diagnostics>* out);

  // Appends the diagnostic observers to `observers`.
  void add_observers(std::vector<Observer*>* observers) const;
  // Every diagnostic's finish(); the first failure.
  Status finish();

 private:
  std::vector<std::unique_ptr<DiagnosticObserver>> observers_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DIAGNOSTICS_H_
