// Callable: what a task runs. Either a C++ function registered in-process or an entry point
// found by name in a shared library, plus the identity bytes that say what it computes.
//
// The handle is content-addressed: SHA-256 over, in order,
//   "hp.runtime.callable.v1" NUL, the kind name ("function" | "library_symbol") NUL,
//   u64 little-endian length of the namespace, the namespace,
//   u64 little-endian length of the identity bytes, the identity bytes.
// Two callables with the same handle are the same callable: registering the second one only
// adds a reference (the first one's function is kept), so identity bytes must determine the
// behaviour (e.g. the kernel's source text plus a version). For a library entry point the
// default identity is the library file's bytes followed by NUL and the symbol name.
#ifndef HYPER_PARALLEL_RUNTIME_CALLABLE_H_
#define HYPER_PARALLEL_RUNTIME_CALLABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/sha256.h"
#include "common/status.h"
#include "platform/chip.h"
#include "runtime/task_args.h"

namespace hp::runtime {

// A task's code: runs once per block of the task's launch.
using TaskFunction = std::function<Status(const TaskArgs& args, platform::BlockContext& block)>;

// The signature of a library entry point. Declare it extern "C" so that its symbol is its name:
//   extern "C" hp::Status my_kernel(const hp::runtime::TaskArgs&, hp::platform::BlockContext&);
using KernelEntry = Status (*)(const TaskArgs& args, platform::BlockContext& block);

enum class CallableKind : std::uint8_t { kFunction, kLibrarySymbol };

HP_API std::string_view to_string(CallableKind kind) noexcept;

struct CallableHandle {
  Sha256Digest digest{};
  std::string hashid() const { return to_hashid(digest); }  // "sha256:<hex>"
  bool operator==(const CallableHandle&) const = default;
};

class HP_API Callable {
 public:
  Callable() = default;

  static Callable from_function(std::string name, TaskFunction function,
                                std::span<const std::byte> identity, std::string name_space = {});
  static Callable from_function(std::string name, TaskFunction function, std::string_view identity,
                                std::string name_space = {});
  // Loads `library_path` (dlopen) and finds `symbol` in it. NOT_FOUND (with the loader's
  // message) when the library or the symbol is missing, IO_ERROR when the file cannot be
  // read for its identity. `identity` empty: the default identity (see above).
  static Status from_library(const std::string& library_path, const std::string& symbol,
                             Callable* out, std::string name_space = {},
                             std::span<const std::byte> identity = {});

  const std::string& name() const noexcept { return name_; }  // the function or symbol name
  // The library a kLibrarySymbol callable was loaded from, as given (empty for a function).
  const std::string& library_path() const noexcept { return library_path_; }
  CallableKind kind() const noexcept { return kind_; }
  const std::string& name_space() const noexcept { return name_space_; }
  std::span<const std::byte> identity() const noexcept { return identity_; }
  const CallableHandle& handle() const noexcept { return handle_; }
  const TaskFunction& function() const noexcept { return function_; }
  bool empty() const noexcept { return !function_; }

 private:
  void compute_handle();

  std::string name_;
  std::string library_path_;
  CallableKind kind_ = CallableKind::kFunction;
  std::string name_space_;
  std::vector<std::byte> identity_;
  CallableHandle handle_;
  TaskFunction function_;
  std::shared_ptr<void> library_;  // keeps the library loaded while any copy exists
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_CALLABLE_H_
