"""A failed job's remaining calls return at once: PE 1 meets its deadline (2 s; the other PEs'
is 60 s), either waiting for a signal nobody sends ("wait") or, over MPI with put_signal by
message, completing one the sleeping PE 0 never applies ("unapplied"). Then a barrier must end
at once with PEER_DEAD (the job is aborted: its PEs cannot synchronize again) and finalize must
not wait for the others (a barrier would last another deadline; over MPI, freeing the windows
would block until the call's own deadline ended the process): both return well within one
deadline, and the job ends long before the other PEs' deadline. Under hprun the abort also ends
the other PEs' waits at once, with PEER_DEAD naming PE 1's timeout; under mpirun PE 1 leaves
MPI unfinalized and Open MPI ends the others."""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
import time

import pytest

from conftest import REPO, SYSTEM_PYTHON, describe
from jobs import HPRUN, MPIRUN_ENV, job_env

PROGRAM = textwrap.dedent("""
    import os, sys, time
    mode = sys.argv[1]
    rank = int(os.environ.get("HP_RANK") or os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ["HP_SHMEM_TIMEOUT_S"] = "2" if rank == 1 else "60"
    import numpy as np
    from hyper_parallel import shmem, HpError
    shmem.acquire()
    me = shmem.my_pe()
    flag = shmem.empty(1, np.uint64)
    flag[0] = 0
    data = shmem.empty(8, np.uint64)
    shmem.barrier()

    def say(line):  # one write(2): the PEs' lines share a pipe
        os.write(1, (line + "\\n").encode())

    def timed(what, call):
        start = time.monotonic()
        try:
            call()
            say(f"PE {me} {what}: ok")
        except HpError as e:
            say(f"PE {me} {what}: {e.name} after {time.monotonic() - start:.2f}s: {e.message}")

    if mode == "wait":
        timed("wait", lambda: shmem.wait_signal(flag, 1, cmp="eq"))  # nobody signals
    elif me == 1:
        shmem.put(data, np.ones(8, np.uint64), pe=0, signal=flag)  # one message to PE 0
        timed("completion", shmem.barrier)  # a barrier completes this PE's puts first
    else:
        time.sleep(60)  # outside the library: PE 0 applies no message
    timed("barrier", shmem.barrier)
    start = time.monotonic()
    shmem.release()
    say(f"PE {me} finalized in {time.monotonic() - start:.2f}s")
    sys.exit(3)
""")
JOB_LIMIT_S = 30  # well under the other PEs' 60 s deadline
AT_ONCE_S = 1.5   # "at once": well within PE 1's 2 s deadline


def run_job(cmd: list, mode: str, tmp_path, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(PROGRAM)
    start = time.monotonic()
    result = subprocess.run([str(c) for c in cmd] + [SYSTEM_PYTHON, script, mode],
                            capture_output=True, text=True, timeout=120,
                            env=job_env(PYTHONPATH=str(REPO / "python"), HP_SHMEM_HEAP_SIZE="64M",
                                        HP_SHMEM_TIMEOUT_S=None, **env))
    took = time.monotonic() - start
    assert result.returncode != 0 and took < JOB_LIMIT_S, f"{took:.0f} s\n{describe(result)}"
    return result


def report(result, pe: int, what: str) -> tuple[str, float]:
    """PE `pe`'s report of `what`: the error's name and the seconds it took."""
    found = re.search(rf"^PE {pe} {what}: (\w+) after ([0-9.]+)s", result.stdout, re.M)
    assert found, describe(result)
    return found.group(1), float(found.group(2))


def check_pe(result, pe: int, first: str, error: str) -> None:
    """`first` failed with `error`; then the barrier and finalize returned at once."""
    assert report(result, pe, first)[0] == error, describe(result)
    name, seconds = report(result, pe, "barrier")
    assert name == "PEER_DEAD" and seconds < AT_ONCE_S, describe(result)
    found = re.search(rf"^PE {pe} finalized in ([0-9.]+)s", result.stdout, re.M)
    assert found and float(found.group(1)) < AT_ONCE_S, describe(result)


@pytest.mark.parametrize("n", [2, 4])
def test_under_hprun_a_timeout_aborts_the_job_and_nothing_waits_after_it(n, tmp_path):
    result = run_job([HPRUN, "-n", n], "wait", tmp_path)
    check_pe(result, 1, "wait", "TIMEOUT")
    for pe in range(n):
        if pe != 1:
            check_pe(result, pe, "wait", "PEER_DEAD")
            line = next(l for l in result.stdout.splitlines() if l.startswith(f"PE {pe} wait:"))
            assert "PE 1" in line and "timed out" in line, describe(result)


@pytest.mark.parametrize("transport", ["mpi", "mapped"])
@pytest.mark.parametrize("n", [2, 4])
def test_under_mpirun_nothing_waits_after_a_timeout(n, transport, tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed")
    env = dict(MPIRUN_ENV)
    if transport == "mpi":
        env["HP_SHMEM_TRANSPORT"] = "mpi"
    result = run_job(["mpirun", "-np", n], "wait", tmp_path, **env)
    check_pe(result, 1, "wait", "TIMEOUT")


@pytest.mark.parametrize("n", [2, 4])
def test_over_mpi_nothing_waits_after_a_put_signal_message_was_not_applied(n, tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed")
    result = run_job(["mpirun", "-np", n], "unapplied", tmp_path, **MPIRUN_ENV,
                     HP_SHMEM_TRANSPORT="mpi", HP_SHMEM_MPI_MESSAGES="message")
    check_pe(result, 1, "completion", "TIMEOUT")
