// hp-dump: prints what a run with OrchestratorConfig.diagnostics.dump_args captured.
//
//   hp-dump <prefix> --list                              every captured argument
//   hp-dump <prefix> --task 3 --arg 1 [--after]          tensor argument 1 of task 3
//   hp-dump <prefix> --task 3 --arg 0 --scalar           scalar argument 0 of task 3
// Exit status: 0 printed, 1 the dump or the argument was not found (the message says why),
// 2 bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "runtime/tensor_dump_printer.h"
#include "runtime/tensor_dump_reader.h"

int main(int argc, char** argv) {
  using namespace hp::runtime;
  CLI::App app{
      "Prints a tensor or scalar argument captured by a run's argument dump "
      "(tensor_dump.json + tensor_dump.bin)."};
  std::string prefix;
  std::string task_text;
  int arg = 0;
  bool scalar = false, after = false, before = false, list = false;
  std::int64_t max_elements = 4096;
  app.add_option("prefix", prefix, "the run's diagnostics output prefix (a directory)")->required();
  app.add_flag("--list", list, "list every captured argument");
  app.add_option("--task", task_text, "task id");
  app.add_option("--arg", arg, "argument index (among the task's tensors, or its scalars)");
  app.add_flag("--scalar", scalar, "a scalar argument (default: a tensor argument)");
  auto* after_flag = app.add_flag("--after", after, "the value after the task ran");
  app.add_flag("--before", before, "the value before the task ran (the default)")
      ->excludes(after_flag);
  app.add_option("--max", max_elements, "print at most this many elements")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  TensorDump dump;
  if (hp::Status s = TensorDump::open(prefix, &dump); !s.is_ok()) {
    fmt::print(stderr, "hp-dump: {}\n", s.to_string());
    return 1;
  }
  if (list) {
    fmt::print("{}", format_dump_listing(dump));
    return 0;
  }
  if (task_text.empty()) {
    fmt::print(stderr, "hp-dump: give --task <id> and --arg <index>, or --list\n");
    return 2;
  }
  hp::runtime::TaskId task = 0;
  try {
    std::size_t used = 0;
    task = std::stoull(task_text, &used);
    if (used != task_text.size()) throw std::invalid_argument(task_text);
  } catch (const std::exception&) {
    fmt::print(stderr, "hp-dump: --task '{}' is not a task id (a non-negative integer)\n",
               task_text);
    return 2;
  }
  const TensorDumpEntry* entry = nullptr;
  hp::Status s = dump.find(task, scalar ? DumpArgKind::kScalar : DumpArgKind::kTensor, arg, &entry);
  const DumpPhase phase = after ? DumpPhase::kAfter : DumpPhase::kBefore;
  std::vector<std::byte> bytes;
  if (s.is_ok()) s = dump.read(*entry, phase, &bytes);
  if (!s.is_ok()) {
    fmt::print(stderr, "hp-dump: {}\n", s.to_string());
    return 1;
  }
  fmt::print("{}\n{}", format_dump_header(*entry, phase),
             format_dump_values(*entry, bytes, {.max_elements = max_elements}));
  return 0;
}
