#!/usr/bin/env python3
"""A tiled matmul + bias + activation DAG on the task runtime, orchestrated from Python.

C = act(A B + bias): per tile of C, one GEMM task per K chunk on the cube cores (the first
writes the tile, the others accumulate into it) and then a bias + activation task on the vector
cores. Tiles are strided views of C, so different tiles never wait for each other. The tasks are
Python functions over numpy views (numpy's matmul releases the GIL) or, with --kernels library,
the example kernel library's plain C++ tile kernels. Checked against numpy; exit status 1 on a
mismatch.

    PYTHONPATH=python /usr/bin/python3 examples/runtime/matmul.py --enable-dep-gen --output-prefix /tmp/mm
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from hyper_parallel import runtime as rt

ACTIVATIONS = {"none": 0, "relu": 1, "gelu": 2}


def activate(x: np.ndarray, activation: int) -> np.ndarray:
    if activation == 1:
        return np.maximum(x, np.float32(0))
    if activation == 2:  # tanh approximation, as the C++ kernels
        c = np.float32(0.7978845608028654)
        return np.float32(0.5) * x * (1 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))
    return x


def rows(n: int, block) -> slice:
    return slice(n * block.block_idx // block.block_dim, n * (block.block_idx + 1) // block.block_dim)


def tile_gemm(block, a, b, c, accumulate):
    r = rows(c.shape[0], block)
    if accumulate:
        c[r] += a[r] @ b
    else:
        np.matmul(a[r], b, out=c[r])


def bias_act(block, c, bias, activation):
    r = rows(c.shape[0], block)
    c[r] = activate(c[r] + bias, activation)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rt.CallConfig.add_arguments(parser)
    for name, default in (("m", 192), ("n", 160), ("k", 256), ("tile-m", 64), ("tile-n", 64),
                          ("tile-k", 128), ("gemm-blocks", 1), ("epilogue-blocks", 2),
                          ("cube", 2), ("vector", 4)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--activation", choices=ACTIVATIONS, default="gelu")
    parser.add_argument("--kernels", choices=("python", "library"), default="python",
                        help="Python task functions (numpy) or the example kernel library")
    args = parser.parse_args()
    m, n, k = args.m, args.n, args.k
    act = ACTIVATIONS[args.activation]

    a = ((np.arange(m * k) % 17 - 8) / 16).astype(np.float32).reshape(m, k)
    b = ((np.arange(k * n) % 11 - 5) / 8).astype(np.float32).reshape(k, n)
    bias = ((np.arange(n) % 7 - 3) / 4).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)

    with rt.ChipWorker(args.cube, args.vector) as worker:
        if args.kernels == "python":
            gemm, epilogue = worker.register_callable(tile_gemm), worker.register_callable(bias_act)
        else:
            library = rt.example_kernels_library()
            gemm = worker.register_callable(rt.Callable.from_library(library, "hp_example_tile_gemm_f32"))
            epilogue = worker.register_callable(rt.Callable.from_library(library, "hp_example_bias_act_f32"))

        def orchestration(o):
            for i in range(0, m, args.tile_m):
                with rt.scope():  # one scope per row of tiles
                    for j in range(0, n, args.tile_n):
                        c_tile = c[i:i + args.tile_m, j:j + args.tile_n]  # a strided view
                        for kc in range(0, k, args.tile_k):
                            a_tile = a[i:i + args.tile_m, kc:kc + args.tile_k]
                            b_tile = b[kc:kc + args.tile_k, j:j + args.tile_n]
                            c_arg = rt.Arg.inout(c_tile) if kc else rt.Arg.output_existing(c_tile)
                            rt.submit(gemm, rt.TaskArgs(rt.Arg.input(a_tile), rt.Arg.input(b_tile), c_arg,
                                                        rt.Scalar(int(kc != 0), "int32")),
                                      mode="cube", block_dim=args.gemm_blocks)
                        e_args = rt.TaskArgs().inout(c_tile).input(bias[j:j + args.tile_n]).scalar(act, "int32")
                        if i == 0 and j == 0:
                            e_args.dump()  # --dump-args 1 captures the first tile's epilogue
                        rt.submit(epilogue, e_args, mode="vector", block_dim=args.epilogue_blocks)

        worker.run(orchestration, rt.CallConfig.from_arguments(args))

    golden = activate((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32) + bias, act)
    if not np.allclose(c, golden, rtol=1e-4, atol=1e-4):
        bad = np.unravel_index(int(np.nanargmax(np.abs(c - golden))), c.shape)
        print(f"matmul.py: MISMATCH C{list(bad)} = {c[bad]}, expected {golden[bad]}", file=sys.stderr)
        return 1
    print(f"matmul.py: C[{m}, {n}] = {args.activation}(A[{m}, {k}] B + bias) with {args.kernels} "
          "kernels: golden check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
