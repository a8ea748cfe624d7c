#include "moe/shares.h"

#include "moe/stream_copy.h"

namespace hp::moe {

int share_workers(hp::platform::Chip* chip) { return chip == nullptr ? 1 : chip->num_vector(); }

Status for_each_share(hp::platform::Chip* chip, std::int64_t n,
                      const std::function<Status(std::int64_t, std::int64_t, int)>& body) {
  const int workers = share_workers(chip);
  auto share = [&](int w) -> Status {
    const Status s = body(n * w / workers, n * (w + 1) / workers, w);
    stream_fence();
    return s;
  };
  if (chip == nullptr) return share(0);
  return chip->launch({.mode = hp::platform::LaunchMode::kVector, .block_dim = workers},
                      [&](hp::platform::BlockContext& block) { return share(block.block_idx()); });
}

}  // namespace hp::moe
