// The job control segment shared by hprun and the PEs of a job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "shmem/job.h"

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
  EXPECT_TRUE(job->abort(2, "killed by signal 9"));
  EXPECT_FALSE(job->abort(0, "later"));
  EXPECT_TRUE(job->aborted());
  EXPECT_EQ(job->abort_message(), "PE 2: killed by signal 9");
  EXPECT_NE(job->pe(1).doorbell.value.load(), before);
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

}  // namespace
}  // namespace hp::shmem
