"""The MoE layer benchmark's report: run.py's JSON lines as markdown tables and a plot.

    report.py results.jsonl [--markdown out.md] [--plot out.png]

A table per shape: a row per (ranks x threads, tokens), the fused layer's ms and tokens/s, and
each peer's time over the fused layer's (x > 1: the fused layer is faster); the backward's the
same against fused+bwd; with fused+bwd-kept rows (the layer keeping GMM1's output for its
backward) or fused+bwd-int8 rows (kept, and the activation gradients in int8), their ms and
their backward over the forward too. The plot (matplotlib) shows tokens/s against tokens for every
implementation, a panel per shape and configuration. With several rows for one point (runs
appended to one file), the last one counts.
"""

import argparse
import json
import sys
from pathlib import Path

FORWARD_PEERS = ["unfused", "kt-int8", "kt-bf16", "torch-bf16", "torch-fp32"]
BACKWARD_PEERS = ["torch-bf16+bwd", "torch-fp32+bwd"]
# Our other backward modes, each with its ms and backward/forward columns where it ran.
BACKWARD_VARIANTS = [("fused+bwd-kept", "kept"), ("fused+bwd-int8", "int8")]


def load(path):
    rows = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[(r["shape"], r["ranks"], r["threads"], r["tokens"], r["impl"])] = r
    return rows


def points(rows):
    return sorted({k[:4] for k in rows}, key=lambda k: (k[0], k[1], k[2], k[3]))


def ratio(rows, point, impl, ours):
    r, o = rows.get(point + (impl,)), rows.get(point + (ours,))
    if r is None:
        return ""
    if r["median_s"] is None:
        return "n/a" if r["note"] else ""
    if o is None or o["median_s"] is None:
        return ""
    mark = "" if len(r["samples"]) >= 3 else "*"
    return f"{r['median_s'] / o['median_s']:.2f}x{mark}"


def markdown(rows):
    out = []
    for shape in sorted({k[0] for k in rows}):
        out.append(f"\n#### {shape}\n")
        variants = [(impl, name) for impl, name in BACKWARD_VARIANTS
                    if any(k[0] == shape and k[4] == impl for k in rows)]
        head = ["R x thr", "tokens", "fused ms", "tokens/s", *[f"{p}" for p in FORWARD_PEERS], "fused+bwd ms",
                "bwd/fwd", *BACKWARD_PEERS, *[c for _, name in variants for c in (f"{name}+bwd ms", f"{name} bwd/fwd")]]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for p in [p for p in points(rows) if p[0] == shape]:
            f, fb = rows.get(p + ("fused",)), rows.get(p + ("fused+bwd",))
            fms = f["median_s"] if f else None
            fbms = fb["median_s"] if fb else None
            cells = [f"{p[1]}x{p[2]}", str(p[3]), f"{fms * 1e3:.1f}" if fms else "", f"{p[3] / fms:.0f}" if fms else ""]
            cells += [ratio(rows, p, i, "fused") for i in FORWARD_PEERS]
            cells += [f"{fbms * 1e3:.1f}" if fbms else "", f"{(fbms - fms) / fms:.1f}" if fbms and fms else ""]
            cells += [ratio(rows, p, i, "fused+bwd") for i in BACKWARD_PEERS]
            for impl, _ in variants:
                k = rows.get(p + (impl,))
                kms = k["median_s"] if k else None
                cells += [f"{kms * 1e3:.1f}" if kms else "", f"{(kms - fms) / fms:.1f}" if kms and fms else ""]
            out.append("| " + " | ".join(cells) + " |")
    notes = sorted((k[0], k[1], k[2], k[3], k[4], r["note"]) for k, r in rows.items() if r["note"])
    if notes:
        out.append("\nNotes (the n/a and * cells: fewer than 3 samples):")
        out.extend(f"- {shape} {ranks}x{threads} {tokens} tokens, {impl}: {note}"
                   for shape, ranks, threads, tokens, impl, note in notes)
    return "\n".join(out) + "\n"


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = sorted({k[0] for k in rows})
    configs = sorted({(k[1], k[2]) for k in rows})
    impls = ["fused", *FORWARD_PEERS, "fused+bwd", *[i for i, _ in BACKWARD_VARIANTS], *BACKWARD_PEERS]
    fig, axes = plt.subplots(len(configs), len(shapes), figsize=(5 * len(shapes), 4 * len(configs)), squeeze=False)
    for ci, (ranks, threads) in enumerate(configs):
        for si, shape in enumerate(shapes):
            ax = axes[ci][si]
            for impl in impls:
                pts = [(p[3], p[3] / rows[p + (impl,)]["median_s"]) for p in points(rows)
                       if p[:3] == (shape, ranks, threads) and rows.get(p + (impl,), {}).get("median_s")]
                if pts:
                    style = "--" if "+bwd" in impl else "-"
                    width = 2.5 if impl.startswith("fused") else 1.2
                    ax.plot(*zip(*pts), style, marker="o", linewidth=width, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{shape}, {ranks} rank(s) x {threads} thread(s)")
            ax.set_xlabel("tokens")
            ax.set_ylabel("tokens/s")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="run.py --json output")
    p.add_argument("--markdown", type=Path, help="write the tables here (else stdout)")
    p.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    args = p.parse_args()
    rows = load(args.results)
    text = markdown(rows)
    if args.markdown:
        args.markdown.write_text(text)
    else:
        sys.stdout.write(text)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
