// Binding memory to NUMA nodes (Linux mbind, MPOL_BIND).
#ifndef HYPER_PARALLEL_PLATFORM_MEMORY_BINDING_H_
#define HYPER_PARALLEL_PLATFORM_MEMORY_BINDING_H_

#include <cstddef>
#include <span>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp::platform {

// Binds the pages of [addr, addr + bytes) (addr page-aligned) to `nodes`: pages faulted in
// afterwards come from them, pages already present are moved where the kernel can. For a
// shared mapping the policy is the shared object's, for every process that maps it. A node
// that does not exist (or is not allowed to this process) is INVALID_ARGUMENT naming it.
HP_API Status bind_memory(void* addr, std::size_t bytes, std::span<const int> nodes);

// The nodes the page at `addr` is bound to; empty when its
// policy is not MPOL_BIND.
HP_API Status memory_binding(const void* addr, std::vector<int>* nodes);

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_MEMORY_BINDING_H_
