// What the op files of the C op ABI (hyper_parallel_op_api.h) share: the handles' contents,
// the calling thread's last error, hpTensor views and the executor of an op's second phase.
#ifndef HYPER_PARALLEL_OPS_OP_EXECUTOR_H_
#define HYPER_PARALLEL_OPS_OP_EXECUTOR_H_

// The library is built with hidden visibility: the ABI's declarations are exported (and the
// package's linker version script then keeps exactly the selected ops').
#pragma GCC visibility push(default)
#include "hyper_parallel_op_api.h"
#pragma GCC visibility pop

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "common/tensor_view.h"
#include "moe/sessions.h"

// A buffer with the handles of its last notify/dispatch and low-latency dispatch (what the next
// dispatch or combine continue from).
struct hpMoeBuffer : hp::moe::BufferSession {};

namespace hp::ops {
// Which create made a layer: each family variant runs only the layers of its own create.
enum class LayerVariant : std::int32_t { kBase = 0, kW4A8 = 1, kShmem = 2 };
}  // namespace hp::ops

// A layer and its chip, with the variant that made it.
struct hpHyperMegaMoeLayer : hp::moe::LayerSession {
  hp::ops::LayerVariant variant = hp::ops::LayerVariant::kBase;
};

// What an op runs, given the caller's workspace.
struct hpOpExecutor {
  std::function<hp::Status(void* workspace, uint64_t workspace_bytes)> run;
};

namespace hp::ops {

// The status as an hpStatus, remembering its message as the calling thread's last error.
hpStatus report(const Status& s);
const char* last_error();

// An hpTensor as a view (null: an empty view). Not validated here: the op's checks name it.
TensorView view(const hpTensor* t);

// An executor of an op without workspace (the communication ops work in the buffer's own
// symmetric memory): size 0.
hpStatus make_executor(std::function<Status()> run, uint64_t* workspace_size,
                       hpOpExecutor** executor);
// Runs and frees an executor.
hpStatus run_executor(hpOpExecutor* executor, void* workspace = nullptr,
                      uint64_t workspace_bytes = 0);

Status check_buffer(const hpMoeBuffer* buffer);
hp::moe::DispatchArgs dispatch_args(const hpTensor* x, const hpTensor* topk_idx,
                                    const hpTensor* topk_weights, const hpTensor* mask,
                                    int32_t quant, int64_t alignment);
// Copies n int64 values into an int64 [n] output.
Status store_int64(const TensorView& out, const char* what,
                   const std::vector<std::int64_t>& values);

// The layer ops' two phases for a layer of `variant` (named `op` in the errors).
Status check_layer(const hpHyperMegaMoeLayer* layer, LayerVariant variant, const char* op);
hpStatus layer_forward_executor(hpHyperMegaMoeLayer* layer, LayerVariant variant, const char* op,
                                const hpTensor* x, const hpTensor* topk_idx,
                                const hpTensor* topk_weights, const hpTensor* x_active_mask,
                                const hpTensor* y, uint64_t* workspace_size,
                                hpOpExecutor** executor);
// Creates a layer of `variant` (its weight type and comm context), collectively.
hpStatus create_layer(const hpHyperMegaMoeConfig* config, const hpHyperMegaMoeWeights* weights,
                      LayerVariant variant, hpHyperMegaMoeLayer** layer);

}  // namespace hp::ops

#endif  // HYPER_PARALLEL_OPS_OP_EXECUTOR_H_
