// Chip: SPMD launch, block identities, cross-core flags, sync_all, failures and deadlines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "common/sanitized.h"
#include "platform/chip.h"
#include "platform/cpu_affinity.h"

namespace hp::platform {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Chip> make_chip(int num_cube, int num_vector, ChipConfig config = {}) {
  config.num_cube = num_cube;
  config.num_vector = num_vector;
  std::unique_ptr<Chip> chip;
  Status s = Chip::create(config, &chip);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return chip;
}

TEST(Chip, CreateRejectsBadCoreCounts) {
  std::unique_ptr<Chip> chip;
  EXPECT_EQ(Chip::create({.num_cube = 0, .num_vector = 0}, &chip).code(),
            ErrorCode::kInvalidArgument);
  Status s = Chip::create({.num_cube = 2, .num_vector = 3}, &chip);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("num_vector=3"));
  EXPECT_EQ(chip, nullptr);
}

TEST(Chip, CreateRejectsCpusOutsideTheProcessAffinity) {
  std::unique_ptr<Chip> chip;
  Status s = Chip::create({.num_cube = 1, .num_vector = 1, .cpus = {4000}}, &chip);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("CPU 4000"));
}

// Every (block, core type, sub-block) of each launch mode runs exactly once.
TEST(Chip, LaunchRunsEveryBlockExactlyOnce) {
  auto chip = make_chip(2, 4);
  struct Case {
    LaunchMode mode;
    int block_dim;
    std::set<std::tuple<int, CoreType, int>> expected;
  };
  std::vector<Case> cases = {
      {LaunchMode::kCube, 5, {}},    // waves: 5 blocks on 2 cube cores
      {LaunchMode::kVector, 9, {}},  // waves: 9 blocks on 4 vector cores
      {LaunchMode::kMix, 2, {}},
  };
  for (int b = 0; b < 5; ++b) cases[0].expected.insert({b, CoreType::kCube, 0});
  for (int b = 0; b < 9; ++b) cases[1].expected.insert({b, CoreType::kVector, 0});
  for (int g = 0; g < 2; ++g) {
    cases[2].expected.insert({g, CoreType::kCube, 0});
    cases[2].expected.insert({g, CoreType::kVector, 0});
    cases[2].expected.insert({g, CoreType::kVector, 1});
  }
  for (const Case& c : cases) {
    std::mutex mu;
    std::multiset<std::tuple<int, CoreType, int>> ran;
    Status s = chip->launch({.mode = c.mode, .block_dim = c.block_dim}, [&](BlockContext& ctx) {
      EXPECT_EQ(ctx.block_dim(), c.block_dim);
      EXPECT_EQ(ctx.sub_block_dim(),
                c.mode == LaunchMode::kMix && ctx.core_type() == CoreType::kVector ? 2 : 1);
      std::lock_guard lock(mu);
      ran.insert({ctx.block_idx(), ctx.core_type(), ctx.sub_block_idx()});
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(std::set(ran.begin(), ran.end()), c.expected) << to_string(c.mode);
    EXPECT_EQ(ran.size(), c.expected.size()) << to_string(c.mode);
  }
}

// A value written before set_flag is seen after wait_flag (release/acquire), for bulk data
// handed from each group's cube block to its vector blocks, many times over.
TEST(Chip, FlagsPublishWritesFromCubeToVector) {
  auto chip = make_chip(2, 4);
  constexpr int kTiles = 64, kTileWords = 256;
  for (int iteration = 0; iteration < 20; ++iteration) {
    std::vector<std::vector<int>> tiles(2, std::vector<int>(kTiles * kTileWords, 0));
    std::atomic<int> mismatches{0};
    Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 2}, [&](BlockContext& ctx) {
      auto& data = tiles[ctx.block_idx()];
      if (ctx.core_type() == CoreType::kCube) {
        for (int t = 0; t < kTiles; ++t) {
          for (int w = 0; w < kTileWords; ++w)
            data[t * kTileWords + w] = iteration * 100000 + t * 1000 + w;
          HP_RETURN_IF_ERROR(ctx.set_flag(ctx.block_idx()));
        }
        return Status::ok();
      }
      // Sub-block k reads the tiles t with t % 2 == k, each once its flag count reaches t+1.
      for (int t = ctx.sub_block_idx(); t < kTiles; t += ctx.sub_block_dim()) {
        HP_RETURN_IF_ERROR(ctx.wait_flag(ctx.block_idx(), std::uint32_t(t + 1)));
        for (int w = 0; w < kTileWords; ++w) {
          if (data[t * kTileWords + w] != iteration * 100000 + t * 1000 + w) ++mismatches;
        }
      }
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_EQ(mismatches.load(), 0) << "iteration " << iteration;
  }
}

TEST(Chip, FlagsStartAtZeroForEveryLaunch) {
  auto chip = make_chip(1, 1);
  for (int i = 0; i < 3; ++i) {
    std::uint32_t seen = 99;
    Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1}, [&](BlockContext& ctx) {
      seen = ctx.flag_value(3);
      return ctx.set_flag(3, 5);
    });
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(seen, 0u);
  }
}

// sync_all separates phases: after it, every block sees every other block's phase write.
TEST(Chip, SyncAllSeparatesPhases) {
  auto chip = make_chip(2, 4);
  constexpr int kRounds = 50;
  const int blocks = 2 * 3;
  std::vector<int> slots(blocks, -1);
  std::atomic<int> wrong{0};
  Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 2}, [&](BlockContext& ctx) {
    const int me = ctx.core_type() == CoreType::kCube
                       ? ctx.block_idx()
                       : 2 + ctx.block_idx() * 2 + ctx.sub_block_idx();
    for (int round = 0; round < kRounds; ++round) {
      slots[me] = round;
      HP_RETURN_IF_ERROR(ctx.sync_all());
      for (int other = 0; other < blocks; ++other) {
        if (slots[other] != round) ++wrong;
      }
      HP_RETURN_IF_ERROR(ctx.sync_all());
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(wrong.load(), 0);
}

// 8 cores on the process's CPUs (2 here): spinning waiters must not starve the setters.
TEST(Chip, EightCoresOnFewCpusRunToCompletion) {
  std::vector<int> cpus;
  ASSERT_TRUE(allowed_cpus(&cpus).is_ok());
  cpus.resize(std::min<std::size_t>(cpus.size(), 2));
  auto chip = make_chip(4, 4, {.cpus = cpus});
  EXPECT_TRUE(chip->oversubscribed());
  EXPECT_FALSE(chip->pinned());
  for (int launch = 0; launch < 100; ++launch) {
    Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 4}, [&](BlockContext& ctx) {
      for (std::uint32_t step = 1; step <= 10; ++step) {
        if (ctx.core_type() == CoreType::kCube) {
          HP_RETURN_IF_ERROR(ctx.set_flag(ctx.block_idx()));
        } else {
          HP_RETURN_IF_ERROR(ctx.wait_flag(ctx.block_idx(), step));
        }
        HP_RETURN_IF_ERROR(ctx.sync_all());
      }
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
}

TEST(Chip, WaitFlagTimesOutNamingTheFlagAndBlock) {
  auto chip = make_chip(1, 2);
  Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 1, .wait_timeout_s = 0.2},
                          [&](BlockContext& ctx) -> Status {
                            if (ctx.core_type() == CoreType::kVector && ctx.sub_block_idx() == 1) {
                              return ctx.wait_flag(7, 1);  // nobody ever sets flag 7
                            }
                            return Status::ok();
                          });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout);
  EXPECT_THAT(s.message(), HasSubstr("flag 7 >= 1"));
  EXPECT_THAT(s.message(), HasSubstr("sub-block 1 of 2"));
  EXPECT_THAT(s.message(), HasSubstr("HP_WAIT_TIMEOUT_S"));
}

TEST(Chip, SyncAllTimesOutCountingArrivals) {
  auto chip = make_chip(2, 2);
  Status s = chip->launch({.mode = LaunchMode::kVector, .block_dim = 2, .wait_timeout_s = 0.2},
                          [&](BlockContext& ctx) -> Status {
                            if (ctx.block_idx() == 0) return Status::ok();  // never arrives
                            return ctx.sync_all();
                          });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout);
  EXPECT_THAT(s.message(), HasSubstr("1 of 2 blocks arrived"));
}

// The first failure reaches the caller, and the other blocks' waits are cancelled (ABORTED)
// instead of running into their deadlines.
TEST(Chip, ErrorInOneBlockCancelsTheOthersAndReachesTheCaller) {
  auto chip = make_chip(2, 4);
  std::mutex mu;
  std::vector<ErrorCode> waiter_codes;
  Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 2, .wait_timeout_s = 60},
                          [&](BlockContext& ctx) -> Status {
                            if (ctx.core_type() == CoreType::kCube && ctx.block_idx() == 1) {
                              return Status::error(ErrorCode::kInvalidArgument, "bad tile {}", 42);
                            }
                            Status w = ctx.core_type() == CoreType::kCube ? ctx.sync_all()
                                                                          : ctx.wait_flag(0, 1);
                            std::lock_guard lock(mu);
                            waiter_codes.push_back(w.code());
                            return w;
                          });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad tile 42"));
  EXPECT_THAT(s.message(), HasSubstr("block 1 (cube"));
  // Waiters that were already running were cancelled; blocks not yet started were skipped.
  for (ErrorCode code : waiter_codes) EXPECT_EQ(code, ErrorCode::kAborted);
}

TEST(Chip, ExceptionInABlockBecomesKernelFailed) {
  auto chip = make_chip(1, 1);
  Status s =
      chip->launch({.mode = LaunchMode::kVector, .block_dim = 3}, [&](BlockContext& ctx) -> Status {
        if (ctx.block_idx() == 2) throw std::runtime_error("boom in block two");
        return Status::ok();
      });
  EXPECT_EQ(s.code(), ErrorCode::kKernelFailed);
  EXPECT_THAT(s.message(), HasSubstr("boom in block two"));
  EXPECT_THAT(s.message(), HasSubstr("block 2 (vector"));
  // The chip stays usable after a failed launch.
  EXPECT_TRUE(chip->launch({.mode = LaunchMode::kVector, .block_dim = 1},
                           [](BlockContext&) { return Status::ok(); })
                  .is_ok());
}

TEST(Chip, LaunchRejectsBadConfigs) {
  auto chip = make_chip(2, 2);
  auto ok = [](BlockContext&) { return Status::ok(); };
  EXPECT_EQ(chip->launch({.mode = LaunchMode::kMix, .block_dim = 3}, ok).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(chip->launch({.mode = LaunchMode::kCube, .block_dim = 0}, ok).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(chip->launch({.mode = LaunchMode::kCube, .block_dim = 1, .num_flags = -1}, ok).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(chip->launch({.mode = LaunchMode::kCube, .block_dim = 1}, Kernel()).code(),
            ErrorCode::kInvalidArgument);
}

TEST(Chip, FlagIdsOutOfRangeAreErrors) {
  auto chip = make_chip(1, 1);
  Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1, .num_flags = 4},
                          [](BlockContext& ctx) { return ctx.set_flag(4); });
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1, .num_flags = 4},
                   [](BlockContext& ctx) { return ctx.wait_flag(-1, 0); });
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
}

TEST(Chip, SyncAllRefusesBlocksRunningInWaves) {
  auto chip = make_chip(1, 1);
  Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 2},
                          [](BlockContext& ctx) { return ctx.sync_all(); });
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("waves"));
}

TEST(Chip, LaunchesFromSeveralThreadsAreSerialized) {
  auto chip = make_chip(1, 1);
  std::atomic<int> running{0}, overlap{0}, total{0};
  auto work = [&] {
    for (int i = 0; i < 50; ++i) {
      Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1}, [&](BlockContext&) {
        if (running.fetch_add(1) != 0) ++overlap;
        ++total;
        running.fetch_sub(1);
        return Status::ok();
      });
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 100);
  EXPECT_EQ(overlap.load(), 0);
}

TEST(Chip, PinsEachCoreToOneCpuWhenAsked) {
  std::vector<int> cpus;
  ASSERT_TRUE(allowed_cpus(&cpus).is_ok());
  const int cores = int(std::min<std::size_t>(cpus.size(), 2));
  cpus.resize(cores);
  auto chip = make_chip(1, 1, {.cpus = cpus, .pin = PinMode::kOn});
  ASSERT_TRUE(chip->pinned());
  std::mutex mu;
  std::vector<std::vector<int>> affinity(2);
  Status s = chip->launch({.mode = LaunchMode::kMix, .block_dim = 1}, [&](BlockContext& ctx) {
    std::vector<int> mine;
    HP_RETURN_IF_ERROR(current_thread_affinity(&mine));
    std::lock_guard lock(mu);
    affinity[ctx.core_idx()] = mine;
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(affinity[0], std::vector<int>{cpus[0]});
  EXPECT_EQ(affinity[1], std::vector<int>{cpus[1 % cores]});
}

TEST(Chip, AutoPinningLeavesOversubscribedCoresFree) {
  std::vector<int> cpus;
  ASSERT_TRUE(allowed_cpus(&cpus).is_ok());
  auto chip = make_chip(1, 2, {.cpus = {cpus[0]}, .pin = PinMode::kAuto});
  EXPECT_FALSE(chip->pinned());
  EXPECT_TRUE(chip->oversubscribed());
  std::vector<int> affinity;
  Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1},
                          [&](BlockContext&) { return current_thread_affinity(&affinity); });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  // confined to the chip's CPUs, not pinned per core
  EXPECT_EQ(affinity, std::vector<int>{cpus[0]});
}

TEST(Chip, LaunchFromOneOfItsOwnBlocksIsRefused) {
  auto chip = make_chip(1, 1);
  Status inner;
  Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1}, [&](BlockContext&) {
    inner = chip->launch({.mode = LaunchMode::kVector, .block_dim = 1},
                         [](BlockContext&) { return Status::ok(); });
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(inner.code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(inner.message(), HasSubstr("wait for itself"));
}

// After fork() the cores exist only in the parent: the child's launch must fail, not hang,
// and the child's destructor must not wait for threads it does not have.
TEST(Chip, LaunchInAForkedChildIsRefused) {
  auto chip = make_chip(1, 1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1},
                            [](BlockContext&) { return Status::ok(); });
    const bool refused = s.code() == ErrorCode::kFailedPrecondition;
    chip.reset();
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(chip->launch({.mode = LaunchMode::kCube, .block_dim = 1},
                           [](BlockContext&) { return Status::ok(); })
                  .is_ok());
}

// A timed-out sync_all cannot withdraw its arrival: retrying must not pass with a block missing.
TEST(Chip, ATimedOutSyncAllBreaksTheBarrierForTheLaunch) {
  auto chip = make_chip(2, 2);
  Status retry;
  Status s = chip->launch({.mode = LaunchMode::kVector, .block_dim = 2, .wait_timeout_s = 0.1},
                          [&](BlockContext& ctx) -> Status {
                            if (ctx.block_idx() == 1) return Status::ok();  // never arrives
                            Status first = ctx.sync_all();
                            EXPECT_EQ(first.code(), ErrorCode::kTimeout);
                            retry = ctx.sync_all();
                            return Status::ok();
                          });
  EXPECT_TRUE(s.is_ok()) << s.to_string();  // the kernel swallowed both errors
  EXPECT_EQ(retry.code(), ErrorCode::kAborted);
}

// Blocks in waves up to INT_MAX: the wave loop must not overflow when a failure skips the rest.
TEST(Chip, HugeBlockDimWithAnEarlyFailureEnds) {
  auto chip = make_chip(1, 2);
  Status s = chip->launch({.mode = LaunchMode::kVector, .block_dim = INT_MAX},
                          [](BlockContext& ctx) -> Status {
                            if (ctx.block_idx() == 0)
                              return Status::error(ErrorCode::kInternal, "stop");
                            return Status::ok();
                          });
  EXPECT_EQ(s.code(), ErrorCode::kInternal);
}

TEST(Chip, FlagCounterWrapIsAnError) {
  auto chip = make_chip(1, 1);
  Status s = chip->launch({.mode = LaunchMode::kCube, .block_dim = 1}, [](BlockContext& ctx) {
    HP_RETURN_IF_ERROR(ctx.set_flag(0, 0xFFFFFFF0u));
    return ctx.set_flag(0, 0x20);
  });
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("wrapped"));
}

TEST(Chip, LongKernelsSeeCancellation) {
  auto chip = make_chip(1, 1);
  std::atomic<bool> saw_cancel{false};
  Status s =
      chip->launch({.mode = LaunchMode::kMix, .block_dim = 1}, [&](BlockContext& ctx) -> Status {
        if (ctx.core_type() == CoreType::kCube) {
          HP_RETURN_IF_ERROR(ctx.wait_flag(0, 1));  // fail only once the vector block runs
          return Status::error(ErrorCode::kInternal, "fail");
        }
        HP_RETURN_IF_ERROR(ctx.set_flag(0));
        while (!ctx.cancelled()) std::this_thread::yield();  // a compute loop that polls
        saw_cancel = true;
        return Status::ok();
      });
  EXPECT_EQ(s.code(), ErrorCode::kInternal);
  EXPECT_TRUE(saw_cancel.load());
}

// Too many cores for the address space: a SYSTEM_ERROR, not std::terminate.
TEST(ChipDeathTest, ThreadCreationFailureIsAnError) {
  if (test::kSanitized) {
    GTEST_SKIP() << "sanitizers reserve more address space than the limit this test sets";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        rlimit limit{};
        getrlimit(RLIMIT_AS, &limit);
        limit.rlim_cur = 1ull << 30;  // 1 GiB: far fewer than 2048 thread stacks of 8 MiB
        setrlimit(RLIMIT_AS, &limit);
        std::unique_ptr<Chip> chip;
        Status s = Chip::create({.num_cube = 1024, .num_vector = 1024}, &chip);
        fprintf(stderr, "%s\n", s.to_string().c_str());
        _exit(s.code() == ErrorCode::kSystemError && chip == nullptr ? 3 : 4);
      },
      ::testing::ExitedWithCode(3), "cannot start chip core");
}

// A bad HP_* value makes Chip::create fail with INVALID_SETTING (in a fresh process, since
// settings are read once).
TEST(ChipDeathTest, InvalidSettingFailsCreate) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("HP_WAIT_TIMEOUT_S", "soon", 1);
        std::unique_ptr<Chip> chip;
        Status s = Chip::create({.num_cube = 1, .num_vector = 1}, &chip);
        fprintf(stderr, "%s\n", s.to_string().c_str());
        _exit(s.code() == ErrorCode::kInvalidSetting ? 3 : 4);
      },
      ::testing::ExitedWithCode(3), "HP_WAIT_TIMEOUT_S='soon'");
}

}  // namespace
}  // namespace hp::platform

namespace hp::platform {
namespace {

// A BlockLaunch runs the blocks its caller places: same BlockContext and failure semantics.
TEST(Chip, BlockLaunchRunsTheBlocksItsCallerPlaces) {
  std::unique_ptr<Chip> chip;
  ASSERT_TRUE(Chip::create({.num_cube = 1, .num_vector = 2}, &chip).is_ok());
  std::vector<int> seen;
  std::unique_ptr<BlockLaunch> launch;
  ASSERT_TRUE(chip->prepare_block_launch(
                      {.mode = LaunchMode::kVector, .block_dim = 4},
                      [&](BlockContext& ctx) -> Status {
                        EXPECT_EQ(ctx.block_dim(), 4);
                        seen.push_back(ctx.block_idx());
                        if (ctx.block_idx() == 2) {
                          return Status::error(ErrorCode::kInvalidArgument, "bad block");
                        }
                        return Status::ok();
                      },
                      1, &launch)
                  .is_ok());
  for (int b = 0; b < 4; ++b) launch->run_block(b, CoreType::kVector, 0, 1);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));  // block 3 skipped after the failure
  EXPECT_TRUE(launch->failed());
  EXPECT_EQ(launch->result().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(launch->result().message(), HasSubstr("block 2"));
  // Validated as launch() is.
  EXPECT_EQ(chip->prepare_block_launch(
                    {.mode = LaunchMode::kMix, .block_dim = 2},
                    [](BlockContext&) { return Status::ok(); }, 1, &launch)
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(chip->prepare_block_launch(
                    {.mode = LaunchMode::kCube, .block_dim = 2},
                    [](BlockContext&) { return Status::ok(); }, 3, &launch)
                .code(),
            ErrorCode::kInvalidArgument);
}

// Re-arming a finished BlockLaunch gives a fresh launch: flags at 0, no failure, the new kernel,
// block_dim and flag count.
TEST(Chip, ABlockLaunchIsReArmedInPlaceForTheNextKernel) {
  std::unique_ptr<Chip> chip;
  ASSERT_TRUE(Chip::create({.num_cube = 1, .num_vector = 1}, &chip).is_ok());
  std::unique_ptr<BlockLaunch> launch;
  ASSERT_TRUE(chip->prepare_block_launch(
                      {.mode = LaunchMode::kVector, .block_dim = 1, .num_flags = 4},
                      [](BlockContext& ctx) -> Status {
                        HP_RETURN_IF_ERROR(ctx.set_flag(3, 5));
                        return Status::error(ErrorCode::kInternal, "first");
                      },
                      1, &launch)
                  .is_ok());
  launch->run_block(0, CoreType::kVector, 0, 1);
  ASSERT_TRUE(launch->failed());
  const BlockLaunch* first = launch.get();
  std::vector<std::uint32_t> flags;
  int dim = 0;
  ASSERT_TRUE(chip->prepare_block_launch(
                      {.mode = LaunchMode::kVector, .block_dim = 2, .num_flags = 8},
                      [&](BlockContext& ctx) -> Status {
                        dim = ctx.block_dim();
                        for (int f = 0; f < 8; ++f) flags.push_back(ctx.flag_value(f));
                        return ctx.set_flag(7);
                      },
                      1, &launch)
                  .is_ok());
  EXPECT_EQ(launch.get(), first);  // the same object
  EXPECT_FALSE(launch->failed());
  EXPECT_TRUE(launch->result().is_ok());
  launch->run_block(0, CoreType::kVector, 0, 1);
  EXPECT_TRUE(launch->result().is_ok()) << launch->result().to_string();
  EXPECT_EQ(dim, 2);
  EXPECT_EQ(flags, std::vector<std::uint32_t>(8, 0));
  // Fewer flags, then more again: the flags set in between are back at 0.
  ASSERT_TRUE(chip->prepare_block_launch(
                      {.mode = LaunchMode::kVector, .block_dim = 1, .num_flags = 2},
                      [](BlockContext&) { return Status::ok(); }, 1, &launch)
                  .is_ok());
  ASSERT_TRUE(chip->prepare_block_launch(
                      {.mode = LaunchMode::kVector, .block_dim = 1, .num_flags = 8},
                      [&](BlockContext& ctx) -> Status {
                        EXPECT_EQ(ctx.flag_value(7), 0u);
                        EXPECT_EQ(ctx.set_flag(8).code(), ErrorCode::kOutOfRange);
                        return Status::ok();
                      },
                      1, &launch)
                  .is_ok());
  launch->run_block(0, CoreType::kVector, 0, 1);
  EXPECT_TRUE(launch->result().is_ok());
}

}  // namespace
}  // namespace hp::platform
