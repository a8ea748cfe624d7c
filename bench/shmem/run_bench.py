#!/usr/bin/env python3
"""Runs the symmetric-memory benchmark: HyperParallel (hprun), Open MPI's OSHMEM (oshrun) and
MPI-3 RMA (mpirun), interleaved in a rotating order (A B C, B C A, C A B, ...: each runs in
every position as often, so that a drift within a round favours none), and prints medians and
ratios. Then the same over TCP between two hosts made of network namespaces (netns_hosts.sh):
HyperParallel's mpi transport (every other PE through MPI-3 RMA), OSHMEM over UCX's tcp
transport and MPI-3 RMA, all three with mpirun across the hosts and the same link.

    run_bench.py [--pes 2,4] [--rounds 5] [--quick] [--no-tcp | --tcp-only]

Installed beside the benchmark binaries (build/native/tests/symmetric_memory/bin); the payload's
hprun and netns_hosts.sh are found relative to it. bench/shmem/run.sh builds first, then runs
this. The TCP rows need root (ip netns); without it they are skipped with the reason. Over TCP
every operation is 100 to 1000 times slower, so those runs use the iteration counts of --quick.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NATIVE = HERE.parents[2]  # build/native
HPRUN = NATIVE / "payload" / "hyper_parallel" / "symmetric_memory" / "bin" / "hprun"
NETNS_HOSTS = HERE / "netns_hosts.sh"
METRICS = [  # (key, label, higher is better)
    ("put_GBps_64K", "put 64 KiB (GB/s)", True),
    ("put_GBps_1M", "put 1 MiB (GB/s)", True),
    ("put_GBps_64M", "put 64 MiB (GB/s)", True),
    ("pingpong_half_rtt_us", "put+signal ping-pong 1/2 RTT (us)", False),
    ("barrier_us", "barrier_all (us)", False),
    ("alltoall_1M_us", "alltoall 1 MiB/peer (us)", False),
    ("ibput_64x1K_us", "blocked put 64 x 1 KiB (us)", False),
    ("signal_add_us", "signal add (us per op)", False),
    ("fetch_add_us", "fetch-add, all PEs on PE 0 (us per op)", False),
]
OMPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # docs/shmem.md, "Open MPI": libfabric's ofi btl is slow and crashes; osc/rdma breaks OSHMEM's finalize.
    "OMPI_MCA_btl": "^openib,ofi", "OMPI_MCA_osc": "^rdma",
    "SHMEM_SYMMETRIC_HEAP_SIZE": "512M",
}


def run(cmd: list[str], env: dict) -> dict:
    result = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True,
                            timeout=900)
    lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
    if result.returncode != 0 or not lines:
        sys.exit(f"benchmark failed: {' '.join(cmd)} (exit {result.returncode})\n"
                 f"{result.stdout}\n{result.stderr}")
    return json.loads(lines[-1])


def commands(n: int, quick: bool) -> dict[str, tuple[list[str], dict]]:
    extra = ["--quick"] if quick else []
    return {
        "hp": ([str(HPRUN), "-n", str(n), "--heap-size", "512M",
                str(HERE / "bench_shmem_hp"), "hp", *extra], {}),
        "oshmem": (["oshrun", "--oversubscribe", "-np", str(n),
                    str(HERE / "bench_shmem_oshmem"), "oshmem", *extra], OMPI_ENV),
        "mpi_rma": (["mpirun", "--oversubscribe", "-np", str(n),
                     str(HERE / "bench_shmem_mpi_rma"), "mpi-rma", *extra], OMPI_ENV),
    }


def tcp_commands(n: int, quick: bool, mpirun_args: list[str]) -> dict[str, tuple[list[str], dict]]:
    """The three programs under mpirun across the namespace hosts (mpirun_args: their hostfile,
    rsh agent and the TCP-only transports). The two MPI-3 RMA programs use the pt2pt one-sided
    component (over the tcp btl), which is faster over TCP than the ucx one Open MPI would
    pick; OSHMEM has only its ucx spml."""
    extra = ["--quick"] if quick else []
    across = ["mpirun", *mpirun_args, "-np", str(n)]
    rma = ["--mca", "osc", "pt2pt"]
    return {
        "hp": ([*across, *rma, "-x", "HP_SHMEM_TRANSPORT=mpi", "-x", "HP_SHMEM_HEAP_SIZE=512M",
                str(HERE / "bench_shmem_hp"), "hp", *extra], OMPI_ENV),
        "oshmem": ([*across, str(HERE / "bench_shmem_oshmem"), "oshmem", *extra], OMPI_ENV),
        "mpi_rma": ([*across, *rma, str(HERE / "bench_shmem_mpi_rma"), "mpi-rma", *extra],
                    OMPI_ENV),
    }


def measure(title: str, make_commands, pes: list[int], rounds: int) -> None:
    """Runs every implementation `rounds` times, interleaved, for each PE count; prints the
    medians and ratios under `title`."""
    for n in pes:
        samples: dict[str, list[dict]] = {}
        for r in range(rounds):
            order = list(make_commands(n).items())
            shift = r % len(order)
            for impl, (cmd, env) in order[shift:] + order[:shift]:
                samples.setdefault(impl, []).append(run(cmd, env))
        med = {impl: {k: statistics.median(s[k] for s in runs if k in s)
                      for k, _, _ in METRICS if all(k in s for s in runs)}
               for impl, runs in samples.items()}
        memcpy = statistics.median(s["memcpy_GBps_64M"] for s in samples["hp"])
        print(f"\n{title}: {n} PEs, medians of {rounds} interleaved runs "
              f"(OSHMEM: OpenSHMEM {samples['oshmem'][0].get('openshmem')} API)")
        print(f"{'metric':38} {'hp':>10} {'oshmem':>10} {'mpi-rma':>10} {'hp/oshmem':>10} {'hp/mpi':>10}")
        for key, label, higher in METRICS:
            hp, osh, mpi = (med[impl].get(key) for impl in ("hp", "oshmem", "mpi_rma"))
            # Ratios read "how many times better hp is" whichever direction is better.
            def ratio(peer):
                return "-" if peer is None else f"{hp / peer if higher else peer / hp:.2f}x"
            value = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731 (no MPI RMA row)
            print(f"{label:38} {value(hp):>10} {value(osh):>10} {value(mpi):>10} "
                  f"{ratio(osh):>10} {ratio(mpi):>10}")
        print(f"{'memcpy 64 MiB (GB/s)':38} {memcpy:10.3f}   put 64 MiB / memcpy: "
              f"{med['hp']['put_GBps_64M'] / memcpy:.2f}")


def measure_tcp(pes: list[int], rounds: int) -> None:
    """The TCP rows, on two namespace hosts made for the run and removed after it."""
    with tempfile.TemporaryDirectory(prefix="hp-bench-hosts.") as hosts:
        up = subprocess.run([str(NETNS_HOSTS), "up", hosts, "2"], capture_output=True, text=True)
        if up.returncode != 0:
            print(f"\nTCP rows skipped: cannot make hosts of network namespaces "
                  f"({up.stderr.strip() or up.stdout.strip()})")
            return
        try:
            args = (Path(hosts) / "mpirun.args").read_text().split("\n")
            args = [a for a in args if a]
            measure("over TCP between 2 hosts (network namespaces, mpirun)",
                    lambda n: tcp_commands(n, True, args), pes, rounds)
        finally:
            subprocess.run([str(NETNS_HOSTS), "down", hosts], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pes", default="2,4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a few iterations (smoke test)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-tcp", action="store_true",
                       help="skip the rows over TCP between namespace hosts")
    which.add_argument("--tcp-only", action="store_true", help="only the rows over TCP")
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    pes = [int(x) for x in args.pes.split(",")]
    if not args.tcp_only:
        measure(f"one host ({cpus} CPUs)", lambda n: commands(n, args.quick), pes, args.rounds)
    if not args.no_tcp:
        measure_tcp(pes, args.rounds)
    print("\nratios > 1: hp is better (higher bandwidth, or lower latency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
