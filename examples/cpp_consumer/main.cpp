// Runs one mix launch on a chip: each cube block hands a number to its vector blocks.
#include <hyper_parallel/common/version.h>
#include <hyper_parallel/platform/chip.h>

#include <cstdio>
#include <memory>
#include <vector>

int main() {
  std::unique_ptr<hp::platform::Chip> chip;
  hp::Status s = hp::platform::Chip::create({.num_cube = 1, .num_vector = 2}, &chip);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  int handed = 0;
  std::vector<int> seen(2, 0);
  s = chip->launch({.mode = hp::platform::LaunchMode::kMix, .block_dim = 1},
                   [&](hp::platform::BlockContext& ctx) -> hp::Status {
                     if (ctx.core_type() == hp::platform::CoreType::kCube) {
                       handed = 42;
                       return ctx.set_flag(0);
                     }
                     HP_RETURN_IF_ERROR(ctx.wait_flag(0, 1));
                     seen[ctx.sub_block_idx()] = handed;
                     return hp::Status::ok();
                   });
  if (!s.is_ok() || seen[0] != 42 || seen[1] != 42) {
    std::fprintf(stderr, "launch failed: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("hyper_parallel %s: find_package consumer ok\n", std::string(hp::version()).c_str());
  return 0;
}
