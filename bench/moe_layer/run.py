"""The MoE layer benchmark's driver: the fused layer against what a user would run instead.

For every point (shape, tokens, ranks x threads) it starts the C++ worker (bench_moe_layer
under mpirun: fused, fused+bwd, fused+bwd-kept, fused+bwd-int8, unfused) and keeps it for the point; then, one at a time, each
Python peer worker (peers.py: PyTorch eager in bf16 and fp32, KTransformers' kernels), and
alternates samples: ours, the peer, ours, the peer, ... so that the machine's noise hits both
alike. Every worker speaks the line protocol described in bench_moe_layer.cpp. The table shows
medians: ms per layer call, tokens/s, the peer's time over ours (x > 1: ours is faster) and each
implementation's y against the fused layer's for two tokens (they compute the same layer).

`--tokens` are the batch's tokens over all ranks: with R ranks each rank has tokens / R; a
peer runs in one process on ranks x threads threads. An implementation whose warm-up call
takes long gets fewer samples (at least one) within --budget seconds; one whose call the
previous batch size predicts above --max-call seconds is skipped, and the row says so.
"""

import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SHAPES = {  # name: (hidden, intermediate, experts, topk)
    "qwen3": (2048, 768, 128, 8),      # Qwen3-30B-A3B-like
    "mixtral": (4096, 14336, 8, 2),    # Mixtral-8x7B-like
    "deepseek": (7168, 2048, 32, 8),   # DeepSeek-V3-like, 32 of its 256 experts (memory)
}
CPP_IMPLS = ["fused", "fused+bwd", "fused+bwd-kept", "fused+bwd-int8", "unfused"]
OURS = ("fused", "fused+bwd", "fused+bwd-kept", "fused+bwd-int8")  # rows of ours: no peer/ours ratio
PEER_WORKERS = {  # worker name: (impls it hosts, peers.py arguments)
    "torch-bf16": (["torch-bf16", "torch-bf16+bwd"], ["--impl", "torch", "--dtype", "bf16"]),
    "torch-fp32": (["torch-fp32", "torch-fp32+bwd"], ["--impl", "torch", "--dtype", "fp32"]),
    "kt": (["kt-int8", "kt-bf16"], ["--impl", "kt"]),
}
ALL_IMPLS = CPP_IMPLS + [i for impls, _ in PEER_WORKERS.values() for i in impls]
# What each implementation is compared with: ours doing the same work.
OURS_FOR = {i: ("fused+bwd" if i.endswith("+bwd") else "fused") for i in ALL_IMPLS}
# y of the fused layer and of a peer differ by quantisation (int8 vs bf16/fp32) and rounding;
# a layout mistake gives an error near 1.
CHECK_TOLERANCE = 0.1


class WorkerError(RuntimeError):
    pass


class Worker:
    """A worker process: JSON commands on stdin, one JSON reply per line on stdout."""

    def __init__(self, name, argv, env, deadline_s, log_dir):
        self.name, self.deadline_s = name, deadline_s
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = log_dir / f"{name}.log"  # its stderr (kt-kernel's C++ chatter goes there too)
        with self.log.open("a") as log:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                         text=True, bufsize=1)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.ready = self.reply()

    def reply(self):
        end = time.monotonic() + self.deadline_s
        while True:
            left = end - time.monotonic()
            if left <= 0 or not self.selector.select(timeout=left):
                self.close(kill=True)
                raise WorkerError(f"{self.name}: no reply within {self.deadline_s:.0f} s (--deadline)")
            line = self.proc.stdout.readline()
            if not line:
                rc = self.proc.wait()
                raise WorkerError(f"{self.name}: exited with status {rc}; its stderr: {self.log}\n" +
                                  "".join(self.log.read_text().splitlines(keepends=True)[-15:]))
            line = line.strip()
            if not line.startswith("{"):
                continue  # a launcher's chatter; the protocol's lines are JSON objects
            msg = json.loads(line)
            if "error" in msg:
                self.close(kill=True)
                raise WorkerError(f"{self.name}: {msg['error']} (its stderr: {self.log})")
            return msg

    def command(self, **cmd):
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            rc = self.proc.wait()
            raise WorkerError(f"{self.name}: exited with status {rc} (killed for memory? see dmesg); its stderr: "
                              f"{self.log}") from None
        return self.reply()

    def close(self, kill=False):
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                try:
                    self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def mpirun_env():
    env = dict(os.environ)
    # Open MPI as root with the components that work on these machines; more ranks than CPUs.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="^openib,ofi",
               OMPI_MCA_osc="^rdma", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def shape_args(shape, tokens):
    hidden, inter, experts, topk = SHAPES[shape]
    return ["--hidden", str(hidden), "--intermediate", str(inter), "--experts", str(experts), "--topk", str(topk),
            "--tokens", str(tokens)]


def start_cpp(args, shape, tokens, ranks, threads, impls):
    argv = ["mpirun", "-np", str(ranks), "--bind-to", "none", str(args.worker), *shape_args(shape, tokens // ranks),
            "--threads", str(threads), "--impls", ",".join(impls)]
    return Worker("bench_moe_layer", argv, mpirun_env(), args.deadline, args.logs)


def start_peer(args, worker, shape, tokens, ranks, threads, impls, weight_max):
    _, extra = PEER_WORKERS[worker]
    python = args.python
    if worker == "kt":
        if args.kt_path is None:
            return None, {impl: "not installed (run.sh installs kt-kernel; or pass --kt-path)" for impl in impls}
        extra = extra + ["--kt-path", str(args.kt_path)]
        python = args.kt_python or python
    argv = [python, str(HERE / "peers.py"), *extra, *shape_args(shape, tokens), "--threads", str(ranks * threads),
            "--weight-max", str(weight_max), "--impls", ",".join(impls)]
    w = Worker(worker, argv, dict(os.environ), args.deadline, args.logs)
    if "unavailable" in w.ready:
        w.close()
        return None, {impl: w.ready["unavailable"] for impl in impls}
    return w, w.ready.get("unavailable_impls", {})


def relative_error(y, ref):
    num = sum((a - b) ** 2 for ra, rb in zip(y, ref) for a, b in zip(ra, rb))
    den = sum(b * b for rb in ref for b in rb)
    return (num / den) ** 0.5 if den > 0 else float("inf")


class Point:
    """The samples of one (shape, tokens, ranks x threads)."""

    def __init__(self, shape, tokens, ranks, threads):
        self.shape, self.tokens, self.ranks, self.threads = shape, tokens, ranks, threads
        self.samples = {}   # impl -> [seconds]
        self.notes = {}     # impl -> why it has no or few samples
        self.errors = {}    # impl -> y's relative error against fused
        self.info = {}      # worker -> its info string
        self.fused_y = None

    def row(self, impl):
        s = self.samples.get(impl, [])
        return {"shape": self.shape, "tokens": self.tokens, "ranks": self.ranks, "threads": self.threads,
                "impl": impl, "median_s": statistics.median(s) if s else None, "samples": s,
                "error_vs_fused": self.errors.get(impl), "note": self.notes.get(impl, "")}


def sample(worker, impl, point):
    point.samples.setdefault(impl, []).extend(worker.command(cmd="run", impl=impl, iterations=1)["seconds"])


def warm_up_and_check(worker, impl, point):
    """One call (not kept), then y against the fused layer's. Returns the call's seconds."""
    t = worker.command(cmd="run", impl=impl, iterations=1)["seconds"][0]
    y = worker.command(cmd="check", impl=impl)["y"]
    if impl == "fused":
        point.fused_y = y
    elif point.fused_y is not None:
        point.errors[impl] = relative_error(y, point.fused_y)
    return t


def interleave(point, ours_worker, ours, peer_worker, peers, args):
    """Alternating samples of `ours` (on ours_worker) and `peers` (on peer_worker)."""
    rounds = {}
    for impl in peers:
        w = warm_up_and_check(peer_worker, impl, point)
        rounds[impl] = max(1, min(args.rounds, int(args.budget / max(w, 1e-9))))
        if rounds[impl] < args.rounds:
            point.notes[impl] = f"{rounds[impl]} sample(s): a call takes {w:.1f} s (--budget {args.budget:.0f} s)"
    for r in range(max(rounds.values(), default=0)):
        for o in ours:
            sample(ours_worker, o, point)
        for impl in peers:
            if r < rounds[impl]:
                sample(peer_worker, impl, point)


def predicted_too_slow(previous, impl, tokens, args):
    """Whether the last batch size's time, scaled by tokens, predicts a call above --max-call."""
    if previous is None or not previous.samples.get(impl):
        return None
    predicted = statistics.median(previous.samples[impl]) * tokens / previous.tokens
    if predicted > args.max_call:
        return f"skipped: {previous.tokens} tokens took {statistics.median(previous.samples[impl]):.1f} s, " \
               f"{tokens} predict {predicted:.0f} s a call (--max-call {args.max_call:.0f} s)"
    return None


def run_point(args, shape, tokens, ranks, threads, previous):
    point = Point(shape, tokens, ranks, threads)
    wanted = [i for i in ALL_IMPLS if i in args.impls]
    for impl in wanted:
        note = predicted_too_slow(previous, impl, tokens, args)
        if note:
            point.notes[impl] = note
    live = [i for i in wanted if i not in point.notes]
    cpp_impls = [i for i in CPP_IMPLS if i in live or i in {OURS_FOR[p] for p in live}]
    ours = start_cpp(args, shape, tokens, ranks, threads, cpp_impls)
    point.info["bench_moe_layer"] = ours.ready.get("info", "")
    try:
        for impl in cpp_impls:  # fused first (CPP_IMPLS' order): the others are checked against it
            warm_up_and_check(ours, impl, point)
        # Ours among themselves: fused, fused+bwd, unfused, fused, ...
        for _ in range(args.rounds):
            for impl in cpp_impls:
                sample(ours, impl, point)
        for worker, (hosted, _) in PEER_WORKERS.items():
            impls = [i for i in hosted if i in live]
            if not impls:
                continue
            # A peer that fails (most often: killed for memory, as the largest shapes need
            # ours and the peer at once) fails its own rows, not the point.
            try:
                # The peers build the C++ worker's weights: the same range (127, or 63 where
                # oneDNN's int8 matmul would saturate).
                peer, missing = start_peer(args, worker, shape, tokens, ranks, threads, impls,
                                           ours.ready["weight_max"])
            except WorkerError as e:
                peer, missing = None, {impl: f"failed: {e}" for impl in impls}
            for impl, why in missing.items():
                point.notes[impl] = why if why.startswith("failed") else f"unavailable: {why}"
            impls = [i for i in impls if i not in missing]
            if peer is None or not impls:
                if peer is not None:
                    peer.close()
                continue
            point.info[worker] = peer.ready.get("info", "")
            try:
                interleave(point, ours, sorted({OURS_FOR[i] for i in impls}), peer, impls, args)
            except WorkerError as e:
                if ours.proc.poll() is not None:
                    raise
                for impl in impls:
                    point.samples.pop(impl, None)
                    point.notes[impl] = f"failed: {str(e).splitlines()[0]}"
            finally:
                peer.close()
    finally:
        ours.close()
    return point


def report(point, args, out):
    fused = {o: statistics.median(point.samples[o]) for o in OURS if point.samples.get(o)}
    print(f"\n{point.shape} {SHAPES[point.shape]} (H, I, E, K), {point.tokens} tokens, "
          f"{point.ranks} rank(s) x {point.threads} thread(s); " +
          "; ".join(f"{w}: {i}" for w, i in point.info.items() if i), file=out)
    print(f"{'impl':<16} {'ms':>10} {'tokens/s':>10} {'n':>3} {'peer/ours':>10} {'y err':>8}  note", file=out)
    for impl in [i for i in ALL_IMPLS if i in args.impls]:
        row = point.row(impl)
        m = row["median_s"]
        ours = fused.get(OURS_FOR[impl])
        ratio = f"{m / ours:.2f}x" if m and ours and impl not in OURS else ""
        err = f"{row['error_vs_fused']:.3f}" if row["error_vs_fused"] is not None else ""
        if row["error_vs_fused"] is not None and row["error_vs_fused"] > CHECK_TOLERANCE:
            row["note"] = (row["note"] + "; " if row["note"] else "") + "WRONG RESULT: y differs from the fused layer's"
        ms = f"{m * 1e3:.2f}" if m else "-"
        tps = f"{point.tokens / m:.0f}" if m else "-"
        print(f"{impl:<16} {ms:>10} {tps:>10} {len(row['samples']):>3} {ratio:>10} {err:>8}  {row['note']}", file=out)
    out.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="qwen3,mixtral,deepseek", help=f"of {', '.join(SHAPES)}")
    p.add_argument("--tokens", default="16,256,2048", help="batch sizes (tokens over all ranks), ascending")
    p.add_argument("--configs", default="1x1,2x1,1x2", help="ranks x threads per rank")
    p.add_argument("--impls", default=",".join(ALL_IMPLS), help="the implementations to run")
    p.add_argument("--rounds", type=int, default=5, help="interleaved samples of each implementation")
    p.add_argument("--budget", type=float, default=60.0, help="seconds of samples per slow implementation and point")
    p.add_argument("--max-call", type=float, default=120.0, help="skip a call predicted to take longer (s)")
    p.add_argument("--deadline", type=float, default=1800.0, help="seconds to wait for any one reply of a worker")
    p.add_argument("--worker", type=Path, default=HERE.parent.parent / "bin" / "bench_moe_layer",
                   help="the installed bench_moe_layer")
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter of the PyTorch peers")
    p.add_argument("--kt-path", type=Path, help="site-packages holding kt_kernel (the KTransformers peer)")
    p.add_argument("--kt-python", help="the interpreter of the KTransformers peer (default --python)")
    p.add_argument("--json", type=Path, help="write every row here (JSON lines, appended)")
    p.add_argument("--logs", type=Path,
                   help="keep the workers' stderr here (default: a temporary directory, kept only on failure)")
    p.add_argument("--quick", action="store_true", help="the smoke run: a tiny shape, 2 rounds")
    args = p.parse_args()
    temporary_logs = args.logs is None
    args.logs = args.logs or Path(tempfile.mkdtemp(prefix="hp-bench-moe-layer-"))
    args.impls = set(args.impls.split(","))
    unknown = args.impls - set(ALL_IMPLS)
    if unknown:
        p.error(f"unknown --impls {', '.join(sorted(unknown))} (known: {', '.join(ALL_IMPLS)})")
    if args.quick:
        SHAPES["tiny"] = (256, 128, 8, 2)
        args.shapes, args.tokens, args.configs, args.rounds = "tiny", "32", "1x1,2x1", 2
    shapes = args.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            p.error(f"unknown shape '{s}' (known: {', '.join(SHAPES)})")
    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    tokens = [int(t) for t in args.tokens.split(",")]
    if not args.worker.exists():
        p.error(f"{args.worker} does not exist: build the multicore component (bench/moe_layer/run.sh does)")
    failed = False
    for shape in shapes:
        for ranks, threads in configs:
            previous = None
            for t in tokens:
                if t % ranks:
                    p.error(f"--tokens {t} is not a multiple of {ranks} ranks")
                try:
                    point = run_point(args, shape, t, ranks, threads, previous)
                except WorkerError as e:
                    print(f"bench_moe_layer: {shape}, {t} tokens, {ranks}x{threads}: {e}", file=sys.stderr)
                    failed = True
                    continue
                report(point, args, sys.stdout)
                if args.json:
                    with args.json.open("a") as f:
                        for impl in ALL_IMPLS:
                            if impl in args.impls:
                                f.write(json.dumps(point.row(impl)) + "\n")
                wrong = [i for i, e in point.errors.items() if e > CHECK_TOLERANCE]
                failed = failed or bool(wrong)
                previous = point
    if temporary_logs and not failed:
        shutil.rmtree(args.logs, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
