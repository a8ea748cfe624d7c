// The checks Buffer::create makes of its BufferConfig before it allocates anything.
#ifndef HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_
#define HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_

#include "common/status.h"
#include "moe/buffer.h"

namespace hp::moe {

// The largest sizes a buffer or a layer accepts. Each is far beyond a real model, and together
// they keep every byte count the window and the layer's plan multiply out (hidden x tokens x
// ranks x top-k x element bytes, E x H x 2I) inside int64: a size past them is refused before
// anything is computed from it.
inline constexpr std::int64_t kMaxHidden = std::int64_t(1) << 20;
inline constexpr std::int64_t kMaxIntermediate = std::int64_t(1) << 20;
inline constexpr std::int64_t kMaxTokensPerRank = std::int64_t(1) << 20;
inline constexpr std::int64_t kMaxTopk = 256;
inline constexpr std::int64_t kMaxExperts = std::int64_t(1) << 16;

// Collective over the shmem world: every rank gathers every rank's config and whether it maps
// every peer's heap (the same data everywhere, so every rank reaches the same verdict). Fails
// on every rank when two ranks' configs differ (naming the field), when a field is out of
// range, or when the config needs mapped heaps (CommKind::kWindow, DispatchPath::kPull) that a
// rank lacks. *all_mapped: whether every rank maps every peer's heap.
Status agree_on_config(const BufferConfig& config, bool* all_mapped);

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_BUFFER_CONFIG_H_
