/* shmemx.h: the OpenSHMEM extensions of HyperParallel (libhyper_parallel_shmem_c).
 *
 * OpenSHMEM 1.5 has every implementation provide this header, holding its shmemx_ extensions
 * if it has any, so that programs may include it unconditionally. HyperParallel has none: this
 * header is <shmem.h>. */
#ifndef HYPER_PARALLEL_SHMEMX_C_H
#define HYPER_PARALLEL_SHMEMX_C_H

#include "shmem.h" /* beside this header, in the tree and in the install */

#endif /* HYPER_PARALLEL_SHMEMX_C_H */
