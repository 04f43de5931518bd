"""GPU tests of the installed fkv_jit wheel's FusedKVMaterializeHelper against a float64
PyTorch reference (linear, RMSNorm, RoPE neox and GPT-J, pool index-put), for bf16/fp16 stacked
outputs, bf16 and fp8 pools, grouped plans, tensor-parallel ranks (each rank's heads equal to the
TP=1 heads bit for bit), under torch.cuda.graph capture and under torch.compile(fullgraph=True), a
helper built from a Config whose file is gone (the config is read once), and token-major pools
written by materialize_to_layout (the per-layer pool's bits; its refusals). Plain asserts; pytest
also collects it.

    pip install fkv_jit-*.whl && python3 tests/gpu/test_python_gpu.py

Needs torch with CUDA and a GPU; without them it exits 77, which CTest reports as skipped (not
passed), so a GPU run never passes without running.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_env import require_gpu_and_wheel  # noqa: E402  (tests/gpu/gpu_env.py)

torch, fkv_jit = require_gpu_and_wheel()

DEV = torch.device("cuda", torch.cuda.current_device())
GEN = torch.Generator(device="cpu").manual_seed(1234)


def rand(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=GEN) * scale).to(device=DEV, dtype=dtype)


def layer(kv, d, r, neox=True, theta=10000.0, k_norm="none", eps=1e-6):
    return {"num_kv_heads": kv, "head_dim": d, "rotary_dim": r, "is_neox_style": neox,
            "rope_theta": theta, "k_norm": k_norm, "eps": eps}


# ---- the eager reference -------------------------------------------------------------------

def ref_cos_sin(theta, R, max_position):
    """float64 cos/sin [max_position, R] like HF's default rope: inv_freq_i = theta^(-2i/R)."""
    inv = theta ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    ang = torch.arange(max_position, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([ang.cos(), ang.sin()], dim=1).to(DEV)


def ref_rope(x, cos, sin, R, neox):
    """x [T, H, D] float; cos/sin [T, 1, R/2]."""
    if R == 0:
        return x
    if neox:
        x1, x2 = x[..., : R // 2], x[..., R // 2: R]
        rot = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    else:
        x1, x2 = x[..., 0:R:2], x[..., 1:R:2]
        rot = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    return torch.cat([rot, x[..., R:]], dim=-1)


def ref_layer(ctx, w, spec, knw, eps, cos_sin, positions):
    """K and V of one layer, float64: linear -> RMSNorm -> RoPE. `w` [2*H*D, hidden]."""
    H, D, R = spec["num_kv_heads"], spec["head_dim"], spec["rotary_dim"]
    T = ctx.shape[0]
    proj = torch.nn.functional.linear(ctx, w)  # in the activation dtype, like the helper's GEMM
    k = proj[:, : H * D].reshape(T, H, D).double()
    v = proj[:, H * D:].reshape(T, H, D).double()
    if spec["k_norm"] != "none":
        wn = knw.double() + (1.0 if spec["k_norm"] == "rms_one_plus" else 0.0)
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + eps) * wn
    if R:
        cs = cos_sin.double()[positions.long()]
        k = ref_rope(k, cs[:, None, : R // 2], cs[:, None, R // 2:], R, spec["is_neox_style"])
    return k, v


def assert_close(got, want, rtol, atol, what):
    """|got - want| <= atol + rtol * (largest |want| of the head): the reference's projection is
    its own GEMM, so a 1-ulp difference there may survive RoPE's cancellation; tolerances are
    about two units of the output dtype at the head's scale. Bit-level accuracy is the C++ GPU
    tests' job (reference.hpp); these check the binding end to end."""
    got = got.double()
    want = want.double()
    scale = want.abs().amax(dim=-1, keepdim=True)
    err = (got - want).abs()
    bad = (err > atol + rtol * scale) | (torch.isnan(got) & ~torch.isnan(want))
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; first at flat index {i}: "
            f"got {got.flatten()[i].item():.6g}, want {want.flatten()[i].item():.6g}; "
            f"max abs err {err.max().item():.3g}")


TOL = {torch.bfloat16: (1.6e-2, 1e-3), torch.float16: (2e-3, 2e-4), torch.float32: (1e-5, 1e-6)}


class Case:
    """A small draft model: explicit per-layer config, random weights and inputs."""

    def __init__(self, layers, dtype=torch.bfloat16, hidden=256, max_position=4096):
        self.layers = layers
        self.config = {"hidden_size": hidden, "max_position_embeddings": max_position,
                       "fkv": {"layers": layers}}
        self.dtype = dtype
        self.hidden = hidden
        self.max_position = max_position
        self.w = [rand(2 * l["num_kv_heads"] * l["head_dim"], hidden, dtype=dtype,
                       scale=hidden ** -0.5) for l in layers]
        self.knw = [rand(l["head_dim"], scale=0.5) + 1.0 for l in layers]

    def helper(self, **kwargs):
        has_norm = any(l["k_norm"] != "none" for l in self.layers)
        return fkv_jit.FusedKVMaterializeHelper(self.config, self.w,
                                                self.knw if has_norm else None, **kwargs)

    def inputs(self, T, pos_dtype=torch.int64):
        ctx = rand(T, self.hidden, dtype=self.dtype)
        pos = torch.randint(0, self.max_position, (T,), generator=GEN).to(DEV, pos_dtype)
        return ctx, pos

    def reference(self, ctx, pos, cos_sin_of=None):
        out = []
        for i, l in enumerate(self.layers):
            cs = (cos_sin_of(i) if cos_sin_of else
                  ref_cos_sin(l["rope_theta"], l["rotary_dim"], self.max_position)
                  if l["rotary_dim"] else None)
            out.append(ref_layer(ctx, self.w[i], l, self.knw[i], l["eps"], cs, pos))
        return out


# ---- tests -----------------------------------------------------------------------------------

def check_stacked(case, T=77, pos_dtype=torch.int64, **helper_kwargs):
    helper = case.helper(**helper_kwargs)
    ctx, pos = case.inputs(T, pos_dtype)
    got = {}
    helper.materialize(ctx, pos, lambda l, k, v: got.__setitem__(l, (k.clone(), v.clone())))
    torch.cuda.synchronize()
    assert sorted(got) == list(range(len(case.layers))), sorted(got)
    rtol, atol = TOL[case.dtype]
    for l, (k_ref, v_ref) in enumerate(case.reference(ctx, pos)):
        k, v = got[l]
        assert k.dtype == case.dtype and tuple(k.shape) == tuple(k_ref.shape), (k.dtype, k.shape)
        assert_close(k, k_ref, rtol, atol, f"k of layer {l}")
        assert_close(v, v_ref, rtol, atol, f"v of layer {l}")


def test_neox_knorm_bf16():
    check_stacked(Case([layer(8, 128, 128, True, 1e6, "rms")] * 3))


def test_gptj_partial_fp16_int32_positions():
    check_stacked(Case([layer(4, 64, 32, False, 10000.0)] * 2, dtype=torch.float16),
                  pos_dtype=torch.int32)


def test_rms_one_plus_and_nope():
    check_stacked(Case([layer(2, 256, 0, True, 10000.0, "rms_one_plus", 1e-5)] * 2))


def test_grouped_two_frequency_tables():
    # Gemma-style: sliding layers theta 1e4, global layers theta 1e6 and other head count.
    layers = [layer(4, 128, 128, True, 1e4, "rms"), layer(4, 128, 128, True, 1e4, "rms"),
              layer(2, 128, 128, True, 1e6, "rms"), layer(4, 128, 128, True, 1e4, "rms")]
    case = Case(layers)
    try:
        case.helper()
        raise AssertionError("strict mode accepted mismatched layers")
    except ValueError as e:
        assert str(e) == ("num_kv_heads mismatch across layers for fused KV path: expected 4, got "
                          "2 at layer 2."), str(e)
    check_stacked(case, grouped=True)


def test_helper_from_config_read_once():
    # The helper builds its materializer from the Config object load_config read (no second
    # read of the file, which is gone by then), for a tensor-parallel rank too.
    import json
    import shutil
    import tempfile
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 2)
    tmp = tempfile.mkdtemp(prefix="fkv-gpu-once-")
    path = os.path.join(tmp, "config.json")
    try:
        with open(path, "w") as f:
            json.dump(case.config, f)
        cfg = fkv_jit.load_config(path)
        os.remove(path)
        case.config = cfg
        check_stacked(case)
        helper = fkv_jit.FusedKVMaterializeHelper(
            cfg, [rank_shard(w, 8, 128, 4, 4) for w in case.w], case.knw, tp_size=2, tp_rank=1)
        T = 9
        ctx, pos = case.inputs(T)
        got = {}
        helper.materialize(ctx, pos, lambda l, k, v: got.__setitem__(l, (k.clone(), v.clone())))
        torch.cuda.synchronize()
        rtol, atol = TOL[case.dtype]
        for l, (k_ref, v_ref) in enumerate(case.reference(ctx, pos)):
            assert_close(got[l][0], k_ref[:, 4:8], rtol, atol, f"rank 1: k of layer {l}")
            assert_close(got[l][1], v_ref[:, 4:8], rtol, atol, f"rank 1: v of layer {l}")
    finally:
        shutil.rmtree(tmp)


def test_materialize_reuses_its_output_only_when_unheld():
    # materialize hands the next call of the same T the same output views when nothing outside
    # holds them; a kept view or a view derived from one makes it allocate anew, and what the
    # engine kept is never overwritten.
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 3)
    helper = case.helper()
    rtol, atol = TOL[case.dtype]

    def run(T, keep=None):
        ctx, pos = case.inputs(T)
        seen, got = {}, {}

        def write(l, k, v):
            seen[l] = (id(k), k.data_ptr())
            got[l] = (k.clone(), v.clone())
            if keep is not None:
                keep.append(keep_what(k))
        helper.materialize(ctx, pos, write)
        torch.cuda.synchronize()
        for l, (k_ref, v_ref) in enumerate(case.reference(ctx, pos)):
            assert_close(got[l][0], k_ref, rtol, atol, f"T={T}: k of layer {l}")
            assert_close(got[l][1], v_ref, rtol, atol, f"T={T}: v of layer {l}")
        return seen, got

    keep_what = None
    first, _ = run(40)
    second, _ = run(40)
    assert second == first, "an unheld output of the same T was not reused"
    run(41)  # another T: a buffer of its own (Python ids and addresses may repeat: not compared)
    for keep_what in (lambda k: k, lambda k: k.view(-1)):
        kept = []
        a, got_a = run(41, kept)           # the engine keeps what keep_what gives
        b, _ = run(41)
        assert b[0][1] != a[0][1], "a held output was reused"  # its storage is still alive
        assert torch.equal(kept[0].reshape(got_a[0][0].shape), got_a[0][0]), "a kept view changed"
        del kept
    base, _ = run(41)
    with torch.cuda.stream(torch.cuda.Stream()):  # another stream: not ordered after the last copies
        other, _ = run(41)
    assert other[0][1] != base[0][1], "a buffer of another stream was reused"
    helper.reuse_outputs = False
    run(41)
    run(41)
    assert helper._kept is None, "reuse_outputs = False kept an output for reuse"


def test_partial_rotary_max_position():
    # A cos/sin table of max_position rows (not the config's 4096), positions up to its end.
    case = Case([layer(8, 128, 64, True, 5e5, "rms")] * 2, max_position=1024)
    helper = case.helper(max_position=1024)
    ctx, _ = case.inputs(33)
    pos = torch.arange(1024 - 33, 1024, device=DEV)
    got = {}
    helper.materialize(ctx, pos, lambda l, k, v: got.__setitem__(l, k.clone()))
    torch.cuda.synchronize()
    rtol, atol = TOL[torch.bfloat16]
    for l, (k_ref, _) in enumerate(case.reference(ctx, pos)):
        assert_close(got[l], k_ref, rtol, atol, f"k of layer {l}")


def check_bad_position_and_slot(**helper_kwargs):
    """Token 3 at a position past the table, token 5 at a slot past the pool: both skipped (slot
    3 stays zero) and both error bits set, then reset. Returns the helper."""
    case = Case([layer(4, 64, 64, True, 1e4, "rms")] * 2, max_position=256)
    helper = case.helper(**helper_kwargs)
    ctx, pos = case.inputs(8)
    pos[3] = 256  # one past the table
    loc = torch.arange(8, device=DEV)
    loc[5] = 64   # one past the pool
    kb = [torch.zeros(64, 4, 64, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
    vb = [torch.zeros_like(b) for b in kb]
    helper.materialize_to_pool(ctx, pos, loc, kb, vb)
    assert helper.check_device_errors() == 3
    assert helper.check_device_errors() == 0  # reset
    assert int(kb[0][3].ne(0).sum()) == 0 and int(vb[0][3].ne(0).sum()) == 0
    return helper


def test_debug_flags_bad_position_and_slot():
    check_bad_position_and_slot(debug=True)  # debug: the cuBLASLt + epilogue path


def pool_reference(case, ctx, pos, loc, num_slots, dtype, scales=None, fill=0.0):
    """The pool after index-put of the reference rows (rows with loc < 0 untouched)."""
    refs = case.reference(ctx, pos)
    valid = loc >= 0
    out = []
    for l, (k, v) in enumerate(refs):
        H, D = k.shape[1], k.shape[2]
        ks, vs = (scales[l] if scales else (1.0, 1.0))
        kp = torch.full((num_slots, H, D), fill, dtype=torch.float64, device=DEV)
        vp = kp.clone()
        kp[loc[valid].long()] = k[valid] / ks
        vp[loc[valid].long()] = v[valid] / vs
        out.append((kp, vp))
    return out


def check_pool(case, pool_dtype, T=50, num_slots=200, scales=None, slot_dtype=torch.int64,
               kv_cache_dtype=None, **helper_kwargs):
    helper = case.helper(kv_cache_dtype=kv_cache_dtype or pool_dtype, **helper_kwargs)
    ctx, pos = case.inputs(T)
    loc = torch.randperm(num_slots, generator=GEN)[:T]
    loc[::7] = -1  # skipped tokens
    loc = loc.to(DEV, slot_dtype)
    fill = 3.0
    kb, vb = [], []
    for l in case.layers:
        shape = (num_slots, l["num_kv_heads"], l["head_dim"])
        kb.append(torch.full(shape, fill, device=DEV).to(pool_dtype))
        vb.append(torch.full(shape, fill, device=DEV).to(pool_dtype))
    views_k = [b.view(torch.uint8) for b in kb] if kv_cache_dtype else kb
    views_v = [b.view(torch.uint8) for b in vb] if kv_cache_dtype else vb
    helper.materialize_to_pool(ctx, pos, loc, views_k, views_v,
                               k_scales=[s[0] for s in scales] if scales else None,
                               v_scales=[s[1] for s in scales] if scales else None)
    torch.cuda.synchronize()
    refs = pool_reference(case, ctx, pos, loc, num_slots, pool_dtype, scales, fill)
    if pool_dtype in TOL:
        rtol, atol = TOL[pool_dtype]
    else:  # fp8: 3 (e4m3) or 2 (e5m2) mantissa bits, rounded once
        rtol, atol = (0.07, 0.02) if pool_dtype == torch.float8_e4m3fn else (0.13, 0.04)
    for l, (kp, vp) in enumerate(refs):
        if pool_dtype in TOL:
            assert_close(kb[l], kp, rtol, atol, f"k pool of layer {l}")
            assert_close(vb[l], vp, rtol, atol, f"v pool of layer {l}")
        else:
            maxv = 448.0 if pool_dtype == torch.float8_e4m3fn else 57344.0
            assert_close(kb[l].float(), kp.clamp(-maxv, maxv), rtol, atol, f"k fp8 pool of layer {l}")
            assert_close(vb[l].float(), vp.clamp(-maxv, maxv), rtol, atol, f"v fp8 pool of layer {l}")


def test_pool_bf16():
    check_pool(Case([layer(8, 128, 128, True, 1e6, "rms")] * 3), torch.bfloat16)


def test_pool_bf16_int32_slots_gptj():
    check_pool(Case([layer(4, 64, 64, False, 1e4)] * 2), torch.bfloat16, slot_dtype=torch.int32)


def test_pool_fp8_e4m3_scales():
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 2)
    check_pool(case, torch.float8_e4m3fn, scales=[(0.5, 0.25), (2.0, 0.125)])


def test_pool_fp8_as_uint8():
    case = Case([layer(4, 128, 128, True, 1e6, "rms")] * 2)
    check_pool(case, torch.float8_e4m3fn, kv_cache_dtype="fp8_e4m3")


def test_pool_fp8_e5m2():
    check_pool(Case([layer(4, 128, 128, True, 1e6, "rms")] * 2), torch.float8_e5m2)


def test_decode_path_pool_and_stacked():
    # The decode-size kernel (projection and epilogue in one launch) forced up to 64 tokens:
    # T = 1, 8 (one bucket), 40 (bucket 64) and 100 (two launches), pool and stacked.
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 3)
    assert case.helper(decode_crossover=64).decode_crossover == 64
    for T in (1, 8, 40):
        check_pool(case, torch.bfloat16, T=T, decode_crossover=64)
        check_stacked(case, T=T, decode_crossover=64)
    check_stacked(case, T=100, decode_crossover=64)  # above the crossover: cuBLASLt
    fp8 = Case([layer(4, 128, 128, True, 1e6, "rms")] * 2)
    check_pool(fp8, torch.float8_e4m3fn, T=8, scales=[(0.5, 0.25), (2.0, 0.125)],
               decode_crossover=8)


def test_decode_path_flags_bad_position_and_slot():
    assert check_bad_position_and_slot(decode_crossover=8).decode_crossover == 8


def test_argument_errors():
    case = Case([layer(4, 128, 128, True, 1e6, "rms")] * 2)
    helper = case.helper()
    ctx, pos = case.inputs(8)
    for bad, exc, text in [
        ((ctx, pos[:5]), ValueError, "positions must match ctx_hidden token count"),
        ((ctx.float(), pos), TypeError, "differs from the helper's activation dtype"),
        ((ctx[:, :100], pos), ValueError, "ctx_hidden must be"),
        ((ctx, pos.float()), TypeError, "positions must be int32 or int64"),
    ]:
        try:
            helper.materialize(*bad, lambda *a: None)
            raise AssertionError(f"no error for {text}")
        except exc as e:
            assert text in str(e), str(e)
    kb = [torch.zeros(16, 4, 128, device=DEV, dtype=torch.float16) for _ in range(2)]
    try:
        helper.materialize_to_pool(ctx, pos, torch.zeros(8, dtype=torch.int64, device=DEV), kb, kb)
        raise AssertionError("fp16 pool with bf16 activations accepted")
    except TypeError as e:
        assert "the helper writes bf16 pools" in str(e), str(e)
    # Every argument is checked before any launch: a bad second layer leaves the pool as it was.
    good = [torch.full((16, 4, 128), 3.0, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
    bad = [good[0], torch.full((16, 4, 64), 3.0, device=DEV, dtype=torch.bfloat16)]
    loc = torch.arange(8, device=DEV)
    for k_buffers, text in [(bad, "k_buffers[1] must be"), (good[:1], "one entry per attention layer")]:
        try:
            helper.materialize_to_pool(ctx, pos, loc, k_buffers, good)
            raise AssertionError(f"no error for {text}")
        except ValueError as e:
            assert text in str(e), str(e)
    try:
        helper.materialize_to_pool(ctx, pos, loc[:7], good, good)
        raise AssertionError("short cache_loc accepted")
    except ValueError as e:
        assert "cache_loc has 7 entries for 8 tokens" in str(e), str(e)
    torch.cuda.synchronize()
    assert all(bool((b == 3.0).all()) for b in good), "a failed call wrote into the pool"
    # Zero tokens launch nothing and call nothing.
    calls = []
    helper.materialize(ctx[:0], pos[:0], lambda *a: calls.append(a))
    assert calls == []


def test_cuda_graph_capture():
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 3)
    helper = case.helper()
    T, num_slots = 40, 128
    static_ctx, static_pos = case.inputs(T)
    static_loc = torch.arange(T, device=DEV, dtype=torch.int64)
    kb = [torch.zeros(num_slots, 8, 128, device=DEV, dtype=torch.bfloat16) for _ in range(3)]
    vb = [torch.zeros_like(b) for b in kb]
    stacked = {}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up (cuBLAS workspaces) outside the capture
        helper.materialize_to_pool(static_ctx, static_pos, static_loc, kb, vb)
        helper.materialize(static_ctx, static_pos, lambda l, k, v: None)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        helper.materialize_to_pool(static_ctx, static_pos, static_loc, kb, vb)
        helper.materialize(static_ctx, static_pos,
                           lambda l, k, v: stacked.__setitem__(l, (k, v)))
    # New inputs into the static tensors, fresh pools, replay.
    ctx, pos = case.inputs(T)
    static_ctx.copy_(ctx)
    static_pos.copy_(pos)
    perm = torch.randperm(num_slots, generator=GEN)[:T].to(DEV)
    static_loc.copy_(perm)
    for b in kb + vb:
        b.zero_()
    g.replay()
    torch.cuda.synchronize()
    rtol, atol = TOL[torch.bfloat16]
    refs = case.reference(ctx, pos)
    for l, (k_ref, v_ref) in enumerate(refs):
        assert_close(kb[l][perm], k_ref, rtol, atol, f"graph k pool of layer {l}")
        assert_close(vb[l][perm], v_ref, rtol, atol, f"graph v pool of layer {l}")
        assert_close(stacked[l][0], k_ref, rtol, atol, f"graph stacked k of layer {l}")
        untouched = torch.ones(num_slots, dtype=torch.bool, device=DEV)
        untouched[perm] = False
        assert int(kb[l][untouched].abs().sum().item()) == 0
    # The warm-up's output is kept for reuse by eager calls of T=40; the capture took a buffer
    # of the graph's own pool, not that one (else a later T would free memory the graph writes).
    assert helper._kept is not None and helper._kept[0] == T, "the eager output was not kept"
    assert helper._kept[1].data_ptr() != stacked[0][0].data_ptr(), "the capture used the kept buffer"


def test_torch_compile_fullgraph_matches_eager():
    case = Case([layer(8, 128, 128, True, 1e6, "rms")] * 3)
    helper = case.helper()
    T, num_slots = 24, 96

    def step(ctx, pos, loc, kb, vb, stacked):
        helper.materialize_to_pool(ctx, pos, loc, kb, vb)
        helper.materialize(ctx, pos, lambda l, k, v: stacked[l].copy_(k + v))
        return kb[1][loc].float().sum()

    def fresh():
        kb = [torch.full((num_slots, 8, 128), 3.0, device=DEV, dtype=torch.bfloat16) for _ in range(3)]
        return kb, [b.clone() for b in kb], [torch.full((T, 8, 128), 3.0, device=DEV,
                                                         dtype=torch.bfloat16) for _ in range(3)]

    ctx, pos = case.inputs(T)
    loc = torch.randperm(num_slots, generator=GEN)[:T].to(DEV)
    eager = fresh()
    s_eager = step(ctx, pos, loc, *eager)
    torch._dynamo.reset()
    compiled_step = torch.compile(step, fullgraph=True)
    comp = fresh()
    s_comp = compiled_step(ctx, pos, loc, *comp)
    torch.cuda.synchronize()
    # The returned sum is reduced by inductor's own kernel, in another order than eager's: equal
    # to rounding. The buffers the ops wrote must be equal bit for bit.
    assert abs(float(s_eager) - float(s_comp)) <= 1e-5 * abs(float(s_eager)), (float(s_eager), float(s_comp))
    for a, b in zip(sum(eager, []), sum(comp, [])):
        assert torch.equal(a, b), "torch.compile result differs from eager"
    refs = case.reference(ctx, pos)
    rtol, atol = TOL[torch.bfloat16]
    for l, (k_ref, v_ref) in enumerate(refs):
        assert_close(comp[0][l][loc], k_ref, rtol, atol, f"compiled k pool of layer {l}")


def test_precompile_for_this_gpu():
    import shutil
    import tempfile
    cfg = {"fkv": {"layers": [layer(4, 64, 64, True, 1e4, "rms")] * 2}}
    cache = tempfile.mkdtemp(prefix="fkv-py-gpu-")
    try:
        major, minor = torch.cuda.get_device_capability(DEV)
        arch = f"sm_{major}{minor}"
        assert fkv_jit.precompile(cfg, arch, dtype="bf16", cache_dir=cache) == (2, 2)
        assert fkv_jit.precompile(cfg, arch, dtype="bf16", cache_dir=cache) == (2, 0)
    finally:
        shutil.rmtree(cache)


def exact_rand(*shape, den):
    """Random bf16 multiples of 1/den in [-4/den, 4/den]: their products and fp32 sums are exact,
    so every GEMM (any width, split or order) rounds the same values to the same bits."""
    return (torch.randint(-4, 5, shape, generator=GEN).double() / den).to(DEV, torch.bfloat16)


def rank_shard(w, H, D, first, n):
    """A tensor-parallel rank's rows of a [2*H*D, hidden] K/V weight: the K rows of its heads
    [first, first + n), then their V rows (what a TP-local qkv_proj.weight holds after Q)."""
    return torch.cat([w[first * D:(first + n) * D],
                      w[(H + first) * D:(H + first + n) * D]]).contiguous()


def test_tensor_parallel_ranks_equal_tp1_heads():
    """The config helper of each rank (tp_size/tp_rank, given its weight shard) writes exactly
    the heads of the TP=1 output it holds, bit for bit, stacked and pooled (pools poisoned, a
    fifth of the tokens skipped), and matches the float64 reference: TP=2 (4 of 8 heads per
    rank) and TP=16 (one replicated head per rank)."""
    H, D, L, T, num_slots, hidden, poison = 8, 128, 3, 37, 96, 256, 7.0
    case = Case([layer(H, D, D, True, 1e6, "rms")] * L, hidden=hidden)
    case.w = [exact_rand(2 * H * D, hidden, den=16) for _ in range(L)]
    ctx = exact_rand(T, hidden, den=4)
    pos = torch.randint(0, case.max_position, (T,), generator=GEN).to(DEV)
    loc = torch.randperm(num_slots, generator=GEN)[:T]
    loc[::5] = -1
    loc = loc.to(DEV)

    def run(helper, heads):
        stacked = {}
        helper.materialize(ctx, pos, lambda l, k, v: stacked.__setitem__(l, (k.clone(), v.clone())))
        kb = [torch.full((num_slots, heads, D), poison, device=DEV, dtype=torch.bfloat16)
              for _ in range(L)]
        vb = [b.clone() for b in kb]
        helper.materialize_to_pool(ctx, pos, loc, kb, vb)
        torch.cuda.synchronize()
        return stacked, kb, vb

    full, full_k, full_v = run(case.helper(), H)
    refs = case.reference(ctx, pos)
    rtol, atol = TOL[torch.bfloat16]
    for tp, ranks in ((2, (0, 1)), (16, (0, 5, 15))):
        n = H // tp if H % tp == 0 else 1
        for r in ranks:
            first = r * n if H % tp == 0 else r * H // tp
            helper = fkv_jit.FusedKVMaterializeHelper(
                case.config, [rank_shard(w, H, D, first, n) for w in case.w], case.knw,
                tp_size=tp, tp_rank=r)
            g = helper.plan.groups[0]
            assert (g.spec.num_kv_heads, g.first_kv_head) == (n, first), g
            stacked, kb, vb = run(helper, n)
            heads = slice(first, first + n)
            what = f"TP={tp} rank {r}"
            for l in range(L):
                k, v = stacked[l]
                assert tuple(k.shape) == (T, n, D), (what, k.shape)
                assert torch.equal(k, full[l][0][:, heads]), f"{what}: stacked K of layer {l} != TP=1"
                assert torch.equal(v, full[l][1][:, heads]), f"{what}: stacked V of layer {l} != TP=1"
                assert torch.equal(kb[l], full_k[l][:, heads]), f"{what}: K pool of layer {l} != TP=1"
                assert torch.equal(vb[l], full_v[l][:, heads]), f"{what}: V pool of layer {l} != TP=1"
                assert_close(k, refs[l][0][:, heads], rtol, atol, f"{what}: K of layer {l}")
                assert_close(v, refs[l][1][:, heads], rtol, atol, f"{what}: V of layer {l}")
    # The TP=1 pool itself: written rows are the reference's, skipped rows still poison.
    written = loc >= 0
    for l in range(L):
        assert_close(full_k[l][loc[written]], refs[l][0][written], rtol, atol, f"TP=1 K pool of layer {l}")
        untouched = torch.ones(num_slots, dtype=torch.bool, device=DEV)
        untouched[loc[written]] = False
        assert bool((full_k[l][untouched] == poison).all()), f"TP=1 K pool of layer {l}: a skipped row was written"


# ---- materialize_to_layout: a token-major pool (include/fkv/kv_layout.hpp) --------------------

def poisoned(*shape):
    """bf16 filled with 0xffff (a NaN): a written element never has those bits."""
    return torch.full(shape, -1, dtype=torch.int16, device=DEV).view(torch.bfloat16)


def bits(t):
    return t.view(torch.int16)


def test_token_major_layout_equals_per_layer_pool():
    """A token-major pool [num_slots, L, 2, H, D] (the defaults) and a padded one (64 elements
    after each layer's V, 32 at the end of each row, given as fields) written by
    materialize_to_layout hold, at each written slot, the bits of materialize_to_pool's per-layer
    rows of the same inputs (the same kernels), K and V; the reference within tolerance; every
    other element (skipped tokens' and unused slots' rows, the gaps) still poison. T = 8: the
    decode kernel; T = 100: above the crossover (cuBLASLt + epilogue)."""
    H, D, L, num_slots = 8, 128, 3, 160
    KV = H * D
    case = Case([layer(H, D, D, True, 1e6, "rms")] * L)
    helper = case.helper(decode_crossover=64)
    assert helper.decode_crossover == 64
    rtol, atol = TOL[torch.bfloat16]
    layer_stride, row = 2 * KV + 64, L * (2 * KV + 64) + 32
    for T in (8, 100):
        ctx, pos = case.inputs(T)
        loc = torch.randperm(num_slots, generator=GEN)[:T]
        loc[::7] = -1
        loc = loc.to(DEV)
        written = loc >= 0
        slots = loc[written]
        kb = [poisoned(num_slots, H, D) for _ in range(L)]
        vb = [poisoned(num_slots, H, D) for _ in range(L)]
        helper.materialize_to_pool(ctx, pos, loc, kb, vb)
        tm = poisoned(num_slots, L, 2, H, D)
        helper.materialize_to_layout(ctx, pos, loc, "token_major", tm)
        padded = poisoned(num_slots, row)
        helper.materialize_to_layout(ctx, pos, loc, "token_major", padded,
                                     slot_stride=padded.stride(0), layer_stride=layer_stride)
        torch.cuda.synchronize()
        pad = padded[:, : L * layer_stride].view(num_slots, L, layer_stride)
        views = {"default": (tm[:, :, 0], tm[:, :, 1]),
                 "padded": (pad[:, :, :KV].view(num_slots, L, H, D),
                            pad[:, :, KV: 2 * KV].view(num_slots, L, H, D))}
        refs = case.reference(ctx, pos)
        for l in range(L):
            what = f"T={T} layer {l}"
            assert not bool((bits(kb[l][slots]) == -1).any()), f"{what}: per-layer K row unwritten"
            assert not bool((bits(vb[l][slots]) == -1).any()), f"{what}: per-layer V row unwritten"
            for name, (k, v) in views.items():
                assert torch.equal(bits(k[slots, l]), bits(kb[l][slots])), f"{what} {name}: K != per-layer"
                assert torch.equal(bits(v[slots, l]), bits(vb[l][slots])), f"{what} {name}: V != per-layer"
            assert_close(tm[slots, l, 0], refs[l][0][written], rtol, atol, f"{what}: token-major K")
            assert_close(tm[slots, l, 1], refs[l][1][written], rtol, atol, f"{what}: token-major V")
        # Everything else: poison (rows of unused slots, and in the padded pool the gaps).
        untouched = torch.ones(num_slots, dtype=torch.bool, device=DEV)
        untouched[slots] = False
        assert bool((bits(tm[untouched]) == -1).all()), f"T={T}: an unused slot's row was written"
        for b in kb + vb:
            assert bool((bits(b[untouched]) == -1).all()), f"T={T}: a per-layer unused row was written"
        gaps = torch.ones(num_slots, row, dtype=torch.bool, device=DEV)
        for l in range(L):
            gaps[slots, l * layer_stride: l * layer_stride + 2 * KV] = False
        assert bool((bits(padded)[gaps] == -1).all()), f"T={T}: the padded pool's gaps were written"


def test_token_major_layout_refusals():
    """Each refusal names the problem, and none writes: the pool is still poison after them."""
    H, D, L = 4, 128, 2
    case = Case([layer(H, D, D, True, 1e6, "rms")] * L)
    helper = case.helper()
    ctx, pos = case.inputs(8)
    loc = torch.arange(8, device=DEV)
    tm = poisoned(16, L, 2, H, D)
    for kind, pool, fields, exc, text in [
        ("tokens_major", tm, {}, fkv_jit.ArgumentError,
         "unknown KV layout 'tokens_major': use per_layer (or flat, paged), token_major or stacked"),
        ("token_major", tm, {"slot_strid": 1}, fkv_jit.ArgumentError,
         "unknown KV layout field 'slot_strid'"),
        ("token_major", tm, {"slot_stride": 1.5}, TypeError, "integer"),
        ("stacked", tm, {}, ValueError, "takes per-layer (or per-group) buffers"),
        ("token_major", tm.view(torch.float16), {}, TypeError, "the helper writes bf16 pools"),
        ("token_major", tm.transpose(0, 1), {}, ValueError, "pool must be a contiguous tensor"),
        ("token_major", tm, {"num_slots": 17}, ValueError,
         "reaches element 34815 but pool has 32768 elements"),
        ("token_major", tm, {"layer_stride": 4 * H * D}, ValueError, "layout reaches element"),
        ("token_major", tm, {"kv_offset": (H - 1) * D}, ValueError,
         "the token_major layout overlaps itself: kv_offset 384"),
        ("per_layer", ([tm[:, 0, 0]] * L, [tm[:, 0, 1]] * L), {"num_slots": 16}, fkv_jit.ArgumentError,
         "per_layer layout: num_slots not taken"),
    ]:
        try:
            helper.materialize_to_layout(ctx, pos, loc, kind, pool, **fields)
            raise AssertionError(f"no error for {kind} {fields}: {text}")
        except exc as e:
            assert text in str(e), (kind, fields, str(e))
    try:
        helper.materialize_to_layout(ctx, pos, loc, "token_major", tm, k_scales=[1.0] * L,
                                     v_scales=[1.0] * L)
        raise AssertionError("scales accepted for a bf16 pool")
    except ValueError as e:
        assert "fp8" in str(e), str(e)
    try:
        helper.materialize_to_layout(ctx, pos, loc[:7], "token_major", tm)
        raise AssertionError("short cache_loc accepted")
    except ValueError as e:
        assert "cache_loc has 7 entries for 8 tokens" in str(e), str(e)
    torch.cuda.synchronize()
    assert bool((bits(tm) == -1).all()), "a refused call wrote into the pool"
    helper.materialize_to_layout(ctx, pos, loc, "token_major", tm)  # the same call, fixed
    torch.cuda.synchronize()
    assert not bool((bits(tm[:8]) == -1).any()) and bool((bits(tm[8:]) == -1).all())


def main():
    print(f"fkv_jit {fkv_jit.version()} from {fkv_jit.library_path()}; torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(DEV)}")
    from plain_runner import run  # tests/plain_runner.py (on sys.path through gpu_env)

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
