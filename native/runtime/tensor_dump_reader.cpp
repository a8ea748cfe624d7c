#include "runtime/tensor_dump_reader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/json_file.h"
#include "runtime/diagnostics_config.h"

namespace hp::runtime {

std::string_view to_string(DumpPhase phase) noexcept {
  return phase == DumpPhase::kBefore ? "before" : "after";
}

std::string_view to_string(DumpArgKind kind) noexcept {
  return kind == DumpArgKind::kTensor ? "tensor" : "scalar";
}

namespace {

// Parses one entry; throws Json exceptions on missing or mistyped fields.
TensorDumpEntry parse_entry(const Json& j) {
  TensorDumpEntry e;
  e.task = std::stoull(j.at("task").get<std::string>());
  e.callable = j.at("callable").get<std::string>();
  const std::string kind = j.at("kind").get<std::string>();
  if (kind != "tensor" && kind != "scalar") {
    throw std::invalid_argument(fmt::format("kind '{}' is not tensor or scalar", kind));
  }
  e.kind = kind == "tensor" ? DumpArgKind::kTensor : DumpArgKind::kScalar;
  e.arg = json_integer<int>(j.at("arg"));
  if (!j.at("tag").is_null()) e.tag = j.at("tag").get<std::string>();
  const std::string dtype = j.at("dtype").get<std::string>();
  if (dtype != "bits64") {
    DType d;
    const Status s = parse_dtype(dtype, &d);
    if (!s.is_ok()) throw std::invalid_argument(s.message());
    e.dtype = d;
  }
  e.shape = json_integers<std::int64_t>(j.at("shape"));
  e.strides = json_integers<std::int64_t>(j.at("strides"));
  auto range = [&](const char* name) -> std::optional<DumpRange> {
    const Json& r = j.at(name);
    if (r.is_null()) return std::nullopt;
    return DumpRange{json_integer<std::uint64_t>(r.at("offset")),
                     json_integer<std::uint64_t>(r.at("bytes"))};
  };
  e.before = range("before");
  e.after = range("after");
  if (!j.at("status").is_null()) e.status = j.at("status").get<std::string>();
  return e;
}

}  // namespace

Status TensorDump::open(const std::string& prefix, TensorDump* out) {
  const std::string json_path = (std::filesystem::path(prefix) / kTensorDumpJsonFile).string();
  Json doc;
  HP_RETURN_IF_ERROR(read_json_file(json_path, &doc));
  TensorDump dump;
  try {
    dump.level_ = json_integer<int>(doc.at("level"));
    dump.bin_path_ =
        (std::filesystem::path(prefix) / doc.at("bin_file").get<std::string>()).string();
    const Json& entries = doc.at("entries");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      try {
        dump.entries_.push_back(parse_entry(entries.at(i)));
      } catch (const std::exception& e) {
        return Status::error(ErrorCode::kCorruptData, "'{}': entry {} is malformed: {}", json_path,
                             i, e.what());
      }
    }
  } catch (const std::exception& e) {
    return Status::error(ErrorCode::kCorruptData, "'{}' is not an argument dump: {}", json_path,
                         e.what());
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(dump.bin_path_, ec);
  if (ec) {
    return Status::error(
        ec == std::errc::no_such_file_or_directory ? ErrorCode::kNotFound : ErrorCode::kIoError,
        "cannot read the dump's values '{}': {}", dump.bin_path_, ec.message());
  }
  dump.bin_size_ = size;
  for (const TensorDumpEntry& e : dump.entries_) {
    for (const auto& r : {e.before, e.after}) {
      if (!r) continue;
      const std::uint64_t expected = static_cast<std::uint64_t>(e.numel()) * e.element_size();
      HP_ENSURE(r->offset + r->bytes <= dump.bin_size_ && r->bytes == expected,
                ErrorCode::kCorruptData,
                "'{}': task {} {} arg {} claims {} bytes at offset {} ({} expected) of a {}-byte "
                "'{}': the files do not belong together or the run was cut short",
                json_path, e.task, to_string(e.kind), e.arg, r->bytes, r->offset, expected,
                dump.bin_size_, dump.bin_path_);
    }
  }
  *out = std::move(dump);
  return Status::ok();
}

Status TensorDump::find(TaskId task, DumpArgKind kind, int arg, const TensorDumpEntry** out) const {
  std::string present;
  for (const TensorDumpEntry& e : entries_) {
    if (e.task != task) continue;
    if (e.kind == kind && e.arg == arg) {
      *out = &e;
      return Status::ok();
    }
    present += fmt::format("{}{} {}", present.empty() ? "" : ", ", to_string(e.kind), e.arg);
  }
  if (present.empty()) {
    return Status::error(ErrorCode::kNotFound,
                         "task {} has no arguments in the dump (level {}: {}); list what is "
                         "there with hp-dump <prefix> --list",
                         task, level_,
                         level_ == 1 ? "only arguments marked with TaskArgs::dump() are captured"
                                     : "every argument of every task that ran is captured");
  }
  return Status::error(ErrorCode::kNotFound,
                       "task {} has no {} argument {} in the dump; it has: {}", task,
                       to_string(kind), arg, present);
}

Status TensorDump::read(const TensorDumpEntry& entry, DumpPhase phase,
                        std::vector<std::byte>* out) const {
  const std::optional<DumpRange>& r = phase == DumpPhase::kBefore ? entry.before : entry.after;
  HP_ENSURE(r.has_value(), ErrorCode::kNotFound,
            "task {} {} arg {} has no '{}' value (the task never completed)", entry.task,
            to_string(entry.kind), entry.arg, to_string(phase));
  std::ifstream in(bin_path_, std::ios::binary);
  HP_ENSURE(in.good(), ErrorCode::kIoError, "cannot open '{}': {}", bin_path_,
            std::strerror(errno));
  out->resize(static_cast<std::size_t>(r->bytes));
  in.seekg(static_cast<std::streamoff>(r->offset));
  in.read(reinterpret_cast<char*>(out->data()), static_cast<std::streamsize>(r->bytes));
  HP_ENSURE(in.good() || (r->bytes == 0), ErrorCode::kIoError, "cannot read {} bytes at {} of '{}'",
            r->bytes, r->offset, bin_path_);
  return Status::ok();
}

}  // namespace hp::runtime
