// Tests of the HP_* settings table and its parser (native/common/settings.h).
#include "common/settings.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/soc_targets.h"
#include "printers.h"

namespace hp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Splits "a|b|c" into its choices ("" is a choice when the text starts with '|').
std::vector<std::string> split_choices(std::string_view choices) {
  std::vector<std::string> out;
  while (true) {
    const auto bar = choices.find('|');
    out.emplace_back(choices.substr(0, bar));
    if (bar == std::string_view::npos) return out;
    choices.remove_prefix(bar + 1);
  }
}

// Settings::parse through a fake environment.
struct Parsed {
  Settings settings;
  Status status;
};

Parsed parse(const std::map<std::string, std::string>& env) {
  Parsed p;
  p.status = Settings::parse(
      [&](std::string_view name) -> std::optional<std::string> {
        auto it = env.find(std::string(name));
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      &p.settings);
  return p;
}

// ---- the table ----

TEST(SettingSpecs, NamesAreUniqueAndPrefixed) {
  std::set<std::string_view> names;
  ASSERT_FALSE(setting_specs().empty());
  for (const auto& spec : setting_specs()) {
    EXPECT_TRUE(spec.name.starts_with("HP_")) << spec.name;
    EXPECT_GT(spec.name.size(), 3u) << spec.name;
    for (char c : spec.name) {
      EXPECT_TRUE((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') << spec.name;
    }
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
  }
}

TEST(SettingSpecs, EveryEntryIsDescribed) {
  for (const auto& spec : setting_specs()) {
    EXPECT_FALSE(spec.description.empty()) << spec.name;
    EXPECT_NE(to_string(spec.type), "unknown") << spec.name;
    EXPECT_NE(to_string(spec.scope), "unknown") << spec.name;
  }
}

TEST(SettingSpecs, EnumsHaveChoicesIncludingTheirDefault) {
  for (const auto& spec : setting_specs()) {
    if (spec.type != SettingType::kEnum) {
      EXPECT_TRUE(spec.choices.empty()) << spec.name << ": choices on a non-enum";
      continue;
    }
    const auto choices = split_choices(spec.choices);
    EXPECT_GE(choices.size(), 2u) << spec.name;
    EXPECT_EQ(std::set<std::string>(choices.begin(), choices.end()).size(), choices.size())
        << spec.name << ": duplicate choice";
    EXPECT_THAT(choices, ::testing::Contains(std::string(spec.default_value))) << spec.name;
  }
}

TEST(SettingSpecs, FindSetting) {
  const SettingSpec* spec = find_setting("HP_WAIT_TIMEOUT_S");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->name, "HP_WAIT_TIMEOUT_S");
  EXPECT_EQ(spec->type, SettingType::kDouble);
  EXPECT_EQ(spec->scope, SettingScope::kRuntime);
  EXPECT_EQ(find_setting("HP_NO_SUCH_SETTING"), nullptr);
  EXPECT_EQ(find_setting("hp_wait_timeout_s"), nullptr);
  EXPECT_EQ(find_setting(""), nullptr);
}

TEST(SettingSpecs, TypeAndScopeNames) {
  EXPECT_EQ(to_string(SettingType::kBool), "bool");
  EXPECT_EQ(to_string(SettingType::kInt), "int");
  EXPECT_EQ(to_string(SettingType::kDouble), "double");
  EXPECT_EQ(to_string(SettingType::kString), "string");
  EXPECT_EQ(to_string(SettingType::kEnum), "enum");
  EXPECT_EQ(to_string(SettingType::kCpuList), "cpulist");
  EXPECT_EQ(to_string(SettingType::kPath), "path");
  EXPECT_EQ(to_string(SettingScope::kRuntime), "runtime");
  EXPECT_EQ(to_string(SettingScope::kPython), "python");
  EXPECT_EQ(to_string(SettingScope::kBuild), "build");
}

// ---- Settings::parse ----

TEST(SettingsParse, UnsetGivesDefaults) {
  const Parsed p = parse({});
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_EQ(p.settings.log_level, LogLevel::kWarn);
  EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, 60.0);
  EXPECT_EQ(p.settings.spin_before_block, 2000);
  EXPECT_THAT(p.settings.chip_cpus, IsEmpty());
  EXPECT_EQ(p.settings.pin_threads, PinMode::kAuto);
}

TEST(SettingsParse, TableDefaultsMatchStructDefaults) {
  // The defaults written in the table (what `hp config` shows) are the ones parse() applies.
  const Parsed p = parse({});
  const Settings defaults;
  EXPECT_EQ(p.settings.log_level, defaults.log_level);
  EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, defaults.wait_timeout_s);
  EXPECT_EQ(p.settings.spin_before_block, defaults.spin_before_block);
  EXPECT_EQ(p.settings.idle_poll_us, defaults.idle_poll_us);
  EXPECT_EQ(p.settings.chip_cpus, defaults.chip_cpus);
  EXPECT_EQ(p.settings.pin_threads, defaults.pin_threads);
  EXPECT_EQ(p.settings.kernel_target, defaults.kernel_target);
}

TEST(SettingsParse, ReadsExactlyTheRuntimeSettings) {
  std::set<std::string> asked;
  Settings out;
  const Status status = Settings::parse(
      [&](std::string_view name) -> std::optional<std::string> {
        asked.emplace(name);
        return std::nullopt;
      },
      &out);
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  std::set<std::string> runtime;
  for (const auto& spec : setting_specs()) {
    if (spec.scope == SettingScope::kRuntime) runtime.emplace(spec.name);
  }
  EXPECT_EQ(asked, runtime);
}

TEST(SettingsParse, OverwritesPreviousValuesOfOut) {
  Settings out;
  out.spin_before_block = 7;
  out.chip_cpus = {5};
  out.log_level = LogLevel::kOff;
  const Status status = Settings::parse(
      [](std::string_view) -> std::optional<std::string> { return std::nullopt; }, &out);
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(out.spin_before_block, 2000);
  EXPECT_THAT(out.chip_cpus, IsEmpty());
  EXPECT_EQ(out.log_level, LogLevel::kWarn);
}

TEST(SettingsParse, LogLevels) {
  const std::pair<const char*, LogLevel> cases[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"off", LogLevel::kOff},
  };
  for (const auto& [text, level] : cases) {
    const Parsed p = parse({{"HP_LOG_LEVEL", text}});
    EXPECT_TRUE(p.status.is_ok()) << text << ": " << p.status.to_string();
    EXPECT_EQ(p.settings.log_level, level) << text;
  }
}

TEST(SettingsParse, PinModes) {
  const std::pair<const char*, PinMode> cases[] = {
      {"auto", PinMode::kAuto}, {"on", PinMode::kOn}, {"off", PinMode::kOff}};
  for (const auto& [text, mode] : cases) {
    const Parsed p = parse({{"HP_PIN_THREADS", text}});
    EXPECT_TRUE(p.status.is_ok()) << text << ": " << p.status.to_string();
    EXPECT_EQ(p.settings.pin_threads, mode) << text;
  }
}

TEST(SettingsParse, KernelTargetsAreTheSocTargetTable) {
  // The choices are auto, reference and the SoC target table's names, narrowest first.
  std::string expected = "auto|reference";
  for (const SocTarget& t : soc_targets()) expected += "|" + std::string(t.name);
  EXPECT_EQ(find_setting("HP_KERNEL_TARGET")->choices, expected);
  for (const SocTarget& t : soc_targets()) {
    const Parsed p = parse({{"HP_KERNEL_TARGET", std::string(t.name)}});
    EXPECT_TRUE(p.status.is_ok()) << t.name << ": " << p.status.to_string();
    EXPECT_EQ(p.settings.kernel_target, t.name);
  }
  const Parsed bad = parse({{"HP_KERNEL_TARGET", "sm_90"}});  // reserved: no kernels to pick
  EXPECT_EQ(bad.status.code(), ErrorCode::kInvalidSetting) << bad.status.to_string();
  EXPECT_EQ(bad.settings.kernel_target, "auto");
}

TEST(SettingsParse, WaitTimeout) {
  const std::pair<const char*, double> cases[] = {
      {"0.5", 0.5}, {"120", 120.0}, {"1e3", 1000.0}, {" 5 ", 5.0}, {"0.001", 0.001}};
  for (const auto& [text, seconds] : cases) {
    const Parsed p = parse({{"HP_WAIT_TIMEOUT_S", text}});
    EXPECT_TRUE(p.status.is_ok()) << text << ": " << p.status.to_string();
    EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, seconds) << text;
  }
}

TEST(SettingsParse, SpinBeforeBlock) {
  const std::pair<const char*, std::int64_t> cases[] = {
      {"0", 0}, {"1", 1}, {"100000", 100000}, {"\t42 ", 42}};
  for (const auto& [text, spins] : cases) {
    const Parsed p = parse({{"HP_SPIN_BEFORE_BLOCK", text}});
    EXPECT_TRUE(p.status.is_ok()) << text << ": " << p.status.to_string();
    EXPECT_EQ(p.settings.spin_before_block, spins) << text;
  }
}

TEST(SettingsParse, IdlePoll) {
  EXPECT_EQ(parse({}).settings.idle_poll_us, 5);
  const std::pair<const char*, std::int64_t> cases[] = {{"0", 0}, {"3", 3}, {"1000000", 1000000}};
  for (const auto& [text, us] : cases) {
    const Parsed p = parse({{"HP_IDLE_POLL_US", text}});
    EXPECT_TRUE(p.status.is_ok()) << text << ": " << p.status.to_string();
    EXPECT_EQ(p.settings.idle_poll_us, us) << text;
  }
}

TEST(SettingsParse, ChipCpus) {
  const Parsed p = parse({{"HP_CHIP_CPUS", "0-3,8"}});
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_THAT(p.settings.chip_cpus, ElementsAre(0, 1, 2, 3, 8));
}

TEST(SettingsParse, MemNodes) {
  EXPECT_TRUE(parse({}).settings.mem_nodes.empty());
  const Parsed p = parse({{"HP_MEM_NODES", "2,0-1"}});
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_THAT(p.settings.mem_nodes, ElementsAre(2, 0, 1));
}

TEST(SettingsParse, AllAtOnce) {
  const Parsed p = parse({{"HP_LOG_LEVEL", "debug"},
                          {"HP_WAIT_TIMEOUT_S", "2.5"},
                          {"HP_SPIN_BEFORE_BLOCK", "10"},
                          {"HP_CHIP_CPUS", "4,6"},
                          {"HP_PIN_THREADS", "on"},
                          {"HP_UNRELATED", "ignored"}});
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_EQ(p.settings.log_level, LogLevel::kDebug);
  EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, 2.5);
  EXPECT_EQ(p.settings.spin_before_block, 10);
  EXPECT_THAT(p.settings.chip_cpus, ElementsAre(4, 6));
  EXPECT_EQ(p.settings.pin_threads, PinMode::kOn);
}

struct BadValue {
  const char* name;
  const char* value;
};

class SettingsParseInvalid : public ::testing::TestWithParam<BadValue> {};

TEST_P(SettingsParseInvalid, IsInvalidSettingNamingVariableAndValue) {
  const BadValue bad = GetParam();
  const Parsed p = parse({{bad.name, bad.value}});
  EXPECT_EQ(p.status.code(), ErrorCode::kInvalidSetting) << p.status.to_string();
  EXPECT_THAT(p.status.message(), HasSubstr(bad.name));
  EXPECT_THAT(p.status.message(), HasSubstr(std::string("'") + bad.value + "'"));
  // The bad entry keeps its default (and so do all the others here).
  const Settings defaults;
  EXPECT_EQ(p.settings.log_level, defaults.log_level);
  EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, defaults.wait_timeout_s);
  EXPECT_EQ(p.settings.spin_before_block, defaults.spin_before_block);
  EXPECT_EQ(p.settings.idle_poll_us, defaults.idle_poll_us);
  EXPECT_EQ(p.settings.chip_cpus, defaults.chip_cpus);
  EXPECT_EQ(p.settings.pin_threads, defaults.pin_threads);
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, SettingsParseInvalid,
    ::testing::Values(BadValue{"HP_WAIT_TIMEOUT_S", "abc"}, BadValue{"HP_WAIT_TIMEOUT_S", "0"},
                      BadValue{"HP_WAIT_TIMEOUT_S", "-1"}, BadValue{"HP_WAIT_TIMEOUT_S", "5s"},
                      BadValue{"HP_WAIT_TIMEOUT_S", "inf"}, BadValue{"HP_WAIT_TIMEOUT_S", "nan"},
                      BadValue{"HP_WAIT_TIMEOUT_S", "1e-300"},      // a 0 ns deadline
                      BadValue{"HP_SPIN_BEFORE_BLOCK", "2000000"},  // would outlast deadlines
                      BadValue{"HP_SPIN_BEFORE_BLOCK", "-5"},
                      BadValue{"HP_SPIN_BEFORE_BLOCK", "1.5"},
                      BadValue{"HP_SPIN_BEFORE_BLOCK", "many"},
                      BadValue{"HP_SPIN_BEFORE_BLOCK", "99999999999999999999"},
                      BadValue{"HP_IDLE_POLL_US", "-1"}, BadValue{"HP_IDLE_POLL_US", "1000001"},
                      BadValue{"HP_IDLE_POLL_US", "0.5"}, BadValue{"HP_IDLE_POLL_US", "rarely"},
                      BadValue{"HP_LOG_LEVEL", "loud"}, BadValue{"HP_LOG_LEVEL", "WARN"},
                      BadValue{"HP_PIN_THREADS", "maybe"}, BadValue{"HP_CHIP_CPUS", "3-1"},
                      BadValue{"HP_CHIP_CPUS", "x"}, BadValue{"HP_CHIP_CPUS", "0-3,,8"},
                      BadValue{"HP_MEM_NODES", "node0"}, BadValue{"HP_MEM_NODES", "1-0"}),
    [](const ::testing::TestParamInfo<BadValue>& info) {
      return std::string(info.param.name) + "_" + std::to_string(info.index);
    });

TEST(SettingsParse, InvalidValueMessageSaysWhatIsExpected) {
  const Parsed p = parse({{"HP_LOG_LEVEL", "loud"}});
  EXPECT_THAT(p.status.message(), HasSubstr("trace|debug|info|warn|error|off"));
  const Parsed q = parse({{"HP_SPIN_BEFORE_BLOCK", "-5"}});
  EXPECT_THAT(q.status.message(), HasSubstr("[0, 1000000]"));
}

TEST(SettingsParse, GoodValuesSurviveABadOne) {
  const Parsed p = parse({{"HP_LOG_LEVEL", "error"},
                          {"HP_WAIT_TIMEOUT_S", "abc"},
                          {"HP_SPIN_BEFORE_BLOCK", "7"},
                          {"HP_PIN_THREADS", "off"}});
  EXPECT_EQ(p.status.code(), ErrorCode::kInvalidSetting);
  EXPECT_EQ(p.settings.log_level, LogLevel::kError);
  EXPECT_DOUBLE_EQ(p.settings.wait_timeout_s, 60.0);
  EXPECT_EQ(p.settings.spin_before_block, 7);
  EXPECT_EQ(p.settings.pin_threads, PinMode::kOff);
}

TEST(SettingsParse, ReportsTheFirstBadVariable) {
  const Parsed p = parse({{"HP_LOG_LEVEL", "loud"}, {"HP_PIN_THREADS", "maybe"}});
  EXPECT_EQ(p.status.code(), ErrorCode::kInvalidSetting);
  EXPECT_THAT(p.status.message(), HasSubstr("HP_LOG_LEVEL='loud'"));
  EXPECT_THAT(p.status.message(), ::testing::Not(HasSubstr("HP_PIN_THREADS")));
}

// ---- parse_cpu_list ----

TEST(ParseCpuList, Empty) {
  std::vector<int> cpus = {1, 2};
  ASSERT_TRUE(parse_cpu_list("", &cpus).is_ok());
  EXPECT_THAT(cpus, IsEmpty());
  cpus = {3};
  ASSERT_TRUE(parse_cpu_list("  ", &cpus).is_ok());
  EXPECT_THAT(cpus, IsEmpty());
}

TEST(ParseCpuList, SingleCpu) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("0", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(0));
}

TEST(ParseCpuList, RangesAndSingles) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("0-3,8", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(0, 1, 2, 3, 8));
  ASSERT_TRUE(parse_cpu_list("0-3,8,10-11", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(0, 1, 2, 3, 8, 10, 11));
  ASSERT_TRUE(parse_cpu_list("5-5", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(5));
}

TEST(ParseCpuList, WhitespaceAndOrder) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list(" 2, 0-1 ", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(2, 0, 1));  // the order written: the chip's pinning order
}

TEST(ParseCpuList, ARepeatedCpuKeepsItsFirstPlace) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("3,1,3,0-2,2", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(3, 1, 0, 2));
}

TEST(ParseCpuList, LargestCpu) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("65535", &cpus).is_ok());
  EXPECT_THAT(cpus, ElementsAre(65535));
}

TEST(ParseCpuList, BadInputIsInvalidArgument) {
  for (const char* text : {"x", "3-1", "-1", "1-", "-", "1,,2", ",1", "1,", "1-2-3", "1.5", "+1",
                           "0x1", "a-b", "65536", "0-65536", "99999999999"}) {
    std::vector<int> cpus = {42};
    const Status status = parse_cpu_list(text, &cpus);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << "'" << text << "'";
    EXPECT_THAT(status.message(), HasSubstr("cpulist")) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace hp
