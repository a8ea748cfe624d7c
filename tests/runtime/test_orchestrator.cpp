// Orchestrator: dependency inference (RAW, WAW, WAR, strided views, NO_DEP, explicit), concurrency
// of independent tasks, back-pressure and deadlock errors of the rings, failure propagation,
// scopes and the observer hooks. Ordering is checked without timing: a task that must run first
// waits on a gate that the test opens only after the later task was submitted, so a missing
// edge lets the later task see stale data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/printers.h"
#include "int32_views.h"
#include "platform/wait.h"
#include "runtime/orchestrator.h"

namespace hp::runtime {
namespace {

using platform::BlockContext;
using platform::LaunchMode;
using testing::for_each_i32;
using ::testing::HasSubstr;
using testing::i32;

constexpr double kGateTimeoutS = 30;

// A one-shot event a kernel can wait for (with a deadline) and the test can open.
class Gate {
 public:
  void open() { platform::add_and_wake(word_, 1, false); }
  Status wait() {
    std::uint32_t last = 0;
    const auto r = platform::wait_word(
        word_, [](std::uint32_t v) { return v >= 1; }, platform::deadline_after(kGateTimeoutS), {},
        nullptr, &last);
    HP_ENSURE(r == platform::WaitResult::kReady, ErrorCode::kTimeout, "gate never opened");
    return Status::ok();
  }

 private:
  platform::WaitWord word_;
};

struct Recorder : Observer {
  std::mutex mu;
  std::map<TaskId, std::vector<Dependency>> deps;
  std::map<TaskId, Status> statuses;
  std::map<TaskId, std::vector<std::string>> events;
  std::vector<RingState> blocked;
  int scope_begins = 0, scope_ends = 0, max_depth = 0;
  std::function<void(TaskId)> after_submit;  // orchestration thread
  std::function<void()> when_blocked;        // orchestration thread

  void on_scope_begin(const ScopeInfo& s) override {
    std::lock_guard lock(mu);
    ++scope_begins;
    max_depth = std::max(max_depth, s.depth);
  }
  void on_scope_end(const ScopeInfo&) override {
    std::lock_guard lock(mu);
    ++scope_ends;
  }
  void on_task_submit(const TaskInfo& t, std::span<const Dependency> d, const Occupancy&) override {
    {
      std::lock_guard lock(mu);
      deps[t.id].assign(d.begin(), d.end());
      events[t.id].push_back("submit");
    }
    if (after_submit) after_submit(t.id);
  }
  void on_task_ready(const TaskInfo& t) override { note(t.id, "ready"); }
  void on_task_start(const TaskInfo& t, int) override { note(t.id, "start"); }
  void on_task_end(const TaskInfo& t, int) override { note(t.id, "end"); }
  void on_task_complete(const TaskInfo& t, const Status& s) override {
    std::lock_guard lock(mu);
    statuses[t.id] = s;
    events[t.id].push_back("complete");
  }
  void on_submit_blocked(const RingState& r) override {
    {
      std::lock_guard lock(mu);
      blocked.push_back(r);
    }
    if (when_blocked) when_blocked();
  }
  void note(TaskId id, const char* what) {
    std::lock_guard lock(mu);
    events[id].push_back(what);
  }
  // (pred, kind, arg index, source) of a task's dependencies.
  std::set<std::tuple<TaskId, DepKind, int, DepSource>> edges(TaskId id) {
    std::lock_guard lock(mu);
    std::set<std::tuple<TaskId, DepKind, int, DepSource>> out;
    for (const Dependency& d : deps[id]) out.insert({d.pred, d.kind, d.arg_index, d.source});
    return out;
  }
};

class RuntimeOrchestrator : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ChipWorker::create({.num_cube = 1, .num_vector = 2}, &worker).is_ok());
    // fill: every element of tensor 0 = scalar 0 (after the gate, when scalar 1 is 1).
    fill = add("fill", [this](const TaskArgs& a, BlockContext&) -> Status {
      if (a.num_scalars() > 1 && a.scalar_as<int>(1) == 1) HP_RETURN_IF_ERROR(gate.wait());
      const auto value = a.scalar_as<std::int32_t>(0);
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { x = value; });
      return Status::ok();
    });
    // copy: tensor 1 = tensor 0, element by element (after the gate, when scalar 0 is 1).
    copy = add("copy", [this](const TaskArgs& a, BlockContext&) -> Status {
      if (a.num_scalars() > 0 && a.scalar_as<int>(0) == 1) HP_RETURN_IF_ERROR(gate.wait());
      std::vector<std::int32_t> values;
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { values.push_back(x); });
      std::size_t i = 0;
      for_each_i32(a.tensor(1), [&](std::int32_t& x) { x = values[i++]; });
      return Status::ok();
    });
    // add: every element of tensor 0 += scalar 0.
    add_scalar = add("add", [](const TaskArgs& a, BlockContext&) -> Status {
      const auto value = a.scalar_as<std::int32_t>(0);
      for_each_i32(a.tensor(0), [&](std::int32_t& x) { x += value; });
      return Status::ok();
    });
    config.observers = {&recorder};
  }

  int add(const std::string& name, TaskFunction f) {
    int slot = -1;
    EXPECT_TRUE(
        worker->register_callable(Callable::from_function(name, std::move(f), name + "-v1"), &slot)
            .is_ok());
    return slot;
  }

  Status run(const Orchestration& o) { return Orchestrator::run(*worker, o, config); }
  // A run of `tasks` chained tasks, each in its own scope, each adding 1 to counter[0].
  Status run_chain(int tasks, std::vector<std::int32_t>& counter) {
    return run([&](Orchestrator& o) -> Status {
      for (int i = 0; i < tasks; ++i) {
        auto scope = o.scope();
        HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(i32(counter)).scalar(1)));
      }
      return Status::ok();
    });
  }

  std::unique_ptr<ChipWorker> worker;
  Gate gate;
  Recorder recorder;
  OrchestratorConfig config;
  int fill = -1, copy = -1, add_scalar = -1;
};

using Edges = std::set<std::tuple<TaskId, DepKind, int, DepSource>>;

TEST_F(RuntimeOrchestrator, ReadAfterWriteWaitsForTheWriter) {
  std::vector<std::int32_t> buf(8, 0), out(8, -1);
  recorder.after_submit = [&](TaskId id) {
    if (id == 1) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(7).scalar(1)));
    return o.submit(copy, TaskArgs().input(i32(buf)).output_existing(i32(out)).scalar(0));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(8, 7));
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kRaw, 0, DepSource::kTensorMap}}));
  EXPECT_TRUE(recorder.edges(0).empty());
}

TEST_F(RuntimeOrchestrator, WriteAfterReadWaitsForTheReader) {
  std::vector<std::int32_t> buf(8, 5), out(8, -1);
  recorder.after_submit = [&](TaskId id) {
    if (id == 1) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(
        o.submit(copy, TaskArgs().input(i32(buf)).output_existing(i32(out)).scalar(1)));
    return o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(9));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(8, 5));  // read before the overwrite
  EXPECT_EQ(buf, std::vector<std::int32_t>(8, 9));
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kWar, 0, DepSource::kTensorMap}}));
}

TEST_F(RuntimeOrchestrator, WriteAfterWriteKeepsTheLastValue) {
  std::vector<std::int32_t> buf(8, 0);
  recorder.after_submit = [&](TaskId id) {
    if (id == 1) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(1).scalar(1)));
    return o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(2));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(buf, std::vector<std::int32_t>(8, 2));
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kWaw, 0, DepSource::kTensorMap}}));
}

TEST_F(RuntimeOrchestrator, InOutReadsTheWriterAndOrdersLaterReadersAndWriters) {
  std::vector<std::int32_t> buf(4, 0), out(4, -1);
  recorder.after_submit = [&](TaskId id) {
    if (id == 3) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(3).scalar(1)));
    HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(i32(buf)).scalar(4)));
    HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(i32(buf)).output_existing(i32(out))));
    return o.submit(add_scalar, TaskArgs().inout(i32(buf)).scalar(100));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(4, 7));
  EXPECT_EQ(buf, std::vector<std::int32_t>(4, 107));
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kRaw, 0, DepSource::kTensorMap}}));
  EXPECT_EQ(recorder.edges(2), (Edges{{1, DepKind::kRaw, 0, DepSource::kTensorMap}}));
  // Task 1's write covered task 0's entry; task 3 reads task 1's write and must wait for the
  // reader (task 2) before overwriting.
  EXPECT_EQ(recorder.edges(3), (Edges{{1, DepKind::kRaw, 0, DepSource::kTensorMap},
                                      {2, DepKind::kWar, 0, DepSource::kTensorMap}}));
}

TEST_F(RuntimeOrchestrator, DisjointStridedTilesAreIndependentAndOverlapsAreOrdered) {
  // A 4 x 8 matrix: columns [0, 4) and [4, 8) are strided views that share no byte; columns
  // [3, 5) overlap both.
  std::vector<std::int32_t> m(32, 0), out(8, -1);
  const std::vector<std::int64_t> stride = {8, 1};
  auto tile = [&](int col, int width) {
    return TensorView(m.data() + col, DType::kInt32, std::vector<std::int64_t>{4, width}, stride);
  };
  recorder.after_submit = [&](TaskId id) {
    if (id == 2) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(tile(0, 4)).scalar(1).scalar(1)));
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(tile(4, 4)).scalar(2)));
    return o.submit(copy, TaskArgs().input(tile(3, 2)).output_existing(i32(out)));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(recorder.edges(1).empty());  // right tile: independent of the left one
  EXPECT_EQ(recorder.edges(2), (Edges{{0, DepKind::kRaw, 0, DepSource::kTensorMap},
                                      {1, DepKind::kRaw, 0, DepSource::kTensorMap}}));
  EXPECT_EQ(out, (std::vector<std::int32_t>{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST_F(RuntimeOrchestrator, NoDepTensorsAreNeverOrderedButExplicitDependenciesAre) {
  std::vector<std::int32_t> buf(4, 0), out(4, -1);
  // Receives buf as NO_DEP and leaves it alone (the caller orders NO_DEP accesses).
  const int ignores = add("ignores", [](const TaskArgs&, BlockContext&) { return Status::ok(); });
  recorder.after_submit = [&](TaskId id) {
    if (id == 2) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    SubmitResult first;
    HP_RETURN_IF_ERROR(
        o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(6).scalar(1), &first));
    HP_RETURN_IF_ERROR(o.submit(ignores, TaskArgs().no_dep(i32(buf))));
    // Ordered only by the explicit dependency: reads buf through a NO_DEP argument.
    return o.submit(
        copy, TaskArgs().no_dep(i32(buf)).output_existing(i32(out)).set_dependencies({first.task}));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(recorder.edges(1).empty());
  EXPECT_EQ(recorder.edges(2), (Edges{{0, DepKind::kOrder, -1, DepSource::kExplicit}}));
  EXPECT_EQ(out, std::vector<std::int32_t>(4, 6));
}

// A predecessor found twice (a tensor and an explicit dependency) is one edge while it runs
// (order_after's stamp), and none once it completed; either way the dependent runs once, after.
TEST_F(RuntimeOrchestrator, APredecessorFoundTwiceIsOneEdgeOrNone) {
  std::vector<std::int32_t> buf(4, 0), out(4, -1), late(4, -1);
  recorder.after_submit = [&](TaskId id) {
    if (id == 1) gate.open();
  };
  const Status s = run([&](Orchestrator& o) -> Status {
    SubmitResult first;
    // Held at the gate until task 1 is submitted: task 1 links to it while it is running.
    HP_RETURN_IF_ERROR(
        o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(5).scalar(1), &first));
    HP_RETURN_IF_ERROR(o.submit(
        copy, TaskArgs().input(i32(buf)).output_existing(i32(out)).set_dependencies({first.task})));
    // Task 2 writes buf again, task 3 (after it completed) reads it twice over.
    SubmitResult second;
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(7), &second));
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);;) {
      {
        std::lock_guard lock(recorder.mu);
        if (recorder.statuses.count(second.task) != 0) break;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return Status::error(ErrorCode::kTimeout, "task 2 never completed");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return o.submit(copy, TaskArgs().input(i32(buf)).output_existing(i32(late)).set_dependencies(
                              {second.task}));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(4, 5));
  EXPECT_EQ(late, std::vector<std::int32_t>(4, 7));
  std::lock_guard lock(recorder.mu);
  for (TaskId id : {TaskId{1}, TaskId{3}}) {
    const auto& events = recorder.events[id];
    EXPECT_EQ(std::count(events.begin(), events.end(), std::string("start")), 1) << "task " << id;
  }
}

TEST_F(RuntimeOrchestrator, DependenciesOnLaterTasksAreRefused) {
  const Status s = run([&](Orchestrator& o) -> Status {
    Status self = o.submit(add_scalar, TaskArgs().scalar(0).set_dependencies({0}));
    EXPECT_EQ(self.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(self.message(), HasSubstr("not submitted yet"));
    return o.submit(add_scalar, TaskArgs().scalar(0).set_dependencies({5}));
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
}

TEST_F(RuntimeOrchestrator, IndependentTasksRunAtTheSameTime) {
  // Each task waits (with a deadline) until both have started: they finish only if the
  // scheduler ran them at once on the two vector cores.
  platform::WaitWord arrived;
  const int meet = add("meet", [&](const TaskArgs&, BlockContext&) -> Status {
    platform::add_and_wake(arrived, 1, false);
    std::uint32_t last = 0;
    const auto r = platform::wait_word(
        arrived, [](std::uint32_t v) { return v >= 2; }, platform::deadline_after(kGateTimeoutS),
        {}, nullptr, &last);
    HP_ENSURE(r == platform::WaitResult::kReady, ErrorCode::kTimeout,
              "the other task never ran alongside");
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(meet, TaskArgs()));
    return o.submit(meet, TaskArgs());
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(arrived.value.load(), 2u);
}

TEST_F(RuntimeOrchestrator, TasksReadyAtSubmitWhileEveryCoreIsBusyEachRunOnce) {
  // Both vector cores wait at the gate while 1000 independent tasks are submitted, each ready at
  // once: more than the orchestration thread's lane to the cores holds (ReadyLane::kCells), so
  // the rest wait in the ready queue. Each adds its number to its own element: run twice, or
  // not at all, it leaves another value.
  config.task_ring_slots = 2048;
  std::vector<std::int32_t> gated(2, -1), out(1000, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    for (int i = 0; i < 2; ++i) {
      TensorView element(gated.data() + i, DType::kInt32, {1});
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(element).scalar(7).scalar(1)));
    }
    for (int i = 0; i < 1000; ++i) {
      TensorView element(out.data() + i, DType::kInt32, {1});
      HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(element).scalar(i + 1)));
    }
    gate.open();
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(gated, (std::vector<std::int32_t>{7, 7}));
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(out[static_cast<std::size_t>(i)], i + 1) << "task " << i + 2;
}

TEST_F(RuntimeOrchestrator, SpmdTasksRunEveryBlockOfTheirShape) {
  std::mutex mu;
  std::multiset<std::tuple<TaskId, int, platform::CoreType, int>> ran;
  const int record = add("record", [&](const TaskArgs& a, BlockContext& b) -> Status {
    std::lock_guard lock(mu);
    ran.insert({a.scalar_as<TaskId>(0), b.block_idx(), b.core_type(), b.sub_block_idx()});
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(record, TaskArgs().scalar(TaskId{0}),
                                {.mode = LaunchMode::kCube, .block_num = 3}));
    HP_RETURN_IF_ERROR(o.submit(record, TaskArgs().scalar(TaskId{1}),
                                {.mode = LaunchMode::kVector, .block_num = 5}));
    HP_RETURN_IF_ERROR(
        o.submit(record, TaskArgs().scalar(TaskId{2}), {.mode = LaunchMode::kMix, .block_num = 1}));
    Status too_wide =
        o.submit(record, TaskArgs().scalar(TaskId{3}), {.mode = LaunchMode::kMix, .block_num = 2});
    EXPECT_EQ(too_wide.code(), ErrorCode::kInvalidArgument);
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::multiset<std::tuple<TaskId, int, platform::CoreType, int>> expected;
  for (int b = 0; b < 3; ++b) expected.insert({0, b, platform::CoreType::kCube, 0});
  for (int b = 0; b < 5; ++b) expected.insert({1, b, platform::CoreType::kVector, 0});
  expected.insert({2, 0, platform::CoreType::kCube, 0});
  expected.insert({2, 0, platform::CoreType::kVector, 0});
  expected.insert({2, 0, platform::CoreType::kVector, 1});
  EXPECT_EQ(ran, expected);
}

// Submit skips the launch checks for a config it accepted just before: a bad config right after
// a good one is still rejected, and a config accepted after a rejected one runs with its own gang.
TEST_F(RuntimeOrchestrator, EveryNewConfigIsCheckedBeforeItRuns) {
  std::mutex mu;
  std::multiset<std::pair<TaskId, int>> ran;
  const int record = add("record", [&](const TaskArgs& a, BlockContext& b) -> Status {
    std::lock_guard lock(mu);
    ran.insert({a.scalar_as<TaskId>(0), b.block_idx()});
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    const CallConfig good{.mode = LaunchMode::kVector, .block_num = 2};
    HP_RETURN_IF_ERROR(o.submit(record, TaskArgs().scalar(TaskId{0}), good));
    const CallConfig bad[] = {
        {.mode = LaunchMode::kVector, .block_num = 0},
        {.mode = LaunchMode::kVector, .block_num = 2, .num_flags = -1},
        {.mode = LaunchMode::kVector, .block_num = 2, .wait_timeout_s = -1.0},
        {.mode = LaunchMode::kMix, .block_num = 2},
    };
    for (const CallConfig& config : bad) {
      EXPECT_EQ(o.submit(record, TaskArgs().scalar(TaskId{99}), config).code(),
                ErrorCode::kInvalidArgument);
      HP_RETURN_IF_ERROR(o.submit(record, TaskArgs().scalar(TaskId{1}), good));
    }
    HP_RETURN_IF_ERROR(o.submit(record, TaskArgs().scalar(TaskId{2}),
                                {.mode = LaunchMode::kCube, .block_num = 3}));
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::multiset<std::pair<TaskId, int>> expected;
  for (int b = 0; b < 2; ++b) expected.insert({0, b});
  for (int i = 0; i < 4; ++i) {
    for (int b = 0; b < 2; ++b) expected.insert({1, b});
  }
  for (int b = 0; b < 3; ++b) expected.insert({2, b});
  EXPECT_EQ(ran, expected);
}

TEST_F(RuntimeOrchestrator, FullRingMakesSubmitWaitThenProceed) {
  // Ring 1 has 2 slots. Task 0 holds the oldest slot until the gate opens, and the gate opens
  // only when a submit blocks: the third submit must block, then proceed.
  config.task_ring_slots = 2;
  std::vector<std::int32_t> out(6, -1);
  recorder.when_blocked = [&] { gate.open(); };
  const Status s = run([&](Orchestrator& o) -> Status {
    for (int i = 0; i < 6; ++i) {
      auto scope = o.scope();
      TensorView element(out.data() + i, DType::kInt32, {1});
      HP_RETURN_IF_ERROR(o.submit(
          fill, TaskArgs().output_existing(element).scalar(i * 10).scalar(i == 0 ? 1 : 0)));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, (std::vector<std::int32_t>{0, 10, 20, 30, 40, 50}));
  std::lock_guard lock(recorder.mu);
  ASSERT_FALSE(recorder.blocked.empty());
  const RingState& first = recorder.blocked.front();
  EXPECT_EQ(first.ring, 1);
  EXPECT_EQ(first.live_slots, 2);
  EXPECT_EQ(first.slot_capacity, 2);
  EXPECT_EQ(first.oldest_task, 0u);
}

TEST_F(RuntimeOrchestrator, TenThousandChainedTasksThroughAFourSlotRing) {
  config.task_ring_slots = 4;
  std::vector<std::int32_t> counter(1, 0);
  constexpr int kTasks = 10000;
  const Status s = run_chain(kTasks, counter);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(counter[0], kTasks);
}

TEST_F(RuntimeOrchestrator, AOneSlotRingWakesEachSubmitWhenThePreviousTaskRetires) {
  // Every submit waits for the one slot: for the previous task to complete and be consumed.
  // Nothing else completes after it, so a submit woken by the completion before the slot was
  // consumed would wait until TIMEOUT. (That window is a few instructions wide: this catches it
  // now and then, and always with a delay injected into it.)
  config.task_ring_slots = 1;
  config.wait_timeout_s = 10;
  config.observers.clear();
  std::vector<std::int32_t> counter(1, 0);
  constexpr int kTasks = 20000;
  const Status s = run_chain(kTasks, counter);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(counter[0], kTasks);
}

TEST_F(RuntimeOrchestrator, ARingTooSmallForItsScopeIsADeadlockErrorNotAHang) {
  config.task_ring_slots = 2;
  std::vector<std::int32_t> a(1), b(1), c(1);
  Status third;
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1)));
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(b)).scalar(2)));
    // The root scope holds both slots of ring 0 until the run ends: nothing can be reclaimed.
    third = o.submit(fill, TaskArgs().output_existing(i32(c)).scalar(3));
    return third;
  });
  EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(third.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(third.message(), HasSubstr("deadlock"));
  EXPECT_THAT(third.message(), HasSubstr("ring 0 (scope depth 0): 2 of 2 slots live"));
  EXPECT_THAT(third.message(), HasSubstr("held by its open scope"));
  EXPECT_THAT(third.message(), HasSubstr("task_ring_slots"));
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(b[0], 2);
}

TEST_F(RuntimeOrchestrator, AHeapRingTooSmallForItsScopeIsADeadlockError) {
  config.heap_ring_bytes = 512;
  Status third, huge;
  const Status s = run([&](Orchestrator& o) -> Status {
    auto scope = o.scope();
    huge = o.submit(fill, TaskArgs().output(DType::kInt32, {1024}).scalar(1));
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(1)));
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(2)));
    third = o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(3));
    return third;
  });
  EXPECT_EQ(huge.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(huge.message(), HasSubstr("heap_ring_bytes"));
  EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(third.message(), HasSubstr("deadlock"));
  EXPECT_THAT(third.message(), HasSubstr("heap 512 of 512 bytes used"));
}

TEST_F(RuntimeOrchestrator, AFailingTaskFailsItsDependentsAndTheRunByName) {
  std::atomic<bool> dependent_ran{false};
  const int failing = add("failing", [](const TaskArgs&, BlockContext&) -> Status {
    return Status::error(ErrorCode::kInvalidArgument, "tile 3 is malformed");
  });
  const int marks = add("marks", [&](const TaskArgs&, BlockContext&) -> Status {
    dependent_ran = true;
    return Status::ok();
  });
  std::vector<std::int32_t> buf(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(failing, TaskArgs().output_existing(i32(buf))));
    Status dependent = o.submit(marks, TaskArgs().input(i32(buf)));
    // Either accepted (then skipped), or refused because the run already failed.
    if (!dependent.is_ok()) {
      EXPECT_EQ(dependent.code(), ErrorCode::kAborted);
    }
    return Status::ok();
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("task 0 (callable 'failing') failed"));
  EXPECT_THAT(s.message(), HasSubstr("tile 3 is malformed"));
  EXPECT_FALSE(dependent_ran.load());
  std::lock_guard lock(recorder.mu);
  if (recorder.statuses.count(1) != 0) {
    EXPECT_EQ(recorder.statuses[1].code(), ErrorCode::kAborted);
    EXPECT_THAT(recorder.statuses[1].message(), HasSubstr("task 0 (callable 'failing')"));
  }
}

TEST_F(RuntimeOrchestrator, AThrowingTaskIsAKernelFailureNamingTheTask) {
  const int throwing = add("throwing", [](const TaskArgs&, BlockContext&) -> Status {
    throw std::runtime_error("boom");
  });
  const Status s = run([&](Orchestrator& o) -> Status { return o.submit(throwing, TaskArgs()); });
  EXPECT_EQ(s.code(), ErrorCode::kKernelFailed);
  EXPECT_THAT(s.message(), HasSubstr("task 0 (callable 'throwing') failed"));
  EXPECT_THAT(s.message(), HasSubstr("boom"));
}

TEST_F(RuntimeOrchestrator, ScopesReleaseTheirOutputsForReuse) {
  // 16 iterations each make a 256-byte output in a 1 KiB heap ring: only possible when every
  // scope's outputs are released at its end.
  config.heap_ring_bytes = 1024;
  std::vector<std::int32_t> sums(16, -1);
  const int sum = add("sum", [](const TaskArgs& a, BlockContext&) -> Status {
    std::int32_t total = 0;
    for_each_i32(a.tensor(0), [&](std::int32_t& x) { total += x; });
    *static_cast<std::int32_t*>(a.tensor(1).data()) = total;
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    for (int i = 0; i < 16; ++i) {
      auto scope = o.scope();
      SubmitResult made;
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(i), &made));
      EXPECT_EQ(made.outputs.size(), 1u);
      TensorView element(sums.data() + i, DType::kInt32, {1});
      HP_RETURN_IF_ERROR(o.submit(sum, TaskArgs().input(made.outputs[0]).output_existing(element)));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sums[static_cast<std::size_t>(i)], 64 * i) << i;
  // The consumer found its input through the creator's entry.
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kRaw, 0, DepSource::kCreator}}));
}

TEST_F(RuntimeOrchestrator, AReaderKeepsACompletedCreatorsOutputPastItsScope) {
  // A 1 KiB heap ring. A fills a 256-byte OUTPUT with 5 and completes; the orchestration waits
  // until `mark` (ordered after A, so it runs once A's completion is over) ran. B then takes A's
  // output NO_DEP (not ordered, but it keeps A's memory until it completes) and waits at the
  // gate. A's scope ends; scopes of the same depth then make 256-byte outputs of 9 until one
  // finds the heap ring full, which opens the gate once every output made so far is written.
  // Had A's memory gone with its scope, one of them would have been written over it before B
  // read it.
  config.heap_ring_bytes = 1024;
  std::atomic<bool> marked{false};
  std::atomic<int> nines_made{0}, nines_written{0};  // submitted, and run
  std::atomic<std::int32_t> read_sum{-1};
  const auto wait_until = [](const std::function<bool()>& done) {
    const auto deadline = platform::deadline_after(kGateTimeoutS);
    while (!done() && platform::Clock::now() < deadline) std::this_thread::yield();
    return done();
  };
  recorder.when_blocked = [&] {
    EXPECT_TRUE(wait_until([&] { return nines_written.load() == nines_made.load(); }))
        << "the outputs submitted before the blocked one never ran";
    gate.open();
  };
  const int mark = add("mark", [&](const TaskArgs&, BlockContext&) -> Status {
    marked.store(true);
    return Status::ok();
  });
  const int nines = add("nines", [&](const TaskArgs& a, BlockContext&) -> Status {
    for_each_i32(a.tensor(0), [&](std::int32_t& x) { x = 9; });
    nines_written.fetch_add(1);
    return Status::ok();
  });
  const int gated_sum = add("gated_sum", [&](const TaskArgs& a, BlockContext&) -> Status {
    HP_RETURN_IF_ERROR(gate.wait());
    std::int32_t total = 0;
    for_each_i32(a.tensor(0), [&](std::int32_t& x) { total += x; });
    read_sum.store(total);
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    {
      auto scope = o.scope();
      SubmitResult made;
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(5), &made));
      HP_RETURN_IF_ERROR(o.submit(mark, TaskArgs().set_dependencies({made.task})));
      HP_ENSURE(wait_until([&] { return marked.load(); }), ErrorCode::kTimeout,
                "the task after A never ran");
      HP_RETURN_IF_ERROR(o.submit(gated_sum, TaskArgs().no_dep(made.outputs[0])));
    }
    for (int i = 0; i < 8; ++i) {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit(nines, TaskArgs().output(DType::kInt32, {64})));
      nines_made.fetch_add(1);  // after the submit: one that blocks is not made yet
    }
    gate.open();  // when no submit blocked
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(read_sum.load(), 5 * 64);
  std::lock_guard lock(recorder.mu);
  EXPECT_FALSE(recorder.blocked.empty()) << "A's memory was not held";
}

TEST_F(RuntimeOrchestrator, RunsOnOneWorkerReuseItsRingsWhateverTheRunBeforeLeft) {
  // Each run's rings (and heap ring) are kept by the worker for the next run of the same sizes:
  // runs after a clean run, a failed run, a run of other sizes and a run with gang tasks must
  // each see fresh slots and a fresh heap ring (the outputs are filled with the run's number).
  config.task_ring_slots = 8;
  config.heap_ring_bytes = 1024;
  const int failing = add("failing", [](const TaskArgs&, BlockContext&) -> Status {
    return Status::error(ErrorCode::kInvalidArgument, "failed on purpose");
  });
  const int sum = add("sum", [](const TaskArgs& a, BlockContext&) -> Status {
    std::int32_t total = 0;
    for_each_i32(a.tensor(0), [&](std::int32_t& x) { total += x; });
    *static_cast<std::int32_t*>(a.tensor(1).data()) = total;
    return Status::ok();
  });
  const int count_blocks =
      add("count_blocks", [](const TaskArgs& a, BlockContext& block) -> Status {
        static_cast<std::int32_t*>(a.tensor(0).data())[block.block_idx()] += 1;
        return Status::ok();
      });
  // 20 tasks through a ring of 8 slots, each output in the heap ring, summed into sums[i].
  auto sums_of_run = [&](int run_number, std::vector<std::int32_t>& sums) {
    return run([&](Orchestrator& o) -> Status {
      for (int i = 0; i < static_cast<int>(sums.size()); ++i) {
        auto scope = o.scope();
        SubmitResult made;
        HP_RETURN_IF_ERROR(
            o.submit(fill, TaskArgs().output(DType::kInt32, {64}).scalar(run_number), &made));
        TensorView element(sums.data() + i, DType::kInt32, {1});
        HP_RETURN_IF_ERROR(
            o.submit(sum, TaskArgs().input(made.outputs[0]).output_existing(element)));
      }
      return Status::ok();
    });
  };
  for (int run_number = 1; run_number <= 6; ++run_number) {
    if (run_number == 3) {  // a failed run in between
      std::vector<std::int32_t> buf(4, 0);
      const Status failed = run([&](Orchestrator& o) -> Status {
        HP_RETURN_IF_ERROR(o.submit(failing, TaskArgs().output_existing(i32(buf))));
        // Skipped, or refused (ABORTED) once the run failed: either leaves its slot behind.
        (void)o.submit(add_scalar, TaskArgs().inout(i32(buf)).scalar(1));
        return Status::ok();
      });
      EXPECT_EQ(failed.code(), ErrorCode::kInvalidArgument);
    }
    if (run_number == 5) config.task_ring_slots = 16;  // other sizes: new rings
    if (run_number == 6) {  // gang tasks (their launches live in the slots): two vector cores each
      std::vector<std::int32_t> buf(2, 0);
      const Status gangs = run([&](Orchestrator& o) -> Status {
        for (int i = 0; i < 20; ++i) {
          auto scope = o.scope();
          HP_RETURN_IF_ERROR(o.submit(count_blocks, TaskArgs().inout(i32(buf)),
                                      CallConfig{.mode = LaunchMode::kVector, .block_num = 2}));
        }
        return Status::ok();
      });
      ASSERT_TRUE(gangs.is_ok()) << gangs.to_string();
      EXPECT_EQ(buf, (std::vector<std::int32_t>{20, 20}));
    }
    std::vector<std::int32_t> sums(20, -1);
    const Status s = sums_of_run(run_number, sums);
    ASSERT_TRUE(s.is_ok()) << "run " << run_number << ": " << s.to_string();
    for (std::int32_t x : sums) ASSERT_EQ(x, 64 * run_number) << "run " << run_number;
  }
}

TEST_F(RuntimeOrchestrator, AnEscapedOutputOutlivesItsScope) {
  std::vector<std::int32_t> out(8, -1);
  const Status s = run([&](Orchestrator& o) -> Status {
    EXPECT_EQ(o.escape(TensorView()).code(), ErrorCode::kInvalidArgument);  // root scope
    TensorView kept;
    {
      auto outer = o.scope();
      {
        auto inner = o.scope();
        EXPECT_EQ(inner.depth(), 2);
        SubmitResult made;
        HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {8}).scalar(42), &made));
        kept = made.outputs[0];
        HP_RETURN_IF_ERROR(o.escape(kept));
        std::vector<std::int32_t> elsewhere(8);
        EXPECT_EQ(o.escape(i32(elsewhere)).code(), ErrorCode::kNotFound);
      }
      return o.submit(copy, TaskArgs().input(kept).output_existing(i32(out)));
    }
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(8, 42));
  EXPECT_EQ(recorder.edges(1), (Edges{{0, DepKind::kRaw, 0, DepSource::kCreator}}));
}

TEST_F(RuntimeOrchestrator, ObserversSeeEachTaskLifecycleInOrder) {
  std::vector<std::int32_t> buf(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(buf)).scalar(1)));
    auto scope = o.scope();
    return o.submit(add_scalar, TaskArgs().inout(i32(buf)).scalar(1),
                    {.mode = LaunchMode::kVector, .block_num = 1});
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::lock_guard lock(recorder.mu);
  const std::vector<std::string> lifecycle = {"submit", "ready", "start", "end", "complete"};
  EXPECT_EQ(recorder.events[0], lifecycle);
  EXPECT_EQ(recorder.events[1], lifecycle);
  EXPECT_EQ(recorder.scope_begins, 2);  // root + one nested
  EXPECT_EQ(recorder.scope_ends, 2);
  EXPECT_EQ(recorder.max_depth, 1);
  EXPECT_TRUE(recorder.statuses[1].is_ok()) << recorder.statuses[1].to_string();
}

TEST_F(RuntimeOrchestrator, ARandomDagOfSingleCoreAndGangTasksComputesWhatASerialRunDoes) {
  // Each task adds two random buffers into a third (INOUT), running as a single-core cube or
  // vector task, a 2-block vector gang or a mix task; the scheduler's fast paths (successors run
  // next on the completing core, batches of ready tasks) and gang placement interleave. A
  // missed edge shows as a wrong sum (and as a data race under ThreadSanitizer).
  constexpr int kBuffers = 12, kTasks = 3000, kPerScope = 100;
  config.task_ring_slots = 128;
  std::vector<std::int64_t> memory(kBuffers * 8, 1), expected(kBuffers, 1);
  auto buffer = [&](int b) { return TensorView(memory.data() + b * 8, DType::kInt64, {1}); };
  const int sum = add("sum", [](const TaskArgs& a, BlockContext& b) -> Status {
    const bool mix = a.scalar_as<int>(0) == 3;  // the update runs in one block of the launch
    if (b.block_idx() != 0 || (mix && b.core_type() != platform::CoreType::kCube))
      return Status::ok();
    auto value = [&](int i) { return *static_cast<std::int64_t*>(a.tensor(i).data()); };
    *static_cast<std::int64_t*>(a.tensor(2).data()) = (value(0) + value(1) + value(2)) % 1000003;
    return Status::ok();
  });
  std::mt19937 rng(11);
  struct Step {
    int a, b, c, shape;
  };
  std::vector<Step> steps;
  for (int t = 0; t < kTasks; ++t) {
    Step s{static_cast<int>(rng() % kBuffers), static_cast<int>(rng() % kBuffers),
           static_cast<int>(rng() % kBuffers), static_cast<int>(rng() % 4)};
    while (s.b == s.a) s.b = static_cast<int>(rng() % kBuffers);
    while (s.c == s.a || s.c == s.b) s.c = static_cast<int>(rng() % kBuffers);
    steps.push_back(s);
    expected[static_cast<std::size_t>(s.c)] =
        (expected[static_cast<std::size_t>(s.a)] + expected[static_cast<std::size_t>(s.b)] +
         expected[static_cast<std::size_t>(s.c)]) %
        1000003;
  }
  config.observers.clear();
  const Status status = run([&](Orchestrator& o) -> Status {
    for (int first = 0; first < kTasks; first += kPerScope) {
      auto scope = o.scope();
      for (int t = first; t < first + kPerScope; ++t) {
        const Step& s = steps[static_cast<std::size_t>(t)];
        const CallConfig shapes[] = {{.mode = LaunchMode::kVector},
                                     {.mode = LaunchMode::kCube},
                                     {.mode = LaunchMode::kVector, .block_num = 2},
                                     {.mode = LaunchMode::kMix, .block_num = 1}};
        HP_RETURN_IF_ERROR(o.submit(
            sum,
            TaskArgs().input(buffer(s.a)).input(buffer(s.b)).inout(buffer(s.c)).scalar(s.shape),
            shapes[s.shape]));
      }
    }
    return Status::ok();
  });
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  for (int b = 0; b < kBuffers; ++b)
    EXPECT_EQ(memory[static_cast<std::size_t>(b) * 8], expected[static_cast<std::size_t>(b)]) << b;
}

// The orchestrator caches slot -> callable per run (orchestrator.cpp); unregistering must
// invalidate it: a freed slot is NOT_FOUND at the next submit, a slot reused by another callable
// runs that callable, and tasks submitted before the change still run the callable they named.
TEST_F(RuntimeOrchestrator, TheCallableCacheFollowsUnregisterAndSlotReuse) {
  std::atomic<int> first_runs{0}, second_runs{0};
  int slot = add("first", [&](const TaskArgs&, BlockContext&) -> Status {
    HP_RETURN_IF_ERROR(gate.wait());  // still running after its slot is freed and reused
    ++first_runs;
    return Status::ok();
  });
  const std::uint64_t before = worker->callable_generation();
  int reused = -1;
  Status freed, reregistered;
  std::vector<std::int32_t> buf(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(slot, TaskArgs().inout(i32(buf))));  // cached
    HP_RETURN_IF_ERROR(o.submit(slot, TaskArgs().inout(i32(buf))));  // from the cache
    HP_RETURN_IF_ERROR(worker->unregister_callable(slot));
    freed = o.submit(slot, TaskArgs().inout(i32(buf)));
    HP_RETURN_IF_ERROR(worker->register_callable(Callable::from_function(
                                                     "second",
                                                     [&](const TaskArgs&, BlockContext&) {
                                                       ++second_runs;
                                                       return Status::ok();
                                                     },
                                                     "second-v1"),
                                                 &reused));
    reregistered = o.submit(reused, TaskArgs().inout(i32(buf)));
    gate.open();
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(freed.code(), ErrorCode::kNotFound) << freed.to_string();
  EXPECT_EQ(reused, slot);  // the freed slot was reused
  EXPECT_TRUE(reregistered.is_ok()) << reregistered.to_string();
  EXPECT_EQ(first_runs.load(), 2);
  EXPECT_EQ(second_runs.load(), 1);
  EXPECT_GT(worker->callable_generation(), before);
  std::lock_guard lock(recorder.mu);
  EXPECT_EQ(recorder.statuses.size(), 3u);
}

// More arguments than TaskArgs keeps in place (it moves them to the heap): all of them reach
// the task, and copies and moves keep them.
TEST_F(RuntimeOrchestrator, TasksWithManyArgumentsSeeEveryOne) {
  constexpr int kTensors = 9, kScalars = 11;
  std::vector<std::vector<std::int32_t>> bufs(kTensors, std::vector<std::int32_t>(4, 0));
  const int sum = add("sum_into_last", [](const TaskArgs& a, BlockContext&) -> Status {
    std::int64_t total = 0;
    for (int i = 0; i < a.num_scalars(); ++i) total += a.scalar_as<std::int32_t>(i);
    for (int i = 0; i + 1 < a.num_tensors(); ++i)
      total += static_cast<const std::int32_t*>(a.tensor(i).data())[0];
    static_cast<std::int32_t*>(a.tensor(a.num_tensors() - 1).data())[0] =
        static_cast<std::int32_t>(total);
    return Status::ok();
  });
  TaskArgs built;
  for (int i = 0; i < kTensors - 1; ++i) {
    bufs[static_cast<std::size_t>(i)][0] = 100 * (i + 1);
    built.input(i32(bufs[static_cast<std::size_t>(i)]));
  }
  built.output_existing(i32(bufs.back()));
  for (int i = 0; i < kScalars; ++i) built.scalar(i + 1);
  built.set_dependencies({0, 0, 0});
  built.dump({0, 1, 2, 3, 4, 5});
  const TaskArgs copied = built;
  TaskArgs moved = TaskArgs(copied);
  TaskArgs assigned;
  assigned.input(i32(bufs[0]));
  assigned = std::move(moved);
  EXPECT_EQ(assigned.num_tensors(), kTensors);
  EXPECT_EQ(assigned.num_scalars(), kScalars);
  EXPECT_EQ(assigned.explicit_dependencies().size(), 3u);
  EXPECT_TRUE(assigned.dump_marked(5));
  EXPECT_FALSE(assigned.dump_marked(6));
  EXPECT_EQ(assigned.tensor(kTensors - 1).data(), bufs.back().data());
  EXPECT_THROW(assigned.tensor(kTensors), std::out_of_range);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(bufs[0])).scalar(100)));
    return o.submit(sum, assigned);
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  // 100 + 200 + ... + 800 inputs, 1 + ... + 11 scalars
  EXPECT_EQ(bufs.back()[0], 3600 + 66);
  EXPECT_EQ(recorder.edges(1).count({0, DepKind::kOrder, -1, DepSource::kExplicit}), 1u);
}

TEST_F(RuntimeOrchestrator, BadRequestsGetNamedErrors) {
  Status s = run([&](Orchestrator& o) -> Status { return o.submit(12345, TaskArgs()); });
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  s = run([&](Orchestrator&) -> Status { throw std::runtime_error("orchestration bug"); });
  EXPECT_EQ(s.code(), ErrorCode::kKernelFailed);
  EXPECT_THAT(s.message(), HasSubstr("orchestration bug"));
  s = run([&](Orchestrator& o) -> Status {
    return o.submit(fill, TaskArgs().output_existing(TensorView(nullptr, DType::kInt32, {4})));
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  config.task_ring_slots = 0;
  EXPECT_EQ(run([](Orchestrator&) { return Status::ok(); }).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hp::runtime
