// Kernels the node tests load as library symbols (Callable::from_library) on chips.
#include <unistd.h>

#include <cstdint>

#include "runtime/task_args.h"
#include "shmem/shmem.h"

// Every int32 element of tensor 0 = scalar 0 + this chip's PE number.
extern "C" [[gnu::visibility("default")]] hp::Status hp_node_test_fill_pe(
    const hp::runtime::TaskArgs& args, hp::platform::BlockContext&) {
  auto* out = static_cast<std::int32_t*>(args.tensor(0).data());
  const auto base = args.scalar_as<std::int32_t>(0);
  for (std::int64_t i = 0; i < args.tensor(0).numel(); ++i) out[i] = base + hp::shmem::my_pe();
  return hp::Status::ok();
}
