/* The C11 type-generic interfaces (compiled with -std=c11): each selects the routine of the
 * pointed-to type, for plain and const pointers and for the <stdint.h> typedefs. */
#include <stdint.h>

#include "hp_test.h"

/* C11: shmem_global_exit is _Noreturn, so a function that ends in it returns nothing more
 * (-Werror=return-type otherwise). Never called. */
int hp_exit_with(int status);
int hp_exit_with(int status) { shmem_global_exit(status); }

int main(void) {
  hp_init();
  double* d = shmem_calloc(4, sizeof(double));
  long* l = shmem_calloc(4, sizeof(long));
  unsigned int* u = shmem_calloc(1, sizeof(unsigned int));
  int64_t* counter = shmem_calloc(1, sizeof(int64_t));
  uint64_t* sig = shmem_calloc(1, sizeof(uint64_t));
  short* s = shmem_calloc(1, sizeof(short));
  int* red = shmem_calloc(2, sizeof(int));
  const double values[2] = {1.5 + me, -2.25};
  shmem_barrier_all();

  shmem_put(d, values, 2, next);  /* shmem_double_put */
  shmem_p(&d[2], 0.5 * me, next); /* shmem_double_p */
  shmem_barrier_all();
  HP_CHECK(d[0] == 1.5 + prev && d[1] == -2.25);
  const double* cd = d;
  HP_CHECK(shmem_g(cd + 1, next) == -2.25); /* const pointer: shmem_double_g */
  double got[2];
  shmem_get(got, d, 2, next);
  HP_CHECK(got[0] == 1.5 + me);

  HP_CHECK(shmem_atomic_fetch_add(counter, (int64_t)2, 0) >= 0); /* int64_t is long */
  shmem_atomic_inc(counter, 0);
  shmem_atomic_or(u, 1u << me, 0);
  shmem_atomic_add(&l[0], 1L, 0);
  shmem_barrier_all();
  HP_CHECK(shmem_atomic_fetch((const int64_t*)counter, 0) == 3 * n);
  HP_CHECK(shmem_atomic_fetch(&l[0], 0) == n);
  HP_CHECK(shmem_atomic_compare_swap(&l[1], 0L, (long)me + 1, 0) >= 0);
  HP_CHECK(shmem_atomic_fetch(u, 0) == (1u << n) - 1);
  shmem_barrier_all();

  shmem_put_signal(&l[2], &l[0], 1, sig, 1, SHMEM_SIGNAL_SET, next);
  shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 1);
  shmem_p(s, (short)7, next);                  /* shmem_short_p */
  shmem_wait_until(s, SHMEM_CMP_EQ, (short)7); /* shmem_short_wait_until */
  HP_CHECK(shmem_test(s, SHMEM_CMP_GE, (short)7) == 1);
  shmem_p(&l[3], 9L, next);
  shmem_wait_until(&l[3], SHMEM_CMP_EQ, 9L); /* shmem_long_wait_until */
  shmem_barrier_all();

  red[0] = me;
  HP_CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &red[1], &red[0], 1) == 0);
  HP_CHECK(red[1] == n * (n - 1) / 2);
  HP_CHECK(shmem_broadcast(SHMEM_TEAM_WORLD, &l[2], &l[0], 1, 0) == 0); /* shmem_long_... */
  HP_CHECK(l[2] == n);
  shmem_barrier_all();

  /* 1.6: shmem_sum_inscan / _exscan and shmem_ibput / _ibget (and on a context). */
  red[0] = me + 1;
  HP_CHECK(shmem_sum_inscan(SHMEM_TEAM_WORLD, &red[1], &red[0], 1) == 0); /* shmem_int_... */
  HP_CHECK(red[1] == (me + 1) * (me + 2) / 2);
  HP_CHECK(shmem_sum_exscan(SHMEM_TEAM_WORLD, &red[1], &red[0], 1) == 0);
  HP_CHECK(red[1] == me * (me + 1) / 2);
  const double pair[2] = {-1.0 - me, 4.0};
  shmem_barrier_all();
  shmem_ibput(d, pair, 2, 1, 1, 2, next); /* shmem_double_ibput: d[0], d[2] */
  shmem_ibput(SHMEM_CTX_DEFAULT, &d[1], &pair[1], 1, 1, 1, 1, next); /* shmem_ctx_double_ibput */
  shmem_barrier_all();
  HP_CHECK(d[0] == -1.0 - prev && d[1] == 4.0 && d[2] == 4.0);
  double back[2];
  shmem_ibget(back, d, 1, 2, 1, 2, next); /* shmem_double_ibget */
  HP_CHECK(back[0] == -1.0 - me && back[1] == 4.0);
  shmem_barrier_all();

  /* 1.6: shmem_signal_add / _set, with and without a context. */
  *sig = 0;
  shmem_barrier_all();
  shmem_signal_add(sig, 2, next);
  shmem_signal_add(SHMEM_CTX_DEFAULT, sig, 3, next);
  shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 5);
  shmem_barrier_all();
  shmem_signal_set(SHMEM_CTX_DEFAULT, sig, 11, next);
  shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 11);
  shmem_barrier_all();
  shmem_signal_set(sig, 12, next);
  shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 12);
  shmem_barrier_all();

  /* The deprecated generic AMO names select by type: an int swap touches 4 bytes only (the
   * int after it keeps its value), a double swap moves the double's value. */
  int* ints = shmem_calloc(2, sizeof(int));
  long long* wide = shmem_calloc(1, sizeof(long long));
  ints[0] = 100 + me;
  ints[1] = 200 + me;
  d[3] = 1.5;
  shmem_barrier_all();
  HP_CHECK_EQ(shmem_swap(&ints[0], 7, next), 100 + next);
  HP_CHECK(shmem_swap(&d[3], 4.5, next) == 1.5);
  shmem_barrier_all();
  HP_CHECK_EQ(ints[0], 7);
  HP_CHECK_EQ(ints[1], 200 + me);
  HP_CHECK(d[3] == 4.5);
  shmem_barrier_all();
  shmem_add(wide, 2LL, 0);
  shmem_inc(wide, 0);
  HP_CHECK(shmem_fadd(wide, 0LL, 0) >= 0);
  HP_CHECK(shmem_finc(&ints[1], me) == 200 + me); /* shmem_int_finc */
  shmem_barrier_all();
  HP_CHECK(shmem_fetch(wide, 0) == 3LL * n);
  HP_CHECK_EQ(shmem_fetch(&ints[1], me), 201 + me);
  HP_CHECK_EQ(shmem_cswap(&ints[1], 201 + me, 5, me), 201 + me);
  shmem_set(&d[3], -2.0, me);
  HP_CHECK(shmem_fetch(&d[3], me) == -2.0);
  shmem_barrier_all();
  shmem_free(wide);
  shmem_free(ints);

  shmem_free(red);
  shmem_free(s);
  shmem_free(sig);
  shmem_free(counter);
  shmem_free(u);
  shmem_free(l);
  shmem_free(d);
  return hp_finish("generic");
}
