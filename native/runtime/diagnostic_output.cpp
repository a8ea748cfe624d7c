#include "runtime/diagnostic_output.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace hp::runtime {

Status prepare_output_prefix(const std::string& prefix) {
  std::error_code ec;
  std::filesystem::create_directories(prefix, ec);
  if (ec) {
    return Status::error(ErrorCode::kIoError,
                         "cannot create the diagnostics output directory '{}': {}; set "
                         "OrchestratorConfig.diagnostics.output_prefix to a writable directory",
                         prefix, ec.message());
  }
  HP_ENSURE(std::filesystem::is_directory(prefix, ec), ErrorCode::kIoError,
            "the diagnostics output prefix '{}' is not a directory; set "
            "OrchestratorConfig.diagnostics.output_prefix to a writable directory",
            prefix);
  return Status::ok();
}

std::string output_path(const std::string& prefix, std::string_view file) {
  return (std::filesystem::path(prefix) / file).string();
}

Status probe_output_file(const std::string& path) {
  OutputFile file;
  HP_RETURN_IF_ERROR(file.open(path));
  return file.close();
}

std::string id_string(std::uint64_t id) { return fmt::format("{}", id); }

std::string address_string(std::uintptr_t address) { return fmt::format("{:#x}", address); }

std::string site_string(const ScopeSite& site) {
  if (site.line == 0 && std::string_view(site.file).empty()) return "<root>";
  return fmt::format("{}:{}", site.file, site.line);
}

OutputFile::~OutputFile() noexcept {
  if (file_ != nullptr) std::fclose(file_);
}

Status OutputFile::open(const std::string& path) {
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  HP_ENSURE(file_ != nullptr, ErrorCode::kIoError,
            "cannot create the diagnostics file '{}': {}; set "
            "OrchestratorConfig.diagnostics.output_prefix to a writable directory",
            path, std::strerror(errno));
  return Status::ok();
}

void OutputFile::write(std::span<const std::byte> bytes) {
  if (file_ == nullptr || !error_.is_ok() || bytes.empty()) return;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    error_ = Status::error(ErrorCode::kIoError, "cannot write the diagnostics file '{}': {}", path_,
                           std::strerror(errno));
    return;
  }
  size_ += bytes.size();
}

void OutputFile::write(std::string_view text) {
  write(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

Status OutputFile::close() {
  if (file_ != nullptr) {
    const int flushed = std::fflush(file_);
    const int err = errno;
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (error_.is_ok() && (flushed != 0 || closed != 0)) {
      error_ = Status::error(ErrorCode::kIoError, "cannot write the diagnostics file '{}': {}",
                             path_, std::strerror(err));
    }
  }
  return error_;
}

}  // namespace hp::runtime
