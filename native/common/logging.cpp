#include "common/logging.h"

#include <atomic>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace hp {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

std::atomic<int>& level_override() {
  static std::atomic<int> level{-1};  // -1: follow HP_LOG_LEVEL
  return level;
}

spdlog::logger& logger() {
  // A logger of our own, not registered globally: an embedding program's spdlog setup is left
  // alone, and ours is not visible to it.
  static spdlog::logger instance = [] {
    spdlog::logger l("hp", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l.set_pattern("[%Y-%m-%d %H:%M:%S.%e] [hp] [%l] [pid %P] %v");
    l.set_level(spdlog::level::trace);  // filtering happens in log_enabled()
    return l;
  }();
  return instance;
}

}  // namespace

bool log_enabled(LogLevel level) {
  int override_level = level_override().load(std::memory_order_relaxed);
  LogLevel threshold =
      override_level >= 0 ? static_cast<LogLevel>(override_level) : settings().log_level;
  return level != LogLevel::kOff && level >= threshold;
}

void log_message(LogLevel level, std::string_view message) noexcept {
  try {
    logger().log(to_spdlog(level), "{}", message);
  } catch (...) {
    // Logging must never take the process down; a failed log line is dropped.
  }
}

void set_log_level(LogLevel level) noexcept {
  level_override().store(static_cast<int>(level), std::memory_order_relaxed);
}

}  // namespace hp
