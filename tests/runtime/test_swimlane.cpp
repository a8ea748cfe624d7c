// swimlane.json (DiagnosticsConfig::swimlane): a valid Chrome trace (swimlane_observer.h) with
// exactly one "X" task span per task per core that ran its blocks (one for block_num 1, the
// gang's size for SPMD tasks), metadata naming every row, properly nested spans on every row,
// and one flow arrow (s + f) per dependency edge, bound inside the two tasks' spans.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "diagnostics_fixture.h"

namespace hp::runtime::testing {
namespace {

using platform::LaunchMode;

class RuntimeSwimlane : public DiagnosticsTest {};

struct SpanRef {
  int pid, tid;
  double ts, dur;
};

TEST_F(RuntimeSwimlane, OneSpanPerTaskPerCoreAndAFlowPerEdge) {
  config.diagnostics.swimlane = true;
  std::vector<std::int32_t> a(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1)));  // t0
    HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(i32(a)).scalar(1)));      // t1
    auto scope = o.scope();
    // t2
    HP_RETURN_IF_ERROR(o.submit(nop, TaskArgs(), {.mode = LaunchMode::kVector, .block_num = 4}));
    HP_RETURN_IF_ERROR(o.submit(nop, TaskArgs().input(i32(a)), {.mode = LaunchMode::kCube}));  // t3
    return o.submit(nop, TaskArgs(), {.mode = LaunchMode::kMix, .block_num = 1});              // t4
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const Json trace = read_json(kSwimlaneFile);
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_EQ(trace.at("otherData").at("schema"), "hyper_parallel.swimlane");

  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::string, std::vector<SpanRef>> task_spans;  // task id -> spans
  std::map<std::pair<int, int>, std::vector<SpanRef>> rows;
  std::map<std::uint64_t, std::vector<Json>> flows;
  std::set<std::string> categories;
  for (const Json& e : trace.at("traceEvents")) {
    SCOPED_TRACE(e.dump());
    const std::string ph = e.at("ph").get<std::string>();
    const int pid = e.at("pid").get<int>();
    const int tid = e.at("tid").get<int>();
    EXPECT_TRUE(e.at("name").is_string());
    if (ph == "M") {
      const std::string what = e.at("name").get<std::string>();
      if (what == "process_name") process_names[pid] = e.at("args").at("name").get<std::string>();
      if (what == "thread_name")
        thread_names[{pid, tid}] = e.at("args").at("name").get<std::string>();
      continue;
    }
    const double ts = e.at("ts").get<double>();
    EXPECT_GE(ts, 0.0);
    categories.insert(e.at("cat").get<std::string>());
    if (ph == "X") {
      const double dur = e.at("dur").get<double>();
      EXPECT_GE(dur, 0.0);
      rows[{pid, tid}].push_back({pid, tid, ts, dur});
      if (e.at("cat") == "task") {
        EXPECT_TRUE(pid == 1 || pid == 2);
        EXPECT_EQ(e.at("args").at("callable"), e.at("name"));
        EXPECT_EQ(e.at("args").at("status"), "OK");
        task_spans[e.at("args").at("task").get<std::string>()].push_back({pid, tid, ts, dur});
      }
    } else if (ph == "s" || ph == "f") {
      EXPECT_EQ(e.at("cat"), "dependency");
      if (ph == "f") {
        EXPECT_EQ(e.at("bp"), "e");
      }
      flows[e.at("id").get<std::uint64_t>()].push_back(e);
    } else {
      EXPECT_EQ(ph, "i");
      EXPECT_EQ(e.at("cat"), "orchestrator");
    }
  }
  EXPECT_EQ(categories, (std::set<std::string>{"task", "orchestrator", "scheduler", "dependency"}));
  EXPECT_EQ(process_names,
            (std::map<int, std::string>{
                {1, "cube cores"}, {2, "vector cores"}, {3, "orchestrator"}, {4, "scheduler"}}));
  EXPECT_EQ(thread_names.at({1, 0}), "cube core 0");
  EXPECT_EQ(thread_names.at({2, 1}), "vector core 1 (cluster 0)");
  EXPECT_EQ(thread_names.at({2, 2}), "vector core 2 (cluster 0)");
  for (const auto& [row, spans] : rows)
    EXPECT_TRUE(thread_names.count(row)) << row.first << "/" << row.second;

  // Spans per task: block_num 1 -> 1; vector x 4 blocks on 2 vector cores -> 2; mix x 1 -> 1
  // cube + 2 vector cores.
  std::map<std::string, std::size_t> counts;
  for (const auto& [task, spans] : task_spans) counts[task] = spans.size();
  EXPECT_EQ(counts,
            (std::map<std::string, std::size_t>{{"0", 1}, {"1", 1}, {"2", 2}, {"3", 1}, {"4", 3}}));
  EXPECT_EQ(task_spans.at("3")[0].pid, 1);  // the cube task on the cube core

  // Every row's spans nest (Perfetto drops improperly nested slices).
  for (auto& [row, spans] : rows) {
    std::sort(spans.begin(), spans.end(),
              [](const SpanRef& x, const SpanRef& y) { return x.ts < y.ts; });
    std::vector<double> open_ends;
    for (const SpanRef& sp : spans) {
      while (!open_ends.empty() && open_ends.back() <= sp.ts) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(sp.ts + sp.dur, open_ends.back() + 1e-6) << row.first << "/" << row.second;
      }
      open_ends.push_back(sp.ts + sp.dur);
    }
  }

  // Flows: edges 0 -> 1 (RAW) and 1 -> 3 (RAW), each an s inside the predecessor's span and an
  // f inside the successor's.
  auto inside = [&](const Json& e, const std::string& task) {
    for (const SpanRef& sp : task_spans.at(task)) {
      const double ts = e.at("ts").get<double>();
      if (sp.pid == e.at("pid") && sp.tid == e.at("tid") && ts >= sp.ts && ts <= sp.ts + sp.dur)
        return true;
    }
    return false;
  };
  std::set<std::pair<std::string, std::string>> edges;
  for (const auto& [id, events] : flows) {
    ASSERT_EQ(events.size(), 2u) << id;
    const Json& start = events[0].at("ph") == "s" ? events[0] : events[1];
    const Json& finish = events[0].at("ph") == "s" ? events[1] : events[0];
    EXPECT_EQ(start.at("ph"), "s");
    EXPECT_EQ(finish.at("ph"), "f");
    EXPECT_EQ(start.at("name"), finish.at("name"));
    const std::string pred = start.at("args").at("pred").get<std::string>();
    const std::string succ = start.at("args").at("succ").get<std::string>();
    EXPECT_TRUE(inside(start, pred)) << start.dump();
    EXPECT_TRUE(inside(finish, succ)) << finish.dump();
    edges.insert({pred, succ});
  }
  EXPECT_EQ(edges, (std::set<std::pair<std::string, std::string>>{{"0", "1"}, {"1", "3"}}));
}

}  // namespace
}  // namespace hp::runtime::testing
