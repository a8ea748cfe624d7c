// The job control segment shared by hprun and the PEs of a job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "shmem/job.h"
#include "shmem/shmem.h"

#include <fcntl.h>

namespace hp::shmem {
namespace {

using ::testing::HasSubstr;

std::string unique_job_id() {
  return fmt::format("test-job-{}-{}", ::getpid(),
                     ::testing::UnitTest::GetInstance()->random_seed() + std::rand());
}

TEST(JobSegment, CreateOpenAndUnlink) {
  const std::string id = unique_job_id();
  std::unique_ptr<JobSegment> created, opened;
  ASSERT_TRUE(JobSegment::create(id, 4, &created).is_ok());
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/hp." + id + ".ctl"));
  Status s = JobSegment::open(id, 4, &opened);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(opened->n_pes(), 4);
  opened->pe(2).state.store(std::uint32_t(PeState::kReady));
  EXPECT_EQ(created->pe(2).state.load(), std::uint32_t(PeState::kReady));  // one shared mapping
  EXPECT_EQ(JobSegment::create(id, 4, &created).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(JobSegment::unlink_all(id), 1);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/hp." + id + ".ctl"));
  EXPECT_EQ(JobSegment::open(id, 4, &opened).code(), ErrorCode::kNotFound);
}

TEST(JobSegment, OpenChecksTheWorldSize) {
  const std::string id = unique_job_id();
  std::unique_ptr<JobSegment> created, opened;
  ASSERT_TRUE(JobSegment::create(id, 2, &created).is_ok());
  Status s = JobSegment::open(id, 3, &opened);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData);
  EXPECT_THAT(s.message(), HasSubstr("HP_WORLD_SIZE"));
  JobSegment::unlink_all(id);
}

TEST(JobSegment, OpenRejectsAForeignSegment) {
  const std::string id = unique_job_id();
  const std::string name = JobSegment::control_name(id);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  std::unique_ptr<JobSegment> opened;
  Status s = JobSegment::open(id, 1, &opened);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData);
  EXPECT_THAT(s.message(), HasSubstr("magic"));
  JobSegment::unlink_all(id);
}

TEST(JobSegment, JobIdsAreValidated) {
  std::unique_ptr<JobSegment> segment;
  for (const char* bad : {"", "a/b", "../x", "with space", "x.y"}) {
    EXPECT_EQ(JobSegment::create(bad, 1, &segment).code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(JobSegment::create_private(0, &segment).code(), ErrorCode::kInvalidArgument);
}

TEST(JobSegment, FirstAbortWinsAndWakesDoorbells) {
  std::unique_ptr<JobSegment> job;
  ASSERT_TRUE(JobSegment::create_private(3, &job).is_ok());
  EXPECT_FALSE(job->aborted());
  const std::uint32_t before = job->pe(1).doorbell.value.load();
  const std::uint32_t bell_before = job->pe(1).barrier_bell.value.load();
  EXPECT_TRUE(job->abort(2, "killed by signal 9"));
  EXPECT_FALSE(job->abort(0, "later"));
  EXPECT_TRUE(job->aborted());
  EXPECT_EQ(job->abort_message(), "PE 2: killed by signal 9");
  EXPECT_NE(job->pe(1).doorbell.value.load(), before);
  EXPECT_NE(job->pe(1).barrier_bell.value.load(), bell_before);
}

TEST(JobSegment, AbortWakesASleepingWaiter) {
  std::unique_ptr<JobSegment> job;
  ASSERT_TRUE(JobSegment::create_private(2, &job).is_ok());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    job->abort(-1, "test");
  });
  std::uint32_t last = 0;
  const std::uint32_t start = job->pe(0).doorbell.value.load();
  auto r = platform::wait_word(
      job->pe(0).doorbell, [start](std::uint32_t v) { return v != start; },
      platform::deadline_after(30), {.spin = 0, .yield_for = std::chrono::microseconds(0)}, nullptr,
      &last);
  aborter.join();
  EXPECT_EQ(r, platform::WaitResult::kReady);
  EXPECT_EQ(job->abort_message(), "test");
}

// The text after "<key>:" in /proc/self/task/<tid>/status ("State", "voluntary_ctxt_switches").
std::string task_status_field(pid_t tid, const std::string& key) {
  std::ifstream in(fmt::format("/proc/self/task/{}/status", tid));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  }
  return {};
}

// Data put into a PE's heap rings its doorbell, not its barrier bell: a PE that sleeps in a
// barrier is not woken by every put that lands meanwhile (only by the barrier's own arrivals,
// and by the bounded sleep slices that watch for an abort).
TEST(Doorbells, APeSleepingInABarrierIsNotWokenByPutsToIt) {
  std::atomic<pid_t> sleeper{0};
  long switches = -1, slices = 0;
  const Status s = run_threads(
      2,
      [&]() -> Status {
        void* word = nullptr;
        HP_RETURN_IF_ERROR(malloc(64, &word));
        if (my_pe() == 1) {
          sleeper = ::gettid();
          return barrier_all();
        }
        while (sleeper == 0) std::this_thread::yield();
        // Until PE 1 sleeps in the barrier (state S: on its futex, past its yields).
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (task_status_field(sleeper, "State").find('S') == std::string::npos) {
          if (std::chrono::steady_clock::now() > give_up) {
            return Status::error(ErrorCode::kTimeout, "PE 1 never slept in the barrier");
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        constexpr int kPuts = 40;
        const long before = std::stol(task_status_field(sleeper, "voluntary_ctxt_switches"));
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kPuts; ++i) {
          const std::uint64_t value = i;
          HP_RETURN_IF_ERROR(put(word, &value, sizeof value, 1));
          // Longer than a woken waiter yields before it sleeps again (HP_YIELD_BEFORE_SLEEP_US).
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const auto elapsed = std::chrono::steady_clock::now() - start;
        switches = std::stol(task_status_field(sleeper, "voluntary_ctxt_switches")) - before;
        slices = long(elapsed / std::chrono::milliseconds(20)) + 1;  // its abort-watch sleeps
        return barrier_all();
      },
      {.heap_bytes = 1 << 20, .timeout_s = 60});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  // Woken by every put, PE 1 would have slept again 40 times.
  EXPECT_LE(switches, slices + 2) << "PE 1 was woken by the puts into its heap";
}

}  // namespace
}  // namespace hp::shmem
