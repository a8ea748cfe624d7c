#!/usr/bin/env python3
"""A vector-add pipeline on the task runtime, orchestrated from Python.

Per chunk of the vectors, inside its own scope: t = x + y (a Python task writing a
runtime-allocated OUTPUT), z = alpha * t (a Python task writing the caller's z); then
hp_example_sum_f32 from the example kernel library sums z. Checked against numpy; exit status 1
on a mismatch.

    PYTHONPATH=python /usr/bin/python3 examples/runtime/vector_add.py \
        --enable-dep-gen --enable-swimlane --output-prefix /tmp/vector_add
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from hyper_parallel import runtime as rt


def share(n: int, block) -> slice:
    """The block's share of n items."""
    return slice(n * block.block_idx // block.block_dim, n * (block.block_idx + 1) // block.block_dim)


def add(block, x, y, t):
    s = share(len(t), block)
    np.add(x[s], y[s], out=t[s])


def scale(block, t, z, alpha):
    s = share(len(z), block)
    np.multiply(t[s], np.float32(alpha), out=z[s])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rt.CallConfig.add_arguments(parser)
    parser.add_argument("--n", type=int, default=1 << 16, help="vector length")
    parser.add_argument("--chunk", type=int, default=4096, help="elements per chunk")
    parser.add_argument("--block-dim", type=int, default=2, help="blocks per task")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--cube", type=int, default=2)
    parser.add_argument("--vector", type=int, default=4)
    args = parser.parse_args()

    x = (np.arange(args.n) % 97).astype(np.float32) * 0.25
    y = 1 - (np.arange(args.n) % 13).astype(np.float32)
    z = np.full(args.n, -1, np.float32)
    total = np.zeros(1, np.float32)

    with rt.ChipWorker(args.cube, args.vector) as worker:
        add_slot = worker.register_callable(add)
        scale_slot = worker.register_callable(scale)
        sum_slot = worker.register_callable(
            rt.Callable.from_library(rt.example_kernels_library(), "hp_example_sum_f32"))

        def orchestration(o):
            for begin in range(0, args.n, args.chunk):
                end = min(begin + args.chunk, args.n)
                with rt.scope():  # t of this chunk is released at the scope's end
                    t_args = rt.TaskArgs(rt.Arg.input(x[begin:end]), rt.Arg.input(y[begin:end]),
                                         rt.Arg.output(np.float32, [end - begin]))
                    if begin == 0:
                        t_args.dump()  # --dump-args 1 captures the first chunk's add
                    t = rt.submit(add_slot, t_args, block_dim=args.block_dim)
                    rt.submit(scale_slot, rt.TaskArgs().input(t.outputs[0])
                              .output_existing(z[begin:end]).scalar(args.alpha, "fp32"),
                              block_dim=args.block_dim)
            rt.submit(sum_slot, rt.TaskArgs(rt.Arg.input(z), rt.Arg.output_existing(total).dump()))

        worker.run(orchestration, rt.CallConfig.from_arguments(args))

    golden = np.float32(args.alpha) * (x + y)
    if not np.array_equal(z, golden):
        bad = int(np.flatnonzero(z != golden)[0])
        print(f"vector-add.py: MISMATCH z[{bad}] = {z[bad]}, expected {golden[bad]}", file=sys.stderr)
        return 1
    if abs(float(total[0]) - float(golden.sum(dtype=np.float64))) > 1e-4 * (1 + abs(float(golden.sum()))):
        print(f"vector-add.py: MISMATCH sum = {total[0]}, expected {golden.sum(dtype=np.float64)}",
              file=sys.stderr)
        return 1
    print(f"vector-add.py: {args.n} elements, sum {total[0]}: golden check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
