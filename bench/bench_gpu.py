#!/usr/bin/env python3
"""GPU side of the benchmark (docs/performance.md), torch + Triton, one process:
for each case of bench/cases.json: a plain copy of the case's floor bytes, the Triton
baseline (stacked) and the baseline + per-layer pool writes; once: the copy ceiling.
Copies are timed twice: torch copy_ ("copy", "copy_ceiling": cuMemcpy, the copy engines,
slower than a kernel on an H200) and a 16-byte-vector Triton copy kernel ("copy_sm",
"copy_ceiling_sm"). report.py takes its floor from fkv_bench's ceiling.

Timing method (the same as fkv_bench): `calls` back-to-back calls are captured into one CUDA
graph; one sample = one replay of that graph between two CUDA events, divided by `calls`;
the result is the median over the samples (20..200 samples, about --target-ms per
measurement). Before timing, the Triton kernel is checked against a torch eager reference.

Usage: bench_gpu.py --cases bench/cases.json --out results/bench_gpu.json
Writes the JSON after every case, so a crash leaves the finished cases behind.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton_baseline as tb  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def log(msg):
    print(f"[bench_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def floor_bytes(case, d, pool):
    """Bytes that must move (the floor of docs/performance.md): read proj K and V parts, write K and V,
    positions, slots (pool mode), cos/sin rows. Must match fkv_bench.cpp and report.py."""
    t, l = case["tokens"], case["layers"]
    kv = case["kv_heads"] * case["head_dim"]
    act = torch.tensor([], dtype=DTYPES[d["dtype"]]).element_size()
    total = t * l * 2 * kv * act  # read proj K and V
    total += t * l * 2 * kv * act  # write K and V (cache dtype = act here)
    total += t * 8  # positions, int64
    total += t * case["rotary_dim"] * 4  # cos/sin rows, fp32
    if pool:
        total += t * 8  # cache_loc, int64
    return total


def calls_per_graph(nbytes):
    return 5 if nbytes > (256 << 20) else 20


def time_graph(fn, calls, target_ms, min_samples=20, max_samples=200):
    """Median per-call GPU time in microseconds of `fn` (see the module docstring)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    method = "cuda_graph"
    graph = None
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        replay = graph.replay
    except Exception as e:  # capture failed: time eager calls instead, and say so
        log(f"  graph capture failed ({type(e).__name__}: {e}); timing eager calls")
        torch.cuda.synchronize()
        graph = None
        method = "eager"

        def replay():
            for _ in range(calls):
                fn()

    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    replay()
    end.record()
    end.synchronize()
    once_ms = max(start.elapsed_time(end), 1e-3)
    n = int(max(min_samples, min(max_samples, target_ms / once_ms)))
    samples = []
    for _ in range(n):
        start.record()
        replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    del graph
    samples.sort()
    return {
        "median_us": samples[len(samples) // 2],
        "mean_us": sum(samples) / len(samples),
        "min_us": samples[0],
        "p10_us": samples[len(samples) // 10],
        "p90_us": samples[(len(samples) * 9) // 10],
        "samples": len(samples),
        "calls_per_sample": calls,
        "method": method,
    }


def guarded(what, f):
    try:
        return f()
    except Exception as e:
        log(f"  {what} FAILED: {type(e).__name__}: {e}")
        traceback.print_exc()
        return {"error": f"{type(e).__name__}: {e}"}


SM_COPY_BLOCK = 4096  # int32 words per program: 8 warps x 16 words = 4 16-byte loads a thread


@triton.jit
def _sm_copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def sm_copy_fn(src, dst):
    """A copy on the SMs of two uint8 tensors whose size is a multiple of 64 bytes (so that the
    int32 count is a multiple of 16 and Triton keeps 16-byte vector accesses)."""
    assert src.numel() % 64 == 0 and src.numel() == dst.numel()
    s32, d32 = src.view(torch.int32), dst.view(torch.int32)
    n = s32.numel()
    grid = (triton.cdiv(n, SM_COPY_BLOCK),)

    def run():
        _sm_copy_kernel[grid](s32, d32, n, BLOCK=SM_COPY_BLOCK, num_warps=8)
    return run


def time_sm_copy(src, dst, calls, target_ms):
    """Times the Triton copy after checking that it copies (dst is cleared first)."""
    fn = sm_copy_fn(src, dst)
    dst.zero_()
    fn()
    torch.cuda.synchronize()
    if not torch.equal(src, dst):
        raise RuntimeError("the Triton copy kernel wrote wrong bytes")
    timing = time_graph(fn, calls, target_ms)
    timing["kind"] = "sm_kernel"
    timing["kernel"] = f"Triton, int32 x {SM_COPY_BLOCK} per program, 8 warps"
    timing["bytes_copied"] = src.numel()
    return timing


def copy_ceiling_sm(target_ms):
    size = 2 << 30  # 2 GiB
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    timing = time_sm_copy(src, dst, 5, target_ms)
    timing["bytes_moved"] = 2 * size  # read + write
    timing["GBps"] = 2 * size / (timing["median_us"] * 1e-6) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    return timing


def copy_ceiling(target_ms):
    size = 2 << 30  # 2 GiB
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    timing = time_graph(lambda: dst.copy_(src), calls=5, target_ms=target_ms)
    timing["bytes_copied"] = size
    timing["bytes_moved"] = 2 * size  # read + write
    timing["GBps"] = 2 * size / (timing["median_us"] * 1e-6) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    return timing


def cos_sin_cache(max_pos, rotary_dim, theta):
    half = rotary_dim // 2
    inv_freq = 1.0 / (theta ** (torch.arange(0, half, dtype=torch.float64) * 2.0 / rotary_dim))
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=1).float().cuda().contiguous()


def run_case(case, d, target_ms):
    t, l = case["tokens"], case["layers"]
    h, dim, r = case["kv_heads"], case["head_dim"], case["rotary_dim"]
    kv = h * dim
    dtype = DTYPES[d["dtype"]]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    result = {"name": case["name"], "case": case,
              "floor_bytes_stacked": floor_bytes(case, d, False),
              "floor_bytes_pool": floor_bytes(case, d, True)}

    proj = (torch.rand((t, l, 2 * kv), generator=gen, device="cuda") * 2 - 1).to(dtype)
    weight = (1.0 + 0.1 * (torch.rand((l, dim), generator=gen, device="cuda") * 2 - 1)).float()
    eps = torch.full((l,), float(d["eps"]), dtype=torch.float32, device="cuda")
    max_pos = int(d["max_position"])
    cos_sin = cos_sin_cache(max_pos, r, float(d["rope_theta"]))
    positions = torch.randint(0, max_pos, (t,), generator=gen, device="cuda", dtype=torch.int64)
    cache_loc = torch.randperm(t, generator=gen, device="cuda", dtype=torch.int64)
    k_out = torch.empty((l, t, h, dim), dtype=dtype, device="cuda")
    v_out = torch.empty_like(k_out)
    k_pool = [torch.zeros((t, h, dim), dtype=dtype, device="cuda") for _ in range(l)]
    v_pool = [torch.zeros((t, h, dim), dtype=dtype, device="cuda") for _ in range(l)]
    args = (proj, weight, eps, cos_sin, positions, h, dim, r)

    # Correctness first (also compiles the Triton kernel outside any graph capture).
    def check():
        tb.triton_pool(*args, k_out, v_out, cache_loc, k_pool, v_pool)
        torch.cuda.synchronize()
        k_ref, v_ref = tb.reference(*args, dtype)
        ok_k, err_k, _ = tb.compare("k", k_out, k_ref)
        ok_v = bool(torch.equal(v_out, v_ref))
        ok_pool = all(torch.equal(k_pool[i][cache_loc], k_out[i]) and
                      torch.equal(v_pool[i][cache_loc], v_out[i]) for i in range(l))
        del k_ref, v_ref
        return {"ok": ok_k and ok_v and ok_pool, "k_max_abs_err": err_k, "k_ok": ok_k,
                "v_exact": ok_v, "pool_ok": ok_pool, "tolerance": "atol 2e-2 + rtol 2e-2"}

    result["check"] = guarded("check", check)
    log(f"  check: {result['check']}")

    calls = calls_per_graph(result["floor_bytes_stacked"])
    copy_n = (result["floor_bytes_stacked"] // 2) // 16 * 16
    src = torch.empty(copy_n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(3)
    result["copy"] = guarded("copy", lambda: time_graph(lambda: dst.copy_(src), calls, target_ms))
    result["copy"]["bytes_copied"] = copy_n
    sm_n = copy_n // 64 * 64
    result["copy_sm"] = guarded("copy_sm", lambda: time_sm_copy(src[:sm_n], dst[:sm_n], calls,
                                                                 target_ms))
    del src, dst
    log(f"  copy of {copy_n} B: torch copy_ {result['copy'].get('median_us', 'n/a')} us, "
        f"Triton copy {result['copy_sm'].get('median_us', 'n/a')} us")

    result["triton"] = guarded("triton", lambda: time_graph(
        lambda: tb.triton_stacked(*args, k_out, v_out), calls, target_ms))
    log(f"  triton stacked: {result['triton'].get('median_us', 'n/a')} us")
    result["triton_pool"] = guarded("triton_pool", lambda: time_graph(
        lambda: tb.triton_pool(*args, k_out, v_out, cache_loc, k_pool, v_pool), calls,
        target_ms))
    log(f"  triton + pool writes: {result['triton_pool'].get('median_us', 'n/a')} us")

    del proj, weight, eps, cos_sin, positions, cache_loc, k_out, v_out, k_pool, v_pool, args
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return result


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=os.path.join(here, "cases.json"))
    ap.add_argument("--out", required=True, help="JSON result file")
    ap.add_argument("--target-ms", type=float, default=400.0,
                    help="about how long each measurement samples (ms)")
    ap.add_argument("--only", action="append", default=[], help="run only these case names")
    a = ap.parse_args()

    with open(a.cases) as f:
        spec = json.load(f)
    d = spec["defaults"]
    if not torch.cuda.is_available():
        log("error: torch sees no CUDA device")
        return 2
    props = torch.cuda.get_device_properties(0)
    out = {
        "tool": "bench_gpu.py",
        "command": " ".join(["python3"] + sys.argv),
        "device": props.name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "method": "median over CUDA-graph replays; each replay = calls_per_sample back-to-back "
                  "calls between two CUDA events; reported per call",
        "defaults": d,
        "cases": [],
    }

    def save():
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, a.out)

    log(f"device {props.name}, torch {torch.__version__}, triton {triton.__version__}")
    log("copy ceiling (2 GiB device-to-device copy)")
    out["copy_ceiling"] = guarded("copy ceiling", lambda: copy_ceiling(a.target_ms))
    log(f"  copy ceiling: {out['copy_ceiling'].get('GBps', float('nan')):.1f} GB/s")
    out["copy_ceiling_sm"] = guarded("Triton copy ceiling", lambda: copy_ceiling_sm(a.target_ms))
    log(f"  Triton copy kernel: {out['copy_ceiling_sm'].get('GBps', float('nan')):.1f} GB/s")
    save()

    cases = [c for c in spec["cases"] if not a.only or c["name"] in a.only]
    for i, case in enumerate(cases):
        log(f"case {i + 1}/{len(cases)}: {case['name']}")
        t0 = time.time()
        res = guarded(case["name"], lambda: run_case(case, d, a.target_ms))
        res.setdefault("name", case["name"])
        res["wall_s"] = time.time() - t0
        out["cases"].append(res)
        save()
    failed = [c["name"] for c in out["cases"]
              if "error" in c or not c.get("check", {}).get("ok", False)]
    log(f"done, results in {a.out}" + (f"; problems in: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
