// Deferred completion: a task completes after its blocks returned, when its DeferredCompletion
// is completed or a word reaches a value, without holding a core; deadlines, failures and
// misuse. Ordering is checked without timing: the thread that completes a deferral waits for
// evidence (a later task ran on the only core) before it completes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/printers.h"
#include "int32_views.h"
#include "platform/wait.h"
#include "runtime/deferred_completion.h"
#include "runtime/orchestrator.h"

namespace hp::runtime {
namespace {

using platform::BlockContext;
using platform::LaunchMode;
using ::testing::HasSubstr;
using testing::i32;

// Waits (with a deadline) until `flag` is set.
bool wait_set(const std::atomic<bool>& flag, double seconds = 30) {
  const auto deadline = platform::deadline_after(seconds);
  while (!flag.load()) {
    if (platform::Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

class DeferredCompletionTest : public ::testing::Test {
 protected:
  // One vector core: a deferred task that held its core would keep every other task out.
  void SetUp() override {
    ASSERT_TRUE(ChipWorker::create({.num_cube = 1, .num_vector = 1}, &worker).is_ok());
    config.wait_timeout_s = 30;
  }

  int add(const std::string& name, TaskFunction f) {
    int slot = -1;
    EXPECT_TRUE(
        worker->register_callable(Callable::from_function(name, std::move(f), name + "-v1"), &slot)
            .is_ok());
    return slot;
  }
  Status run(const Orchestration& o) { return Orchestrator::run(*worker, o, config); }

  std::unique_ptr<ChipWorker> worker;
  OrchestratorConfig config;
};

TEST_F(DeferredCompletionTest, ATaskCompletesWhenItsDeferredCompletionIsCompleted) {
  std::mutex mu;
  DeferredCompletion done;
  std::atomic<bool> deferred{false}, other_ran{false};
  std::vector<std::int32_t> buf(4, 0), out(4, -1), other(4, 0);
  const int producer = add("producer", [&](const TaskArgs& a, BlockContext&) -> Status {
    for (int i = 0; i < 4; ++i) static_cast<std::int32_t*>(a.tensor(0).data())[i] = 7;
    std::lock_guard lock(mu);
    HP_RETURN_IF_ERROR(defer_completion(&done));
    deferred = true;
    return Status::ok();
  });
  const int copy = add("copy", [&](const TaskArgs& a, BlockContext&) -> Status {
    for (int i = 0; i < 4; ++i) {
      static_cast<std::int32_t*>(a.tensor(1).data())[i] =
          static_cast<const std::int32_t*>(a.tensor(0).data())[i];
    }
    return Status::ok();
  });
  const int mark = add("mark", [&](const TaskArgs&, BlockContext&) -> Status {
    other_ran = true;
    return Status::ok();
  });
  // The completer: only after an independent task ran on the only core (so the deferred task
  // did not hold it), and only then may the copy run.
  std::thread completer([&] {
    ASSERT_TRUE(wait_set(deferred));
    ASSERT_TRUE(wait_set(other_ran));
    std::lock_guard lock(mu);
    EXPECT_EQ(out, std::vector<std::int32_t>(4, -1));  // the successor has not run
    EXPECT_TRUE(done.complete());
    EXPECT_FALSE(done.complete());  // once
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(producer, TaskArgs().output_existing(i32(buf))));
    HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(i32(buf)).output_existing(i32(out))));
    return o.submit(mark, TaskArgs().inout(i32(other)));
  });
  completer.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, std::vector<std::int32_t>(4, 7));
  EXPECT_FALSE(done.complete());  // after the run: a no-op
}

TEST_F(DeferredCompletionTest, ATaskCompletesWhenAWordReachesItsTarget) {
  alignas(64) std::uint64_t word = 0;
  std::atomic<bool> other_ran{false};
  std::vector<std::int32_t> a(4, 0), b(4, 0), other(4, 0);
  const int wait_task =
      add("wait", [&](const TaskArgs&, BlockContext&) -> Status { return defer_until(&word, 3); });
  const int after = add("after", [&](const TaskArgs& args, BlockContext&) -> Status {
    // Runs only once the word reached 3.
    static_cast<std::int32_t*>(args.tensor(1).data())[0] =
        static_cast<std::int32_t>(__atomic_load_n(&word, __ATOMIC_ACQUIRE));
    return Status::ok();
  });
  const int mark = add("mark", [&](const TaskArgs&, BlockContext&) -> Status {
    other_ran = true;
    return Status::ok();
  });
  std::thread notifier([&] {
    ASSERT_TRUE(wait_set(other_ran));
    for (int i = 0; i < 3; ++i) __atomic_add_fetch(&word, 1, __ATOMIC_RELEASE);
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(wait_task, TaskArgs().output_existing(i32(a))));
    HP_RETURN_IF_ERROR(o.submit(after, TaskArgs().input(i32(a)).output_existing(i32(b))));
    return o.submit(mark, TaskArgs().inout(i32(other)));
  });
  notifier.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(b[0], 3);
}

TEST_F(DeferredCompletionTest, AnEventBeforeTheBlocksReturnCompletesTheTaskWhenTheyReturn) {
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  std::atomic<bool> returned{false};
  const int early = add("early", [&](const TaskArgs&, BlockContext&) -> Status {
    DeferredCompletion done;
    HP_RETURN_IF_ERROR(defer_completion(&done));
    EXPECT_TRUE(done.complete());
    returned = true;
    return Status::ok();
  });
  const int after = add("after", [&](const TaskArgs&, BlockContext&) -> Status {
    EXPECT_TRUE(returned.load());
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(early, TaskArgs().output_existing(i32(a))));
    return o.submit(after, TaskArgs().input(i32(a)).output_existing(i32(b)));
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST_F(DeferredCompletionTest, AFailedEventFailsTheTaskAndSkipsItsSuccessors) {
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  std::atomic<bool> after_ran{false};
  const int failing = add("failing", [&](const TaskArgs&, BlockContext&) -> Status {
    DeferredCompletion done;
    HP_RETURN_IF_ERROR(defer_completion(&done));
    std::thread([done]() mutable {
      done.complete(Status::error(ErrorCode::kPeerDead, "chip 1 died"));
    }).detach();
    return Status::ok();
  });
  const int after = add("after", [&](const TaskArgs&, BlockContext&) -> Status {
    after_ran = true;
    return Status::ok();
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(failing, TaskArgs().output_existing(i32(a))));
    return o.submit(after, TaskArgs().input(i32(a)).output_existing(i32(b)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kPeerDead) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("task 0 (callable 'failing') failed: chip 1 died"));
  EXPECT_FALSE(after_ran.load());
}

TEST_F(DeferredCompletionTest, ADeferralThatNeverCompletesTimesOutNamingTheTask) {
  config.wait_timeout_s = 0.3;
  alignas(64) std::uint64_t word = 0;
  DeferredCompletion kept;
  const int waits =
      add("waits", [&](const TaskArgs&, BlockContext&) -> Status { return defer_until(&word, 1); });
  const int forgotten = add("forgotten", [&](const TaskArgs&, BlockContext&) -> Status {
    return defer_completion(&kept);
  });
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  Status s = run([&](Orchestrator& o) -> Status {
    return o.submit(waits, TaskArgs().output_existing(i32(a)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("task 0 (callable 'waits') deferred its completion"));
  EXPECT_THAT(s.message(), HasSubstr("to reach 1 (it holds 0)"));
  s = run([&](Orchestrator& o) -> Status {
    return o.submit(forgotten, TaskArgs().output_existing(i32(b)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("waited for its DeferredCompletion"));
  EXPECT_FALSE(kept.complete());  // the deadline completed it; the run is over
}

TEST_F(DeferredCompletionTest, ABlockThatFailsAfterDeferringFailsTheTaskAtOnce) {
  // A long deadline: the failure must not wait for it.
  config.wait_timeout_s = 60;
  DeferredCompletion kept;
  const int bad = add("bad", [&](const TaskArgs&, BlockContext&) -> Status {
    HP_RETURN_IF_ERROR(defer_completion(&kept));
    return Status::error(ErrorCode::kInvalidArgument, "the block gave up");
  });
  std::vector<std::int32_t> a(4, 0);
  const auto start = platform::Clock::now();
  const Status s = run(
      [&](Orchestrator& o) -> Status { return o.submit(bad, TaskArgs().output_existing(i32(a))); });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("the block gave up"));
  EXPECT_LT(platform::Clock::now() - start, std::chrono::seconds(30));
  EXPECT_FALSE(kept.complete());
}

TEST_F(DeferredCompletionTest, AFailedRunEndsWaitsOnWordsAtOnce) {
  config.wait_timeout_s = 60;
  alignas(64) std::uint64_t word = 0;
  std::atomic<bool> waiting{false};
  const int waits = add("waits", [&](const TaskArgs&, BlockContext&) -> Status {
    HP_RETURN_IF_ERROR(defer_until(&word, 1));
    waiting = true;
    return Status::ok();
  });
  const int fails = add("fails", [&](const TaskArgs&, BlockContext&) -> Status {
    if (!wait_set(waiting)) return Status::error(ErrorCode::kTimeout, "never deferred");
    return Status::error(ErrorCode::kKernelFailed, "the peer failed");
  });
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  const auto start = platform::Clock::now();
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(waits, TaskArgs().output_existing(i32(a))));
    return o.submit(fails, TaskArgs().output_existing(i32(b)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kKernelFailed) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("the peer failed"));
  EXPECT_LT(platform::Clock::now() - start, std::chrono::seconds(30));
}

TEST_F(DeferredCompletionTest, OneBlockOfAGangDefersTheWholeTask) {
  ASSERT_TRUE(ChipWorker::create({.num_cube = 1, .num_vector = 2}, &worker).is_ok());
  DeferredCompletion done;
  std::atomic<bool> deferred{false}, after_ran{false};
  std::atomic<int> blocks{0};
  const int gang = add("gang", [&](const TaskArgs&, BlockContext& block) -> Status {
    if (block.block_idx() == 1) {
      HP_RETURN_IF_ERROR(defer_completion(&done));
      deferred = true;
    }
    ++blocks;
    return Status::ok();
  });
  const int after = add("after", [&](const TaskArgs&, BlockContext&) -> Status {
    after_ran = true;
    return Status::ok();
  });
  std::thread completer([&] {
    ASSERT_TRUE(wait_set(deferred));
    while (blocks.load() < 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(after_ran.load());
    EXPECT_TRUE(done.complete());
  });
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(gang, TaskArgs().output_existing(i32(a)),
                                {.mode = LaunchMode::kVector, .block_num = 2}));
    return o.submit(after, TaskArgs().input(i32(a)).output_existing(i32(b)));
  });
  completer.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(after_ran.load());
}

TEST_F(DeferredCompletionTest, MisuseIsRefused) {
  DeferredCompletion done;
  // Outside an orchestration (ChipWorker::run).
  const int alone = add(
      "alone", [&](const TaskArgs&, BlockContext&) -> Status { return defer_completion(&done); });
  std::vector<std::int32_t> a(4, 0);
  Status s = worker->run(alone, TaskArgs().output_existing(i32(a)), {});
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("outside a block of an orchestrated task"));
  // Twice in one task.
  const int twice = add("twice", [&](const TaskArgs&, BlockContext&) -> Status {
    HP_RETURN_IF_ERROR(defer_completion(&done));
    done.complete();
    alignas(64) static std::uint64_t word = 1;
    return defer_until(&word, 1);
  });
  s = run([&](Orchestrator& o) -> Status {
    return o.submit(twice, TaskArgs().output_existing(i32(a)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("already deferred its completion"));
  // From a plain thread.
  EXPECT_EQ(defer_until(nullptr, 1).code(), ErrorCode::kInvalidArgument);
  alignas(64) std::uint64_t word = 0;
  EXPECT_EQ(defer_until(&word, 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(DeferredCompletion().complete());
}

TEST_F(DeferredCompletionTest, ManyDeferredTasksCompleteFromAnotherThreadInAnyOrder) {
  // A stream of tasks, each deferred and completed by a helper thread in reverse batches,
  // chained through one buffer: the chain's order holds whatever order the events come in.
  constexpr int kTasks = 2000;
  std::mutex mu;
  std::vector<DeferredCompletion> pending;
  std::atomic<bool> finished{false};
  std::vector<std::int32_t> counter(1, 0);
  const int step = add("step", [&](const TaskArgs& a, BlockContext&) -> Status {
    static_cast<std::int32_t*>(a.tensor(0).data())[0] += 1;
    DeferredCompletion done;
    HP_RETURN_IF_ERROR(defer_completion(&done));
    std::lock_guard lock(mu);
    pending.push_back(std::move(done));
    return Status::ok();
  });
  std::thread completer([&] {
    while (!finished.load()) {
      std::vector<DeferredCompletion> batch;
      {
        std::lock_guard lock(mu);
        batch.swap(pending);
      }
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) EXPECT_TRUE(it->complete());
      std::this_thread::yield();
    }
  });
  const Status s = run([&](Orchestrator& o) -> Status {
    for (int i = 0; i < kTasks; ++i) {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit(step, TaskArgs().inout(i32(counter))));
    }
    return Status::ok();
  });
  finished = true;
  completer.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(counter[0], kTasks);
}

}  // namespace
}  // namespace hp::runtime
