// Tests of hp::Status and hp::ErrorCode (native/common/status.h).
#include "common/status.h"

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "printers.h"

// Counts every global allocation in the process (the library's too: the replacement operator
// new below is process-wide), so that a test can check that a block does not allocate.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// noinline: inlined into call sites, GCC 12 mistakes the malloc/free pairing for a
// new/free mismatch (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace hp {
namespace {

constexpr auto kCount = static_cast<std::uint32_t>(ErrorCode::kCount);

TEST(ErrorCode, EveryCodeHasAUniqueUpperCaseName) {
  std::set<std::string_view> names;
  for (std::uint32_t i = 0; i < kCount; ++i) {
    const std::string_view name = to_string(static_cast<ErrorCode>(i));
    SCOPED_TRACE(testing::Message() << "code " << i << " name '" << name << "'");
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "UNKNOWN");
    for (char c : name) {
      EXPECT_TRUE(std::isupper(static_cast<unsigned char>(c)) || c == '_') << c;
    }
    EXPECT_TRUE(names.insert(name).second) << "duplicate name";
  }
  EXPECT_EQ(names.size(), kCount);
}

TEST(ErrorCode, ValuesOutsideTheEnumAreUnknown) {
  EXPECT_EQ(to_string(ErrorCode::kCount), "UNKNOWN");
  EXPECT_EQ(to_string(static_cast<ErrorCode>(kCount + 1)), "UNKNOWN");
  EXPECT_EQ(to_string(static_cast<ErrorCode>(0xFFFFFFFFu)), "UNKNOWN");
}

// Codes are stable: Python and the C API expose the numbers and names, so renumbering,
// renaming or reusing a code must fail here. A new code is appended to this table.
TEST(ErrorCode, CodesAreStable) {
  struct Pinned {
    ErrorCode code;
    std::uint32_t value;
    std::string_view name;
  };
  constexpr Pinned kPinned[] = {
      {ErrorCode::kOk, 0, "OK"},
      {ErrorCode::kInvalidArgument, 1, "INVALID_ARGUMENT"},
      {ErrorCode::kOutOfRange, 2, "OUT_OF_RANGE"},
      {ErrorCode::kShapeMismatch, 3, "SHAPE_MISMATCH"},
      {ErrorCode::kDTypeMismatch, 4, "DTYPE_MISMATCH"},
      {ErrorCode::kUnsupported, 5, "UNSUPPORTED"},
      {ErrorCode::kTimeout, 6, "TIMEOUT"},
      {ErrorCode::kAborted, 7, "ABORTED"},
      {ErrorCode::kOutOfMemory, 8, "OUT_OF_MEMORY"},
      {ErrorCode::kIoError, 9, "IO_ERROR"},
      {ErrorCode::kCorruptData, 10, "CORRUPT_DATA"},
      {ErrorCode::kInvalidSetting, 11, "INVALID_SETTING"},
      {ErrorCode::kInternal, 12, "INTERNAL"},
      {ErrorCode::kKernelFailed, 13, "KERNEL_FAILED"},
      {ErrorCode::kSystemError, 14, "SYSTEM_ERROR"},
      {ErrorCode::kNotFound, 15, "NOT_FOUND"},
      {ErrorCode::kAlreadyExists, 16, "ALREADY_EXISTS"},
      {ErrorCode::kIsaUnsupported, 17, "ISA_UNSUPPORTED"},
      {ErrorCode::kFailedPrecondition, 18, "FAILED_PRECONDITION"},
      {ErrorCode::kPeerDead, 19, "PEER_DEAD"},
      {ErrorCode::kMisaligned, 20, "MISALIGNED"},
      {ErrorCode::kNotSymmetric, 21, "NOT_SYMMETRIC"},
      {ErrorCode::kDoubleFree, 22, "DOUBLE_FREE"},
      {ErrorCode::kPermissionDenied, 23, "PERMISSION_DENIED"},
  };
  for (const auto& pinned : kPinned) {
    EXPECT_EQ(static_cast<std::uint32_t>(pinned.code), pinned.value) << pinned.name;
    EXPECT_EQ(to_string(pinned.code), pinned.name) << pinned.value;
  }
  // Every code is pinned: a code added without a row here fails.
  EXPECT_EQ(kCount, std::size(kPinned));
}

TEST(Status, DefaultIsOkWithEmptyMessage) {
  const Status status;
  EXPECT_TRUE(status.is_ok());
  EXPECT_EQ(status.code(), ErrorCode::kOk);
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.to_string(), "OK");
  EXPECT_TRUE(Status::ok().is_ok());
  EXPECT_EQ(Status::ok().message(), "");
}

TEST(Status, OkDropsAnyMessage) {
  const Status status(ErrorCode::kOk, "ignored");
  EXPECT_TRUE(status.is_ok());
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.to_string(), "OK");
}

TEST(Status, OkDoesNotAllocate) {
  std::string long_message(200, 'x');  // allocated before counting starts
  bool all_ok = false;
  const long before = g_allocations.load();
  {
    Status a;
    Status b = Status::ok();
    Status c(ErrorCode::kOk, std::move(long_message));
    Status d = a;
    Status e = std::move(b);
    a.with_context("while testing");
    all_ok = a.is_ok() && c.is_ok() && d.is_ok() && e.is_ok() && a.message().empty() &&
             c.message().empty();
  }
  const long allocations = g_allocations.load() - before;  // no gtest macro ran in between
  EXPECT_TRUE(all_ok);
  EXPECT_EQ(allocations, 0);
}

TEST(Status, ErrorAllocatesItsMessage) {
  // The counter works: an error status does allocate (its shared message).
  const long before = g_allocations.load();
  Status status(ErrorCode::kTimeout, "m");
  EXPECT_GT(g_allocations.load() - before, 0);
  // Copies share the message instead of allocating again.
  const long after_construct = g_allocations.load();
  Status copy = status;
  const long copy_allocations = g_allocations.load() - after_construct;
  EXPECT_EQ(copy_allocations, 0);
  EXPECT_EQ(copy.message(), "m");
}

TEST(Status, ErrorFormatsItsMessage) {
  const Status status =
      Status::error(ErrorCode::kOutOfRange, "index {} outside [0, {}) of '{}'", 7, 4, "rank");
  EXPECT_FALSE(status.is_ok());
  EXPECT_EQ(status.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(status.message(), "index 7 outside [0, 4) of 'rank'");
}

TEST(Status, ErrorWithOkCodeIsOk) {
  const Status status = Status::error(ErrorCode::kOk, "nothing {}", 1);
  EXPECT_TRUE(status.is_ok());
  EXPECT_EQ(status.message(), "");
}

TEST(Status, ToStringHasNameNumberAndMessage) {
  EXPECT_EQ(Status(ErrorCode::kTimeout, "msg").to_string(), "TIMEOUT (6): msg");
  EXPECT_EQ(Status(ErrorCode::kInvalidArgument, "bad n").to_string(),
            "INVALID_ARGUMENT (1): bad n");
  EXPECT_EQ(Status(ErrorCode::kFailedPrecondition, "").to_string(), "FAILED_PRECONDITION (18): ");
}

TEST(Status, WithContextPrefixesTheMessage) {
  Status status(ErrorCode::kIoError, "disk full");
  status.with_context("while saving 'a.json'").with_context("in dump");
  EXPECT_EQ(status.code(), ErrorCode::kIoError);
  EXPECT_EQ(status.message(), "in dump: while saving 'a.json': disk full");
  EXPECT_EQ(status.to_string(), "IO_ERROR (9): in dump: while saving 'a.json': disk full");
}

TEST(Status, WithContextLeavesCopiesAlone) {
  const Status original(ErrorCode::kAborted, "peer failed");
  Status copy = original;
  copy.with_context("rank 3");
  EXPECT_EQ(copy.message(), "rank 3: peer failed");
  EXPECT_EQ(original.message(), "peer failed");
}

TEST(Status, WithContextOnOkIsNoOp) {
  Status status;
  status.with_context("while nothing");
  EXPECT_TRUE(status.is_ok());
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.to_string(), "OK");
}

// Helpers for the macro tests: `steps` records how far each function ran.
Status fail_with(ErrorCode code) { return Status::error(code, "failed with {}", to_string(code)); }

Status forward(Status inner, int* steps) {
  HP_RETURN_IF_ERROR(std::move(inner));
  ++*steps;
  return Status::ok();
}

Status ensure_positive(int n, int* steps) {
  HP_ENSURE(n > 0, ErrorCode::kInvalidArgument, "n must be positive, got {}", n);
  ++*steps;
  return Status::ok();
}

TEST(StatusMacros, ReturnIfErrorPropagatesTheError) {
  int steps = 0;
  const Status status = forward(fail_with(ErrorCode::kNotFound), &steps);
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  EXPECT_EQ(status.message(), "failed with NOT_FOUND");
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacros, ReturnIfErrorContinuesOnOk) {
  int steps = 0;
  EXPECT_TRUE(forward(Status::ok(), &steps).is_ok());
  EXPECT_EQ(steps, 1);
}

TEST(StatusMacros, ReturnIfErrorEvaluatesOnce) {
  int calls = 0;
  auto counted = [&] {
    ++calls;
    return Status::ok();
  };
  auto run = [&]() -> Status {
    HP_RETURN_IF_ERROR(counted());
    return Status::ok();
  };
  EXPECT_TRUE(run().is_ok());
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, EnsureReturnsFormattedError) {
  int steps = 0;
  const Status status = ensure_positive(-3, &steps);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "n must be positive, got -3");
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacros, EnsureContinuesWhenTrue) {
  int steps = 0;
  EXPECT_TRUE(ensure_positive(5, &steps).is_ok());
  EXPECT_EQ(steps, 1);
}

TEST(StatusMacros, MacrosNestInIfElse) {
  // The do/while(0) wrapping keeps the macros safe in an unbraced if/else.
  auto run = [](bool fail) -> Status {
    if (fail)
      HP_ENSURE(false, ErrorCode::kInternal, "{}", "took the if");
    else
      HP_RETURN_IF_ERROR(Status(ErrorCode::kAborted, "took the else"));
    return Status::ok();
  };
  EXPECT_EQ(run(true).message(), "took the if");
  EXPECT_EQ(run(false).message(), "took the else");
}

}  // namespace
}  // namespace hp
