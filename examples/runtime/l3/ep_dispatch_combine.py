#!/usr/bin/env python3
"""Expert-parallel MoE on the node runtime: dispatch -> per-expert FFN on each chip -> combine,
with the chips as processes and the all-to-alls as the node's collectives.

Each chip holds `tokens` tokens of `hidden` features, their top-k experts and weights, and its
share of the experts (experts / chips of them, W: hidden x hidden each). Per chip, as next-level
tasks: pack each (token, k) row into the send buffer block of the chip that owns its expert
(capacity tokens x k rows per block, with its token, expert and k alongside); all_to_all of rows
and of their metadata; run the local experts over the rows received (y = relu(x W_e)); all_to_all
back; combine out[t] = sum_k w[t, k] y[t, k] at the token's own chip. Checked against numpy;
exit status 1 on a mismatch.

    PYTHONPATH=python /usr/bin/python3 examples/runtime/l3/ep_dispatch_combine.py --chips 4 \\
        --enable-dep-gen --enable-swimlane --output-prefix /tmp/l3_ep
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from hyper_parallel import runtime as rt


def pack(block, x, idx, send, meta, experts_per_chip):
    """Rows of x into send[dest, slot], with (token, expert, k) in meta; unused slots: -1."""
    meta[:] = -1
    tokens, topk = idx.shape
    fill = np.zeros(send.shape[0], np.int64)
    for t in range(tokens):
        for k in range(topk):
            dest = idx[t, k] // experts_per_chip
            send[dest, fill[dest]] = x[t]
            meta[dest, fill[dest]] = (t, idx[t, k], k)
            fill[dest] += 1


def experts(block, recv, recv_meta, weights, y, first_expert):
    """y[q, r] = relu(recv[q, r] @ W[expert - first_expert]) for every row received."""
    y[:] = 0
    for q in range(recv.shape[0]):
        for r in np.nonzero(recv_meta[q, :, 0] >= 0)[0]:
            w = weights[recv_meta[q, r, 1] - first_expert]
            y[q, r] = np.maximum(recv[q, r] @ w, 0)


def combine(block, back, meta, topk_w, out):
    """out[t] = sum over k of w[t, k] * the row that came back for (t, k)."""
    out[:] = 0
    for dest in range(back.shape[0]):
        for r in np.nonzero(meta[dest, :, 0] >= 0)[0]:
            t, _, k = meta[dest, r]
            out[t] += topk_w[t, k] * back[dest, r]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32, help="tokens per chip")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    rt.CallConfig.add_arguments(parser)
    args = parser.parse_args()
    n, T, H, E, K = args.chips, args.tokens, args.hidden, args.experts, args.topk
    if E % n != 0 or K > E:
        parser.error("--experts must be a multiple of --chips, and --topk at most --experts")
    per_chip = E // n
    cap = T * K  # the most rows a chip can send to one chip
    rng = np.random.default_rng(args.seed)
    x_all = rng.standard_normal((n, T, H), dtype=np.float32)
    idx_all = np.stack([np.stack([rng.choice(E, K, replace=False) for _ in range(T)])
                        for _ in range(n)]).astype(np.int64)
    w_all = rng.random((n, T, K), dtype=np.float32)
    w_experts = (rng.standard_normal((E, H, H), dtype=np.float32) / np.sqrt(H)).astype(np.float32)

    with rt.Worker(level=3, chips=n, heap_bytes=128 << 20, tensor_bytes=96 << 20) as w:
        h = {f.__name__: w.register(f) for f in (pack, experts, combine)}
        w.init()
        x, idx, topk_w = (w.alloc([T, H], np.float32), w.alloc([T, K], np.int64),
                          w.alloc([T, K], np.float32))
        weights = w.alloc([per_chip, H, H], np.float32)
        send, recv, y, back = (w.alloc([n, cap, H], np.float32) for _ in range(4))
        meta, recv_meta = w.alloc([n, cap, 3], np.int64), w.alloc([n, cap, 3], np.int64)
        out = w.alloc([T, H], np.float32)
        for c in range(n):
            x.on(c)[:], idx.on(c)[:], topk_w.on(c)[:] = x_all[c], idx_all[c], w_all[c]
            weights.on(c)[:] = w_experts[c * per_chip:(c + 1) * per_chip]

        def orchestration(o):
            for c in range(n):
                o.submit_next_level(h["pack"], rt.TaskArgs().input(x.on(c)).input(idx.on(c))
                                    .output_existing(send.on(c)).output_existing(meta.on(c))
                                    .scalar(per_chip), worker=c)
            o.all_to_all(recv, send)
            o.all_to_all(recv_meta, meta)
            for c in range(n):
                o.submit_next_level(h["experts"], rt.TaskArgs().input(recv.on(c))
                                    .input(recv_meta.on(c)).input(weights.on(c))
                                    .output_existing(y.on(c)).scalar(c * per_chip), worker=c)
            o.all_to_all(back, y)
            for c in range(n):
                o.submit_next_level(h["combine"], rt.TaskArgs().input(back.on(c)).input(meta.on(c))
                                    .input(topk_w.on(c)).output_existing(out.on(c)).dump(3),
                                    worker=c)

        w.run(orchestration, rt.CallConfig.from_arguments(args))
        bad = []
        for c in range(n):
            golden = np.zeros((T, H), np.float32)
            for t in range(T):
                for k in range(K):
                    golden[t] += w_all[c, t, k] * np.maximum(x_all[c, t] @ w_experts[idx_all[c, t, k]], 0)
            if not np.allclose(out.on(c), golden, rtol=1e-4, atol=1e-4):
                bad.append(c)
    if bad:
        print(f"ep_dispatch_combine: chips {bad} differ from the golden", file=sys.stderr)
        return 1
    print(f"ep_dispatch_combine on {n} chips ({T} tokens each, {E} experts, top-{K}): OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
