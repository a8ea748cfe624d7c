/* The deprecated active-set collectives: over every PE and over the even PEs (logPE_stride 1),
 * each pSync reused by the next call at once, and left at SHMEM_SYNC_VALUE. */
#include <stdint.h>

#include "hp_test.h"

static long p_sync[SHMEM_SYNC_SIZE];
static long p_sync2[SHMEM_REDUCE_SYNC_SIZE];
static long p_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];

static long p_sync_check[SHMEM_BARRIER_SYNC_SIZE];

/* Between two barriers of the set on another pSync: a member that returned from a call may
 * already be in the set's next call, adding to the first member's pSync. */
static void check_sync_values(int start, int log_stride, int size) {
  shmem_barrier(start, log_stride, size, p_sync_check);
  for (int i = 0; i < SHMEM_SYNC_SIZE; ++i) HP_CHECK_EQ(p_sync[i], SHMEM_SYNC_VALUE);
  shmem_barrier(start, log_stride, size, p_sync_check);
}

/* Every collective once over the set (start, log_stride, size); `index` is this PE's in it. */
static void run_set(int start, int log_stride, int size, int index, int32_t* dest32,
                    int64_t* dest64, int32_t* src32, int64_t* src64, long* reduced, long* values,
                    double* real) {
  shmem_barrier(start, log_stride, size, p_sync);
  shmem_sync(start, log_stride, size, p_sync);
  check_sync_values(start, log_stride, size);

  /* broadcast64 from the set's last member: every other member's dest gets it. */
  for (int i = 0; i < 2; ++i) src64[i] = 1000 * me + i;
  shmem_broadcast64(dest64, src64, 2, size - 1, start, log_stride, size, p_sync);
  const int root = start + (size - 1) * (1 << log_stride);
  if (index != size - 1) {
    HP_CHECK_EQ(dest64[0], 1000 * root);
    HP_CHECK_EQ(dest64[1], 1000 * root + 1);
  } else {
    HP_CHECK_EQ(dest64[0], 0); /* the root's dest is not written */
  }
  check_sync_values(start, log_stride, size);

  /* fcollect32: two elements from each member, in set order. */
  src32[0] = 10 * index;
  src32[1] = 10 * index + 1;
  shmem_fcollect32(dest32, src32, 2, start, log_stride, size, p_sync);
  for (int k = 0; k < size; ++k) {
    HP_CHECK_EQ(dest32[2 * k], 10 * k);
    HP_CHECK_EQ(dest32[2 * k + 1], 10 * k + 1);
  }
  /* collect64: member k gives k + 1 elements. */
  for (int i = 0; i <= index; ++i) src64[i] = 100 * index + i;
  shmem_collect64(dest64, src64, (size_t)(index + 1), start, log_stride, size, p_sync);
  int at = 0;
  for (int k = 0; k < size; ++k) {
    for (int i = 0; i <= k; ++i) HP_CHECK_EQ(dest64[at++], 100 * k + i);
  }
  check_sync_values(start, log_stride, size);

  /* alltoall32: block j to member j; alltoalls64 with strides. */
  for (int j = 0; j < size; ++j) src32[j] = 100 * index + j;
  shmem_alltoall32(dest32, src32, 1, start, log_stride, size, p_sync);
  for (int j = 0; j < size; ++j) HP_CHECK_EQ(dest32[j], 100 * j + index);
  for (int j = 0; j < size; ++j) src64[2 * j] = 7 * index + j;
  shmem_alltoalls64(dest64, src64, 3, 2, 1, start, log_stride, size, p_sync);
  for (int j = 0; j < size; ++j) HP_CHECK_EQ(dest64[3 * j], 7 * j + index);
  check_sync_values(start, log_stride, size);

  /* Reductions, with a second pSync; dest may be source. */
  values[0] = index + 1;
  values[1] = -index;
  shmem_long_sum_to_all(reduced, values, 2, start, log_stride, size, p_wrk, p_sync2);
  HP_CHECK_EQ(reduced[0], (long)size * (size + 1) / 2);
  HP_CHECK_EQ(reduced[1], -(long)size * (size - 1) / 2);
  shmem_long_max_to_all(reduced, values, 1, start, log_stride, size, p_wrk, p_sync2);
  HP_CHECK_EQ(reduced[0], size);
  shmem_long_or_to_all(values, values, 1, start, log_stride, size, p_wrk, p_sync2);
  long all_bits = 0;
  for (int k = 0; k < size; ++k) all_bits |= k + 1;
  HP_CHECK_EQ(values[0], all_bits);
  *real = 0.25;
  shmem_double_prod_to_all(real, real, 1, start, log_stride, size, (double*)p_wrk, p_sync2);
  double want = 1.0;
  for (int k = 0; k < size; ++k) want *= 0.25;
  HP_CHECK(*real == want);
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) HP_CHECK_EQ(p_sync2[i], SHMEM_SYNC_VALUE);
}

/* The buffers (collectively, every PE), then run_set on the members. */
static void exercise(int start, int log_stride, int size, int index) {
  int32_t* dest32 = (int32_t*)shmem_calloc((size_t)(4 * n), sizeof(int32_t));
  int64_t* dest64 = (int64_t*)shmem_calloc((size_t)(4 * n), sizeof(int64_t));
  int32_t* src32 = (int32_t*)shmem_calloc((size_t)(4 * n), sizeof(int32_t));
  int64_t* src64 = (int64_t*)shmem_calloc((size_t)(4 * n), sizeof(int64_t));
  long* reduced = (long*)shmem_calloc(2, sizeof(long));
  long* values = (long*)shmem_calloc(2, sizeof(long));
  double* real = (double*)shmem_calloc(1, sizeof(double));
  shmem_barrier_all();
  if (index >= 0) {
    run_set(start, log_stride, size, index, dest32, dest64, src32, src64, reduced, values, real);
  }
  shmem_barrier_all();
  shmem_free(real);
  shmem_free(values);
  shmem_free(reduced);
  shmem_free(src64);
  shmem_free(src32);
  shmem_free(dest64);
  shmem_free(dest32);
}

int main(void) {
  for (int i = 0; i < SHMEM_SYNC_SIZE; ++i) p_sync[i] = SHMEM_SYNC_VALUE;
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) p_sync2[i] = SHMEM_SYNC_VALUE;
  hp_init();
  exercise(0, 0, n, me);                                  /* every PE */
  exercise(0, 1, (n + 1) / 2, me % 2 == 0 ? me / 2 : -1); /* the even PEs */
  return hp_finish("active_set");
}
