"""CPU tests of fkv_jit's torch custom ops (the installed wheel; pytest or plain python3).

No GPU: the helper is built on "meta" tensors (shape-only: the ops run their fake
implementations), which is what torch.compile traces with. Checked here:
  - the ops are registered with their mutation annotations (the pool buffers are declared
    written, so the compiler orders pool reads after the op);
  - torch.compile(fullgraph=True) of functions calling materialize (with a write_layer_kv that
    writes into a pool) and materialize_to_pool compiles with no graph break, each op once in
    the graph, and the compiled result has eager's shapes;
  - fake output shapes follow the plan (one group and several groups);
  - the helper's argument errors are raised before anything runs;
  - materialize_to_layout's refusals that need no GPU (per_layer kinds through the fake, no
    layout fields with them, other kinds only on a CUDA helper);
  - under tensor parallelism (tp_size/tp_rank) the helper takes the rank's weight shard and
    its outputs hold the rank's heads;
  - a helper reads its config once: built from a Config whose file was removed, or from a path
    (parsed by the helper itself, once), it holds the library's plan of its rank;
  - quantized weights (FP8 / INT8 with weight_format, weight_scales, act_dtype): every format
    builds a meta helper that traces and refreshes, and each wrong argument (4-bit schemes,
    missing or misshaped scales, a dtype the format does not store, act_dtype) is refused.
The GPU results of the same ops: tests/gpu/test_python_gpu.py.
"""

import sys
from pathlib import Path

try:
    import torch
except ImportError:  # pragma: no cover
    print("torch is not installed: the torch op tests are skipped")
    sys.exit(0)

import fkv_jit  # noqa: E402

META = torch.device("meta")
DATA = Path(__file__).resolve().parent / "data"


def layer(kv=2, d=64, r=64, neox=True, theta=10000.0, k_norm="rms"):
    return {"num_kv_heads": kv, "head_dim": d, "rotary_dim": r, "is_neox_style": neox,
            "rope_theta": theta, "k_norm": k_norm, "eps": 1e-6}


HIDDEN = 96


def meta_helper(layers, grouped=False):
    cfg = {"hidden_size": HIDDEN, "max_position_embeddings": 256, "fkv": {"layers": layers}}
    w = [torch.empty(2 * l["num_kv_heads"] * l["head_dim"], HIDDEN, dtype=torch.bfloat16,
                     device=META) for l in layers]
    norms = [torch.ones(l["head_dim"]) if l["k_norm"] != "none" else None for l in layers]
    if all(n is None for n in norms):
        norms = None
    return fkv_jit.FusedKVMaterializeHelper(cfg, w, norms, grouped=grouped)


def raises(cls, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except cls as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {cls.__name__}")


class Recorder:
    """A torch.compile backend that keeps the FX graph and runs it through aot_eager (so the
    mutating op also goes through functionalization)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        from torch._dynamo.backends.common import aot_autograd
        from functorch.compile import make_boxed_func
        return aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward))(gm, example_inputs)

    def ops(self):
        names = []
        for gm in self.graphs:
            for n in gm.graph.nodes:
                if n.op == "call_function" and "fkv_jit" in str(n.target):
                    names.append(str(n.target).replace(".default", ""))
        return names


def test_ops_registered_with_mutations():
    schema = torch.ops.fkv_jit.materialize_to_pool.default._schema
    mutated = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert mutated == ["k_buffers", "v_buffers"], str(schema)
    schema = torch.ops.fkv_jit.materialize.default._schema
    assert not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def test_fake_shapes():
    h = meta_helper([layer()] * 3)
    T = 5
    out = torch.ops.fkv_jit.materialize(h._handle, torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META),
                                        torch.empty(T, dtype=torch.int64, device=META))
    assert out.shape == (T * 2 * 3 * 2 * 64,) and out.dtype == torch.bfloat16, out.shape
    seen = []
    h.materialize(torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META),
                  torch.empty(T, dtype=torch.int32, device=META),
                  lambda lid, k, v: seen.append((lid, tuple(k.shape), tuple(v.shape))))
    assert seen == [(i, (T, 2, 64), (T, 2, 64)) for i in range(3)], seen
    assert h.decode_crossover == 0  # a shape-only helper has no decode-size kernel
    # Grouped plans: each layer gets its own group's shape, in model order.
    g = meta_helper([layer(kv=2), layer(kv=4, d=32, r=32), layer(kv=2)], grouped=True)
    seen = []
    g.materialize(torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META),
                  torch.empty(T, dtype=torch.int64, device=META),
                  lambda lid, k, v: seen.append((lid, tuple(k.shape))))
    assert seen == [(0, (T, 2, 64)), (1, (T, 4, 32)), (2, (T, 2, 64))], seen


def test_compile_fullgraph_pool():
    h = meta_helper([layer()] * 2)
    kb = [torch.empty(64, 2, 64, dtype=torch.bfloat16, device=META) for _ in range(2)]
    vb = [torch.empty(64, 2, 64, dtype=torch.bfloat16, device=META) for _ in range(2)]

    def step(hidden, positions, loc):
        h.materialize_to_pool(hidden, positions, loc, kb, vb)
        return kb[0].float().sum(), vb[1][loc]  # reads of the pool after the op

    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend=rec)
    T = 8
    args = (torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META),
            torch.empty(T, dtype=torch.int64, device=META), torch.empty(T, dtype=torch.int64, device=META))
    s, rows = compiled(*args)
    es, erows = step(*args)
    assert rows.shape == erows.shape == (T, 2, 64) and s.shape == es.shape
    assert rec.ops() == ["fkv_jit.materialize_to_pool"], rec.ops()


def test_compile_fullgraph_seed_shape():
    h = meta_helper([layer()] * 3)
    pool_k = [torch.empty(64, 2, 64, dtype=torch.bfloat16, device=META) for _ in range(3)]

    def step(hidden, positions, loc):
        def write_layer_kv(lid, k, v):
            pool_k[lid][loc] = k + v
        h.materialize(hidden, positions, write_layer_kv)
        return pool_k[2][loc]

    rec = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend=rec)
    T = 4
    args = (torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META),
            torch.empty(T, dtype=torch.int64, device=META), torch.empty(T, dtype=torch.int64, device=META))
    assert compiled(*args).shape == step(*args).shape == (T, 2, 64)
    assert rec.ops() == ["fkv_jit.materialize"], rec.ops()


def test_helper_errors_before_running():
    e = raises(ValueError, meta_helper, [layer(), layer(kv=4)])
    assert str(e) == "num_kv_heads mismatch across layers for fused KV path: expected 2, got 4 at layer 1."
    cfg = {"hidden_size": HIDDEN, "fkv": {"layers": [layer()] * 2}}
    w = [torch.empty(256, HIDDEN, dtype=torch.bfloat16, device=META)] * 2
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, w)
    assert "K norm" in str(e)
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg,
               [torch.empty(255, HIDDEN, dtype=torch.bfloat16, device=META)] * 2, [torch.ones(64)] * 2)
    assert "expected (256, 96)" in str(e), str(e)
    e = raises(TypeError, fkv_jit.FusedKVMaterializeHelper, cfg, w, [torch.ones(64)] * 2,
               kv_cache_dtype=torch.int16)
    assert "kv_cache_dtype" in str(e)
    h = meta_helper([layer()] * 2)
    e = raises(TypeError, h.materialize, torch.empty(2, HIDDEN, device=META),
               torch.empty(2, dtype=torch.float32, device=META), lambda *a: None)
    assert "positions must be int32 or int64" in str(e)
    e = raises(TypeError, h.materialize_to_pool, torch.empty(2, HIDDEN, device=META),
               torch.empty(2, dtype=torch.int64, device=META), [0, 1], [], [])
    assert "cache_loc must be a torch tensor" in str(e)


def test_helper_tensor_parallel_shapes():
    # A Qwen3 draft: 8 KV heads of 128, hidden 2560, 5 layers. Rank 1 of 2 holds heads [4, 8):
    # its weights are [2 * 4 * 128, 2560] per layer.
    cfg = fkv_jit.load_config(DATA / "dflash-qwen3-4b-draft.json")
    L, hidden = len(cfg.attention_layers), cfg.hidden_size
    assert (cfg.layer(0).num_kv_heads, cfg.layer(0).head_dim, hidden) == (8, 128, 2560)

    def weights(heads):
        return [torch.empty(2 * heads * 128, hidden, dtype=torch.bfloat16, device=META)
                for _ in range(L)]

    norms = [torch.ones(128)] * L
    h = fkv_jit.FusedKVMaterializeHelper(cfg, weights(4), norms, tp_size=2, tp_rank=1)
    assert (h.tp_size, h.tp_rank) == (2, 1)
    assert h.plan.groups[0].spec.num_kv_heads == 4 and h.plan.groups[0].first_kv_head == 4
    T = 3
    seen = []
    h.materialize(torch.empty(T, hidden, dtype=torch.bfloat16, device=META),
                  torch.empty(T, dtype=torch.int64, device=META),
                  lambda lid, k, v: seen.append((lid, tuple(k.shape), tuple(v.shape))))
    assert seen == [(i, (T, 4, 128), (T, 4, 128)) for i in range(L)], seen
    out = torch.ops.fkv_jit.materialize(h._handle, torch.empty(T, hidden, dtype=torch.bfloat16, device=META),
                                        torch.empty(T, dtype=torch.int64, device=META))
    assert out.shape == (2 * L * T * 4 * 128,), out.shape

    # The global weights (all 8 heads) are rejected, saying which heads the rank holds.
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, weights(8), norms, tp_size=2, tp_rank=1)
    assert str(e).startswith("kv_weights[0] (layer 0) has shape (2048, 2560), expected (1024, 2560)"), str(e)
    assert "rank 1 of 2 holds 4 of the 8 KV heads, [4, 8)" in str(e), str(e)
    # ... and the rank's shard without tp_size is rejected as before (the whole model expected).
    e = raises(ValueError, fkv_jit.FusedKVMaterializeHelper, cfg, weights(4), norms)
    assert "expected (2048, 2560)" in str(e) and "rank" not in str(e), str(e)

    # One replicated head per rank when the model has fewer KV heads than ranks.
    r = fkv_jit.FusedKVMaterializeHelper(cfg, weights(1), norms, tp_size=16, tp_rank=5)
    g = r.plan.groups[0]
    assert (g.spec.num_kv_heads, g.first_kv_head, g.replicated) == (1, 2, True), g

    # Bad splits and ranks fail before any weight is looked at.
    e = raises(fkv_jit.ConfigMismatchError, fkv_jit.FusedKVMaterializeHelper, cfg, weights(4), norms,
               tp_size=3)
    assert "num_kv_heads=8 cannot be split across tp_size=3 ranks" in str(e), str(e)
    e = raises(fkv_jit.ArgumentError, fkv_jit.FusedKVMaterializeHelper, cfg, weights(4), norms,
               tp_size=2, tp_rank=2)
    assert str(e) == "tp_rank 2 is outside [0, tp_size=2)", str(e)


def test_helper_reads_its_config_once():
    # The helper takes the Config object (the library's, read once by load_config) and makes the
    # rank's plan from it: the file is gone by then.
    import os
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="fkv-py-helper-")
    path = os.path.join(tmp, "config.json")
    shutil.copy(DATA / "dflash-qwen3-4b-draft.json", path)
    try:
        cfg = fkv_jit.load_config(path)
        os.remove(path)
        L, hidden = len(cfg.attention_layers), cfg.hidden_size
        w = [torch.empty(2 * 4 * 128, hidden, dtype=torch.bfloat16, device=META) for _ in range(L)]
        h = fkv_jit.FusedKVMaterializeHelper(cfg, w, [torch.ones(128)] * L, tp_size=2, tp_rank=0)
        assert h.config is cfg
        assert h.plan.config is cfg and (h.plan.tp_size, h.plan.tp_rank) == (2, 0)
        g = h.plan.groups[0]
        assert (g.spec.num_kv_heads, g.first_kv_head, g.total_kv_heads) == (4, 0, 8), g
        # A path is read by the helper, once; a missing one is bad input, as in load_config.
        e = raises(fkv_jit.BadInputError, fkv_jit.FusedKVMaterializeHelper, path, w)
        assert path in str(e), str(e)
    finally:
        shutil.rmtree(tmp)


def test_output_reuse_guard_sees_every_holder():
    # The check materialize makes before handing its last output buffer out again (CPU tensors:
    # the same storage bookkeeping as CUDA ones): unheld only while nothing but the helper's own
    # tuple refers to the views and no other view shares the storage.
    from fkv_jit import materializer as m
    assert m._use_count is not None, "this torch has no storage use count: reuse is off"
    out = torch.empty(6, 4, 2, 8)
    kv = out.unbind(0)
    kept = (4, out, kv, m._storage_uses(out), m._view_refs(kv))
    assert m._unheld(kept)
    held = kv[3]                      # the engine keeps a view it was given
    assert not m._unheld(kept)
    del held
    assert m._unheld(kept)
    derived = kv[0].reshape(-1)       # ... or a view of one
    assert not m._unheld(kept)
    del derived
    assert m._unheld(kept)
    sliced = out[1:]                  # any other tensor on the storage
    assert not m._unheld(kept)
    del sliced
    copied = kv[2].clone()            # a copy holds nothing
    assert m._unheld(kept), copied.shape


def test_fakes_check_what_the_cuda_path_checks():
    """Issue 23 item 19: the fake implementations (and so a meta helper and torch.compile's
    trace) accepted what the CUDA path refuses (wrong dtype or hidden width, 3-D input,
    positions of the wrong length, a pool of the wrong dtype or shape) and took output shapes
    from the wrong dimensions. They now raise the binding's errors."""
    h = meta_helper([layer()] * 2)  # 2 KV heads of 64, bf16, hidden 96
    T = 4
    hid = torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META)
    pos = torch.empty(T, dtype=torch.int64, device=META)
    op = torch.ops.fkv_jit.materialize
    assert op(h._handle, hid, pos).shape == (T * 2 * 2 * 2 * 64,)
    e = raises(TypeError, op, h._handle, hid.float(), pos)
    assert ("ctx_hidden dtype torch.float32 differs from the helper's activation dtype bf16"
            in str(e)), str(e)
    e = raises(ValueError, op, h._handle, torch.empty(T, HIDDEN - 1, dtype=torch.bfloat16, device=META), pos)
    assert "ctx_hidden must be [num_tokens, 96]" in str(e), str(e)
    raises(ValueError, op, h._handle, torch.empty(T, 1, HIDDEN, dtype=torch.bfloat16, device=META), pos)
    e = raises(ValueError, op, h._handle, hid, torch.empty(T + 1, dtype=torch.int64, device=META))
    assert "positions=5, total_ctx=4" in str(e), str(e)
    raises(TypeError, op, h._handle, hid, pos.int())
    # Through the helper (meta: the op's fake runs) the same errors.
    raises(ValueError, h.materialize, torch.empty(T, 1, HIDDEN, dtype=torch.bfloat16, device=META),
           pos, lambda *a: None)
    raises(ValueError, h.materialize, hid, torch.empty(T + 1, dtype=torch.int64, device=META),
           lambda *a: None)

    def pool(shape=(64, 2, 64), dtype=torch.bfloat16, n=2):
        return [torch.empty(*shape, dtype=dtype, device=META) for _ in range(n)]

    loc = torch.empty(T, dtype=torch.int64, device=META)
    h.materialize_to_pool(hid, pos, loc, pool(), pool())  # right: no error
    h.materialize_to_pool(hid, pos, loc, pool((64, 128)), pool((64, 128)))  # [slots, H*D] too
    e = raises(TypeError, h.materialize_to_pool, hid, pos, loc, pool(dtype=torch.float16), pool())
    assert "k_buffers[0] is torch.float16; the helper writes bf16 pools" in str(e), str(e)
    e = raises(ValueError, h.materialize_to_pool, hid, pos, loc, pool((64, 4, 64)), pool((64, 4, 64)))
    assert "k_buffers[0] must be [num_slots, num_kv_heads, head_dim]" in str(e), str(e)
    e = raises(ValueError, h.materialize_to_pool, hid, pos, loc, pool(), pool((32, 2, 64)))
    assert "same layout" in str(e), str(e)
    e = raises(ValueError, h.materialize_to_pool, hid, pos,
               torch.empty(T + 2, dtype=torch.int64, device=META), pool(), pool())
    assert "cache_loc has 6 entries for 4 tokens" in str(e), str(e)
    raises(TypeError, h.materialize_to_pool, hid.half(), pos, loc, pool(), pool())
    raises(ValueError, h.materialize_to_pool, hid, pos, loc, pool(), pool(), k_scales=[1.0, 1.0])

    # torch.compile fails at trace time instead of tracing the wrong shapes.
    def step(hidden, positions):
        out = []
        h.materialize(hidden, positions, lambda lid, k, v: out.append(k))
        return out[0]

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="eager")
    assert compiled(hid, pos).shape == (T, 2, 64)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="eager")
    try:
        compiled(hid.float(), pos)
    except Exception as e:  # dynamo wraps the fake's TypeError
        assert "ctx_hidden dtype torch.float32" in str(e), str(e)
    else:
        raise AssertionError("torch.compile traced an fp32 input")


def test_materialize_to_layout_refusals_before_running():
    """materialize_to_layout (include/fkv/kv_layout.hpp's kinds by name) on a meta helper: the
    per_layer spellings go through materialize_to_pool (the fake's checks), and take no layout
    fields (a per_layer pool's strides are its tensors'; a field would be dropped); every other
    kind needs the CUDA binding (its kind, field and pool checks: tests/gpu/test_python_gpu.py)."""
    h = meta_helper([layer()] * 2)  # 2 layers, 2 KV heads of 64, bf16
    T = 4
    hid = torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META)
    pos = torch.empty(T, dtype=torch.int64, device=META)
    loc = torch.empty(T, dtype=torch.int64, device=META)

    def pool(dtype=torch.bfloat16):
        return [torch.empty(64, 2, 64, dtype=dtype, device=META) for _ in range(2)]

    for kind in ("per_layer", "flat", "paged", "per-layer"):
        h.materialize_to_layout(hid, pos, loc, kind, (pool(), pool()))  # right: no error
        e = raises(TypeError, h.materialize_to_layout, hid, pos, loc, kind,
                   (pool(torch.float16), pool()))
        assert "k_buffers[0] is torch.float16; the helper writes bf16 pools" in str(e), (kind, str(e))
    e = raises(ValueError, h.materialize_to_layout, hid, pos, loc, "per_layer", (pool()[:1], pool()))
    assert "k_buffers: expected one entry per attention layer (2), got 1" in str(e), str(e)
    e = raises(TypeError, h.materialize_to_layout, hid, pos, [0, 1, 2, 3], "flat", (pool(), pool()))
    assert "cache_loc must be a torch tensor" in str(e), str(e)
    # Fields (known or not) with a per_layer kind are refused, not dropped.
    for fields in ({"slot_stride": 256}, {"layer_stride": 512}, {"slot_strid": 1}):
        e = raises(fkv_jit.ArgumentError, h.materialize_to_layout, hid, pos, loc, "per_layer",
                   (pool(), pool()), **fields)
        assert isinstance(e, ValueError)
        assert f"per_layer layout: {next(iter(fields))} not taken" in str(e), str(e)
    # One tensor is not a (k_buffers, v_buffers) pair.
    raises(ValueError, h.materialize_to_layout, hid, pos, loc, "per_layer",
           torch.empty(64, 2, 2, 2, 64, dtype=torch.bfloat16, device=META))
    # A token-major pool (or any kind but per_layer) needs the CUDA binding.
    tm = torch.empty(64, 2, 2, 2, 64, dtype=torch.bfloat16, device=META)
    for kind in ("token_major", "token-major", "stacked"):
        e = raises(RuntimeError, h.materialize_to_layout, hid, pos, loc, kind, tm)
        assert "a helper built on meta tensors has no pool to write" in str(e), (kind, str(e))
    e = raises(RuntimeError, h.materialize_to_layout, hid, pos, loc, "token_major", tm,
               layer_stride=512)
    assert "meta tensors" in str(e), str(e)


# ---- quantized weights (docs/quantized.md) ---------------------------------------------------

FP8 = getattr(torch, "float8_e4m3fn", None)
QROWS = 256  # 2 * KV * D of layer(): whole 128-row blocks


def quant_args(fmt, n=2, scale_shape=None, dtype=None, device=META):
    """kv_weights and weight_scales of `fmt` for n layer() layers on `device`."""
    dtype = dtype or (torch.int8 if fmt == "int8_channel" else FP8)
    shape = scale_shape or {"fp8_tensor": (), "fp8_channel": (QROWS,), "int8_channel": (QROWS, 1),
                            "fp8_block": (2, 1)}[fmt]
    w = [torch.empty(QROWS, HIDDEN, dtype=dtype, device=device) for _ in range(n)]
    scales = [torch.empty(shape, dtype=torch.float32, device=device) for _ in range(n)]
    return w, scales


def quant_helper(fmt, **kwargs):
    cfg = {"hidden_size": HIDDEN, "max_position_embeddings": 256, "fkv": {"layers": [layer()] * 2}}
    w, scales = quant_args(fmt)
    args = dict(weight_format=fmt, weight_scales=scales, act_dtype=torch.bfloat16)
    args.update(kwargs)
    return fkv_jit.FusedKVMaterializeHelper(cfg, w, [torch.ones(64)] * 2, **args)


def test_quantized_meta_helper_traces_and_refreshes():
    for fmt in ("fp8_tensor", "fp8_channel", "fp8_block", "int8_channel"):
        h = quant_helper(fmt)
        assert h.weight_format == fmt and h.act_dtype == torch.bfloat16 and h.act == "bf16"
        assert h.weight_dtype == (torch.int8 if fmt == "int8_channel" else FP8)
        assert fmt in repr(h)
        T = 3
        hid = torch.empty(T, HIDDEN, dtype=torch.bfloat16, device=META)
        pos = torch.empty(T, dtype=torch.int64, device=META)
        out = []
        h.materialize(hid, pos, lambda lid, k, v: out.append((lid, k.shape, k.dtype)))
        assert out == [(0, (T, 2, 64), torch.bfloat16), (1, (T, 2, 64), torch.bfloat16)], out
        pool = [torch.empty(8, 2, 64, dtype=torch.bfloat16, device=META) for _ in range(2)]
        h.materialize_to_pool(hid, pos, pos, pool, pool)
        # The activation dtype is act_dtype, not the weights'.
        e = raises(TypeError, h.materialize, hid.half(), pos, lambda *a: None)
        assert "activation dtype bf16" in str(e), str(e)

        def step(hidden, positions):
            ks = []
            h.materialize(hidden, positions, lambda lid, k, v: ks.append(k))
            return ks[0]

        torch._dynamo.reset()
        assert torch.compile(step, fullgraph=True, backend="eager")(hid, pos).shape == (T, 2, 64)
        # refresh_weights: same layout accepted; another dtype, format shapes or count refused.
        w, scales = quant_args(fmt)
        h.refresh_weights(w, [torch.ones(64)] * 2, weight_scales=scales)
        e = raises(ValueError, h.refresh_weights, [t.view(torch.uint8) for t in w],
                   [torch.ones(64)] * 2, weight_scales=scales)
        assert "as at construction" in str(e), str(e)
        e = raises(ValueError, h.refresh_weights, w, [torch.ones(64)] * 2,
                   weight_scales=quant_args(fmt, scale_shape=(3,))[1])
        assert "weight_scales[0] has shape (3,)" in str(e), str(e)
        raises(fkv_jit.ArgumentError, h.refresh_weights, w, [torch.ones(64)] * 2)
        e = raises(ValueError, h.refresh_weights, w, None, weight_scales=scales)
        assert "K norm" in str(e), str(e)


def test_quantized_engine_spellings_and_stacked_scales():
    # An engine's name for the format, string act_dtype, and scales as one [L, rows, 1] tensor.
    cfg = {"hidden_size": HIDDEN, "fkv": {"layers": [layer()] * 2}}
    w, _ = quant_args("fp8_channel")
    h = fkv_jit.FusedKVMaterializeHelper(cfg, w, [torch.ones(64)] * 2,
                                         weight_format="fp8_per_channel", act_dtype="fp16",
                                         weight_scales=torch.empty(2, QROWS, 1, device=META))
    assert h.weight_format == "fp8_channel" and h.act_dtype == torch.float16


def test_quantized_argument_refusals():
    cfg = {"hidden_size": HIDDEN, "fkv": {"layers": [layer()] * 2}}
    norms = [torch.ones(64)] * 2
    make = fkv_jit.FusedKVMaterializeHelper
    w8, s8 = quant_args("fp8_channel")
    # Packed 4-bit schemes: unsupported, by name; unknown names: ArgumentError.
    for name in ("gptq", "awq", "nvfp4", "w4a16"):
        e = raises(fkv_jit.UnsupportedModelError, make, cfg, w8, norms, weight_format=name,
                   weight_scales=s8, act_dtype=torch.bfloat16)
        assert f"'{name}' packs 4-bit weights" in str(e), str(e)
    e = raises(fkv_jit.ArgumentError, make, cfg, w8, norms, weight_format="fp9", weight_scales=s8,
               act_dtype=torch.bfloat16)
    assert "unknown weight format 'fp9'" in str(e), str(e)
    # The format is not guessed; it must fit the weights' dtype.
    e = raises(fkv_jit.ArgumentError, make, cfg, w8, norms, weight_scales=s8,
               act_dtype=torch.bfloat16)
    assert "pass weight_format (one of fp8_tensor, fp8_channel, fp8_block)" in str(e), str(e)
    e = raises(TypeError, make, cfg, w8, norms, weight_format="int8_channel", weight_scales=s8,
               act_dtype=torch.bfloat16)
    assert "does not store torch.float8_e4m3fn" in str(e), str(e)
    wi, si = quant_args("int8_channel")
    raises(TypeError, make, cfg, wi, norms, weight_format="fp8_block", weight_scales=si,
           act_dtype=torch.bfloat16)
    # The activation dtype: required, bf16 or fp16.
    e = raises(fkv_jit.ArgumentError, make, cfg, w8, norms, weight_format="fp8_channel",
               weight_scales=s8)
    assert "act_dtype (torch.bfloat16 or torch.float16) is required" in str(e), str(e)
    e = raises(TypeError, make, cfg, w8, norms, weight_format="fp8_channel", weight_scales=s8,
               act_dtype=torch.float32)
    assert "act_dtype must be torch.bfloat16 or torch.float16" in str(e), str(e)
    # Scales: required, one float32 tensor per layer of the format's shape, on the weights' device.
    e = raises(fkv_jit.ArgumentError, make, cfg, w8, norms, weight_format="fp8_channel",
               act_dtype=torch.bfloat16)
    assert "weight_scales are required with fp8_channel" in str(e), str(e)
    e = raises(ValueError, make, cfg, w8, norms, weight_format="fp8_channel", weight_scales=s8[:1],
               act_dtype=torch.bfloat16)
    assert "one entry per attention layer (2), got 1" in str(e), str(e)
    for fmt, bad, want in (("fp8_channel", (QROWS - 1,), "(256,)"), ("fp8_tensor", (2,), "(1,)"),
                           ("fp8_block", (2, 2), "(2, 1)"), ("int8_channel", (QROWS, 2), "(256,)")):
        w, s = quant_args(fmt, scale_shape=bad)
        e = raises(ValueError, make, cfg, w, norms, weight_format=fmt, weight_scales=s,
                   act_dtype=torch.bfloat16)
        assert f"weight_scales[0] has shape {bad}; {fmt} weights of (256, 96) take {want}" in str(e), str(e)
    e = raises(TypeError, make, cfg, w8, norms, weight_format="fp8_channel",
               weight_scales=[t.half() for t in s8], act_dtype=torch.bfloat16)
    assert "scales are float32" in str(e), str(e)
    e = raises(ValueError, make, cfg, w8, norms, weight_format="fp8_channel",
               weight_scales=[torch.ones(QROWS)] * 2, act_dtype=torch.bfloat16)
    assert "weight_scales[0] is on cpu" in str(e), str(e)
    # Dense weights: no format, no scales, act_dtype (if given) their own dtype.
    wd = [torch.empty(QROWS, HIDDEN, dtype=torch.bfloat16, device=META)] * 2
    e = raises(TypeError, make, cfg, wd, norms, weight_format="fp8_channel")
    assert "pass the stored FP8 / INT8 tensors" in str(e), str(e)
    e = raises(ValueError, make, cfg, wd, norms, weight_scales=s8)
    assert "weight_scales are given for dense kv_weights" in str(e), str(e)
    e = raises(TypeError, make, cfg, wd, norms, act_dtype=torch.float16)
    assert "act_dtype torch.float16 differs from the kv_weights' torch.bfloat16" in str(e), str(e)
    assert make(cfg, wd, norms, act_dtype=torch.bfloat16, weight_format="dense").weight_format == "dense"
    # Mixed dtypes across layers.
    e = raises(ValueError, make, cfg, [w8[0], wi[1]], norms, weight_format="fp8_channel",
               weight_scales=s8, act_dtype=torch.bfloat16)
    assert "every layer must be torch.float8_e4m3fn" in str(e), str(e)


def main():
    from plain_runner import run  # tests/plain_runner.py, beside this file

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
