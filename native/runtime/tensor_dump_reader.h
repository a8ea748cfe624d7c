// TensorDump: reads an argument dump (tensor_dump.json + tensor_dump.bin, written by a run with
// OrchestratorConfig.diagnostics.dump_args; the format is in tensor_dump_observer.h and
// docs/runtime.md), for the hp-dump viewer and for users' own tools.
//
// Errors: a missing file is NOT_FOUND, an unreadable one IO_ERROR, a JSON file that does not
// parse or lacks a field, or an entry pointing outside the .bin, CORRUPT_DATA.
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_READER_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "runtime/task_types.h"

namespace hp::runtime {

enum class DumpPhase : std::uint8_t { kBefore, kAfter };
enum class DumpArgKind : std::uint8_t { kTensor, kScalar };

HP_API std::string_view to_string(DumpPhase phase) noexcept;   // "before" | "after"
HP_API std::string_view to_string(DumpArgKind kind) noexcept;  // "tensor" | "scalar"

struct DumpRange {
  std::uint64_t offset = 0;  // into tensor_dump.bin
  std::uint64_t bytes = 0;
};

struct TensorDumpEntry {
  TaskId task = kNoTask;
  std::string callable;
  DumpArgKind kind = DumpArgKind::kTensor;
  int arg = 0;                      // among the task's tensors, or among its scalars
  std::string tag;                  // "INPUT", ...; empty for scalars
  std::optional<DType> dtype;       // empty: "bits64" (an opaque 64-bit scalar)
  std::vector<std::int64_t> shape;  // [] for scalars
  std::vector<std::int64_t> strides;
  std::optional<DumpRange> before;
  std::optional<DumpRange> after;  // empty when the task never completed
  std::string status;              // "OK", an error code name, or empty

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  std::size_t element_size() const noexcept { return dtype ? dtype_size(*dtype) : 8; }
};

class HP_API TensorDump {
 public:
  // Reads `prefix`/tensor_dump.json and checks every entry against `prefix`/tensor_dump.bin.
  static Status open(const std::string& prefix, TensorDump* out);

  int level() const noexcept { return level_; }
  const std::vector<TensorDumpEntry>& entries() const noexcept { return entries_; }
  // NOT_FOUND (saying which arguments the task has in the dump) when there is no such entry.
  Status find(TaskId task, DumpArgKind kind, int arg, const TensorDumpEntry** out) const;
  // The captured bytes (tensor elements packed row-major). NOT_FOUND when the entry has no
  // capture for that phase.
  Status read(const TensorDumpEntry& entry, DumpPhase phase, std::vector<std::byte>* out) const;

 private:
  int level_ = 0;
  std::string bin_path_;
  std::uint64_t bin_size_ = 0;
  std::vector<TensorDumpEntry> entries_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_READER_H_
