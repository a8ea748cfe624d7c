// The output side shared by the diagnostics (internal to the runtime): the files under the
// output prefix, and how ids and addresses are spelled in them.
//
// Spelling: task, scope and tensor ids are decimal strings ("42": JSON numbers lose 64-bit
// precision in many readers); addresses are "0x"-prefixed lower-case hex strings.
#ifndef HYPER_PARALLEL_RUNTIME_DIAGNOSTIC_OUTPUT_H_
#define HYPER_PARALLEL_RUNTIME_DIAGNOSTIC_OUTPUT_H_

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/observer.h"

namespace hp::runtime {

// Creates the prefix directory (and its parents) when missing; IO_ERROR naming the prefix and
// what to set when it cannot be created or is not a directory.
Status prepare_output_prefix(const std::string& prefix);
std::string output_path(const std::string& prefix, std::string_view file);
// Creates (truncates) `path` empty, for a file written whole at the end of the run: proves it
// writable before the run starts. IO_ERROR when it cannot.
Status probe_output_file(const std::string& path);

std::string id_string(std::uint64_t id);
std::string address_string(std::uintptr_t address);
// "<file>:<line>" of a scope() call; "<root>" for the root scope's empty location.
std::string site_string(const ScopeSite& site);

// A file written sequentially with stdio buffering. write() remembers the first failure, which
// close() reports (IO_ERROR naming the file); writes after a failure are dropped.
class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile() noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Creates (truncates) the file: IO_ERROR when it cannot.
  Status open(const std::string& path);
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text);
  std::uint64_t size() const noexcept { return size_; }  // bytes written so far
  Status close();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t size_ = 0;
  Status error_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_DIAGNOSTIC_OUTPUT_H_
