"""The fused MoE layer as a differentiable torch op (CPU tensors):

    from hyper_parallel import moe, moe_torch
    layer = moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=T, backward=True)
    y = moe_torch.mega_moe(layer, x, topk_idx, topk_weights)   # x, topk_weights may require grad
    loss(y).backward()                                         # collective, like the forward
    x.grad, topk_weights.grad                                   # as usual
    layer.w1_grad, layer.w2_grad                                # the weights' (see below)

mega_moe is torch.ops.hyper_parallel.mega_moe(layer.torch(), ...): the multicore torch adapter's
op, whose autograd kernel runs the layer's native backward. The experts' weights are int8 with
scales, which torch cannot attach gradients to: their gradients (of the dequantised weights,
float32) are added to the layer's `w1_grad` / `w2_grad` (and `shared_w1_grad` /
`shared_w2_grad` with a shared expert), created on the first backward, like a parameter's
.grad; set them to None to start again. Every rank must call backward as it called the forward
(it is collective).
"""
from __future__ import annotations

from . import native
from .errors import call_torch_op
from .moe import MegaMoe


def mega_moe(layer: MegaMoe, x, topk_idx, topk_weights, x_active_mask=None):
    """y = layer(x, ...) as a differentiable torch op (the layer made with backward=True for the
    backward), in x's dtype."""
    return call_torch_op(native.torch_ops("multicore").mega_moe, layer.torch(), x, topk_idx, topk_weights,
                         x_active_mask)
