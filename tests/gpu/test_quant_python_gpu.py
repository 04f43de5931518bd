"""GPU tests of the installed fkv_jit wheel with quantized K/V weights (docs/quantized.md), against a
float64 reference of the dequantized weights (q * scale), on fresh random FP8 e4m3 values over the
whole range (one in ten in the subnormal range) or INT8 values, with random scales:
  - FusedKVMaterializeHelper(weight_format=..., weight_scales=..., act_dtype=...) in every format,
    bf16 and fp16: stacked at T = 5 (the decode-size kernel) and T = 100, pool at T = 40 with
    skipped tokens (rows not written stay NaN); above the decode crossover FP8 weights through
    the FP8 GEMM (fp8_gemm=True, the reference's activations quantized as the GEMM's are:
    as_read) and as dequantized slices (fp8_gemm=False), INT8 weights through the INT8 GEMM
    (the default, int8_gemm_tokens=512) and as slices (int8_gemm_tokens=0);
  - a CUDA graph captured around materialize and materialize_to_pool, replayed after
    refresh_weights with new weights, scales and K-norm weights, on the decode path (T = 24) and
    above it (T = 48);
  - fkv_jit.sglang's helper on layers stored as sglang's Fp8LinearMethod (the weight as its
    transposed [in, out] view; weight_scale of one value or [out, 1], weight_scale_inv
    [out/128, in/128] with weight_block_size [128, 128]) and W8A8Int8LinearMethod keep them, and
    a graph replayed after its refresh_weights(layers).
Outputs are poisoned (NaN) before every call. Tolerance: tests/gpu/test_python_gpu.py's (about two
units of the output dtype at the head's scale); on the cuBLASLt path the dequantized weights and
the projection are rounded to the activation dtype once each, and on the INT8 GEMM the split
activations are within 2^-16 of each token's largest value, both well inside it.

    pip install fkv_jit-*.whl && python3 tests/gpu/test_quant_python_gpu.py

Environment: FKV_TEST_SEED (default: random, printed). Exits 77 (CTest: skipped) without torch, a
CUDA device or the wheel.
"""

import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_env import require_gpu_and_wheel  # noqa: E402  (tests/gpu/gpu_env.py)

torch, fkv_jit = require_gpu_and_wheel()

from fkv_jit.sglang import FusedKVMaterializeHelper as SglangHelper  # noqa: E402
from test_python_gpu import TOL, assert_close, ref_cos_sin, ref_rope  # noqa: E402

DEV = torch.device("cuda", torch.cuda.current_device())
SEED = int(os.environ.get("FKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
print(f"test_quant_python_gpu: FKV_TEST_SEED={SEED}")
GEN = torch.Generator(device="cpu").manual_seed(SEED)
FP8 = torch.float8_e4m3fn
FORMATS = ("fp8_tensor", "fp8_channel", "fp8_block", "int8_channel")
NAN = float("nan")


def rand(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=GEN) * scale).to(device=DEV, dtype=dtype)


def quantized(rows, hidden, fmt):
    """(q [rows, hidden] as stored, scales in the format's layout (float32), w = q * scale in
    float64), on the device. W ~ N(0, 1 / hidden) like dense test weights."""
    if fmt == "int8_channel":
        q = (torch.randn(rows, hidden, generator=GEN) * 40).round().clamp(-128, 127).to(torch.int8)
    else:
        x = torch.randn(rows, hidden, generator=GEN) * 40
        x[torch.rand(rows, hidden, generator=GEN) < 0.1] *= 1e-4  # e4m3 subnormals: < 2^-6
        q = x.clamp(-448, 448).to(FP8)
    shape = {"fp8_tensor": (), "fp8_channel": (rows,), "int8_channel": (rows,),
             "fp8_block": (-(-rows // 128), -(-hidden // 128))}[fmt]
    s = ((torch.rand(shape, generator=GEN) + 0.5) / (40.0 * hidden ** 0.5)).float()
    if fmt == "fp8_block":
        full = s.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :hidden]
    else:
        full = s.reshape(-1, 1) if s.dim() else s
    w = q.float().double() * full.double()
    assert bool(torch.isfinite(w).all())
    return q.to(DEV), s.to(DEV), w.to(DEV)


def ref_kv(ctx, w, knw, eps, cos_sin, pos, H, D, neox=True):
    """float64 K and V [T, H, D] of one layer: x . w^T, RMSNorm(K) * knw, RoPE (rotary_dim D)."""
    proj = ctx.double() @ w.t()
    T = ctx.shape[0]
    k, v = proj[:, :H * D].reshape(T, H, D), proj[:, H * D:].reshape(T, H, D)
    k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + eps) * knw.double()
    cs = cos_sin.double()[pos.long()]
    return ref_rope(k, cs[:, None, :D // 2], cs[:, None, D // 2:], D, neox), v


# ---- the config helper -----------------------------------------------------------------------

L, H, D, HIDDEN, MAX_POS = 2, 2, 128, 256, 4096
SPEC = {"num_kv_heads": H, "head_dim": D, "rotary_dim": D, "is_neox_style": True,
        "rope_theta": 1e6, "k_norm": "rms", "eps": 1e-6}
CONFIG = {"hidden_size": HIDDEN, "max_position_embeddings": MAX_POS, "fkv": {"layers": [SPEC] * L}}
COS_SIN = None


def model(fmt):
    """Per layer (q, scales, w) and K-norm weights."""
    return [quantized(2 * H * D, HIDDEN, fmt) for _ in range(L)], [rand(D, scale=0.5) + 1.0
                                                                    for _ in range(L)]


def make_helper(fmt, dtype, layers, knw, **kwargs):
    return fkv_jit.FusedKVMaterializeHelper(CONFIG, [q for q, _, _ in layers], knw,
                                            weight_format=fmt, act_dtype=dtype,
                                            weight_scales=[s for _, s, _ in layers], **kwargs)


def reference(layers, knw, ctx, pos):
    global COS_SIN
    if COS_SIN is None:
        COS_SIN = ref_cos_sin(1e6, D, MAX_POS)
    return [ref_kv(ctx, w, knw[l], 1e-6, COS_SIN, pos, H, D) for l, (_, _, w) in enumerate(layers)]


def as_read(helper, ctx):
    """ctx as the helper's path reads it: through the FP8 GEMM (FP8 weights above the decode
    crossover, helper.fp8_gemm) quantized to e4m3 with one scale per token (per token and 128
    columns for fp8_block, and for fp8_tensor and fp8_channel at up to 64 tokens),
    s = max(amax / 448, FLT_MIN) and q = e4m3(x / s) with both quotients the IEEE float32 ones, then q * s in float64 (templates/quantize_act.cu); else ctx itself.
    The quotients are taken in float64 and rounded to float32 once, which is the float32 quotient
    exactly (53 >= 2 * 24 + 2 bits); torch's float32 division by a Python number multiplies by
    its reciprocal instead, one unit off now and then, and that moves some q across a rounding
    step."""
    T = ctx.shape[0]
    if not (helper.fp8_gemm and T > helper.decode_crossover):
        return ctx
    x = ctx.double()
    blocks = helper.weight_format == "fp8_block" or T <= 64
    xs = x.reshape(T, -1, 128 if blocks else x.shape[1])
    s = torch.clamp((xs.abs().amax(-1, keepdim=True) / 448.0).float(),
                    min=torch.finfo(torch.float32).tiny).double()
    q = (xs / s).float().to(FP8)
    return (q.double() * s).reshape(T, -1)


def inputs(T, dtype):
    return rand(T, HIDDEN, dtype=dtype), torch.randint(0, MAX_POS, (T,), generator=GEN).to(DEV)


def check_stacked(helper, layers, knw, T, dtype):
    ctx, pos = inputs(T, dtype)
    helper.materialize(ctx, pos, lambda l, k, v: None)  # allocates the output, kept for reuse
    buf = helper._kept[1]
    buf.fill_(NAN)  # poisoned: the next call with this T writes into it
    ctx, pos = inputs(T, dtype)
    got = {}
    helper.materialize(ctx, pos, lambda l, k, v: got.__setitem__(l, (k.clone(), v.clone())))
    assert helper._kept[1].data_ptr() == buf.data_ptr(), "the poisoned output was not reused"
    torch.cuda.synchronize()
    rtol, atol = TOL[dtype]
    for l, (k_ref, v_ref) in enumerate(reference(layers, knw, as_read(helper, ctx), pos)):
        k, v = got[l]
        assert k.dtype == dtype and tuple(k.shape) == (T, H, D), (k.dtype, k.shape)
        assert_close(k, k_ref, rtol, atol, f"T={T}: k of layer {l}")
        assert_close(v, v_ref, rtol, atol, f"T={T}: v of layer {l}")


def check_pool(helper, layers, knw, dtype, T=40, slots=96):
    ctx, pos = inputs(T, dtype)
    loc = torch.randperm(slots, generator=GEN)[:T]
    loc[::7] = -1
    loc = loc.to(DEV)
    kb = [torch.full((slots, H, D), NAN, dtype=dtype, device=DEV) for _ in range(L)]
    vb = [torch.full_like(b, NAN) for b in kb]
    helper.materialize_to_pool(ctx, pos, loc, kb, vb)
    torch.cuda.synchronize()
    rtol, atol = TOL[dtype]
    written = loc >= 0
    untouched = torch.ones(slots, dtype=torch.bool, device=DEV)
    untouched[loc[written]] = False
    for l, (k_ref, v_ref) in enumerate(reference(layers, knw, as_read(helper, ctx), pos)):
        assert_close(kb[l][loc[written]], k_ref[written], rtol, atol, f"pool k of layer {l}")
        assert_close(vb[l][loc[written]], v_ref[written], rtol, atol, f"pool v of layer {l}")
        assert bool(kb[l][untouched].isnan().all() and vb[l][untouched].isnan().all()), \
            f"pool layer {l}: a row of a skipped token was written"


def test_every_format_stacked_and_pool():
    for fmt in FORMATS:
        for dtype in (torch.bfloat16, torch.float16):
            layers, knw = model(fmt)
            # Above the crossover, the default first: FP8 weights the FP8 GEMM, INT8 weights the
            # INT8 GEMM (up to int8_gemm_tokens); then dequantized slices (fp8_gemm=False,
            # int8_gemm_tokens=0).
            for gemm in (True, False):
                helper = make_helper(fmt, dtype, layers, knw, max_tokens=128, fp8_gemm=gemm,
                                     int8_gemm_tokens=512 if gemm else 0)
                int8 = fmt == "int8_channel"
                assert helper.weight_format == fmt and helper.act_dtype == dtype
                assert helper.fp8_gemm == (gemm and not int8)
                assert helper.int8_gemm_tokens == (128 if gemm and int8 else 0)
                print(f"  {fmt} {dtype}: decode crossover {helper.decode_crossover}, "
                      f"FP8 GEMM above it: {helper.fp8_gemm}, INT8 GEMM up to "
                      f"{helper.int8_gemm_tokens} tokens")
                for T in (5, 100):
                    check_stacked(helper, layers, knw, T, dtype)
                check_pool(helper, layers, knw, dtype)


def test_engine_spellings_and_stacked_scales():
    # "fp8_per_channel" is fp8_channel; scales as one [L, rows, 1] tensor (the engines' shape).
    layers, knw = model("fp8_channel")
    scales = torch.stack([s for _, s, _ in layers])[..., None]
    helper = fkv_jit.FusedKVMaterializeHelper(CONFIG, [q for q, _, _ in layers], knw,
                                              weight_format="fp8_per_channel",
                                              weight_scales=scales, act_dtype="bf16")
    assert helper.weight_format == "fp8_channel"
    check_stacked(helper, layers, knw, 9, torch.bfloat16)


def test_graph_replay_after_refresh():
    # T = 48: above the decode crossover (the FP8 GEMM for fp8_block, slices for int8_channel).
    for fmt, T in (("fp8_block", 24), ("int8_channel", 24), ("fp8_block", 48),
                   ("fp8_tensor", 48)):
        dtype = torch.bfloat16
        layers, knw = model(fmt)
        helper = make_helper(fmt, dtype, layers, knw)
        slots = 64
        ctx, pos = inputs(T, dtype)
        loc = torch.randperm(slots, generator=GEN)[:T].to(DEV)
        out_k = torch.empty(L, T, H, D, dtype=dtype, device=DEV)
        out_v = torch.empty_like(out_k)
        kb = [torch.empty(slots, H, D, dtype=dtype, device=DEV) for _ in range(L)]
        vb = [torch.empty_like(b) for b in kb]

        def write(l, k, v):
            out_k[l].copy_(k)
            out_v[l].copy_(v)

        def step():
            helper.materialize(ctx, pos, write)
            helper.materialize_to_pool(ctx, pos, loc, kb, vb)

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()

        def replay_and_check(layers, knw, what):
            for t in [out_k, out_v] + kb + vb:
                t.fill_(NAN)
            graph.replay()
            torch.cuda.synchronize()
            rtol, atol = TOL[dtype]
            for l, (k_ref, v_ref) in enumerate(reference(layers, knw, as_read(helper, ctx), pos)):
                assert_close(out_k[l], k_ref, rtol, atol, f"{fmt} {what}: k of layer {l}")
                assert_close(out_v[l], v_ref, rtol, atol, f"{fmt} {what}: v of layer {l}")
                assert_close(kb[l][loc], k_ref, rtol, atol, f"{fmt} {what}: pool k of layer {l}")
                assert_close(vb[l][loc], v_ref, rtol, atol, f"{fmt} {what}: pool v of layer {l}")
            return out_k.clone()

        before = replay_and_check(layers, knw, "replay")
        new_layers, new_knw = model(fmt)
        helper.refresh_weights([q for q, _, _ in new_layers], new_knw,
                               weight_scales=[s for _, s, _ in new_layers])
        after = replay_and_check(new_layers, new_knw, "replay after refresh_weights")
        assert not torch.equal(before, after)
        # The format and the shapes cannot change.
        try:
            helper.refresh_weights([q.view(torch.uint8) for q, _, _ in new_layers], new_knw,
                                   weight_scales=[s for _, s, _ in new_layers])
        except ValueError as e:
            assert "as at construction" in str(e), str(e)
        else:
            raise AssertionError("refresh_weights took weights of another dtype")


# ---- the sglang helper -----------------------------------------------------------------------

class Rotary:
    """sglang's RotaryEmbedding as the helper uses it (tests/gpu/test_sglang_gpu.py's)."""

    def __init__(self, rotary_dim, base=10000.0, max_pos=64):
        self.rotary_dim, self.is_neox_style, self.base = rotary_dim, True, base
        inv = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
        ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
        self.cos_sin_cache = torch.cat([ang.cos(), ang.sin()], dim=1).float().to(DEV)


def sglang_layer(kind, rotary, kv=2, d=128, q_heads=4, hidden=256):
    """One decoder layer whose qkv_proj is stored as sglang keeps it after
    process_weights_after_loading; layer._w is its float64 dequantized [out, in] weight."""
    q_size, kv_size = q_heads * d, kv * d
    fmt = {"tensor": "fp8_tensor", "channel": "fp8_channel", "block": "fp8_block",
           "int8": "int8_channel"}[kind]
    q, s, w = quantized(q_size + 2 * kv_size, hidden, fmt)
    proj = SimpleNamespace(weight=q.t(), bias=None, orig_dtype=torch.bfloat16)  # [in, out] view
    if kind == "block":
        proj.weight_scale_inv = s
        proj.quant_method = SimpleNamespace(weight_block_size=[128, 128])
    else:
        proj.weight_scale = s if kind == "tensor" else s[:, None]
    norm = SimpleNamespace(weight=(rand(d, scale=0.5) + 1.0).to(torch.bfloat16), variance_epsilon=1e-6)
    attn = SimpleNamespace(num_kv_heads=kv, head_dim=d, q_size=q_size, kv_size=kv_size,
                           qkv_proj=proj, k_norm=norm, rotary_emb=rotary)
    return SimpleNamespace(self_attn=attn, _q=q, _s=s, _w=w)


def sglang_reference(layers, rotary, ctx, pos):
    out = []
    for layer in layers:
        a = layer.self_attn
        w = layer._w[a.q_size:a.q_size + 2 * a.kv_size]
        out.append(ref_kv(ctx, w, a.k_norm.weight, a.k_norm.variance_epsilon, rotary.cos_sin_cache,
                          pos, a.num_kv_heads, a.head_dim))
    return out


def test_sglang_quantized_layers_graph_refresh():
    for kind in ("tensor", "channel", "block", "int8"):
        rotary = Rotary(128)
        layers = [sglang_layer(kind, rotary) for _ in range(3)]
        helper = SglangHelper(layers=layers, rotary_emb=rotary, num_kv_heads=2, head_dim=128,
                              device=DEV, max_position_hint=64)
        stored = FP8 if kind != "int8" else torch.int8
        assert helper.flat_kv_weight_t.dtype == stored and helper.act_dtype == torch.bfloat16
        T = 19
        ctx = rand(T, 256, dtype=torch.bfloat16)
        pos = torch.randint(0, 64, (T,), generator=GEN).to(DEV)
        out_k = torch.empty(3, T, 2, 128, dtype=torch.bfloat16, device=DEV)
        out_v = torch.empty_like(out_k)

        def write(i, k, v):
            out_k[i].copy_(k)
            out_v[i].copy_(v)

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            helper.materialize(ctx, pos, write)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            helper.materialize(ctx, pos, write)

        def replay_and_check(what):
            out_k.fill_(NAN)
            out_v.fill_(NAN)
            graph.replay()
            torch.cuda.synchronize()
            rtol, atol = TOL[torch.bfloat16]
            for i, (k_ref, v_ref) in enumerate(sglang_reference(layers, rotary, ctx, pos)):
                assert_close(out_k[i], k_ref, rtol, atol, f"sglang {kind} {what}: k of layer {i}")
                assert_close(out_v[i], v_ref, rtol, atol, f"sglang {kind} {what}: v of layer {i}")
            return out_k.clone()

        before = replay_and_check("replay")
        address = helper.flat_kv_weight_t.data_ptr()
        # New weights in place, as sglang's weight update writes them into the parameters.
        for i, layer in enumerate(layers):
            new = sglang_layer(kind, rotary)
            layer._q.copy_(new._q)
            layer._s.copy_(new._s)
            layer._w = new._w
            layer.self_attn.k_norm.weight.copy_(new.self_attn.k_norm.weight)
        helper.refresh_weights(layers)
        assert helper.flat_kv_weight_t.data_ptr() == address
        after = replay_and_check("replay after refresh_weights")
        assert not torch.equal(before, after)


def main():
    print(f"fkv_jit {fkv_jit.version()} from {fkv_jit.library_path()}; torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(DEV)}")
    from plain_runner import run  # tests/plain_runner.py (on sys.path through gpu_env)

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
