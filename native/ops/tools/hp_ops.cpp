// hp-ops: the op packages on the search path and the ops they hold (hp::ops, docs/ops.md).
//
//   hp-ops list [--json]   every package in search order: where, origin, targets, ops
//   hp-ops find <op>       the package an op resolves to, or why none does (exit 1)
#include <cstdio>
#include <string>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ops/op_lookup.h"

int main(int argc, char** argv) {
  CLI::App app{
      "The op packages on the search path (the payload's own, then HP_VENDOR_PATH) and their ops"};
  app.require_subcommand(1);
  bool json = false;
  CLI::App* list = app.add_subcommand("list", "every package in search order");
  list->add_flag("--json", json, "print JSON");
  std::string op;
  CLI::App* find = app.add_subcommand("find", "the package an op resolves to");
  find->add_option("op", op, "a registry op name, e.g. fused_deep_moe")->required();
  CLI11_PARSE(app, argc, argv);

  if (*list) {
    const auto packages = hp::ops::packages();
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& p : packages) {
        out.push_back({{"dir", p.dir},
                       {"origin", p.origin},
                       {"version", p.version},
                       {"library", p.library},
                       {"registry_sha256", p.registry_sha256},
                       {"targets", p.targets},
                       {"ops", p.ops},
                       {"status", p.status.is_ok() ? "ok" : p.status.to_string()}});
      }
      std::puts(out.dump(2).c_str());
      return 0;
    }
    if (packages.empty())
      std::puts("no op packages (the payload has none and HP_VENDOR_PATH is empty)");
    for (const auto& p : packages) {
      fmt::print("{} ({})\n", p.dir, p.origin);
      if (!p.status.is_ok()) {
        fmt::print("  ERROR {}\n", p.status.to_string());
        continue;
      }
      fmt::print("  targets {}\n  ops     {}\n", fmt::join(p.targets, ", "),
                 fmt::join(p.ops, ", "));
    }
    return 0;
  }
  hp::ops::OpEntry entry;
  const hp::Status s = hp::ops::find(op, &entry);
  if (!s.is_ok()) {
    fmt::print(stderr, "hp-ops: {}\n", s.to_string());
    return 1;
  }
  fmt::print("{} {}{}\n  package {}\n  library {}\n  socs    {}\n", entry.name,
             entry.family.empty()
                 ? ""
                 : fmt::format("(family {}, variant {}) ", entry.family, entry.variant),
             "", entry.package, entry.library, fmt::join(entry.socs, ", "));
  return 0;
}
