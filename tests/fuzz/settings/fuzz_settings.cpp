// Fuzz target: the settings parser (Settings::parse over every HP_* runtime variable) and the
// cpulist grammar. Input: lines "NAME=value" (the environment a process might be started with;
// a line without '=' is a cpulist given to parse_cpu_list directly).
//
// Expected: every value parses or is INVALID_SETTING naming its variable (parse_cpu_list alone:
// INVALID_ARGUMENT); a parsed cpulist prints back (format_cpu_list) to the same list.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/settings.h"
#include "fuzz_check.h"

namespace {

void check_round_trip(const std::vector<int>& cpus, const char* what) {
  std::vector<int> again;
  const hp::Status s = hp::parse_cpu_list(hp::format_cpu_list(cpus), &again);
  if (!s.is_ok() || again != cpus) {
    hp::fuzz::fail(std::string(what) + ": format_cpu_list does not parse back to the same list");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string, std::less<>> env;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      std::vector<int> cpus;
      const hp::Status s = hp::parse_cpu_list(line, &cpus);
      hp::fuzz::expect_status(s, {hp::ErrorCode::kInvalidArgument}, "parse_cpu_list");
      if (s.is_ok()) check_round_trip(cpus, "parse_cpu_list");
      continue;
    }
    env.insert_or_assign(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }

  hp::Settings settings;
  const hp::Status s = hp::Settings::parse(
      [&](std::string_view name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      &settings);
  hp::fuzz::expect_status(s, {hp::ErrorCode::kInvalidSetting}, "Settings::parse");
  if (!s.is_ok()) {
    // The message names the variable the user must fix.
    bool named = false;
    for (const auto& [name, value] : env) {
      named |= hp::find_setting(name) != nullptr && s.message().find(name) != std::string::npos;
    }
    if (!named) hp::fuzz::fail("Settings::parse: the error names no variable: " + s.to_string());
    return 0;
  }
  check_round_trip(settings.chip_cpus, "HP_CHIP_CPUS");
  check_round_trip(settings.mem_nodes, "HP_MEM_NODES");
  return 0;
}
