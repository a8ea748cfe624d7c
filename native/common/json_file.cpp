#include "common/json_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hp {

Status read_json_file(const std::string& path, Json* out) {
  std::error_code ec;
  HP_ENSURE(!std::filesystem::is_directory(path, ec), ErrorCode::kIoError,
            "'{}' is a directory, not a JSON file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    HP_ENSURE(err != ENOENT, ErrorCode::kNotFound, "JSON file '{}' does not exist", path);
    return Status::error(ErrorCode::kIoError, "cannot open JSON file '{}': {}", path,
                         std::strerror(err));
  }
  std::stringstream text;
  text << in.rdbuf();
  HP_ENSURE(!in.bad(), ErrorCode::kIoError, "cannot read JSON file '{}'", path);
  try {
    *out = Json::parse(text.str());
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a huge number
    return Status::error(ErrorCode::kCorruptData,
                         "'{}' is not valid JSON ({}); restore or delete the file", path, e.what());
  }
  return Status::ok();
}

Status write_json_file(const std::string& path, const Json& value, int indent) {
  std::string text;
  try {
    text = value.dump(indent);
  } catch (const Json::exception& e) {
    return Status::error(ErrorCode::kInvalidArgument, "cannot serialize JSON for '{}': {}", path,
                         e.what());
  }
  // Unique per process and per call: concurrent writers never share a temporary file.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    HP_ENSURE(out.good(), ErrorCode::kIoError, "cannot create '{}': {}", tmp, std::strerror(errno));
    out << text << '\n';
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      return Status::error(ErrorCode::kIoError, "cannot write '{}'", tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status::error(ErrorCode::kIoError, "cannot rename '{}' to '{}': {}", tmp, path,
                         std::strerror(err));
  }
  return Status::ok();
}

}  // namespace hp
