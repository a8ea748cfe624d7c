// Runs one test scenario on every PE of each transport the binary is run on:
//   - started by hprun (HP_JOB_ID set) or mpirun: this process is one PE of an shm or mpi job;
//     main() inits and finalizes, the scenario runs once here and every rank runs the same
//     tests in order;
//   - otherwise: as a threads job of 2 and then of 4 PEs inside this process.
#ifndef HYPER_PARALLEL_TESTS_SHMEM_SCENARIO_H_
#define HYPER_PARALLEL_TESTS_SHMEM_SCENARIO_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "shmem/shmem.h"

namespace hp::shmem::testing {

// In a scenario body (a function returning Status): a failed call is a test failure and ends
// the body with its status.
#define HP_EXPECT_OK(expr)                                            \
  do {                                                                \
    ::hp::Status hp_s_ = (expr);                                      \
    EXPECT_TRUE(hp_s_.is_ok()) << #expr << ": " << hp_s_.to_string(); \
    if (!hp_s_.is_ok()) return hp_s_;                                 \
  } while (0)

// The world PEs start, start + stride, ... (size of them).
inline std::vector<int> strided(int start, int stride, int size) {
  std::vector<int> pes;
  for (int k = 0; k < size; ++k) pes.push_back(start + k * stride);
  return pes;
}

inline bool under_hprun() {
  return std::getenv("HP_JOB_ID") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

inline void run_scenario(const std::function<Status()>& body) {
  if (under_hprun()) {
    Status s = body();
    EXPECT_TRUE(s.is_ok()) << "PE " << my_pe() << ": " << s.to_string();
    Status b = barrier_all();  // keep the ranks in step between tests
    ASSERT_TRUE(b.is_ok()) << b.to_string();
    return;
  }
  for (int n : {2, 4}) {
    Status s = run_threads(n, body, {.heap_bytes = 16 << 20});
    EXPECT_TRUE(s.is_ok()) << n << " thread PEs: " << s.to_string();
  }
}

// main() of a scenario test binary: init/finalize around the tests when run by hprun.
inline int scenario_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (under_hprun()) {
    Status s = init();
    if (!s.is_ok()) {
      std::fprintf(stderr, "shmem init failed: %s\n", s.to_string().c_str());
      return 2;
    }
  }
  const int result = RUN_ALL_TESTS();
  if (under_hprun()) {
    Status s = finalize();
    if (!s.is_ok()) {
      std::fprintf(stderr, "shmem finalize failed: %s\n", s.to_string().c_str());
      return 3;
    }
  }
  return result;
}

}  // namespace hp::shmem::testing

#endif  // HYPER_PARALLEL_TESTS_SHMEM_SCENARIO_H_
