"""Faults across hosts: a job of 4 PEs on two hosts made of network namespaces (netns_hosts.sh;
two PEs per host, each host's PEs mapped, the other host's through MPI over TCP) runs traffic
between every pair of PEs (test_shmem_c_host_faults) or the fused MoE layer forward and
backward (hp moe: dispatch, expert GEMMs, combine), then one host fails: its link goes down (a
cut cable), its PEs stop (SIGSTOP: a hung machine), or one of its PEs is killed. The PEs of
the other host must end within the deadline with a named error, the job with a non-zero status,
and nothing of the job may be left in /dev/shm. The waits' and MPI calls' deadline
(HP_SHMEM_TIMEOUT_S) is short here; a fault that is not detected would leave the job running."""
from __future__ import annotations

import os
import shutil
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR
from jobs import MPIRUN_ENV, job_env

BIN = BUILD_DIR / "native" / "tests" / "symmetric_memory" / "bin"
PROGRAM = BIN / "test_shmem_c_host_faults"
HP_MOE = BUILD_DIR / "native" / "payload" / "hyper_parallel" / "multicore" / "bin" / "hp-moe"
# The fused layer forward and backward (dispatch, expert GEMMs, combine) until a fault ends it.
HP_MOE_ARGS = ["--tokens", "24", "--hidden", "128", "--intermediate", "64", "--experts", "4",
               "--topk", "2", "--iterations", "100000", "--warmup", "1", "--backward"]
NETNS_HOSTS = BIN / "netns_hosts.sh"
TIMEOUT_S = 5     # HP_SHMEM_TIMEOUT_S of the job
DEADLINE_S = 40   # the surviving host's PEs must be gone this long after the fault

pytestmark = [pytest.mark.multihost,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None
                                 or shutil.which("mpirun") is None,
                                 reason="needs root, iproute2 and Open MPI's mpirun")]


class Hosts:
    """Two hosts of network namespaces (netns_hosts.sh up / link / down)."""

    def __init__(self, directory: Path):
        self.dir = directory
        subprocess.run([NETNS_HOSTS, "up", directory, "2"], check=True, capture_output=True)
        state = (directory / "state").read_text().split("\n")
        self.namespaces = [line.split()[2] for line in state if line.startswith("host ")]

    def mpirun_args(self) -> list[str]:
        return (self.dir / "mpirun.args").read_text().split("\n")[:-1]

    def all_pids(self, host: int) -> list[int]:
        """Every process in host's namespace (1-based)."""
        out = subprocess.run(["ip", "netns", "pids", self.namespaces[host - 1]],
                             capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def pids(self, host: int, program: Path = PROGRAM) -> list[int]:
        """The processes of program on host (1-based)."""
        def runs(pid: int) -> bool:
            try:
                return os.readlink(f"/proc/{pid}/exe").endswith(program.name)
            except OSError:  # gone meanwhile
                return False
        return [pid for pid in self.all_pids(host) if runs(pid)]

    def kill_all(self) -> None:
        for host in range(1, len(self.namespaces) + 1):
            for pid in self.all_pids(host):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def link(self, host: int, state: str) -> None:
        subprocess.run([NETNS_HOSTS, "link", self.dir, str(host), state], check=True)

    def down(self) -> None:
        subprocess.run([NETNS_HOSTS, "down", self.dir], check=True)


@pytest.fixture
def hosts(tmp_path):
    h = Hosts(tmp_path / "hosts")
    yield h
    h.down()


def shm_names() -> set[str]:
    return set(os.listdir("/dev/shm"))


def start_job(hosts: Hosts, *program_args: str, program: Path = PROGRAM) -> subprocess.Popen:
    env = job_env(HP_SHMEM_TIMEOUT_S=str(TIMEOUT_S), HP_SHMEM_HEAP_SIZE="64M", **MPIRUN_ENV)
    # Its own process group: mpirun's daemons keep its pipes open, and a job whose host is cut
    # off cannot reach that host's daemon to end it.
    return subprocess.Popen(["mpirun", *hosts.mpirun_args(), "-np", "4", str(program),
                             *program_args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def end_job(job: subprocess.Popen, hosts: Hosts, timeout: float) -> tuple[str, str, bool]:
    """The job's output, and whether mpirun ended by itself within timeout (else it is killed,
    and so is every process on the hosts: its daemons, which left its process group)."""
    try:
        out, err = job.communicate(timeout=timeout)
        return out, err, True
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        hosts.kill_all()
        out, err = job.communicate(timeout=30)
        return out, err, False


def wait_running(job: subprocess.Popen) -> None:
    """Until PE 0 prints "running" (every PE has done a round), at most 60 s."""
    ready, _, _ = select.select([job.stdout], [], [], 60)
    line = job.stdout.readline() if ready else ""
    assert line.strip() == "running", f"the job did not start: {line!r}"


def test_traffic_across_hosts_completes_without_a_fault(hosts):
    before = shm_names()
    job = start_job(hosts, "3")
    out, err, ended = end_job(job, hosts, 120)
    assert ended and job.returncode == 0, f"{out}\n{err}"
    assert "running" in out and "done:" in out, out
    assert shm_names() <= before


def fail_host_2(hosts: Hosts, fault: str, program: Path) -> None:
    if fault == "link down":
        hosts.link(2, "down")
    elif fault == "stopped":
        for pid in hosts.pids(2, program):
            os.kill(pid, signal.SIGSTOP)
    elif fault == "killed":
        os.kill(hosts.pids(2, program)[0], signal.SIGKILL)


def wait_hp_moe_running(hosts: Hosts) -> None:
    """hp moe prints nothing before its results: until its 4 ranks run, then 2 s into the
    iterations (a fault during start-up must end the job the same way)."""
    start = time.monotonic()
    while len(hosts.pids(1, HP_MOE)) + len(hosts.pids(2, HP_MOE)) < 4:
        assert time.monotonic() - start < 60, "hp moe's ranks did not start"
        time.sleep(0.1)
    time.sleep(2)


@pytest.mark.parametrize("program, fault", [
    ("traffic", "link down"), ("traffic", "stopped"), ("traffic", "killed"),
    ("hp moe", "link down"), ("hp moe", "stopped")])
def test_a_failed_host_ends_the_other_hosts_pes_with_a_named_error(hosts, program, fault):
    before = shm_names()
    path = PROGRAM if program == "traffic" else HP_MOE
    job = start_job(hosts, *([] if program == "traffic" else HP_MOE_ARGS), program=path)
    try:
        if program == "traffic":
            wait_running(job)
        else:
            wait_hp_moe_running(hosts)
        assert len(hosts.pids(1, path)) == 2 and len(hosts.pids(2, path)) == 2
        fail_host_2(hosts, fault, path)
        start = time.monotonic()
        while hosts.pids(1, path) and time.monotonic() - start < DEADLINE_S:
            time.sleep(0.2)
        took = time.monotonic() - start
        assert not hosts.pids(1, path), f"host 1's PEs still run {took:.0f} s after the fault"
        print(f"{program}, {fault}: host 1's PEs ended {took:.1f} s after the fault")
        out, err, ended = end_job(job, hosts, 5 if fault == "link down" else DEADLINE_S)
        # mpirun cannot reach the daemon of a host whose link is down to end it: there, the
        # job is over when the other host's PEs are, and end_job kills mpirun.
        assert ended or fault == "link down", f"mpirun did not end\n{out}\n{err}"
        assert job.returncode != 0, f"{out}\n{err}"
        if fault == "killed":
            # The PEs that report before mpirun ends them name the lost PE (PEER_DEAD: a
            # one-sided call to it failed) or their deadline; mpirun names the killed one.
            reports = [line for line in err.splitlines() if line.startswith("hp shmem:")]
            assert all("PEER_DEAD" in r or "TIMEOUT" in r for r in reports), err
            assert reports or "exited on signal" in err, err
        else:
            assert "TIMEOUT (6)" in err and "on PE" in err, err
    finally:
        if job.poll() is None:
            end_job(job, hosts, 0)
    hosts.down()
    assert shm_names() <= before, f"left in /dev/shm: {sorted(shm_names() - before)}"
