"""HyperParallel: expert-parallel Mixture-of-Experts on CPUs.

The native components are loaded on first use from the payload that ./build.sh assembled
(see hyper_parallel.native); importing this package never loads them.
"""
from pathlib import Path as _Path

from .errors import HpError, NativeLoadError


def _version() -> str:
    here = _Path(__file__).resolve().parent
    if here.parent.name == "python" and (here.parents[1] / "VERSION").is_file():
        return (here.parents[1] / "VERSION").read_text().strip()  # a source checkout
    from importlib.metadata import version
    return version("hyper_parallel")


__version__ = _version()
__all__ = ["HpError", "NativeLoadError", "__version__", "mega_moe", "mega_moe_grad"]


def __getattr__(name: str):
    # hyper_parallel.mega_moe / mega_moe_grad are hyper_parallel.moe's (imported on first use).
    if name in ("mega_moe", "mega_moe_grad"):
        from . import moe
        return getattr(moe, name)
    raise AttributeError(f"module 'hyper_parallel' has no attribute '{name}'")
