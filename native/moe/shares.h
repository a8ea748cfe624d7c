// Splitting dispatch and combine work over the chip's vector cores (they do the
// communication): [0, n) is cut into one contiguous share per worker, a worker being a
// vector core of the chip (a kVector launch) or, without a chip, the calling thread alone.
#ifndef HYPER_PARALLEL_MOE_SHARES_H_
#define HYPER_PARALLEL_MOE_SHARES_H_

#include <cstdint>
#include <functional>

#include "common/status.h"
#include "platform/chip.h"

namespace hp::moe {

// Workers of a chip (its vector cores), 1 without one.
int share_workers(hp::platform::Chip* chip);

// Runs body(begin, end, worker) for every worker's share of [0, n) (shares differ by at most one
// item; empty shares run too). Each share ends with stream_fence(), so its streamed stores are
// ordered before the launch completes. Returns the first error of a share.
Status for_each_share(
    hp::platform::Chip* chip, std::int64_t n,
    const std::function<Status(std::int64_t begin, std::int64_t end, int worker)>& body);

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_SHARES_H_
