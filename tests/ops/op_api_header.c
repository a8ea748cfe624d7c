/* The op ABI's header is C: this file is compiled as C11 into the op API test. */
#include <stddef.h>

#include "hyper_parallel_op_api.h"

int hp_op_api_header_is_c(void) {
  hpTensor t = {0};
  hpMoeBufferConfig config = {0};
  t.ndim = HP_TENSOR_MAX_DIMS;
  config.comm = HP_MOE_COMM_SHMEM;
  /* Every entry point has the declared type. */
  hpStatus (*ops[])(void*, uint64_t, hpOpExecutor*) = {hpDispatchLayout, hpNotifyDispatch,
                                                       hpMoeDispatchNormal, hpMoeCombineNormal};
  const char* (*message)(void) = hpGetLastErrorMessage;
  return t.ndim == 8 && config.comm == 1 && sizeof(ops) / sizeof(ops[0]) == 4 && message() != NULL;
}
