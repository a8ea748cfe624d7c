"""The fused MoE layer in torch autograd (CPU tensors):

    from hyper_parallel import moe, moe_torch
    layer = moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=T, backward=True)
    y = moe_torch.mega_moe(layer, x, topk_idx, topk_weights)   # x, topk_weights may require grad
    loss(y).backward()                                         # collective, like the forward
    x.grad, topk_weights.grad                                   # as usual
    layer.w1_grad, layer.w2_grad                                # the weights' (see below)

The experts' weights are int8 with scales, which torch cannot attach gradients to: their
gradients (of the dequantised weights, float32) are added to the layer's `w1_grad` / `w2_grad`
(and `shared_w1_grad` / `shared_w2_grad` with a shared expert), created on the first backward,
like a parameter's .grad; set them to None to start again. Every rank must call backward as it
called the forward (it is collective).
"""
from __future__ import annotations

import torch

from .moe import MegaMoe


class MegaMoeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, layer: MegaMoe, x, topk_idx, topk_weights, x_active_mask):
        ctx.layer = layer
        ctx.save_for_backward(x, topk_idx, topk_weights, *(() if x_active_mask is None else (x_active_mask,)))
        return layer(x.detach(), topk_idx, topk_weights.detach(), x_active_mask=x_active_mask).y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        layer = ctx.layer
        x, topk_idx, topk_weights, *mask = ctx.saved_tensors
        dy = dy.contiguous()
        if dy.dtype not in (torch.float32, torch.bfloat16):
            dy = dy.float()
        g = layer.backward(x.detach(), topk_idx, topk_weights.detach(), dy,
                           x_active_mask=mask[0] if mask else None)
        for name, value in (("w1_grad", g.dw1), ("w2_grad", g.dw2), ("shared_w1_grad", g.shared_dw1),
                            ("shared_w2_grad", g.shared_dw2)):
            if value is None:
                continue
            held = getattr(layer, name, None)
            setattr(layer, name, value if held is None else held + value)
        dx = g.dx.to(x.dtype) if ctx.needs_input_grad[1] else None
        d_topk = g.d_topk_weights.to(topk_weights.dtype) if ctx.needs_input_grad[3] else None
        return None, dx, None, d_topk, None


def mega_moe(layer: MegaMoe, x, topk_idx, topk_weights, x_active_mask=None):
    """y = layer(x, ...) as a differentiable torch op (the layer made with backward=True)."""
    return MegaMoeFunction.apply(layer, x, topk_idx, topk_weights, x_active_mask)
