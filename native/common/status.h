// hp::Status: the result of every fallible call below the Python boundary.
//
// Error codes are stable: a code's number and name never change and are never reused.
// New codes are appended before kCount. Python and the C API expose the numbers.
#ifndef HYPER_PARALLEL_COMMON_STATUS_H_
#define HYPER_PARALLEL_COMMON_STATUS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "common/api.h"

namespace hp {

enum class ErrorCode : std::uint32_t {
  kOk = 0,
  kInvalidArgument = 1,      // a parameter is wrong (the message names it and what was expected)
  kOutOfRange = 2,           // an index or id outside its valid range
  kShapeMismatch = 3,        // tensor shapes disagree
  kDTypeMismatch = 4,        // tensor dtypes disagree or are unsupported for the call
  kUnsupported = 5,          // a valid request this build or host cannot serve
  kTimeout = 6,              // a wait passed its deadline (the message names what it waited on)
  kAborted = 7,              // gave up because another participant failed first
  kOutOfMemory = 8,          // an allocation or a fixed-size heap/ring is exhausted
  kIoError = 9,              // reading or writing a file failed
  kCorruptData = 10,         // a file or buffer does not parse or fails validation
  kInvalidSetting = 11,      // an HP_* environment variable has an invalid value
  kInternal = 12,            // a broken invariant inside HyperParallel (a bug: please report)
  kKernelFailed = 13,        // a kernel block returned an error or threw
  kSystemError = 14,         // a system call failed (the message carries errno's text)
  kNotFound = 15,            // a named thing (file, symbol, slot, component) does not exist
  kAlreadyExists = 16,       // creating something that already exists
  kIsaUnsupported = 17,      // the CPU lacks an instruction set the request needs
  kFailedPrecondition = 18,  // called in the wrong state (e.g. before init)
  kPeerDead = 19,      // a peer (PE, rank, process) died or exited early; the message names it
  kMisaligned = 20,    // an address lacks the alignment the call requires
  kNotSymmetric = 21,  // an address is not inside the symmetric heap (or not from its allocator)
  kDoubleFree = 22,    // freeing symmetric memory that is already free
  kPermissionDenied = 23,  // the caller may not use it (another user's job, a file's mode)
  kCount                   // sentinel: number of codes, never a real code
};

// Stable upper-case name, e.g. "TIMEOUT". "UNKNOWN" for values outside the enum.
HP_API std::string_view to_string(ErrorCode code) noexcept;

class [[nodiscard]] HP_API Status {
 public:
  Status() noexcept = default;  // OK
  Status(ErrorCode code, std::string message);

  static Status ok() noexcept { return Status(); }

  template <typename... Args>
  static Status error(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
    return Status(code, fmt::format(format, std::forward<Args>(args)...));
  }

  bool is_ok() const noexcept { return code_ == ErrorCode::kOk; }
  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept;
  // "TIMEOUT (6): <message>", or "OK".
  std::string to_string() const;

  // Prefixes the message with context ("while X: <message>"); no-op on OK.
  Status& with_context(std::string_view context);

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::shared_ptr<const std::string> message_;  // null when OK: OK statuses never allocate
};

}  // namespace hp

// Returns the Status of the expression from the enclosing function when it is not OK
// (variadic: template arguments may contain commas).
#define HP_RETURN_IF_ERROR(...)                 \
  do {                                          \
    ::hp::Status hp_status_ = (__VA_ARGS__);    \
    if (!hp_status_.is_ok()) return hp_status_; \
  } while (0)

// Returns Status(code, formatted message) from the enclosing function when `cond` is false.
#define HP_ENSURE(cond, code, ...)                                \
  do {                                                            \
    if (!(cond)) return ::hp::Status::error((code), __VA_ARGS__); \
  } while (0)

#endif  // HYPER_PARALLEL_COMMON_STATUS_H_
