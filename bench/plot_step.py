#!/usr/bin/env python3
"""Plots the KV materialization step's time against the token count from e2e_bench.py's JSON:
the seed's path, fkv with cuBLASLt + the epilogue kernel at every T, fkv with the decode-size
kernel (T <= 64), the path fkv chooses, and the weight-read floor measured in the same run. All
are CUDA-graph replays of one call (median), so they compare.

    python3 bench/plot_step.py e2e.json docs/step_time.png [decode_bench.json]  # needs matplotlib

With decode_bench.json (bench/decode_bench --out), the floor drawn is its weight-read probe (the
best of four grid sizes, 20 calls per graph like e2e_bench --calls-per-graph 20), else
e2e_bench's Triton probe.
"""

import json
import sys


def series(doc, key):
    xs, ys = [], []
    for r in doc["results"]:
        v = (r.get(key) or {}).get("graph_us")
        if v is not None:
            xs.append(r["tokens"])
            ys.append(v)
    return xs, ys


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    floor_label = "weight-read floor (Triton probe)"
    probe = (doc.get("weight_read_probe") or {}).get("median_us")
    if len(sys.argv) == 4:
        with open(sys.argv[3]) as f:
            probe = json.load(f)["probe"]["median_us"]
        floor_label = "weight-read floor (decode_bench probe)"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for key, label, style in (("seed", "seed: torch.mm + Triton + index-put", "s-"),
                              ("fkv_cublas", "fkv: cuBLASLt + epilogue kernel", "o-"),
                              ("fkv_fused", "fkv: decode-size kernel (T <= 64)", "^-"),
                              ("fkv", "fkv: the path it chooses", "k--")):
        xs, ys = series(doc, key)
        ax.plot(xs, ys, style, label=label, markersize=4)
    if probe:
        ax.axhline(probe, color="gray", linestyle=":", label=f"{floor_label}: {probe:.1f} µs")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per call (T)")
    ax.set_ylabel("µs per step (CUDA graph replay, median)")
    env = doc.get("environment", {})
    ax.set_title(f"KV materialization step, Qwen3-8B DFlash draft, {env.get('gpu', '?')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(f"wrote {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
