// Text renderings of an argument dump (tensor_dump_reader.h), as hp-dump prints them.
//
//   header:  task 2 (callable 'copy') tensor arg 1 OUTPUT_EXISTING after: int32[2, 4] status OK
//   values:  one line per row of the last dimension, prefixed with its index:
//              [0, :] 1 2 3 4
//              [1, :] 5 6 7 8
//            a 1-D tensor is one "[:]" row, a scalar or 0-D tensor one "= value" line.
//            Integers print in decimal, floating types (bf16 and fp16 widened to float) in
//            their shortest round-trip form, "bits64" scalars in hex. At most max_elements
//            values print, then "... (<n> more elements)".
//   listing: one line per entry: task, callable, kind, arg, tag, dtype and shape, and which of
//            before / after were captured.
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_PRINTER_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_PRINTER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/api.h"
#include "runtime/tensor_dump_reader.h"

namespace hp::runtime {

struct DumpPrintOptions {
  std::int64_t max_elements = 4096;
};

HP_API std::string format_dump_header(const TensorDumpEntry& entry, DumpPhase phase);
HP_API std::string format_dump_values(const TensorDumpEntry& entry,
                                      std::span<const std::byte> bytes,
                                      const DumpPrintOptions& options = {});
HP_API std::string format_dump_listing(const TensorDump& dump);

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_DUMP_PRINTER_H_
