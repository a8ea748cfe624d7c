"""Linux refusing the AMX tile state: arch_prctl(ARCH_REQ_XCOMP_PERM) fails under a seccomp
filter, as in a container whose profile blocks it. On a CPU with AMX the kernel library then
names the cause and what to check: forcing the AMX target is ISA_UNSUPPORTED (HP-NATIVE-ISA-
UNSUPPORTED in Python), the automatic selection takes the next target. The filter itself is
checked everywhere; the library's answer needs a CPU with AMX."""
from __future__ import annotations

import ctypes
import errno
import json
import subprocess
import sys

import pytest

from conftest import PAYLOAD_DIR, base_env, describe

KERNEL_INFO = PAYLOAD_DIR / "multicore" / "bin" / "hp-kernel-info"
SYS_ARCH_PRCTL = 158  # x86_64
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def refuse_tile_permission() -> None:
    """preexec_fn: a seccomp filter failing arch_prctl(ARCH_REQ_XCOMP_PERM, ...) with EPERM."""
    ld_nr, ld_arg0, jeq, ret = 0x20, 0x20, 0x15, 0x06
    program = (SockFilter * 6)(
        SockFilter(ld_nr, 0, 0, 0),                       # A = syscall number
        SockFilter(jeq, 0, 3, SYS_ARCH_PRCTL),            # not arch_prctl: allow
        SockFilter(ld_arg0, 0, 0, 16),                    # A = low word of the first argument
        SockFilter(jeq, 0, 1, ARCH_REQ_XCOMP_PERM),       # another request: allow
        SockFilter(ret, 0, 0, 0x00050000 | errno.EPERM),  # SECCOMP_RET_ERRNO | EPERM
        SockFilter(ret, 0, 0, 0x7FFF0000),                # SECCOMP_RET_ALLOW
    )
    prog = SockFprog(len(program), program)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


def run(cmd, env=None, refused=True) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=60,
                          env=env or base_env(), preexec_fn=refuse_tile_permission if refused else None)


PROBE = (f"import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
         f"r = libc.syscall({SYS_ARCH_PRCTL}, {ARCH_REQ_XCOMP_PERM}, {XFEATURE_XTILEDATA}); "
         f"print(r, ctypes.get_errno())")


def test_the_filter_refuses_exactly_the_tile_request():
    filtered = run([sys.executable, "-c", PROBE])
    assert filtered.returncode == 0, describe(filtered)
    assert filtered.stdout.split() == ["-1", str(errno.EPERM)], describe(filtered)
    free = run([sys.executable, "-c", PROBE], refused=False)
    assert free.returncode == 0 and free.stdout.split() != ["-1", str(errno.EPERM)], describe(free)


def cpu_has_amx() -> bool:
    info = subprocess.run([str(KERNEL_INFO)], capture_output=True, text=True, env=base_env(HP_KERNEL_TARGET=None))
    return "amx_int8" in json.loads(info.stdout)["cpu_features"]


def test_a_refused_tile_state_is_named_with_what_to_check():
    if not cpu_has_amx():
        pytest.skip("needs a CPU with AMX: without it the AMX target is refused by CPUID first")
    forced = run([KERNEL_INFO], env=base_env(HP_KERNEL_TARGET="x86_64_amx"))
    assert forced.returncode == 1, describe(forced)
    error = json.loads(forced.stdout)["error"]
    assert error["code"] == "ISA_UNSUPPORTED", error
    for words in ("CPUID reports AMX", "refused the AMX tile state", "Operation not permitted", "seccomp",
                  "5.16", "HP_KERNEL_TARGET=x86_64_v4"):
        assert words in error["message"], error
    auto = run([KERNEL_INFO], env=base_env(HP_KERNEL_TARGET=None))
    assert auto.returncode == 0, describe(auto)
    assert json.loads(auto.stdout)["selected"] == "x86_64_v4", describe(auto)
    assert "refused the AMX tile state" in auto.stderr, describe(auto)
