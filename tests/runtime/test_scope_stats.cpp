// scope_stats.jsonl (DiagnosticsConfig::scope_stats): a metadata line with the capacities, then
// a begin and an end line per scope, nested, with the scope's site and the high-water marks of
// its ring's task window and heap and of the tensor map (scope_stats_observer.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "diagnostics_fixture.h"
#include "platform/wait.h"

namespace hp::runtime::testing {
namespace {

class RuntimeScopeStats : public DiagnosticsTest {};

void expect_scope_line(const Json& line) {
  SCOPED_TRACE(line.dump());
  EXPECT_EQ(line.size(), 8u);
  const std::string type = line.at("type").get<std::string>();
  EXPECT_TRUE(type == "scope_begin" || type == "scope_end");
  EXPECT_TRUE(line.at("scope").is_string());
  EXPECT_TRUE(line.at("parent").is_null() || line.at("parent").is_string());
  EXPECT_TRUE(line.at("site").is_string());
  EXPECT_GE(line.at("depth").get<int>(), 0);
  EXPECT_EQ(line.at("ring").get<int>(), std::min(line.at("depth").get<int>(), 3));
  EXPECT_TRUE(line.at("tasks").is_number_unsigned());
  const Json& hwm = line.at("hwm");
  EXPECT_EQ(hwm.size(), 3u);
  EXPECT_TRUE(hwm.at("task_window").is_number_integer());
  EXPECT_TRUE(hwm.at("heap_bytes").is_number_unsigned());
  EXPECT_TRUE(hwm.at("tensormap_entries").is_number_unsigned());
}

TEST_F(RuntimeScopeStats, EachScopeReportsItsSiteAndHighWaterMarks) {
  config.diagnostics.scope_stats = true;
  config.task_ring_slots = 16;
  config.heap_ring_bytes = 4096;
  std::vector<std::int32_t> a(4, 0);
  int outer_line = 0, inner_line = 0;
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1)));
    outer_line = __LINE__ + 1;
    auto outer = o.scope();
    // Held by the open scope, none of these can be reclaimed before it ends: exactly 3 live
    // slots and 3 x 256 heap bytes in ring 1.
    for (int i = 0; i < 3; ++i) {
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(i)));
    }
    inner_line = __LINE__ + 1;
    auto inner = o.scope();
    return o.submit(fill, TaskArgs().output(DType::kInt32, {16}).scalar(9));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::vector<Json> lines = read_jsonl(kScopeStatsFile);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], Json::parse(R"({"type": "metadata", "schema_version": 1, "runtime_level": 2,
      "rings": 4, "capacities": {"task_window": 16, "heap_bytes": 4096, "tensormap_entries": null}})"));
  for (std::size_t i = 1; i < lines.size(); ++i) expect_scope_line(lines[i]);

  // Order: begin root, begin outer, begin inner, end inner, end outer, end root.
  const std::vector<std::pair<std::string, std::string>> order = {
      {"scope_begin", "0"}, {"scope_begin", "1"}, {"scope_begin", "2"},
      {"scope_end", "2"},   {"scope_end", "1"},   {"scope_end", "0"}};
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(lines[i + 1].at("type"), order[i].first) << i;
    EXPECT_EQ(lines[i + 1].at("scope"), order[i].second) << i;
  }
  const Json& root_end = lines[6];
  const Json& outer_begin = lines[2];
  const Json& outer_end = lines[5];
  const Json& inner_end = lines[4];
  EXPECT_EQ(root_end.at("site"), "<root>");
  EXPECT_TRUE(root_end.at("parent").is_null());
  EXPECT_THAT(outer_end.at("site").get<std::string>(),
              ::testing::EndsWith(fmt::format("test_scope_stats.cpp:{}", outer_line)));
  EXPECT_THAT(inner_end.at("site").get<std::string>(),
              ::testing::EndsWith(fmt::format("test_scope_stats.cpp:{}", inner_line)));
  EXPECT_EQ(outer_end.at("parent"), "0");
  EXPECT_EQ(inner_end.at("parent"), "1");
  EXPECT_EQ(inner_end.at("depth"), 2);
  EXPECT_EQ(inner_end.at("ring"), 2);

  // At its begin the outer scope's ring 1 is empty; the tensor map holds the root's one entry.
  EXPECT_EQ(outer_begin.at("tasks"), 0);
  EXPECT_EQ(outer_begin.at("hwm"),
            Json::parse(R"({"task_window": 0, "heap_bytes": 0, "tensormap_entries": 1})"));
  // Its peak: 3 slots, 3 x 256 bytes of ring 1; 1 + 3 + 1 (the inner task's) map entries.
  EXPECT_EQ(outer_end.at("tasks"), 3);
  EXPECT_EQ(outer_end.at("hwm"),
            Json::parse(R"({"task_window": 3, "heap_bytes": 768, "tensormap_entries": 5})"));
  // The inner scope (ring 2): one task of 64 bytes.
  EXPECT_EQ(inner_end.at("tasks"), 1);
  EXPECT_EQ(inner_end.at("hwm"),
            Json::parse(R"({"task_window": 1, "heap_bytes": 64, "tensormap_entries": 5})"));
  // The root scope's ring 0 held its one task throughout.
  EXPECT_EQ(root_end.at("tasks"), 1);
  EXPECT_EQ(root_end.at("hwm").at("task_window"), 1);
  EXPECT_EQ(root_end.at("hwm").at("heap_bytes"), 0);
}

// Opens a gate the first time a submit has to wait for ring space.
struct GateOnBlock : Observer {
  platform::WaitWord gate;
  void on_submit_blocked(const RingState&) override { platform::add_and_wake(gate, 1, false); }
};

TEST_F(RuntimeScopeStats, AFullRingReportsItsCapacityAndTheWaitShowsInTheSwimlane) {
  // Ring 1 has 2 slots. Task 0 runs until a submit blocks; task 1 finishes at once but cannot
  // be reclaimed before task 0 (submission order). Task 2 (in the third scope) finds the ring
  // full and waits; then tasks 0 and 1 are both reclaimed before task 2 takes its slot, so only
  // the blocked ring's state shows the third scope's true peak of 2.
  config.diagnostics.scope_stats = true;
  config.diagnostics.swimlane = true;
  config.task_ring_slots = 2;
  GateOnBlock gate;
  config.observers = {&gate};
  const int gated = add("gated", [&](const TaskArgs&, platform::BlockContext&) -> Status {
    std::uint32_t last = 0;
    const auto r = platform::wait_word(
        gate.gate, [](std::uint32_t v) { return v >= 1; }, platform::deadline_after(30), {},
        nullptr, &last);
    HP_ENSURE(r == platform::WaitResult::kReady, ErrorCode::kTimeout, "no submit ever blocked");
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    for (int i = 0; i < 3; ++i) {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit(i == 0 ? gated : nop, TaskArgs()));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::vector<Json> ends;
  for (const Json& line : read_jsonl(kScopeStatsFile)) {
    if (line.at("type") == "scope_end" && line.at("depth") == 1) ends.push_back(line);
  }
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0].at("hwm").at("task_window"), 1);
  EXPECT_EQ(ends[1].at("hwm").at("task_window"), 2);
  EXPECT_EQ(ends[2].at("hwm").at("task_window"), 2);
  int waits = 0;
  const Json trace = read_json(kSwimlaneFile);
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name") == "submit waits: ring 1 full") {
      EXPECT_EQ(e.at("pid"), 3);
      ++waits;
    }
  }
  EXPECT_EQ(waits, 1);
}

}  // namespace
}  // namespace hp::runtime::testing
