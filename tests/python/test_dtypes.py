"""The Python dtype table (hyper_parallel/dtypes.py) against the native one (_hp_core.dtypes()):
the names, their order and the element sizes agree, and every module reads the one table."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hyper_parallel import dtypes, native

PACKAGE = Path(dtypes.__file__).parent


def test_native_names_are_the_cores_in_its_numbering():
    assert list(dtypes.NATIVE_NAMES) == [name for name, _ in native.core().dtypes()]


def test_numpy_dtypes_have_the_native_element_size():
    size = dict(native.core().dtypes())
    for dtype, name in dtypes.NUMPY_NAMES.items():
        assert dtype.itemsize == size[name], (dtype, name)


def test_torch_dtypes_have_the_native_element_size():
    torch = pytest.importorskip("torch")
    size = dict(native.core().dtypes())
    for dtype, name in dtypes.torch_names().items():
        assert torch.empty((), dtype=dtype).element_size() == size[name], (dtype, name)
    assert dtypes.torch_dtype("bf16") is torch.bfloat16 and dtypes.torch_dtype("uint8") is torch.uint8


def test_native_name_and_back():
    assert dtypes.native_name(np.float32) == "fp32" and dtypes.native_name("float32") == "fp32"
    assert dtypes.native_name(np.bool_) == "uint8" and dtypes.native_name("bf16") == "bf16"
    assert dtypes.native_name(np.complex64) is None and dtypes.native_name(object()) is None
    assert dtypes.numpy_dtype("uint8") == np.uint8 and dtypes.numpy_dtype("fp64") == np.float64
    with pytest.raises(KeyError):
        dtypes.numpy_dtype("bf16")


def test_no_other_module_writes_a_dtype_table_or_an_error_number():
    # A dtype table is a dict literal mapping np./torch. dtypes to names; an error number is an
    # HpError built from a literal. Both have one home (dtypes.py, _hp_core.error_codes()).
    table = re.compile(r'(np|torch)\.\w+\)?\s*:\s*"(int8|uint8|int32|int64|bf16|fp16|fp32|fp64)"')
    literal_code = re.compile(r"HpError\(\s*\d")
    for path in PACKAGE.rglob("*.py"):
        if path.name == "dtypes.py":
            continue
        text = path.read_text()
        assert not table.search(text), f"{path} writes its own dtype table"
        assert not literal_code.search(text), f"{path} writes an error number"
