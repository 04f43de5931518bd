#!/usr/bin/env python3
"""End-to-end benchmark (issue 5 item 8): the whole KV materialization step of a Qwen3-8B
DFlash draft (5 layers, hidden 4096, 8 KV heads, head_dim 128, RMS K norm, neox RoPE theta 1e6,
bf16), from ctx_hidden to the KV pool, for T = 8, 64, 512, 4096, 16384 context tokens.

Three paths, each timed eager and as a CUDA graph:
  fkv   fkv_jit.FusedKVMaterializeHelper.materialize_to_pool (the installed wheel), one call
        into the compiled binding: up to the helper's decode_crossover tokens one decode-size
        launch (projection + epilogue, docs/decode.md), above it one cuBLASLt GEMM for all
        layers, then one fused norm + RoPE + KV-write launch straight into the pool;
  fkv_api  the seed-shaped fkv_jit call materialize(ctx_hidden, positions, write_layer_kv),
        with a write_layer_kv that does the same per-layer index-put as the seed path;
  seed  what serving engines run today: torch.mm into proj [T, L*2*KV], the Triton baseline
        stacked kernel (bench/triton_baseline.py) into k_out/v_out [L, T, H, D], then per-layer
        index-put copies k_pool[l][cache_loc] = k_out[l] (and v).
All paths use the same weights, inputs and fp32 cos/sin table [32768, 128]. For the table of
step time against T, two more helpers force one path each (graph only): cuBLASLt + epilogue
(decode_crossover=0) and the decode-size kernel (decode_crossover=64).

Before timing, each T checks that the two paths leave the same pools (K within 2e-2 abs/rel,
V bit-exact on the cuBLASLt path and within one bf16 ulp on the decode path, untouched slots
zero) and that both match a torch eager reference on the written rows; the result is reported
as ok / FAIL per T (timing still runs after a FAIL).

Timing: eager = one call between two CUDA events, synchronized after each call (so launch and
Python overhead count when the GPU would otherwise wait), median over 50..200 calls after
warm-up. graph = one call captured into a torch.cuda.CUDAGraph, one replay between two events,
median over 50..200 replays after warm-up. "gemm" is the projection GEMM alone (graph), for
context. speedup = seed / fkv. Host-cost targets (issue 10), reported per T: fkv eager <=
fkv graph + 8 us, and fkv_api eager <= seed eager / 1.5. Last, the host time of single calls at
T=8 with an idle GPU (synchronize, perf_counter around the call): where eager time goes.

    pip install dist/fkv_jit-*.whl    # the wheel, not the source tree
    python3 bench/e2e_bench.py --out e2e.json --md e2e.md

Writes the JSON (and markdown) after every T, so a crash leaves the finished sizes behind.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # triton_baseline

import torch  # noqa: E402

LAYERS = 5
HIDDEN = 4096
KV_HEADS = 8
HEAD_DIM = 128
ROTARY_DIM = 128
THETA = 1e6
EPS = 1e-6
MAX_POS = 32768
DTYPE = torch.bfloat16
DEFAULT_TOKENS = [8, 64, 512, 4096, 16384]


def log(msg):
    print(f"[e2e_bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def draft_config():
    """Qwen3-8B DFlash draft in fkv's explicit per-layer schema (as tests/gpu/test_python_gpu.py)."""
    layer = {"num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "rotary_dim": ROTARY_DIM,
             "is_neox_style": True, "rope_theta": THETA, "k_norm": "rms", "eps": EPS}
    return {"hidden_size": HIDDEN, "max_position_embeddings": MAX_POS,
            "fkv": {"layers": [dict(layer) for _ in range(LAYERS)]}}


def cos_sin_table(dev):
    """fp32 [MAX_POS, R]: cos in columns [0, R/2), sin in [R/2, R); float64 math, rounded once."""
    half = ROTARY_DIM // 2
    inv_freq = THETA ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / ROTARY_DIM)
    ang = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([ang.cos(), ang.sin()], dim=1).float().to(dev).contiguous()


# ---- timing ----------------------------------------------------------------------------------

def _reps(once_ms, target_ms, lo=50, hi=200):
    return int(max(lo, min(hi, target_ms / max(once_ms, 1e-3))))


def _median_samples(step, target_ms):
    """Median (us) of `step` timed alone between two CUDA events, synchronized each time."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    step()
    end.record()
    end.synchronize()
    n = _reps(start.elapsed_time(end), target_ms)
    samples = []
    for _ in range(n):
        start.record()
        step()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    samples.sort()
    return {"median_us": samples[len(samples) // 2], "min_us": samples[0],
            "p90_us": samples[(len(samples) * 9) // 10], "samples": n}


def warm_up(fn, n=3):
    """A few calls on a side stream (cuBLAS workspaces, Triton/NVRTC loading) before capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def time_eager(fn, target_ms):
    for _ in range(5):
        fn()
    return _median_samples(fn, target_ms)


def time_eager_interleaved(fns, target_ms):
    """Eager timing of several steps called in turn (a, b, a, b, ...), each between its own two
    CUDA events: host-bound steps then see the same host conditions (clocks, caches, other
    load), so their ratio is steadier than that of two separate runs. Median per step."""
    for _ in range(5):
        for fn in fns:
            fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for fn in fns:
        fn()
    end.record()
    end.synchronize()
    n = _reps(start.elapsed_time(end) / len(fns), target_ms)
    samples = [[] for _ in fns]
    for _ in range(n):
        for fn, out in zip(fns, samples):
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e3)
    result = []
    for out in samples:
        out.sort()
        result.append({"median_us": out[len(out) // 2], "min_us": out[0],
                       "p90_us": out[(len(out) * 9) // 10], "samples": n, "interleaved": True})
    return result


# Calls captured per CUDA graph (--calls-per-graph): 1 = one call per replay, launch latency of
# the replay included (what an engine replaying one graph per step sees); more = back-to-back
# calls in one replay, divided by their number (GPU time per step, as bench/decode_bench).
CALLS_PER_GRAPH = 1


def time_graph(fn, target_ms):
    warm_up(fn)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    torch.cuda.synchronize()
    for _ in range(5):
        graph.replay()
    try:
        r = _median_samples(graph.replay, target_ms)
        for k in ("median_us", "min_us", "p90_us"):
            r[k] /= CALLS_PER_GRAPH
        r["calls_per_graph"] = CALLS_PER_GRAPH
        return r
    finally:
        torch.cuda.synchronize()
        del graph


def guarded(what, f):
    """f(), or None after printing the error (one failure must not end the run)."""
    try:
        return f()
    except Exception as e:  # noqa: BLE001 - report and go on
        log(f"  {what} FAILED: {type(e).__name__}: {e}")
        traceback.print_exc()
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky CUDA error: the next step reports it
            pass
        return {"error": f"{type(e).__name__}: {e}"}


# ---- one size --------------------------------------------------------------------------------

class Setup:
    """Weights, helper, cos/sin: shared by every T."""

    def __init__(self, fkv_jit, dev, seed):
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.dev = dev
        self.gen = gen
        kv = KV_HEADS * HEAD_DIM
        self.w = [(torch.randn(2 * kv, HIDDEN, generator=gen) * HIDDEN ** -0.5)
                  .to(device=dev, dtype=DTYPE).contiguous() for _ in range(LAYERS)]
        self.knw = [(torch.randn(HEAD_DIM, generator=gen) * 0.5 + 1.0).to(dev)
                    for _ in range(LAYERS)]
        self.cos_sin = cos_sin_table(dev)
        t0 = time.time()
        # Weights packed, (1+w) folded, cos/sin built and kernels loaded here, once.
        self.helper = fkv_jit.FusedKVMaterializeHelper(draft_config(), self.w, self.knw,
                                                       max_position=MAX_POS, max_tokens=max(DEFAULT_TOKENS))
        log(f"fkv helper ready in {time.time() - t0:.2f} s; decode-size kernel for 1.."
            f"{self.helper.decode_crossover} tokens")
        # The two paths forced, for the step-time-against-T table: cuBLASLt + epilogue at every
        # T, and the decode-size kernel up to 64 tokens (per 64 above).
        self.helper_cublas = fkv_jit.FusedKVMaterializeHelper(
            draft_config(), self.w, self.knw, max_position=MAX_POS,
            max_tokens=max(DEFAULT_TOKENS), decode_crossover=0)
        self.helper_fused = fkv_jit.FusedKVMaterializeHelper(
            draft_config(), self.w, self.knw, max_position=MAX_POS,
            max_tokens=max(DEFAULT_TOKENS), decode_crossover=64)
        # The seed path's operands: the same weights concatenated, [L*2*KV, HIDDEN].
        self.w_all = torch.cat(self.w, dim=0).contiguous()
        self.k_norm = torch.stack([w.float() for w in self.knw]).contiguous()  # [L, D]
        self.eps = torch.full((LAYERS,), EPS, dtype=torch.float32, device=dev)


def run_size(s, tb, T, target_ms):
    dev = s.dev
    kv = KV_HEADS * HEAD_DIM
    num_slots = max(2 * T, 1024)
    res = {"tokens": T, "num_slots": num_slots}

    ctx = torch.randn(T, HIDDEN, generator=s.gen).to(device=dev, dtype=DTYPE)
    positions = torch.randint(0, MAX_POS, (T,), generator=s.gen, dtype=torch.int64).to(dev)
    cache_loc = torch.randperm(num_slots, generator=s.gen)[:T].to(dev, torch.int64).contiguous()

    def pools():
        k = [torch.zeros(num_slots, KV_HEADS, HEAD_DIM, dtype=DTYPE, device=dev)
             for _ in range(LAYERS)]
        return k, [torch.zeros_like(b) for b in k]

    kp_a, vp_a = pools()
    kp_b, vp_b = pools()
    kp_c, vp_c = pools()
    k_out = torch.empty(LAYERS, T, KV_HEADS, HEAD_DIM, dtype=DTYPE, device=dev)
    v_out = torch.empty_like(k_out)

    def fkv_step():
        s.helper.materialize_to_pool(ctx, positions, cache_loc, kp_a, vp_a)

    def seed_step():
        proj = torch.mm(ctx, s.w_all.t()).view(T, LAYERS, 2 * kv)
        tb.triton_stacked(proj, s.k_norm, s.eps, s.cos_sin, positions, KV_HEADS, HEAD_DIM,
                          ROTARY_DIM, k_out, v_out)
        for l in range(LAYERS):
            kp_b[l][cache_loc] = k_out[l]
            vp_b[l][cache_loc] = v_out[l]

    def write_layer_kv(layer, k, v):
        kp_c[layer][cache_loc] = k
        vp_c[layer][cache_loc] = v

    def fkv_api_step():
        s.helper.materialize(ctx, positions, write_layer_kv)

    def gemm_step():
        torch.mm(ctx, s.w_all.t())

    kp_d, vp_d = pools()

    def cublas_step():
        s.helper_cublas.materialize_to_pool(ctx, positions, cache_loc, kp_d, vp_d)

    def fused_step():
        s.helper_fused.materialize_to_pool(ctx, positions, cache_loc, kp_d, vp_d)

    fused_steps = (("fkv_cublas", cublas_step),) + ((("fkv_fused", fused_step),) if T <= 64 else ())

    decode = T <= s.helper.decode_crossover  # which path fkv_step takes
    res["fkv_path"] = "decode kernel" if decode else "cuBLASLt + epilogue"

    def v_same(a, b, v64=None):
        """V on the cuBLASLt path: bit for bit the bf16 projection, as the seed's (both come from
        a bf16 GEMM result passed through). On the decode path V is rounded once from the
        kernel's fp32 sums, so it is compared with the float64 projection instead (torch.mm may
        reduce in bf16: its own V can be several units off): within one bf16 unit in the last
        place, plus fp32 slack for values near zero."""
        if not decode:
            return bool(torch.equal(a, b))
        a = a.double()
        return bool(((a - v64).abs() <= v64.abs() * 2.0 ** -7 + 1e-5 * v64.abs().max()).all())

    # ---- correctness ----
    def check():
        fkv_step()
        seed_step()
        fkv_api_step()
        torch.cuda.synchronize()
        proj = torch.mm(ctx, s.w_all.t()).view(T, LAYERS, 2 * kv)
        proj64 = torch.mm(ctx.double(), s.w_all.double().t()).view(T, LAYERS, 2 * kv)
        k_ref, v_ref = tb.reference(proj, s.k_norm, s.eps, s.cos_sin, positions, KV_HEADS,
                                    HEAD_DIM, ROTARY_DIM, DTYPE)
        untouched = torch.ones(num_slots, dtype=torch.bool, device=dev)
        untouched[cache_loc] = False
        ok = True
        max_k_err = 0.0
        notes = []
        for l in range(LAYERS):
            k_ok, k_err, _ = tb.compare("k", kp_a[l], kp_b[l])
            max_k_err = max(max_k_err, k_err)
            v64 = proj64[:, l, kv:].reshape(T, KV_HEADS, HEAD_DIM)
            v_ok = v_same(vp_a[l][cache_loc], None, v64) if decode else v_same(vp_a[l], vp_b[l])
            zero_ok = (int(kp_a[l][untouched].ne(0).sum().item()) == 0
                       and int(vp_a[l][untouched].ne(0).sum().item()) == 0)
            ra_ok, ra_err, _ = tb.compare("k", kp_a[l][cache_loc], k_ref[l])
            rb_ok, rb_err, _ = tb.compare("k", kp_b[l][cache_loc], k_ref[l])
            va_ok = v_same(vp_a[l][cache_loc], v_ref[l], v64)
            api_ok = bool(torch.equal(kp_a[l], kp_c[l])) and bool(torch.equal(vp_a[l], vp_c[l]))
            for name, good in (("K fkv vs seed", k_ok), ("V fkv vs float64" if decode else "V fkv vs seed (exact)", v_ok),
                               ("fkv materialize vs materialize_to_pool (exact)", api_ok),
                               ("untouched slots zero", zero_ok), ("K fkv vs reference", ra_ok),
                               ("K seed vs reference", rb_ok), ("V fkv vs reference", va_ok)):
                if not good:
                    ok = False
                    notes.append(f"layer {l}: {name} differs")
            if not (k_ok and ra_ok and rb_ok):
                notes.append(f"layer {l}: max |K err| fkv-seed {k_err:.3g}, fkv-ref {ra_err:.3g}, "
                             f"seed-ref {rb_err:.3g}")
        del proj, proj64, k_ref, v_ref
        return {"ok": ok, "max_k_abs_err": max_k_err, "notes": notes}

    chk = guarded(f"T={T} check", check)
    res["check"] = chk
    status = "ok" if chk.get("ok") else "FAIL"
    log(f"T={T}: check {status}" + (f" (max |K err| {chk['max_k_abs_err']:.3g})"
                                    if "max_k_abs_err" in chk else ""))
    for n in chk.get("notes", [])[:10]:
        log(f"  {n}")

    # ---- timing ----
    # fkv_api and seed: eager interleaved call by call (their ratio is a target).
    pair = guarded(f"T={T} fkv_api/seed eager",
                   lambda: time_eager_interleaved([fkv_api_step, seed_step], target_ms))
    eager_of = ({"fkv_api": pair[0], "seed": pair[1]} if isinstance(pair, list)
                else {"fkv_api": pair, "seed": pair})
    for name, fn in (("fkv", fkv_step), ("fkv_api", fkv_api_step), ("seed", seed_step)):
        e = eager_of.get(name) or guarded(f"T={T} {name} eager", lambda: time_eager(fn, target_ms))
        g = guarded(f"T={T} {name} graph", lambda: time_graph(fn, target_ms))
        res[name] = {"eager": e, "graph": g,
                     "eager_us": e.get("median_us"), "graph_us": g.get("median_us")}
        log(f"T={T} {name:4s}: eager {fmt(res[name]['eager_us'])} us, "
            f"graph {fmt(res[name]['graph_us'])} us")
    gm = guarded(f"T={T} gemm graph", lambda: time_graph(gemm_step, target_ms))
    res["gemm_graph_us"] = gm.get("median_us")
    res["fkv_fused"] = {"graph_us": None}  # the decode kernel takes at most 64 tokens per launch
    for name, fn in fused_steps:
        g = guarded(f"T={T} {name} graph", lambda: time_graph(fn, target_ms))
        res[name] = {"graph": g, "graph_us": g.get("median_us")}
    log(f"T={T}: path {res['fkv_path']}; graph: cuBLASLt + epilogue "
        f"{fmt(res['fkv_cublas']['graph_us'])} us, decode kernel "
        f"{fmt(res['fkv_fused']['graph_us'])} us")
    for mode in ("eager", "graph"):
        a, b = res["fkv"][f"{mode}_us"], res["seed"][f"{mode}_us"]
        res[f"speedup_{mode}"] = (b / a) if (a and b) else None
    log(f"T={T}: gemm alone {fmt(res['gemm_graph_us'])} us; speedup seed/fkv eager "
        f"{fmt_x(res['speedup_eager'])}, graph {fmt_x(res['speedup_graph'])}")
    fe, fg = res["fkv"]["eager_us"], res["fkv"]["graph_us"]
    ae, se = res["fkv_api"]["eager_us"], res["seed"]["eager_us"]
    res["host_overhead_us"] = (fe - fg) if (fe and fg) else None
    res["target_pool_eager_met"] = (fe <= fg + 8.0) if (fe and fg) else None
    res["api_vs_seed_eager"] = (se / ae) if (ae and se) else None
    res["target_api_eager_met"] = (ae <= se / 1.5) if (ae and se) else None
    log(f"T={T}: fkv eager - graph = {fmt(res['host_overhead_us'])} us (target <= 8: "
        f"{res['target_pool_eager_met']}); seed eager / fkv materialize eager = "
        f"{fmt_x(res['api_vs_seed_eager'])} (target >= 1.5: {res['target_api_eager_met']})")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return res


# ---- the weight-read floor ----------------------------------------------------------------------

def weight_probe(s, tb, target_ms):
    """The packed K/V weights (L*2*KV x HIDDEN bf16, 84 MB) read once by a Triton kernel, timed
    like the steps (one call per graph replay), best of four program sizes; its sums are checked
    against torch's. The floor of any step that streams the weights once (small T)."""
    w = s.w_all
    want = w.float().sum().item()
    best = None
    for iters in (8, 16, 40, 80):
        got = tb.read_probe(w, iters).sum().item()
        if abs(got - want) > 1e-3 * max(1.0, w.float().abs().sum().item()):
            raise RuntimeError(f"weight-read probe checksum {got} != {want}")
        t = time_graph(lambda: tb.read_probe(w, iters), target_ms)
        log(f"weight-read probe, {iters} steps per program: {t['median_us']:.2f} us")
        if best is None or t["median_us"] < best["median_us"]:
            best = dict(t, iters=iters, bytes=w.numel() * w.element_size())
    best["GBps"] = best["bytes"] / best["median_us"] / 1e3
    log(f"weight-read floor: {best['median_us']:.2f} us ({best['GBps']:.0f} GB/s)")
    return best


# ---- host time per call ----------------------------------------------------------------------

def host_profile(s, T=8, n=300):
    """Host time of one call with an idle GPU (synchronize, then perf_counter around the call;
    median of n): where the eager-minus-graph time of the T=8 step goes."""
    dev = s.dev
    num_slots = 1024
    ctx = torch.randn(T, HIDDEN, generator=s.gen).to(device=dev, dtype=DTYPE)
    positions = torch.randint(0, MAX_POS, (T,), generator=s.gen, dtype=torch.int64).to(dev)
    cache_loc = torch.randperm(num_slots, generator=s.gen)[:T].to(dev, torch.int64).contiguous()
    kp = [torch.zeros(num_slots, KV_HEADS, HEAD_DIM, dtype=DTYPE, device=dev) for _ in range(LAYERS)]
    vp = [torch.zeros_like(b) for b in kp]
    k = torch.empty(T, KV_HEADS, HEAD_DIM, dtype=DTYPE, device=dev)
    h = s.helper
    binding = h.bind_pool(kp, vp)
    binding_c = s.helper_cublas.bind_pool(kp, vp)

    def write_all():
        for l in range(LAYERS):
            kp[l][cache_loc] = k
            vp[l][cache_loc] = k

    ctx0, pos0, loc0 = ctx[:0], positions[:0], cache_loc[:0]
    stacked_out = torch.empty((2 * LAYERS, T, KV_HEADS, HEAD_DIM), dtype=DTYPE, device=dev)

    def ignore(layer, k, v):
        pass

    def allocating(helper, c, p):
        helper.reuse_outputs = False
        try:
            helper.materialize(c, p, ignore)
        finally:
            helper.reuse_outputs = True
    from fkv_jit._lib import native
    items = [
        ("materialize_to_pool (Python method: checks, binding lookup, native call)",
         lambda: h.materialize_to_pool(ctx, positions, cache_loc, kp, vp)),
        (f"native call alone ({'decode kernel' if T <= h.decode_crossover else 'cuBLASLt GEMM + fused launch'})",
         lambda: h._fn_pool(ctx, positions, cache_loc, binding, [])),
        ("native call alone, cuBLASLt path (cuBLASLt GEMM + fused launch)",
         lambda: s.helper_cublas._fn_pool(ctx, positions, cache_loc, binding_c, [])),
        ("native call with T=0 (tvm-ffi dispatch, 3 tensor arguments, checks; no GPU work)",
         lambda: h._fn_pool(ctx0, pos0, loc0, binding, [])),
        ("tvm-ffi call with no arguments (fkv_jit version())", lambda: native().version()),
        ("3 x Tensor.data_ptr() (for scale)",
         lambda: (ctx.data_ptr(), positions.data_ptr(), cache_loc.data_ptr())),
        ("torch.mm of the same projection", lambda: torch.mm(ctx, s.w_all.t())),
        (f"{LAYERS} layers of index-put writes (what a write_layer_kv does)", write_all),
        ("materialize(write_layer_kv) with those writes",
         lambda: h.materialize(ctx, positions, lambda l, kk, vv: (kp[l].index_put_((cache_loc,), kk),
                                                                  vp[l].index_put_((cache_loc,), vv)))),
        ("materialize with a write_layer_kv that does nothing (its output reused)",
         lambda: h.materialize(ctx, positions, ignore)),
        ("the same with reuse_outputs = False (allocates and makes the views)",
         lambda: allocating(h, ctx, positions)),
        (f"torch.empty of the [{2 * LAYERS}, T, H, D] output", lambda: torch.empty(
            (2 * LAYERS, T, KV_HEADS, HEAD_DIM), dtype=DTYPE, device=dev)),
        (f"unbind of that output into {2 * LAYERS} views", lambda: stacked_out.unbind(0)),
        ("torch.cuda.current_stream() (for scale)", lambda: torch.cuda.current_stream()),
    ]
    out = []
    for name, fn in items:
        for _ in range(10):
            fn()
        samples = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
        samples.sort()
        out.append({"what": name, "median_us": samples[n // 2], "p10_us": samples[n // 10]})
        log(f"host T={T}: {name}: {samples[n // 2]:.1f} us")
    torch.cuda.synchronize()
    return {"tokens": T, "items": out}


# ---- output ----------------------------------------------------------------------------------

def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def fmt_x(x):
    return "n/a" if x is None else f"{x:.2f}x"


def markdown(doc):
    lines = [f"Command: `{doc['command']}`", "",
             f"{doc['environment'].get('gpu', '?')}, torch {doc['environment'].get('torch', '?')}, "
             f"triton {doc['environment'].get('triton', '?')}, fkv-jit "
             f"{doc['environment'].get('fkv_version', '?')}. Qwen3-8B DFlash draft: {LAYERS} layers, "
             f"hidden {HIDDEN}, {KV_HEADS} KV heads x {HEAD_DIM}, RMS K norm, neox RoPE theta "
             f"{THETA:g}, bf16, pool writes included. Median microseconds per step; "
             f"graph columns: {doc['method'].get('calls_per_graph', 1)} call(s) per CUDA graph "
             "replay, per call; speedup = seed / fkv.", "",
             "| T | check | fkv path | fkv eager | seed eager | speedup eager | fkv graph | "
             "seed graph | speedup graph | GEMM alone (graph) | fkv eager - graph | "
             "fkv materialize eager | seed eager / fkv materialize eager | "
             "cuBLASLt + epilogue (graph) | decode kernel (graph) |",
             "|---:|:---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        chk = "ok" if r.get("check", {}).get("ok") else "FAIL"
        f, s = r.get("fkv", {}), r.get("seed", {})
        lines.append(
            f"| {r['tokens']} | {chk} | {r.get('fkv_path', '?')} | {fmt(f.get('eager_us'))} | "
            f"{fmt(s.get('eager_us'))} | "
            f"{fmt_x(r.get('speedup_eager'))} | {fmt(f.get('graph_us'))} | "
            f"{fmt(s.get('graph_us'))} | {fmt_x(r.get('speedup_graph'))} | "
            f"{fmt(r.get('gemm_graph_us'))} | {fmt(r.get('host_overhead_us'))} | "
            f"{fmt(r.get('fkv_api', {}).get('eager_us'))} | {fmt_x(r.get('api_vs_seed_eager'))} | "
            f"{fmt(r.get('fkv_cublas', {}).get('graph_us'))} | "
            f"{fmt(r.get('fkv_fused', {}).get('graph_us'))} |")
    pr = doc.get("weight_read_probe") or {}
    if pr.get("median_us"):
        lines += ["", f"Triton weight-read probe (reads the {pr['bytes'] / 1e6:.1f} MB of packed "
                      f"K/V weights once, timed like the graph columns): {pr['median_us']:.1f} µs "
                      f"({pr['GBps']:.0f} GB/s). It is an upper bound of the floor: "
                      "bench/decode_bench's probe reads the same bytes faster."]
    hp = doc.get("host_profile") or {}
    if hp.get("items"):
        lines += ["", f"Host time of one call at T={hp['tokens']}, GPU idle (median µs):", "",
                  "| call | host µs |", "|:---|---:|"]
        lines += [f"| {i['what']} | {fmt(i['median_us'])} |" for i in hp["items"]]
    return "\n".join(lines) + "\n"


def environment(fkv_jit):
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
           # tvm-ffi takes torch tensors through this C exchange API when torch has it, else
           # through a slower Python DLPack round trip per tensor argument.
           "torch_dlpack_c_exchange_api": hasattr(torch.Tensor, "__dlpack_c_exchange_api__")}
    try:
        import tvm_ffi
        env["tvm_ffi"] = tvm_ffi.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        env["fkv_version"] = fkv_jit.version()
        env["fkv_library"] = fkv_jit.library_path()
    except Exception as e:  # noqa: BLE001
        env["fkv_error"] = str(e)
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON results")
    ap.add_argument("--md", default=None, help="markdown table (default: --out with .md)")
    ap.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)),
                    help="comma-separated T values")
    ap.add_argument("--calls-per-graph", type=int, default=1,
                    help="calls captured per CUDA graph; graph figures are per call")
    ap.add_argument("--target-ms", type=float, default=300.0,
                    help="about this much GPU time per measurement (50..200 samples)")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    global CALLS_PER_GRAPH
    CALLS_PER_GRAPH = max(1, args.calls_per_graph)
    md_path = args.md or (os.path.splitext(args.out)[0] + ".md")
    tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    command = "python3 bench/e2e_bench.py " + " ".join(sys.argv[1:])

    if not torch.cuda.is_available():
        log("no CUDA device visible to torch")
        return 2
    import fkv_jit
    import triton_baseline as tb
    dev = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cuda.matmul.allow_tf32 = False
    env = environment(fkv_jit)
    log(f"{env}")
    doc = {"command": command, "environment": env,
           "shape": {"layers": LAYERS, "hidden": HIDDEN, "kv_heads": KV_HEADS,
                     "head_dim": HEAD_DIM, "rotary_dim": ROTARY_DIM, "rope_theta": THETA,
                     "k_norm": "rms", "eps": EPS, "dtype": "bf16", "max_position": MAX_POS},
           "method": {"eager": "one call between CUDA events, synchronized, median",
                      "graph": f"{CALLS_PER_GRAPH} call(s) captured in a CUDAGraph, one "
                               "replay between CUDA events, median, per call",
                      "calls_per_graph": CALLS_PER_GRAPH, "target_ms": args.target_ms},
           "results": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
        with open(md_path, "w") as f:
            f.write(markdown(doc))

    t_start = time.time()
    s = Setup(fkv_jit, dev, args.seed)
    doc["weight_read_probe"] = guarded("weight-read probe", lambda: weight_probe(s, tb, args.target_ms))
    save()
    all_ok = True
    for T in tokens:
        log(f"---- T={T} ----")
        try:
            r = run_size(s, tb, T, args.target_ms)
        except Exception as e:  # noqa: BLE001 - keep the other sizes
            log(f"T={T} FAILED: {type(e).__name__}: {e}")
            traceback.print_exc()
            r = {"tokens": T, "error": f"{type(e).__name__}: {e}", "check": {"ok": False}}
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass
        all_ok = all_ok and bool(r.get("check", {}).get("ok"))
        doc["results"].append(r)
        save()
    doc["host_profile"] = guarded("host profile", lambda: host_profile(s))
    save()
    doc["elapsed_s"] = time.time() - t_start
    save()
    log(f"done in {doc['elapsed_s']:.1f} s -> {args.out}, {md_path}")
    print(markdown(doc), flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
