"""hyper_parallel.moe (DeepEP-shaped Buffer on numpy, and CPU torch tensors) in real multi-process
jobs under hprun, checked against a plain numpy reference built from every rank's inputs."""
from __future__ import annotations

import textwrap

import pytest

from conftest import REPO, SYSTEM_PYTHON, describe
from jobs import hprun, job_env

PROLOGUE = """
import numpy as np
from hyper_parallel import moe, shmem, HpError
shmem.acquire()
me, n = shmem.my_pe(), shmem.n_pes()
H, E, K = 32, 4 * n, 3

def inputs(rank, tokens=None):
    # Small integers and dyadic weights: every sum below is exact in float32.
    rng = np.random.default_rng(100 + rank)
    T = 10 + rank if tokens is None else tokens
    x = rng.integers(-8, 9, size=(T, H)).astype(np.float32)
    idx = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int64)
    idx[::4, 2] = -1                                  # some tokens use fewer experts
    w = np.tile(np.array([0.5, 0.25, 0.25], np.float32), (T, 1))
    return x, idx, w

def expected_rows(local_expert_of_rank):
    # (source rank, token) of each row of each local expert, by source then token
    rows = [[] for _ in range(E // n)]
    for s in range(n):
        _, idx, _ = inputs(s)
        for t in range(idx.shape[0]):
            for e in idx[t]:
                if e >= 0 and e // (E // n) == me:
                    rows[e % (E // n)].append((s, t))
    return rows
"""


def run_ranks(n: int, body: str, tmp_path) -> str:
    script = tmp_path / "job.py"
    script.write_text(PROLOGUE + textwrap.dedent(body) + "\nshmem.release()\nprint(f'rank {me} done')\n")
    result = hprun("-n", n, "--heap-size", "64M", SYSTEM_PYTHON, script,
                   env=job_env(PYTHONPATH=str(REPO / "python")), timeout=60)
    assert result.returncode == 0, describe(result)
    for rank in range(n):
        assert f"rank {rank} done" in result.stdout, describe(result)
    return result.stdout


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("comm,path", [("shmem", "auto"), ("window", "auto"), ("shmem", "push")])
def test_dispatch_combine_round_trip(n, comm, path, tmp_path):
    run_ranks(n, f"""
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, comm="{comm}",
                         dispatch_path="{path}")
        assert buf.dispatch_path == ("pull" if "{path}" == "auto" else "{path}")   # hprun maps every peer
        try:
            moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, dispatch_path="sideways")
            raise AssertionError("an unknown dispatch path was accepted")
        except HpError as e:
            assert e.name == "INVALID_ARGUMENT", e
        x, idx, w = inputs(me)
        layout = buf.get_dispatch_layout(idx)
        owner = np.where(idx >= 0, idx // (E // n), -1)
        for r in range(n):
            assert layout.is_token_in_rank[:, r].tolist() == (owner == r).any(axis=1).tolist()
            assert layout.num_tokens_per_rank[r] == (owner == r).any(axis=1).sum()
        assert layout.num_tokens_per_expert.tolist() == [(idx == e).sum() for e in range(E)]

        d = buf.dispatch(x, idx, w, expert_alignment=4)
        want = expected_rows(me)
        for le, rows in enumerate(want):
            first, end = d.expert_offsets[le], d.expert_offsets[le + 1]
            assert d.num_recv_tokens_per_expert[le] == len(rows)
            assert end - first == (len(rows) + 3) // 4 * 4
            for i, (s, t) in enumerate(rows):
                assert (d.recv_src_rank[first + i], d.recv_src_token[first + i]) == (s, t)
                assert np.array_equal(d.recv_x[first + i], inputs(s)[0][t])
            assert (d.recv_src_rank[first + len(rows):end] == -1).all()
            assert (d.recv_x[first + len(rows):end] == 0).all()
        # Expert e's output is (e + 1) x its input: y = sum_k w_k (e_k + 1) x, exactly.
        expert = np.repeat(np.arange(E // n), np.diff(d.expert_offsets)) + me * (E // n)
        y = buf.combine((d.recv_x * (expert[:, None] + 1)).astype(np.float32), d.handle).combined_x
        factor = (np.where(idx >= 0, w * (idx + 1), 0)).sum(axis=1)
        assert np.array_equal(y, x * factor[:, None]), (y - x * factor[:, None])
        # Unweighted: dispatch's adjoint sums the rows plainly.
        y1 = buf.combine(d.recv_x, d.handle, weighted=False).combined_x
        assert np.array_equal(y1, x * (idx >= 0).sum(axis=1)[:, None])
        buf.destroy()
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("comm", ["shmem", "window"])
def test_zero_copy_combine(n, comm, tmp_path):
    run_ranks(n, f"""
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, comm="{comm}",
                         zero_copy_combine=True)
        x, idx, w = inputs(me)
        d = buf.dispatch(x, idx, w, expert_alignment=4)
        expert = np.repeat(np.arange(E // n), np.diff(d.expert_offsets)) + me * (E // n)
        rows = buf.get_combine_buffer(d.handle)          # on the symmetric heap
        assert rows.shape == (d.recv_x.shape[0], H) and rows.dtype == np.float32
        rows[:] = d.recv_x * (expert[:, None] + 1)
        y = buf.combine(rows, d.handle).combined_x
        factor = (np.where(idx >= 0, w * (idx + 1), 0)).sum(axis=1)
        assert np.array_equal(y, x * factor[:, None]), (y - x * factor[:, None])
        rows = buf.get_combine_buffer(d.handle)          # again: waits until every rank has read
        rows[:] = d.recv_x
        y1 = buf.combine(rows, d.handle, weighted=False).combined_x
        assert np.array_equal(y1, x * (idx >= 0).sum(axis=1)[:, None])
        try:                                             # anything else than the combine rows
            buf.combine(d.recv_x.astype(np.float32), d.handle)
            raise AssertionError("combine of a private array on a zero-copy buffer")
        except HpError as e:
            assert e.name == "INVALID_ARGUMENT", e
        buf.destroy()
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_quantised_dispatch_and_low_latency(n, tmp_path):
    run_ranks(n, """
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, low_latency=True)
        x, idx, w = inputs(me)
        d = buf.dispatch(x, idx, w, quantize=True)
        assert d.recv_x.dtype == np.int8 and d.recv_x_scale.dtype == np.float32
        for r in range(d.recv_x.shape[0]):
            s, t = d.recv_src_rank[r], d.recv_src_token[r]
            src = inputs(s)[0][t]
            scale = np.abs(src).max() / 127
            assert d.recv_x_scale[r] == np.float32(scale)
            assert np.abs(d.recv_x[r] * d.recv_x_scale[r] - src).max() <= scale / 2 + 1e-6

        ll = buf.low_latency_dispatch(x, idx, w)
        assert ll.recv_x.shape == (E // n, n * 16, H)
        want = expected_rows(me)
        for le, rows in enumerate(want):
            assert ll.recv_count[le] == len(rows)
            for i, (s, t) in enumerate(rows):
                assert (ll.recv_src_rank[le, i], ll.recv_src_token[le, i]) == (s, t)
                assert np.array_equal(ll.recv_x[le, i], inputs(s)[0][t])
            for s in range(n):
                first, count = ll.layout_range[le, s]
                assert count == sum(1 for (r, _) in rows if r == s)
        out = (ll.recv_x * (np.arange(E // n)[:, None, None] + me * (E // n) + 1)).astype(np.float32)
        y = buf.low_latency_combine(out, w, ll.handle)
        factor = (np.where(idx >= 0, w * (idx + 1), 0)).sum(axis=1)
        assert np.array_equal(y, x * factor[:, None])
        buf.destroy()
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_bad_input_fails_every_rank(n, tmp_path):
    run_ranks(n, """
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16)
        x, idx, w = inputs(me)
        if me == n - 1:
            idx[0, 0] = E + 5
        try:
            buf.dispatch(x, idx, w)
            raise AssertionError("dispatch accepted an expert out of range")
        except HpError as e:
            assert e.name == ("OUT_OF_RANGE" if me == n - 1 else "ABORTED"), e
        x, idx, w = inputs(me)
        d = buf.dispatch(x, idx, w)                    # usable again
        old = d.handle
        d2 = buf.dispatch(x, idx, w)
        try:
            buf.combine(d2.recv_x, old)
            raise AssertionError("combine accepted a stale handle")
        except HpError as e:
            assert e.name == "FAILED_PRECONDITION", e
        y = buf.combine(d2.recv_x, d2.handle).combined_x
        assert y.shape == x.shape
        try:
            moe.Buffer(hidden=H, num_experts=E + (me == 0), topk=K, max_tokens_per_rank=16)
            raise AssertionError("ranks disagreeing on num_experts were accepted")
        except HpError as e:
            assert e.name == "INVALID_ARGUMENT" and "num_experts" in str(e), e
        buf.destroy()
    """, tmp_path)


def test_torch_tensors_bf16(tmp_path):
    pytest.importorskip("torch")
    run_ranks(2, """
        import torch
        buf = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, max_element_bytes=2,
                         combine_element_bytes=2)
        x, idx, w = inputs(me)
        xt = torch.from_numpy(x).to(torch.bfloat16)
        d = buf.dispatch(xt, torch.from_numpy(idx), torch.from_numpy(w))
        assert isinstance(d.recv_x, torch.Tensor) and d.recv_x.dtype == torch.bfloat16
        for r in range(d.recv_x.shape[0]):
            s, t = int(d.recv_src_rank[r]), int(d.recv_src_token[r])
            assert torch.equal(d.recv_x[r], torch.from_numpy(inputs(s)[0][t]).to(torch.bfloat16))
        y = buf.combine(d.recv_x, d.handle).combined_x
        assert y.dtype == torch.bfloat16
        factor = (np.where(idx >= 0, w, 0)).sum(axis=1)
        assert torch.allclose(y.float(), torch.from_numpy(x * factor[:, None]), rtol=1e-2, atol=1e-2)
        buf.destroy()
        # Zero-copy: the combine rows are a bf16 tensor on the symmetric heap.
        zc = moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16, max_element_bytes=2,
                        combine_element_bytes=2, zero_copy_combine=True)
        d = zc.dispatch(xt, torch.from_numpy(idx), torch.from_numpy(w))
        rows = zc.get_combine_buffer(d.handle)
        assert rows.dtype == torch.bfloat16 and rows.shape == d.recv_x.shape
        rows.copy_(d.recv_x)
        y = zc.combine(rows, d.handle).combined_x
        assert torch.allclose(y.float(), torch.from_numpy(x * factor[:, None]), rtol=1e-2, atol=1e-2)
        zc.destroy()
    """, tmp_path)


# Every expert's int8 weights from its id (any rank remakes any expert's), and this rank's.
LAYER_PROLOGUE = """
I = 24
def expert_weights(e):
    rng = np.random.default_rng(500 + e)
    w1 = rng.integers(-127, 128, size=(H, 2 * I)).astype(np.int8)
    w2 = rng.integers(-127, 128, size=(I, H)).astype(np.int8)
    return w1, np.full(2 * I, 1 / (73 * np.sqrt(H)), np.float32), w2, np.full(H, 1 / (73 * np.sqrt(I)), np.float32)
local = E // n
mine = [expert_weights(me * local + i) for i in range(local)]
w1, s1, w2, s2 = (np.stack([m[j] for m in mine]) for j in range(4))
"""


@pytest.mark.parametrize("n", [2, 4])
def test_mega_moe_matches_a_float_reference(n, tmp_path):
    run_ranks(n, LAYER_PROLOGUE + textwrap.dedent("""
        x, idx, w = inputs(me)
        x = x / 8                                      # unit-ish activations
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16) as layer:
            first = layer(x, idx, w)
            again = layer(x, idx, w)                   # buffers are reused
        assert np.array_equal(first.y, again.y)
        assert set(first.stage_seconds) == {"dispatch", "gmm1", "gmm2", "combine"}
        # float reference: dequantised weights, no activation quantisation
        ref = np.zeros_like(x, dtype=np.float64)
        for t in range(x.shape[0]):
            for k in range(K):
                e = idx[t, k]
                if e < 0:
                    continue
                a1, b1, a2, b2 = expert_weights(e)
                g = x[t] @ (a1 * b1)
                h = g[:I] / (1 + np.exp(-g[:I])) * g[I:]
                ref[t] += w[t, k] * (h @ (a2 * b2[None, :]))
        err = np.linalg.norm(first.y - ref) / np.linalg.norm(ref)
        assert err < 4e-2, err
        # the one-call form makes its own layer
        assert np.array_equal(moe.mega_moe(x, idx, w, w1, s1, w2, s2, num_experts=E).y, first.y)
        # a shared expert (expert id E's weights, on every rank) adds its output for every token
        a1, b1, a2, b2 = expert_weights(E)
        shared = (a1[None], b1[None], a2[None], b2[None])
        with_shared = moe.mega_moe(x, idx, w, w1, s1, w2, s2, num_experts=E, shared=shared).y
        g = x @ (a1 * b1)
        ref_shared = ref + (g[:, :I] / (1 + np.exp(-g[:, :I])) * g[:, I:]) @ (a2 * b2[None, :])
        err = np.linalg.norm(with_shared - ref_shared) / np.linalg.norm(ref_shared)
        assert err < 4e-2, err
        try:
            moe.MegaMoe(w1[:, :, :-1], s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16)
            raise AssertionError("odd GMM1 columns were accepted")
        except HpError as e:
            assert e.name == "SHAPE_MISMATCH", e
    """), tmp_path)


GRAD_PROLOGUE = LAYER_PROLOGUE + """
def grad_inputs(rank):
    x, idx, w = inputs(rank)
    dy = np.random.default_rng(900 + rank).standard_normal((x.shape[0], H)).astype(np.float32)
    return x / 8, idx, w, dy

def float_grads():
    # The float model's gradients (no activation quantisation): dx and d topk_weights of this
    # rank's tokens, dW of this rank's experts over every rank's tokens.
    dw1 = np.zeros((local, H, 2 * I)); dw2 = np.zeros((local, I, H))
    for s in range(n):
        x, idx, w, dy = grad_inputs(s)
        dx = np.zeros(x.shape); dtopk = np.zeros(w.shape)
        for t in range(x.shape[0]):
            for k in range(K):
                e = idx[t, k]
                if e < 0:
                    continue
                a1, b1, a2, b2 = expert_weights(e)
                W1, W2 = a1 * b1, a2 * b2[None, :]
                a = x[t] @ W1
                g, u = a[:I], a[I:]
                sig = 1 / (1 + np.exp(-g))
                h = g * sig * u
                G = W2 @ dy[t]
                dtopk[t, k] = G @ h
                dh = w[t, k] * G
                da = np.concatenate([dh * u * sig * (1 + g * (1 - sig)), dh * g * sig])
                dx[t] += W1 @ da
                if e // local == me:
                    dw2[e % local] += np.outer(h, w[t, k] * dy[t])
                    dw1[e % local] += np.outer(x[t], da)
        if s == me:
            mine_dx, mine_dtopk = dx, dtopk
    return mine_dx, mine_dtopk, dw1, dw2

def rel(a, b):
    return np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b)
"""


@pytest.mark.parametrize("n", [2, 4])
def test_mega_moe_grad_matches_the_float_model(n, tmp_path):
    run_ranks(n, GRAD_PROLOGUE + textwrap.dedent("""
        import hyper_parallel
        x, idx, w, dy = grad_inputs(me)
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True) as layer:
            g = layer.backward(x, idx, w, dy)
            again = layer.backward(x, idx, w, dy)
            assert not layer.last_backward_kept
        assert np.array_equal(g.dx, again.dx) and np.array_equal(g.dw1, again.dw1)
        assert set(g.stage_seconds) == {"dispatch", "recompute", "act_grad", "weight_grad", "combine", "overlap"}
        dx, dtopk, dw1, dw2 = float_grads()
        # int8 activations in the forward, bf16 GEMMs in the backward: a few percent
        for name, got, want in (("dx", g.dx, dx), ("d_topk", g.d_topk_weights, dtopk), ("dw1", g.dw1, dw1),
                                ("dw2", g.dw2, dw2)):
            assert rel(got, want) < 6e-2, (name, rel(got, want))
        assert g.shared_dw1 is None
        # keep_activations: after a forward of the same inputs the backward takes GMM1's output
        # from it (the same bits); without one, or after another x's, it recomputes.
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True,
                         keep_activations=True) as keeps:
            for forward_x, kept in ((None, False), (x, True), (x + 0.5, False)):
                if forward_x is not None:
                    keeps(forward_x, idx, w)
                k = keeps.backward(x, idx, w, dy)
                assert keeps.last_backward_kept == kept, (forward_x is None, kept)
                assert np.array_equal(k.dx, g.dx) and np.array_equal(k.dw1, g.dw1)
                assert np.array_equal(k.dw2, g.dw2) and np.array_equal(k.d_topk_weights, g.d_topk_weights)
        # int8_activation_grads: dY and dA rounded to int8 in the activation-gradient GEMMs: other
        # bits than the bf16 ones, as close to the float gradients.
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True,
                         int8_activation_grads=True) as int8_layer:
            q = int8_layer.backward(x, idx, w, dy)
            for name, got, want in (("dx", q.dx, dx), ("d_topk", q.d_topk_weights, dtopk), ("dw1", q.dw1, dw1),
                                    ("dw2", q.dw2, dw2)):
                assert rel(got, want) < 6e-2, (name, rel(got, want))
            assert not np.array_equal(q.dx, g.dx)
        for option in ("keep_activations", "int8_activation_grads"):
            try:
                moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, **{option: True})
                raise AssertionError(f"{option} without backward was accepted")
            except HpError as e:
                assert e.name == "INVALID_ARGUMENT", e
        one_call = hyper_parallel.mega_moe_grad(x, idx, w, dy, w1, s1, w2, s2, num_experts=E)
        assert np.array_equal(one_call.dx, g.dx) and np.array_equal(one_call.dw2, g.dw2)
        try:
            with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16) as plain:
                plain.backward(x, idx, w, dy)
            raise AssertionError("backward ran on a layer made without backward=True")
        except HpError as e:
            assert e.name == "FAILED_PRECONDITION", e
    """), tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_torch_autograd(n, tmp_path):
    pytest.importorskip("torch")
    run_ranks(n, GRAD_PROLOGUE + textwrap.dedent("""
        import torch
        from hyper_parallel import moe_torch
        x, idx, w, dy = grad_inputs(me)
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True) as layer:
            xt = torch.from_numpy(x).requires_grad_()
            wt = torch.from_numpy(w).requires_grad_()
            y = moe_torch.mega_moe(layer, xt, torch.from_numpy(idx), wt)
            assert torch.equal(y.detach(), torch.from_numpy(layer(x, idx, w).y))
            (y * torch.from_numpy(dy)).sum().backward()
            g = layer.backward(x, idx, w, dy)
            assert np.array_equal(xt.grad.numpy(), g.dx)
            assert np.array_equal(wt.grad.numpy(), g.d_topk_weights)
            assert np.array_equal(layer.w1_grad.numpy(), g.dw1) and np.array_equal(layer.w2_grad.numpy(), g.dw2)
            # a second backward adds to the weights' gradients, as .grad does
            y = moe_torch.mega_moe(layer, xt, torch.from_numpy(idx), wt)
            (y * torch.from_numpy(dy)).sum().backward()
            assert np.allclose(layer.w2_grad.numpy(), 2 * g.dw2)
            # bf16 activations: gradients come back in bf16
            xb = torch.from_numpy(x).to(torch.bfloat16).requires_grad_()
            yb = moe_torch.mega_moe(layer, xb, torch.from_numpy(idx), torch.from_numpy(w))
            assert yb.dtype == torch.bfloat16
            (yb.float() * torch.from_numpy(dy)).sum().backward()
            assert xb.grad.dtype == torch.bfloat16
            assert rel(xb.grad.float().numpy(), g.dx.astype(np.float64)) < 3e-2
        # keep_activations: autograd's backward follows its forward, so GMM1 is not recomputed
        with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, backward=True,
                         keep_activations=True) as keeps:
            xk = torch.from_numpy(x).requires_grad_()
            y = moe_torch.mega_moe(keeps, xk, torch.from_numpy(idx), torch.from_numpy(w))
            (y * torch.from_numpy(dy)).sum().backward()
            assert keeps.last_backward_kept
            assert np.array_equal(xk.grad.numpy(), g.dx)
            assert np.array_equal(keeps.w1_grad.numpy(), g.dw1) and np.array_equal(keeps.w2_grad.numpy(), g.dw2)
    """), tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_mega_moe_paths_lists_and_smooth_quant(n, tmp_path):
    run_ranks(n, GRAD_PROLOGUE + textwrap.dedent("""
        x, idx, w, _ = grad_inputs(me)
        def run(**kw):
            with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16, **kw) as layer:
                return layer.path, layer(x, idx, w)
        path, staged = run()
        assert path == "staged"
        path, deep = run(path="deep")
        assert path == "deep" and "overlap" in deep.stage_seconds, deep.stage_seconds
        assert rel(deep.y, staged.y.astype(np.float64)) < 1e-5          # the same math, other summation order
        path, auto_deep = run(cores=(1, 2))                              # a 1:2 chip, several experts per rank
        assert path == "deep"
        # TENSOR_LIST: one array per local expert, the same y
        with moe.MegaMoe(list(w1), list(s1), list(w2), list(s2), num_experts=E, topk=K,
                         max_tokens_per_rank=16) as listed:
            assert np.array_equal(listed(x, idx, w).y, staged.y)
        # smooth quant with all-ones scales changes nothing; other scales do, and stay close to
        # the float model with the inverse folded into the weights' rows
        ones = (np.ones(H, np.float32), np.ones((local, I), np.float32))
        _, smooth_ones = run(smooth=ones)
        assert np.array_equal(smooth_ones.y, staged.y)
        _, smoothed = run(smooth=(np.linspace(0.5, 2, H).astype(np.float32), np.ones((local, I), np.float32)))
        assert not np.array_equal(smoothed.y, staged.y)
        # a capacity factor below the load grows: the same y
        _, capped = run(capacity_factor=1.0)
        assert np.array_equal(capped.y, staged.y)
        try:
            run(path="sideways")
            raise AssertionError("an unknown path was accepted")
        except HpError as e:
            assert e.name == "INVALID_ARGUMENT", e
    """), tmp_path)
