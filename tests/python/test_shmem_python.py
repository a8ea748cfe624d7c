"""hyper_parallel.shmem (numpy on the symmetric heap) in real multi-process jobs under hprun."""
from __future__ import annotations

import textwrap

import pytest

from conftest import REPO, SYSTEM_PYTHON, describe
from jobs import hprun, job_env

PROLOGUE = """
import numpy as np
from hyper_parallel import shmem, HpError
shmem.acquire()
me, n = shmem.my_pe(), shmem.n_pes()
"""


def run_pes(n: int, body: str, tmp_path) -> str:
    script = tmp_path / "job.py"
    script.write_text(PROLOGUE + textwrap.dedent(body) + "\nshmem.release()\nprint(f'PE {me} done')\n")
    result = hprun("-n", n, "--heap-size", "64M", SYSTEM_PYTHON, script,
                   env=job_env(PYTHONPATH=str(REPO / "python")))
    assert result.returncode == 0, describe(result)
    for pe in range(n):
        assert f"PE {pe} done" in result.stdout, describe(result)
    return result.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_put_with_signal_then_wait(n, tmp_path):
    run_pes(n, """
        x = shmem.empty((4, 1024), np.float32)
        sig = shmem.empty(1, np.uint64)
        sig[0] = 0
        shmem.barrier()
        shmem.put(x, np.full((4, 1024), me, np.float32), pe=(me + 1) % n, signal=sig)
        assert shmem.wait_signal(sig, 1, cmp="ge") == 1
        assert (x == (me - 1) % n).all(), x[0, :4]
        shmem.barrier()
        shmem.free(sig)
        shmem.free(x)
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_get_signal_add_and_all_gather(n, tmp_path):
    run_pes(n, """
        data = shmem.empty(8, np.int64)
        data[:] = np.arange(8) + 100 * me
        counter = shmem.empty(1, np.uint64)
        counter[0] = 0
        shmem.barrier()
        got = np.empty(8, np.int64)
        shmem.get(got, data, pe=(me + 1) % n)
        assert (got == np.arange(8) + 100 * ((me + 1) % n)).all(), got
        shmem.signal(counter, 1, pe=0, op="add")
        if me == 0:
            assert shmem.wait_signal(counter, n, cmp="eq") == n
        gathered = shmem.empty((n, 8), np.int64)
        shmem.all_gather(gathered, data)
        assert (gathered == np.arange(8)[None, :] + 100 * np.arange(n)[:, None]).all(), gathered
        for a in (gathered, counter, data):
            shmem.free(a)
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_the_openshmem_1_6_routines(n, tmp_path):
    run_pes(n, """
        # signal_set / signal_add
        sig = shmem.empty(1, np.uint64)
        sig[0] = 0
        shmem.barrier()
        shmem.signal_set(sig, 40, pe=(me + 1) % n)
        shmem.signal_add(sig, 2, pe=(me + 1) % n)
        assert shmem.wait_signal(sig, 42) == 42
        # ibput / ibget: 3 blocks of 2, every 3rd element of src into every 4th of dest
        dest = shmem.empty(12, np.float32)
        dest[:] = 0
        src = np.arange(9, dtype=np.float32) + 100 * me
        shmem.barrier()
        shmem.ibput(dest, src, (me + 1) % n, block=2, nblocks=3, dest_stride=4, src_stride=3)
        shmem.barrier()
        left = (me - 1) % n
        want = np.zeros(12, np.float32)
        for b in range(3):
            want[4 * b:4 * b + 2] = np.arange(3 * b, 3 * b + 2) + 100 * left
        assert (dest == want).all(), dest
        back = np.zeros(6, np.float32)
        shmem.ibget(back, dest, (me + 1) % n, block=2, nblocks=3, dest_stride=2, src_stride=4)
        assert (back == np.array([0, 1, 3, 4, 6, 7]) + 100 * me).all(), back
        try:
            shmem.ibput(dest, src, 0, block=2, nblocks=4, dest_stride=4, src_stride=3)
        except HpError as e:
            assert e.name == "OUT_OF_RANGE", e
        else:
            raise AssertionError("a block past src was accepted")
        # the scans, in place too
        x = shmem.empty(3, np.int64)
        y = shmem.empty(3, np.int64)
        x[:] = [me + 1, 1, -me]
        shmem.barrier()
        shmem.sum_inscan(y, x)
        assert list(y) == [(me + 1) * (me + 2) // 2, me + 1, -me * (me + 1) // 2], y
        shmem.sum_exscan(y, x)
        assert list(y) == [me * (me + 1) // 2, me, -(me - 1) * me // 2], y
        f = shmem.empty(2, np.float64)
        f[:] = 0.5
        shmem.barrier()
        shmem.sum_inscan(f, f)
        assert (f == 0.5 * (me + 1)).all(), f
        shmem.barrier()
        for a in (f, y, x, dest, sig):
            shmem.free(a)
    """, tmp_path)


def test_errors_raise_hperror_with_the_native_code(tmp_path):
    run_pes(2, """
        x = shmem.empty(16, np.int32)
        def code_of(call):
            try:
                call()
            except HpError as e:
                return e.name
            return "no error"
        assert code_of(lambda: shmem.put(x, np.zeros(16, np.int32), pe=5)) == "OUT_OF_RANGE"
        assert code_of(lambda: shmem.put(np.zeros(16, np.int32), x, pe=0)) == "NOT_SYMMETRIC"
        assert code_of(lambda: shmem.put(x, np.zeros(3, np.int32), pe=0)) == "SHAPE_MISMATCH"
        assert code_of(lambda: shmem.free(x[4:])) == "NOT_SYMMETRIC"
        assert code_of(lambda: shmem.wait_signal(np.zeros(1, np.uint64), 1)) == "NOT_SYMMETRIC"
        assert code_of(lambda: shmem.signal(x, 1, pe=0)) == "DTYPE_MISMATCH"
        assert code_of(lambda: shmem.empty(1 << 40, np.uint8)) == "OUT_OF_MEMORY"
        shmem.free(x)
    """, tmp_path)


def test_a_program_that_forgets_release_still_finalizes(tmp_path):
    script = tmp_path / "forget.py"
    script.write_text(PROLOGUE + "x = shmem.empty(4, np.int32)\nshmem.barrier()\n")
    result = hprun("-n", 2, SYSTEM_PYTHON, script, env=job_env(PYTHONPATH=str(REPO / "python")))
    assert result.returncode == 0, describe(result)


def torch_adapter_built() -> bool:
    import json
    from conftest import PAYLOAD_DIR
    parts = json.loads((PAYLOAD_DIR / "manifest.json").read_text())["parts"]
    return any(p["part"] == "symmetric_memory.torch" and p["status"] == "ok" for p in parts)


@pytest.mark.parametrize("n", [2, 4])
def test_torch_tensors_through_the_torch_adapter(n, tmp_path):
    if not torch_adapter_built():
        pytest.skip("the payload was built without the torch adapter (./build.sh --shmem torch)")
    run_pes(n, """
        import torch
        x = shmem.empty((3, 5), torch.float32)
        assert isinstance(x, torch.Tensor) and x.shape == (3, 5)
        sig = shmem.empty((1,), torch.int64)
        sig.zero_()
        shmem.barrier()
        shmem.put(x, torch.full((3, 5), float(me)), pe=(me + 1) % n, signal=sig)
        assert shmem.wait_signal(sig, 1, cmp="ge") == 1
        assert bool((x == float((me - 1) % n)).all()), x
        back = torch.empty(3, 5)
        shmem.get(back, x, pe=(me + 1) % n)
        assert bool((back == float(me)).all()), back
        g = shmem.empty((n, 2), torch.int64)
        s = shmem.empty((2,), torch.int64)
        s.fill_(me)
        shmem.barrier()
        shmem.all_gather(g, s)
        assert g[:, 0].tolist() == list(range(n)), g
        try:
            shmem.put(x, torch.zeros(3, 5), pe=n + 3)
        except HpError as e:
            assert e.name == "OUT_OF_RANGE", e
        else:
            raise AssertionError("no error for a bad PE")
        for t in (s, g, sig, x):
            shmem.free(t)
    """, tmp_path)


def test_a_framework_without_an_adapter_names_the_reason(tmp_path):
    """A MindSpore tensor (faked by its module name: MindSpore is not installable here) asks
    for the mindspore adapter, which the payload cannot have."""
    run_pes(2, """
        from hyper_parallel import NativeLoadError
        FakeTensor = type("Tensor", (), {"__module__": "mindspore.common.tensor", "shape": (1,)})
        x = shmem.empty(4, np.int32)
        try:
            shmem.put(x, FakeTensor(), pe=0)
        except NativeLoadError as e:
            assert e.reason == "HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE", e
            assert "mindspore" in str(e) and "recover:" in str(e), e
        else:
            raise AssertionError("a MindSpore tensor was accepted")
        shmem.free(x)
    """, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_a_pe_killed_in_a_barrier_releases_the_others_with_peer_dead(n, tmp_path):
    """PE 1 is killed (SIGKILL) while the others wait in a barrier: every survivor's barrier
    ends with PEER_DEAD naming PE 1, well within the deadline, and hprun reports the kill."""
    script = tmp_path / "kill.py"
    script.write_text(PROLOGUE + textwrap.dedent("""
        import os, signal, time
        shmem.barrier()
        if me == 1:
            time.sleep(0.2)  # the others are in the barrier by now
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            shmem.barrier()
        except HpError as e:
            print(f"PE {me} {e.name} after {time.monotonic() - start:.1f}s: {e.message}", flush=True)
            raise SystemExit(7)
        raise SystemExit(8)
    """))
    result = hprun("--tag-output", "-n", n, SYSTEM_PYTHON, script,
                   env=job_env(PYTHONPATH=str(REPO / "python"), HP_SHMEM_TIMEOUT_S="60"))
    assert result.returncode == 128 + 9, describe(result)
    survivors = [pe for pe in range(n) if pe != 1]
    for pe in survivors:
        line = next((l for l in result.stdout.splitlines() if l.startswith(f"[{pe}] PE {pe} ")), "")
        assert "PEER_DEAD" in line and "PE 1" in line, describe(result)
        assert float(line.split(" after ")[1].split("s:")[0]) < 10, line
