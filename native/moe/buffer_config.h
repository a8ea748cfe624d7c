// The checks Buffer::create makes of its BufferConfig before it allocates anything.
#ifndef HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_
#define HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_

#include "common/status.h"
#include "moe/buffer.h"

namespace hp::moe {

// Collective over the shmem world: every rank gathers every rank's config and whether it maps
// every peer's heap (the same data everywhere, so every rank reaches the same verdict). Fails
// on every rank when two ranks' configs differ (naming the field), when a field is out of
// range, or when the config needs mapped heaps (CommKind::kWindow, DispatchPath::kPull) that a
// rank lacks. *all_mapped: whether every rank maps every peer's heap.
Status agree_on_config(const BufferConfig& config, bool* all_mapped);

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_
