// Replay: runs the tasks a deps.json recorded (DiagnosticsConfig::dep_gen) again, on any chip,
// with the recorded edges as the only dependencies and no inference.
//
// Each recorded task is submitted in its recorded order, in the recorded scopes, with its
// callable (found by name in `callables`), its block_num, mode, num_flags and scalars, and its
// tensors: every tensor argument NO_DEP (the runtime infers nothing) but OUTPUTs, which are
// given fresh heap-ring memory again; its predecessors are exactly the recorded edges' (as
// set_dependencies). A tensor's recorded address is rebased: into the first Rebase range that
// holds it (the caller's buffers, often fresh copies of the recorded run's inputs), else into
// the replayed OUTPUT that holds it (a recorded OUTPUT's consumers read the replayed one), else
// used as it was. So a replay reproduces the recorded schedule's constraints exactly, on the
// same or another number of cores; with dep_gen on, its deps.json shows the recorded edges as
// "explicit" ones (what the tests compare against the recorded inference).
//
// Errors: NOT_FOUND for a callable name without a slot, CORRUPT_DATA for a deps.json that does
// not parse as one (schema_version 1 with tasks, tensors, edges and scopes; every task with its
// scalars: older files lack them), what the file reading and the run return otherwise.
#ifndef HYPER_PARALLEL_RUNTIME_REPLAY_H_
#define HYPER_PARALLEL_RUNTIME_REPLAY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "runtime/chip_worker.h"
#include "runtime/orchestrator.h"

namespace hp::runtime {

struct Rebase {
  std::uintptr_t recorded = 0;  // the recorded run's address of the range
  std::size_t bytes = 0;
  void* now = nullptr;  // where the range is in this replay
};

struct ReplayBindings {
  std::map<std::string, int> callables;  // callable name -> slot on the replaying worker
  std::vector<Rebase> buffers;
};

HP_API Status replay(ChipWorker& worker, const std::string& deps_path,
                     const ReplayBindings& bindings, const OrchestratorConfig& config = {});

// One recorded task as a replay submits it (replay_into): its callable's name, its launch
// shape, its tensors (rebased; NO_DEP, OUTPUTs without memory), its scalars and its
// predecessors (the replayed ids of its recorded edges' predecessors).
struct ReplayTask {
  std::string callable;
  CallConfig config;
  std::vector<TaskArgs::TensorArg> tensors;
  std::vector<std::pair<std::uint64_t, std::optional<DType>>> scalars;
  std::vector<TaskId> predecessors;
  // The task's arguments with its first `num_scalars` scalars (all by default).
  HP_API TaskArgs args(std::size_t num_scalars = SIZE_MAX) const;
};
using ReplaySubmit = std::function<Status(const ReplayTask& task, SubmitResult* result)>;

// The replay inside a running orchestration: `o` opens the recorded scopes, `submit` submits
// each task (the node level replays its next-level tasks this way: node_worker.h).
HP_API Status replay_into(Orchestrator& o, const std::string& deps_path,
                          std::span<const Rebase> buffers, const ReplaySubmit& submit);

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_REPLAY_H_
