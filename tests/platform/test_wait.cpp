// wait_word: spin-then-futex waits with deadlines, cancellation and cross-process wake-ups.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "platform/wait.h"

namespace hp::platform {
namespace {

constexpr WaitPolicy kSleepAtOnce{.spin = 0, .yield_for = std::chrono::microseconds(0)};

TEST(Wait, ReadyValueReturnsAtOnce) {
  WaitWord w;
  w.value = 5;
  std::uint32_t last = 0;
  EXPECT_EQ(wait_word(
                w, [](std::uint32_t v) { return v == 5; }, deadline_after(10), {}, nullptr, &last),
            WaitResult::kReady);
  EXPECT_EQ(last, 5u);
}

TEST(Wait, PassesTheDeadlineWithTheLastValue) {
  WaitWord w;
  w.value = 1;
  std::uint32_t last = 0;
  EXPECT_EQ(wait_word(
                w, [](std::uint32_t v) { return v >= 2; }, deadline_after(0.05), kSleepAtOnce,
                nullptr, &last),
            WaitResult::kTimedOut);
  EXPECT_EQ(last, 1u);
}

TEST(Wait, CancellationIsSeenWithoutAWake) {
  WaitWord w;
  std::atomic<bool> cancel{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cancel = true;  // deliberately no wake_all: the bounded sleep slice must notice
  });
  std::uint32_t last = 0;
  EXPECT_EQ(wait_word(
                w, [](std::uint32_t v) { return v != 0; }, deadline_after(30), kSleepAtOnce,
                [&] { return cancel.load(); }, &last),
            WaitResult::kCancelled);
  t.join();
}

// Two threads ping-pong through two words, always sleeping on the futex: a lost wake-up would
// leave one side asleep until its (long) deadline, failing the test.
TEST(Wait, PingPongThroughTheFutexLosesNoWakeUps) {
  WaitWord ping, pong;
  constexpr std::uint32_t kRounds = 20000;
  std::thread other([&] {
    for (std::uint32_t i = 1; i <= kRounds; ++i) {
      std::uint32_t last = 0;
      ASSERT_EQ(wait_word(
                    ping, [i](std::uint32_t v) { return v >= i; }, deadline_after(20), kSleepAtOnce,
                    nullptr, &last),
                WaitResult::kReady);
      add_and_wake(pong, 1, false);
    }
  });
  for (std::uint32_t i = 1; i <= kRounds; ++i) {
    add_and_wake(ping, 1, false);
    std::uint32_t last = 0;
    ASSERT_EQ(wait_word(
                  pong, [i](std::uint32_t v) { return v >= i; }, deadline_after(20), kSleepAtOnce,
                  nullptr, &last),
              WaitResult::kReady);
  }
  other.join();
}

// The asymmetric eventcount (notify_event_light + WaitPolicy::light_notifiers): two threads
// ping-pong through counters, each notifying with the light notify and waiting with the heavy
// fence, always sleeping on the futex: a light notify that did not wake a sleeper would leave
// one side asleep until the deadline. (The race the heavy fence closes, a notifier's change
// still in its store buffer while it reads `waiters`, lasts nanoseconds: this test does not
// catch a missing fence.)
TEST(Wait, LightNotifyPingPongLosesNoWakeUps) {
  if (!light_notify_available()) GTEST_SKIP() << "membarrier is not available here";
  WaitPolicy policy = kSleepAtOnce;
  policy.light_notifiers = true;
  WaitWord ping_event, pong_event;
  std::atomic<std::uint32_t> ping{0}, pong{0};
  constexpr std::uint32_t kRounds = 5000;
  std::thread other([&] {
    for (std::uint32_t i = 1; i <= kRounds; ++i) {
      ASSERT_EQ(wait_event(
                    ping_event, [&] { return ping.load(std::memory_order_acquire) >= i; },
                    deadline_after(20), policy, nullptr),
                WaitResult::kReady);
      pong.store(i, std::memory_order_release);
      notify_event_light(pong_event);
    }
  });
  for (std::uint32_t i = 1; i <= kRounds; ++i) {
    ping.store(i, std::memory_order_release);
    notify_event_light(ping_event);
    ASSERT_EQ(wait_event(
                  pong_event, [&] { return pong.load(std::memory_order_acquire) >= i; },
                  deadline_after(20), policy, nullptr),
              WaitResult::kReady);
  }
  other.join();
}

TEST(Wait, WakesAWaiterInAnotherProcess) {
  void* mem =
      mmap(nullptr, sizeof(WaitWord), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* word = new (mem) WaitWord();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    usleep(20000);
    add_and_wake(*word, 7, /*process_shared=*/true);
    _exit(0);
  }
  std::uint32_t last = 0;
  const WaitPolicy shared{
      .spin = 0, .yield_for = std::chrono::microseconds(0), .process_shared = true};
  EXPECT_EQ(wait_word(
                *word, [](std::uint32_t v) { return v == 7; }, deadline_after(20), shared, nullptr,
                &last),
            WaitResult::kReady);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  munmap(mem, sizeof(WaitWord));
}

// A long spin phase still honours the deadline and cancellation.
TEST(Wait, LongSpinsHonourDeadlineAndCancellation) {
  WaitWord w;
  std::uint32_t last = 0;
  const WaitPolicy spin_long{.spin = 2'000'000'000, .yield_for = std::chrono::microseconds(0)};
  EXPECT_EQ(wait_word(
                w, [](std::uint32_t v) { return v != 0; }, deadline_after(0.05), spin_long, nullptr,
                &last),
            WaitResult::kTimedOut);
  EXPECT_EQ(wait_word(
                w, [](std::uint32_t v) { return v != 0; }, deadline_after(60), spin_long,
                [] { return true; }, &last),
            WaitResult::kCancelled);
}

// With a poll interval, wait_event looks at its condition once when it starts and then at most
// once per interval, through the spin and the yield phases; without one, at every step.
TEST(Wait, EventWaitLooksOncePerPollInterval) {
  WaitWord event;
  WaitPolicy policy{.spin = 1'000'000, .yield_for = std::chrono::seconds(60)};
  const auto looks_in = [&](std::chrono::milliseconds span) {
    int looks = 0;
    const auto start = Clock::now();
    EXPECT_EQ(wait_event(
                  event, [&] { return ++looks < 0; }, start + span, policy, nullptr),
              WaitResult::kTimedOut);
    const auto elapsed = Clock::now() - start;
    return std::pair{looks, elapsed};
  };
  policy.poll_interval = std::chrono::milliseconds(10);
  const auto [sparse, elapsed] = looks_in(std::chrono::milliseconds(100));
  EXPECT_GE(sparse, 2);
  EXPECT_LE(sparse, 1 + elapsed / policy.poll_interval);
  policy.poll_interval = std::chrono::nanoseconds(0);
  EXPECT_GT(looks_in(std::chrono::milliseconds(100)).first, 100);
}

// ... and still sees the event: a notify reaches a waiter that looks every 5 ms.
TEST(Wait, EventWaitWithAPollIntervalSeesTheNotify) {
  WaitWord event;
  std::atomic<bool> flag{false};
  for (const auto yield_for :
       {std::chrono::microseconds(0), std::chrono::microseconds(60'000'000)}) {
    flag = false;
    const WaitPolicy policy{
        .spin = 0, .yield_for = yield_for, .poll_interval = std::chrono::milliseconds(5)};
    std::thread notifier([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      flag.store(true, std::memory_order_release);
      notify_event(event, false);
    });
    EXPECT_EQ(wait_event(
                  event, [&] { return flag.load(std::memory_order_acquire); }, deadline_after(60),
                  policy, nullptr),
              WaitResult::kReady);
    notifier.join();
  }
}

// The look right before sleeping counts even when the poll interval has not passed: a waiter
// that finds its condition there returns at once (the defect looked in a loop until the
// interval passed: millions of looks).
TEST(Wait, EventWaitReturnsOnItsLastLookBeforeSleeping) {
  WaitWord event;
  const WaitPolicy policy{.spin = 0,
                          .yield_for = std::chrono::microseconds(0),
                          .poll_interval = std::chrono::seconds(2)};
  int looks = 0;
  EXPECT_EQ(wait_event(
                event, [&] { return ++looks >= 2; }, deadline_after(60), policy, nullptr),
            WaitResult::kReady);
  EXPECT_EQ(looks, 2);
}

TEST(Wait, HugeDeadlinesDoNotOverflow) {
  const auto d = deadline_after(1e30);
  EXPECT_GT(d, Clock::now() + std::chrono::hours(24 * 300));
}

}  // namespace
}  // namespace hp::platform
