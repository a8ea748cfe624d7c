"""Symmetric memory from Python: numpy arrays on the symmetric heap, one-sided put/get and
signals between PEs (processes started by `hprun -n N python3 prog.py`).

    import numpy as np
    from hyper_parallel import shmem

    shmem.acquire()                                   # init (reference-counted)
    me, n = shmem.my_pe(), shmem.n_pes()
    x = shmem.empty((4, 1024), np.float32)            # collective: same shape on every PE
    sig = shmem.empty((1,), np.uint64)
    shmem.put(x, np.full((4, 1024), me, np.float32), pe=(me + 1) % n)
    shmem.signal(sig, 1, pe=(me + 1) % n)
    shmem.wait_signal(sig, 1, cmp="ge")               # x now holds the left neighbour's data
    shmem.free(x); shmem.free(sig)                    # collective
    shmem.release()

CPU torch tensors work the same way when the payload has the torch adapter (./build.sh
--shmem torch): pass a torch dtype to empty() to get a torch tensor on the heap, and torch
tensors to every other function (they run as torch.ops.hyper_parallel.shmem_*). A MindSpore
tensor raises NativeLoadError HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE: that adapter cannot be
built here.

OpenSHMEM 1.6's additions where they fit numpy: signal_set/signal_add, ibput/ibget (blocked
strided transfers, strides in elements) and the scans sum_inscan/sum_exscan (world team).

Symmetric arrays are views of the heap: free() them explicitly (collectively) and do not use
them afterwards. `dest`/`src` arguments that name remote memory must be symmetric arrays (or
views into one); local buffers may be any contiguous array. Errors raise HpError with the
native error code (PEER_DEAD, TIMEOUT, NOT_SYMMETRIC, OUT_OF_RANGE, ...).
"""
from __future__ import annotations

import atexit
import ctypes
import threading

import numpy as np

from . import native
from .errors import call_torch_op, hp_error

_lock = threading.Lock()
_refs = 0
_allocations: dict[int, int] = {}  # base address -> bytes


def _lib():
    return native.load_extension("symmetric_memory", "_hp_shmem")


def _framework(value) -> str | None:
    """'torch' or 'mindspore' for a tensor of that framework, else None (numpy and buffers)."""
    module = type(value).__module__.split(".")[0]
    if module in ("torch", "mindspore") and hasattr(value, "shape"):
        return module
    if module == "torch" and type(value).__name__ == "dtype":
        return "torch"
    return None


def _torch_ops():
    """torch.ops.hyper_parallel, loading the payload's torch adapter on first use."""
    return native.torch_ops("symmetric_memory")


def _dispatch(*values):
    """The torch ops when any value is a torch tensor; raises for a framework without adapter."""
    for value in values:
        framework = _framework(value)
        if framework == "torch":
            return _torch_ops()
        if framework is not None:
            native.framework_adapter("symmetric_memory", framework)  # raises: not built here
    return None


def acquire() -> None:
    """Initializes this process as a PE (first call) or adds a reference."""
    global _refs
    with _lock:
        if _refs == 0:
            _lib().init()
            atexit.register(_finalize_at_exit)
        _refs += 1


def release() -> None:
    """Drops a reference; the last one finalizes (collective)."""
    global _refs
    with _lock:
        if _refs == 0:
            raise hp_error("FAILED_PRECONDITION", "shmem.release() without acquire()")
        _refs -= 1
        if _refs == 0:
            _lib().finalize()
            _allocations.clear()


def _finalize_at_exit() -> None:
    """A program that exits without release() still finalizes (collectively, like every PE's
    normal exit), so hprun sees a clean end."""
    global _refs
    with _lock:
        if _refs > 0:
            _refs = 0
            _lib().finalize()


def my_pe() -> int:
    return _lib().my_pe()


def n_pes() -> int:
    return _lib().n_pes()


def empty(shape, dtype=np.float32, alignment: int | None = None) -> np.ndarray:
    """A new array on the symmetric heap (collective). Its contents are undefined."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    ops = _dispatch(dtype)
    if ops is not None:
        return call_torch_op(ops.shmem_empty, list(shape), dtype, alignment or 0)
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    addr = _lib().malloc(nbytes, alignment or 0)
    _allocations[addr] = nbytes
    raw = (ctypes.c_char * max(nbytes, 1)).from_address(addr)
    return np.frombuffer(raw, dtype=dtype, count=nbytes // dtype.itemsize).reshape(shape)


def free(array: np.ndarray) -> None:
    """Releases a symmetric array returned by empty() (collective)."""
    ops = _dispatch(array)
    if ops is not None:
        return call_torch_op(ops.shmem_free, array)
    addr = _address(array)
    if addr not in _allocations:
        raise hp_error("NOT_SYMMETRIC",
                      "shmem.free() needs an array returned by shmem.empty(), not a view of one")
    _lib().free(addr)
    del _allocations[addr]


def _address(array) -> int:
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    return array.__array_interface__["data"][0]


def _contiguous(array) -> np.ndarray:
    array = np.asarray(array)
    if not array.flags["C_CONTIGUOUS"]:
        raise hp_error("INVALID_ARGUMENT", "the array must be C-contiguous")
    return array


def _check_fits(dest: np.ndarray, src: np.ndarray) -> None:
    if dest.nbytes != src.nbytes:
        raise hp_error("SHAPE_MISMATCH",
                      f"dest has {dest.nbytes} bytes, src {src.nbytes}: they must be equal")


def put(dest: np.ndarray, src, pe: int, *, signal: np.ndarray | None = None,
        signal_value: int = 1, signal_op: str = "set") -> None:
    """Copies src (local) into dest's copy on `pe`; with `signal`, then sets/adds the signal
    there, so that `pe` sees the data once it sees the signal."""
    ops = _dispatch(dest, src, signal)
    if ops is not None:
        if signal is None:
            return call_torch_op(ops.shmem_put, dest, src, pe)
        return call_torch_op(ops.shmem_put_signal, dest, src, signal, signal_value, signal_op, pe)
    dest, src = _contiguous(dest), _contiguous(src)
    _check_fits(dest, src)
    if signal is None:
        _lib().put(_address(dest), src, pe)
    else:
        _lib().put_signal(_address(dest), src, _address(signal), signal_value, signal_op, pe)


def get(dest: np.ndarray, src: np.ndarray, pe: int) -> None:
    """Copies src's copy on `pe` into dest (local)."""
    ops = _dispatch(dest, src)
    if ops is not None:
        return call_torch_op(ops.shmem_get, dest, src, pe)
    dest, src = _contiguous(dest), _contiguous(src)
    _check_fits(dest, src)
    _lib().get(dest, _address(src), pe)


def signal(slot: np.ndarray, value: int, pe: int, op: str = "set") -> None:
    """Sets (or adds to) the 64-bit signal `slot` on `pe` (torch: an int64 element)."""
    ops = _dispatch(slot)
    if ops is not None:
        return call_torch_op(ops.shmem_signal, slot, value, pe, op)
    _lib().signal(_address(_signal_slot(slot)), value, pe, op)


def wait_signal(slot: np.ndarray, value: int, cmp: str = "eq") -> int:
    """Waits until this PE's signal `slot` compares `cmp` to value; returns the signal."""
    ops = _dispatch(slot)
    if ops is not None:
        return call_torch_op(ops.shmem_wait_signal, slot, value, cmp)
    return _lib().wait_signal(_address(_signal_slot(slot)), value, cmp)


def signal_set(slot: np.ndarray, value: int, pe: int) -> None:
    """Sets the 64-bit signal `slot` on `pe` (OpenSHMEM 1.6's shmem_signal_set)."""
    signal(slot, value, pe, "set")


def signal_add(slot: np.ndarray, value: int, pe: int) -> None:
    """Adds to the 64-bit signal `slot` on `pe` (shmem_signal_add)."""
    signal(slot, value, pe, "add")


def _numpy_view(array) -> np.ndarray:
    """array as a numpy view of the same memory (a CPU torch tensor through .numpy())."""
    if not isinstance(array, np.ndarray) and hasattr(array, "numpy"):
        array = array.detach().numpy()
    return np.asarray(array)


def _blocks(dest, src, block: int, nblocks: int, dest_stride: int, src_stride: int):
    """The (dest block, src block) element views of a blocked strided transfer, checked."""
    dest, src = _contiguous(_numpy_view(dest)).reshape(-1), _contiguous(_numpy_view(src)).reshape(-1)
    if dest.dtype != src.dtype:
        raise hp_error("DTYPE_MISMATCH", f"dest is {dest.dtype} and src {src.dtype}")
    if min(block, nblocks, dest_stride, src_stride) < 0:
        raise hp_error("INVALID_ARGUMENT", "block, nblocks and the strides must be >= 0")
    if nblocks > 0 and block > 0:
        for name, array, stride in (("dest", dest, dest_stride), ("src", src, src_stride)):
            if (nblocks - 1) * stride + block > array.size:
                raise hp_error("OUT_OF_RANGE",
                              f"{name} has {array.size} elements; {nblocks} blocks of {block} "
                              f"{stride} apart need {(nblocks - 1) * stride + block}")
    for b in range(nblocks if block > 0 else 0):
        yield (dest[b * dest_stride:b * dest_stride + block],
               src[b * src_stride:b * src_stride + block])


def ibput(dest, src, pe: int, *, block: int, nblocks: int, dest_stride: int,
          src_stride: int) -> None:
    """Block b (block elements of local src, starting at element b x src_stride) into dest's copy
    on `pe` at element b x dest_stride (OpenSHMEM 1.6's shmem_ibput; strides in elements)."""
    for d, s in _blocks(dest, src, block, nblocks, dest_stride, src_stride):
        _lib().put(_address(d), s, pe)


def ibget(dest, src, pe: int, *, block: int, nblocks: int, dest_stride: int,
          src_stride: int) -> None:
    """Block b of src's copy on `pe` into local dest (shmem_ibget; strides in elements)."""
    for d, s in _blocks(dest, src, block, nblocks, dest_stride, src_stride):
        _lib().get(d, _address(s), pe)


def _scan(dest, src, inclusive: bool) -> None:
    dest, src = _contiguous(_numpy_view(dest)), _contiguous(_numpy_view(src))
    _check_fits(dest, src)
    if dest.dtype != src.dtype:
        raise hp_error("DTYPE_MISMATCH", f"dest is {dest.dtype} and src {src.dtype}")
    _lib().sum_scan(_address(dest), _address(src), src.size, str(src.dtype), inclusive)


def sum_inscan(dest, src) -> None:
    """dest on PE p = the sum of src over PEs 0..p, element by element (collective; both
    symmetric; dest may be src). OpenSHMEM 1.6's shmem_sum_inscan on the world team."""
    _scan(dest, src, True)


def sum_exscan(dest, src) -> None:
    """dest on PE p = the sum of src over PEs 0..p-1 (zeros on PE 0); as sum_inscan."""
    _scan(dest, src, False)


def _signal_slot(slot) -> np.ndarray:
    slot = np.asarray(slot)
    if slot.dtype != np.uint64 or slot.size < 1:
        raise hp_error("DTYPE_MISMATCH", "a signal slot is a uint64 array element")
    return slot


def barrier() -> None:
    """Completes this PE's puts and waits for every PE."""
    _lib().barrier_all()


def all_gather(dest: np.ndarray, src: np.ndarray) -> None:
    """dest gets every PE's src, in PE order (collective; both symmetric, dest n_pes times
    src's size)."""
    ops = _dispatch(dest, src)
    if ops is not None:
        return call_torch_op(ops.shmem_all_gather, dest, src)
    dest, src = _contiguous(dest), _contiguous(src)
    if dest.nbytes != src.nbytes * n_pes():
        raise hp_error("SHAPE_MISMATCH",
                      f"all_gather: dest has {dest.nbytes} bytes, needs n_pes x {src.nbytes}")
    _lib().fcollect(_address(dest), _address(src), src.nbytes)
