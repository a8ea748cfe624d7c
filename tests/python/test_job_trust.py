"""The trust boundary of a symmetric-memory job (docs/shmem.md, "Who can join a job"): another
user can neither join a running job nor read its segments, and the job is unaffected; a control
segment that is not one (truncated, corrupted) is refused with a named error."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import describe
from jobs import HELLO, PROBE, finish, job_env, start

SLEEPING = re.compile(rb"^rank (\d+) pid (\d+) sleeping$", re.M)
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


@pytest.fixture(scope="module", autouse=True)
def requirements():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to run a process as another user")
    if not HELLO.is_file():
        pytest.fail(f"{HELLO} is missing: run scripts/build_symmetric_memory.sh")


@pytest.fixture
def nobody_can_run():
    """Another user must be able to start the build's programs at all (a checkout in a private
    directory, such as one made by mktemp -d, is closed to it): a job of one PE of its own."""
    alone = subprocess.run([*NOBODY, str(HELLO)], env=job_env(), capture_output=True, text=True,
                           timeout=30)
    if alone.returncode != 0 and ("cannot open shared object" in alone.stderr
                                  or "Permission denied" in alone.stderr):
        pytest.skip(f"user nobody cannot run the build's programs: {alone.stderr.strip()}")


@contextmanager
def running_job(ranks: int = 2, seconds: float = 6):
    """A job of sleeping ranks; yields (its job id, hprun's Popen) once every rank sleeps."""
    proc = start("-n", ranks, PROBE, "sleep", seconds)
    os.set_blocking(proc.stdout.fileno(), False)
    data, deadline = b"", time.monotonic() + 20
    while len(SLEEPING.findall(data)) < ranks and time.monotonic() < deadline:
        data += proc.stdout.read() or b""
        time.sleep(0.01)
    assert len(SLEEPING.findall(data)) == ranks, data
    ids = [p.name[3:-4] for p in Path("/dev/shm").glob(f"hp.{proc.pid}*.ctl")]
    assert len(ids) == 1, ids  # job ids start with hprun's pid
    os.set_blocking(proc.stdout.fileno(), True)
    yield ids[0], proc, data


def test_another_user_can_neither_join_nor_read_a_running_job(nobody_can_run):
    with running_job() as (job, proc, early):
        pe = job_env(HP_JOB_ID=job, HP_RANK="1", HP_WORLD_SIZE="2", HP_SHMEM_TRANSPORT="shm")
        joined = subprocess.run([*NOBODY, str(HELLO)], env=pe, capture_output=True, text=True,
                                timeout=30)
        assert joined.returncode != 0, describe(joined)
        assert "PERMISSION_DENIED" in joined.stderr and "another user" in joined.stderr, \
            describe(joined)
        read = subprocess.run([*NOBODY, "cat", f"/dev/shm/hp.{job}.ctl"], capture_output=True,
                              timeout=30)
        assert read.returncode != 0 and b"Permission denied" in read.stderr, read
        # The heaps have no names left to open: each PE unlinked its own once all mapped them.
        assert not list(Path("/dev/shm").glob(f"hp.{job}.heap.*"))
        mode = os.stat(f"/dev/shm/hp.{job}.ctl").st_mode & 0o777
        assert mode == 0o600, oct(mode)
    result = finish(proc, early_stdout=early)
    assert result.returncode == 0, describe(result)  # the job went on as if nothing happened


@pytest.mark.parametrize("content", [b"\x00" * 10, os.urandom(4096),
                                     b"HPJB" + b"\x00" * 4092],
                         ids=["truncated", "garbage", "wrong-version"])
def test_a_control_segment_that_is_not_one_is_refused(content):
    job = f"corrupt{os.getpid()}"
    path = Path(f"/dev/shm/hp.{job}.ctl")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, content)
        os.close(fd)
        pe = job_env(HP_JOB_ID=job, HP_RANK="0", HP_WORLD_SIZE="1", HP_SHMEM_TRANSPORT="shm")
        joined = subprocess.run([str(HELLO)], env=pe, capture_output=True, text=True, timeout=30)
        assert joined.returncode != 0, describe(joined)
        assert "CORRUPT_DATA" in joined.stderr, describe(joined)
    finally:
        path.unlink(missing_ok=True)
