// NodeJob: PEs forked from one parent share the heaps it mapped (same addresses everywhere),
// join as PEs and use hp::shmem; the parent reads and writes every heap and allocates in the
// reserved part; a dead child aborts the job for the others; nothing is left in /dev/shm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/printers.h"
#include "shmem/node_job.h"
#include "shmem/shmem.h"

namespace hp::shmem {
namespace {

using ::testing::HasSubstr;

// This library's names in /dev/shm ("hp.<job>.*"); other jobs running beside the test (Open
// MPI's segments) add and remove their own names meanwhile.
std::set<std::string> dev_shm_names() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = e.path().filename().string();
    if (name.starts_with("hp.")) names.insert(std::move(name));
  }
  return names;
}

// Exit codes of a child: 0 ok, 10 + the ErrorCode of a failure.
int exit_code_of(const Status& s) { return s.is_ok() ? 0 : 10 + int(s.code()); }

// Forks one child per PE running body(pe) (its exit code); the parent reaps them, marking a PE
// dead as soon as its process ends with a non-zero status (as the node runtime does), and
// returns the exit codes (-signal for a signal).
std::vector<int> run_children(NodeJob& job, const std::function<int(int)>& body) {
  std::map<pid_t, int> pe_of;
  for (int pe = 0; pe < job.n_pes(); ++pe) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int code = body(pe);
      std::fflush(nullptr);
      _exit(code);
    }
    job.set_pid(pe, pid);
    pe_of[pid] = pe;
  }
  std::vector<int> codes(std::size_t(job.n_pes()), -1000);
  while (!pe_of.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    const int pe = pe_of.at(pid);
    pe_of.erase(pid);
    codes[std::size_t(pe)] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    if (codes[std::size_t(pe)] != 0) {
      job.mark_dead(pe, status, "exited with " + std::to_string(codes[std::size_t(pe)]));
    }
  }
  return codes;
}

class NodeJobTest : public ::testing::TestWithParam<int> {};

TEST_P(NodeJobTest, ChildrenJoinAndExchangeThroughTheHeapsTheParentMapped) {
  const int n = GetParam();
  const auto before = dev_shm_names();
  std::unique_ptr<NodeJob> job;
  ASSERT_TRUE(NodeJob::create({.n_pes = n,
                               .heap_bytes = 4 << 20,
                               .reserved_bytes = 1 << 20,
                               .timeout_s = 30,
                               .job_id = "test"},
                              &job)
                  .is_ok());
  EXPECT_EQ(dev_shm_names(), before);  // anonymous: no names
  // The parent's symmetric block: inputs written by the parent, results by the children.
  std::size_t offset = 0;
  ASSERT_TRUE(job->allocate(64 * sizeof(std::uint64_t), 64, &offset).is_ok());
  for (int pe = 0; pe < n; ++pe) {
    auto* in = reinterpret_cast<std::uint64_t*>(job->heap(pe) + offset);
    in[0] = 1000 + std::uint64_t(pe);
  }
  const auto codes = run_children(*job, [&](int pe) -> int {
    if (Status s = job->join(pe); !s.is_ok()) return exit_code_of(s);
    if (my_pe() != pe || n_pes() != n || transport_name((pe + 1) % n) != "shm") return 2;
    // Symmetric: this PE's copy of the parent's block is at the address the parent computed.
    auto* block = reinterpret_cast<std::uint64_t*>(job->heap(pe) + offset);
    // A PE's own malloc lands after the reserved part.
    void* mine = nullptr;
    if (!shmem::malloc(64, &mine).is_ok()) return 3;
    if (static_cast<std::byte*>(mine) < job->heap(pe) + job->reserved_bytes()) return 4;
    // Ring: put my input to the next PE's slot 1 with a signal in slot 2.
    const int next = (pe + 1) % n;
    Status s =
        put_signal(&block[1], &block[0], sizeof(std::uint64_t), &block[2], 1, SignalOp::kAdd, next);
    if (s.is_ok()) s = signal_wait_until(&block[2], Cmp::kGe, 1);
    if (s.is_ok()) s = barrier_all();
    return exit_code_of(s);
  });
  EXPECT_EQ(codes, std::vector<int>(std::size_t(n), 0));
  for (int pe = 0; pe < n; ++pe) {
    const auto* block = reinterpret_cast<const std::uint64_t*>(job->heap(pe) + offset);
    EXPECT_EQ(block[1], 1000 + std::uint64_t((pe + n - 1) % n)) << "PE " << pe;
    EXPECT_EQ(block[2], 1u) << "PE " << pe;
  }
  int pe = -1;
  std::size_t found = 0;
  ASSERT_TRUE(job->locate(job->heap(n - 1) + offset + 8, 8, &pe, &found));
  EXPECT_EQ(pe, n - 1);
  EXPECT_EQ(found, offset + 8);
  EXPECT_FALSE(job->locate(&found, 8, &pe, &found));
  job.reset();
  EXPECT_EQ(dev_shm_names(), before);
}

TEST_P(NodeJobTest, ADeadChildEndsTheOthersWaitsNamingIt) {
  const int n = GetParam();
  std::unique_ptr<NodeJob> job;
  ASSERT_TRUE(NodeJob::create({.n_pes = n, .heap_bytes = 1 << 20, .timeout_s = 60}, &job).is_ok());
  const auto start = std::chrono::steady_clock::now();
  const auto codes = run_children(*job, [&](int pe) -> int {
    if (pe == 1) _exit(7);  // dies before joining
    const Status s = job->join(pe);
    return s.code() == ErrorCode::kPeerDead && s.message().find("PE 1") != std::string::npos
               ? 0
               : exit_code_of(s) + 100;
  });
  for (int pe = 0; pe < n; ++pe) EXPECT_EQ(codes[std::size_t(pe)], pe == 1 ? 7 : 0) << pe;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_THAT(job->control().abort_message(), HasSubstr("PE 1: exited with 7"));
}

INSTANTIATE_TEST_SUITE_P(Pes, NodeJobTest, ::testing::Values(2, 4));

TEST(NodeJob, BadConfigurationsAndAllocationsAreRefused) {
  std::unique_ptr<NodeJob> job;
  EXPECT_EQ(NodeJob::create({.n_pes = 0}, &job).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(NodeJob::create({.n_pes = 2, .heap_bytes = 100}, &job).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      NodeJob::create({.n_pes = 2, .heap_bytes = 1 << 20, .reserved_bytes = 2 << 20}, &job).code(),
      ErrorCode::kInvalidArgument);
  ASSERT_TRUE(
      NodeJob::create({.n_pes = 2, .heap_bytes = 1 << 20, .reserved_bytes = 4096}, &job).is_ok());
  std::size_t offset = 0;
  const Status full = job->allocate(8192, 64, &offset);
  EXPECT_EQ(full.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(full.message(), HasSubstr("reserved part"));
  ASSERT_TRUE(job->allocate(1024, 64, &offset).is_ok());
  EXPECT_EQ(job->reserved_in_use(), 1024u);
  EXPECT_TRUE(job->release(offset).is_ok());
  EXPECT_EQ(job->release(offset).code(), ErrorCode::kDoubleFree);
  EXPECT_EQ(job->join(5).code(), ErrorCode::kOutOfRange);
}

}  // namespace
}  // namespace hp::shmem
