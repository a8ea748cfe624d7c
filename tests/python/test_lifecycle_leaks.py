"""Create/destroy cycles in one process leave nothing behind: Buffer and MegaMoe (each used once
per cycle) on 2 ranks under hprun, and the runtime's ChipWorker and node Worker (level 3, its
chips forked per cycle). After a warm-up, CYCLES more cycles of each must keep the process's
resident memory within RSS_MARGIN_MB and its open file descriptors exactly where they were.

Resident memory moves by a few MiB from one moment to the next without any leak (malloc keeps
freed chunks, and its mmap threshold adapts to the sizes freed), so one reading before and one
after compare two random points of that band. The process is read every SAMPLE_EVERY cycles
instead, and the lowest of the first SAMPLES readings is compared with the lowest of the last
SAMPLES: the band's floor, which a leak lifts by its size per cycle times the cycles between."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import REPO, SYSTEM_PYTHON, describe, run
from jobs import hprun, job_env

CYCLES = 200
WARMUP = 20
RSS_MARGIN_MB = 8.0
SAMPLE_EVERY = 10
SAMPLES = 5

MEASURE = """
import gc, json, os, sys
import numpy as np

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

def fds():
    return len(os.listdir("/proc/self/fd"))

def measure(name, cycle, cycles, warmup, out=None):
    for _ in range(warmup):
        cycle()
    gc.collect()
    fds_before, readings = fds(), []
    for i in range(cycles):
        cycle()
        if (i + 1) % SAMPLE_EVERY == 0:
            gc.collect()
            readings.append(rss_mb())
    fds_after = fds()
    line = json.dumps({"kind": name, "rss_before_mb": min(readings[:SAMPLES]),
                       "rss_after_mb": min(readings[-SAMPLES:]), "rss_readings_mb": readings,
                       "fds_before": fds_before, "fds_after": fds_after, "cycles": cycles})
    # One file per process (ranks under hprun share stdout).
    with open(os.path.join(sys.argv[1], f"{name}.{os.getpid()}.json"), "w") as f:
        f.write(line)
"""

MOE_CYCLES = """
from hyper_parallel import moe, shmem
shmem.acquire()
me, n = shmem.my_pe(), shmem.n_pes()
H, I, E, K, T = 64, 32, 4 * n, 2, 8
rng = np.random.default_rng(me)
x = rng.standard_normal((T, H)).astype(np.float32)
idx = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int64)
w = np.full((T, K), 0.5, np.float32)
El = E // n
w1 = rng.integers(-127, 128, (El, H, 2 * I)).astype(np.int8)
w2 = rng.integers(-127, 128, (El, I, H)).astype(np.int8)
s1, s2 = np.full((El, 2 * I), 1e-3, np.float32), np.full((El, H), 1e-3, np.float32)

def buffer_cycle():
    with moe.Buffer(hidden=H, num_experts=E, topk=K, max_tokens_per_rank=16,
                    low_latency=True) as buf:
        result = buf.dispatch(x, idx, w)
        buf.combine(result.recv_x, result.handle)

def layer_cycle():
    with moe.MegaMoe(w1, s1, w2, s2, num_experts=E, topk=K, max_tokens_per_rank=16,
                     backward=True) as layer:
        layer(x, idx, w)
        layer.backward(x, idx, w, np.ones((T, H), np.float32))

measure("Buffer", buffer_cycle, CYCLES, WARMUP)
measure("MegaMoe", layer_cycle, CYCLES, WARMUP)
shmem.release()
"""

RUNTIME_CYCLES = """
from hyper_parallel import runtime as rt

def fill(block, out, value):
    out[:] = value

def chip_cycle():
    with rt.ChipWorker(num_cube=1, num_vector=1) as worker:
        slot = worker.register_callable(rt.Callable.from_function(fill, "fill"))
        x = np.zeros(64, np.float32)
        worker.run(lambda o: rt.submit(slot, rt.TaskArgs().output_existing(x).scalar(1.0)),
                   rt.CallConfig(run_timeout_s=60.0))

def node_cycle():
    with rt.Worker(level=3, chips=2, heap_bytes=8 << 20, tensor_bytes=4 << 20,
                   scratch_bytes=64 << 10, timeout_s=60.0) as worker:
        handle = worker.register(fill)
        worker.init()
        x = worker.alloc([64], np.float32)
        worker.run(lambda o: [o.submit_next_level(handle, rt.TaskArgs().output_existing(x.on(c))
                                                  .scalar(2.0), worker=c)
                              for c in range(worker.chips)])

measure("ChipWorker", chip_cycle, CYCLES, WARMUP)
measure("Worker-level3", node_cycle, CYCLES, WARMUP)
"""


def program(tmp_path, body: str):
    script = tmp_path / "cycles.py"
    script.write_text(f"CYCLES, WARMUP, SAMPLE_EVERY, SAMPLES = {CYCLES}, {WARMUP}, {SAMPLE_EVERY}, {SAMPLES}\n" +
                      textwrap.dedent(MEASURE) +
                      textwrap.dedent(body))
    return script


def check(out_dir, kinds: set[str], processes: int) -> None:
    seen = []
    for path in sorted(out_dir.glob("*.json")):
        m = json.loads(path.read_text())
        seen.append(m["kind"])
        grown = m["rss_after_mb"] - m["rss_before_mb"]
        print(f"{m['kind']}: {m['cycles']} cycles, resident {m['rss_before_mb']:.1f} -> "
              f"{m['rss_after_mb']:.1f} MiB, fds {m['fds_before']} -> {m['fds_after']}")
        assert grown <= RSS_MARGIN_MB, f"{m['kind']}: resident memory grew {grown:.1f} MiB: {m}"
        assert m["fds_after"] == m["fds_before"], f"{m['kind']}: file descriptors leak: {m}"
    assert sorted(seen) == sorted(k for k in kinds for _ in range(processes)), seen


def test_buffer_and_layer_cycles_on_two_ranks_leave_nothing(tmp_path):
    result = hprun("-n", 2, "--heap-size", "64M", SYSTEM_PYTHON, program(tmp_path, MOE_CYCLES),
                   tmp_path, env=job_env(PYTHONPATH=str(REPO / "python")), timeout=600)
    assert result.returncode == 0, describe(result)
    check(tmp_path, {"Buffer", "MegaMoe"}, processes=2)


def test_runtime_worker_cycles_leave_nothing(tmp_path):
    result = run([SYSTEM_PYTHON, program(tmp_path, RUNTIME_CYCLES), tmp_path],
                 env=job_env(PYTHONPATH=str(REPO / "python")), timeout=600)
    assert result.returncode == 0, describe(result)
    check(tmp_path, {"ChipWorker", "Worker-level3"}, processes=1)
