#include "runtime/task_types.h"

namespace hp::runtime {

std::string_view to_string(TaskState state) noexcept {
  switch (state) {
    case TaskState::kFree:
      return "FREE";
    case TaskState::kPending:
      return "PENDING";
    case TaskState::kReady:
      return "READY";
    case TaskState::kRunning:
      return "RUNNING";
    case TaskState::kCompleted:
      return "COMPLETED";
    case TaskState::kConsumed:
      return "CONSUMED";
  }
  return "UNKNOWN";
}

std::string_view to_string(DepSource source) noexcept {
  switch (source) {
    case DepSource::kExplicit:
      return "explicit";
    case DepSource::kCreator:
      return "creator";
    case DepSource::kTensorMap:
      return "tensormap";
  }
  return "unknown";
}

std::string_view to_string(DepKind kind) noexcept {
  switch (kind) {
    case DepKind::kRaw:
      return "RAW";
    case DepKind::kWaw:
      return "WAW";
    case DepKind::kWar:
      return "WAR";
    case DepKind::kOrder:
      return "ORDER";
  }
  return "UNKNOWN";
}

}  // namespace hp::runtime
