// Bad input and failures of symmetric-memory calls: named error codes, never a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "shmem/shmem.h"

namespace hp::shmem {
namespace {

using ::testing::HasSubstr;

constexpr ThreadsOptions kSmall{.heap_bytes = 1 << 20, .timeout_s = 0.3};

// Runs body on 2 thread PEs; returns the job's status.
Status on_two(const std::function<Status()>& body) { return run_threads(2, body, kSmall); }

TEST(ShmemErrors, CallsBeforeInitAreFailedPrecondition) {
  int x = 0;
  EXPECT_EQ(put(&x, &x, 4, 0).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(barrier_all().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(finalize().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(my_pe(), -1);
  EXPECT_EQ(n_pes(), -1);
  EXPECT_FALSE(initialized());
}

TEST(ShmemErrors, BadPeIsOutOfRange) {
  std::atomic<int> checked{0};
  Status s = on_two([&] {
    void* buf = nullptr;
    HP_RETURN_IF_ERROR(malloc(64, &buf));
    for (int pe : {-1, 2, 1000}) {
      Status put_status = put(buf, buf, 8, pe);
      EXPECT_EQ(put_status.code(), ErrorCode::kOutOfRange);
      EXPECT_THAT(put_status.message(), HasSubstr("PEs 0..1"));
      std::int64_t old = 0;
      EXPECT_EQ(atomic_fetch_add(static_cast<std::int64_t*>(buf), std::int64_t(1), pe, &old).code(),
                ErrorCode::kOutOfRange);
    }
    ++checked;
    return free(buf);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(checked, 2);
}

TEST(ShmemErrors, AddressesOutsideTheHeapAreNotSymmetric) {
  Status s = on_two([] {
    int local[4] = {};
    void* buf = nullptr;
    HP_RETURN_IF_ERROR(malloc(64, &buf));
    Status p_status = put(local, buf, sizeof local, 1 - my_pe());
    EXPECT_EQ(p_status.code(), ErrorCode::kNotSymmetric);
    EXPECT_THAT(p_status.message(), HasSubstr("symmetric heap"));
    EXPECT_EQ(get(local, local, 4, 0).code(), ErrorCode::kNotSymmetric);
    // A range that starts inside the heap but runs past its end.
    auto* end = static_cast<char*>(buf) + heap_size();
    EXPECT_EQ(put(end - 8, local, 16, 0).code(), ErrorCode::kNotSymmetric);
    std::int32_t word = 0;
    EXPECT_EQ(wait_until(&word, Cmp::kEq, 0).code(), ErrorCode::kNotSymmetric);
    return free(buf);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(ShmemErrors, MisalignedWordsAreNamed) {
  Status s = on_two([] {
    void* buf = nullptr;
    HP_RETURN_IF_ERROR(malloc(64, &buf));
    auto* odd = reinterpret_cast<std::uint64_t*>(static_cast<char*>(buf) + 4);
    std::uint64_t old = 0;
    EXPECT_EQ(atomic_fetch_add(odd, std::uint64_t(1), 0, &old).code(), ErrorCode::kMisaligned);
    EXPECT_EQ(put_signal(buf, buf, 4, odd, 1, SignalOp::kSet, 0).code(), ErrorCode::kMisaligned);
    EXPECT_EQ(signal_wait_until(odd, Cmp::kEq, 0).code(), ErrorCode::kMisaligned);
    return free(buf);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(ShmemErrors, FreeingTwiceOrForeignMemoryIsNamed) {
  Status s = on_two([] {
    void* a = nullptr;
    HP_RETURN_IF_ERROR(malloc(128, &a));
    HP_RETURN_IF_ERROR(free(a));
    EXPECT_EQ(free(a).code(), ErrorCode::kDoubleFree);
    int local = 0;
    EXPECT_EQ(free(&local).code(), ErrorCode::kNotSymmetric);
    void* b = nullptr;
    HP_RETURN_IF_ERROR(malloc(128, &b));
    EXPECT_EQ(free(static_cast<char*>(b) + 64).code(), ErrorCode::kNotSymmetric);
    return free(b);
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(ShmemErrors, AFullHeapIsOutOfMemoryOnEveryPe) {
  std::atomic<int> full{0};
  Status s = on_two([&] {
    void* big = nullptr;
    Status m = malloc(std::size_t(2) << 20, &big);
    if (m.code() == ErrorCode::kOutOfMemory) ++full;
    EXPECT_THAT(m.message(), HasSubstr("HP_SHMEM_HEAP_SIZE"));
    return barrier_all();  // every PE failed alike, so none waits alone
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(full, 2);
}

TEST(ShmemErrors, AWaitPastTheDeadlineNamesPeAndAddress) {
  Status s = on_two([] {
    void* buf = nullptr;
    HP_RETURN_IF_ERROR(calloc(1, 8, &buf));
    if (my_pe() == 1) return wait_until(static_cast<std::int64_t*>(buf), Cmp::kEq, std::int64_t(1));
    return Status::ok();
  });
  EXPECT_EQ(s.code(), ErrorCode::kTimeout);
  EXPECT_THAT(s.message(), HasSubstr("wait_until(heap+0x"));
  EXPECT_THAT(s.message(), HasSubstr("on PE 1"));
  EXPECT_THAT(s.message(), HasSubstr("HP_SHMEM_TIMEOUT_S"));
}

// A PE that fails aborts the job: the others' blocking calls end with PEER_DEAD at once (well
// before the 30 s deadline), and the job reports the failing PE's own error.
TEST(ShmemErrors, AFailingPeReleasesTheOthersWithPeerDead) {
  std::atomic<int> peer_dead{0};
  Status s = run_threads(4,
                         [&] {
                           if (my_pe() == 2)
                             return Status::error(ErrorCode::kInvalidArgument, "PE two gives up");
                           Status b = barrier_all();
                           if (b.code() == ErrorCode::kPeerDead) ++peer_dead;
                           EXPECT_THAT(b.message(), HasSubstr("PE 2"));
                           return b;
                         },
                         {.heap_bytes = 1 << 20, .timeout_s = 30});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("PE two gives up"));
  EXPECT_EQ(peer_dead, 3);
}

TEST(ShmemErrors, RunThreadsValidatesItsArguments) {
  EXPECT_EQ(run_threads(0, [] { return Status::ok(); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_threads(2, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(ShmemSingleton, InitWithoutALauncherIsOnePe) {
  ASSERT_TRUE(init().is_ok());
  EXPECT_EQ(my_pe(), 0);
  EXPECT_EQ(n_pes(), 1);
  EXPECT_EQ(transport_name(0), "self");
  ASSERT_TRUE(init().is_ok());  // reference-counted
  void* buf = nullptr;
  ASSERT_TRUE(malloc(64, &buf).is_ok());
  const std::int64_t v = 42;
  ASSERT_TRUE(put(buf, &v, 8, 0).is_ok());
  EXPECT_EQ(*static_cast<std::int64_t*>(buf), 42);
  ASSERT_TRUE(barrier_all().is_ok());
  ASSERT_TRUE(free(buf).is_ok());
  ASSERT_TRUE(finalize().is_ok());
  EXPECT_TRUE(initialized());  // one init still outstanding
  ASSERT_TRUE(finalize().is_ok());
  EXPECT_FALSE(initialized());
}

}  // namespace
}  // namespace hp::shmem
