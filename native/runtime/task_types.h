// The vocabulary shared by the orchestrator, the scheduler and observers: task ids, task states,
// where a task runs, and the dependency edges between tasks.
#ifndef HYPER_PARALLEL_RUNTIME_TASK_TYPES_H_
#define HYPER_PARALLEL_RUNTIME_TASK_TYPES_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "common/api.h"
#include "platform/chip.h"

namespace hp::runtime {

// Task ids count submissions of one orchestration run from 0; never reused within the run.
using TaskId = std::uint64_t;
inline constexpr TaskId kNoTask = std::numeric_limits<TaskId>::max();

// A task slot's life: FREE (empty slot) -> PENDING (submitted, waiting for predecessors) ->
// READY (in its ready queue) -> RUNNING (on cores) -> COMPLETED (finished or failed; its outputs
// may still be read) -> CONSUMED (no consumer, scope or running block needs it; the slot and
// its heap-ring memory are reclaimed in ring order; the slot is FREE again when it is taken for
// the next task).
enum class TaskState : std::uint8_t { kFree, kPending, kReady, kRunning, kCompleted, kConsumed };

// How a dependency was found: an explicit set_dependencies() entry, the task that created (as
// an OUTPUT) the memory an argument touches, or the tensor map (an earlier access overlapping
// the argument's region).
enum class DepSource : std::uint8_t { kExplicit, kCreator, kTensorMap };
// RAW: reads what the predecessor writes; WAW: writes what it writes; WAR: writes what it reads.
// Explicit edges are reported as kOrder.
enum class DepKind : std::uint8_t { kRaw, kWaw, kWar, kOrder };

struct Dependency {
  TaskId pred = kNoTask;
  int arg_index = -1;  // the successor's tensor argument that overlaps; -1 for explicit edges
  DepSource source = DepSource::kTensorMap;
  DepKind kind = DepKind::kRaw;
};

// Where a task runs: SPMD over block_num blocks of one resource shape (platform::LaunchMode):
// kCube / kVector blocks on cores of that kind, kMix groups of one cube and `ratio` vector
// blocks on one cluster (block_num <= num_cube).
struct CallConfig {
  platform::LaunchMode mode = platform::LaunchMode::kVector;
  int block_num = 1;
  int num_flags = 64;                    // cross-core flags per launch (BlockContext::set_flag)
  std::optional<double> wait_timeout_s;  // the task's flag waits; empty: the chip's
  friend bool operator==(const CallConfig&, const CallConfig&) = default;
};

HP_API std::string_view to_string(TaskState state) noexcept;
HP_API std::string_view to_string(DepSource source) noexcept;
HP_API std::string_view to_string(DepKind kind) noexcept;

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TASK_TYPES_H_
