"""hprun, the launcher of symmetric-memory jobs: real processes, real shared memory.

Every job runs the payload's hprun with the test tree's job_probe (tests/shmem/job_probe.cpp),
a stand-in PE that joins the job's control segment and then behaves as its arguments say.
After every job the test checks that hprun removed the job's shared memory
(/dev/shm/hp.<job id>.*, job ids start with hprun's pid) and left no process of the job alive.
"""
from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import describe
from jobs import (HELLO, HPRUN, JOB_TIMEOUT, PROBE, assert_nothing_left, finish, hprun, job_env,
                  job_processes, parse_cpu_list, start, summary, topology)

PROBE_SAW_ABORT = 7
SLEEPING = re.compile(rb"^rank (\d+) pid (\d+) sleeping$", re.M)


@pytest.fixture(scope="module", autouse=True)
def binaries():
    for path in (HPRUN, PROBE):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: run scripts/build_core.sh && "
                        "scripts/build_symmetric_memory.sh")


def read_until_sleeping(proc: subprocess.Popen, n: int, timeout: float = 10) -> tuple[bytes, list[int]]:
    """Reads hprun's stdout until all n ranks said they sleep; returns it and their pids."""
    data = b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while len(SLEEPING.findall(data)) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"the {n} ranks did not all start sleeping; stdout so far:\n{data.decode()}")
        if select.select([fd], [], [], remaining)[0]:
            data += os.read(fd, 65536)
    return data, [int(pid) for _, pid in SLEEPING.findall(data)]


def wait_until_consumed(proc: subprocess.Popen, signo: int, timeout: float = 10) -> None:
    """Waits until hprun has taken `signo` off its pending set (it reads it from a signalfd)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        pending = int(re.search(r"^ShdPnd:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
        if not pending & (1 << (signo - 1)):
            return
        time.sleep(0.01)
    pytest.fail(f"hprun did not read signal {signo} within {timeout} s")


def env_by_rank(stdout: str) -> dict[int, dict[str, str]]:
    ranks = {}
    for line in stdout.splitlines():
        if line.startswith("env "):
            _, rank, *pairs = line.split(" ")
            ranks[int(rank)] = dict(pair.split("=", 1) for pair in pairs)
    return ranks


def others(n: int, rank: int) -> list[int]:
    return [r for r in range(n) if r != rank]


# ---------------------------------------------------------------------------------------------
# Normal jobs


@pytest.mark.parametrize("n", [1, 2, 4])
def test_a_job_whose_ranks_all_finalize_exits_0(n):
    result = hprun("-n", n, PROBE, "--heap", "ready-finalize")
    assert result.returncode == 0, describe(result)
    assert result.stderr == "", describe(result)


@pytest.mark.parametrize("n", [2, 4])
def test_each_rank_gets_its_rank_and_the_job(n):
    result = hprun("-n", n, PROBE, "env")
    assert result.returncode == 0, describe(result)
    ranks = env_by_rank(result.stdout)
    assert sorted(ranks) == list(range(n)), describe(result)
    job_ids = {env["HP_JOB_ID"] for env in ranks.values()}
    assert len(job_ids) == 1, f"ranks disagree on the job: {job_ids}"
    assert re.fullmatch(rf"{result.pid}-[0-9a-f]{{8}}", job_ids.pop())
    for rank, env in ranks.items():
        assert env["HP_RANK"] == env["HP_LOCAL_RANK"] == str(rank), env
        assert env["HP_WORLD_SIZE"] == env["HP_LOCAL_SIZE"] == str(n), env
        assert env["HP_SHMEM_TRANSPORT"] == "shm", env
        assert "HP_CHIP_CPUS" not in env and "HP_SHMEM_HEAP_SIZE" not in env, env


def test_job_variables_replace_inherited_ones_and_a_chosen_transport_stays():
    env = job_env(HP_RANK="99", HP_JOB_ID="stale", HP_WORLD_SIZE="7",
                  HP_SHMEM_TRANSPORT="threads", HP_SHMEM_HEAP_SIZE="1G")
    result = hprun("--heap-size", "64M", "-n", 2, PROBE, "env", env=env)
    assert result.returncode == 0, describe(result)
    for rank, values in env_by_rank(result.stdout).items():
        assert values["HP_RANK"] == str(rank) and values["HP_WORLD_SIZE"] == "2", values
        assert values["HP_JOB_ID"].startswith(f"{result.pid}-"), values
        assert values["HP_SHMEM_TRANSPORT"] == "threads", values
        assert values["HP_SHMEM_HEAP_SIZE"] == "64M", values


def test_a_heap_larger_than_dev_shm_fails_every_pes_init_with_out_of_memory():
    """/dev/shm (a tmpfs of 64 MiB, in a mount namespace of the job's own) cannot hold a PE's
    heap of 128 MiB: shmem_init fails on each PE with OUT_OF_MEMORY naming the setting, because
    it allocates the heap's pages, instead of succeeding and leaving the program a SIGBUS at
    the first page tmpfs cannot back."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (util-linux) for a /dev/shm of its own")
    script = f'mount -t tmpfs -o size=64M tmpfs /dev/shm && exec "{HPRUN}" -n 2 --heap-size 128M "{HELLO}"'
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                            env=job_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert result.returncode == 1, describe(result)
    failures = [l for l in result.stderr.splitlines() if "shmem_init_thread: OUT_OF_MEMORY" in l]
    assert len(failures) == 2, describe(result)
    for line in failures:
        assert re.search(r"cannot allocate \d+ bytes of shared memory: No space left on device", line), line
        assert "HP_SHMEM_HEAP_SIZE or hprun --heap-size" in line, line
    assert "exited with status 1 before shmem_finalize" in summary(result), describe(result)
    assert "signal" not in summary(result), describe(result)


def test_the_program_gets_every_argument_after_it_untouched():
    result = hprun("-n", 2, PROBE, "echo-args", "-n", "3", "--bogus", "two words", "--", "-h")
    assert result.returncode == 0, describe(result)
    lines = sorted(l for l in result.stdout.splitlines() if l.startswith("args "))
    assert lines == ["args 0: -n|3|--bogus|two words|--|-h", "args 1: -n|3|--bogus|two words|--|-h"]


@pytest.mark.parametrize("n", [2, 4])
def test_bind_gives_each_rank_its_share_of_the_topology(n):
    """The ranks get the shares hp-topology plans (docs/platform.md, "Topology and placement"):
    disjoint, covering every CPU when they do not outnumber them; no memory binding on a
    machine with one NUMA node."""
    cpus = sorted(os.sched_getaffinity(0))
    plan = topology("--ranks", str(n))
    result = hprun("--bind", "-n", n, PROBE, "env")
    assert result.returncode == 0, describe(result)
    envs = env_by_rank(result.stdout)
    assert sorted(envs) == list(range(n)), describe(result)
    assert [envs[r]["HP_CHIP_CPUS"] for r in range(n)] == [r["cpus"] for r in plan["ranks"]], describe(result)
    shares = [parse_cpu_list(envs[r]["HP_CHIP_CPUS"]) for r in range(n)]
    if n <= len(cpus):
        assert sorted(c for share in shares for c in share) == cpus, shares
    else:
        assert all(len(share) == 1 for share in shares), shares
    if plan["numa_nodes"] == 1:
        assert all("HP_MEM_NODES" not in envs[r] for r in range(n)), envs
    else:
        assert [envs[r]["HP_MEM_NODES"] for r in range(n)] == \
            [",".join(map(str, r["mem_nodes"])) for r in plan["ranks"]], envs


@pytest.mark.parametrize("n", [2, 4])
def test_bind_shares_one_cpu_when_the_ranks_outnumber_the_cpus(n):
    cpu = min(os.sched_getaffinity(0))
    result = hprun("--bind", "-n", n, PROBE, "env", cpus={cpu})
    assert result.returncode == 0, describe(result)
    shares = {rank: env["HP_CHIP_CPUS"] for rank, env in env_by_rank(result.stdout).items()}
    assert shares == {rank: str(cpu) for rank in range(n)}, describe(result)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("text", ["hello", "x" * 10000], ids=["short", "long-lines"])
def test_tag_output_prefixes_every_line_with_its_rank(n, text):
    result = hprun("--tag-output", "-n", n, PROBE, "print", text)
    assert result.returncode == 0, describe(result)
    # stdout ends with a line without newline: hprun flushes it at EOF, with a newline.
    for stream, expected in ((result.stdout, ["0", "1", "2", "end"]), (result.stderr, ["0", "1", "2"])):
        assert stream.endswith("\n"), describe(result)
        seen = defaultdict(list)
        for line in stream.splitlines():
            match = re.fullmatch(rf"\[(\d+)\] {text} (\d+) (\w+)", line)
            assert match and match[1] == match[2], f"badly tagged line {line[:80]!r}\n{describe(result)}"
            seen[int(match[1])].append(match[3])
        assert seen == {rank: expected for rank in range(n)}, describe(result)


def test_tag_output_stops_reading_pipes_a_rank_s_child_keeps_open():
    # Each rank leaves a background sleep holding its stdout pipe: hprun reads on for 2 s
    # after the ranks ended, then exits instead of waiting for the pipes' EOF.
    script = f"sleep 60 & echo background $!; exec {PROBE} ready-finalize"
    proc = start("--tag-output", "-n", 2, "/bin/sh", "-c", script)
    began = time.monotonic()
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    finally:
        proc.kill()
    elapsed = time.monotonic() - began
    background = [int(pid) for pid in re.findall(rb"^\[\d\] background (\d+)$", out, re.M)]
    for pid in background:
        os.kill(pid, signal.SIGKILL)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())
    assert result.returncode == 0 and len(background) == 2, describe(result)
    # Not before the 2 s of reading on; not after the sleep's 60 s either (finish within
    # JOB_TIMEOUT proves that, with no speed assertion).
    assert elapsed >= 2, f"hprun exited {elapsed:.1f} s after start, before reading on for 2 s"
    deadline = time.monotonic() + 10
    while job_processes(proc.pid) and time.monotonic() < deadline:  # SIGKILL takes effect
        time.sleep(0.01)
    assert_nothing_left(proc.pid, result)


def test_without_tag_output_the_ranks_write_directly():
    result = hprun("-n", 2, PROBE, "print", "plain")
    assert result.returncode == 0, describe(result)
    assert "plain 0 0\n" in result.stdout and "plain 1 2\n" in result.stderr, describe(result)
    assert "[" not in result.stdout + result.stderr, describe(result)


# ---------------------------------------------------------------------------------------------
# Failing ranks


@pytest.mark.parametrize("n", [2, 4])
def test_a_rank_exiting_3_aborts_the_job_and_hprun_exits_3(n):
    # The others leave through the abort (each prints that it saw it), not through their own
    # 8 s wait deadline.
    result = hprun("-n", n, PROBE, "--heap", "rank", 1, "exit", 3, "--", "wait-abort", 30,
                   env=job_env(HP_SHMEM_TIMEOUT_S="8"))
    assert result.returncode == 3, describe(result)
    reason = "exited with status 3 before shmem_finalize"
    for rank in others(n, 1):
        assert f"rank {rank} saw the abort: PE 1: {reason}\n" in result.stdout, describe(result)
    assert re.fullmatch(
        rf"hprun: rank 1 \(pid \d+\) {reason}; {n - 1} other rank\(s\): {n - 1} exited with "
        rf"status {PROBE_SAW_ABORT} before shmem_finalize \(ranks? [0-9,-]+\)", summary(result)), \
        describe(result)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("mode,signo", [("crash", signal.SIGSEGV), ("abort", signal.SIGABRT)])
def test_a_crashing_rank_makes_hprun_exit_128_plus_its_signal(n, mode, signo):
    crasher = n - 1
    result = hprun("-n", n, PROBE, "--heap", "rank", crasher, mode, "--", "wait-abort", 30)
    assert result.returncode == 128 + signo, describe(result)
    line = summary(result)
    assert re.match(rf"hprun: rank {crasher} \(pid \d+\) killed by signal {int(signo)} "
                    rf"\({signo.name}\)", line), describe(result)
    for rank in others(n, crasher):
        assert f"rank {rank} saw the abort: PE {crasher}: killed by signal {int(signo)}" \
            in result.stdout, describe(result)


def test_a_rank_exiting_0_without_finalize_is_a_failure():
    result = hprun("-n", 2, PROBE, "rank", 0, "ready-exit", 0, "--", "wait-abort", 30)
    assert result.returncode == 1, describe(result)
    assert re.match(r"hprun: rank 0 \(pid \d+\) exited with status 0 before shmem_finalize; "
                    r"1 other rank\(s\): 1 exited with status 7", summary(result)), describe(result)
    assert "rank 1 saw the abort: PE 0: exited with status 0 before shmem_finalize" in result.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_a_program_that_never_uses_symmetric_memory_may_exit_0(n):
    """Like mpirun, hprun runs any program: exiting 0 without ever initializing is success."""
    result = hprun("-n", n, PROBE, "exit", 0)
    assert result.returncode == 0, describe(result)
    assert hprun("-n", n, "/bin/true").returncode == 0


@pytest.mark.parametrize("n,mode,after,ending", [
    (3, "sleep", 1, "2 other rank(s): 2 killed by signal 15 (SIGTERM) from hprun (ranks 1-2)"),
    (2, "ignore-signals", 1 + 2, "1 other rank(s): 1 killed by signal 9 (SIGKILL) from hprun (rank 1)"),
], ids=["sigterm-after-the-grace-period", "sigkill-2s-after-sigterm"])
def test_ranks_that_stay_after_the_abort_are_terminated_then_killed(n, mode, after, ending):
    began = time.monotonic()
    result = hprun("-n", n, PROBE, "rank", 0, "exit", 4, "--", mode, 60,
                   env=job_env(HP_SHMEM_TIMEOUT_S="1"))  # a grace period of 1 s
    elapsed = time.monotonic() - began
    assert result.returncode == 4, describe(result)
    assert elapsed >= after, f"the job ended after {elapsed:.1f} s, before the {after} s it must wait"
    assert summary(result).endswith(f"; {ending}"), describe(result)


# ---------------------------------------------------------------------------------------------
# Programs that cannot run


@pytest.mark.parametrize("program", ["/nonexistent/program", "no-such-program-for-hprun"])
def test_a_missing_program_exits_127(program):
    result = hprun("-n", 2, program)
    assert result.returncode == 127, describe(result)
    assert result.stderr == f"hprun: cannot run '{program}': No such file or directory\n", \
        describe(result)


def test_a_program_without_execute_permission_exits_126(tmp_path):
    program = tmp_path / "not-executable"
    program.write_text("#!/bin/sh\n")
    result = hprun("-n", 2, program)
    assert result.returncode == 126, describe(result)
    assert result.stderr == f"hprun: cannot run '{program}': Permission denied\n", describe(result)


def test_an_exec_failure_in_the_ranks_exits_127(tmp_path):
    program = tmp_path / "bad-interpreter"
    program.write_text("#!/nonexistent/interpreter\n")
    program.chmod(0o755)
    result = hprun("-n", 2, program)
    assert result.returncode == 127, describe(result)
    assert result.stderr.count(f"hprun: cannot run '{program}': No such file or directory\n") == 2, \
        describe(result)
    assert re.match(r"hprun: rank \d \(pid \d+\) exited with status 127 before shmem_finalize; "
                    r"1 other rank\(s\): 1 exited with status 127", result.stderr.splitlines()[-1]), \
        describe(result)


# ---------------------------------------------------------------------------------------------
# Signals and deadlines


@pytest.mark.parametrize("n,signo", [(2, signal.SIGINT), (4, signal.SIGINT),
                                     (2, signal.SIGTERM), (2, signal.SIGHUP)])
def test_a_signal_to_hprun_reaches_every_rank(n, signo):
    proc = start("-n", n, PROBE, "--heap", "sleep", 60)
    early, pids = read_until_sleeping(proc, n)
    proc.send_signal(signo)
    result = finish(proc, early_stdout=early)
    assert result.returncode == 128 + signo, describe(result)
    assert summary(result) == (f"hprun: interrupted by {signo.name}; {n} rank(s): {n} killed by "
                               f"signal {int(signo)} ({signo.name}) (ranks 0-{n - 1})"), describe(result)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"rank process {pid} is still there"


def test_a_second_sigint_kills_every_rank():
    proc = start("-n", 2, PROBE, "ignore-signals", 60, env=job_env(HP_SHMEM_TIMEOUT_S="60"))
    early, _ = read_until_sleeping(proc, 2)
    proc.send_signal(signal.SIGINT)
    wait_until_consumed(proc, signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    # Without the SIGKILL the ranks ignore signals for 60 s: finishing within JOB_TIMEOUT and
    # the summary below show the second SIGINT killed them.
    result = finish(proc, early_stdout=early)
    assert result.returncode == 130, describe(result)
    assert summary(result) == ("hprun: interrupted by SIGINT; 2 rank(s): 2 killed by signal 9 "
                               "(SIGKILL) from hprun (ranks 0-1)"), describe(result)


@pytest.mark.parametrize("n", [2, 4])
def test_timeout_terminates_the_job_and_exits_124(n):
    began = time.monotonic()
    result = hprun("--timeout", "1", "-n", n, PROBE, "--heap", "sleep", 60)
    elapsed = time.monotonic() - began
    assert result.returncode == 124, describe(result)
    assert elapsed >= 1, f"took {elapsed:.1f} s for --timeout 1: it fired early"
    assert summary(result) == (f"hprun: the job ran past --timeout 1 s; rank(s) 0-{n - 1} were "
                               f"still running; {n} rank(s): {n} killed by signal 15 (SIGTERM) "
                               f"from hprun (ranks 0-{n - 1})"), describe(result)


def test_timeout_does_not_touch_a_job_that_ends_in_time():
    result = hprun("--timeout", "20", "-n", 2, PROBE, "ready-finalize")
    assert result.returncode == 0, describe(result)


# ---------------------------------------------------------------------------------------------
# Usage


@pytest.mark.parametrize("args,message", [
    (["-n", "0", PROBE], "hprun: --np: '0' is not a number of ranks in 1..4096"),
    (["-n", "x", PROBE], "hprun: --np: 'x' is not a number of ranks in 1..4096"),
    (["--np", "4097", PROBE], "hprun: --np: '4097' is not a number of ranks in 1..4096"),
    (["--bogus", "-n", "2", PROBE], "hprun: unknown option '--bogus'"),
    (["-n", "2", "--bogus", PROBE], "hprun: unknown option '--bogus'"),
    (["-n", "2"], "hprun: missing the program to run"),
    ([PROBE], "hprun: --np is required"),
    (["-n", "2", "--timeout", "0", PROBE], "hprun: --timeout: '0' is not a number of seconds"),
    (["-n", "2", "--heap-size", "12Q", PROBE], "hprun: --heap-size: '12Q' is not a size"),
], ids=["n-0", "n-x", "n-4097", "unknown-first", "unknown-later", "no-program", "no-n",
        "timeout-0", "heap-size-12Q"])
def test_bad_options_exit_2_naming_them(args, message):
    result = hprun(*args)
    assert result.returncode == 2, describe(result)
    assert result.stderr.startswith(message), describe(result)
    assert result.stdout == "", describe(result)


def test_an_invalid_setting_exits_2_naming_it():
    result = hprun("-n", 2, PROBE, "ready-finalize", env=job_env(HP_SHMEM_TIMEOUT_S="soon"))
    assert result.returncode == 2, describe(result)
    assert "HP_SHMEM_TIMEOUT_S='soon' is invalid" in result.stderr, describe(result)


def test_help_prints_the_usage_and_exits_0():
    result = hprun("--help")
    assert result.returncode == 0, describe(result)
    assert "Usage: hprun [options] -n N prog [args...]" in result.stdout, describe(result)
    for option in ("--np", "--bind", "--tag-output", "--timeout", "--heap-size"):
        assert option in result.stdout, describe(result)
