// The frames of the node runtime's mailboxes (mailbox.h) and their encoding (internal).
//
// Parent -> chip:
//   kRegister      digest, kind, name, namespace; a library symbol adds its path and symbol:
//                  the chip loads it (RTLD_NOW) and checks that it hashes to the digest. A
//                  function callable is found by digest among those the chip inherited.
//   kUnregister    digest: drops one reference on the chip.
//   kTask          key, node-level task id, digest, CallConfig, the TaskArgs (tensors by address:
//                  they are in the node's shared memory, at the same address in every process).
//   kBeginSession  DiagnosticsConfig and ring sizes: the chip's next orchestration session.
//   kEndSession    ends the current session (its diagnostics are written); a kSessionEnded
//                  answers it.
// Chip -> parent:
//   kDone          key, error code, message: the task completed (or failed, or was refused).
//   kSessionEnded  error code, message, whether the parent asked for it (a session that failed
//                  ends by itself, and the chip begins a plain one).
//
// Encoding: little-endian fixed-width integers, strings and byte strings as u32 length + bytes.
// A frame that does not parse is CORRUPT_DATA naming the frame.
#ifndef HYPER_PARALLEL_RUNTIME_NODE_FRAMES_H_
#define HYPER_PARALLEL_RUNTIME_NODE_FRAMES_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "runtime/diagnostics_config.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime::node {

enum FrameType : std::uint32_t {
  kRegister = 1,
  kUnregister = 2,
  kTask = 3,
  kBeginSession = 4,
  kEndSession = 5,
  kDone = 16,
  kSessionEnded = 17,
};

class FrameWriter {
 public:
  template <typename T>
  FrameWriter& put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  FrameWriter& str(std::string_view s);
  FrameWriter& blob(std::span<const std::byte> b);
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  void clear() noexcept { bytes_.clear(); }

 private:
  std::vector<std::byte> bytes_;
};

class FrameReader {
 public:
  FrameReader(std::span<const std::byte> bytes, std::string_view what)
      : bytes_(bytes), what_(what) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value{};
    if (!take(sizeof(T))) return value;
    std::memcpy(&value, bytes_.data() + pos_ - sizeof(T), sizeof(T));
    return value;
  }
  std::string str();
  std::vector<std::byte> blob();
  // CORRUPT_DATA when a read ran past the end, or bytes are left over.
  Status finish() const;
  bool ok() const noexcept { return ok_; }

 private:
  bool take(std::size_t n);
  std::span<const std::byte> bytes_;
  std::string_view what_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// A task frame's contents.
struct TaskFrame {
  std::uint64_t key = 0;
  TaskId l3_task = kNoTask;  // the node-level task it is (diagnostics)
  Sha256Digest digest{};
  CallConfig config;
  TaskArgs args;
};
// Encodes task.args' tensors (with their dump markers) and its first `num_scalars` scalars
// (explicit dependencies are the parent's: a chip never sees them).
void encode_task(const TaskFrame& task, int num_scalars, FrameWriter* out);
Status decode_task(std::span<const std::byte> bytes, TaskFrame* out);

struct SessionFrame {
  DiagnosticsConfig diagnostics;
  int task_ring_slots = 1024;
  std::uint64_t heap_ring_bytes = 16u << 20;
};
void encode_session(const SessionFrame& session, FrameWriter* out);
Status decode_session(std::span<const std::byte> bytes, SessionFrame* out);

// kDone / kSessionEnded: a status (and, for kDone, the task's key).
void encode_status(std::uint64_t key, const Status& status, FrameWriter* out);
Status decode_status(std::span<const std::byte> bytes, std::uint64_t* key, Status* status);

}  // namespace hp::runtime::node

#endif  // HYPER_PARALLEL_RUNTIME_NODE_FRAMES_H_
