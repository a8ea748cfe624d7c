// The MoE objects of a process as its bindings share them: a buffer or a layer with the state
// its next call continues from, held by shared pointer and named by a process-wide handle. The
// Python module registers the objects it makes; the torch ops (another library of the same
// process) take the handle and use the same object, so a layer made in Python runs as
// torch.ops.hyper_parallel.mega_moe with no second copy of its weights or of its code path.
//
// destroy() is collective and explicit (it frees symmetric memory): it empties the session
// (buffer / layer null) and drops its handle; a holder that still has the session then gets
// FAILED_PRECONDITION, never a dangling object.
#ifndef HYPER_PARALLEL_MOE_SESSIONS_H_
#define HYPER_PARALLEL_MOE_SESSIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/api.h"
#include "common/status.h"
#include "moe/buffer.h"
#include "moe/moe_layer.h"
#include "platform/chip.h"

namespace hp::moe {

struct BufferSession {
  std::unique_ptr<Buffer> buffer;
  Handle handle;                 // of the last notify / dispatch
  LowLatencyResult low_latency;  // of the last low-latency dispatch

  Status get(Buffer** out) {
    HP_ENSURE(buffer != nullptr, ErrorCode::kFailedPrecondition, "the buffer was destroyed");
    *out = buffer.get();
    return Status::ok();
  }
};

struct LayerSession {
  std::unique_ptr<hp::platform::Chip> chip;  // the layer's cores, if any (outlives the layer)
  std::unique_ptr<MoeLayer> layer;

  Status get(MoeLayer** out) {
    HP_ENSURE(layer != nullptr, ErrorCode::kFailedPrecondition, "the layer was destroyed");
    *out = layer.get();
    return Status::ok();
  }
};

// Handles (1, 2, ...; never reused in a process) of live sessions.
template <typename T>
class SessionTable {
 public:
  std::uint64_t add(std::shared_ptr<T> session) {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions_[++last_] = std::move(session);
    return last_;
  }
  Status find(std::uint64_t handle, std::shared_ptr<T>* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = sessions_.find(handle);
    HP_ENSURE(
        it != sessions_.end(), ErrorCode::kNotFound,
        "no live MoE object has handle {} in this process (destroyed, or made by another process)",
        handle);
    *out = it->second;
    return Status::ok();
  }
  void remove(std::uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions_.erase(handle);
  }

 private:
  mutable std::mutex mutex_;
  std::uint64_t last_ = 0;
  std::map<std::uint64_t, std::shared_ptr<T>> sessions_;
};

HP_API SessionTable<BufferSession>& buffer_sessions();
HP_API SessionTable<LayerSession>& layer_sessions();

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_SESSIONS_H_
