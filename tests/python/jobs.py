"""Running symmetric-memory jobs under the payload's hprun from tests: start, finish, and
check that nothing of a job is left (its /dev/shm objects, its processes)."""
from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, PAYLOAD_DIR, base_env, describe

HPRUN = PAYLOAD_DIR / "symmetric_memory" / "bin" / "hprun"
PROBE = BUILD_DIR / "native" / "tests" / "symmetric_memory" / "bin" / "job_probe"
HELLO = BUILD_DIR / "native" / "tests" / "symmetric_memory" / "bin" / "test_shmem_c_hello"  # tests/shmem/c/hello.c
TOPOLOGY = PAYLOAD_DIR / "core" / "bin" / "hp-topology"
JOB_TIMEOUT = 30  # seconds: no scenario needs more than a few
# Open MPI jobs as root on this machine's 2 CPUs (docs/shmem.md, "Open MPI": the ofi btl is
# slow and crashes, osc/rdma breaks OSHMEM's finalize).
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_btl": "^openib,ofi", "OMPI_MCA_osc": "^rdma",
              "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def job_env(**overrides: str | None) -> dict[str, str]:
    """The test's environment without the HP_* variables a job sets or reads."""
    cleared = {name: None for name in os.environ if name.startswith(("HP_SHMEM_", "HP_CHIP_", "HP_MEM_", "HWLOC_"))}
    cleared.update({name: None for name in ("HP_JOB_ID", "HP_RANK", "HP_WORLD_SIZE",
                                            "HP_LOCAL_RANK", "HP_LOCAL_SIZE")})
    cleared.update(overrides)
    return base_env(**cleared)


def parse_cpu_list(text: str) -> list[int]:
    """A cpulist in its order ("4-5,0" -> [4, 5, 0]), as HP_CHIP_CPUS and hp-topology write it."""
    cpus = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def topology(*args: str, env: dict | None = None) -> dict:
    """The payload's hp-topology as JSON (this machine's, or HWLOC_SYNTHETIC's in `env`)."""
    result = subprocess.run([str(TOPOLOGY), *args], capture_output=True, text=True, timeout=JOB_TIMEOUT,
                            env=env if env is not None else job_env())
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout)


def start(*args, env: dict | None = None, cpus: set[int] | None = None) -> subprocess.Popen:
    def child_setup():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # crashing probes dump no core
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen([str(HPRUN), *map(str, args)], env=env or job_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=child_setup)


def finish(proc: subprocess.Popen, timeout: float = JOB_TIMEOUT,
           early_stdout: bytes = b"") -> subprocess.CompletedProcess:
    """Waits for hprun, then checks that nothing of its job is left."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # its ranks die with it (PR_SET_PDEATHSIG)
        out, err = proc.communicate()
        pytest.fail(f"hprun did not finish within {timeout} s\n--- stdout ---\n"
                    f"{out.decode(errors='replace')}\n--- stderr ---\n{err.decode(errors='replace')}")
    result = subprocess.CompletedProcess(proc.args, proc.returncode,
                                         (early_stdout + out).decode(), err.decode())
    result.pid = proc.pid
    assert_nothing_left(proc.pid, result)
    return result


def hprun(*args, env: dict | None = None, cpus: set[int] | None = None,
          timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess:
    return finish(start(*args, env=env, cpus=cpus), timeout)


def job_processes(hprun_pid: int) -> list[int]:
    """Live processes whose environment names the job (job ids start with hprun's pid)."""
    marker = f"HP_JOB_ID={hprun_pid}-".encode()
    alive = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            if marker in (proc_dir / "environ").read_bytes():
                alive.append(int(proc_dir.name))
        except OSError:
            continue  # ended meanwhile, or not ours to read
    return alive


def assert_nothing_left(hprun_pid: int, result) -> None:
    prefix = f"hp.{hprun_pid}-"
    left = [name for name in os.listdir("/dev/shm") if name.startswith(prefix)]
    assert not left, f"hprun left shared memory behind: {left}\n{describe(result)}"
    alive = job_processes(hprun_pid)
    assert not alive, f"processes of the job are still alive: {alive}\n{describe(result)}"


def summary(result) -> str:
    lines = [l for l in result.stderr.splitlines() if l.startswith("hprun: ")]
    assert len(lines) == 1, f"expected one hprun summary line\n{describe(result)}"
    return lines[0]
