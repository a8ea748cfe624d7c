// The shared setup of the diagnostics tests: a chip worker (1 cube + 2 vector cores) with a few
// int32 callables, a fresh output directory per test, and readers for the files.
#ifndef HYPER_PARALLEL_TESTS_RUNTIME_DIAGNOSTICS_FIXTURE_H_
#define HYPER_PARALLEL_TESTS_RUNTIME_DIAGNOSTICS_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/json_file.h"
#include "int32_views.h"
#include "runtime/orchestrator.h"

namespace hp::runtime::testing {

class DiagnosticsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ChipWorker::create({.num_cube = 1, .num_vector = 2}, &worker).is_ok());
    // fill: every element of tensor 0 = scalar 0 (block 0 only).
    fill = add("fill", [](const TaskArgs& a, platform::BlockContext& b) -> Status {
      if (b.block_idx() != 0) return Status::ok();
      const auto value = a.scalar_as<std::int32_t>(0);
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { x = value; });
      return Status::ok();
    });
    // copy: tensor 1 = tensor 0, element by element in row-major order.
    copy = add("copy", [](const TaskArgs& a, platform::BlockContext& b) -> Status {
      if (b.block_idx() != 0) return Status::ok();
      std::vector<std::int32_t> values;
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { values.push_back(x); });
      std::size_t i = 0;
      for_each_i32(a.tensor(1), [&](std::int32_t& x) { x = values[i++]; });
      return Status::ok();
    });
    // add: every element of tensor 0 += scalar 0.
    add_scalar = add("add", [](const TaskArgs& a, platform::BlockContext& b) -> Status {
      if (b.block_idx() != 0) return Status::ok();
      const auto value = a.scalar_as<std::int32_t>(0);
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { x += value; });
      return Status::ok();
    });
    nop = add("nop", [](const TaskArgs&, platform::BlockContext&) { return Status::ok(); });
    std::string pattern = (std::filesystem::temp_directory_path() / "hp_diag_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
    config.diagnostics.output_prefix = (std::filesystem::path(dir) / "out").string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  int add(const std::string& name, TaskFunction f) {
    int slot = -1;
    EXPECT_TRUE(
        worker->register_callable(Callable::from_function(name, std::move(f), name + "-v1"), &slot)
            .is_ok());
    return slot;
  }

  Status run(const Orchestration& o) { return Orchestrator::run(*worker, o, config); }

  std::string out(std::string_view file) const {
    return (std::filesystem::path(config.diagnostics.output_prefix) / file).string();
  }
  Json read_json(std::string_view file) const {
    Json j;
    const Status s = read_json_file(out(file), &j);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return j;
  }
  std::vector<Json> read_jsonl(std::string_view file) const {
    std::ifstream in(out(file));
    EXPECT_TRUE(in.good()) << out(file);
    std::vector<Json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
    return lines;
  }
  std::vector<std::byte> read_bytes(std::string_view file) const {
    std::ifstream in(out(file), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return std::vector<std::byte>(p, p + text.size());
  }

  std::unique_ptr<ChipWorker> worker;
  OrchestratorConfig config;
  std::string dir;
  int fill = -1, copy = -1, add_scalar = -1, nop = -1;
};

}  // namespace hp::runtime::testing

#endif  // HYPER_PARALLEL_TESTS_RUNTIME_DIAGNOSTICS_FIXTURE_H_
