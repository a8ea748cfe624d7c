#!/usr/bin/env python3
"""The node's collectives on chips that are processes: each chip first fills its copy of the
tensors in a next-level task of its own, then one collective runs across every chip through the
scratch window (notify/wait on the symmetric heap), and the parent checks every chip's copy
against numpy. Exit status 1 on a mismatch.

    PYTHONPATH=python /usr/bin/python3 examples/runtime/l3/collectives.py allreduce --chips 4 \\
        --enable-dep-gen --enable-swimlane --output-prefix /tmp/l3_allreduce

Collectives: allreduce (sum, then max), allgather, reduce_scatter, broadcast (--root), all_to_all.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from hyper_parallel import runtime as rt

KINDS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "all_to_all")


def fill(block, x, chip, salt):
    """x = chip * 100 + salt + its flat index (mod 1000), on the chip that runs it."""
    flat = x.reshape(-1)
    flat[:] = chip * 100 + salt + np.arange(flat.size) % 1000


def expected(kind: str, chips: int, source: list[np.ndarray], root: int) -> list[np.ndarray]:
    if kind == "allreduce":
        total = source[0].copy()
        for c in range(1, chips):
            total += source[c]
        return [total] * chips
    if kind == "allgather":
        return [np.stack(source)] * chips
    if kind == "reduce_scatter":
        total = source[0].copy()
        for c in range(1, chips):
            total += source[c]
        return [total[c] for c in range(chips)]
    if kind == "broadcast":
        return [source[root]] * chips
    return [np.stack([source[q][c] for q in range(chips)]) for c in range(chips)]  # all_to_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--chips", type=int, default=2)
    parser.add_argument("--count", type=int, default=10000, help="elements per chip (per block)")
    parser.add_argument("--root", type=int, default=0, help="broadcast's root")
    parser.add_argument("--scratch-kib", type=int, default=256, help="scratch window per chip")
    rt.CallConfig.add_arguments(parser)
    args = parser.parse_args()
    n, count = args.chips, args.count

    with rt.Worker(level=3, chips=n, heap_bytes=64 << 20, tensor_bytes=32 << 20,
                   scratch_bytes=args.scratch_kib << 10) as w:
        fill_h = w.register(fill)
        w.init()
        blocked = args.kind in ("reduce_scatter", "all_to_all")
        src = w.alloc([n, count] if blocked else [count], np.float32)
        dst = {"allgather": lambda: w.alloc([n, count], np.float32),
               "reduce_scatter": lambda: w.alloc([count], np.float32),
               "all_to_all": lambda: w.alloc([n, count], np.float32)}.get(args.kind, lambda: src)()

        def orchestration(o):
            for chip in range(n):
                o.submit_next_level(fill_h, rt.TaskArgs().output_existing(src.on(chip)).scalar(
                    chip).scalar(7).dump(), worker=chip)
            if args.kind == "allreduce":
                o.allreduce(src)
            elif args.kind == "allgather":
                o.allgather(dst, src)
            elif args.kind == "reduce_scatter":
                o.reduce_scatter(dst, src)
            elif args.kind == "broadcast":
                o.broadcast(src, args.root)
            else:
                o.all_to_all(dst, src)

        w.run(orchestration, rt.CallConfig.from_arguments(args))
        filled = []
        for chip in range(n):
            x = np.zeros([n, count] if blocked else [count], np.float32)
            fill(None, x, chip, 7)
            filled.append(x)
        want = expected(args.kind, n, filled, args.root)
        bad = [c for c in range(n) if not np.array_equal(dst.on(c), want[c])]
        if args.kind == "allreduce" and not bad:  # then a max over what the sum left
            for chip in range(n):
                src.on(chip)[:] += chip
            w.run(lambda o: o.allreduce(src, op="max"))
            bad = [c for c in range(n) if not np.array_equal(src.on(c), want[c] + n - 1)]
    if bad:
        print(f"{args.kind}: chips {bad} differ from the golden", file=sys.stderr)
        return 1
    print(f"{args.kind} on {n} chips, {count} elements per chip: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
