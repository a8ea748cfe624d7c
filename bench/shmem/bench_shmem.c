/* Symmetric-memory microbenchmarks, one source for every OpenSHMEM implementation: compiled
 * against HyperParallel's <shmem.h> (OpenSHMEM 1.5) and against Open MPI's OSHMEM (1.4).
 * Where 1.4 lacks a routine the closest 1.4 idiom is used and named in the output:
 *   put+signal ping-pong: shmem_putmem_signal (1.5) | putmem + fence + long_p (1.4)
 *   alltoall:             shmem_alltoallmem on SHMEM_TEAM_WORLD (1.5) | shmem_alltoall64 (1.4)
 *   blocked put:          shmem_int64_ibput (1.6) | a shmem_putmem per block (1.4/1.5)
 *   signal add:           shmem_signal_add (1.6) | shmem_long_atomic_add (1.4/1.5)
 *   fetch-add:            shmem_long_atomic_fetch_add (1.4 and later), every PE on one word
 * PE 0 prints one JSON object: {"impl": ..., "n_pes": N, "<metric>": value, ...}.
 * Bandwidth: PE 0 puts to PE 1 while the others wait. Ping-pong: every (even, odd) pair at
 * once. PE 0's numbers are reported. */
#include <shmem.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

#if SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5
#define HAS_15 1
#else
#define HAS_15 0
#endif
#if SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 6
#define HAS_16 1
#else
#define HAS_16 0
#endif

static int me, npes, partner, active;
static char *src, *dst;
static long* flag;        /* 1.4 ping-pong flag */
static long* counter;     /* fetch-add's word */
static uint64_t* signal_; /* 1.5 ping-pong signal */

/* PE 0 puts to PE 1; the others wait in a barrier. */
static double put_sample(size_t bytes, int iters) {
  shmem_barrier_all();
  const double t0 = now();
  if (me == 0 && npes > 1) {
    for (int i = 0; i < iters; ++i) {
      shmem_putmem(dst, src, bytes, partner);
      shmem_quiet();
    }
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / iters;
}

/* PE 0 alone copies locally (the others wait in a barrier), as a put's sender does. */
static double memcpy_sample(size_t bytes, int iters) {
  shmem_barrier_all();
  const double t0 = now();
  if (me == 0) {
    for (int i = 0; i < iters; ++i) {
      memcpy(dst, src, bytes);
      __asm__ volatile("" ::: "memory");
    }
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / iters;
}

static double pingpong_sample(int iters) {
  static uint64_t round_ = 0;
  shmem_barrier_all();
  const double t0 = now();
  if (active) {
    for (int i = 0; i < iters; ++i) {
      ++round_;
      const int sender_first = me % 2 == 0;
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg == 0) == sender_first) {
#if HAS_15
          shmem_putmem_signal(dst, src, 8, signal_, round_, SHMEM_SIGNAL_SET, partner);
#else
          shmem_putmem(dst, src, 8, partner);
          shmem_fence();
          shmem_long_p(flag, (long)round_, partner);
#endif
        } else {
#if HAS_15
          shmem_signal_wait_until(signal_, SHMEM_CMP_EQ, round_);
#else
          shmem_long_wait_until(flag, SHMEM_CMP_EQ, (long)round_);
#endif
        }
      }
    }
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / (2.0 * iters);
}

/* PE 0 puts kBlocks blocks of kBlock int64 elements, kStride apart on both sides, to PE 1. */
enum { kBlocks = 64, kBlock = 128, kStride = 256 };
static double ibput_sample(int iters) {
  shmem_barrier_all();
  const double t0 = now();
  if (me == 0 && npes > 1) {
    for (int i = 0; i < iters; ++i) {
#if HAS_16
      shmem_int64_ibput((int64_t*)dst, (const int64_t*)src, kStride, kStride, kBlock, kBlocks,
                        partner);
#else
      for (int b = 0; b < kBlocks; ++b) {
        const size_t at = (size_t)b * kStride * sizeof(int64_t);
        shmem_putmem(dst + at, src + at, kBlock * sizeof(int64_t), partner);
      }
#endif
      shmem_quiet();
    }
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / iters;
}

/* PE 0 adds to PE 1's signal word `iters` times, then completes them. */
static double signal_add_sample(int iters) {
  shmem_barrier_all();
  const double t0 = now();
  if (me == 0 && npes > 1) {
    for (int i = 0; i < iters; ++i) {
#if HAS_16
      shmem_signal_add(signal_, 1, partner);
#else
      shmem_long_atomic_add((long*)signal_, 1, partner); /* 1.4 has no uint64 AMOs */
#endif
    }
    shmem_quiet();
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / iters;
}

/* Every PE fetch-adds to the same word of PE 0 `iters` times: the time per op of the slowest
 * (PE 0 waits for all in the barrier), atomics under contention. */
static double fetch_add_sample(int iters) {
  shmem_barrier_all();
  const double t0 = now();
  for (int i = 0; i < iters; ++i) (void)shmem_long_atomic_fetch_add(counter, 1, 0);
  shmem_barrier_all();
  return (now() - t0) / iters;
}

static double barrier_sample(int iters) {
  shmem_barrier_all();
  const double t0 = now();
  for (int i = 0; i < iters; ++i) shmem_barrier_all();
  return (now() - t0) / iters;
}

#if !HAS_15
static long alltoall_psync[SHMEM_ALLTOALL_SYNC_SIZE];
#endif

static double alltoall_sample(size_t bytes_per_pe, int iters) {
  shmem_barrier_all();
  const double t0 = now();
  for (int i = 0; i < iters; ++i) {
#if HAS_15
    shmem_alltoallmem(SHMEM_TEAM_WORLD, dst, src, bytes_per_pe);
#else
    shmem_alltoall64(dst, src, bytes_per_pe / 8, 0, 0, npes, alltoall_psync);
    shmem_barrier_all(); /* pSync reuse */
#endif
  }
  const double t = now() - t0;
  shmem_barrier_all();
  return t / iters;
}

int main(int argc, char** argv) {
  const char* impl = argc > 1 ? argv[1] : "unknown";
  const int quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
  const int reps = quick ? 1 : 7;
  shmem_init();
  me = shmem_my_pe();
  npes = shmem_n_pes();
  partner = me ^ 1;
  active = partner < npes;
  const size_t big = (size_t)64 << 20;
  const size_t a2a = (size_t)1 << 20;
  const size_t buf = big > a2a * (size_t)npes ? big : a2a * (size_t)npes;
  src = shmem_malloc(buf);
  dst = shmem_malloc(buf);
  flag = shmem_malloc(sizeof(long));
  counter = shmem_calloc(1, sizeof(long));
  signal_ = shmem_malloc(sizeof(uint64_t));
  if (!src || !dst || !flag || !counter || !signal_) {
    fprintf(stderr, "bench_shmem: shmem_malloc failed (heap too small?)\n");
    shmem_global_exit(2);
  }
  memset(src, 1, buf);
  memset(dst, 0, buf);
  *flag = 0;
  *signal_ = 0;
#if !HAS_15
  for (int i = 0; i < SHMEM_ALLTOALL_SYNC_SIZE; ++i) alltoall_psync[i] = SHMEM_SYNC_VALUE;
#endif
  shmem_barrier_all();

  const double put_64k = MEDIAN_OF(reps, put_sample((size_t)64 << 10, quick ? 2 : 2000));
  const double put_1m = MEDIAN_OF(reps, put_sample((size_t)1 << 20, quick ? 2 : 200));
  const double put_64m = MEDIAN_OF(reps, put_sample(big, quick ? 1 : 8));
  const double memcpy_64m = MEDIAN_OF(reps, memcpy_sample(big, quick ? 1 : 8));
  const double pingpong = MEDIAN_OF(reps, pingpong_sample(quick ? 10 : 20000));
  const double barrier = MEDIAN_OF(reps, barrier_sample(quick ? 10 : 20000));
  const double alltoall = MEDIAN_OF(reps, alltoall_sample(a2a, quick ? 1 : 20));
  const double ibput = MEDIAN_OF(reps, ibput_sample(quick ? 2 : 2000));
  const double signal_add = MEDIAN_OF(reps, signal_add_sample(quick ? 10 : 20000));
  const double fetch_add = MEDIAN_OF(reps, fetch_add_sample(quick ? 10 : 2000));

  if (me == 0) {
    printf(
        "{\"impl\": \"%s\", \"n_pes\": %d, \"openshmem\": \"%d.%d\", "
        "\"put_GBps_64K\": %.3f, \"put_GBps_1M\": %.3f, \"put_GBps_64M\": %.3f, "
        "\"memcpy_GBps_64M\": %.3f, \"pingpong_half_rtt_us\": %.3f, \"barrier_us\": %.3f, "
        "\"alltoall_1M_us\": %.1f, \"ibput_64x1K_us\": %.3f, \"signal_add_us\": %.4f, "
        "\"fetch_add_us\": %.4f}\n",
        impl, npes, SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION, (64 << 10) / put_64k / 1e9,
        (1 << 20) / put_1m / 1e9, big / put_64m / 1e9, big / memcpy_64m / 1e9, pingpong * 1e6,
        barrier * 1e6, alltoall * 1e6, ibput * 1e6, signal_add * 1e6, fetch_add * 1e6);
    fflush(stdout);
  }
  shmem_free(signal_);
  shmem_free(counter);
  shmem_free(flag);
  shmem_free(dst);
  shmem_free(src);
  shmem_finalize();
  return 0;
}
