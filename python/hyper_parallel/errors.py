"""Exceptions of hyper_parallel.

HpError carries a native hp::Status: its stable number and name (`code`, `name`).
NativeLoadError carries an HP-NATIVE-* reason code and the exact command that recovers.
"""
from __future__ import annotations

import functools

# Reason codes of the native loader (docs/build.md). Stable: never renamed or reused.
REASONS = {
    "HP-NATIVE-PAYLOAD-MISSING":
        "the native payload, or the component asked for, is not where the loader looks",
    "HP-NATIVE-NOT-ACTIVATED":
        "a custom kernel vendor is needed but hyper_parallel_multicore_set_env.bash was not "
        "sourced before the framework started",
    "HP-NATIVE-ACTIVATION-TOO-LATE":
        "an activation variable changed after the process started (the native libraries and the "
        "framework read them at start)",
    "HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE":
        "the payload has no adapter for this framework",
    "HP-NATIVE-VENDOR-LOAD-FAILED":
        "a native library of the payload failed to load",
    "HP-NATIVE-ADAPTER-LOAD-FAILED":
        "a CPython extension module of the payload failed to import",
    "HP-NATIVE-ISA-UNSUPPORTED":
        "none of the payload's kernel targets runs on this CPU",
    "HP-NATIVE-PAYLOAD-STALE":
        "the payload and the Python package come from different builds (their versions differ)",
    "HP-NATIVE-SYSTEM-TOO-OLD":
        "this system's glibc is older than the payload's binaries need",
    "HP-NATIVE-PYTHON-ABI-MISMATCH":
        "the payload was built for another CPython ABI than this interpreter's",
}


class HpError(RuntimeError):
    """A native call failed with a stable error code (hp::ErrorCode)."""

    def __init__(self, code: int, name: str, message: str):
        super().__init__(f"{name} ({code}): {message}")
        self.code = code
        self.name = name
        self.message = message

    def __reduce__(self):  # picklable: errors cross process pools
        return type(self), (self.code, self.name, self.message)


def hp_error(name: str, message: str) -> HpError:
    """An HpError of the stable code `name`, numbered as the native core numbers it
    (`_hp_core.error_codes()`, the one table; the Python side writes no code numbers)."""
    return HpError(_error_numbers()[name], name, message)


@functools.lru_cache(maxsize=None)
def _error_numbers() -> dict[str, int]:
    from . import native  # the native core loads on first use; native imports this module
    return {name: number for number, name in native.core().error_codes()}


class NativeLoadError(ImportError):
    """The native side could not be loaded; `reason` is an HP-NATIVE-* code."""

    def __init__(self, reason: str, message: str, recovery: str):
        if reason not in REASONS:
            raise ValueError(f"unknown reason code {reason}")
        super().__init__(f"[{reason}] {message}\n  recover: {recovery}")
        self.reason = reason
        self.detail = message
        self.recovery = recovery

    def __reduce__(self):
        return type(self), (self.reason, self.detail, self.recovery)


def call_torch_op(op, *args):
    """Runs a torch.ops.hyper_parallel op; its "[hp CODE (n)] message" RuntimeError (the form
    the native adapters raise) becomes HpError."""
    try:
        return op(*args)
    except RuntimeError as e:
        text = str(e).splitlines()[0] if str(e) else ""
        if text.startswith("[hp "):
            name, _, rest = text[4:].partition(" (")
            code, _, message = rest.partition(")] ")
            raise HpError(int(code), name, message) from None
        raise
