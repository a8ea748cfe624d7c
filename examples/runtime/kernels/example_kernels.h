// The kernels of the runtime examples (examples/runtime), built into the core payload as
// lib/libhyper_parallel_example_kernels.so and found by name (Callable::from_library in C++,
// hyper_parallel.runtime.Callable.from_library in Python). Every entry point has the
// KernelEntry signature (runtime/callable.h) and runs once per block; each block takes its own
// share of the work, so any block_dim is correct. All tensors are fp32 unless said otherwise;
// views may be strided (rows of a tile of a larger matrix) but rows must be contiguous.
//
//   hp_example_add_f32        tensors x (INPUT), y (INPUT), z (written), same shape [n]: z = x + y
//   hp_example_scale_f32      tensors x (INPUT), y (written) [n]; scalar alpha (float): y = alpha x
//   hp_example_sum_f32        tensors x (INPUT) [n], out (written) [1]: out = sum(x) (block 0)
//   hp_example_tile_gemm_f32  tensors a (INPUT) [m, k], b (INPUT) [k, n], c (written) [m, n];
//                             scalar accumulate (int32): c = a b, or c += a b when non-zero
//   hp_example_bias_act_f32   tensors c (INOUT) [m, n], bias (INPUT) [n]; scalar activation
//                             (int32, Activation): c = act(c + bias)
//   hp_example_paged_attention  the SPMD paged attention (paged_attention.h)
#ifndef HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_KERNELS_H_
#define HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_KERNELS_H_

#include <cstdint>

#include "common/status.h"
#include "platform/chip.h"
#include "runtime/task_args.h"

#define HP_EXAMPLE_KERNEL extern "C" [[gnu::visibility("default")]] hp::Status

namespace hp::examples {

enum class Activation : std::int32_t { kNone = 0, kRelu = 1, kGelu = 2 };

// The activation the kernels apply (tanh-approximated GELU), for goldens.
float activate(float x, Activation activation);

inline constexpr const char* kExampleKernelsLibrary = "libhyper_parallel_example_kernels.so";

}  // namespace hp::examples

HP_EXAMPLE_KERNEL hp_example_add_f32(const hp::runtime::TaskArgs& args,
                                     hp::platform::BlockContext& block);
HP_EXAMPLE_KERNEL hp_example_scale_f32(const hp::runtime::TaskArgs& args,
                                       hp::platform::BlockContext& block);
HP_EXAMPLE_KERNEL hp_example_sum_f32(const hp::runtime::TaskArgs& args,
                                     hp::platform::BlockContext& block);
HP_EXAMPLE_KERNEL hp_example_tile_gemm_f32(const hp::runtime::TaskArgs& args,
                                           hp::platform::BlockContext& block);
HP_EXAMPLE_KERNEL hp_example_bias_act_f32(const hp::runtime::TaskArgs& args,
                                          hp::platform::BlockContext& block);

#endif  // HYPER_PARALLEL_EXAMPLES_RUNTIME_EXAMPLE_KERNELS_H_
