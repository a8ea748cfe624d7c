// ChipWorker: callable handles, registration reference counting, run(), and kernel libraries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <climits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/printers.h"
#include "runtime/chip_worker.h"

namespace hp::runtime {
namespace {

using ::testing::HasSubstr;

std::string test_library_path() {
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string dir(exe, n > 0 ? static_cast<std::size_t>(n) : 0);
  return dir.substr(0, dir.rfind('/')) + "/libhyper_parallel_test_runtime_kernels.so";
}

std::unique_ptr<ChipWorker> make_worker(int num_cube = 1, int num_vector = 2) {
  std::unique_ptr<ChipWorker> worker;
  const Status s = ChipWorker::create({.num_cube = num_cube, .num_vector = num_vector}, &worker);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return worker;
}

Status noop(const TaskArgs&, platform::BlockContext&) { return Status::ok(); }

TEST(RuntimeCallable, HandleDependsOnBytesKindAndNamespaceOnly) {
  const Callable a = Callable::from_function("a", noop, "bytes v1");
  const Callable same = Callable::from_function("other name", noop, "bytes v1");
  const Callable other_bytes = Callable::from_function("a", noop, "bytes v2");
  const Callable other_ns = Callable::from_function("a", noop, "bytes v1", "team-b");
  EXPECT_EQ(a.handle(), same.handle());
  EXPECT_FALSE(a.handle() == other_bytes.handle());
  EXPECT_FALSE(a.handle() == other_ns.handle());
  EXPECT_EQ(a.handle().hashid().rfind("sha256:", 0), 0u);
  EXPECT_EQ(a.handle().hashid().size(), 7u + 64u);
}

TEST(RuntimeCallable, HandleIsTheDocumentedDigest) {
  // sha256("hp.runtime.callable.v1\0" "function\0" u64le(2) "ns" u64le(3) "abc")
  std::string message("hp.runtime.callable.v1\0function\0", 32);
  message +=
      std::string("\x02\0\0\0\0\0\0\0", 8) + "ns" + std::string("\x03\0\0\0\0\0\0\0", 8) + "abc";
  EXPECT_EQ(Callable::from_function("f", noop, "abc", "ns").handle().digest, sha256(message));
}

TEST(RuntimeChipWorker, RegisteringTheSameBytesTwiceIsReferenceCounted) {
  auto worker = make_worker();
  int first = -1, second = -1, other = -1;
  ASSERT_TRUE(
      worker->register_callable(Callable::from_function("f", noop, "f-v1"), &first).is_ok());
  ASSERT_TRUE(
      worker->register_callable(Callable::from_function("f", noop, "f-v1"), &second).is_ok());
  ASSERT_TRUE(
      worker->register_callable(Callable::from_function("g", noop, "g-v1"), &other).is_ok());
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other);
  EXPECT_EQ(worker->callable_references(first), 2);
  ASSERT_TRUE(worker->unregister_callable(first).is_ok());
  EXPECT_EQ(worker->callable_references(first), 1);
  std::shared_ptr<const Callable> still;
  EXPECT_TRUE(worker->callable(first, &still).is_ok());
  ASSERT_TRUE(worker->unregister_callable(first).is_ok());
  EXPECT_EQ(worker->callable_references(first), 0);
  EXPECT_EQ(worker->callable(first, &still).code(), ErrorCode::kNotFound);
  EXPECT_EQ(worker->unregister_callable(first).code(), ErrorCode::kNotFound);
  // The freed slot is reused by the next new callable.
  int reused = -1;
  ASSERT_TRUE(
      worker->register_callable(Callable::from_function("h", noop, "h-v1"), &reused).is_ok());
  EXPECT_EQ(reused, first);
}

TEST(RuntimeChipWorker, RunsACallableOverEveryBlock) {
  auto worker = make_worker(2, 4);
  int slot = -1;
  ASSERT_TRUE(worker
                  ->register_callable(Callable::from_function(
                                          "fill",
                                          [](const TaskArgs& args, platform::BlockContext& b) {
                                            auto* out =
                                                static_cast<std::int64_t*>(args.tensor(0).data());
                                            out[b.block_idx()] =
                                                b.block_idx() * args.scalar_as<std::int64_t>(0);
                                            return Status::ok();
                                          },
                                          "fill-v1"),
                                      &slot)
                  .is_ok());
  std::vector<std::int64_t> out(7, -1);
  TaskArgs args;
  args.output_existing(TensorView(out.data(), DType::kInt64, {7})).scalar(std::int64_t{3});
  const Status s = worker->run(slot, args, {.mode = platform::LaunchMode::kVector, .block_num = 7});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(out, (std::vector<std::int64_t>{0, 3, 6, 9, 12, 15, 18}));
}

TEST(RuntimeChipWorker, RunRefusesRuntimeOutputsAndNamesFailures) {
  auto worker = make_worker();
  int slot = -1;
  ASSERT_TRUE(worker
                  ->register_callable(Callable::from_function(
                                          "broken",
                                          [](const TaskArgs&, platform::BlockContext&) {
                                            return Status::error(ErrorCode::kInvalidArgument,
                                                                 "bad tile");
                                          },
                                          "broken-v1"),
                                      &slot)
                  .is_ok());
  Status s = worker->run(slot, TaskArgs().output(DType::kFP32, {4}), {});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("OUTPUT_EXISTING"));
  s = worker->run(slot, TaskArgs(), {});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("callable 'broken'"));
  EXPECT_THAT(s.message(), HasSubstr("bad tile"));
  EXPECT_EQ(worker->run(slot + 100, TaskArgs(), {}).code(), ErrorCode::kNotFound);
}

TEST(RuntimeChipWorker, RunsAnEntryPointFromAKernelLibrary) {
  Callable callable;
  const Status loaded = Callable::from_library(test_library_path(), "hp_test_scale_i32", &callable);
  ASSERT_TRUE(loaded.is_ok()) << loaded.to_string();
  EXPECT_EQ(callable.kind(), CallableKind::kLibrarySymbol);
  EXPECT_EQ(callable.name(), "hp_test_scale_i32");
  auto worker = make_worker();
  int slot = -1;
  ASSERT_TRUE(worker->register_callable(callable, &slot).is_ok());
  std::vector<std::int32_t> x(10), y(10, 0), expected(10);
  std::iota(x.begin(), x.end(), 1);
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = x[i] * -3;
  TaskArgs args;
  args.input(TensorView(x.data(), DType::kInt32, {10}))
      .output_existing(TensorView(y.data(), DType::kInt32, {10}))
      .scalar(std::int32_t{-3});
  const Status s = worker->run(slot, args, {.mode = platform::LaunchMode::kVector, .block_num = 3});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(y, expected);
  // Loading the same library entry again gives the same handle: one slot, two references.
  Callable again;
  ASSERT_TRUE(Callable::from_library(test_library_path(), "hp_test_scale_i32", &again).is_ok());
  EXPECT_EQ(again.handle(), callable.handle());
}

TEST(RuntimeChipWorker, MissingLibraryOrSymbolIsNotFound) {
  Callable callable;
  Status s = Callable::from_library(test_library_path(), "hp_test_no_such_kernel", &callable);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no symbol 'hp_test_no_such_kernel'"));
  EXPECT_THAT(s.message(), HasSubstr("extern \"C\""));
  EXPECT_TRUE(callable.empty());
  s = Callable::from_library("/nonexistent/libnothing.so", "f", &callable);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/libnothing.so"));
}

}  // namespace
}  // namespace hp::runtime
