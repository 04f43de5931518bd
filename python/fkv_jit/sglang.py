"""sglang's FusedKVMaterializeHelper on fkv-jit: the seed's constructor over the engine's layers.

    # sglang/srt/speculative/dflash_worker*.py, _get_fused_kv_materialize_helper():
    from fkv_jit.sglang import FusedKVMaterializeHelper

is the whole migration: the constructor, materialize(), refresh_weights() and the attributes
(flat_kv_weight_t, k_norm_weights, eps_values, max_position_hint, ...) are the seed's.

What it reads from each layer (duck-typed: sglang's modules, or anything with these names):
    layer.self_attn.num_kv_heads, .head_dim, .q_size, .kv_size
    layer.self_attn.qkv_proj.weight   rows [q_size, q_size + 2*kv_size): K then V (TP-local);
                                      bf16/fp16, or FP8 / INT8 as sglang's quantized linear
                                      methods keep it (below)
    layer.self_attn.qkv_proj.bias     optional, the same rows (None or absent: no bias)
    layer.self_attn.k_norm.weight, .variance_epsilon   (RMSNorm: k * rsqrt(mean(k^2)+eps) * w)
    layer.self_attn.rotary_emb.rotary_dim, .is_neox_style
and from rotary_emb: cos_sin_cache and, to grow it, _ensure_cos_sin_cache_length(max_position).

Quantized qkv_proj (docs/quantized.md), as sglang's Fp8LinearMethod and W8A8Int8LinearMethod
leave a layer after process_weights_after_loading (python/sglang/srt/layers/quantization/fp8.py,
w8a8_int8.py): the weight may be the transposed view .t() of the [out, in] matrix (read through
its strides: the rows stay those of the stored matrix), and the K/V rows of its scales are read
with the K/V rows of the weight:
    float8_e4m3fn weight + weight_scale_inv [ceil(out/128), ceil(in/128)] float32, with
        weight_block_size [128, 128]: fp8_block (q_size and 2*kv_size whole 128-row blocks);
    float8_e4m3fn weight + weight_scale of 1 value (per tensor, after requantize_with_max_scale):
        fp8_tensor; of 3 values (one per q, k, v partition, before it): fp8_channel with the K
        rows at the k scale and the V rows at the v scale; of `out` values ([out, 1],
        convert_to_channelwise): fp8_channel;
    int8 weight + weight_scale of `out` values: int8_channel (W8A16 here: activations are not
        quantized, unlike sglang's W8A8 path; above the decode crossover the INT8 GEMM splits
        them into two int8 parts, within 2^-16 of each token's largest value).
Refused by name (UnsupportedModelError): other block sizes, UE8M0-packed scales (DeepGEMM's
requantization), Marlin-repacked or packed 4-bit weights (GPTQ/AWQ qweight). The activation
dtype is act_dtype, else qkv_proj.orig_dtype (set by Fp8LinearMethod), else the K-norm weight's.

Everything else is the C++ fkv::FusedKVMaterializer behind fkv_jit.FusedKVMaterializeHelper:
this module builds the explicit per-layer config the layers describe, hands it the weights
and the engine's table, and keeps the seed's argument handling.

The cos/sin table: the engine's own, used directly (not rebuilt from RoPE parameters). The
rotation of K must use exactly the values the engine's attention rotates Q with, and sglang's
rotary_emb.cos_sin_cache is that table for every scaling variant sglang implements (YaRN,
Llama 3, linear, dynamic NTK, ...); rebuilding it would mean reading each variant's own
attributes and matching its arithmetic, which a duck-typed helper cannot promise. Its layout,
[max_position, rotary_dim] with cos in the first half of a row and sin in the second, is the
kernel's. The helper keeps a reference to every table it handed to the kernels (a CUDA graph
captured with one reads it until the helper is gone), converts a table that is not float32 on
the helper's device once, and re-reads rotary_emb.cos_sin_cache at each call as the seed does,
so a table the engine grew is picked up.
"""

from __future__ import annotations

import json
import math
from typing import Callable, List, Optional

from ._errors import ArgumentError
from ._lib import native
from ._quant import qkv_kv_rows
from .materializer import FusedKVMaterializeHelper as _ConfigHelper
from .materializer import _torch

# The one block edge fkv-jit reads block scales in (fkv::kWeightBlock, include/fkv/weights.hpp).
_SEED_TEXTS = None


def _seed(name: str, **fields) -> str:
    """The seed helper's error text `name`, filled in: the library's templates
    (include/fkv/seed_texts.hpp), so that the C++ checks and this drop-in say the same words."""
    global _SEED_TEXTS
    if _SEED_TEXTS is None:
        _SEED_TEXTS = json.loads(str(native().seed_texts()))
    return _SEED_TEXTS[name].format(**fields)


def _rope_base(rotary_emb) -> float:
    """rope_theta for the generated config: informational only (the engine's table is used),
    but it must be a valid value for the config reader."""
    base = getattr(rotary_emb, "base", None)
    try:
        base = float(base)
    except (TypeError, ValueError):
        return 10000.0
    return base if math.isfinite(base) and base > 0 else 10000.0


def _act_dtype(layers, act_dtype):
    """The activation dtype of quantized layers: act_dtype (checked by the config helper), else
    qkv_proj.orig_dtype (sglang's Fp8LinearMethod sets it), else the K-norm weight's dtype."""
    if act_dtype is not None:
        return act_dtype
    torch = _torch()
    attn = layers[0].self_attn
    norm = getattr(attn, "k_norm", None)
    for dtype in (getattr(attn.qkv_proj, "orig_dtype", None),
                  getattr(getattr(norm, "weight", None), "dtype", None)):
        if dtype in (torch.bfloat16, torch.float16):
            return dtype
    raise ArgumentError("quantized qkv_proj: pass act_dtype (torch.bfloat16 or torch.float16): "
                        "neither qkv_proj.orig_dtype nor a K-norm weight says it")


def _as_torch(t):
    """A torch view of a tensor the binding returns (a tvm_ffi.Tensor, through DLPack)."""
    torch = _torch()
    return t if isinstance(t, torch.Tensor) else torch.from_dlpack(t)


class FusedKVMaterializeHelper(_ConfigHelper):
    """The seed's helper: K/V of every draft layer for the target's context hidden states.

    Args (the seed's):
      layers: the draft model's decoder layers (see the module docstring for what is read);
        under tensor parallelism the rank's layers, holding the rank's KV heads.
      rotary_emb: the rotary embedding whose cos_sin_cache rotates K (the first layer's).
      num_kv_heads, head_dim: every layer must have these (the rank's KV heads under TP).
      device: the CUDA device of the weights and of every call ("meta" builds a shape-only
        helper for tests and tracing).
      max_position_hint: the largest position + 1 the engine will ask for (sglang passes
        context_len + block_size). The table is grown to cover it at construction, and calls
        then trust it instead of reading positions.max() (a host sync). Without it each call
        syncs to read positions.max() and grows the table when needed.
      act_dtype: quantized qkv_proj only: the activation dtype (torch.bfloat16 / float16);
        default qkv_proj.orig_dtype, else the K-norm weight's dtype.
      fp8_gemm: FP8 qkv_proj above the decode crossover: True (default) = cuBLASLt's FP8 GEMM
        with the activations quantized per token or per 128 columns (W8A8, as sglang's
        Fp8LinearMethod runs its other linears); False = dequantized slices, activations kept
        (W8A16).
      int8_gemm_tokens: INT8 qkv_proj above the decode crossover, calls of up to this many
        tokens (default 512; 0 = none): cuBLASLt's int8 GEMM, the activations split into two
        int8 parts per token (W8A16 within 2^-16 of each token's largest value); larger calls
        take dequantized slices.

    Positions at or past the table are never read out of bounds: the kernel skips that token
    and sets an error bit that check_device_errors() reads.
    """

    def __init__(self, layers: List, rotary_emb, num_kv_heads: int, head_dim: int, device,
                 max_position_hint: Optional[int] = None, act_dtype=None, fp8_gemm: bool = True,
                 int8_gemm_tokens: int = 512):
        torch = _torch()
        self.num_kv_heads = int(num_kv_heads)
        self.head_dim = int(head_dim)
        self.rotary_emb = rotary_emb
        self.n_layers = len(layers)
        self.device = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.kv_size = self.num_kv_heads * self.head_dim
        self.layer_out_dim = 2 * self.kv_size

        self.rotary_dim = int(getattr(rotary_emb, "rotary_dim", self.head_dim))
        self.is_neox_style = bool(getattr(rotary_emb, "is_neox_style", True))
        # GPT-J (interleaved) style is accepted: the kernels implement both. An odd rotary_dim
        # is refused here with the same text the seed's kernel wrapper raises at the first call.
        if self.rotary_dim <= 0 or self.rotary_dim > self.head_dim or self.rotary_dim % 2 != 0:
            raise ValueError(_seed("rotary_head_pair", rotary_dim=self.rotary_dim,
                                   head_dim=self.head_dim))
        if self.n_layers == 0:
            raise ValueError(_seed("no_layers"))

        self.max_position_hint = (max(int(max_position_hint) - 1, 0)
                                  if max_position_hint is not None else None)
        cache = getattr(rotary_emb, "cos_sin_cache", None)
        self._reserved_rope_cache_len = int(cache.shape[0]) if cache is not None else 0

        kv_weights, kv_biases, norms, eps_values, scales, fmt = self._read_layers(
            layers, check_config=True)
        self._norm_dtype = norms[0].dtype if norms[0] is not None else None
        self._has_bias = kv_biases is not None
        self.eps_values = torch.tensor(eps_values, dtype=torch.float32,
                                       device=self.device if self.device.type != "meta" else "cpu")
        hidden = int(kv_weights[0].shape[1])
        layer = {"num_kv_heads": self.num_kv_heads, "head_dim": self.head_dim,
                 "rotary_dim": self.rotary_dim, "is_neox_style": self.is_neox_style,
                 "k_norm": "rms" if self._norm_dtype is not None else "none",
                 "rope_theta": _rope_base(rotary_emb)}
        config = {"hidden_size": hidden,
                  "max_position_embeddings": max(self._reserved_rope_cache_len,
                                                 (self.max_position_hint or 0) + 1, 1),
                  "fkv": {"layers": [dict(layer, eps=e) for e in eps_values]}}
        kv_weights = [w if w.device == self.device or self.device.type == "meta"
                      else w.to(self.device) for w in kv_weights]
        if scales is not None:
            scales = [t if t.device == self.device or self.device.type == "meta"
                      else t.to(self.device) for t in scales]
        # The engine's table (grown to the hint first, as the seed does) is the kernels' table:
        # the library builds none of its own.
        table = (self._grow_rope_cache(self.max_position_hint)
                 if self.max_position_hint is not None else rotary_emb.cos_sin_cache)
        # The projection buffer starts small and grows like the seed's workspace (doubling),
        # outside graph capture; reserve_tokens() sizes it ahead of time.
        quantized = fmt != "dense"
        super().__init__(config, kv_weights, None if self._norm_dtype is None else norms,
                         eps_values, max_tokens=256, kv_biases=kv_biases, cos_sin_cache=table,
                         weight_format=fmt if quantized else None, weight_scales=scales,
                         act_dtype=_act_dtype(layers, act_dtype) if quantized else act_dtype,
                         fp8_gemm=fp8_gemm, int8_gemm_tokens=int8_gemm_tokens)

        # The buffers the launches read, as the seed exposes them: flat_kv_weight_t
        # [hidden, L * 2 * kv_size] (a transposed view of the packed [N, hidden] matrix the GEMM
        # reads, in the stored dtype: FP8 / INT8 for quantized layers) and k_norm_weights
        # [L, head_dim] (float32: the kernels' copy). refresh_weights() rewrites both in place.
        if self._native is not None:
            # (FP8 crosses as its bytes: viewed as float8_e4m3fn again)
            self.flat_kv_weight_t = _as_torch(self._native["packed_weights"]()).view(
                self.weight_dtype).t()
            self.k_norm_weights = (_as_torch(self._native["k_norm_weights"](0))
                                   if self._norm_dtype is not None else None)
        else:
            self.flat_kv_weight_t = torch.empty(self.n_layers * self.layer_out_dim, hidden,
                                                dtype=self.weight_dtype, device="meta").t()
            self.k_norm_weights = (torch.empty(self.n_layers, self.head_dim, dtype=torch.float32,
                                               device="meta")
                                   if self._norm_dtype is not None else None)

    # ---- reading the engine's layers -------------------------------------------------------

    def _read_layers(self, layers, check_config: bool):
        """The K/V rows, biases, K-norm weights, eps, scales (None for dense weights) and weight
        format of every layer, with the seed's checks (num_kv_heads, head_dim, then RoPE, layer
        by layer, against the constructor's arguments)."""
        kv_weights, kv_biases, norms, eps_values, scales, formats = [], [], [], [], [], []
        for layer_id, layer in enumerate(layers):
            attn = layer.self_attn
            if check_config:
                if int(attn.num_kv_heads) != self.num_kv_heads:
                    raise ValueError(_seed("mismatch", what="num_kv_heads",
                                           expected=self.num_kv_heads,
                                           got=int(attn.num_kv_heads), layer=layer_id))
                if int(attn.head_dim) != self.head_dim:
                    raise ValueError(_seed("mismatch", what="head_dim", expected=self.head_dim,
                                           got=int(attn.head_dim), layer=layer_id))
                layer_rotary_dim = int(getattr(attn.rotary_emb, "rotary_dim", self.head_dim))
                layer_is_neox = bool(getattr(attn.rotary_emb, "is_neox_style", True))
                if layer_rotary_dim != self.rotary_dim or layer_is_neox != self.is_neox_style:
                    raise ValueError(_seed(
                        "mismatch", what="RoPE config",
                        expected=_seed("rope_config", rotary_dim=self.rotary_dim,
                                       neox=self.is_neox_style),
                        got=_seed("rope_config", rotary_dim=layer_rotary_dim, neox=layer_is_neox),
                        layer=layer_id))
            q_size, kv_size = int(attn.q_size), int(attn.kv_size)
            if check_config and kv_size != self.kv_size:
                raise ValueError(f"self_attn.kv_size of layer {layer_id} is {kv_size}, expected "
                                 f"num_kv_heads * head_dim = {self.kv_size}")
            rows, scale, fmt = qkv_kv_rows(attn.qkv_proj, q_size, kv_size, layer_id)
            kv_weights.append(rows)
            scales.append(scale)
            formats.append(fmt)
            bias = getattr(attn.qkv_proj, "bias", None)
            kv_biases.append(None if bias is None else bias[q_size:q_size + 2 * kv_size].detach())
            k_norm = getattr(attn, "k_norm", None)
            norms.append(None if k_norm is None else k_norm.weight.detach())
            eps = float(k_norm.variance_epsilon) if k_norm is not None else 1e-6
            if not (math.isfinite(eps) and eps > 0):
                raise ValueError(f"self_attn.k_norm.variance_epsilon of layer {layer_id} is {eps}: "
                                 "the K-norm eps must be a finite number > 0")
            eps_values.append(eps)
        mixed_bias = any(b is None for b in kv_biases) != all(b is None for b in kv_biases)
        mixed_norm = any(n is None for n in norms) != all(n is None for n in norms)
        if mixed_bias or mixed_norm:
            if not check_config:
                raise ValueError(_seed("refresh_layout"))
            if mixed_bias:
                raise ValueError(_seed("bias_presence"))
            raise ValueError(_seed("k_norm_presence"))
        if any(f != formats[0] for f in formats):
            raise ValueError("every layer's qkv_proj must be stored alike for the fused KV path: "
                             f"got {sorted(set(formats))}")
        return (kv_weights, (None if kv_biases[0] is None else kv_biases), norms, eps_values,
                None if formats[0] == "dense" else scales, formats[0])

    # ---- the cos/sin table -----------------------------------------------------------------

    def _ensure_rope_cache(self, max_position: int):
        """The seed's: the engine's table, grown to cover max_position; here it is also handed
        to the kernels (a no-op when it is the one in use)."""
        cos_sin_cache = self._grow_rope_cache(max_position)
        self._set_cos_sin(cos_sin_cache)
        return cos_sin_cache

    def _grow_rope_cache(self, max_position: int):
        """Grow the engine's table through _ensure_cos_sin_cache_length when max_position is
        past it, then refuse a table that is still too short (the seed's text)."""
        if max_position + 1 > self._reserved_rope_cache_len:
            ensure = getattr(self.rotary_emb, "_ensure_cos_sin_cache_length", None)
            if callable(ensure):
                ensure(max_position)
                self._reserved_rope_cache_len = int(self.rotary_emb.cos_sin_cache.shape[0])
        cos_sin_cache = self.rotary_emb.cos_sin_cache
        if max_position >= int(cos_sin_cache.shape[0]):
            raise RuntimeError(
                "RoPE cos/sin cache is too short for fused KV materialization: "
                f"max_position={max_position}, cache_len={int(cos_sin_cache.shape[0])}.")
        return cos_sin_cache

    # ---- the seed's operations -------------------------------------------------------------

    def materialize(self, ctx_hidden, positions,
                    write_layer_kv: Callable[[int, object, object], None]) -> None:
        """K/V of every layer for ctx_hidden [T, hidden] at positions [T], handed to
        write_layer_kv(layer_idx, k [T, H, D], v [T, H, D]) for layer_idx 0..n_layers-1 (the
        index in `layers`). ctx_hidden is moved to the helper's device and the weights' dtype,
        positions to int64 on the device, as the seed does. k and v are views of one output
        tensor: write_layer_kv copies them (e.g. into the KV pool)."""
        torch = _torch()
        total_ctx = ctx_hidden.shape[0]
        if total_ctx == 0:
            return
        if positions.ndim != 1:
            positions = positions.reshape(-1)
        if positions.numel() != total_ctx:
            raise ValueError(
                "positions must match ctx_hidden token count for fused KV materialization: "
                f"positions={positions.numel()}, total_ctx={total_ctx}.")
        if self._native is not None:
            if ctx_hidden.device != self.device:
                ctx_hidden = ctx_hidden.to(self.device, non_blocking=True)
            if positions.device != self.device:
                positions = positions.to(device=self.device, dtype=torch.int64, non_blocking=True)
        if ctx_hidden.dtype != self.act_dtype:
            ctx_hidden = ctx_hidden.to(self.act_dtype)
        if positions.dtype != torch.int64:
            positions = positions.to(torch.int64)
        if ctx_hidden.stride(-1) != 1:
            ctx_hidden = ctx_hidden.contiguous()
        if self._native is not None:
            max_position = (self.max_position_hint if self.max_position_hint is not None
                            else int(positions.max().item()))
            self._ensure_rope_cache(max_position)
            if total_ctx > self._max_tokens:
                self.reserve_tokens(max(total_ctx, 2 * self._max_tokens))
        super().materialize(ctx_hidden, positions, write_layer_kv)

    def refresh_weights(self, layers: List) -> None:
        """Copies the layers' current K/V weights, K/V biases and K-norm weights into the
        helper's buffers in place (flat_kv_weight_t and k_norm_weights keep their data_ptr), so
        a CUDA graph captured before replays with the new weights. The copies run on the current
        stream; like the seed, the caller fences earlier uses and refreshes every TP rank. The
        layout cannot change (layer count, shapes, dtypes, devices, bias presence, eps)."""
        if len(layers) != self.n_layers:
            raise ValueError(_seed("refresh_layer_count"))
        kv_weights, kv_biases, norms, eps_values, scales, fmt = self._read_layers(
            layers, check_config=False)
        hidden = int(self.flat_kv_weight_t.shape[0])
        if fmt != self.weight_format:
            raise ValueError(_seed("refresh_layout"))
        for kv, norm in zip(kv_weights, norms):
            if (tuple(kv.shape) != (self.layer_out_dim, hidden) or kv.dtype != self.weight_dtype
                    or kv.device != self.device
                    or (norm is None) != (self._norm_dtype is None)
                    or (norm is not None and (tuple(norm.shape) != (self.head_dim,)
                                              or norm.dtype != self._norm_dtype))):
                raise ValueError(_seed("refresh_layout"))
        if (kv_biases is None) != (not self._has_bias):
            raise ValueError(_seed("refresh_layout"))
        super().refresh_weights(kv_weights, None if self._norm_dtype is None else norms,
                                eps_values, kv_biases, scales)
        if self._native is not None:
            self.eps_values.copy_(self.eps_values.new_tensor(eps_values))

    def __repr__(self) -> str:
        fmt = "" if self.weight_format == "dense" else f", weight_format={self.weight_format!r}"
        return (f"fkv_jit.sglang.FusedKVMaterializeHelper(n_layers={self.n_layers}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
                f"rotary_dim={self.rotary_dim}, neox={self.is_neox_style}, device={self.device}"
                f"{fmt})")


__all__ = ["FusedKVMaterializeHelper"]
