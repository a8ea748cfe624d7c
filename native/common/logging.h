// Native logging: formatted with fmt, written to stderr through spdlog (a private dependency),
// filtered by HP_LOG_LEVEL. Lines look like
//   [2026-11-29 10:00:00.123] [hp] [warning] [pid 4242] message
#ifndef HYPER_PARALLEL_COMMON_LOGGING_H_
#define HYPER_PARALLEL_COMMON_LOGGING_H_

#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "common/api.h"
#include "common/settings.h"

namespace hp {

HP_API bool log_enabled(LogLevel level);
HP_API void log_message(LogLevel level, std::string_view message) noexcept;
// Overrides HP_LOG_LEVEL for this process (tests, `hp` verbosity flags).
HP_API void set_log_level(LogLevel level) noexcept;

template <typename... Args>
void write_log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(level)) log_message(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace hp

#define HP_LOG_DEBUG(...) ::hp::write_log(::hp::LogLevel::kDebug, __VA_ARGS__)
#define HP_LOG_INFO(...) ::hp::write_log(::hp::LogLevel::kInfo, __VA_ARGS__)
#define HP_LOG_WARN(...) ::hp::write_log(::hp::LogLevel::kWarn, __VA_ARGS__)
#define HP_LOG_ERROR(...) ::hp::write_log(::hp::LogLevel::kError, __VA_ARGS__)

#endif  // HYPER_PARALLEL_COMMON_LOGGING_H_
