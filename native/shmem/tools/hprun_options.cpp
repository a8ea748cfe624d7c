#include "shmem/tools/hprun_options.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "common/settings.h"
#include "shmem/job.h"
#include "shmem/tools/hprun_report.h"

namespace hp::shmem::hprun {
namespace {

constexpr double kMaxTimeoutSeconds = 1e9;

std::optional<int> parse_rank_count(std::string_view text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1 ||
      n > kMaxPes) {
    return std::nullopt;
  }
  return n;
}

std::optional<double> parse_seconds(std::string_view text) {
  double seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    return std::nullopt;
  }
  return seconds;
}

// The library's own parser decides, so hprun accepts exactly what the ranks will.
bool is_heap_size(const std::string& text) {
  Settings parsed;
  return Settings::parse(
             [&](std::string_view name) -> std::optional<std::string> {
               if (name == "HP_SHMEM_HEAP_SIZE") return text;
               return std::nullopt;
             },
             &parsed)
      .is_ok();
}

CLI::Validator validator(std::function<bool(const std::string&)> ok, std::string expected) {
  return CLI::Validator(
      [ok = std::move(ok), expected = std::move(expected)](std::string& text) -> std::string {
        return ok(text) ? std::string() : fmt::format("'{}' is not {}", text, expected);
      },
      "");
}

class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: hprun [options] -n N prog [args...]\n";
  }
};

}  // namespace

std::optional<int> parse_options(int argc, char** argv, Options* out) {
  CLI::App app(
      "Launches N processes of `prog` on this host as one symmetric-memory job (transport "
      "shm). Every argument after `prog` belongs to the program.",
      "hprun");
  app.formatter(std::make_shared<UsageFormatter>());
  app.prefix_command();  // stop at the program: its arguments are not hprun's
  app.set_help_flag("-h,--help", "print this help and exit");
  std::string n_text, timeout_text, heap_text;
  app.add_option("-n,--np", n_text, fmt::format("number of ranks to launch, 1..{}", kMaxPes))
      ->required()
      ->type_name("N")
      ->check(validator([](const std::string& t) { return parse_rank_count(t).has_value(); },
                        fmt::format("a number of ranks in 1..{}", kMaxPes)));
  app.add_flag("--bind", out->bind,
               "place the ranks on this process's CPUs NUMA node by node (hwloc): each rank "
               "a share of a node's cores, SMT siblings last (HP_CHIP_CPUS), its heap bound "
               "to its node when there are several (HP_MEM_NODES); hp-topology --ranks N "
               "prints the plan");
  app.add_flag("--tag-output", out->tag_output,
               "prefix every line of each rank's stdout and stderr with \"[rank] \"");
  app.add_option(
         "--timeout", timeout_text,
         fmt::format("abort the job and exit {} when it runs longer than SECONDS", kExitTimedOut))
      ->type_name("SECONDS")
      ->check(validator([](const std::string& t) { return parse_seconds(t).has_value(); },
                        "a number of seconds > 0 (e.g. 30 or 2.5)"));
  app.add_option("--heap-size", heap_text,
                 "symmetric heap of each rank (HP_SHMEM_HEAP_SIZE), e.g. 256M or 1G")
      ->type_name("SIZE")
      ->check(validator(is_heap_size, "a size in bytes, optionally with K, M or G (e.g. 256M)"));
  app.footer(fmt::format(
      "Exit status: 0 when every rank finalized and exited 0; otherwise the status of the "
      "first rank that failed (128+N when signal N killed it), {} when --timeout passed, "
      "128+N when hprun got signal N, {} for bad options, {}/{} when prog cannot be run.",
      kExitTimedOut, kExitUsage, kExitCannotExecute, kExitNotFound));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "hprun: {}\nRun 'hprun --help' for the options.\n", e.what());
    return kExitUsage;
  }

  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    fmt::print(stderr, "hprun: missing the program to run (hprun [options] -n N prog [args...])\n");
    return kExitUsage;
  }
  // Unknown options land before the program (CLI11 keeps them as extras).
  if (const std::string& first = command.front();
      first.size() > 1 && first[0] == '-' && app.remaining().front() != "--") {
    fmt::print(stderr, "hprun: unknown option '{}'\nRun 'hprun --help' for the options.\n", first);
    return kExitUsage;
  }
  out->n_ranks = *parse_rank_count(n_text);
  if (!timeout_text.empty()) out->timeout_s = parse_seconds(timeout_text);
  if (!heap_text.empty()) out->heap_size = heap_text;
  out->command = std::move(command);
  return std::nullopt;
}

}  // namespace hp::shmem::hprun
