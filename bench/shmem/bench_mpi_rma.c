/* The same measurements as bench_shmem.c on MPI-3 RMA (passive target), the path an MPI user
 * would take: MPI_Win_allocate + lock_all; put = MPI_Put + MPI_Win_flush; ping-pong = put of
 * the payload and a flag, flushed, the target polling its flag with MPI_Win_sync and an
 * MPI_Iprobe (over a network the target's MPI must make progress for the put to land); barrier =
 * MPI_Barrier; alltoall = MPI_Alltoall. PE 0 prints one JSON object. */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

static int me, npes, partner, active;
static char* base; /* window: [flag (64 B) | dst (buf)] */
static char* src;
static MPI_Win win;
static size_t buf;
static const MPI_Aint kDst = 64;

static double put_sample(size_t bytes, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (me == 0 && npes > 1) {
    for (int i = 0; i < iters; ++i) {
      MPI_Put(src, (int)bytes, MPI_BYTE, partner, kDst, (int)bytes, MPI_BYTE, win);
      MPI_Win_flush(partner, win);
    }
  }
  const double t = now() - t0;
  MPI_Barrier(MPI_COMM_WORLD);
  return t / iters;
}

static double pingpong_sample(int iters) {
  static int64_t round_ = 0;
  volatile int64_t* flag = (volatile int64_t*)base;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (active) {
    for (int i = 0; i < iters; ++i) {
      ++round_;
      const int sender_first = me % 2 == 0;
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg == 0) == sender_first) {
          MPI_Put(src, 8, MPI_BYTE, partner, kDst, 8, MPI_BYTE, win);
          MPI_Win_flush(partner, win);
          MPI_Put((const void*)&round_, 1, MPI_INT64_T, partner, 0, 1, MPI_INT64_T, win);
          MPI_Win_flush(partner, win);
        } else {
          while (*flag != round_) {
            int pending = 0;
            MPI_Win_sync(win);
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE);
          }
        }
      }
    }
  }
  const double t = now() - t0;
  MPI_Barrier(MPI_COMM_WORLD);
  return t / (2.0 * iters);
}

static double barrier_sample(int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int i = 0; i < iters; ++i) MPI_Barrier(MPI_COMM_WORLD);
  return (now() - t0) / iters;
}

static double alltoall_sample(size_t bytes_per_pe, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int i = 0; i < iters; ++i) {
    MPI_Alltoall(src, (int)bytes_per_pe, MPI_BYTE, base + kDst, (int)bytes_per_pe, MPI_BYTE,
                 MPI_COMM_WORLD);
  }
  const double t = now() - t0;
  MPI_Barrier(MPI_COMM_WORLD);
  return t / iters;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
  const int reps = quick ? 1 : 7;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &npes);
  partner = me ^ 1;
  active = partner < npes;
  const size_t big = (size_t)64 << 20, a2a = (size_t)1 << 20;
  buf = big > a2a * (size_t)npes ? big : a2a * (size_t)npes;
  MPI_Win_allocate((MPI_Aint)(buf + kDst), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  src = malloc(buf);
  memset(src, 1, buf);
  memset(base, 0, buf + kDst);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  MPI_Barrier(MPI_COMM_WORLD);

  const double put_64k = MEDIAN_OF(reps, put_sample((size_t)64 << 10, quick ? 2 : 2000));
  const double put_1m = MEDIAN_OF(reps, put_sample((size_t)1 << 20, quick ? 2 : 200));
  const double put_64m = MEDIAN_OF(reps, put_sample(big, quick ? 1 : 8));
  const double pingpong = MEDIAN_OF(reps, pingpong_sample(quick ? 10 : 20000));
  const double barrier = MEDIAN_OF(reps, barrier_sample(quick ? 10 : 20000));
  const double alltoall = MEDIAN_OF(reps, alltoall_sample(a2a, quick ? 1 : 20));

  if (me == 0) {
    printf(
        "{\"impl\": \"%s\", \"n_pes\": %d, \"put_GBps_64K\": %.3f, \"put_GBps_1M\": %.3f, "
        "\"put_GBps_64M\": %.3f, \"pingpong_half_rtt_us\": %.3f, \"barrier_us\": %.3f, "
        "\"alltoall_1M_us\": %.1f}\n",
        argc > 1 ? argv[1] : "mpi-rma", npes, (64 << 10) / put_64k / 1e9, (1 << 20) / put_1m / 1e9,
        big / put_64m / 1e9, pingpong * 1e6, barrier * 1e6, alltoall * 1e6);
    fflush(stdout);
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  free(src);
  MPI_Finalize();
  return 0;
}
