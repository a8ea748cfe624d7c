/* What the OpenSHMEM C test programs share: this PE and its ring neighbours, checks that count
 * failures, and the one-line result.
 *
 * A failed check prints "PE <pe>: <file>:<line>: <what>" to stderr (the first 20 per PE) and
 * counts. hp_report() adds the counts of every PE on PE 0, which prints the result line; each
 * PE returns non-zero from main when it failed (PE 0 also when any PE failed). */
#ifndef HP_SHMEM_C_TEST_H
#define HP_SHMEM_C_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmem.h>

static int hp_failures = 0;

/* This PE, the number of PEs, and the next and previous PEs on the ring (set by hp_init). */
static int me, n, next, prev;

static inline void hp_set_pes(void) {
  me = shmem_my_pe();
  n = shmem_n_pes();
  next = (me + 1) % n;
  prev = (me + n - 1) % n;
}

/* How many PEs SHMEM_TEAM_SHARED must hold (the PEs whose heaps this PE maps), from how the
 * job was started: one on the mpi transport (HP_SHMEM_TRANSPORT=mpi: every other PE through
 * MPI-3 RMA), the PEs of this host under mpirun (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), every
 * PE under hprun and in a one-PE job. */
static inline int hp_expected_shared_pes(void) {
  const char* transport = getenv("HP_SHMEM_TRANSPORT");
  const char* local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (transport != NULL && strcmp(transport, "mpi") == 0) return 1;
  if (local != NULL) return atoi(local);
  return shmem_n_pes();
}

/* Whether PE pe's heap is mapped here (shmem_ptr gives a pointer into it): pe is a member of
 * SHMEM_TEAM_SHARED, whose size the tests check against hp_expected_shared_pes(). */
static inline int hp_mapped(int pe) {
  return shmem_team_translate_pe(SHMEM_TEAM_WORLD, pe, SHMEM_TEAM_SHARED) >= 0;
}

static inline void hp_init(void) {
  shmem_init();
  hp_set_pes();
}

static inline void hp_failed(const char* file, int line, const char* what, long long actual,
                             long long expected, int with_values) {
  if (++hp_failures > 20) return;
  if (with_values) {
    fprintf(stderr, "PE %d: %s:%d: %s is %lld, expected %lld\n", shmem_my_pe(), file, line, what,
            actual, expected);
  } else {
    fprintf(stderr, "PE %d: %s:%d: check failed: %s\n", shmem_my_pe(), file, line, what);
  }
}

#define HP_CHECK(cond)                                          \
  do {                                                          \
    if (!(cond)) hp_failed(__FILE__, __LINE__, #cond, 0, 0, 0); \
  } while (0)

/* Integer values, compared and printed as long long. */
#define HP_CHECK_EQ(actual, expected)                                            \
  do {                                                                           \
    long long hp_a_ = (long long)(actual), hp_e_ = (long long)(expected);        \
    if (hp_a_ != hp_e_) hp_failed(__FILE__, __LINE__, #actual, hp_a_, hp_e_, 1); \
  } while (0)

/* Collective over the world team. Call before shmem_finalize; returns main's exit status. */
static inline int hp_report(const char* name) {
  int* total = (int*)shmem_calloc(1, sizeof(int));
  int status = hp_failures != 0;
  shmem_int_atomic_add(total, hp_failures, 0);
  shmem_barrier_all();
  if (shmem_my_pe() == 0) {
    if (*total == 0) {
      printf("%s: PASS on %d PEs\n", name, shmem_n_pes());
    } else {
      printf("%s: FAIL: %d failed checks on %d PEs\n", name, *total, shmem_n_pes());
      status = 1;
    }
    fflush(stdout);
  }
  shmem_free(total);
  return status;
}

/* hp_report, then shmem_finalize: main's exit status. */
static inline int hp_finish(const char* name) {
  const int status = hp_report(name);
  shmem_finalize();
  return status;
}

#endif /* HP_SHMEM_C_TEST_H */
