"""fkv-jit inside vLLM's DFlash drafter: the body of precompute_and_store_context_kv.

vLLM's DFlashQwen3Model.precompute_and_store_context_kv (vllm/model_executor/models/
qwen3_dflash.py) turns the target's context hidden states into K/V for every draft layer:

    normed = rms_norm(context_states, hidden_norm.weight, eps)        # stays as it is
    kv = F.linear(normed, _fused_kv_weight, _fused_kv_bias)           # one GEMM, all layers
    all_kv = kv.view(T, L, 2, H, D).permute(2, 1, 0, 3, 4).contiguous()
    for i in range(L): rms_norm(k[i], k_norm_weights[i], eps)         # L launches
    rotary_embedding(positions.repeat(L), k, None, head_size, cos_sin_cache, is_neox)
    for i in range(L): attn.impl.do_kv_cache_update(attn, k[i], v[i], kv_cache, slot_mapping)

With fkv-jit everything after the hidden norm is one call: one cuBLASLt GEMM (bias included)
and one fused K-norm + RoPE + KV-write launch that writes every layer's paged cache directly,
FP8 caches with their device-side scales included:

    # in _build_fused_kv_buffers(), after the weights are loaded:
    self._fkv = VllmContextKV([layer.self_attn for layer in self.layers],
                              kv_cache_dtype=cache_config.cache_dtype, layout="flash_attn")
    # in precompute_and_store_context_kv(), replacing everything after ops.rms_norm(...):
    self._fkv(normed_context_states, context_positions, context_slot_mapping)

What the adapter reads from each draft attention module (vLLM's Qwen3 attention has these):
qkv_proj.weight / .bias (rows [q_size, q_size + 2*kv_size)), q_size, kv_size, num_kv_heads,
head_dim, k_norm.weight / .variance_epsilon, rotary_emb.{rotary_dim, is_neox_style,
cos_sin_cache}, and the layer's attention `attn` with kv_cache, layer_name, _k_scale, _v_scale.
The cos/sin table is vLLM's own (converted once to float32, which holds its bf16 values
exactly), so K is rotated with the values vLLM rotates Q with.

Quantized qkv_proj (docs/quantized.md): FP8 e4m3 or INT8 weights are read as vLLM keeps them,
with their scales (fkv_jit._quant.qkv_kv_rows): compressed-tensors FP8 before
process_weights_after_loading, weight [out, in] with weight_scale of 3 values (one per q, k, v
partition: the K rows take the k scale, the V rows the v one) or [out, 1] (per channel), or
block scales [ceil(out/128), ceil(in/128)]; after it, the transposed view with one scale; and
Fp8LinearMethod's weight_scale_inv blocks. The activations stay in the model dtype (act_dtype:
qkv_proj.orig_dtype, else the K-norm weight's). Packed 4-bit layers are refused by name.

Cache layouts (each layer's kv_cache tensor):
    "flash_attn": [2, num_blocks, block_size, H, D]   K = kv_cache[0], V = kv_cache[1]
    "flashinfer": [num_blocks, 2, block_size, H, D]   K = kv_cache[:, 0], V = kv_cache[:, 1]
    "flashinfer_hnd": [num_blocks, 2, H, block_size, D]  K = kv_cache[:, 0].transpose(1, 2)
A cache that vLLM allocates in one order and presents permuted (its kv-cache stride order,
e.g. HND memory behind an NHD-shaped tensor) is split by its presented shape: the views carry
the real strides. fkv-jit reads the block, slot and head strides from these views; slot s goes
to block s // block_size, row s % block_size; slots < 0 are skipped, slots past the cache and
positions past the table are skipped and flagged (never written out of bounds).

Run the self-test (GPU, vLLM not needed: vLLM-shaped tensors and modules):
    python3 examples/vllm_adapter.py --selftest
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from types import SimpleNamespace

import torch

import fkv_jit
from fkv_jit._quant import qkv_kv_rows

_LAYOUTS = {
    "flash_attn": lambda c: (c[0], c[1]),
    "flashinfer": lambda c: (c[:, 0], c[:, 1]),
    "flashinfer_hnd": lambda c: (c[:, 0].transpose(1, 2), c[:, 1].transpose(1, 2)),
}
_FP8 = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def _kv_cache_of(attn):
    """vLLM keeps one cache per virtual engine in some versions (a list), one tensor in others."""
    c = attn.kv_cache
    return c[0] if isinstance(c, (list, tuple)) else c


class VllmContextKV:
    """K/V of every draft layer for the context states, written into vLLM's paged caches."""

    def __init__(self, self_attns, kv_cache_dtype="auto", layout="flash_attn", max_tokens=8192):
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {sorted(_LAYOUTS)}, got {layout!r}")
        self.attns = list(self_attns)
        self.layout = layout
        a0 = self.attns[0]
        rows = [qkv_kv_rows(a.qkv_proj, a.q_size, a.kv_size, i) for i, a in enumerate(self.attns)]
        weights = [w for w, _, _ in rows]
        fmt = rows[0][2]
        if any(f != fmt for _, _, f in rows):
            raise ValueError(f"draft layers store qkv_proj differently: {[f for _, _, f in rows]}")
        quant = {}
        if fmt != "dense":
            act = getattr(a0.qkv_proj, "orig_dtype", None)
            if act not in (torch.bfloat16, torch.float16):
                act = a0.k_norm.weight.dtype
            quant = {"weight_format": fmt, "weight_scales": [s for _, s, _ in rows],
                     "act_dtype": act}
        biases = [getattr(a.qkv_proj, "bias", None) for a in self.attns]
        biases = None if biases[0] is None else [
            b[a.q_size:a.q_size + 2 * a.kv_size].detach() for a, b in zip(self.attns, biases)]
        rotary = a0.rotary_emb
        # The explicit per-layer config the modules describe (strict: vLLM's fused path also
        # requires uniform layers; a mismatch raises the seed's ValueError text).
        layers = [{"num_kv_heads": int(a.num_kv_heads), "head_dim": int(a.head_dim),
                   "rotary_dim": int(a.rotary_emb.rotary_dim),
                   "is_neox_style": bool(a.rotary_emb.is_neox_style), "k_norm": "rms",
                   "eps": float(a.k_norm.variance_epsilon), "rope_theta": 10000.0}
                  for a in self.attns]
        config = {"hidden_size": int(weights[0].shape[1]),
                  "max_position_embeddings": int(rotary.cos_sin_cache.shape[0]),
                  "fkv": {"layers": layers}}
        self.fp8 = _FP8.get(str(kv_cache_dtype))
        self.helper = fkv_jit.FusedKVMaterializeHelper(
            config, weights, [a.k_norm.weight for a in self.attns], max_tokens=max_tokens,
            kv_biases=biases, paged=True, kv_cache_dtype=self.fp8,
            cos_sin_cache=rotary.cos_sin_cache, **quant)
        self._views = None  # (cache ids, k views, v views): one binding per set of caches
        if self.fp8:
            dev = weights[0].device
            self._k_scales = torch.ones(len(self.attns), dtype=torch.float32, device=dev)
            self._v_scales = torch.ones_like(self._k_scales)

    def _buffers(self):
        caches = [_kv_cache_of(a.attn) for a in self.attns]
        ids = tuple(id(c) for c in caches)
        if self._views is None or self._views[0] != ids:
            split = [_LAYOUTS[self.layout](c) for c in caches]
            self._views = (ids, [k for k, _ in split], [v for _, v in split], caches)
        return self._views[1], self._views[2]

    def __call__(self, normed_context_states, context_positions, context_slot_mapping=None):
        """The precompute_and_store_context_kv body after the hidden norm. A None slot mapping
        (vLLM's dummy run) writes nothing, like vLLM's."""
        if context_slot_mapping is None:
            return
        k_bufs, v_bufs = self._buffers()
        if isinstance(context_slot_mapping, Mapping):
            maps = [context_slot_mapping[a.attn.layer_name] for a in self.attns]
            cache_loc, slot_mappings = maps[0], maps
        else:
            cache_loc, slot_mappings = context_slot_mapping, None
        scales = {}
        if self.fp8:
            # vLLM's per-layer scale tensors into the [L] tensors the kernel reads at run time
            # (a device copy, so it is captured in a CUDA graph like the rest).
            torch.cat([a.attn._k_scale.reshape(1).float() for a in self.attns], out=self._k_scales)
            torch.cat([a.attn._v_scale.reshape(1).float() for a in self.attns], out=self._v_scales)
            scales = {"k_scales": self._k_scales, "v_scales": self._v_scales}
        self.helper.materialize_to_pool(normed_context_states, context_positions, cache_loc,
                                        k_bufs, v_bufs, slot_mappings=slot_mappings, **scales)


# ---- self-test: vLLM-shaped modules and caches, float64 reference ----------------------------

def _selftest() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: the self-test needs a GPU")
        return 77
    dev = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(7)

    def rand(*shape, dtype=torch.float32, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).to(dev, dtype)

    def table(R, n, base=1e6):
        inv = base ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        return torch.cat([ang.cos(), ang.sin()], 1).to(dev, torch.bfloat16)  # vLLM: model dtype

    def quantize(a, how):
        """qkv_proj's weight as vLLM's compressed-tensors FP8 keeps it before
        process_weights_after_loading: [out, in] float8_e4m3fn with 3 per-partition scales
        ("tensor") or [out, 1] per-channel scales ("channel"); the dequantized weight replaces
        the bf16 one in the reference."""
        w = a.qkv_proj.weight.float()
        parts = [a.q_size, a.kv_size, a.kv_size]
        if how == "tensor":
            scale = torch.stack([p.abs().amax() / 448 for p in w.split(parts)])
            rows = torch.cat([s.expand(p) for s, p in zip(scale, parts)])[:, None]
        else:
            scale = w.abs().amax(1, keepdim=True) / 448
            rows = scale
        q = (w / rows).to(torch.float8_e4m3fn)
        a.qkv_proj = SimpleNamespace(weight=q, weight_scale=scale, bias=a.qkv_proj.bias,
                                     orig_dtype=torch.bfloat16,
                                     dequant=q.double() * rows.double())

    def modules(L, H, D, hidden, bias, layout, nb, bs, cache_dtype):
        rot = SimpleNamespace(rotary_dim=D, is_neox_style=True, cos_sin_cache=table(D, 512))
        shape = {"flash_attn": (2, nb, bs, H, D), "flashinfer": (nb, 2, bs, H, D),
                 "flashinfer_hnd": (nb, 2, H, bs, D)}[layout]
        out = []
        for i in range(L):
            q = 2 * H * D
            cache = torch.zeros(shape, dtype=cache_dtype, device=dev)
            attn = SimpleNamespace(kv_cache=[cache], layer_name=f"model.layers.{i}.self_attn.attn",
                                   _k_scale=torch.tensor([0.5 + 0.1 * i], device=dev),
                                   _v_scale=torch.tensor([0.25 + 0.1 * i], device=dev))
            out.append(SimpleNamespace(
                q_size=q, kv_size=H * D, num_kv_heads=H, head_dim=D, rotary_emb=rot, attn=attn,
                qkv_proj=SimpleNamespace(weight=rand(q + 2 * H * D, hidden, dtype=torch.bfloat16,
                                                     scale=hidden ** -0.5),
                                         bias=rand(q + 2 * H * D, dtype=torch.bfloat16) if bias else None),
                k_norm=SimpleNamespace(weight=(rand(D, scale=0.3) + 1).to(torch.bfloat16),
                                       variance_epsilon=1e-6)))
        return out

    def reference(a, x, pos):
        w = getattr(a.qkv_proj, "dequant", a.qkv_proj.weight)[a.q_size:a.q_size + 2 * a.kv_size]
        proj = (x.double() @ w.double().t())
        if a.qkv_proj.bias is not None:
            proj = proj + a.qkv_proj.bias[a.q_size:a.q_size + 2 * a.kv_size].double()
        T, H, D = x.shape[0], a.num_kv_heads, a.head_dim
        k, v = proj[:, :H * D].view(T, H, D), proj[:, H * D:].view(T, H, D)
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + 1e-6) * a.k_norm.weight.double()
        cs = a.rotary_emb.cos_sin_cache.double()[pos]
        c, s = cs[:, None, :D // 2], cs[:, None, D // 2:]
        k1, k2 = k[..., :D // 2], k[..., D // 2:]
        return torch.cat([k1 * c - k2 * s, k2 * c + k1 * s], -1), v

    failures = 0
    for layout, cache_dtype, per_layer, weights in (
            ("flash_attn", torch.bfloat16, False, "bf16"),
            ("flashinfer", torch.bfloat16, True, "bf16"),
            ("flashinfer_hnd", torch.bfloat16, False, "bf16"),
            ("flash_attn", torch.uint8, True, "bf16"),
            ("flash_attn", torch.bfloat16, False, "tensor"),
            ("flashinfer", torch.bfloat16, True, "channel")):
        L, H, D, hidden, nb, bs, T = 3, 2, 128, 256, 16, 16, 40
        attns = modules(L, H, D, hidden, True, layout, nb, bs, cache_dtype)
        if weights != "bf16":
            for a in attns:
                quantize(a, weights)
        fp8 = cache_dtype == torch.uint8  # vLLM stores fp8 caches as uint8
        adapter = VllmContextKV(attns, kv_cache_dtype="fp8" if fp8 else "auto", layout=layout)
        x = rand(T, hidden, dtype=torch.bfloat16)
        pos = torch.randint(0, 512, (T,), generator=gen).to(dev)
        slots = [torch.randperm(nb * bs, generator=gen)[:T].to(dev) for _ in range(L)]
        mapping = ({a.attn.layer_name: s for a, s in zip(attns, slots)} if per_layer else slots[0])
        adapter(x, pos, mapping)
        torch.cuda.synchronize()
        worst = 0.0
        x_read = x
        if adapter.helper.fp8_gemm and T > adapter.helper.decode_crossover:
            # FP8 weights take cuBLASLt's FP8 GEMM, which reads x quantized to e4m3 with one
            # scale per token, or per token and 128 columns for per-tensor and per-channel
            # weights at up to 64 tokens (templates/quantize_act.cu; W8A8): the reference reads
            # the same, both
            # quotients the float32 ones (taken in float64, rounded once: exact; torch's
            # float32 division by a Python number multiplies by the reciprocal).
            blocks = T <= 64  # fp8_tensor and fp8_channel (the self-test has no fp8_block)
            xd = x.double().reshape(T, -1, 128 if blocks else hidden)
            s = torch.clamp((xd.abs().amax(-1, keepdim=True) / 448.0).float(),
                            min=torch.finfo(torch.float32).tiny).double()
            x_read = ((xd / s).float().to(torch.float8_e4m3fn).double() * s).reshape(T, hidden)
        for i, a in enumerate(attns):
            k_ref, v_ref = reference(a, x_read, pos)
            k_view, v_view = _LAYOUTS[layout](a.attn.kv_cache[0])
            s = slots[i] if per_layer else slots[0]
            got_k, got_v = k_view[s // bs, s % bs], v_view[s // bs, s % bs]
            if fp8:
                got_k = got_k.view(torch.float8_e4m3fn).double() * float(a.attn._k_scale)
                got_v = got_v.view(torch.float8_e4m3fn).double() * float(a.attn._v_scale)
            for got, want in ((got_k, k_ref), (got_v, v_ref)):
                err = (got.double() - want).abs() / want.abs().amax(-1, keepdim=True)
                worst = max(worst, float(err.max()))
        bound = 0.07 if fp8 else 0.016  # e4m3: 3 mantissa bits; bf16: 8
        ok = worst <= bound
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {layout:15s} {'fp8' if fp8 else 'bf16'} cache, "
              f"{weights if weights == 'bf16' else 'fp8 ' + weights} weights ({adapter.helper.weight_format}), "
              f"{'per-layer slots' if per_layer else 'one slot mapping'}: worst relative error "
              f"{worst:.2e} (bound {bound})")
    return 1 if failures else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--selftest", action="store_true", help="run against vLLM-shaped tensors (GPU)")
    args = p.parse_args()
    if not args.selftest:
        p.print_help()
        sys.exit(0)
    sys.exit(_selftest())
