// The scalar reference target, built into the kernels front end (always available).
#ifndef HYPER_PARALLEL_KERNELS_REFERENCE_REFERENCE_H_
#define HYPER_PARALLEL_KERNELS_REFERENCE_REFERENCE_H_

#include "kernels/kernel_table.h"

namespace hp::kernels {
const KernelTable* reference_kernel_table();
}

#endif  // HYPER_PARALLEL_KERNELS_REFERENCE_REFERENCE_H_
