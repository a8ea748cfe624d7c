"""MoE communication from Python (DeepEP's shape): route tokens to the ranks holding their top-k
experts and bring the weighted expert outputs back, over the symmetric heap.

    import numpy as np
    from hyper_parallel import moe

    buf = moe.Buffer(hidden=1024, num_experts=16, topk=4, max_tokens_per_rank=256)  # collective
    layout = buf.get_dispatch_layout(topk_idx)             # tokens per rank / expert, in-rank mask
    d = buf.dispatch(x, topk_idx, topk_weights, quantize=True, expert_alignment=16)
    # d.recv_x: int8 rows grouped by local expert (d.expert_offsets), d.recv_x_scale, ...
    y = buf.combine(expert_out, d.handle).combined_x      # sum_k weight_k x out_k per token
    buf.destroy()                                          # collective

Run one process per rank (`hprun -n 4 python3 prog.py`, or under mpirun). Arrays are numpy
(x float32; topk_idx int64/int32, -1 = no expert; topk_weights float32; masks bool/uint8); CPU
torch tensors work too, and then bf16 x and torch results (zero-copy views of their storage).
Calls are collective and in the same order on every rank. Bad inputs raise HpError with the
native error code on the rank that has them, and ABORTED on every other rank.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dtypes, native, shmem
from .errors import call_torch_op, hp_error


def _lib():
    return native.load_extension("multicore", "_hp_moe")


def _is_torch(t) -> bool:
    return type(t).__module__.startswith("torch")


def _spec(a) -> tuple:
    """(address, dtype name, shape, strides in elements) of a numpy array or CPU torch tensor."""
    if _is_torch(a):
        name = dtypes.torch_names().get(a.dtype)
        if a.device.type != "cpu" or name is None:
            raise hp_error("DTYPE_MISMATCH", f"tensor {a.dtype} on {a.device}: expected a CPU tensor of "
                          "float32, bfloat16, int64, int32, int8, uint8 or bool")
        return a.data_ptr(), name, list(a.shape), list(a.stride())
    a = np.asarray(a)
    name = dtypes.NUMPY_NAMES.get(a.dtype)
    if name is None:
        raise hp_error("DTYPE_MISMATCH", f"array of {a.dtype}: expected float32, int64, int32, int8, uint8 or "
                      "bool (bf16 x: pass a torch tensor)")
    return a.ctypes.data, name, list(a.shape), [s // a.itemsize for s in a.strides]


def _contiguous(a):
    if _is_torch(a):
        return a.contiguous()
    return np.ascontiguousarray(a)


def _empty(like, shape, dtype: str):
    """An output of `dtype` ("int8", "fp32", "bf16", "int32", "int64", "uint8") in like's library."""
    if _is_torch(like):
        import torch
        return torch.empty(shape, dtype=dtypes.torch_dtype(dtype))
    return np.empty(shape, dtype=dtypes.numpy_dtype(dtype))


@dataclass
class DispatchLayout:
    num_tokens_per_rank: np.ndarray      # int64 [R]
    num_tokens_per_expert: np.ndarray    # int64 [E]
    is_token_in_rank: np.ndarray         # bool [T, R]


@dataclass
class DispatchHandle:
    """What combine needs of a dispatch (the buffer keeps the native part: use the latest)."""
    serial: int
    num_tokens: int
    recv_topk_weights: Any


@dataclass
class DispatchResult:
    recv_x: Any                          # [rows, H] int8 (quantised) or x's dtype; pad rows zero
    recv_x_scale: Any                    # float32 [rows] (quantised), else None
    recv_topk_weights: Any               # float32 [rows]: each row's expert weight
    num_recv_tokens_per_expert: list     # [E_local], unpadded
    expert_offsets: list                 # [E_local + 1]: rows of local expert e (padded)
    recv_src_rank: Any                   # int32 [rows], -1 for pad rows
    recv_src_token: Any                  # int32 [rows]
    handle: DispatchHandle


@dataclass
class CombineResult:
    combined_x: Any                      # [T, H] of expert_out's dtype (float32 or bf16)


@dataclass
class LowLatencyHandle:
    serial: int
    num_tokens: int


@dataclass
class LowLatencyDispatchResult:
    recv_x: Any                          # [E_local, R * max_tokens_per_rank, H]; rows past the count unspecified
    recv_x_scale: Any                    # float32 [E_local, R * max_tokens_per_rank] (quantised), else None
    recv_count: list                     # [E_local]: rows of each local expert
    layout_range: np.ndarray             # int64 [E_local, R, 2]: first row and count from each rank
    recv_src_rank: Any                   # int32 [E_local, R * max_tokens_per_rank], -1 past the count
    recv_src_token: Any
    handle: LowLatencyHandle


class _Collective:
    """A native object made collectively on the symmetric heap (holding a shmem reference):
    destroy() frees it, collectively; usable as a context manager."""

    _native = None

    def destroy(self) -> None:
        """Frees the native object and its symmetric memory (collective)."""
        if self._native is not None:
            self._native.destroy()
            self._native = None
            shmem.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()


class Buffer(_Collective):
    """The communication buffer of one rank (collective: every rank makes one alike).

    comm: "shmem" (put + signal, every transport) or "window" (peers' memory mapped: one node).
    low_latency: also make the regions of low_latency_dispatch/combine. capacity_factor: 0 for
    lossless, else the receive room in average loads (grown x1.25 on overflow, or HpError
    OUT_OF_MEMORY with grow_on_overflow=False). max_element_bytes / combine_element_bytes: the
    widest x dispatched unquantised / expert output combined (4 float32, 2 bf16).
    zero_copy_combine: combine reads the expert outputs in place, from the rows
    get_combine_buffer(handle) returns (on the symmetric heap), instead of copying them.
    dispatch_path: "push" (each rank writes its tokens into every destination's window), "pull"
    (each rank writes them once into its own, and destinations read them there; needs every
    peer's memory mapped and capacity_factor 0) or "auto" (pull where it can); the attribute
    dispatch_path says which one the buffer takes.
    """

    def __init__(self, hidden: int, num_experts: int, topk: int, max_tokens_per_rank: int, *,
                 comm: str = "shmem", low_latency: bool = False, capacity_factor: float = 0.0,
                 grow_on_overflow: bool = True, max_element_bytes: int = 4, combine_element_bytes: int = 4,
                 zero_copy_combine: bool = False, dispatch_path: str = "auto"):
        shmem.acquire()
        try:
            self._native = _lib().Buffer(hidden, max_tokens_per_rank, num_experts, topk, max_element_bytes,
                                         combine_element_bytes, comm, low_latency, capacity_factor,
                                         grow_on_overflow, zero_copy_combine, dispatch_path)
        except BaseException:
            shmem.release()
            raise
        self.hidden, self.num_experts, self.topk = hidden, num_experts, topk
        self.max_tokens_per_rank = max_tokens_per_rank
        self.rank, self.num_ranks = self._native.rank, self._native.num_ranks
        self.num_local_experts = self._native.local_experts
        self.dispatch_path = self._native.dispatch_path
        self._serial = 0
        self._ll_serial = 0

    def get_dispatch_layout(self, topk_idx, x_active_mask=None) -> DispatchLayout:
        idx = _contiguous(topk_idx)
        mask = None if x_active_mask is None else _contiguous(x_active_mask)
        per_rank, per_expert, in_rank = _lib().dispatch_layout(
            _spec(idx), self.num_experts, self.num_ranks, None if mask is None else _spec(mask))
        tokens = len(in_rank) // self.num_ranks if self.num_ranks else 0
        return DispatchLayout(np.array(per_rank, np.int64), np.array(per_expert, np.int64),
                              np.frombuffer(in_rank, np.uint8).astype(bool).reshape(tokens, self.num_ranks))

    def dispatch(self, x, topk_idx, topk_weights, *, x_active_mask=None, quantize: bool = False,
                 expert_alignment: int = 1) -> DispatchResult:
        x, idx, w = _contiguous(x), _contiguous(topk_idx), _contiguous(topk_weights)
        mask = None if x_active_mask is None else _contiguous(x_active_mask)
        args = (_spec(x), _spec(idx), _spec(w), None if mask is None else _spec(mask), quantize, expert_alignment)
        rows, per_expert, offsets = self._native.notify_dispatch(*args)
        x_dtype = "int8" if quantize else _spec(x)[1]
        recv_x = _empty(x, (rows, self.hidden), x_dtype)
        scale = _empty(x, (rows,), "fp32") if quantize else None
        weights = _empty(x, (rows,), "fp32")
        src_rank, src_token = _empty(x, (rows,), "int32"), _empty(x, (rows,), "int32")
        self._native.dispatch_data(*args, _spec(recv_x), None if scale is None else _spec(scale), _spec(weights),
                                   _spec(src_rank), _spec(src_token))
        self._serial += 1
        handle = DispatchHandle(self._serial, int(_spec(x)[2][0]), weights)
        return DispatchResult(recv_x, scale, weights, list(per_expert), list(offsets), src_rank, src_token, handle)

    def get_combine_buffer(self, handle: DispatchHandle):
        """zero_copy_combine: the [rows, H] tensor on the symmetric heap to write this rank's
        expert outputs into, then pass to combine (a numpy float32 array, or a torch bfloat16
        tensor when combine_element_bytes is 2). It views the buffer's memory: valid until the
        next dispatch. Collective in order like the other calls (it may wait for peers still
        reading the previous combine's rows)."""
        self._check_latest(handle.serial, self._serial, "dispatch")
        address, dtype, rows, hidden = self._native.combine_buffer()
        element = ctypes.c_int16 if dtype == "bf16" else ctypes.c_float  # bf16: its bits, viewed as bf16 below
        if rows == 0:
            view = np.empty((0, hidden), element)
        else:
            view = np.ctypeslib.as_array((element * (rows * hidden)).from_address(address)).reshape(rows, hidden)
        if dtype == "bf16":
            import torch
            return torch.from_numpy(view).view(torch.bfloat16)
        return view

    def combine(self, expert_out, handle: DispatchHandle, topk_weights=None, *, weighted: bool = True) -> CombineResult:
        """y[t] = sum over t's rows of weight x expert_out row (fp32 sums; y in expert_out's
        dtype). topk_weights: per received row (default: the dispatch's); weighted=False sums
        plainly (dispatch's adjoint)."""
        self._check_latest(handle.serial, self._serial, "dispatch")
        out = _contiguous(expert_out)
        weights = None
        if weighted:
            weights = _contiguous(handle.recv_topk_weights if topk_weights is None else topk_weights)
        y_dtype = _spec(out)[1]
        y = _empty(out, (handle.num_tokens, self.hidden), y_dtype)
        self._native.combine(_spec(out), None if weights is None else _spec(weights), _spec(y))
        return CombineResult(y)

    def low_latency_dispatch(self, x, topk_idx, topk_weights, *, x_active_mask=None,
                             quantize: bool = False) -> LowLatencyDispatchResult:
        x, idx, w = _contiguous(x), _contiguous(topk_idx), _contiguous(topk_weights)
        mask = None if x_active_mask is None else _contiguous(x_active_mask)
        x_dtype, per_expert, counts, ranges = self._native.low_latency_dispatch(
            _spec(x), _spec(idx), _spec(w), None if mask is None else _spec(mask), quantize)
        local = self.num_local_experts
        recv_x = _empty(x, (local, per_expert, self.hidden), x_dtype)
        scale = _empty(x, (local, per_expert), "fp32") if quantize else None
        src_rank, src_token = _empty(x, (local, per_expert), "int32"), _empty(x, (local, per_expert), "int32")
        self._native.low_latency_outputs(_spec(recv_x), None if scale is None else _spec(scale), _spec(src_rank),
                                         _spec(src_token))
        self._ll_serial += 1
        return LowLatencyDispatchResult(recv_x, scale, list(counts),
                                        np.array(ranges, np.int64).reshape(local, self.num_ranks, 2), src_rank,
                                        src_token, LowLatencyHandle(self._ll_serial, int(_spec(x)[2][0])))

    def low_latency_combine(self, expert_out, topk_weights, handle: LowLatencyHandle):
        """y[t] = sum over k of topk_weights[t, k] x the output of t's k-th expert."""
        self._check_latest(handle.serial, self._ll_serial, "low_latency_dispatch")
        out, w = _contiguous(expert_out), _contiguous(topk_weights)
        y = _empty(out, (handle.num_tokens, self.hidden), _spec(out)[1])
        self._native.low_latency_combine(_spec(out), _spec(w), _spec(y))
        return y

    def torch(self):
        """This buffer as torch.classes.hyper_parallel.MoeBuffer, the first argument of the
        torch.ops.hyper_parallel dispatch and combine ops (the same native buffer: its calls and
        this object's continue from one another, in one collective order)."""
        if getattr(self, "_torch_buffer", None) is None:
            import torch
            native.torch_ops("multicore")
            self._torch_buffer = call_torch_op(torch.classes.hyper_parallel.MoeBuffer, self._native.handle)
        return self._torch_buffer

    @staticmethod
    def _check_latest(serial: int, latest: int, call: str) -> None:
        if serial != latest:
            raise hp_error("FAILED_PRECONDITION",
                          f"this handle is of an earlier {call}: combine the latest one (the buffer keeps "
                          "only its handle)")


@dataclass
class MegaMoeResult:
    y: Any                      # float32 [T, H] in x's library
    rows: int                   # expert rows this rank computed
    stage_seconds: dict         # dispatch, gmm1, gmm2, combine and (deep path) overlap on this rank


@dataclass
class MegaMoeGrad:
    dx: Any                     # [T, H] in dy's dtype
    d_topk_weights: Any         # float32 [T, K] (0 for -1 slots and inactive tokens)
    dw1: Any                    # float32 [E_local, H, 2I]: the gradient of the dequantised w1
    dw2: Any                    # float32 [E_local, I, H]
    shared_dw1: Any             # float32 [1, H, 2Is] (this rank's tokens' share) or None
    shared_dw2: Any             # float32 [1, Is, H] or None
    stage_seconds: dict         # dispatch, recompute, act_grad, weight_grad, combine, overlap on this rank


class MegaMoe(_Collective):
    """The MoE layer over this rank's local experts (collective: every rank makes one alike).

    Stages (the forward of the fused layer, run one after another): dispatch with int8
    quantisation, GMM1 with dequant + SwiGLU + requant, GMM2 with dequant x top-k weight,
    combine. Weights are this rank's E_local = num_experts / ranks experts, packed (copied) at
    creation: w1 int8 [E_local, H, 2I] (gate columns, then up), w1_scale float32 [E_local, 2I],
    w2 int8 [E_local, I, H], w2_scale float32 [E_local, H].

    With backward=True, `backward` gives the gradients (the quantisers pass them straight
    through; bf16 GEMMs with fp32 accumulation), and torch.ops.hyper_parallel.mega_moe(
    layer.torch(), ...) (hyper_parallel.moe_torch.mega_moe) is the layer as a differentiable
    torch op.
    """

    def __init__(self, w1, w1_scale, w2, w2_scale, *, num_experts: int, topk: int, max_tokens_per_rank: int,
                 comm: str = "shmem", shared=None, backward: bool = False, smooth=None, shared_smooth=None,
                 path: str = "auto", cores=None, capacity_factor: float = 0.0, grow_on_overflow: bool = True,
                 weight_dtype: str = "int8", keep_activations: bool = False,
                 int8_activation_grads: bool = False):
        """w1 ... w2_scale: stacked tensors, or lists of one tensor per local expert (TENSOR_LIST:
        w1[e] [H, 2I], w1_scale[e] [2I], w2[e] [I, H], w2_scale[e] [H]).
        shared: optional (w1 [1, H, 2Is], w1_scale [1, 2Is], w2 [1, Is, H], w2_scale [1, H]) of a
        shared expert that every active token goes through with weight 1.
        smooth: optional smooth-quant scales (smooth1 float32 [H], smooth2 float32 [E_local, I]):
        x is multiplied by smooth1 before its int8 quantisation, the SwiGLU output by smooth2
        before its requantisation (fold their inverses into the weights); shared_smooth: the shared
        expert's smooth2 [1, Is].
        path: "auto", "staged" or "deep" (the deep-fuse forward: GMM1 under the dispatch, the
        combine under GMM2); cores: (cube, vector) cores of a chip the layer runs on (deep needs
        vector = 2 x cube; path="deep" without cores takes (1, 2)); None: the calling thread.
        capacity_factor, grow_on_overflow: the dispatch's capacity, as Buffer's (0: lossless).
        weight_dtype: "int8", or "int4" (W4A8: the int8 arrays hold values in [-8, 7], stored
        packed two to a byte; activations stay int8).
        keep_activations (with backward): each forward keeps GMM1's output (float32, rows x 2I
        per rank) and a backward of the same inputs uses it instead of recomputing GMM1 (the
        same gradients, bit for bit; last_backward_kept tells whether it did).
        int8_activation_grads (with backward): the backward's activation-gradient GEMMs (dY W2^T,
        dA W1^T) in int8 at the forward's rate instead of bf16: dY and dA are rounded to int8 per
        row (after the weights' scales are folded into them), the weights stay exact."""
        listed = isinstance(w1, (list, tuple))
        if listed:
            tensors = [[_contiguous(a) for a in group] for group in (w1, w1_scale, w2, w2_scale)]
            first = _spec(tensors[0][0])[2] if tensors[0] else []
            if len(first) != 2 or first[1] % 2:
                raise hp_error("SHAPE_MISMATCH", f"w1[0] of shape {first}: expected [H, 2I]")
            local, self.hidden, self.intermediate = len(tensors[0]), first[0], first[1] // 2
            weights = {name: [_spec(a) for a in group]
                       for name, group in zip(("w1_list", "w1_scale_list", "w2_list", "w2_scale_list"), tensors)}
            keep = [a for group in tensors for a in group]
        else:
            w1, w1_scale, w2, w2_scale = (_contiguous(a) for a in (w1, w1_scale, w2, w2_scale))
            shape = _spec(w1)[2]
            if len(shape) != 3 or shape[2] % 2:
                raise hp_error("SHAPE_MISMATCH", f"w1 of shape {shape}: expected [E_local, H, 2I]")
            local, self.hidden, self.intermediate = shape[0], shape[1], shape[2] // 2
            weights = {"w1": _spec(w1), "w1_scale": _spec(w1_scale), "w2": _spec(w2), "w2_scale": _spec(w2_scale)}
            keep = [w1, w1_scale, w2, w2_scale]
        shared = None if shared is None else [_contiguous(a) for a in shared]
        shared_i = 0 if shared is None else _spec(shared[0])[2][-1] // 2
        if shared is not None:
            weights.update(zip(("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale"),
                               (_spec(a) for a in shared)))
        extra = {}
        if smooth is not None:
            extra["smooth1"], extra["smooth2"] = (_contiguous(a) for a in smooth)
        if shared_smooth is not None:
            extra["shared_smooth2"] = _contiguous(shared_smooth)
        weights.update({name: _spec(a) for name, a in extra.items()})
        if cores is None:
            cores = (1, 2) if path == "deep" else (0, 0)
        self.local_experts, self.topk, self.shared_intermediate = local, topk, shared_i
        shmem.acquire()
        try:
            self._native = _lib().Layer(self.hidden, self.intermediate, num_experts, topk, max_tokens_per_rank, comm,
                                        weights, shared_i, backward, path, int(cores[0]), int(cores[1]),
                                        float(capacity_factor), bool(grow_on_overflow), weight_dtype,
                                        bool(keep_activations), bool(int8_activation_grads))
        except BaseException:
            shmem.release()
            raise
        # (keep, shared and extra held the arrays behind the specs until the layer copied them)

    @property
    def last_backward_kept(self) -> bool:
        """Whether the last backward took GMM1's output from the forward (keep_activations and
        the same inputs) instead of recomputing it."""
        return self._native.last_backward_kept

    @property
    def path(self) -> str:
        """The forward's path: "deep" or "staged"."""
        return "deep" if self._native.deep else "staged"

    def torch(self):
        """This layer as torch.classes.hyper_parallel.MegaMoeLayer, the first argument of
        torch.ops.hyper_parallel.mega_moe / mega_moe_grad (the same native layer)."""
        if getattr(self, "_torch_layer", None) is None:
            import torch
            native.torch_ops("multicore")
            self._torch_layer = call_torch_op(torch.classes.hyper_parallel.MegaMoeLayer, self._native.handle)
        return self._torch_layer

    def _weight_grad(self, name: str):
        holder = getattr(self, "_torch_layer", None)
        return None if holder is None else getattr(holder, name)()

    # The weights' gradients (float32 torch tensors) that torch.ops.hyper_parallel.mega_moe's
    # backward adds up; None before the first backward. Set one to None to start it again.
    w1_grad = property(lambda self: self._weight_grad("w1_grad"),
                       lambda self, v: self._reset_grad("w1_grad", v))
    w2_grad = property(lambda self: self._weight_grad("w2_grad"),
                       lambda self, v: self._reset_grad("w2_grad", v))
    shared_w1_grad = property(lambda self: self._weight_grad("shared_w1_grad"),
                              lambda self, v: self._reset_grad("shared_w1_grad", v))
    shared_w2_grad = property(lambda self: self._weight_grad("shared_w2_grad"),
                              lambda self, v: self._reset_grad("shared_w2_grad", v))

    def _reset_grad(self, name: str, value) -> None:
        if value is not None:
            raise hp_error("INVALID_ARGUMENT", f"{name} can only be set to None (the backward adds to it)")
        if getattr(self, "_torch_layer", None) is not None:
            self._torch_layer.reset_grad(name)

    def __call__(self, x, topk_idx, topk_weights, *, x_active_mask=None) -> MegaMoeResult:
        x, idx, w = _contiguous(x), _contiguous(topk_idx), _contiguous(topk_weights)
        mask = None if x_active_mask is None else _contiguous(x_active_mask)
        y = _empty(x, (_spec(x)[2][0], self.hidden), "fp32")
        dispatch, gmm1, gmm2, combine, overlap, rows = self._native.forward(
            _spec(x), _spec(idx), _spec(w), None if mask is None else _spec(mask), _spec(y))
        seconds = {"dispatch": dispatch, "gmm1": gmm1, "gmm2": gmm2, "combine": combine}
        if self.path == "deep":
            seconds["overlap"] = overlap
        return MegaMoeResult(y, rows, seconds)

    def backward(self, x, topk_idx, topk_weights, dy, *, x_active_mask=None) -> MegaMoeGrad:
        """The gradients of this layer's forward at (x, topk_idx, topk_weights) for the output
        gradient dy (float32, or bf16 torch; collective, the layer made with backward=True)."""
        x, idx, w, dy = _contiguous(x), _contiguous(topk_idx), _contiguous(topk_weights), _contiguous(dy)
        mask = None if x_active_mask is None else _contiguous(x_active_mask)
        T, H, I, E = _spec(x)[2][0], self.hidden, self.intermediate, self.local_experts
        si = self.shared_intermediate
        dx = _empty(dy, (T, H), _spec(dy)[1])
        d_topk = _empty(x, (T, self.topk), "fp32")
        dw1, dw2 = _empty(x, (E, H, 2 * I), "fp32"), _empty(x, (E, I, H), "fp32")
        sdw1 = _empty(x, (1, H, 2 * si), "fp32") if si else None
        sdw2 = _empty(x, (1, si, H), "fp32") if si else None
        seconds = self._native.backward(_spec(x), _spec(idx), _spec(w), None if mask is None else _spec(mask),
                                        _spec(dy), _spec(dx), _spec(d_topk), _spec(dw1), _spec(dw2),
                                        None if sdw1 is None else _spec(sdw1), None if sdw2 is None else _spec(sdw2))
        names = ("dispatch", "recompute", "act_grad", "weight_grad", "combine", "overlap")
        return MegaMoeGrad(dx, d_topk, dw1, dw2, sdw1, sdw2, dict(zip(names, seconds)))



def mega_moe(x, topk_idx, topk_weights, w1, w1_scale, w2, w2_scale, *, num_experts: int, x_active_mask=None,
             comm: str = "shmem", shared=None) -> MegaMoeResult:
    """One forward of the MoE layer with a layer made for it (collective). Keep a MegaMoe for
    repeated calls: making one packs the weights and allocates the symmetric buffer."""
    tokens = int(_spec(_contiguous(x))[2][0])
    max_tokens = _max_over_ranks(tokens)
    with MegaMoe(w1, w1_scale, w2, w2_scale, num_experts=num_experts, topk=int(_spec(_contiguous(topk_idx))[2][1]),
                 max_tokens_per_rank=max_tokens, comm=comm, shared=shared) as layer:
        return layer(x, topk_idx, topk_weights, x_active_mask=x_active_mask)


def mega_moe_grad(x, topk_idx, topk_weights, dy, w1, w1_scale, w2, w2_scale, *, num_experts: int,
                  x_active_mask=None, comm: str = "shmem", shared=None) -> MegaMoeGrad:
    """The gradients of mega_moe at these inputs for the output gradient dy (collective; makes
    its own layer: keep a MegaMoe(backward=True) for repeated calls)."""
    tokens = int(_spec(_contiguous(x))[2][0])
    max_tokens = _max_over_ranks(tokens)
    with MegaMoe(w1, w1_scale, w2, w2_scale, num_experts=num_experts, topk=int(_spec(_contiguous(topk_idx))[2][1]),
                 max_tokens_per_rank=max_tokens, comm=comm, shared=shared, backward=True) as layer:
        return layer.backward(x, topk_idx, topk_weights, dy, x_active_mask=x_active_mask)


def _max_over_ranks(value: int) -> int:
    """The largest of every rank's value (collective)."""
    shmem.acquire()
    gathered, mine = shmem.empty(shmem.n_pes(), np.int64), shmem.empty(1, np.int64)
    try:
        mine[0] = value
        shmem.all_gather(gathered, mine)
        return int(gathered.max())
    finally:
        shmem.free(mine)
        shmem.free(gathered)
        shmem.release()
