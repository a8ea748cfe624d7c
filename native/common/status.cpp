#include "common/status.h"

#include <array>

namespace hp {
namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(ErrorCode::kCount)> kNames = {
    "OK",           "INVALID_ARGUMENT", "OUT_OF_RANGE",    "SHAPE_MISMATCH",      "DTYPE_MISMATCH",
    "UNSUPPORTED",  "TIMEOUT",          "ABORTED",         "OUT_OF_MEMORY",       "IO_ERROR",
    "CORRUPT_DATA", "INVALID_SETTING",  "INTERNAL",        "KERNEL_FAILED",       "SYSTEM_ERROR",
    "NOT_FOUND",    "ALREADY_EXISTS",   "ISA_UNSUPPORTED", "FAILED_PRECONDITION", "PEER_DEAD",
    "MISALIGNED",   "NOT_SYMMETRIC",    "DOUBLE_FREE",     "PERMISSION_DENIED",
};

const std::string& empty_message() {
  static const std::string empty;
  return empty;
}

}  // namespace

std::string_view to_string(ErrorCode code) noexcept {
  const auto index = static_cast<std::size_t>(code);
  return index < kNames.size() ? kNames[index] : std::string_view("UNKNOWN");
}

Status::Status(ErrorCode code, std::string message)
    : code_(code),
      message_(code == ErrorCode::kOk ? nullptr
                                      : std::make_shared<const std::string>(std::move(message))) {}

const std::string& Status::message() const noexcept {
  return message_ ? *message_ : empty_message();
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return fmt::format("{} ({}): {}", hp::to_string(code_), static_cast<std::uint32_t>(code_),
                     message());
}

Status& Status::with_context(std::string_view context) {
  if (!is_ok()) {
    message_ = std::make_shared<const std::string>(fmt::format("{}: {}", context, message()));
  }
  return *this;
}

}  // namespace hp
