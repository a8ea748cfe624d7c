// Tests of native logging (native/common/logging.h): level filtering and the stderr line.
#include "common/logging.h"

#include <unistd.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "printers.h"

// Formats as "counted" and counts how often it was formatted.
struct CountsFormats {
  int* formats;
};

template <>
struct fmt::formatter<CountsFormats> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename FormatContext>
  auto format(const CountsFormats& value, FormatContext& ctx) const {
    ++*value.formats;
    return fmt::format_to(ctx.out(), "counted");
  }
};

namespace hp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Each test sets the level it needs; the fixture puts back the default (warn) afterwards so
// that the order of the tests does not matter.
class Logging : public ::testing::Test {
 protected:
  void TearDown() override { set_log_level(LogLevel::kWarn); }
};

TEST_F(Logging, WarnFiltersDebugAndInfo) {
  set_log_level(LogLevel::kWarn);
  EXPECT_FALSE(log_enabled(LogLevel::kTrace));
  EXPECT_FALSE(log_enabled(LogLevel::kDebug));
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kWarn));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
}

TEST_F(Logging, DebugEnablesDebugAndAbove) {
  set_log_level(LogLevel::kDebug);
  EXPECT_FALSE(log_enabled(LogLevel::kTrace));
  EXPECT_TRUE(log_enabled(LogLevel::kDebug));
  EXPECT_TRUE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kWarn));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
}

TEST_F(Logging, TraceEnablesEverything) {
  set_log_level(LogLevel::kTrace);
  EXPECT_TRUE(log_enabled(LogLevel::kTrace));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
}

TEST_F(Logging, OffDisablesEverything) {
  set_log_level(LogLevel::kOff);
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
                         LogLevel::kError, LogLevel::kOff}) {
    EXPECT_FALSE(log_enabled(level)) << static_cast<int>(level);
  }
}

TEST_F(Logging, OffIsNeverALevelToLogAt) {
  set_log_level(LogLevel::kTrace);
  EXPECT_FALSE(log_enabled(LogLevel::kOff));
}

TEST_F(Logging, EnabledMessageReachesStderr) {
  set_log_level(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  HP_LOG_WARN("disk {} is {}% full", "sda", 93);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("[hp]"));
  EXPECT_THAT(err, HasSubstr("disk sda is 93% full"));
  EXPECT_THAT(err, HasSubstr("[warning]"));
  EXPECT_THAT(err, HasSubstr("[pid " + std::to_string(::getpid()) + "]"));
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), '\n');
}

TEST_F(Logging, EachMacroLogsAtItsLevel) {
  set_log_level(LogLevel::kDebug);
  ::testing::internal::CaptureStderr();
  HP_LOG_DEBUG("m-debug");
  HP_LOG_INFO("m-info");
  HP_LOG_ERROR("m-error {}", 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("[debug] [pid"));
  EXPECT_THAT(err, HasSubstr("m-debug"));
  EXPECT_THAT(err, HasSubstr("[info] [pid"));
  EXPECT_THAT(err, HasSubstr("m-info"));
  EXPECT_THAT(err, HasSubstr("[error] [pid"));
  EXPECT_THAT(err, HasSubstr("m-error 1"));
}

TEST_F(Logging, FilteredMessageDoesNotReachStderr) {
  set_log_level(LogLevel::kWarn);
  ::testing::internal::CaptureStderr();
  HP_LOG_INFO("quiet info {}", 1);
  HP_LOG_DEBUG("quiet debug");
  HP_LOG_ERROR("loud error");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, Not(HasSubstr("quiet")));
  EXPECT_THAT(err, HasSubstr("loud error"));  // the capture itself works
}

TEST_F(Logging, OffSilencesEvenErrors) {
  set_log_level(LogLevel::kOff);
  ::testing::internal::CaptureStderr();
  HP_LOG_ERROR("should not appear");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
}

TEST_F(Logging, FilteredMessageIsNotFormatted) {
  // The cost of a disabled log line is one level check: its arguments are not formatted.
  int formats = 0;
  set_log_level(LogLevel::kError);
  HP_LOG_DEBUG("value {}", CountsFormats{&formats});
  EXPECT_EQ(formats, 0);

  set_log_level(LogLevel::kDebug);
  ::testing::internal::CaptureStderr();
  HP_LOG_DEBUG("value {}", CountsFormats{&formats});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(formats, 1);
  EXPECT_THAT(err, HasSubstr("value counted"));
}

TEST_F(Logging, LogMessageDoesNotFilter) {
  // log_message() writes unconditionally; filtering is log_enabled()'s job.
  set_log_level(LogLevel::kError);
  ::testing::internal::CaptureStderr();
  log_message(LogLevel::kInfo, "direct message");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("direct message"));
}

TEST_F(Logging, BracesInTheMessageAreNotReformatted) {
  ::testing::internal::CaptureStderr();
  log_message(LogLevel::kWarn, "literal {} and {:x}");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("literal {} and {:x}"));
}

}  // namespace
}  // namespace hp
