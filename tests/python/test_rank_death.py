"""A rank that dies while the others wait for it ends the job within the deadline, with a
non-zero status and a message naming it: under hprun (the others' waits end with PEER_DEAD
naming the PE) and under mpirun, on the mpi transport and with the host's PEs mapped (Open
MPI's own abort, or the same PEER_DEAD). The waits' own deadline is set far beyond the test's,
so only the detection of the death can end the job in time."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from conftest import BUILD_DIR, describe
from jobs import HPRUN, MPIRUN_ENV, job_env

PROGRAM = BUILD_DIR / "native" / "tests" / "symmetric_memory" / "bin" / "test_shmem_c_rank_death"
DEADLINE_S = 30  # the job must end within this; its waits would last HP_SHMEM_TIMEOUT_S=600


def run_job(cmd: list, **env) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            timeout=DEADLINE_S * 3,
                            env=job_env(HP_SHMEM_TIMEOUT_S="600", HP_SHMEM_HEAP_SIZE="64M", **env))
    return result, time.monotonic() - start


@pytest.mark.parametrize("n", [2, 4])
def test_a_rank_killed_under_hprun_ends_the_job_naming_it(n):
    result, took = run_job([HPRUN, "-n", n, PROGRAM])
    assert result.returncode != 0 and took < DEADLINE_S, describe(result)
    assert "PEER_DEAD" in result.stderr and "PE 1" in result.stderr, describe(result)
    assert "completed without PE 1" not in result.stdout


@pytest.mark.parametrize("transport", ["mpi", "mapped"])
@pytest.mark.parametrize("n", [2, 4])
def test_a_rank_killed_under_mpirun_ends_the_job_naming_it(n, transport):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed")
    env = dict(MPIRUN_ENV)
    if transport == "mpi":
        env["HP_SHMEM_TRANSPORT"] = "mpi"
    result, took = run_job(["mpirun", "-np", n, PROGRAM], **env)
    assert result.returncode != 0 and took < DEADLINE_S, describe(result)
    output = result.stdout + result.stderr
    assert ("rank 1" in output or "PE 1" in output), describe(result)
    assert "completed without PE 1" not in result.stdout
