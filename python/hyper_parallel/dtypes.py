"""The one table between numpy and torch dtypes and the native dtype names (hp::to_string(DType)),
read by every module that hands a tensor to native code. bool travels as uint8 (one byte, 0 or 1)."""
from __future__ import annotations

import functools

import numpy as np

# hp::DType's names in its numbering (_hp_core.dtype_names() is the native side's list).
NATIVE_NAMES = ("int8", "uint8", "int32", "int64", "bf16", "fp16", "fp32", "fp64")

NUMPY_NAMES = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "uint8",
               np.dtype(np.int32): "int32", np.dtype(np.int64): "int64", np.dtype(np.float16): "fp16",
               np.dtype(np.float32): "fp32", np.dtype(np.float64): "fp64"}


@functools.lru_cache(maxsize=None)
def torch_names() -> dict:
    """torch dtype -> native name (torch is imported on first use only)."""
    import torch
    return {torch.int8: "int8", torch.uint8: "uint8", torch.bool: "uint8", torch.int32: "int32",
            torch.int64: "int64", torch.bfloat16: "bf16", torch.float16: "fp16",
            torch.float32: "fp32", torch.float64: "fp64"}


def is_torch_dtype(dtype) -> bool:
    return type(dtype).__module__.split(".")[0] == "torch" and type(dtype).__name__ == "dtype"


def native_name(dtype) -> str | None:
    """The native name of a native name, a torch dtype or anything np.dtype() takes; None when it
    has none."""
    if isinstance(dtype, str) and dtype in NATIVE_NAMES:
        return dtype
    if is_torch_dtype(dtype):
        return torch_names().get(dtype)
    try:
        return NUMPY_NAMES.get(np.dtype(dtype))
    except TypeError:
        return None


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a native name (uint8 for "uint8"; bf16 has none: KeyError)."""
    return {n: d for d, n in reversed(NUMPY_NAMES.items())}[name]


def torch_dtype(name: str):
    """The torch dtype of a native name (torch.uint8 for "uint8")."""
    return {n: d for d, n in reversed(torch_names().items())}[name]
