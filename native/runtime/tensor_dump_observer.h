// TensorDumpObserver: the argument dump (DiagnosticsConfig::dump_args), internal to the runtime.
//
// Which arguments: level 1, the tensor arguments marked with TaskArgs::dump() (all of the
// task's tensors) or TaskArgs::dump({i, ...}) (those tensors); level 2, every tensor and every
// scalar argument of every task. Captured in on_task_ready ("before": every predecessor done,
// no block started) and on_task_complete ("after": every block done, no successor started):
// see observer.h. Capturing copies in those hooks (one at a time, under mu_), on the thread
// that makes the task ready or completes it, so a dumping run is slower; level 1 keeps it to
// what you marked. Tasks skipped because a predecessor failed are not captured (they never
// become ready).
//
// tensor_dump.bin: the captured values back to back, each a tensor's elements packed in
// row-major order of its shape (whatever the view's strides), little-endian as in memory; a
// scalar as its value's bytes (dtype size; 8 for "bits64").
//
// tensor_dump.json:
//   { "schema_version": 1, "runtime_level": 2 | 3, "level": 1 | 2, "bin_file": "tensor_dump.bin",
//     "entries": [ {
//       "task": "<id>", "callable": "<name>",
//       "kind": "tensor" | "scalar",
//       "arg": <index among the task's tensors, or among its scalars>,
//       "tag": "INPUT" | "OUTPUT" | "INOUT" | "OUTPUT_EXISTING" | "NO_DEP" | null (scalars),
//       "dtype": "int8" | "uint8" | "int32" | "int64" | "bf16" | "fp16" | "fp32" | "fp64"
//                | "bits64" (a scalar of another type: its 64-bit pattern),
//       "shape": [...], "strides": [...]   (elements, as in the view; [] for scalars),
//       "address": "0x..." (the tensor's data pointer; null for scalars),
//       "before": { "offset": <byte offset in the .bin>, "bytes": <length> },
//       "after":  { "offset": ..., "bytes": ... } | null (the task never completed),
//       "status": "OK" | the task's error code name ("KERNEL_FAILED", "ABORTED", ...)
//                 | null (the task never completed) } ] }
// Entries are in capture order (tasks in the order they became ready, arguments in index
// order, tensors before scalars).
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_OBSERVER_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/diagnostic_output.h"
#include "runtime/diagnostics.h"

namespace hp::runtime {

class TensorDumpObserver final : public DiagnosticObserver {
 public:
  // Creates tensor_dump.bin and tensor_dump.json under `prefix` (IO_ERROR when it cannot).
  static Status create(const std::string& prefix, int level,
                       std::unique_ptr<TensorDumpObserver>* out);

  void on_task_ready(const TaskInfo& task) override;
  void on_task_complete(const TaskInfo& task, const Status& status) override;
  Status finish() override;

 private:
  struct Range {
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  struct Entry {
    TaskId task = kNoTask;
    std::string callable;
    bool scalar = false;
    int arg = 0;
    ArgTag tag = ArgTag::kInput;
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    std::uintptr_t address = 0;
    Range before;
    std::optional<Range> after;
    std::string status;
  };

  TensorDumpObserver(std::string prefix, int level) : prefix_(std::move(prefix)), level_(level) {}
  // Appends argument `entry`'s current value to the .bin (under mu_).
  Range capture(const TaskArgs& args, const Entry& entry);

  const std::string prefix_;
  const int level_;
  std::mutex mu_;
  OutputFile bin_;
  std::vector<Entry> entries_;
  std::unordered_map<TaskId, std::vector<std::size_t>> awaiting_after_;  // task -> entries
  std::vector<std::byte> scratch_;                                       // a strided tensor, packed
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_OBSERVER_H_
