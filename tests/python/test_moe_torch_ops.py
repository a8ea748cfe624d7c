"""torch.ops.hyper_parallel's MoE ops (the multicore torch adapter) in multi-process jobs under
hprun: each op against the Python object it shares the native buffer or layer with
(hyper_parallel.moe.Buffer / MegaMoe), bit for bit; mega_moe's autograd against mega_moe_grad;
the W4A8 layer against its int8 storage; errors as HpError."""
from __future__ import annotations

import textwrap

import pytest

from test_moe_python import GRAD_PROLOGUE, run_ranks

pytest.importorskip("torch")

TORCH = """
import torch
from hyper_parallel import native
from hyper_parallel.errors import call_torch_op
ops = native.torch_ops("multicore")
T = lambda a: torch.from_numpy(np.ascontiguousarray(a))
"""


@pytest.mark.parametrize("n", [2, 4])
def test_dispatch_and_combine_ops_round_trip_as_the_buffers_calls(n, tmp_path):
    run_ranks(n, TORCH + textwrap.dedent("""
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, low_latency=True)
        tb = buf.torch()
        assert tb is buf.torch() and tb.rank() == me and tb.num_ranks() == n and tb.local_experts() == E // n
        x, idx, w = inputs(me)
        xt, it, wt = T(x), T(idx), T(w)
        layout = buf.get_dispatch_layout(idx)
        per_rank, per_expert, in_rank = ops.dispatch_layout(it, E, n)
        assert per_rank.tolist() == layout.num_tokens_per_rank.tolist()
        assert per_expert.tolist() == layout.num_tokens_per_expert.tolist()
        assert in_rank.dtype == torch.bool and in_rank.numpy().tolist() == layout.is_token_in_rank.tolist()

        count, offsets = ops.notify_dispatch(tb, xt, it, wt, None, False, 4)
        recv_x, scale, recv_w, src, count2, offsets2 = ops.dispatch(tb, xt, it, wt, None, False, 4)
        assert scale is None and count.tolist() == count2.tolist() and offsets.tolist() == offsets2.tolist()
        y_op = ops.combine(tb, recv_x, recv_w)
        d = buf.dispatch(x, idx, w, expert_alignment=4)
        assert np.array_equal(recv_x.numpy(), d.recv_x) and np.array_equal(recv_w.numpy(), d.recv_topk_weights)
        assert src[:, 0].tolist() == d.recv_src_rank.tolist() and src[:, 1].tolist() == d.recv_src_token.tolist()
        assert count.tolist() == d.num_recv_tokens_per_expert and offsets.tolist() == d.expert_offsets
        y = buf.combine(d.recv_x, d.handle).combined_x
        assert np.array_equal(y_op.numpy(), y)
        factor = (np.where(idx >= 0, w, 0)).sum(axis=1)
        assert np.array_equal(y, x * factor[:, None])          # exact: small integers, dyadic weights
        # the plain sum (dispatch's adjoint) and explicit weights
        assert np.array_equal(ops.combine(tb, recv_x, None).numpy(),
                              buf.combine(d.recv_x, d.handle, weighted=False).combined_x)
        assert np.array_equal(ops.combine(tb, recv_x, recv_w * 2).numpy(), 2 * y)
        # quantised: int8 rows and their scales
        q_x, q_scale, *_ = ops.dispatch(tb, xt, it, wt, None, True, 1)
        dq = buf.dispatch(x, idx, w, quantize=True)
        assert q_x.dtype == torch.int8 and np.array_equal(q_x.numpy(), dq.recv_x)
        assert np.array_equal(q_scale.numpy(), dq.recv_x_scale)

        # the low-latency pair
        lx, lscale, lcount, lrange, lsrc = ops.low_latency_dispatch(tb, xt, it, wt, None, False)
        ly = ops.low_latency_combine(tb, lx, wt)
        ll = buf.low_latency_dispatch(x, idx, w)
        assert lscale is None and lcount.tolist() == ll.recv_count
        assert np.array_equal(lrange.numpy(), ll.layout_range)
        for e, c in enumerate(ll.recv_count):
            assert np.array_equal(lx[e, :c].numpy(), ll.recv_x[e, :c])
            assert lsrc[e, :c, 0].tolist() == ll.recv_src_rank[e, :c].tolist()
            assert lsrc[e, :c, 1].tolist() == ll.recv_src_token[e, :c].tolist()
        assert np.array_equal(ly.numpy(), buf.low_latency_combine(ll.recv_x, w, ll.handle))
        assert np.array_equal(ly.numpy(), x * factor[:, None])

        # a bad expert id on one rank: its error there, ABORTED on the others, as HpError
        bad = idx.copy()
        if me == 0:
            bad[0, 0] = E
        try:
            call_torch_op(ops.dispatch, tb, xt, T(bad), wt, None, False, 1)
            raise AssertionError("an expert id out of range was accepted")
        except HpError as e:
            assert e.name == ("OUT_OF_RANGE" if me == 0 else "ABORTED"), e
        try:
            call_torch_op(ops.dispatch, tb, xt.to(torch.float64), it, wt, None, False, 1)
            raise AssertionError("a float64 x was accepted")
        except HpError as e:
            assert e.name == "DTYPE_MISMATCH", e
        buf.destroy()
        try:
            call_torch_op(ops.combine, tb, recv_x, recv_w)
            raise AssertionError("a destroyed buffer ran")
        except HpError as e:
            assert e.name == "FAILED_PRECONDITION" and "destroyed" in e.message, e
        try:
            call_torch_op(torch.classes.hyper_parallel.MoeBuffer, 10 ** 6)
            raise AssertionError("an unknown handle made a buffer")
        except HpError as e:
            assert e.name == "NOT_FOUND", e
    """), tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_mega_moe_op_matches_the_layer_and_its_backward_matches_mega_moe_grad(n, tmp_path):
    run_ranks(n, GRAD_PROLOGUE + TORCH + textwrap.dedent("""
        x, idx, w, dy = grad_inputs(me)
        xt, it, wt, dyt = T(x), T(idx), T(w), T(dy)
        a1, b1, a2, b2 = expert_weights(E)
        shared = (a1[None], b1[None], a2[None], b2[None])
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True,
                         shared=shared) as layer:
            tl = layer.torch()
            y = ops.mega_moe(tl, xt, it, wt, None)
            assert torch.equal(y, T(layer(x, idx, w).y))
            dx, dtopk, dw1, dw2, sdw1, sdw2 = ops.mega_moe_grad(tl, xt, it, wt, dyt, None)
            g = layer.backward(x, idx, w, dy)
            for got, want in ((dx, g.dx), (dtopk, g.d_topk_weights), (dw1, g.dw1), (dw2, g.dw2),
                              (sdw1, g.shared_dw1), (sdw2, g.shared_dw2)):
                assert np.array_equal(got.numpy(), want)
            # autograd: the op's backward is mega_moe_grad's
            xr, wr = xt.clone().requires_grad_(), wt.clone().requires_grad_()
            yr = ops.mega_moe(tl, xr, it, wr, None)
            assert yr.requires_grad and torch.equal(yr.detach(), y)
            (yr * dyt).sum().backward()
            assert torch.equal(xr.grad, dx) and torch.equal(wr.grad, dtopk)
            assert torch.equal(layer.w1_grad, dw1) and torch.equal(layer.shared_w2_grad, sdw2)
            layer.w1_grad = None
            assert layer.w1_grad is None and layer.w2_grad is not None
            # a mask: inactive tokens get zeros, forward and backward
            mask = T((np.arange(x.shape[0]) % 3 != 0).astype(np.uint8))
            ym = ops.mega_moe(tl, xt, it, wt, mask)
            assert torch.equal(ym, T(layer(x, idx, w, x_active_mask=mask.numpy()).y))
            assert not ym[0].any()
        try:
            call_torch_op(ops.mega_moe, tl, xt, it, wt, None)
            raise AssertionError("a destroyed layer ran")
        except HpError as e:
            assert e.name == "FAILED_PRECONDITION", e
    """), tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_w4a8_layer_matches_its_int8_storage(n, tmp_path):
    run_ranks(n, GRAD_PROLOGUE + TORCH + textwrap.dedent("""
        x, idx, w, _ = grad_inputs(me)
        rng = np.random.default_rng(40 + me)
        q1 = rng.integers(-8, 8, size=w1.shape).astype(np.int8)
        q2 = rng.integers(-8, 8, size=w2.shape).astype(np.int8)
        args = dict(num_experts=E, topk=K, max_tokens_per_rank=16)
        with moe.MegaMoe(q1, s1 * 16, q2, s2 * 16, **args) as int8, \\
                moe.MegaMoe(q1, s1 * 16, q2, s2 * 16, weight_dtype="int4", **args) as int4:
            want = int8(x, idx, w).y
            assert np.array_equal(int4(x, idx, w).y, want)
            assert torch.equal(ops.mega_moe(int4.torch(), T(x), T(idx), T(w), None), T(want))
        bad = q1.copy()
        if me == 0:
            bad[0, 0, 0] = 8
        try:
            moe.MegaMoe(bad, s1, q2, s2, weight_dtype="int4", **args)
            raise AssertionError("an int4 weight out of range was accepted")
        except HpError as e:
            assert e.name == ("OUT_OF_RANGE" if me == 0 else "INVALID_ARGUMENT"), e
        try:
            moe.MegaMoe(q1, s1, q2, s2, weight_dtype="int2", **args)
            raise AssertionError("an unknown weight dtype was accepted")
        except HpError as e:
            assert e.name == "INVALID_ARGUMENT", e
    """), tmp_path)
