"""The CPU topology and what is placed on it (docs/platform.md, "Topology and placement"): the
payload's hp-topology on synthetic machines (HWLOC_SYNTHETIC) and on this one, hprun --bind
refusing a synthetic topology, the symmetric heap bound to HP_MEM_NODES for real, the
activation's partition, and `hp doctor` showing the topology and the plan."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import BUILD_DIR, REPO, activated, base_env, describe, run
from jobs import HPRUN, TOPOLOGY, assert_nothing_left, finish, job_env, parse_cpu_list, start, topology

HEAP_BINDING = BUILD_DIR / "native" / "tests" / "symmetric_memory" / "bin" / "test_shmem_c_heap_binding"
TWO_SOCKETS = "package:2 numa:2 core:8 pu:2"  # core c holds CPUs 2c and 2c+1


def synthetic(description: str) -> dict[str, str]:
    return job_env(HWLOC_SYNTHETIC=description)


def cores_first(first: int, count: int) -> str:
    """The CPUs of `count` two-thread cores from CPU `first` on, cores first."""
    return ",".join(str(c) for c in [*range(first, first + 2 * count, 2), *range(first + 1, first + 2 * count, 2)])


def test_a_synthetic_two_socket_machine_places_one_rank_per_node():
    t = topology("--ranks", "4", env=synthetic(TWO_SOCKETS))
    assert (t["source"], t["packages"], t["numa_nodes"], t["cores"], t["cpus"]) == \
        (f"synthetic: {TWO_SOCKETS}", 2, 4, 32, 64), t
    assert [(r["cpus"], r["mem_nodes"]) for r in t["ranks"]] == \
        [(cores_first(16 * k, 8), [k]) for k in range(4)], t["ranks"]
    assert t["partition"] == {"framework": cores_first(0, 16), "chip": cores_first(32, 16)}, t


@pytest.mark.parametrize("n, expected", [
    (2, [(cores_first(0, 16), [0, 1]), (cores_first(32, 16), [2, 3])]),
    (8, [(cores_first(16 * (r // 2) + 8 * (r % 2), 4), [r // 2]) for r in range(8)]),
])
def test_ranks_take_whole_nodes_or_shares_of_a_nodes_cores(n, expected):
    t = topology("--ranks", str(n), env=synthetic(TWO_SOCKETS))
    assert [(r["cpus"], r["mem_nodes"]) for r in t["ranks"]] == expected, t["ranks"]


def test_this_machines_topology_holds_exactly_this_processs_cpus():
    t = topology("--ranks", "2")
    assert t["source"] == "this system", t
    listed = sorted(c for node in t["nodes"] for core in node["cores"] for c in core)
    assert listed == sorted(os.sched_getaffinity(0)), t
    lines = run([TOPOLOGY, "--partition"], env=job_env()).stdout.splitlines()
    assert lines == [f"framework {t['partition']['framework']}", f"chip {t['partition']['chip']}"], lines


@pytest.mark.parametrize("args, env, rc, message", [
    ([], {"HWLOC_SYNTHETIC": "numa:x"}, 1, "INVALID_SETTING (11): HWLOC_SYNTHETIC (fix or unset it): 'numa:x'"),
    (["--partition"], {"HWLOC_SYNTHETIC": "numa:2 core:2 pu:1"}, 1, "--partition needs this system's topology"),
    (["--ranks", "0"], {}, 2, "--ranks"),
    (["--bogus"], {}, 2, "--bogus"),
])
def test_bad_input_to_hp_topology_is_named(args, env, rc, message):
    result = run([TOPOLOGY, *args], env=job_env(**env))
    assert result.returncode == rc, describe(result)
    assert message in result.stderr, describe(result)


def test_hprun_bind_refuses_a_synthetic_topology():
    proc = start("--bind", "-n", "2", HEAP_BINDING, env=synthetic(TWO_SOCKETS))
    result = finish(proc)
    assert result.returncode != 0, describe(result)
    assert "INVALID_SETTING" in result.stderr and "hp-topology --ranks 2" in result.stderr, describe(result)
    assert_nothing_left(proc.pid, result)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_the_heap_is_bound_to_hp_mem_nodes(n):
    """Each PE's heap segment on the node asked for, seen so by every PE (the policy is the
    segment's); the C program checks that and prints its binding."""
    node = topology()["nodes"][0]["os_index"]
    cmd = [HEAP_BINDING] if n == 1 else [HPRUN, "-n", str(n), HEAP_BINDING]
    result = run(cmd, env=job_env(HP_MEM_NODES=str(node)), timeout=60)
    assert result.returncode == 0, describe(result)
    bound = sorted(l for l in result.stdout.splitlines() if l.startswith("pe "))
    assert bound == [f"pe {pe} heap bound to mask {1 << node:#x}" for pe in range(n)], describe(result)


@pytest.mark.parametrize("n", [2, 4])
def test_a_node_that_does_not_exist_fails_the_job_by_name(n):
    proc = start("-n", str(n), HEAP_BINDING, env=job_env(HP_MEM_NODES="1023"))
    result = finish(proc)
    assert result.returncode != 0, describe(result)
    assert "INVALID_ARGUMENT" in result.stderr and "HP_MEM_NODES" in result.stderr, describe(result)
    assert "NUMA node(s) 1023" in result.stderr, describe(result)
    assert_nothing_left(proc.pid, result)


@pytest.mark.parametrize("cpus", [{0}, {0, 1}])
def test_the_activation_uses_the_topologys_partition(cpus):
    cpus = {c for c in cpus if c in os.sched_getaffinity(0)} or {min(os.sched_getaffinity(0))}
    listed = ",".join(map(str, sorted(cpus)))
    env = {k: v for k, v in job_env().items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                             "HP_ACTIVATED", "HP_VENDOR_PATH")}
    plan = run(["taskset", "-c", listed, TOPOLOGY, "--partition"], env=env)
    assert plan.returncode == 0, describe(plan)
    want = dict(line.split(" ", 1) for line in plan.stdout.splitlines())
    result = run(["taskset", "-c", listed, *activated(["sh", "-c", 'echo "$HP_CHIP_CPUS $OMP_NUM_THREADS"'])],
                 env=env)
    assert result.returncode == 0, describe(result)
    chip, threads = result.stdout.split()
    assert parse_cpu_list(chip) == parse_cpu_list(want["chip"]), describe(result)
    assert int(threads) == len(parse_cpu_list(want["framework"])), describe(result)


def test_hp_doctor_shows_the_topology_and_the_plan():
    env = base_env(HP_PAYLOAD_DIR=None, HWLOC_SYNTHETIC=TWO_SOCKETS)
    result = run([REPO / "hp", "doctor", "--ranks", "4"], env=env, timeout=120)
    out = result.stdout
    assert f"topology       synthetic: {TWO_SOCKETS}: 2 package(s), 4 NUMA node(s), 32 cores, 64 CPUs" in out, \
        describe(result)
    assert f"  rank 3: CPUs {cores_first(48, 8)}; memory on node(s) 3" in out, describe(result)
    here = run([REPO / "hp", "doctor"], env=base_env(HP_PAYLOAD_DIR=None, HWLOC_SYNTHETIC=None), timeout=120)
    assert "topology       this system:" in here.stdout and "hprun --bind   -n 2:" in here.stdout, describe(here)
    bad = run([REPO / "hp", "doctor", "--ranks", "0"], env=base_env(HP_PAYLOAD_DIR=None), timeout=60)
    assert bad.returncode == 2 and "not a number of ranks" in bad.stderr, describe(bad)
