"""CPU tests of fkv_jit.sglang.FusedKVMaterializeHelper (the installed wheel; pytest or plain
python3), with layer objects shaped like sglang's (SimpleNamespace with the attributes sglang's
modules have: self_attn.{num_kv_heads, head_dim, q_size, kv_size, qkv_proj.weight,
k_norm.weight, k_norm.variance_epsilon, rotary_emb}).

No GPU: the layers' weights are on the "meta" device, which makes a shape-only helper (the ops
run their fake implementations). Checked here: the seed's mismatch errors with their exact
texts and order, GPT-J layers accepted, the seed's attributes and their shapes, the
max_position_hint handling (table grown through _ensure_cos_sin_cache_length, the seed's text
when it cannot grow), what materialize hands write_layer_kv (layer index, [T, H, D]), the
argument errors, refresh_weights' refusals, the config helper's new arguments (K/V bias,
cos_sin_cache), and FP8 / INT8 qkv_proj layers stored as sglang's quantized linear methods keep
them (formats read, K/V rows and scale rows picked, refusals). The numbers, graph capture and refresh on a GPU: tests/gpu/test_sglang_gpu.py.
"""

import sys
from types import SimpleNamespace

try:
    import torch
except ImportError:  # pragma: no cover
    print("torch is not installed: the sglang helper tests are skipped")
    sys.exit(0)

import fkv_jit  # noqa: E402
from fkv_jit.sglang import FusedKVMaterializeHelper  # noqa: E402

META = torch.device("meta")
HIDDEN = 96


class Rotary:
    """sglang's RotaryEmbedding as the helper sees it: rotary_dim, is_neox_style, a CPU table
    [max_pos, R] and _ensure_cos_sin_cache_length, which grows it (recorded)."""

    def __init__(self, rotary_dim=64, neox=True, max_pos=32, growable=True):
        self.rotary_dim = rotary_dim
        self.is_neox_style = neox
        self.base = 10000.0
        self.cos_sin_cache = torch.zeros(max_pos, rotary_dim)
        self.grown = []
        if growable:
            self._ensure_cos_sin_cache_length = self._grow

    def _grow(self, max_position):
        self.grown.append(max_position)
        if max_position >= self.cos_sin_cache.shape[0]:
            self.cos_sin_cache = torch.zeros(max_position + 1, self.rotary_dim)


def make_layer(kv=2, d=64, q_heads=4, rotary=None, bias=False, norm=True, device=META,
               dtype=torch.bfloat16, eps=1e-6):
    q_size, kv_size = q_heads * d, kv * d
    qkv = SimpleNamespace(weight=torch.empty(q_size + 2 * kv_size, HIDDEN, dtype=dtype, device=device),
                          bias=torch.empty(q_size + 2 * kv_size, dtype=dtype, device=device) if bias else None)
    attn = SimpleNamespace(num_kv_heads=kv, head_dim=d, q_size=q_size, kv_size=kv_size, qkv_proj=qkv,
                           rotary_emb=rotary or Rotary(d))
    if norm:
        attn.k_norm = SimpleNamespace(weight=torch.empty(d, dtype=dtype, device=device), variance_epsilon=eps)
    return SimpleNamespace(self_attn=attn)


def helper(layers, kv=2, d=64, hint=None, rotary=None):
    rotary = rotary or layers[0].self_attn.rotary_emb
    return FusedKVMaterializeHelper(layers=layers, rotary_emb=rotary, num_kv_heads=kv, head_dim=d,
                                    device=META, max_position_hint=hint)


def raises(cls, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except cls as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {cls.__name__}")


# ---- the seed's errors -----------------------------------------------------------------------

def test_num_kv_heads_mismatch_text():
    e = raises(ValueError, helper, [make_layer(kv=2), make_layer(kv=4)], kv=2)
    assert str(e) == ("num_kv_heads mismatch across layers for fused KV path: "
                      "expected 2, got 4 at layer 1."), str(e)
    # The reference is the constructor's argument, not layer 0 (the seed's rule).
    e = raises(ValueError, helper, [make_layer(kv=2)], kv=8)
    assert str(e) == ("num_kv_heads mismatch across layers for fused KV path: "
                      "expected 8, got 2 at layer 0."), str(e)


def test_head_dim_mismatch_text():
    r = Rotary(64)
    e = raises(ValueError, helper, [make_layer(rotary=r), make_layer(d=128, rotary=r)], rotary=r)
    assert str(e) == ("head_dim mismatch across layers for fused KV path: "
                      "expected 64, got 128 at layer 1."), str(e)


def test_rope_mismatch_text():
    layers = [make_layer(rotary=Rotary(64)), make_layer(rotary=Rotary(32))]
    e = raises(ValueError, helper, layers)
    assert str(e) == ("RoPE config mismatch across layers for fused KV path: expected "
                      "(rotary_dim=64, neox=True), got (rotary_dim=32, neox=True) at layer 1."), str(e)
    layers = [make_layer(rotary=Rotary(64)), make_layer(), make_layer(rotary=Rotary(64, neox=False))]
    e = raises(ValueError, helper, layers)
    assert str(e) == ("RoPE config mismatch across layers for fused KV path: expected "
                      "(rotary_dim=64, neox=True), got (rotary_dim=64, neox=False) at layer 2."), str(e)


def test_checks_run_in_the_seeds_order():
    # Layer 1 differs in heads and in RoPE: the heads are reported (checked first).
    layers = [make_layer(), make_layer(kv=4, rotary=Rotary(32))]
    assert "num_kv_heads mismatch" in str(raises(ValueError, helper, layers))


def test_invalid_rotary_head_pair_text():
    for r in (0, 96, 30 + 1):
        e = raises(ValueError, helper, [make_layer(rotary=Rotary(r))], rotary=Rotary(r))
        assert str(e) == f"Invalid fused KV rotary/head dim pair: rotary_dim={r}, head_dim=64.", str(e)


def test_bias_and_norm_presence_mismatch():
    e = raises(ValueError, helper, [make_layer(bias=True), make_layer(bias=False)])
    assert str(e) == "qkv bias presence mismatch across layers for fused KV path.", str(e)
    e = raises(ValueError, helper, [make_layer(norm=True), make_layer(norm=False)])
    assert str(e) == "k_norm presence mismatch across layers for fused KV path.", str(e)


def test_kv_size_must_match_heads():
    lay = make_layer()
    lay.self_attn.kv_size = 64
    e = raises(ValueError, helper, [lay])
    assert "kv_size of layer 0 is 64" in str(e), str(e)


# ---- accepted layers and the seed's attributes -----------------------------------------------

def test_gptj_style_is_accepted():
    r = Rotary(64, neox=False)
    h = helper([make_layer(rotary=r) for _ in range(3)], rotary=r)
    assert h.is_neox_style is False and h.rotary_dim == 64
    assert h.plan.groups[0].spec.is_neox_style is False


def test_partial_rotary_and_tp_local_layers():
    # A TP rank's share: 1 KV head of a model with more, 2 query heads; rotary_dim < head_dim.
    r = Rotary(32)
    layers = [make_layer(kv=1, d=128, q_heads=2, rotary=r) for _ in range(2)]
    h = helper(layers, kv=1, d=128, rotary=r)
    assert h.kv_size == 128 and h.layer_out_dim == 256
    assert tuple(h.flat_kv_weight_t.shape) == (HIDDEN, 2 * 256)


def test_seed_attributes_and_shapes():
    layers = [make_layer(eps=1e-5), make_layer(eps=1e-6), make_layer(eps=2e-6)]
    h = helper(layers)
    assert h.n_layers == 3 and h.num_kv_heads == 2 and h.head_dim == 64
    assert h.kv_size == 128 and h.layer_out_dim == 256
    assert tuple(h.flat_kv_weight_t.shape) == (HIDDEN, 3 * 256)
    assert h.flat_kv_weight_t.dtype == torch.bfloat16
    assert tuple(h.k_norm_weights.shape) == (3, 64) and h.k_norm_weights.dtype == torch.float32
    assert torch.allclose(h.eps_values, torch.tensor([1e-5, 1e-6, 2e-6]))
    assert h.max_position_hint is None
    # Without a K norm: no weights, and the plan says so.
    h = helper([make_layer(norm=False), make_layer(norm=False)])
    assert h.k_norm_weights is None and h.plan.groups[0].spec.k_norm == "none"


def test_max_position_hint_grows_the_engine_table():
    r = Rotary(64, max_pos=32)
    h = helper([make_layer(rotary=r)], rotary=r, hint=100)
    assert h.max_position_hint == 99  # the seed stores the largest position
    assert r.grown == [99] and r.cos_sin_cache.shape[0] == 100
    assert h._cos_sin_src is r.cos_sin_cache  # the table the kernels read
    # Inside the table: not grown again.
    r2 = Rotary(64, max_pos=32)
    helper([make_layer(rotary=r2)], rotary=r2, hint=32)
    assert r2.grown == []
    # No _ensure_cos_sin_cache_length and a short table: the seed's RuntimeError text.
    r3 = Rotary(64, max_pos=32, growable=False)
    e = raises(RuntimeError, helper, [make_layer(rotary=r3)], rotary=r3, hint=100)
    assert str(e) == ("RoPE cos/sin cache is too short for fused KV materialization: "
                      "max_position=99, cache_len=32."), str(e)
    assert helper([make_layer(rotary=Rotary(64))], hint=0).max_position_hint == 0


# ---- materialize -------------------------------------------------------------------------------

def test_materialize_hands_each_layer_index_and_shape():
    h = helper([make_layer() for _ in range(3)], hint=64)
    seen = []
    h.materialize(torch.empty(5, HIDDEN, dtype=torch.bfloat16, device=META),
                  torch.empty(5, dtype=torch.int32, device=META),
                  lambda i, k, v: seen.append((i, tuple(k.shape), tuple(v.shape), k.dtype)))
    assert seen == [(i, (5, 2, 64), (5, 2, 64), torch.bfloat16) for i in range(3)], seen
    # 2-D positions are flattened (the seed's reshape); T = 0 calls nothing.
    seen.clear()
    h.materialize(torch.empty(4, HIDDEN, dtype=torch.bfloat16, device=META),
                  torch.empty(2, 2, dtype=torch.int64, device=META), lambda *a: seen.append(a))
    assert len(seen) == 3
    seen.clear()
    h.materialize(torch.empty(0, HIDDEN, dtype=torch.bfloat16, device=META),
                  torch.empty(0, dtype=torch.int64, device=META), lambda *a: seen.append(a))
    assert seen == []


def test_materialize_converts_the_activation_dtype():
    h = helper([make_layer()], hint=64)
    seen = []
    h.materialize(torch.empty(3, HIDDEN, dtype=torch.float32, device=META),
                  torch.empty(3, dtype=torch.int64, device=META), lambda i, k, v: seen.append(k.dtype))
    assert seen == [torch.bfloat16]


def test_materialize_positions_count_text():
    h = helper([make_layer()], hint=64)
    e = raises(ValueError, h.materialize, torch.empty(4, HIDDEN, dtype=torch.bfloat16, device=META),
               torch.empty(3, dtype=torch.int64, device=META), lambda *a: None)
    assert str(e) == ("positions must match ctx_hidden token count for fused KV materialization: "
                      "positions=3, total_ctx=4."), str(e)


# ---- refresh_weights ---------------------------------------------------------------------------

def test_refresh_weights_refusals():
    layers = [make_layer() for _ in range(2)]
    h = helper(layers)
    h.refresh_weights([make_layer() for _ in range(2)])  # same layout: accepted
    e = raises(ValueError, h.refresh_weights, layers[:1])
    assert str(e) == "fused KV refresh cannot change layer count", str(e)
    for changed in (make_layer(q_heads=4, kv=2, d=64, dtype=torch.float16),  # dtype
                    make_layer(kv=4),                                          # shape
                    make_layer(norm=False),                                    # norm presence
                    make_layer(bias=True)):                                    # bias presence
        e = raises(ValueError, h.refresh_weights, [layers[0], changed])
        assert str(e) == "fused KV refresh cannot change weight layout", str(e)
    lay = make_layer()
    lay.self_attn.k_norm.weight = torch.empty(32, dtype=torch.bfloat16, device=META)
    e = raises(ValueError, h.refresh_weights, [layers[0], lay])
    assert str(e) == "fused KV refresh cannot change weight layout", str(e)


# ---- the config helper's new arguments (used by this helper and the vLLM adapter) ------------

def test_config_helper_bias_and_table_arguments():
    cfg = {"hidden_size": HIDDEN, "max_position_embeddings": 64,
           "fkv": {"layers": [{"num_kv_heads": 2, "head_dim": 64, "rotary_dim": 64,
                               "is_neox_style": True, "rope_theta": 1e4, "k_norm": "none"}] * 2}}
    w = [torch.empty(256, HIDDEN, dtype=torch.bfloat16, device=META)] * 2
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w, kv_biases=[torch.empty(256), None])
    assert "give a bias for every attention layer" in str(e), str(e)
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w, kv_biases=[torch.empty(128)] * 2)
    assert "kv_biases[0] has shape (128,), expected (256,)" in str(e), str(e)
    fkv_jit.FusedKVMaterializeHelper(cfg, w, kv_biases=[torch.empty(256)] * 2, paged=True,
                                     cos_sin_cache=torch.zeros(64, 64))
    two = dict(cfg, fkv={"layers": [cfg["fkv"]["layers"][0],
                                    dict(cfg["fkv"]["layers"][0], num_kv_heads=1)]})
    w2 = [w[0], torch.empty(128, HIDDEN, dtype=torch.bfloat16, device=META)]
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, two, w2, grouped=True,
               cos_sin_cache=torch.zeros(64, 64))
    assert "cos_sin_cache serves one table" in str(e), str(e)


def test_pool_options_rejected_when_traced_paths_cannot_take_them():
    h = helper([make_layer(norm=False)], hint=64)
    hid = torch.empty(2, HIDDEN, dtype=torch.bfloat16, device=META)
    pos = torch.empty(2, dtype=torch.int64, device=META)
    buf = [torch.empty(8, 2, 64, dtype=torch.bfloat16, device=META)]
    e = raises(NotImplementedError, h.materialize_to_pool, hid, pos, pos, buf, buf,
               slot_mappings=[pos])
    assert "slot_mappings and tensor scales" in str(e), str(e)


def test_eps_must_be_finite_and_positive():
    """Issue 23 item 20: variance_epsilon = NaN used to surface as "malformed JSON at byte 196"
    about a config the user never wrote. Now the eps itself is named."""
    for bad in (float("nan"), float("inf"), 0.0, -1e-6):
        e = raises(ValueError, helper, [make_layer(), make_layer(eps=bad)])
        assert "variance_epsilon of layer 1" in str(e) and "eps" in str(e), str(e)
        assert "JSON" not in str(e), str(e)
    # The config helper's eps argument likewise.
    cfg = {"hidden_size": HIDDEN, "fkv": {"layers": [
        {"num_kv_heads": 2, "head_dim": 64, "rotary_dim": 64, "is_neox_style": True,
         "rope_theta": 10000.0}] * 2}}
    w = [torch.empty(256, HIDDEN, dtype=torch.bfloat16, device=META)] * 2
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w, None, [1e-6, float("nan")])
    assert "eps[1]" in str(e) and "finite" in str(e), str(e)


# ---- quantized qkv_proj, as sglang's Fp8LinearMethod / W8A8Int8LinearMethod keep it ------------

FP8 = getattr(torch, "float8_e4m3fn", None)


def quant_layer(kind, kv=2, d=64, q_heads=4, device=META, transposed=True, block_size=(128, 128),
                orig_dtype=torch.bfloat16, norm=True):
    """A layer whose qkv_proj.weight is the [in, out] view .t() of the stored [out, in] FP8/INT8
    matrix (what process_weights_after_loading leaves), with its scales: kind "tensor" (one
    value), "channel" ([out, 1]), "block" (weight_scale_inv [out/128, in/128]), "int8"."""
    q_size, kv_size = q_heads * d, kv * d
    n = q_size + 2 * kv_size
    stored = torch.empty(n, HIDDEN, dtype=torch.int8 if kind == "int8" else FP8, device=device)
    proj = SimpleNamespace(weight=stored.t() if transposed else stored, bias=None)
    if orig_dtype is not None:
        proj.orig_dtype = orig_dtype
    if kind == "block":
        proj.weight_scale_inv = torch.empty(-(-n // 128), -(-HIDDEN // 128), device=device)
        proj.quant_method = SimpleNamespace(weight_block_size=list(block_size))
    elif kind == "tensor":
        proj.weight_scale = torch.empty((), device=device)
    else:
        proj.weight_scale = torch.empty(n, 1, device=device)
    attn = SimpleNamespace(num_kv_heads=kv, head_dim=d, q_size=q_size, kv_size=kv_size,
                           qkv_proj=proj, rotary_emb=Rotary(d))
    if norm:
        attn.k_norm = SimpleNamespace(weight=torch.empty(d, dtype=torch.bfloat16, device=device),
                                      variance_epsilon=1e-6)
    return SimpleNamespace(self_attn=attn)


def test_quantized_layers_build_trace_and_refresh():
    formats = {"tensor": "fp8_tensor", "channel": "fp8_channel", "block": "fp8_block",
               "int8": "int8_channel"}
    for kind, fmt in formats.items():
        layers = [quant_layer(kind) for _ in range(2)]
        h = helper(layers)
        assert h.weight_format == fmt and h.act_dtype == torch.bfloat16, (kind, h.weight_format)
        stored = torch.int8 if kind == "int8" else FP8
        assert h.flat_kv_weight_t.dtype == stored and tuple(h.flat_kv_weight_t.shape) == (HIDDEN, 2 * 256)
        assert fmt in repr(h)
        got = []
        h.materialize(torch.empty(3, HIDDEN, device=META), torch.empty(3, dtype=torch.int64, device=META),
                      lambda i, k, v: got.append((i, tuple(k.shape), k.dtype)))
        assert got == [(0, (3, 2, 64), torch.bfloat16), (1, (3, 2, 64), torch.bfloat16)], got
        h.refresh_weights([quant_layer(kind) for _ in range(2)])  # same layout: accepted
        e = raises(ValueError, h.refresh_weights, [make_layer(), make_layer()])
        assert str(e) == "fused KV refresh cannot change weight layout"
        other = "channel" if kind != "channel" else "tensor"
        e = raises(ValueError, h.refresh_weights, [quant_layer(other) for _ in range(2)])
        assert str(e) == "fused KV refresh cannot change weight layout"
    # The weight as stored ([out, in], not transposed) reads the same.
    assert helper([quant_layer("channel", transposed=False)] * 2).weight_format == "fp8_channel"
    # The activation dtype: orig_dtype, else the K-norm weight's, else act_dtype must be given.
    h = helper([quant_layer("block", orig_dtype=None)] * 2)
    assert h.act_dtype == torch.bfloat16
    layers = [quant_layer("int8", orig_dtype=None, norm=False)] * 2
    e = raises(fkv_jit.ArgumentError, FusedKVMaterializeHelper, layers=layers,
               rotary_emb=layers[0].self_attn.rotary_emb, num_kv_heads=2, head_dim=64, device=META)
    assert "pass act_dtype" in str(e), str(e)
    h = FusedKVMaterializeHelper(layers=layers, rotary_emb=layers[0].self_attn.rotary_emb,
                                 num_kv_heads=2, head_dim=64, device=META, act_dtype=torch.float16)
    assert h.act_dtype == torch.float16 and h.weight_format == "int8_channel"


def test_quantized_layer_refusals():
    # Block sizes other than 128 x 128, UE8M0-packed scales, q_size off the block grid.
    e = raises(fkv_jit.UnsupportedModelError, helper, [quant_layer("block", block_size=(64, 64))] * 2)
    assert "weight_block_size [64, 64]" in str(e), str(e)
    layer = quant_layer("block")
    layer.self_attn.qkv_proj.weight_scale_inv = torch.empty(4, 1, dtype=torch.int32, device=META)
    e = raises(fkv_jit.UnsupportedModelError, helper, [layer] * 2)
    assert "UE8M0" in str(e), str(e)
    e = raises(fkv_jit.UnsupportedModelError, helper, [quant_layer("block", q_heads=3)] * 2)
    assert "q_size=192 and 2*kv_size=256 must be whole 128-row scale blocks" in str(e), str(e)
    # A scale count that is none of 1, 3 (per q/k/v partition) or one per row.
    layer = quant_layer("tensor")
    layer.self_attn.qkv_proj.weight_scale = torch.empty(5, device=META)
    e = raises(ValueError, helper, [layer] * 2)
    assert "weight_scale has 5 values" in str(e) and "3 (one per q, k, v partition)" in str(e), str(e)
    layer = quant_layer("int8")
    layer.self_attn.qkv_proj.weight_scale = torch.empty((), device=META)
    e = raises(ValueError, helper, [layer] * 2)
    assert "weight_scale has 1 values; torch.int8 weights are read with 3 (one per q, k, v partition) or 512" in str(e), str(e)
    # Marlin-repacked or packed 4-bit weights; GPTQ/AWQ modules with a qweight only.
    layer = quant_layer("channel")
    layer.self_attn.qkv_proj.weight = torch.empty(HIDDEN, 128, dtype=torch.int32, device=META)
    e = raises(fkv_jit.UnsupportedModelError, helper, [layer] * 2)
    assert "torch.int32" in str(e), str(e)
    layer = quant_layer("channel")
    layer.self_attn.qkv_proj = SimpleNamespace(qweight=torch.empty(HIDDEN, 64, dtype=torch.int32))
    e = raises(fkv_jit.UnsupportedModelError, helper, [layer] * 2)
    assert "packed 4-bit GPTQ/AWQ" in str(e), str(e)
    # Every layer stored alike.
    e = raises(ValueError, helper, [quant_layer("channel"), quant_layer("tensor")])
    assert "stored alike" in str(e), str(e)
    e = raises(ValueError, helper, [quant_layer("channel"), make_layer()])
    assert "stored alike" in str(e), str(e)


def test_quantized_rows_and_scales_are_the_kv_rows():
    # On CPU tensors, through the reader itself: the K/V rows of the stored matrix (also through
    # the transposed view) and the matching scale rows and row blocks.
    from fkv_jit._quant import qkv_kv_rows as _kv_rows

    d, kv, q_heads = 64, 2, 4
    q_size, kv_size = q_heads * d, kv * d
    n = q_size + 2 * kv_size
    values = (torch.arange(n * HIDDEN, dtype=torch.float32).reshape(n, HIDDEN) % 97) - 48
    for dtype in (FP8, torch.int8):
        stored = values.to(dtype)
        for weight in (stored, stored.t()):
            proj = SimpleNamespace(weight=weight, weight_scale=torch.arange(n, dtype=torch.float32)[:, None])
            rows, scale, fmt = _kv_rows(proj, q_size, kv_size, 0)
            assert fmt == ("fp8_channel" if dtype == FP8 else "int8_channel")
            assert torch.equal(rows.float(), stored.float()[q_size:n]), dtype
            assert torch.equal(scale, torch.arange(q_size, n, dtype=torch.float32))
    inv = torch.arange(4 * 1, dtype=torch.float32).reshape(4, 1)  # n = 512 rows: 4 row blocks
    proj = SimpleNamespace(weight=values.to(FP8).t(), weight_scale_inv=inv)
    rows, scale, fmt = _kv_rows(proj, q_size, kv_size, 0)
    assert fmt == "fp8_block" and torch.equal(scale, inv[2:4])
    assert torch.equal(rows.float(), values.to(FP8).float()[q_size:n])
    proj = SimpleNamespace(weight=values.to(FP8).t(), weight_scale=torch.tensor(0.5))
    rows, scale, fmt = _kv_rows(proj, q_size, kv_size, 0)
    assert fmt == "fp8_tensor" and scale.tolist() == [0.5]
    # vLLM's compressed-tensors FP8 before process_weights_after_loading: [out, in] with one
    # scale per q/k/v partition (read per row: K rows at the k scale, V rows at the v one) ...
    proj = SimpleNamespace(weight=values.to(FP8), weight_scale=torch.tensor([0.25, 0.5, 2.0]))
    rows, scale, fmt = _kv_rows(proj, q_size, kv_size, 0)
    assert fmt == "fp8_channel" and scale.tolist() == [0.5] * kv_size + [2.0] * kv_size
    assert torch.equal(rows.float(), values.to(FP8).float()[q_size:n])
    proj = SimpleNamespace(weight=values.to(torch.int8), weight_scale=torch.tensor([1.0, 3.0, 4.0]))
    assert _kv_rows(proj, q_size, kv_size, 0)[2] == "int8_channel"
    # ... and its block strategy's [ceil(out/128), ceil(in/128)] weight_scale.
    wide = (torch.arange(n * 384, dtype=torch.float32).reshape(n, 384) % 89) - 44
    blocks = torch.arange(4 * 3, dtype=torch.float32).reshape(4, 3)
    proj = SimpleNamespace(weight=wide.to(FP8), weight_scale=blocks)
    rows, scale, fmt = _kv_rows(proj, q_size, kv_size, 0)
    assert fmt == "fp8_block" and torch.equal(scale, blocks[2:4]) and rows.shape == (2 * kv_size, 384)
    proj = SimpleNamespace(weight=wide.to(FP8), weight_scale=torch.ones(4, 2))
    e = raises(ValueError, _kv_rows, proj, q_size, kv_size, 0)
    assert "block scales of a (512, 384) weight are (4, 3)" in str(e), str(e)


def main():
    from plain_runner import run  # tests/plain_runner.py, beside this file

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
