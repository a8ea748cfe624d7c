/* Shared by the symmetric-memory benchmark programs: a clock and the median of samples. */
#ifndef HYPER_PARALLEL_BENCH_SHMEM_BENCH_COMMON_H_
#define HYPER_PARALLEL_BENCH_SHMEM_BENCH_COMMON_H_

#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median of `reps` samples; each sample is seconds per operation over `iters` operations. */
#define MEDIAN_OF(reps, sample_expr)                                  \
  ({                                                                  \
    double samples_[64];                                              \
    for (int r_ = 0; r_ < (reps); ++r_) samples_[r_] = (sample_expr); \
    qsort(samples_, (size_t)(reps), sizeof(double), cmp_double);      \
    samples_[(reps) / 2];                                             \
  })

#endif
