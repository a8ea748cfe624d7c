// A kernel library as a user would build one: entry points found by name with dlopen.
#include "platform/chip.h"
#include "runtime/task_args.h"

// y[i] = x[i] * factor for the block's share of the elements (INPUT x, OUTPUT_EXISTING y,
// scalar factor), int32.
extern "C" [[gnu::visibility("default")]] hp::Status hp_test_scale_i32(
    const hp::runtime::TaskArgs& args, hp::platform::BlockContext& block) {
  const auto* x = static_cast<const std::int32_t*>(args.tensor(0).data());
  auto* y = static_cast<std::int32_t*>(args.tensor(1).data());
  const auto factor = args.scalar_as<std::int32_t>(0);
  const std::int64_t n = args.tensor(0).numel();
  for (std::int64_t i = block.block_idx(); i < n; i += block.block_dim()) y[i] = x[i] * factor;
  return hp::Status::ok();
}
