// The kernels' public API in one include: targets, packing, operations.
#ifndef HYPER_PARALLEL_KERNELS_KERNELS_H_
#define HYPER_PARALLEL_KERNELS_KERNELS_H_

#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kernels/packing.h"
#include "kernels/targets.h"

#endif  // HYPER_PARALLEL_KERNELS_KERNELS_H_
