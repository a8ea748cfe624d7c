// The time of a collective step as the benchmarks under mpirun report it: every rank starts at
// a barrier, and the sample is the slowest rank's time.
#ifndef HYPER_PARALLEL_BENCH_COMMON_MPI_TIMED_H_
#define HYPER_PARALLEL_BENCH_COMMON_MPI_TIMED_H_

#include <mpi.h>

namespace hp::bench {

template <typename F>
double timed(F&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  fn();
  double mine = MPI_Wtime() - start, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace hp::bench

#endif  // HYPER_PARALLEL_BENCH_COMMON_MPI_TIMED_H_
