// Choosing diagnostics: named errors for a diagnostic without an output prefix, a bad dump
// level and an unwritable prefix, all before any task runs; files written even when the run
// fails; and users' observers seeing the run, scope sites and occupancy through the public
// observer interface.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>

#include "diagnostics_fixture.h"

namespace hp::runtime::testing {
namespace {

using ::testing::HasSubstr;

class RuntimeDiagnostics : public DiagnosticsTest {
 protected:
  Status run_counted() {
    return run([&](Orchestrator& o) -> Status {
      ++submitted;
      return o.submit(nop, TaskArgs());
    });
  }
  std::atomic<int> submitted{0};
};

TEST_F(RuntimeDiagnostics, ADiagnosticWithoutAnOutputPrefixIsANamedError) {
  config.diagnostics.output_prefix.clear();
  config.diagnostics.swimlane = true;
  config.diagnostics.dump_args = 2;
  const Status s = run_counted();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dump_args, swimlane"));
  EXPECT_THAT(s.message(), HasSubstr("set OrchestratorConfig.diagnostics.output_prefix"));
  EXPECT_EQ(submitted.load(), 0);
}

TEST_F(RuntimeDiagnostics, ADumpLevelOutsideZeroToTwoIsRefused) {
  config.diagnostics.dump_args = 3;
  const Status s = run_counted();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dump_args=3"));
  EXPECT_EQ(submitted.load(), 0);
}

TEST_F(RuntimeDiagnostics, AnUnwritablePrefixIsAnIoErrorBeforeAnyTaskRuns) {
  // A path under a regular file cannot be a directory, whoever runs the test.
  const std::string file = (std::filesystem::path(dir) / "plain_file").string();
  std::ofstream(file) << "x";
  for (int which = 0; which < 4; ++which) {
    config.diagnostics = {.output_prefix = file + "/out",
                          .dump_args = which == 0 ? 1 : 0,
                          .scope_stats = which == 1,
                          .dep_gen = which == 2,
                          .swimlane = which == 3};
    const Status s = run_counted();
    EXPECT_EQ(s.code(), ErrorCode::kIoError) << which;
    EXPECT_THAT(s.message(), HasSubstr(file + "/out")) << which;
    EXPECT_THAT(s.message(), HasSubstr("output_prefix")) << which;
  }
  // The prefix itself being a file.
  config.diagnostics = {.output_prefix = file, .dep_gen = true};
  EXPECT_EQ(run_counted().code(), ErrorCode::kIoError);
  EXPECT_EQ(submitted.load(), 0);
}

TEST_F(RuntimeDiagnostics, TheFilesAreWrittenWhenTheRunFails) {
  config.diagnostics.dep_gen = true;
  config.diagnostics.swimlane = true;
  config.diagnostics.scope_stats = true;
  config.diagnostics.dump_args = 2;
  const int failing = add("failing", [](const TaskArgs&, platform::BlockContext&) -> Status {
    return Status::error(ErrorCode::kInvalidArgument, "bad tile");
  });
  std::vector<std::int32_t> a(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    return o.submit(failing, TaskArgs().output_existing(i32(a)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad tile"));
  EXPECT_EQ(read_json(kDepsFile).at("tasks").size(), 1u);
  EXPECT_EQ(read_json(kTensorDumpJsonFile).at("entries")[0].at("status"), "INVALID_ARGUMENT");
  EXPECT_FALSE(read_json(kSwimlaneFile).at("traceEvents").empty());
  EXPECT_EQ(read_jsonl(kScopeStatsFile).size(), 3u);
}

// A user's observer, through the public interface only.
struct RunWatcher : Observer {
  std::mutex mu;
  int runs_begun = 0, runs_ended = 0;
  RunInfo run;
  Status end_status = Status::error(ErrorCode::kInternal, "never ended");
  std::vector<std::string> opened, closed;
  int max_live = 0;
  std::size_t max_entries = 0;
  std::vector<std::string> dumped_args;

  void on_run_begin(const RunInfo& r) override {
    std::lock_guard lock(mu);
    ++runs_begun;
    run = r;
  }
  void on_run_end(const Status& s) override {
    std::lock_guard lock(mu);
    ++runs_ended;
    end_status = s;
  }
  void on_scope_begin(const ScopeInfo& s) override {
    std::lock_guard lock(mu);
    opened.push_back(std::to_string(s.site.line));
  }
  void on_scope_end(const ScopeInfo& s) override {
    std::lock_guard lock(mu);
    closed.push_back(std::to_string(s.site.line));
  }
  void on_task_submit(const TaskInfo&, std::span<const Dependency>, const Occupancy& o) override {
    std::lock_guard lock(mu);
    max_live = std::max(max_live, o.live_slots);
    max_entries = std::max(max_entries, o.tensor_map_entries);
  }
  void on_task_ready(const TaskInfo& t) override {
    std::lock_guard lock(mu);
    if (t.args != nullptr && t.args->dump_marked(0)) dumped_args.push_back(std::string(t.callable));
  }
};

TEST_F(RuntimeDiagnostics, UsersObserversSeeTheRunScopeSitesAndOccupancy) {
  RunWatcher watcher;
  config.observers = {&watcher};
  config.task_ring_slots = 8;
  std::vector<std::int32_t> a(4, 0);
  int line = 0;
  const Status s = run([&](Orchestrator& o) -> Status {
    line = __LINE__ + 1;
    auto scope = o.scope();
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1).dump()));
    return o.submit(add_scalar, TaskArgs().inout(i32(a)).scalar(1));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::lock_guard lock(watcher.mu);
  EXPECT_EQ(watcher.runs_begun, 1);
  EXPECT_EQ(watcher.runs_ended, 1);
  EXPECT_TRUE(watcher.end_status.is_ok());
  EXPECT_EQ(watcher.run.num_cube, 1);
  EXPECT_EQ(watcher.run.num_vector, 2);
  EXPECT_EQ(watcher.run.task_ring_slots, 8);
  EXPECT_EQ(watcher.opened, (std::vector<std::string>{"0", std::to_string(line)}));
  EXPECT_EQ(watcher.closed, (std::vector<std::string>{std::to_string(line), "0"}));
  EXPECT_EQ(watcher.max_live, 2);  // both tasks held by the open scope
  EXPECT_GE(watcher.max_entries, 1u);
  EXPECT_EQ(watcher.dumped_args, std::vector<std::string>{"fill"});
  // No diagnostic on: nothing written.
  EXPECT_FALSE(std::filesystem::exists(config.diagnostics.output_prefix));
}

}  // namespace
}  // namespace hp::runtime::testing
