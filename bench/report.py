#!/usr/bin/env python3
"""Merges fkv_bench JSON and bench_gpu.py JSON into the markdown tables of
docs/performance.md, and plots achieved bandwidth vs tokens (docs/bandwidth.png).

Usage: report.py --fkv fkv_bench.json [--fkv more.json ...] [--gpu bench_gpu.json]
                 --md tables.md [--plot bw.png]
Either input may be partial (a run that stopped early): missing numbers print as "n/a".
Floor = bytes that must move / copy ceiling (docs/performance.md); the floor bytes come from the
JSON (the same formula in fkv_bench.cpp and bench_gpu.py). The ceiling is the larger of
fkv_bench's SM copy kernel and its cuMemcpyDtoDAsync (the copy engines are slower on an H200);
"copy" (and fkv/copy) is the SM copy kernel; the memcpy figures are extra columns. JSON from
before the SM copy kernel (its "copy" entries have no "kind") counts as memcpy only.
With several --fkv files (a tuning sweep, each run with --tag), the first one feeds the usual
tables and a "tuning sweep" table compares fkv stacked time and fkv/copy across all of them.
"""

import argparse
import json
import os
import sys

NA = "n/a"


def load(path):
    if not path:
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"report.py: cannot read {path}: {e}", file=sys.stderr)
        return {}


def med(entry, key):
    """Median µs of a timing entry, or None."""
    if not isinstance(entry, dict):
        return None
    t = entry.get(key)
    if isinstance(t, dict) and isinstance(t.get("median_us"), (int, float)):
        return float(t["median_us"])
    return None


def num(x, fmt="{:.2f}"):
    return NA if x is None else fmt.format(x)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def yes_no(check):
    if not isinstance(check, dict):
        return NA
    if "error" in check:
        return "error"
    return "ok" if check.get("ok") else "FAIL"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def command_block(*commands):
    cmds = [c for c in commands if c]
    if not cmds:
        return "Command: (not recorded)\n"
    return "Command:\n\n```\n" + "\n".join(cmds) + "\n```\n"


def sm_entry(d, key):
    """d[key] when it was measured with the SM copy kernel (kind "sm_kernel"), else {}."""
    e = d.get(key)
    return e if isinstance(e, dict) and e.get("kind") == "sm_kernel" else {}


def memcpy_entry(d, key, memcpy_key):
    """The memcpy figure: d[memcpy_key], or d[key] from JSON older than the SM copy kernel."""
    e = d.get(memcpy_key)
    if isinstance(e, dict):
        return e
    e = d.get(key)
    return e if isinstance(e, dict) and "kind" not in e else {}


def gbps(entry):
    x = (entry or {}).get("GBps")
    return float(x) if isinstance(x, (int, float)) else None


def fkv_ceilings(fkv):
    """(SM kernel GB/s, memcpy GB/s) of fkv_bench's 2 GiB copy, None where missing."""
    return (gbps(sm_entry(fkv, "copy_ceiling")),
            gbps(memcpy_entry(fkv, "copy_ceiling", "copy_ceiling_memcpy")))


def ceiling_Bps(fkv, gpu):
    """The floor's bandwidth: max(SM kernel, memcpy) of fkv_bench; bench_gpu's if it has none."""
    xs = [x for x in fkv_ceilings(fkv) if x is not None]
    if not xs:
        xs = [x for x in (gbps(gpu.get("copy_ceiling_sm")), gbps(gpu.get("copy_ceiling")))
              if x is not None]
    return max(xs) * 1e9 if xs else None


def copy_sm_us(f, g):
    """Per-case SM-kernel copy: fkv_bench's, else bench_gpu's Triton copy."""
    x = med({"c": sm_entry(f, "copy")}, "c")
    return x if x is not None else med(g, "copy_sm")


def copy_memcpy_us(f, g):
    """Per-case memcpy copy: fkv_bench's cuMemcpyDtoDAsync, else bench_gpu's torch copy_."""
    x = med({"c": memcpy_entry(f, "copy", "copy_memcpy")}, "c")
    return x if x is not None else med(g, "copy")


def case_rows(fkv, gpu):
    """Joined per-case records in the order of fkv_bench (else bench_gpu)."""
    f_cases = {c.get("name"): c for c in fkv.get("cases", [])}
    g_cases = {c.get("name"): c for c in gpu.get("cases", [])}
    names = [c.get("name") for c in fkv.get("cases", [])]
    names += [n for n in (c.get("name") for c in gpu.get("cases", [])) if n not in names]
    cases = {}
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json")) as f:
            cases = {c["name"]: c for c in json.load(f)["cases"]}
    except (OSError, ValueError, KeyError):
        pass
    rows = []
    for n in names:
        f = f_cases.get(n, {})
        g = g_cases.get(n, {})
        case = cases.get(n) or g.get("case") or {}
        floor_b = f.get("floor_bytes_stacked") or g.get("floor_bytes_stacked")
        floor_pool_b = f.get("floor_bytes_pool") or g.get("floor_bytes_pool")
        rows.append({"name": n, "case": case, "f": f, "g": g, "floor_b": floor_b,
                     "floor_pool_b": floor_pool_b})
    return rows


def kernel_tables(fkv, gpu, run_cmd):
    ceil = ceiling_Bps(fkv, gpu)
    out = []
    out.append("### Kernel time per call (median µs, CUDA-graph replays)\n")
    out.append(command_block(run_cmd, fkv.get("command"), gpu.get("command")))
    sm_c, memcpy_c = fkv_ceilings(fkv)
    cg = gbps(gpu.get("copy_ceiling"))
    cg_sm = gbps(gpu.get("copy_ceiling_sm"))
    out.append(f"Device: {fkv.get('device') or gpu.get('device') or NA}. "
               f"Copy ceiling (2 GiB D2D copy, read + write): fkv_bench SM copy kernel "
               f"{num(sm_c, '{:.0f}')} GB/s, cuMemcpyDtoDAsync {num(memcpy_c, '{:.0f}')} GB/s; "
               f"torch copy_ {num(cg, '{:.0f}')} GB/s, Triton copy kernel "
               f"{num(cg_sm, '{:.0f}')} GB/s; the floor uses "
               f"{num(ceil / 1e9 if ceil else None, '{:.0f}')} GB/s (the larger fkv_bench "
               "figure). Copy = fkv_bench's SM copy kernel (16-byte words, grid-stride) moving "
               "the case's floor bytes (floor/2 copied), timed the same way in the fkv_bench "
               "process; memcpy = cuMemcpyDtoDAsync of the same bytes (copy engines). "
               "Triton = our seed-style baseline "
               "(bench/triton_baseline.py), stacked output; + pool = the seed's per-layer "
               "index-put copies into the pool after it.\n")
    header = ["case", "floor MB", "floor µs", "copy µs", "memcpy µs", "fkv µs", "fkv pool µs",
              "Triton µs", "Triton+pool µs", "fkv/floor", "fkv/copy", "fkv/Triton",
              "fkv pool/(Triton+pool)", "copy/floor"]
    rows = []
    for r in case_rows(fkv, gpu):
        f, g = r["f"], r["g"]
        floor_us = r["floor_b"] / ceil * 1e6 if (r["floor_b"] and ceil) else None
        floor_pool_us = r["floor_pool_b"] / ceil * 1e6 if (r["floor_pool_b"] and ceil) else None
        copy_us = copy_sm_us(f, g)
        fkv_us, fkv_pool_us = med(f, "fkv_stacked"), med(f, "fkv_pool")
        tri_us, tri_pool_us = med(g, "triton"), med(g, "triton_pool")
        del floor_pool_us  # pool floors differ by T*8 bytes: shown in the JSON only
        rows.append([
            r["name"], num(r["floor_b"] / 1e6 if r["floor_b"] else None, "{:.3f}"),
            num(floor_us), num(copy_us), num(copy_memcpy_us(f, g)), num(fkv_us),
            num(fkv_pool_us), num(tri_us), num(tri_pool_us), num(ratio(fkv_us, floor_us)),
            num(ratio(fkv_us, copy_us)), num(ratio(fkv_us, tri_us)),
            num(ratio(fkv_pool_us, tri_pool_us)), num(ratio(copy_us, floor_us)),
        ])
    out.append(table(header, rows))
    out.append("")

    out.append("### Correctness checks run before timing\n")
    out.append(command_block(fkv.get("command"), gpu.get("command")))
    out.append("fkv: 256 random (token, layer, head) rows recomputed on the host in float64 "
               "(atol 2e-2 + rtol 1e-2, V bit-exact). Triton: whole output vs the torch eager "
               "reference (atol 2e-2 + rtol 2e-2, V bit-exact, pool rows equal to the stacked "
               "output).\n")
    rows = []
    for r in case_rows(fkv, gpu):
        f, g = r["f"], r["g"]
        rows.append([
            r["name"], yes_no(f.get("check_stacked")), yes_no(f.get("check_pool")),
            num((f.get("check_stacked") or {}).get("k_max_abs_err"), "{:.2e}"),
            yes_no(g.get("check")), num((g.get("check") or {}).get("k_max_abs_err"), "{:.2e}"),
            f.get("error") or g.get("error") or "",
        ])
    out.append(table(["case", "fkv stacked", "fkv pool", "fkv K max err", "Triton",
                      "Triton K max err", "error"], rows))
    out.append("")

    out.append("### Achieved bandwidth (floor bytes / time, GB/s)\n")
    out.append(command_block(run_cmd, fkv.get("command"), gpu.get("command")))
    rows = []
    for r in case_rows(fkv, gpu):
        f, g, b = r["f"], r["g"], r["floor_b"]

        def bw(us, nbytes=b):
            return None if (us is None or not nbytes) else nbytes / (us * 1e-6) / 1e9

        rows.append([r["name"], (r["case"] or {}).get("tokens", NA),
                     num(bw(copy_sm_us(f, g)), "{:.0f}"), num(bw(copy_memcpy_us(f, g)), "{:.0f}"),
                     num(bw(med(f, "fkv_stacked")), "{:.0f}"),
                     num(bw(med(f, "fkv_pool"), r["floor_pool_b"]), "{:.0f}"),
                     num(bw(med(g, "triton")), "{:.0f}"),
                     num(bw(med(g, "triton_pool"), r["floor_pool_b"]), "{:.0f}")])
    out.append(table(["case", "tokens", "copy", "memcpy", "fkv", "fkv pool", "Triton",
                      "Triton+pool"], rows))
    out.append("")
    return "\n".join(out)


def launch_table(fkv):
    la = fkv.get("launch")
    if not la:
        return ""
    out = ["### Host cost per launch (µs per call)\n", command_block(fkv.get("command"))]
    if "error" in la:
        return "\n".join(out + [f"error: {la['error']}\n"])
    out.append(f"Case {la.get('case')}, {la.get('calls_per_method')} calls per method in chunks "
               f"of {la.get('chunk')} back-to-back calls timed on the host (steady_clock), the "
               "stream drained between chunks (untimed). materialize_stacked = host checks + "
               "parameter block + launch; fkv::launch = the runtime's launch wrapper with a "
               "prebuilt block; bare = cuLaunchKernel with a prebuilt block.\n")
    rows = []
    for k in ("materialize_stacked", "fkv_launch", "bare_cuLaunchKernel"):
        e = la.get(k) or {}
        rows.append([k, num(e.get("median_us_per_call"), "{:.3f}"),
                     num(e.get("min_us_per_call"), "{:.3f}"),
                     num(e.get("mean_us_per_call"), "{:.3f}")])
    out.append(table(["call", "median", "min", "mean"], rows))
    out.append(f"\nmaterialize_stacked − bare: "
               f"{num(la.get('materialize_minus_bare_us'), '{:.3f}')} µs per call; output after "
               f"the bare launches: {yes_no(la.get('bare_launch_output_check'))}.\n")
    return "\n".join(out)


def compile_tables(fkv):
    comp = fkv.get("compile") or {}
    out = []
    if comp.get("variants"):
        out.append("### Compile and cache, per kernel variant (ms)\n")
        out.append(command_block(fkv.get("command")))
        out.append(f"Arch {fkv.get('arch', NA)}, NVRTC {fkv.get('nvrtc', NA)}. nvrtc cold = "
                   "fkv::compile (median of the runs); cache miss = KernelCache::get on an empty "
                   "directory (compile + publish); disk hit = a new KernelCache on the same "
                   "directory; memory hit = the same KernelCache again.\n")
        rows = []
        for v in comp["variants"]:
            if "error" in v:
                rows.append([v.get("kernel"), "error: " + v["error"], "", "", "", "", ""])
                continue
            rows.append([v.get("kernel"), num(v.get("codegen_ms"), "{:.2f}"),
                         num((v.get("nvrtc_cold_ms") or {}).get("median"), "{:.1f}"),
                         num(v.get("cache_miss_ms"), "{:.1f}"), num(v.get("disk_hit_ms"), "{:.3f}"),
                         num(v.get("memory_hit_ms"), "{:.4f}"),
                         v.get("image_bytes", NA)])
        out.append(table(["variant", "codegen", "nvrtc cold", "cache miss", "disk hit",
                          "memory hit", "CUBIN bytes"], rows))
        out.append("")
    if comp.get("configs"):
        out.append("### Precompile of every variant a config needs (ms)\n")
        out.append(command_block(fkv.get("command")))
        out.append("Variants = layer groups of the grouped plan × {stacked, pool} in the "
                   "config's dtype (what `fkv-jit precompile CONFIG` builds), into an empty "
                   "cache directory; sequential, then one thread per variant.\n")
        rows = []
        for c in comp["configs"]:
            if "error" in c:
                rows.append([c.get("config"), "—", "—", "—", "not fused-KV capable"])
            else:
                rows.append([c.get("config"), c.get("variants"),
                             num(c.get("sequential_ms"), "{:.0f}"),
                             num(c.get("parallel_ms"), "{:.0f}"), ""])
        out.append(table(["config", "variants", "sequential", "parallel", "note"], rows))
        out.append("")
    ld = fkv.get("load")
    if ld:
        out.append("### Compile + load and first launch on the GPU (ms)\n")
        out.append(command_block(fkv.get("command")))
        if "error" in ld:
            out.append(f"error: {ld['error']}\n")
        else:
            out.append(f"Kernel {ld.get('kernel')}; fresh cache directory and fresh "
                       "fkv::Runtime each time.\n")
            out.append(table(["figure", "ms"], [
                ["cold: prepare (NVRTC compile + publish + cuModuleLoadData)",
                 num(ld.get("cold_compile_load_ms"), "{:.1f}")],
                ["cold: first launch + sync after it", num(ld.get("cold_then_first_launch_ms"), "{:.2f}")],
                ["memory hit: prepare again, same runtime", num(ld.get("memory_hit_prepare_ms"), "{:.4f}")],
                ["warm: prepare from the disk cache (new cache + runtime)",
                 num(ld.get("warm_disk_prepare_ms"), "{:.2f}")],
                ["warm first launch: prepare (disk) + launch + sync",
                 num(ld.get("warm_first_launch_ms"), "{:.2f}")],
            ]))
            out.append("")
    return "\n".join(out)


def targets_table(fkv, gpu):
    """The performance targets (docs/performance.md), measured."""
    rows = []
    for r in case_rows(fkv, gpu):
        c = r["case"] or {}
        if c.get("tokens", 0) >= 4096:
            q = ratio(med(r["f"], "fkv_stacked"), copy_sm_us(r["f"], r["g"]))
            rows.append([f"fkv ≤ 1.1× copy, {r['name']}", num(q), NA if q is None else
                         ("pass" if q <= 1.1 else "miss")])
    for r in case_rows(fkv, gpu):
        c = r["case"] or {}
        if c.get("tokens") == 8 and c.get("layers") == 5:
            us = med(r["f"], "fkv_stacked")
            rows.append([f"decode call ≤ 5 µs GPU, {r['name']}", num(us),
                         NA if us is None else ("pass" if us <= 5 else "miss")])
    la = fkv.get("launch") or {}
    d = la.get("materialize_minus_bare_us")
    rows.append(["host cost within 1 µs of bare cuLaunchKernel", num(d, "{:.3f}"),
                 NA if d is None else ("pass" if d <= 1 else "miss")])
    ld = fkv.get("load") or {}
    x = ld.get("cold_compile_load_ms")
    rows.append(["cold compile + load ≤ 150 ms", num(x, "{:.1f}"),
                 NA if x is None else ("pass" if x <= 150 else "miss")])
    x = ld.get("warm_first_launch_ms")
    rows.append(["warm first launch ≤ 2 ms", num(x, "{:.2f}"),
                 NA if x is None else ("pass" if x <= 2 else "miss")])
    pre = [c.get("parallel_ms") for c in (fkv.get("compile") or {}).get("configs", [])
           if isinstance(c.get("parallel_ms"), (int, float))]
    x = max(pre) if pre else None
    rows.append(["precompile of a config ≤ 1 s (worst config, parallel)", num(x, "{:.0f}"),
                 NA if x is None else ("pass" if x <= 1000 else "miss")])
    return "### Performance targets\n\n" + table(["target", "measured", "result"], rows) + "\n"


def sweep_label(doc, path, used):
    label = doc.get("tag") or os.path.splitext(os.path.basename(path))[0]
    base, n = label, 2
    while label in used:
        label, n = f"{base} ({n})", n + 1
    used.add(label)
    return label


def sweep_table(docs):
    """One row per case, one column per fkv_bench file (its --tag): fkv stacked µs and
    fkv/copy (the SM copy kernel of the same run)."""
    used, cols, names = set(), [], []
    for path, doc in docs:
        cols.append((sweep_label(doc, path, used), doc))
        for c in doc.get("cases", []):
            if c.get("name") not in names:
                names.append(c.get("name"))
    if not names:
        return ""
    rows = []
    for n in names:
        row = [n]
        for _, doc in cols:
            f = next((c for c in doc.get("cases", []) if c.get("name") == n), {})
            us = med(f, "fkv_stacked")
            q = ratio(us, copy_sm_us(f, {}))
            row.append(NA if us is None else f"{us:.2f}" if q is None else f"{us:.2f} ({q:.2f}×)")
        rows.append(row)
    out = ["### Tuning sweep: fkv stacked µs (fkv/copy)\n",
           command_block(*[doc.get("command") for _, doc in cols]),
           "One column per fkv_bench run (its --tag, else the file name); each ratio uses the "
           "SM copy kernel timed in the same run.\n",
           table(["case"] + [label for label, _ in cols], rows), ""]
    return "\n".join(out)


def plot(fkv, gpu, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"report.py: no plot ({e})", file=sys.stderr)
        return False
    series = {"fkv-jit (stacked)": (lambda r: med(r["f"], "fkv_stacked"), "floor_b", "o-"),
              "fkv-jit (pool)": (lambda r: med(r["f"], "fkv_pool"), "floor_pool_b", "o--"),
              "Triton baseline (stacked)": (lambda r: med(r["g"], "triton"), "floor_b", "s-"),
              "Triton + per-layer pool writes": (lambda r: med(r["g"], "triton_pool"),
                                                 "floor_pool_b", "s--"),
              "copy kernel, same bytes": (lambda r: copy_sm_us(r["f"], r["g"]), "floor_b", "^:"),
              "memcpy, same bytes": (lambda r: copy_memcpy_us(r["f"], r["g"]), "floor_b",
                                     "v:")}
    sweep = [r for r in case_rows(fkv, gpu) if (r["case"] or {}).get("sweep")]
    if not sweep:
        print("report.py: no sweep cases to plot", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (get_us, bytes_key, style) in series.items():
        xs, ys = [], []
        for r in sweep:
            us = get_us(r)
            if us is not None and r[bytes_key]:
                xs.append(r["case"]["tokens"])
                ys.append(r[bytes_key] / (us * 1e-6) / 1e9)
        if xs:
            ax.plot(xs, ys, style, label=label)
    ceil = ceiling_Bps(fkv, gpu)
    if ceil:
        ax.axhline(ceil / 1e9, color="gray", linewidth=0.8, linestyle="-.",
                   label=f"copy ceiling ({ceil / 1e9:.0f} GB/s)")
    c0 = sweep[0]["case"]
    ax.set_xscale("log", base=2)
    ticks = sorted({r["case"]["tokens"] for r in sweep})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(x) for x in ticks])
    ax.set_xlabel("tokens")
    ax.set_ylabel("achieved bandwidth, floor bytes / time (GB/s)")
    ax.set_title(f"{c0.get('layers')} layers × {c0.get('kv_heads')} KV heads × head_dim "
                 f"{c0.get('head_dim')}, bf16, K norm + RoPE\n"
                 f"{fkv.get('device') or gpu.get('device') or ''}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"report.py: wrote {path}", file=sys.stderr)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fkv", action="append", default=[],
                    help="fkv_bench JSON; repeat for a tuning sweep (the first feeds the tables)")
    ap.add_argument("--gpu", help="bench_gpu.py JSON")
    ap.add_argument("--md", required=True, help="markdown output")
    ap.add_argument("--plot", help="PNG output (needs matplotlib)")
    ap.add_argument("--run-command", default=os.environ.get("FKV_BENCH_RUN_COMMAND", ""),
                    help="the command that produced both JSON files (bench/run_all.sh ...)")
    a = ap.parse_args()
    docs = [(p, load(p)) for p in a.fkv]
    fkv = docs[0][1] if docs else {}
    gpu = load(a.gpu)
    parts = [f"<!-- generated by {' '.join(['bench/report.py'] + sys.argv[1:])} -->\n"]
    if fkv.get("cases") or gpu.get("cases"):
        parts.append(kernel_tables(fkv, gpu, a.run_command))
    if len(docs) > 1:
        parts.append(sweep_table(docs))
    parts.append(launch_table(fkv))
    parts.append(compile_tables(fkv))
    parts.append(targets_table(fkv, gpu))
    md = "\n".join(p for p in parts if p)
    with open(a.md, "w") as f:
        f.write(md)
    print(f"report.py: wrote {a.md}", file=sys.stderr)
    if a.plot:
        try:
            plot(fkv, gpu, a.plot)
        except Exception as e:  # the tables are written already; a plot problem must not hide them
            print(f"report.py: plot failed: {type(e).__name__}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
