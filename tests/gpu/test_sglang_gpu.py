"""GPU tests of fkv_jit.sglang.FusedKVMaterializeHelper (the installed wheel) with layer objects
built the way sglang's are (namespaces with self_attn.{num_kv_heads, head_dim, q_size, kv_size,
qkv_proj.weight/bias, k_norm.weight/variance_epsilon, rotary_emb}) on the GPU, against a
float64 reference computed from the same weights and the engine's cos/sin table:

  - materialize() through a write_layer_kv that stores each layer's K/V into pool tensors at
    cache locations (as sglang's set_kv_buffer does): neox/full rotary with K norm (bf16), GPT-J
    with partial rotary, a QKV bias and fp16, a TP-local layer set (one KV head); pools
    poisoned first, untouched rows checked;
  - max_position_hint grows the engine's table at construction; without it a call past the
    table grows it through _ensure_cos_sin_cache_length (the seed's behaviour);
  - a position past the table is never read: the token is skipped and the error bit set;
  - a CUDA graph captured around materialize(), then refresh_weights() with new weights, then
    replay: flat_kv_weight_t / k_norm_weights keep their data_ptr, the replayed output changes,
    equals a freshly constructed helper's bit for bit and matches the float64 reference.

    pip install fkv_jit-*.whl && python3 tests/gpu/test_sglang_gpu.py

Needs torch with CUDA and a GPU; without them it exits 77 (CTest: skipped).
"""

import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_env import require_gpu_and_wheel  # noqa: E402  (tests/gpu/gpu_env.py)

torch, _ = require_gpu_and_wheel()
from fkv_jit.sglang import FusedKVMaterializeHelper  # noqa: E402

DEV = torch.device("cuda", torch.cuda.current_device())
GEN = torch.Generator(device="cpu").manual_seed(4321)
TOL = {torch.bfloat16: (1.6e-2, 1e-3), torch.float16: (2e-3, 2e-4)}


def rand(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=GEN) * scale).to(device=DEV, dtype=dtype)


class Rotary:
    """sglang's RotaryEmbedding as the helper uses it: cos_sin_cache [max_pos, R] float32 on the
    GPU (cos half, sin half; inv_freq_i = base^(-2i/R)) and _ensure_cos_sin_cache_length, which
    rebuilds it longer (a new tensor, as sglang does)."""

    def __init__(self, rotary_dim, neox=True, base=10000.0, max_pos=64):
        self.rotary_dim, self.is_neox_style, self.base = rotary_dim, neox, base
        self.grown = []
        self.cos_sin_cache = self._table(max_pos)

    def _table(self, n):
        inv = self.base ** (-torch.arange(0, self.rotary_dim, 2, dtype=torch.float64) / self.rotary_dim)
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        return torch.cat([ang.cos(), ang.sin()], dim=1).float().to(DEV)

    def _ensure_cos_sin_cache_length(self, max_position):
        self.grown.append(max_position)
        if max_position >= self.cos_sin_cache.shape[0]:
            self.cos_sin_cache = self._table(max_position + 1)


def make_layers(n, kv=2, d=128, q_heads=4, hidden=256, rotary=None, bias=False,
                dtype=torch.bfloat16, eps=1e-6):
    rotary = rotary or Rotary(d)
    q, kvs = q_heads * d, kv * d
    layers = []
    for _ in range(n):
        qkv = SimpleNamespace(weight=rand(q + 2 * kvs, hidden, dtype=dtype, scale=hidden ** -0.5),
                              bias=rand(q + 2 * kvs, dtype=dtype, scale=0.5) if bias else None)
        norm = SimpleNamespace(weight=(rand(d, scale=0.5) + 1.0).to(dtype), variance_epsilon=eps)
        attn = SimpleNamespace(num_kv_heads=kv, head_dim=d, q_size=q, kv_size=kvs, qkv_proj=qkv,
                               k_norm=norm, rotary_emb=rotary)
        layers.append(SimpleNamespace(self_attn=attn))
    return layers, rotary


def make_helper(layers, rotary, hint=None):
    a = layers[0].self_attn
    return FusedKVMaterializeHelper(layers=layers, rotary_emb=rotary, num_kv_heads=a.num_kv_heads,
                                    head_dim=a.head_dim, device=DEV, max_position_hint=hint)


def reference(layers, rotary, ctx, pos):
    """float64 per layer: the K/V rows of qkv_proj (in the activation dtype, like the helper's
    GEMM), + bias, RMSNorm(K) * w, RoPE with the engine's table rows."""
    out = []
    R, neox = rotary.rotary_dim, rotary.is_neox_style
    cs = rotary.cos_sin_cache.double()[pos.long()]
    cos, sin = cs[:, None, : R // 2], cs[:, None, R // 2:]
    for layer in layers:
        a = layer.self_attn
        T, H, D = ctx.shape[0], a.num_kv_heads, a.head_dim
        w = a.qkv_proj.weight[a.q_size:a.q_size + 2 * a.kv_size]
        proj = torch.nn.functional.linear(ctx, w).double()
        if a.qkv_proj.bias is not None:
            proj = proj + a.qkv_proj.bias[a.q_size:a.q_size + 2 * a.kv_size].double()
        k, v = proj[:, : H * D].reshape(T, H, D), proj[:, H * D:].reshape(T, H, D)
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + a.k_norm.variance_epsilon)
        k = k * a.k_norm.weight.double()
        if neox:
            x1, x2 = k[..., : R // 2], k[..., R // 2: R]
            rot = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
        else:
            x1, x2 = k[..., 0:R:2], k[..., 1:R:2]
            rot = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
        out.append((torch.cat([rot, k[..., R:]], dim=-1), v))
    return out


def assert_close(got, want, rtol, atol, what):
    """|got - want| <= atol + rtol * (largest |want| of the head); NaN (the poison) fails."""
    got, want = got.double(), want.double()
    scale = want.abs().amax(dim=-1, keepdim=True)
    err = (got - want).abs()
    bad = (err > atol + rtol * scale) | torch.isnan(got)
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; first at "
                             f"flat index {i}: got {got.flatten()[i].item():.6g}, want "
                             f"{want.flatten()[i].item():.6g}")


class Pool:
    """Per-layer K and V buffers [num_slots, H, D], poisoned with NaN, written by write_layer_kv
    at cache locations (sglang's set_kv_buffer(layer, loc, k, v))."""

    def __init__(self, n, slots, H, D, dtype):
        self.k = [torch.full((slots, H, D), float("nan"), dtype=dtype, device=DEV) for _ in range(n)]
        self.v = [torch.full((slots, H, D), float("nan"), dtype=dtype, device=DEV) for _ in range(n)]
        self.loc = None

    def write(self, layer, k, v):
        self.k[layer][self.loc] = k
        self.v[layer][self.loc] = v


def check(layers, rotary, T=37, hint=64, slots=96, max_pos=64):
    dtype = layers[0].self_attn.qkv_proj.weight.dtype
    a = layers[0].self_attn
    helper = make_helper(layers, rotary, hint)
    ctx = rand(T, layers[0].self_attn.qkv_proj.weight.shape[1], dtype=dtype)
    pos = torch.randint(0, max_pos, (T,), generator=GEN).to(DEV)
    pool = Pool(len(layers), slots, a.num_kv_heads, a.head_dim, dtype)
    pool.loc = torch.randperm(slots, generator=GEN)[:T].to(DEV)
    helper.materialize(ctx, pos.to(torch.int32), pool.write)  # int32 positions: converted
    torch.cuda.synchronize()
    rtol, atol = TOL[dtype]
    untouched = torch.ones(slots, dtype=torch.bool, device=DEV)
    untouched[pool.loc] = False
    for i, (k_ref, v_ref) in enumerate(reference(layers, rotary, ctx, pos)):
        assert_close(pool.k[i][pool.loc], k_ref, rtol, atol, f"k of layer {i}")
        assert_close(pool.v[i][pool.loc], v_ref, rtol, atol, f"v of layer {i}")
        assert bool(torch.isnan(pool.k[i][untouched].float()).all()), f"layer {i}: other K rows written"
    return helper


# ---- tests -----------------------------------------------------------------------------------

def test_neox_knorm_bf16():
    layers, rotary = make_layers(3)
    helper = check(layers, rotary)
    # The seed's attributes are the buffers the launches read.
    assert tuple(helper.flat_kv_weight_t.shape) == (256, 3 * 2 * 2 * 128)
    want = torch.cat([l.self_attn.qkv_proj.weight[512:1024] for l in layers]).t()
    assert torch.equal(helper.flat_kv_weight_t, want)
    assert torch.equal(helper.k_norm_weights,
                       torch.stack([l.self_attn.k_norm.weight.float() for l in layers]))


def test_gptj_partial_rotary_bias_fp16():
    rotary = Rotary(64, neox=False, base=5e5)
    layers, _ = make_layers(2, kv=4, d=128, q_heads=8, rotary=rotary, bias=True, dtype=torch.float16)
    check(layers, rotary)


def test_tp_local_one_kv_head():
    # A rank of TP=8 over a model with 2 KV heads: one replicated KV head, 4 query heads.
    layers, rotary = make_layers(2, kv=1, d=128, q_heads=4)
    check(layers, rotary)


def test_table_growth():
    layers, rotary = make_layers(2, rotary=Rotary(128, max_pos=16))
    check(layers, rotary, hint=300, max_pos=300)     # grown at construction to 300 rows
    assert rotary.grown == [299] and rotary.cos_sin_cache.shape[0] == 300, rotary.grown
    layers, rotary = make_layers(2, rotary=Rotary(128, max_pos=16))
    check(layers, rotary, hint=None, max_pos=200)    # grown by the call (positions.max())
    assert rotary.grown and rotary.cos_sin_cache.shape[0] > int(max(rotary.grown)), rotary.grown


def test_position_past_table_is_skipped_and_flagged():
    layers, rotary = make_layers(2, rotary=Rotary(128, max_pos=64))
    helper = make_helper(layers, rotary, hint=64)
    pool = Pool(2, 16, 2, 128, torch.bfloat16)
    pool.loc = torch.arange(8, device=DEV)
    pos = torch.arange(8, device=DEV)
    pos[3] = 64  # one past the table
    helper.check_device_errors()
    helper.materialize(rand(8, 256, dtype=torch.bfloat16), pos, pool.write)
    assert helper.check_device_errors() == 1
    # The stacked output row of that token is not written; write_layer_kv copies whatever the
    # output tensor held there, so only the other tokens are compared.
    keep = torch.tensor([i != 3 for i in range(8)], device=DEV)
    assert not bool(torch.isnan(pool.k[0][:8][keep].float()).any())


def test_graph_refresh_replay():
    layers, rotary = make_layers(3)
    T = 24
    helper = make_helper(layers, rotary, hint=128)
    ctx = rand(T, 256, dtype=torch.bfloat16)
    pos = torch.randint(0, 128, (T,), generator=GEN).to(DEV)
    out_k = torch.empty(3, T, 2, 128, dtype=torch.bfloat16, device=DEV)
    out_v = torch.empty_like(out_k)

    def write(i, k, v):
        out_k[i].copy_(k)
        out_v[i].copy_(v)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            helper.materialize(ctx, pos, write)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        helper.materialize(ctx, pos, write)
    out_k.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    before_k, before_v = out_k.clone(), out_v.clone()
    rtol, atol = TOL[torch.bfloat16]
    for i, (k_ref, v_ref) in enumerate(reference(layers, rotary, ctx, pos)):
        assert_close(before_k[i], k_ref, rtol, atol, f"replayed k of layer {i}")
        assert_close(before_v[i], v_ref, rtol, atol, f"replayed v of layer {i}")

    addresses = helper.flat_kv_weight_t.data_ptr(), helper.k_norm_weights.data_ptr()
    with torch.no_grad():
        for layer in layers:
            layer.self_attn.qkv_proj.weight.mul_(0.5).add_(rand(*layer.self_attn.qkv_proj.weight.shape,
                                                               dtype=torch.bfloat16, scale=0.01))
            layer.self_attn.k_norm.weight.add_(0.25)
    helper.refresh_weights(layers)
    assert (helper.flat_kv_weight_t.data_ptr(), helper.k_norm_weights.data_ptr()) == addresses
    out_k.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    got_k, got_v = out_k.clone(), out_v.clone()
    assert not torch.equal(got_k, before_k) and not torch.equal(got_v, before_v)

    fresh = make_helper(layers, rotary, hint=128)   # the serving initialization, new weights
    fresh.materialize(ctx, pos, write)
    torch.cuda.synchronize()
    assert torch.equal(got_k, out_k) and torch.equal(got_v, out_v), "refresh + replay != fresh helper"
    for i, (k_ref, v_ref) in enumerate(reference(layers, rotary, ctx, pos)):
        assert_close(got_k[i], k_ref, rtol, atol, f"refreshed k of layer {i}")
        assert_close(got_v[i], v_ref, rtol, atol, f"refreshed v of layer {i}")


def test_refresh_keeps_bias_in_place():
    rotary = Rotary(128)
    layers, _ = make_layers(2, rotary=rotary, bias=True)
    helper = make_helper(layers, rotary, hint=64)
    with torch.no_grad():
        for layer in layers:
            layer.self_attn.qkv_proj.bias.add_(1.0)
    helper.refresh_weights(layers)
    T = 9
    ctx = rand(T, 256, dtype=torch.bfloat16)
    pos = torch.arange(T, device=DEV)
    got = {}
    helper.materialize(ctx, pos, lambda i, k, v: got.__setitem__(i, (k.clone(), v.clone())))
    torch.cuda.synchronize()
    rtol, atol = TOL[torch.bfloat16]
    for i, (k_ref, v_ref) in enumerate(reference(layers, rotary, ctx, pos)):
        assert_close(got[i][0], k_ref, rtol, atol, f"k of layer {i}")
        assert_close(got[i][1], v_ref, rtol, atol, f"v of layer {i}")


def main():
    from plain_runner import run  # tests/plain_runner.py (on sys.path through gpu_env)

    return run(globals())


if __name__ == "__main__":
    sys.exit(main())
