#!/usr/bin/env python3
"""SPMD paged attention on the task runtime, orchestrated from Python.

The KV cache lives in fixed-size pages of a pool, in shuffled order, addressed by a block table;
sequences have different lengths. ONE mixed task (mode "mix") over block_num groups computes
every (sequence, head): each group's cube block the scores q.k, its vector blocks the softmax
and softmax . V, handing rows over with cross-core flags. The kernel is the example kernel
library's hp_example_paged_attention (examples/runtime/kernels/paged_attention.h), or with
--kernel python the same algorithm as a Python task function. The golden is plain numpy; exit
status 1 on a mismatch.

    PYTHONPATH=python /usr/bin/python3 examples/runtime/paged_attention.py --dump-args 1 --output-prefix /tmp/pa
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from hyper_parallel import runtime as rt


def paged_attention_block(block, query, key_cache, value_cache, block_table, context_lens,
                          scores, out, scale):
    """The kernel's algorithm in numpy: group g takes pairs g, g + block_num, ...; the cube block
    writes a pair's score row and adds 1 to flag g, the vector blocks wait for it."""
    batch, heads, head_dim = query.shape
    page_size, kv_heads = key_cache.shape[1], key_cache.shape[2]
    pairs = range(block.block_idx, batch * heads, block.block_dim)
    for ordinal, pair in enumerate(pairs, start=1):
        b, h = divmod(pair, heads)
        tokens = np.arange(context_lens[b])
        pages, slots = block_table[b, tokens // page_size], tokens % page_size
        kv_head = h // (heads // kv_heads)
        if block.core_type == "cube":
            scores[pair, :len(tokens)] = key_cache[pages, slots, kv_head] @ query[b, h] * np.float32(scale)
            block.set_flag(block.block_idx)
        else:
            block.wait_flag(block.block_idx, ordinal)  # releases the GIL while it waits
            lo = head_dim * block.sub_block_idx // block.sub_block_dim
            hi = head_dim * (block.sub_block_idx + 1) // block.sub_block_dim
            row = scores[pair, :len(tokens)]
            p = np.exp(row - row.max())
            out[b, h, lo:hi] = (p @ value_cache[pages, slots, kv_head, lo:hi]) / p.sum()


def golden(query, key_cache, value_cache, block_table, context_lens, scale):
    batch, heads, head_dim = query.shape
    page_size, kv_heads = key_cache.shape[1], key_cache.shape[2]
    out = np.empty_like(query)
    for b in range(batch):
        tokens = np.arange(context_lens[b])
        pages, slots = block_table[b, tokens // page_size], tokens % page_size
        for h in range(heads):
            keys = key_cache[pages, slots, h // (heads // kv_heads)].astype(np.float64)
            values = value_cache[pages, slots, h // (heads // kv_heads)].astype(np.float64)
            logits = keys @ query[b, h].astype(np.float64) * scale
            p = np.exp(logits - logits.max())
            out[b, h] = (p @ values) / p.sum()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rt.CallConfig.add_arguments(parser)
    for name, default in (("batch", 4), ("num-heads", 8), ("num-kv-heads", 2), ("head-dim", 64),
                          ("page-size", 16), ("max-pages", 8), ("block-num", 0), ("seed", 7),
                          ("cube", 2), ("vector", 4)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--kernel", choices=("library", "python"), default="library")
    args = parser.parse_args()
    batch, heads, kv_heads, head_dim = args.batch, args.num_heads, args.num_kv_heads, args.head_dim
    page_size, max_pages = args.page_size, args.max_pages
    num_pages = batch * max_pages + 3  # a pool with spare pages
    block_num = args.block_num or args.cube

    rng = np.random.default_rng(args.seed)
    query = rng.uniform(-1, 1, (batch, heads, head_dim)).astype(np.float32)
    key_cache = rng.uniform(-1, 1, (num_pages, page_size, kv_heads, head_dim)).astype(np.float32)
    value_cache = rng.uniform(-1, 1, key_cache.shape).astype(np.float32)
    # a sequence's pages are scattered in the pool
    block_table = rng.permutation(num_pages)[:batch * max_pages].astype(np.int32).reshape(batch, max_pages)
    context_lens = rng.integers(1, max_pages * page_size + 1, batch).astype(np.int32)
    context_lens[0] = max_pages * page_size  # one full sequence
    out = np.full_like(query, np.nan)
    scale = 1 / np.sqrt(head_dim)

    with rt.ChipWorker(args.cube, args.vector) as worker:
        kernel = (rt.Callable.from_library(rt.example_kernels_library(), "hp_example_paged_attention")
                  if args.kernel == "library" else rt.Callable.from_function(paged_attention_block))
        slot = worker.register_callable(kernel)
        task_args = rt.TaskArgs(
            rt.Arg.input(query), rt.Arg.input(key_cache), rt.Arg.input(value_cache),
            rt.Arg.input(block_table).dump(), rt.Arg.input(context_lens).dump(),
            rt.Arg.output(np.float32, [batch * heads, max_pages * page_size]),  # scores workspace
            rt.Arg.output_existing(out).dump(), rt.Scalar(scale, "fp32"))
        worker.run(slot, task_args, rt.CallConfig.from_arguments(args, mode="mix", block_dim=block_num))

    expected = golden(query, key_cache, value_cache, block_table, context_lens, scale)
    if not np.allclose(out, expected, rtol=1e-4, atol=1e-4):
        bad = np.unravel_index(int(np.nanargmax(np.abs(out - expected))), out.shape)
        print(f"paged_attention.py: MISMATCH out{list(bad)} = {out[bad]}, expected {expected[bad]}",
              file=sys.stderr)
        return 1
    print(f"paged_attention.py: batch {batch}, {heads} heads ({kv_heads} KV), head_dim {head_dim}, "
          f"{num_pages} pages of {page_size} tokens, one mixed task over {block_num} groups "
          f"({args.kernel} kernel): golden check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
