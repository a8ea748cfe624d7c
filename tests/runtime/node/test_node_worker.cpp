// The node level (L3): chips as processes, next-level and sub tasks with dependencies inferred
// across levels, callables by handle, the collectives, deferred completion on chips, and the
// failures a chip can have (death, hang, failing task, failing start), each a named error
// within the deadline. Run with 2 and 4 chips.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/printers.h"
#include "common/sanitized.h"
#include "runtime/deferred_completion.h"
#include "runtime/node/node_worker.h"
#include "shmem/shmem.h"

namespace hp::runtime {
namespace {

using platform::BlockContext;
using ::testing::HasSubstr;

std::string test_library(const char* name) {
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string dir(exe, n > 0 ? std::size_t(n) : 0);
  return dir.substr(0, dir.rfind('/')) + "/libhyper_parallel_test_" + name + ".so";
}

std::int32_t* i32(const TensorView& t) { return static_cast<std::int32_t*>(t.data()); }

// fill: tensor 0 (int32) = scalar 0 + this chip's PE; scalar 1 set: also writes the process
// id into element 1.
Status fill(const TaskArgs& a, BlockContext&) {
  std::int32_t* out = i32(a.tensor(0));
  for (std::int64_t i = 0; i < a.tensor(0).numel(); ++i) {
    out[i] = a.scalar_as<std::int32_t>(0) + shmem::my_pe();
  }
  if (a.num_scalars() > 1) out[1] = ::getpid();
  return Status::ok();
}

// add_one: tensor 1 = tensor 0 + 1 (int32), wherever it runs.
Status add_one(const TaskArgs& a, BlockContext&) {
  const std::int32_t* in = i32(a.tensor(0));
  std::int32_t* out = i32(a.tensor(1));
  for (std::int64_t i = 0; i < a.tensor(0).numel(); ++i) out[i] = in[i] + 1;
  return Status::ok();
}

class NodeWorkerTest : public ::testing::TestWithParam<int> {
 protected:
  void create(NodeWorkerConfig config = {}) {
    config.chips = GetParam();
    config.heap_bytes = 16 << 20;
    config.tensor_bytes = 8 << 20;
    if (config.scratch_bytes == (2u << 20)) config.scratch_bytes = 1 << 20;
    if (!config.wait_timeout_s) config.wait_timeout_s = 60;
    ASSERT_TRUE(NodeWorker::create(config, &worker).is_ok());
    fill_handle = add("fill", fill);
    add_handle = add("add_one", add_one);
  }
  CallableHandle add(const std::string& name, TaskFunction f) {
    CallableHandle h;
    EXPECT_TRUE(
        worker->register_callable(Callable::from_function(name, std::move(f), name + "-v1"), &h)
            .is_ok());
    return h;
  }
  SymmetricTensor tensor(DType dtype, std::initializer_list<std::int64_t> shape) {
    SymmetricTensor t;
    EXPECT_TRUE(worker->alloc(dtype, shape, &t).is_ok());
    return t;
  }
  int chips() const { return GetParam(); }
  // Starts the created worker and runs one next-level task that kills its chip (chip 1); the
  // run's status.
  Status run_a_task_that_kills_chip_1() {
    const CallableHandle die = add("die", [](const TaskArgs&, BlockContext&) -> Status {
      ::raise(SIGKILL);
      return Status::ok();
    });
    HP_RETURN_IF_ERROR(worker->start());
    const SymmetricTensor buf = tensor(DType::kInt32, {8});
    return worker->run([&](NodeOrchestrator& o) -> Status {
      return o.submit_next_level(die, TaskArgs().output_existing(buf.on(1)), {}, 1);
    });
  }

  std::unique_ptr<NodeWorker> worker;
  CallableHandle fill_handle, add_handle;
};

TEST_P(NodeWorkerTest, NextLevelTasksRunOnTheirChipsProcesses) {
  create();
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor buf = tensor(DType::kInt32, {8});
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    for (int c = 0; c < chips(); ++c) {
      HP_RETURN_IF_ERROR(o.submit_next_level(
          fill_handle, TaskArgs().output_existing(buf.on(c)).scalar(100 * c).scalar(1), {}, c));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int c = 0; c < chips(); ++c) {
    EXPECT_EQ(i32(buf.on(c))[0], 100 * c + c) << "chip " << c;
    EXPECT_EQ(i32(buf.on(c))[1], worker->chip_pid(c)) << "chip " << c;
    EXPECT_NE(worker->chip_pid(c), ::getpid());
  }
  EXPECT_TRUE(worker->close().is_ok());
}

TEST_P(NodeWorkerTest, DependenciesAreInferredAcrossChipsAndSubWorkers) {
  create();
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor a = tensor(DType::kInt32, {64});
  // chip 0 fills a.on(0); a sub task adds one into a.on(last); the last chip adds one into
  // a.on(0) again (WAR on a.on(0): after the sub task read it; RAW on a.on(last)); repeated.
  const int last = chips() - 1;
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    for (int round = 0; round < 20; ++round) {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit_next_level(
          fill_handle, TaskArgs().output_existing(a.on(0)).scalar(round * 10), {}, 0));
      HP_RETURN_IF_ERROR(
          o.submit_sub(add_handle, TaskArgs().input(a.on(0)).output_existing(a.on(last))));
      HP_RETURN_IF_ERROR(o.submit_next_level(
          add_handle, TaskArgs().input(a.on(last)).output_existing(a.on(0)), {}, last));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  // The last round: fill 190 (+ PE 0), +1 on the sub-worker, +1 on the last chip.
  for (int i = 0; i < 64; ++i) ASSERT_EQ(i32(a.on(0))[i], 192) << i;
}

TEST_P(NodeWorkerTest, AnyChipSpreadsTasks) {
  create();
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor out = tensor(DType::kInt32, {32, 16});
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    for (int t = 0; t < 32; ++t) {
      const TensorView row = out.on(0);
      TensorView one(static_cast<std::int32_t*>(row.data()) + 16 * t, DType::kInt32, {16});
      HP_RETURN_IF_ERROR(o.submit_next_level(fill_handle,
                                             TaskArgs().output_existing(one).scalar(1000), {},
                                             NodeOrchestrator::kAnyChip));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int t = 0; t < 32; ++t) {
    const int v = i32(out.on(0))[16 * t];
    EXPECT_GE(v, 1000);
    EXPECT_LT(v, 1000 + chips());
  }
}

TEST_P(NodeWorkerTest, CollectivesMatchTheirDefinitions) {
  NodeWorkerConfig config;
  config.scratch_bytes = 4096;  // chunks: every collective here takes several
  create(config);
  ASSERT_TRUE(worker->start().is_ok());
  const int n = chips();
  constexpr std::int64_t kCount = 3001;
  const SymmetricTensor sum = tensor(DType::kFP32, {kCount});
  const SymmetricTensor max = tensor(DType::kInt64, {kCount});
  const SymmetricTensor bcast = tensor(DType::kInt32, {kCount});
  const SymmetricTensor gather_in = tensor(DType::kInt32, {kCount});
  const SymmetricTensor gather_out = tensor(DType::kInt32, {n, kCount});
  const SymmetricTensor rs_in = tensor(DType::kFP64, {n, kCount});
  const SymmetricTensor rs_out = tensor(DType::kFP64, {kCount});
  const SymmetricTensor a2a_in = tensor(DType::kInt32, {n, kCount});
  const SymmetricTensor a2a_out = tensor(DType::kInt32, {n, kCount});
  for (int c = 0; c < n; ++c) {
    for (std::int64_t i = 0; i < kCount; ++i) {
      static_cast<float*>(sum.on(c).data())[i] = float(i % 7) + float(c);
      static_cast<std::int64_t*>(max.on(c).data())[i] = (i * 31 + c * 17) % 101;
      i32(bcast.on(c))[i] = c == 1 % n ? std::int32_t(i * 3) : -1;
      i32(gather_in.on(c))[i] = std::int32_t(c * 100000 + i);
      for (int b = 0; b < n; ++b) {
        static_cast<double*>(rs_in.on(c).data())[b * kCount + i] = double(c + b) + 0.5 * double(i);
        i32(a2a_in.on(c))[b * kCount + i] = std::int32_t(c * 1000000 + b * 10000 + i % 10000);
      }
    }
  }
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.allreduce(sum));
    HP_RETURN_IF_ERROR(o.allreduce(max, CollectiveOp::kMax));
    HP_RETURN_IF_ERROR(o.broadcast(bcast, 1 % n));
    HP_RETURN_IF_ERROR(o.allgather(gather_out, gather_in));
    HP_RETURN_IF_ERROR(o.reduce_scatter(rs_out, rs_in));
    return o.all_to_all(a2a_out, a2a_in);
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int c = 0; c < n; ++c) {
    for (std::int64_t i = 0; i < kCount; ++i) {
      float want = 0;
      std::int64_t want_max = 0;
      double want_rs = 0;
      for (int q = 0; q < n; ++q) {
        want += float(i % 7) + float(q);
        want_max = std::max(want_max, (i * 31 + q * 17) % 101);
        want_rs += double(q + c) + 0.5 * double(i);
      }
      ASSERT_EQ(static_cast<float*>(sum.on(c).data())[i], want) << c << " " << i;
      ASSERT_EQ(static_cast<std::int64_t*>(max.on(c).data())[i], want_max) << c << " " << i;
      ASSERT_EQ(i32(bcast.on(c))[i], std::int32_t(i * 3)) << c << " " << i;
      ASSERT_EQ(static_cast<double*>(rs_out.on(c).data())[i], want_rs) << c << " " << i;
      for (int q = 0; q < n; ++q) {
        ASSERT_EQ(i32(gather_out.on(c))[q * kCount + i], std::int32_t(q * 100000 + i));
        ASSERT_EQ(i32(a2a_out.on(c))[q * kCount + i],
                  std::int32_t(q * 1000000 + c * 10000 + i % 10000));
      }
    }
  }
}

TEST_P(NodeWorkerTest, LibraryCallablesReachChipsAfterStartFunctionOnesDoNot) {
  create();
  ASSERT_TRUE(worker->start().is_ok());
  Callable lib;
  const Status loaded =
      Callable::from_library(test_library("node_kernels"), "hp_node_test_fill_pe", &lib);
  ASSERT_TRUE(loaded.is_ok()) << loaded.to_string();
  CallableHandle h, again;
  ASSERT_TRUE(worker->register_callable(lib, &h).is_ok());
  ASSERT_TRUE(worker->register_callable(lib, &again).is_ok());
  EXPECT_EQ(h, again);
  EXPECT_EQ(worker->callable_references(h), 2);
  EXPECT_EQ(h.hashid(), lib.handle().hashid());
  const SymmetricTensor out = tensor(DType::kInt32, {4});
  for (int round = 0; round < 2; ++round) {
    const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
      for (int c = 0; c < chips(); ++c) {
        HP_RETURN_IF_ERROR(
            o.submit_next_level(h, TaskArgs().output_existing(out.on(c)).scalar(7), {}, c));
      }
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    for (int c = 0; c < chips(); ++c) EXPECT_EQ(i32(out.on(c))[3], 7 + c);
  }
  EXPECT_TRUE(worker->unregister_callable(h).is_ok());
  EXPECT_EQ(worker->callable_references(h), 1);
  EXPECT_TRUE(worker->unregister_callable(again).is_ok());
  EXPECT_EQ(worker->unregister_callable(h).code(), ErrorCode::kNotFound);
  const Status gone = worker->run([&](NodeOrchestrator& o) -> Status {
    return o.submit_next_level(h, TaskArgs().output_existing(out.on(0)).scalar(1), {}, 0);
  });
  EXPECT_EQ(gone.code(), ErrorCode::kNotFound) << gone.to_string();
  // A function callable now cannot reach the chips.
  CallableHandle late;
  const Status refused =
      worker->register_callable(Callable::from_function("late", add_one, "late-v1"), &late);
  EXPECT_EQ(refused.code(), ErrorCode::kFailedPrecondition) << refused.to_string();
  EXPECT_THAT(refused.message(), HasSubstr("before start()"));
}

TEST_P(NodeWorkerTest, AKernelLibraryWithAnUnresolvedSymbolFailsAtRegistration) {
  Callable lib;
  const Status s =
      Callable::from_library(test_library("unresolved_kernel"), "hp_node_test_unresolved", &lib);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("hp_node_test_missing_symbol"));
  EXPECT_THAT(s.message(), HasSubstr("ldd -r"));
}

TEST_P(NodeWorkerTest, BadSubmissionsAreRefused) {
  create();
  std::vector<std::int32_t> private_memory(8);
  Status s = worker->run([](NodeOrchestrator&) { return Status::ok(); });
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  ASSERT_TRUE(worker->start().is_ok());
  EXPECT_EQ(worker->start().code(), ErrorCode::kFailedPrecondition);
  const SymmetricTensor buf = tensor(DType::kInt32, {8});
  auto one = [&](auto submit) {
    return worker->run([&](NodeOrchestrator& o) { return submit(o); });
  };
  s = one([&](NodeOrchestrator& o) {
    return o.submit_next_level(
        fill_handle,
        TaskArgs().output_existing(TensorView(private_memory.data(), DType::kInt32, {8})).scalar(1),
        {}, 0);
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("not in the node's shared memory"));
  s = one([&](NodeOrchestrator& o) {
    return o.submit_next_level(fill_handle, TaskArgs().output_existing(buf.on(0)).scalar(1), {},
                               chips());
  });
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange) << s.to_string();
  s = one([&](NodeOrchestrator& o) {
    return o.submit_next_level(fill_handle, TaskArgs().output(DType::kInt32, {8}).scalar(1), {}, 0);
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  s = one([&](NodeOrchestrator& o) {
    return o.submit_sub(CallableHandle{}, TaskArgs().output_existing(buf.on(0)));
  });
  EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
  // Sub tasks take any memory, and the worker is still sound.
  s = one([&](NodeOrchestrator& o) {
    return o.submit_sub(add_handle, TaskArgs().input(buf.on(0)).output_existing(
                                        TensorView(private_memory.data(), DType::kInt32, {8})));
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(private_memory[0], 1);
}

TEST_P(NodeWorkerTest, AFailingChipTaskFailsTheRunAndTheNextRunWorks) {
  create();
  const CallableHandle bad = add("bad", [](const TaskArgs&, BlockContext&) -> Status {
    return Status::error(ErrorCode::kInvalidArgument, "bad input on purpose");
  });
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor buf = tensor(DType::kInt32, {8});
  Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit_next_level(bad, TaskArgs().output_existing(buf.on(1)), {}, 1));
    // Depends on the failed task: skipped.
    return o.submit_next_level(add_handle, TaskArgs().input(buf.on(1)).output_existing(buf.on(1)),
                               {}, 1);
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("bad input on purpose"));
  EXPECT_THAT(s.message(), HasSubstr("chip 1"));
  s = worker->run([&](NodeOrchestrator& o) -> Status {
    return o.submit_next_level(fill_handle, TaskArgs().output_existing(buf.on(1)).scalar(5), {}, 1);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(i32(buf.on(1))[0], 6);
}

TEST_P(NodeWorkerTest, AChipThatDiesIsANamedErrorAndTheWorkerIsThenRefused) {
  create();
  const auto start = std::chrono::steady_clock::now();
  Status s = run_a_task_that_kills_chip_1();
  EXPECT_EQ(s.code(), ErrorCode::kPeerDead) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr(fmt::format("chip 1 (pid {}) was killed by signal 9",
                                                 worker->chip_pid(1))));
  EXPECT_THAT(s.message(), HasSubstr("callable 'die'"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  s = worker->run([](NodeOrchestrator&) { return Status::ok(); });
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("lost a chip"));
  EXPECT_EQ(worker->close().code(), ErrorCode::kPeerDead);
  // A failed worker does not poison the next one.
  worker.reset();
  create();
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor again = tensor(DType::kInt32, {8});
  s = worker->run([&](NodeOrchestrator& o) -> Status {
    return o.submit_next_level(fill_handle, TaskArgs().output_existing(again.on(1)).scalar(3), {},
                               1);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

// A host that ignores SIGCHLD has its children reaped by the kernel: waitpid never sees the
// chips. The worker still notices a chip's end (its pidfd), names it, and closes.
TEST_P(NodeWorkerTest, AChipThatDiesInAHostIgnoringSigchldIsANamedErrorAndCloseReturns) {
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGCHLD, &ignore, &previous), 0);
  NodeWorkerConfig config;
  config.wait_timeout_s = 20;
  create(config);
  const Status s = run_a_task_that_kills_chip_1();
  EXPECT_EQ(s.code(), ErrorCode::kPeerDead) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr(fmt::format("chip 1 (pid {}) ended", worker->chip_pid(1))));
  EXPECT_THAT(s.message(), HasSubstr("ignore SIGCHLD"));
  EXPECT_EQ(worker->close().code(), ErrorCode::kPeerDead);
  ASSERT_EQ(::sigaction(SIGCHLD, &previous, nullptr), 0);
}

TEST_P(NodeWorkerTest, AHungChipIsATimeoutNamingItAndCloseKillsIt) {
  NodeWorkerConfig config;
  config.wait_timeout_s = 1;
  create(config);
  const CallableHandle hang = add("hang", [](const TaskArgs&, BlockContext&) -> Status {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor buf = tensor(DType::kInt32, {8});
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    return o.submit_next_level(hang, TaskArgs().output_existing(buf.on(0)), {}, 0);
  });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("callable 'hang'"));
  EXPECT_THAT(s.message(), HasSubstr(fmt::format("chip 0 (pid {})", worker->chip_pid(0))));
  const Status closed = worker->close();
  EXPECT_EQ(closed.code(), ErrorCode::kTimeout) << closed.to_string();
  EXPECT_THAT(closed.message(), HasSubstr("killed"));
}

TEST_P(NodeWorkerTest, AChipTaskCanCompleteWhenAPeersNotifyArrives) {
  create();
  // Chip 0 defers its task until the word reaches 1 (without holding its core); the last chip
  // signals it; a successor of chip 0's task runs after.
  const CallableHandle wait_notify = add("wait_notify", [](const TaskArgs& a, BlockContext&) {
    return defer_until(static_cast<std::uint64_t*>(a.tensor(0).data()), 1);
  });
  const CallableHandle notify = add("notify", [](const TaskArgs& a, BlockContext&) {
    auto* word = static_cast<std::uint64_t*>(a.tensor(0).data());
    return shmem::put_signal(nullptr, nullptr, 0, word, 1, shmem::SignalOp::kSet, 0);
  });
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor word = tensor(DType::kInt64, {8});
  const SymmetricTensor out = tensor(DType::kInt32, {8});
  const int last = chips() - 1;
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit_next_level(wait_notify, TaskArgs().inout(word.on(0)), {}, 0));
    HP_RETURN_IF_ERROR(o.submit_next_level(notify, TaskArgs().no_dep(word.on(last)), {}, last));
    // After the deferred task: reads the word chip 0 was notified on.
    return o.submit_sub(add_handle,
                        TaskArgs()
                            .input(TensorView(word.on(0).data(), DType::kInt32, {1}))
                            .output_existing(TensorView(out.on(0).data(), DType::kInt32, {1})));
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(i32(out.on(0))[0], 2);
}

TEST_P(NodeWorkerTest, StartFailuresNameTheChip) {
  NodeWorkerConfig config;
  config.on_chip_start = [](int chip) {
    return chip == 1 ? Status::error(ErrorCode::kNotFound, "no weights for chip 1") : Status::ok();
  };
  create(config);
  const Status s = worker->start();
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("chip 1"));
  EXPECT_THAT(s.message(), HasSubstr("no weights for chip 1"));
  EXPECT_FALSE(worker->started());
}

TEST_P(NodeWorkerTest, AStartFailureNamesTheChipThatCausedItNotItsPeers) {
  // Chip 1 fails; the others wait in a barrier that chip 1's exit aborts, so they fail too,
  // with PEER_DEAD, and chip 0's failure is reported first. The error names chip 1's.
  NodeWorkerConfig config;
  config.on_chip_start = [](int chip) {
    return chip == 1 ? Status::error(ErrorCode::kNotFound, "no weights for chip 1")
                     : shmem::barrier_all();
  };
  create(config);
  const Status s = worker->start();
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("chip 1"));
  EXPECT_THAT(s.message(), HasSubstr("no weights for chip 1"));
  EXPECT_FALSE(worker->started());
}

TEST_P(NodeWorkerTest, InitSkewIsNotCountedAgainstACollectivesDeadline) {
  // Chip 1 takes longer to start than the waits' deadline; the collective after start() must
  // not count that time.
  NodeWorkerConfig config;
  config.wait_timeout_s = 1;
  config.on_chip_start = [](int chip) {
    if (chip == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return Status::ok();
  };
  create(config);
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor buf = tensor(DType::kInt32, {16});
  for (int c = 0; c < chips(); ++c) i32(buf.on(c))[0] = c;
  const Status s = worker->run([&](NodeOrchestrator& o) { return o.allreduce(buf); });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(i32(buf.on(0))[0], chips() * (chips() - 1) / 2);
}

TEST_P(NodeWorkerTest, ExpertParallelDispatchExpertsCombineMatchesTheGolden) {
  // The EP pipeline of examples/runtime/l3/ep_dispatch_combine.py in C++ (and so under
  // ThreadSanitizer): pack rows per owning chip, all_to_all rows and metadata, the local experts
  // (y = relu(x W_e)), all_to_all back, the weighted combine at the token's chip.
  constexpr int kTokens = 16, kHidden = 8, kTopK = 2;
  const int n = chips(), experts = 2 * n, per_chip = 2, cap = kTokens * kTopK;
  // pack: tensors x [T, H] f32, idx [T, K] i64, send [n, cap, H] f32, meta [n, cap, 3] i64.
  auto pack = [](const TaskArgs& a, BlockContext&) -> Status {
    const auto* x = static_cast<const float*>(a.tensor(0).data());
    const auto* idx = static_cast<const std::int64_t*>(a.tensor(1).data());
    auto* send = static_cast<float*>(a.tensor(2).data());
    auto* meta = static_cast<std::int64_t*>(a.tensor(3).data());
    const auto per = a.scalar_as<std::int64_t>(0);
    const std::int64_t chips_n = a.tensor(2).dim(0), capacity = a.tensor(2).dim(1);
    std::fill(meta, meta + chips_n * capacity * 3, -1);
    std::vector<std::int64_t> fill(std::size_t(chips_n), 0);
    for (int t = 0; t < kTokens; ++t) {
      for (int k = 0; k < kTopK; ++k) {
        const std::int64_t e = idx[t * kTopK + k], dest = e / per, slot = fill[std::size_t(dest)]++;
        std::copy(x + t * kHidden, x + (t + 1) * kHidden,
                  send + (dest * capacity + slot) * kHidden);
        std::int64_t* m = meta + (dest * capacity + slot) * 3;
        m[0] = t, m[1] = e, m[2] = k;
      }
    }
    return Status::ok();
  };
  // experts: recv [n, cap, H], recv_meta [n, cap, 3], W [per, H, H], y [n, cap, H].
  auto run_experts = [](const TaskArgs& a, BlockContext&) -> Status {
    const auto* recv = static_cast<const float*>(a.tensor(0).data());
    const auto* meta = static_cast<const std::int64_t*>(a.tensor(1).data());
    const auto* w = static_cast<const float*>(a.tensor(2).data());
    auto* y = static_cast<float*>(a.tensor(3).data());
    const auto first = a.scalar_as<std::int64_t>(0);
    const std::int64_t rows = a.tensor(0).dim(0) * a.tensor(0).dim(1);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* out = y + r * kHidden;
      std::fill(out, out + kHidden, 0.f);
      if (meta[r * 3] < 0) continue;
      const float* we = w + (meta[r * 3 + 1] - first) * kHidden * kHidden;
      for (int j = 0; j < kHidden; ++j) {
        float acc = 0;
        for (int i = 0; i < kHidden; ++i) acc += recv[r * kHidden + i] * we[i * kHidden + j];
        out[j] = std::max(acc, 0.f);
      }
    }
    return Status::ok();
  };
  // combine: back [n, cap, H], meta [n, cap, 3] (its own), w [T, K] f32, out [T, H].
  auto combine = [](const TaskArgs& a, BlockContext&) -> Status {
    const auto* back = static_cast<const float*>(a.tensor(0).data());
    const auto* meta = static_cast<const std::int64_t*>(a.tensor(1).data());
    const auto* w = static_cast<const float*>(a.tensor(2).data());
    auto* out = static_cast<float*>(a.tensor(3).data());
    std::fill(out, out + kTokens * kHidden, 0.f);
    const std::int64_t rows = a.tensor(0).dim(0) * a.tensor(0).dim(1);
    for (std::int64_t r = 0; r < rows; ++r) {
      if (meta[r * 3] < 0) continue;
      const std::int64_t t = meta[r * 3], k = meta[r * 3 + 2];
      for (int j = 0; j < kHidden; ++j)
        out[t * kHidden + j] += w[t * kTopK + k] * back[r * kHidden + j];
    }
    return Status::ok();
  };
  create();
  const CallableHandle pack_h = add("pack", pack), experts_h = add("experts", run_experts),
                       combine_h = add("combine", combine);
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor x = tensor(DType::kFP32, {kTokens, kHidden}),
                        idx = tensor(DType::kInt64, {kTokens, kTopK}),
                        gate = tensor(DType::kFP32, {kTokens, kTopK}),
                        weights = tensor(DType::kFP32, {per_chip, kHidden, kHidden}),
                        send = tensor(DType::kFP32, {n, cap, kHidden}),
                        recv = tensor(DType::kFP32, {n, cap, kHidden}),
                        y = tensor(DType::kFP32, {n, cap, kHidden}),
                        back = tensor(DType::kFP32, {n, cap, kHidden}),
                        meta = tensor(DType::kInt64, {n, cap, 3}),
                        recv_meta = tensor(DType::kInt64, {n, cap, 3}),
                        out = tensor(DType::kFP32, {kTokens, kHidden});
  std::vector<float> all_w(std::size_t(experts * kHidden * kHidden));
  for (std::size_t i = 0; i < all_w.size(); ++i) all_w[i] = float(int(i * 37 % 23) - 11) / 16.f;
  auto f32 = [](const TensorView& t) { return static_cast<float*>(t.data()); };
  auto i64 = [](const TensorView& t) { return static_cast<std::int64_t*>(t.data()); };
  for (int c = 0; c < n; ++c) {
    for (int t = 0; t < kTokens; ++t) {
      for (int h = 0; h < kHidden; ++h)
        f32(x.on(c))[t * kHidden + h] = float((t * 7 + h * 3 + c) % 11 - 5) / 4.f;
      for (int k = 0; k < kTopK; ++k) {
        i64(idx.on(c))[t * kTopK + k] = (t + c + k * (experts / 2 + 1)) % experts;
        f32(gate.on(c))[t * kTopK + k] = float(k + 1) / float(kTopK + 1);
      }
    }
    std::copy(all_w.begin() + c * per_chip * kHidden * kHidden,
              all_w.begin() + (c + 1) * per_chip * kHidden * kHidden, f32(weights.on(c)));
  }
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    for (int c = 0; c < n; ++c) {
      HP_RETURN_IF_ERROR(o.submit_next_level(pack_h,
                                             TaskArgs()
                                                 .input(x.on(c))
                                                 .input(idx.on(c))
                                                 .output_existing(send.on(c))
                                                 .output_existing(meta.on(c))
                                                 .scalar(std::int64_t(per_chip)),
                                             {}, c));
    }
    HP_RETURN_IF_ERROR(o.all_to_all(recv, send));
    HP_RETURN_IF_ERROR(o.all_to_all(recv_meta, meta));
    for (int c = 0; c < n; ++c) {
      HP_RETURN_IF_ERROR(o.submit_next_level(experts_h,
                                             TaskArgs()
                                                 .input(recv.on(c))
                                                 .input(recv_meta.on(c))
                                                 .input(weights.on(c))
                                                 .output_existing(y.on(c))
                                                 .scalar(std::int64_t(c * per_chip)),
                                             {}, c));
    }
    HP_RETURN_IF_ERROR(o.all_to_all(back, y));
    for (int c = 0; c < n; ++c) {
      HP_RETURN_IF_ERROR(o.submit_next_level(combine_h,
                                             TaskArgs()
                                                 .input(back.on(c))
                                                 .input(meta.on(c))
                                                 .input(gate.on(c))
                                                 .output_existing(out.on(c)),
                                             {}, c));
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int c = 0; c < n; ++c) {
    for (int t = 0; t < kTokens; ++t) {
      for (int j = 0; j < kHidden; ++j) {
        float want = 0;
        for (int k = 0; k < kTopK; ++k) {
          const std::int64_t e = i64(idx.on(c))[t * kTopK + k];
          float acc = 0;
          for (int i = 0; i < kHidden; ++i) {
            acc +=
                f32(x.on(c))[t * kHidden + i] * all_w[std::size_t((e * kHidden + i) * kHidden + j)];
          }
          want += f32(gate.on(c))[t * kTopK + k] * std::max(acc, 0.f);
        }
        ASSERT_NEAR(f32(out.on(c))[t * kHidden + j], want, 1e-4) << c << " " << t << " " << j;
      }
    }
  }
}

TEST_P(NodeWorkerTest, ANodeRunReplaysToTheSameOutputs) {
  // Recorded: per round, a chip fills its copy, a sub task adds one into the last chip's copy,
  // the last chip adds one back, then an allreduce. Replayed onto fresh tensors (the recorded
  // ranges rebased onto them), with the recorded edges only: the same values everywhere.
  create();
  ASSERT_TRUE(worker->start().is_ok());
  const SymmetricTensor a = tensor(DType::kInt32, {64}), b = tensor(DType::kInt32, {64});
  const int last = chips() - 1;
  auto program = [&](NodeOrchestrator& o) -> Status {
    for (int round = 0; round < 4; ++round) {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit_next_level(
          fill_handle, TaskArgs().output_existing(a.on(0)).scalar(round * 10), {}, 0));
      HP_RETURN_IF_ERROR(
          o.submit_sub(add_handle, TaskArgs().input(a.on(0)).output_existing(a.on(last))));
      HP_RETURN_IF_ERROR(o.submit_next_level(
          add_handle, TaskArgs().input(a.on(last)).output_existing(a.on(0)), {}, last));
    }
    return o.allreduce(a);
  };
  const std::string prefix = ::testing::TempDir() + "/node_replay_" + std::to_string(chips());
  OrchestratorConfig record;
  record.diagnostics = {.output_prefix = prefix, .dep_gen = true};
  ASSERT_TRUE(worker->run(program, record).is_ok());
  NodeReplayBindings bindings;
  bindings.callables = {{"fill", fill_handle}};
  for (int c = 0; c < chips(); ++c) {
    bindings.buffers.push_back(
        {reinterpret_cast<std::uintptr_t>(a.on(c).data()), 64 * 4, b.on(c).data()});
  }
  const Status missing = worker->replay(prefix + "/deps.json", bindings);
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound) << missing.to_string();
  EXPECT_THAT(missing.message(), HasSubstr("callable 'add_one'"));
  // The collectives' tasks replay as the builtin kernels they ran, unbound.
  bindings.callables["add_one"] = add_handle;
  const Status s = worker->replay(prefix + "/deps.json", bindings);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int c = 0; c < chips(); ++c) {
    for (int i = 0; i < 64; ++i) ASSERT_EQ(i32(b.on(c))[i], i32(a.on(c))[i]) << c << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, NodeWorkerTest, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "chips"; });

}  // namespace
}  // namespace hp::runtime

namespace hp::runtime {
namespace {

// The failures the upstream runtime's users hit, each reproduced here.

TEST(NodeWorkerFailures, ADumpDuringARunThatTimesOutDoesNotHangTheHost) {
  NodeWorkerConfig config;
  config.chips = 2;
  config.heap_bytes = 16 << 20;
  config.tensor_bytes = 4 << 20;
  config.scratch_bytes = 64 << 10;
  config.wait_timeout_s = 1;
  std::unique_ptr<NodeWorker> worker;
  ASSERT_TRUE(NodeWorker::create(config, &worker).is_ok());
  CallableHandle hang, fill_h;
  ASSERT_TRUE(worker
                  ->register_callable(Callable::from_function(
                                          "hang",
                                          [](const TaskArgs&, BlockContext&) -> Status {
                                            for (;;)
                                              std::this_thread::sleep_for(std::chrono::seconds(1));
                                          },
                                          "hang-v1"),
                                      &hang)
                  .is_ok());
  ASSERT_TRUE(
      worker->register_callable(Callable::from_function("fill", fill, "fill-v1"), &fill_h).is_ok());
  ASSERT_TRUE(worker->start().is_ok());
  SymmetricTensor buf;
  ASSERT_TRUE(worker->alloc(DType::kInt32, {64}, &buf).is_ok());
  const std::string prefix = ::testing::TempDir() + "/node_dump_timeout";
  OrchestratorConfig run_config;
  run_config.diagnostics = {.output_prefix = prefix, .dump_args = 2, .dep_gen = true};
  const auto start = std::chrono::steady_clock::now();
  const Status s = worker->run(
      [&](NodeOrchestrator& o) -> Status {
        HP_RETURN_IF_ERROR(
            o.submit_next_level(fill_h, TaskArgs().output_existing(buf.on(1)).scalar(1), {}, 1));
        return o.submit_next_level(hang, TaskArgs().inout(buf.on(0)), {}, 0);
      },
      run_config);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  // The run's deadline, the hung chip's session end and close's: never the test's timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(worker->close().code(), ErrorCode::kTimeout);
}

TEST(NodeWorkerFailures, EightChipsOnTwoCpusRunConsecutiveSyncStartTasks) {
  NodeWorkerConfig config;
  config.chips = 8;
  config.chip = {.num_cube = 1, .num_vector = 2};
  config.heap_bytes = 8 << 20;
  config.tensor_bytes = 2 << 20;
  config.scratch_bytes = 64 << 10;
  config.wait_timeout_s = 60;
  std::unique_ptr<NodeWorker> worker;
  ASSERT_TRUE(NodeWorker::create(config, &worker).is_ok());
  // A mixed task: one cube and two vector blocks start together (sync_all), hand a value from
  // the cube block to the vector blocks with a flag, and add it to the chip's counter.
  CallableHandle step;
  ASSERT_TRUE(worker
                  ->register_callable(Callable::from_function(
                                          "sync_step",
                                          [](const TaskArgs& a, BlockContext& b) -> Status {
                                            HP_RETURN_IF_ERROR(b.sync_all());
                                            auto* counter =
                                                static_cast<std::int64_t*>(a.tensor(0).data());
                                            if (b.core_type() == platform::CoreType::kCube) {
                                              counter[1] = counter[0] + 1;
                                              HP_RETURN_IF_ERROR(b.set_flag(0, 2));
                                            } else {
                                              HP_RETURN_IF_ERROR(b.wait_flag(0, 2));
                                              if (b.sub_block_idx() == 0) counter[0] = counter[1];
                                            }
                                            return b.sync_all();
                                          },
                                          "sync_step-v1"),
                                      &step)
                  .is_ok());
  ASSERT_TRUE(worker->start().is_ok());
  SymmetricTensor counters;
  ASSERT_TRUE(worker->alloc(DType::kInt64, {8}, &counters).is_ok());
  constexpr int kSteps = 40;
  const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
    for (int i = 0; i < kSteps; ++i) {
      auto scope = o.scope();
      for (int c = 0; c < 8; ++c) {
        HP_RETURN_IF_ERROR(o.submit_next_level(step, TaskArgs().inout(counters.on(c)),
                                               {.mode = platform::LaunchMode::kMix, .block_num = 1},
                                               c));
      }
    }
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(static_cast<std::int64_t*>(counters.on(c).data())[0], kSteps) << "chip " << c;
  }
  EXPECT_TRUE(worker->close().is_ok());
}

TEST(NodeWorkerFailures, TeardownIsCleanUnderLoadCycleAfterCycle) {
  // Two processes keep both CPUs busy (processes, not threads: the test forks chips, and a
  // process forks cleanly only while it has one thread); each cycle starts a worker, runs a
  // collective and tasks on every chip, and closes it; every 20th cycle closes it while a chip
  // still runs a task (the run timed out), which close() must end by killing it. No cycle may
  // crash, hang or leave a process behind. Under a sanitizer, which checks every access of each
  // cycle instead of waiting for a bad interleaving to crash, 40 cycles (two of them busy): each
  // costs three times as much there.
  const int cycles = test::kSanitized ? 40 : 200;
  struct Load {
    std::vector<pid_t> pids;
    Load() {
      for (int i = 0; i < 2; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          volatile std::uint64_t x = 0;
          for (;;) x = x + 1;
        }
        pids.push_back(pid);
      }
    }
    ~Load() {
      for (pid_t pid : pids) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } load;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const bool busy = cycle % 20 == 19;
    NodeWorkerConfig config;
    config.chips = 2;
    config.heap_bytes = 4 << 20;
    config.tensor_bytes = 1 << 20;
    config.scratch_bytes = 64 << 10;
    config.wait_timeout_s = busy ? 0.2 : 30;
    std::unique_ptr<NodeWorker> worker;
    ASSERT_TRUE(NodeWorker::create(config, &worker).is_ok());
    CallableHandle spin;
    ASSERT_TRUE(worker
                    ->register_callable(Callable::from_function(
                                            "spin",
                                            [](const TaskArgs& a, BlockContext&) -> Status {
                                              const auto until =
                                                  std::chrono::steady_clock::now() +
                                                  std::chrono::milliseconds(a.scalar_as<int>(0));
                                              while (std::chrono::steady_clock::now() < until) {
                                              }
                                              return Status::ok();
                                            },
                                            "spin-v1"),
                                        &spin)
                    .is_ok());
    ASSERT_TRUE(worker->start().is_ok()) << "cycle " << cycle;
    SymmetricTensor buf;
    ASSERT_TRUE(worker->alloc(DType::kFP32, {256}, &buf).is_ok());
    const Status s = worker->run([&](NodeOrchestrator& o) -> Status {
      for (int c = 0; c < 2; ++c) {
        HP_RETURN_IF_ERROR(
            o.submit_next_level(spin, TaskArgs().inout(buf.on(c)).scalar(busy ? 1000 : 1), {}, c));
      }
      return o.allreduce(buf);
    });
    if (busy) {
      EXPECT_EQ(s.code(), ErrorCode::kTimeout) << "cycle " << cycle << ": " << s.to_string();
    } else {
      ASSERT_TRUE(s.is_ok()) << "cycle " << cycle << ": " << s.to_string();
    }
    std::vector<int> pids = {worker->chip_pid(0), worker->chip_pid(1)};
    const Status closed = worker->close();
    if (!busy) {
      ASSERT_TRUE(closed.is_ok()) << "cycle " << cycle << ": " << closed.to_string();
    }
    for (int pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "cycle " << cycle << ": chip left";
  }
}

}  // namespace
}  // namespace hp::runtime
