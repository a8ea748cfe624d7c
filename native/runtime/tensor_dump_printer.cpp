#include "runtime/tensor_dump_printer.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/bfloat16.h"

namespace hp::runtime {
namespace {

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string element_string(const TensorDumpEntry& entry, const std::byte* p) {
  if (!entry.dtype) return fmt::format("{:#018x}", load<std::uint64_t>(p));
  switch (*entry.dtype) {
    case DType::kInt8:
      return fmt::format("{}", load<std::int8_t>(p));
    case DType::kUInt8:
      return fmt::format("{}", load<std::uint8_t>(p));
    case DType::kInt32:
      return fmt::format("{}", load<std::int32_t>(p));
    case DType::kInt64:
      return fmt::format("{}", load<std::int64_t>(p));
    case DType::kBF16:
      return fmt::format("{}", bf16_to_float(load<std::uint16_t>(p)));
    case DType::kFP16:
      return fmt::format("{}", static_cast<float>(std::bit_cast<_Float16>(load<std::uint16_t>(p))));
    case DType::kFP32:
      return fmt::format("{}", load<float>(p));
    case DType::kFP64:
      return fmt::format("{}", load<double>(p));
    case DType::kCount:
      break;
  }
  return "?";
}

std::string dtype_and_shape(const TensorDumpEntry& entry) {
  const std::string_view dtype = entry.dtype ? to_string(*entry.dtype) : "bits64";
  if (entry.kind == DumpArgKind::kScalar) return std::string(dtype);
  return fmt::format("{}[{}]", dtype, fmt::join(entry.shape, ", "));
}

}  // namespace

std::string format_dump_header(const TensorDumpEntry& entry, DumpPhase phase) {
  return fmt::format("task {} (callable '{}') {} arg {}{}{} {}: {}{}", entry.task, entry.callable,
                     to_string(entry.kind), entry.arg, entry.tag.empty() ? "" : " ", entry.tag,
                     to_string(phase), dtype_and_shape(entry),
                     entry.status.empty() ? "" : " status " + entry.status);
}

std::string format_dump_values(const TensorDumpEntry& entry, std::span<const std::byte> bytes,
                               const DumpPrintOptions& options) {
  const std::size_t esize = entry.element_size();
  const std::int64_t numel =
      std::min<std::int64_t>(entry.numel(), static_cast<std::int64_t>(bytes.size() / esize));
  std::string out;
  if (entry.shape.empty()) {
    if (numel >= 1) out = "= " + element_string(entry, bytes.data()) + "\n";
    return out;
  }
  const std::int64_t cols = entry.shape.back();
  const std::int64_t shown = std::min(numel, options.max_elements);
  std::vector<std::int64_t> index(entry.shape.size() - 1, 0);
  for (std::int64_t row_start = 0; row_start < shown && cols > 0; row_start += cols) {
    // The row's index: row_start / cols, in the leading dims, row-major.
    std::int64_t rest = row_start / cols;
    for (std::size_t d = index.size(); d-- > 0;) {
      index[d] = rest % entry.shape[d];
      rest /= entry.shape[d];
    }
    out += index.empty() ? "[:]" : fmt::format("[{}, :]", fmt::join(index, ", "));
    for (std::int64_t c = 0; c < cols && row_start + c < shown; ++c) {
      out += ' ';
      out += element_string(entry, bytes.data() + static_cast<std::size_t>(row_start + c) * esize);
    }
    out += '\n';
  }
  if (shown < numel) out += fmt::format("... ({} more elements)\n", numel - shown);
  return out;
}

std::string format_dump_listing(const TensorDump& dump) {
  std::string out;
  for (const TensorDumpEntry& e : dump.entries()) {
    out += fmt::format("task {} {} {} {}{}{} {}{}{}\n", e.task, e.callable, to_string(e.kind),
                       e.arg, e.tag.empty() ? "" : " ", e.tag, dtype_and_shape(e),
                       e.before ? " before" : "", e.after ? " after" : "");
  }
  return out;
}

}  // namespace hp::runtime
