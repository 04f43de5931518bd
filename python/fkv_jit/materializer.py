"""FusedKVMaterializeHelper: the seed helper's operation over the C++ fkv::FusedKVMaterializer.

Everything that allocates, copies or compiles happens in the constructor, inside the C++
materializer: packing every layer's K/V weights into one matrix, folding (1 + w) K-norm weights,
building each group's cos/sin table, the projection buffer and the cuBLASLt GEMM, loading the
kernels. A call is one projection GEMM plus one fused norm + RoPE + KV-write launch per layer
group, or for 1..decode_crossover tokens one decode-size launch that does both, on torch's
current stream, with no host-device copy or synchronization, so both operations can be captured
in a CUDA graph.

Both operations are torch custom ops (fkv_jit::materialize, fkv_jit::materialize_to_pool; see
_ops.py), so torch.compile(fullgraph=True) traces them without a graph break. Outside tracing,
the methods call the binding directly: the dispatcher's cost is paid only where it buys
something.
"""

from __future__ import annotations

import json
import math
import operator
import sys
from typing import Callable, List, Optional, Sequence

import torch

from . import _ops, _quant
from ._errors import ArgumentError
from ._lib import native

# Looked up once: the per-call path runs on every decode step.
_INT64 = torch.int64
_is_compiling = torch.compiler.is_compiling
_same_objects = operator.is_


# materialize's output reuse (FusedKVMaterializeHelper.reuse_outputs): the buffer and its views
# are handed out again only while nothing else refers to them. A view the engine derived from k
# or v shares the buffer's storage (its use count grows); a view it kept is referred to more.
# A buffer is reused only on the stream it was last used on (another stream is not ordered
# after the copies of the last call: the caching allocator gives it a block of its own).
_use_count = getattr(torch._C, "_storage_Use_Count", None)
_current_stream = getattr(torch._C, "_cuda_getCurrentStream", None)  # (id, device, type)
_reusable = _use_count is not None and _current_stream is not None
_refcount = sys.getrefcount
_capturing = torch.cuda.is_current_stream_capturing


def _storage_uses(out) -> int:
    return _use_count(out.untyped_storage()._cdata)


def _view_refs(views) -> int:
    return max(_refcount(v) for v in views)  # the same expression before and after: same base


def _unheld(kept) -> bool:
    return _storage_uses(kept[1]) == kept[3] and _view_refs(kept[2]) == kept[4]


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fkv_jit.FusedKVMaterializeHelper needs torch") from e
    return torch


def _dtype_name(dtype) -> Optional[str]:
    torch = _torch()
    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    for attr, name in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    return names.get(dtype)


def _per_layer(value, n: int, what: str) -> list:
    """A scalar broadcast to n layers, or a sequence of exactly n values."""
    if value is None:
        return [None] * n
    if isinstance(value, (int, float)):
        return [value] * n
    torch = _torch()
    if isinstance(value, torch.Tensor) and value.dim() >= 1:
        value = list(value.unbind(0))
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{what}: expected one entry per attention layer ({n}), got {len(value)}")
    return value


def _host_fp32(tensors) -> list:
    """Per-layer vectors as the binding takes them: contiguous float32 CPU tensors."""
    return [t.detach().to(device="cpu", dtype=_torch().float32).reshape(-1).contiguous() for t in tensors]


def _stored(weights) -> list:
    """W_kv as the binding takes it: FP8 as its bytes (uint8), since not every torch passes
    float8 tensors through DLPack."""
    fp8 = getattr(_torch(), "float8_e4m3fn", None)
    return [w.detach().view(_torch().uint8) if w.dtype == fp8 else w.detach() for w in weights]


def _same(a, b) -> bool:
    """Identity for tensors (no elementwise ==), equality for everything else."""
    torch = _torch()
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    return a == b


class _Group:
    """One plan group's output shape: layers (model numbering), heads, head_dim."""

    def __init__(self, layers, heads, head_dim):
        self.layers = list(layers)
        self.heads = heads
        self.head_dim = head_dim
        self.elems = len(self.layers) * heads * head_dim  # per token, K or V


class FusedKVMaterializeHelper:
    """Fused KV materialization for the attention layers of a (draft) model config.

    Args:
      config: path of config.json, a dict, or an fkv_jit.Config.
      kv_weights: per attention layer (model order) the K/V rows of its QKV projection weight,
        [2*KV, hidden] (K rows then V rows) with contiguous rows (a row slice of qkv_proj.weight
        works), as a sequence of tensors or one [L, 2*KV, hidden] tensor, all on one CUDA device
        in bf16 or fp16 (the activation dtype), or quantized (see weight_format). Copied
        (packed) at construction. Tensors on the "meta" device make a shape-only helper: no GPU
        is touched, calls run the ops' fake implementations (for tracing and tests).
      k_norm_weights: per layer [D] K-norm weights (required iff the config has a K norm). For
        (1 + w) norms (Gemma, Qwen3.5) pass w as stored: the library folds it once.
      eps: float or per-layer floats; default: the config's per-layer eps.
      grouped: False (default) = strict, the seed's semantics: one group, ValueError with the
        seed's text on mismatch. True = one launch per uniform group of layers.
      max_position: rows of the cos/sin tables (the largest position + 1 the engine will use,
        i.e. context length + block size); default the config's max_position_embeddings.
      max_tokens: the largest number of tokens per call (rows of the projection buffer).
      kv_cache_dtype: the KV pool's dtype (torch dtype or "fp8_e4m3" / "fp8_e5m2"; uint8 pools
        are read as this); default the activation dtype.
      debug: mark the kernels as debug builds (positions and slots are checked on the device
        either way: see check_device_errors()).
      kv_biases: per attention layer the K/V part of the QKV projection's bias, [2*KV] (K then
        V), e.g. qkv_proj.bias[q_size:q_size + 2*kv_size]; None = no bias. Added to the
        projection before the K norm (fp32 inside the kernel).
      paged: the pool kernels take paged KV caches: materialize_to_pool() then takes
        [num_blocks, block_size, H, D] views (see there) instead of [num_slots, H, D] rows.
      cos_sin_cache: use this table instead of building one from the config: a CUDA tensor
        [max_position, rotary_dim] (cos in the first rotary_dim/2 columns, sin in the rest), in
        float32 (other float dtypes are converted once), e.g. the engine's
        rotary_emb.cos_sin_cache, so K is rotated with exactly the values the engine rotates Q
        with. Not copied: the helper keeps a reference. Strict plans only (one table).
      tp_size, tp_rank: tensor parallelism: this helper serves rank tp_rank of tp_size and is
        given that rank's weight shard. Its plan is fkv_jit.plan(config, grouped, tp_size,
        tp_rank): per group, num_kv_heads % tp_size == 0 gives rank r the heads
        [r*H/tp_size, (r+1)*H/tp_size); num_kv_heads < tp_size with tp_size % num_kv_heads == 0
        gives each rank one head, r*H/tp_size (replicated); anything else raises
        ConfigMismatchError (a ValueError) naming both numbers; tp_size < 1 or tp_rank outside
        [0, tp_size) raises ArgumentError. kv_weights[l] is then [2*H_r*D, hidden], the K rows
        of the rank's H_r heads then their V rows (the rows after Q of a TP-local
        qkv_proj.weight); kv_biases [2*H_r*D]; K-norm weights are the same on every rank.
        Outputs (stacked [L, T, H_r, D], pool rows [.., H_r, D]) hold the rank's heads only.
      decode_crossover: calls of 1..decode_crossover tokens take the decode-size kernel (one
        launch: projection and epilogue, no cuBLASLt; see docs/decode.md) when the model allows
        it (one group, no K/V bias, not paged, debug off). None (default) = the value measured
        for this GPU (FKV_DECODE_CROSSOVER overrides it); 0 = never. The attribute
        decode_crossover says what the helper uses (0 when the model does not allow it). On that
        path V is rounded once from fp32 sums, so it may differ from a bf16 projection's V by
        one unit in the last place; pool calls with tensor scales or slot_mappings take the
        cuBLASLt path.
      weight_format: how kv_weights are stored (docs/quantized.md): None = dense bf16/fp16;
        "fp8_tensor", "fp8_channel", "fp8_block" for torch.float8_e4m3fn weights (per-tensor,
        per-output-row or 128x128 block scales), "int8_channel" for torch.int8 weights (W8A16),
        or an engine's spelling ("fp8", "fp8_per_channel", "fp8_block128", "w8a16"). Packed
        4-bit schemes ("gptq", "awq", "nvfp4", ...) raise UnsupportedModelError. Required with
        quantized weights: the format is not guessed from the scales' shapes. Weight (n, k) is
        q[n, k] * scale(n, k); on the decode-size path the activations stay in act_dtype.
      weight_scales: quantized weights only: per attention layer a float32 tensor on the
        weights' device: one value (fp8_tensor), [2*KV] or [2*KV, 1] (fp8_channel,
        int8_channel), [2*KV / 128, ceil(hidden / 128)] (fp8_block: 2*KV whole 128-row
        blocks). Copied at construction (and by refresh_weights).
      fp8_gemm: FP8 weights above the decode crossover: True (default) = cuBLASLt's FP8 GEMM
        over the stored bytes, ctx_hidden quantized to e4m3 per call with one scale per token
        (per token and 128 columns for fp8_block, and for fp8_tensor calls of up to 64 tokens):
        W8A8, as the engines' FP8 linear methods compute; False = dequantized slices with the
        activations kept (W8A16). The attribute
        fp8_gemm says what the helper uses (False on GPUs without that GEMM, before sm_90).
      int8_gemm_tokens: INT8 weights above the decode crossover, calls of up to this many
        tokens (default 512; 0 = none): cuBLASLt's int8 GEMM over the stored bytes, ctx_hidden
        split into two int8 parts per token (within 2^-16 of the token's largest value: W8A16
        but for that); larger calls take dequantized slices. The attribute int8_gemm_tokens
        says what the helper uses (0 where cuBLASLt has no such GEMM).
      act_dtype: the activation dtype (ctx_hidden, the stacked outputs, the projection):
        torch.bfloat16 or torch.float16. Required with quantized weights; for dense weights it
        is their dtype (act_dtype, if given, must agree).

    write_layer_kv(layer_id, k, v) receives the model layer number and [T, H, D] tensors, like
    the seed's. They are views of one output buffer that the next call with the same T reuses
    (no allocation, no new views: 12-24 us of host time per call) when nothing outside the
    helper still holds them or a view of them, which is checked before each reuse; not during
    CUDA graph capture, where the buffer comes from the graph's pool as before. Like the
    caching allocator does for the seed's freed buffer, this relies on the stream order: the
    copies write_layer_kv makes run on the current stream, and a buffer is reused only on the
    stream of its last call. Set reuse_outputs = False when write_layer_kv hands k or v to
    another stream (Tensor.record_stream, which the check cannot see).
    """

    reuse_outputs = True

    def __init__(self, config, kv_weights, k_norm_weights=None, eps=None, *, grouped: bool = False,
                 max_position: Optional[int] = None, max_tokens: int = 8192,
                 kv_cache_dtype=None, debug: bool = False, kv_biases=None, paged: bool = False,
                 cos_sin_cache=None, tp_size: int = 1, tp_rank: int = 0,
                 decode_crossover: Optional[int] = None, weight_format: Optional[str] = None,
                 weight_scales=None, act_dtype=None, fp8_gemm: bool = True,
                 int8_gemm_tokens: int = 512):
        torch = _torch()
        from . import _as_config, plan as make_plan
        self.config = _as_config(config)
        # The rank's plan (its share of the heads); ValueError on mismatch or an uneven split.
        self.plan = make_plan(self.config, grouped=grouped, tp_size=tp_size, tp_rank=tp_rank)
        self.tp_size, self.tp_rank = self.plan.tp_size, self.plan.tp_rank
        self.grouped = grouped
        self.debug = debug

        self.layer_ids: List[int] = sorted(l.index for l in self.config.attention_layers)
        L = len(self.layer_ids)
        self.num_layers = L
        weights = _per_layer(kv_weights, L, "kv_weights")
        if any(not isinstance(w, torch.Tensor) for w in weights):
            raise TypeError("kv_weights must be torch tensors")
        first = weights[0]
        if first.device.type not in ("cuda", "meta"):
            raise ValueError(f"kv_weights must be on a CUDA device, got {first.device}")
        self.device = first.device
        # How the weights are stored, and the activation dtype (the weights' when dense).
        self.weight_format, self.act, self.act_dtype = _quant.storage(torch, first, weight_format,
                                                                      act_dtype)
        self.weight_dtype = first.dtype
        self.hidden = int(first.shape[-1])
        group_of = {l: g for g in self.plan.groups for l in g.layers}
        spec_of = {l: g.spec for l, g in group_of.items()}
        for i, w in enumerate(weights):
            s = spec_of[self.layer_ids[i]]
            want = (2 * s.num_kv_heads * s.head_dim, self.hidden)
            if tuple(w.shape) != want:
                g = group_of[self.layer_ids[i]]
                shard = "" if self.tp_size == 1 else (
                    f"; tensor-parallel rank {self.tp_rank} of {self.tp_size} holds "
                    f"{s.num_kv_heads} of the {g.total_kv_heads} KV heads, [{g.first_kv_head}, "
                    f"{g.first_kv_head + s.num_kv_heads}): pass the rank's weight shard")
                raise ValueError(f"kv_weights[{i}] (layer {self.layer_ids[i]}) has shape "
                                 f"{tuple(w.shape)}, expected {want} (2 * num_kv_heads * head_dim "
                                 f"rows: K then V{shard})")
            if w.device != self.device or w.dtype != self.weight_dtype:
                raise ValueError(f"kv_weights[{i}] is {w.dtype} on {w.device}; every layer must be "
                                 f"{self.weight_dtype} on {self.device}")
        scales = _quant.scales(torch, self.weight_format, weight_scales, weights, _per_layer,
                               self.hidden)

        norms = _per_layer(k_norm_weights, L, "k_norm_weights")
        needs_norm = any(g.spec.k_norm != "none" for g in self.plan.groups)
        if needs_norm and any(n is None for n in norms):
            raise ValueError("the config has a K norm: pass k_norm_weights for every attention layer")
        if not needs_norm and any(n is not None for n in norms):
            raise ValueError("k_norm_weights were given, but the config's layers have no K norm")
        self.cache_name = self._cache_name(kv_cache_dtype)
        biases = _per_layer(kv_biases, L, "kv_biases")
        if any(b is not None for b in biases):
            if any(b is None for b in biases):
                raise ValueError("kv_biases: give a bias for every attention layer, or None")
            for i, b in enumerate(biases):
                s = spec_of[self.layer_ids[i]]
                if tuple(b.shape) != (2 * s.num_kv_heads * s.head_dim,):
                    raise ValueError(f"kv_biases[{i}] has shape {tuple(b.shape)}, expected "
                                     f"({2 * s.num_kv_heads * s.head_dim},) (K part, then V)")
        else:
            biases = None
        self.paged = bool(paged)
        if cos_sin_cache is not None and len(self.plan.groups) != 1:
            raise ValueError("cos_sin_cache serves one table: use it with a strict plan (grouped=False)")
        self._cos_sin_src = None    # the table given (the engine's tensor)
        self._cos_sin_keep = []     # every table handed to the library: captured graphs may read them

        # Output layout of the stacked op: per group, K [L_g, T, H, D] then V of that shape.
        self.groups = [_Group(g.layers, g.spec.num_kv_heads, g.spec.head_dim)
                       for g in self.plan.groups]
        self._stacked_elems = 2 * sum(g.elems for g in self.groups)
        # H*D of each attention layer (layer_ids order): the pool rows the ops' checks expect.
        width = {l: g.heads * g.head_dim for g in self.groups for l in g.layers}
        self.layer_widths = [width[l] for l in self.layer_ids]
        self._single = self.groups[0] if len(self.groups) == 1 else None

        eps_values = [] if eps is None else [float(e) for e in _per_layer(eps, L, "eps")]
        # What refresh_weights() must keep.
        self._layout = ([tuple(w.shape) for w in weights], needs_norm, biases is not None,
                        eps_values)
        for i, e in enumerate(eps_values):
            if not (math.isfinite(e) and e > 0):
                raise ValueError(f"eps[{i}] (layer {self.layer_ids[i]}) is {e}: the K-norm eps "
                                 "must be a finite number > 0")

        self._native = None
        self._fn_pool = self._fn_stacked = None  # the binding's calls (CUDA helpers only)
        self.decode_crossover = 0  # the largest T that takes the decode-size kernel
        self.fp8_gemm = False  # calls above it take the FP8 GEMM
        self.int8_gemm_tokens = 0  # calls above it, up to this many tokens, the INT8 GEMM
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            self.device = torch.device("cuda", index)
            # The plan object carries the config (read once), strict or grouped, and the rank.
            options = {"act": self.act, "cache": self.cache_name,
                       "max_tokens": int(max_tokens), "max_position": int(max_position or 0),
                       "device": index, "debug": bool(debug), "stacked": True, "pool": True,
                       "hidden": self.hidden, "paged": self.paged,
                       "external_cos_sin": cos_sin_cache is not None, "cos_sin": "fp32",
                       "decode_crossover": -1 if decode_crossover is None else int(decode_crossover),
                       "weight_format": self.weight_format, "fp8_gemm": bool(fp8_gemm),
                       "int8_gemm_tokens": int(int8_gemm_tokens)}
            host_norms = [] if not needs_norm else _host_fp32(norms)
            host_biases = [] if biases is None else _host_fp32(biases)
            with torch.cuda.device(index):
                fns = native().materializer_create(self.plan._native, json.dumps(options),
                                                   _stored(weights), host_norms, host_biases,
                                                   eps_values, scales)
            self._native = fns
            self._fn_pool = fns["materialize_pool"]
            self._fn_stacked = fns["materialize_stacked"]
            self._fn_bind = fns["bind_pool"]
            self.decode_crossover = int(fns["decode_crossover"])
            self.fp8_gemm = bool(fns["fp8_gemm"])
            self.int8_gemm_tokens = int(fns["int8_gemm_tokens"])
            self._max_tokens = int(max_tokens)
        if cos_sin_cache is not None:
            self._set_cos_sin(cos_sin_cache)
        self._bound = None  # (k tuple, v tuple, k scales, v scales, binding id)
        # materialize's last output: (T, buffer, views, storage uses, view refs, stream)
        self._kept = None
        self._handle = _ops.register(self)

    # ---- tables and capacity ---------------------------------------------------------------

    def _set_cos_sin(self, table) -> None:
        """Launches from now on read `table` (see cos_sin_cache); a no-op for the tensor already
        in use, so calling it every step costs an identity check."""
        if table is self._cos_sin_src:
            return
        torch = _torch()
        if not isinstance(table, torch.Tensor) or table.dim() != 2:
            raise TypeError("cos_sin_cache must be a 2-D torch tensor [max_position, rotary_dim]")
        src = table
        if self._native is not None:
            if table.device != self.device or table.dtype != torch.float32 or table.stride(-1) != 1:
                table = table.to(device=self.device, dtype=torch.float32).contiguous()
            self._native["set_cos_sin"](0, table)
        self._cos_sin_keep.append(table)
        self._cos_sin_src = src

    def refresh_weights(self, kv_weights, k_norm_weights=None, eps=None, kv_biases=None,
                        weight_scales=None) -> None:
        """Copies new weights into the helper's buffers in place: the packed W_kv (and its
        scales), the K-norm weights and the K/V biases keep their device addresses, so a CUDA
        graph captured before replays with the new values. The layout cannot change: per layer
        the shape, dtype and device of kv_weights, the weight format (weight_scales of the same
        shapes), K-norm weights and biases iff given at construction, eps (None: the
        constructor's). The copies run on the current stream; the caller makes sure no launch on
        another stream reads the weights meanwhile. A meta helper checks the arguments only."""
        torch = _torch()
        shapes, needs_norm, has_bias, eps_values = self._layout
        L = self.num_layers
        weights = _per_layer(kv_weights, L, "kv_weights")
        for i, w in enumerate(weights):
            if (not isinstance(w, torch.Tensor) or tuple(w.shape) != shapes[i]
                    or w.dtype != self.weight_dtype or w.device != self.device):
                raise ValueError(f"refresh_weights: kv_weights[{i}] must be a {self.weight_dtype} "
                                 f"tensor of shape {shapes[i]} on {self.device}, as at "
                                 "construction")
        scales = _quant.scales(torch, self.weight_format, weight_scales, weights, _per_layer,
                               self.hidden)
        norms = _per_layer(k_norm_weights, L, "k_norm_weights")
        if any((n is None) == needs_norm for n in norms):
            raise ValueError("refresh_weights: give k_norm_weights for every layer iff the config "
                             "has a K norm")
        biases = _per_layer(kv_biases, L, "kv_biases")
        if any((b is None) == has_bias for b in biases):
            raise ValueError("refresh_weights: give kv_biases for every layer iff the helper was "
                             "constructed with them")
        if eps is not None:
            eps_values = [float(e) for e in _per_layer(eps, L, "eps")]
        if self._native is None:
            return
        self._native["refresh_weights"](_stored(weights),
                                        _host_fp32(norms) if needs_norm else [],
                                        _host_fp32(biases) if has_bias else [], eps_values, scales)

    def reserve_tokens(self, max_tokens: int) -> None:
        """Grows the projection buffer to max_tokens rows (it allocates: not while a CUDA graph
        is being captured; graphs captured before keep their own buffer)."""
        if self._native is not None and max_tokens > self._max_tokens:
            self._max_tokens = int(self._native["reserve_tokens"](int(max_tokens)))

    # ---- dtypes ----------------------------------------------------------------------------

    def _cache_name(self, dtype) -> str:
        torch = _torch()
        if dtype is None:
            return self.act
        if isinstance(dtype, str):
            if dtype not in ("fp8_e4m3", "fp8_e5m2", self.act):
                raise TypeError(f"kv_cache_dtype must be 'fp8_e4m3', 'fp8_e5m2' or the activation "
                                f"dtype, got {dtype!r}")
            return dtype
        name = _dtype_name(dtype)
        if name is None or name not in ("fp8_e4m3", "fp8_e5m2", self.act):
            raise TypeError(f"kv_cache_dtype {dtype} is not supported: use the activation dtype "
                            f"({self.act_dtype}), float8_e4m3fn or float8_e5m2")
        return name

    # ---- per-call argument handling (traceable: no data pointers) ---------------------------

    def _inputs(self, ctx_hidden, positions):
        if not isinstance(ctx_hidden, torch.Tensor):
            raise TypeError("ctx_hidden must be a torch tensor")
        return ctx_hidden, self._index(positions, "positions")

    @staticmethod
    def _index(t, what: str):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be a torch tensor")
        if t.dim() != 1:
            t = t.reshape(-1)
        if t.dtype != torch.int64:
            if t.dtype != torch.int32:
                raise TypeError(f"{what} must be int32 or int64, got {t.dtype}")
            t = t.long()
        return t

    # ---- the operations --------------------------------------------------------------------

    def materialize(self, ctx_hidden, positions,
                    write_layer_kv: Callable[[int, object, object], None]) -> None:
        """The seed's operation: K/V of every layer for ctx_hidden [T, hidden] at `positions`
        [T], handed to write_layer_kv(layer_id, k [T, H, D], v [T, H, D]) layer by layer."""
        ctx_hidden, positions = self._inputs(ctx_hidden, positions)
        T = ctx_hidden.shape[0]
        if T == 0:
            return
        g = self._single
        if g is not None and self._native is not None and not _is_compiling():
            # The seed's case, eager: one group, allocated in its final shape [K of every layer,
            # then V] so that one unbind gives the per-layer views (no reshape per call).
            L = len(g.layers)
            kept = self._kept
            stream = _current_stream(self.device.index) if _current_stream else None
            if (kept is not None and kept[0] == T and kept[5] == stream and self.reuse_outputs
                    and _unheld(kept) and not _capturing()):
                out, kv = kept[1], kept[2]
            else:
                out = torch.empty((2 * L, T, g.heads, g.head_dim), dtype=self.act_dtype,
                                  device=self.device)
                kv = out.unbind(0)
                # Never keep a buffer of a CUDA graph's pool, nor hand a kept one to a capture:
                # the graph would write into memory freed when the next T replaces it.
                if not _capturing():
                    self._kept = ((T, out, kv, _storage_uses(out), _view_refs(kv), stream)
                                  if self.reuse_outputs and _reusable else None)
            self._fn_stacked(ctx_hidden, positions, out)
            for i, layer in enumerate(g.layers):
                write_layer_kv(layer, kv[i], kv[L + i])
            return
        if self._native is not None and not _is_compiling():
            out = torch.empty(T * self._stacked_elems, dtype=self.act_dtype, device=self.device)
            self._fn_stacked(ctx_hidden, positions, out)
        else:
            out = torch.ops.fkv_jit.materialize(self._handle, ctx_hidden, positions)
        if g is not None:  # one group
            L = len(g.layers)
            kv = out.view(2 * L, T, g.heads, g.head_dim).unbind(0)
            for i, layer in enumerate(g.layers):
                write_layer_kv(layer, kv[i], kv[L + i])
            return
        per_layer = {}
        offset = 0
        for g in self.groups:
            n = g.elems * T
            k = out[offset:offset + n].view(len(g.layers), T, g.heads, g.head_dim)
            v = out[offset + n:offset + 2 * n].view(len(g.layers), T, g.heads, g.head_dim)
            offset += 2 * n
            for i, layer in enumerate(g.layers):
                per_layer[layer] = (k[i], v[i])
        for layer in self.layer_ids:
            write_layer_kv(layer, *per_layer[layer])

    def materialize_to_pool(self, ctx_hidden, positions, cache_loc, k_buffers, v_buffers,
                            k_scales=None, v_scales=None, slot_mappings=None) -> None:
        """Writes K/V straight into the KV pool; slot s < 0 is skipped.

        Flat pools (default): k_buffers[i], v_buffers[i] of the i-th attention layer are
        [num_slots, H, D] or [num_slots, H*D] with contiguous rows; token t goes to row
        cache_loc[t]. Paged pools (constructed with paged=True): each buffer is a
        [num_blocks, block_size, H, D] view with a contiguous last dim and any other strides
        (vLLM's kv_cache[0] / kv_cache[1], FlashInfer's kv_cache[:, 0] / kv_cache[:, 1], an HND
        cache's .transpose(1, 2)); slot s is block s // block_size, row s % block_size. Every
        buffer of a call has the same layout. slot_mappings (paged only): one [T] int64 tensor
        per layer (e.g. vLLM's per-layer slot mappings) read instead of cache_loc (still passed).

        k_scales / v_scales (fp8 pools; stored = x / scale, saturated): per-layer floats, or
        float32 CUDA tensors [L] read at run time (so a captured graph sees later values);
        None = 1.0.

        The pool buffers are checked once per set of tensor objects (see bind_pool()). A call with
        the tensors of the last call (the usual decode step) costs one identity check per
        buffer in Python; every other check is made by the compiled binding before it launches
        anything."""
        fn = self._fn_pool
        b = self._bound
        if (fn is not None and b is not None and slot_mappings is None
                and k_scales is b[2] and v_scales is b[3]
                and getattr(positions, "dtype", None) is _INT64 and positions.dim() == 1
                and getattr(cache_loc, "dtype", None) is _INT64 and cache_loc.dim() == 1
                and len(k_buffers) == len(b[0]) and len(v_buffers) == len(b[1])
                and all(map(_same_objects, k_buffers, b[0]))
                and all(map(_same_objects, v_buffers, b[1]))
                and not _is_compiling()):
            fn(ctx_hidden, positions, cache_loc, b[4], ())  # checks shapes, devices, dtypes
            return
        ctx_hidden, positions = self._inputs(ctx_hidden, positions)
        cache_loc = self._index(cache_loc, "cache_loc")
        maps = [] if slot_mappings is None else [
            self._index(m, f"slot_mappings[{i}]") for i, m in enumerate(slot_mappings)]
        if fn is not None and not _is_compiling():
            binding = self.bind_pool(k_buffers, v_buffers, k_scales, v_scales)
            fn(ctx_hidden, positions, cache_loc, binding, maps)
            return
        if maps or isinstance(k_scales, torch.Tensor) or isinstance(v_scales, torch.Tensor):
            raise NotImplementedError("slot_mappings and tensor scales run eagerly on a CUDA "
                                      "helper only (not traced by torch.compile, not on a meta "
                                      "helper): call materialize_to_pool outside the compiled "
                                      "region (it can be captured in a CUDA graph)")
        L = self.num_layers
        torch.ops.fkv_jit.materialize_to_pool(
            self._handle, ctx_hidden, positions, cache_loc, list(_per_layer(k_buffers, L, "k_buffers")),
            list(_per_layer(v_buffers, L, "v_buffers")), self._scales(k_scales), self._scales(v_scales))

    def materialize_to_layout(self, ctx_hidden, positions, cache_loc, kind: str, pool,
                              k_scales=None, v_scales=None, slot_mappings=None, **fields) -> None:
        """Writes K/V into a pool of any layout kind of fkv::KVLayout (include/fkv/kv_layout.hpp).

        kind "token_major": `pool` is one contiguous tensor of the cache dtype whose first
        dimension is the slots (e.g. [num_slots, L, 2, H, D]); element (slot, layer, k|v, head, d)
        is at slot * slot_stride + layer * layer_stride + kv * kv_offset + head * head_stride + d
        (layer in layer_ids order; kv 0 = K, 1 = V). `fields` are the layout's integer fields
        in elements (slot_stride, layer_stride, kv_offset, head_stride, num_slots; omitted = the
        kind's default: head_stride D, kv_offset H*D, layer_stride 2*H*D, slot_stride
        L * layer_stride, num_slots pool.shape[0]). A head_stride other than D, or
        slot_mappings, needs paged=True. kind "per_layer" (or "flat", "paged"): `pool` is
        (k_buffers, v_buffers), as materialize_to_pool, whose tensors give the strides: fields
        are refused (ArgumentError) rather than dropped. Scales as materialize_to_pool. Eager
        (CUDA-graph capturable; not traced by torch.compile). The pool is checked once per
        (kind, tensor, fields, scales)."""
        if kind.replace("-", "_") in ("per_layer", "flat", "paged"):
            if fields:  # the tensors' shapes and strides are the layout: a field would be dropped
                raise ArgumentError(f"{kind} layout: {', '.join(sorted(fields))} not taken; a "
                                    "per_layer pool's strides come from its tensors (use "
                                    "views), the fields are for token_major pools")
            k_buffers, v_buffers = pool
            return self.materialize_to_pool(ctx_hidden, positions, cache_loc, k_buffers,
                                            v_buffers, k_scales, v_scales, slot_mappings)
        if self._native is None:
            raise RuntimeError("a helper built on meta tensors has no pool to write")
        if _is_compiling():
            raise NotImplementedError("materialize_to_layout runs eagerly (it can be captured in a "
                                      "CUDA graph): call it outside the compiled region")
        ctx_hidden, positions = self._inputs(ctx_hidden, positions)
        cache_loc = self._index(cache_loc, "cache_loc")
        maps = [] if slot_mappings is None else [
            self._index(m, f"slot_mappings[{i}]") for i, m in enumerate(slot_mappings)]
        key = (kind, id(pool), tuple(sorted(fields.items())), id(k_scales), id(v_scales))
        bound = self.__dict__.setdefault("_layout_bindings", {})
        entry = bound.get(key)
        if entry is None or entry[0] is not pool or entry[1] is not k_scales or entry[2] is not v_scales:
            torch = _torch()
            tensors = isinstance(k_scales, torch.Tensor), isinstance(v_scales, torch.Tensor)
            if any(tensors) and not all(tensors):
                raise ValueError("k_scales and v_scales: both tensors or neither")
            fn = self._native["bind_layout"]
            fields_json = json.dumps({k: operator.index(v) for k, v in fields.items()})
            if any(tensors):
                binding = int(fn(kind, pool, fields_json, [], [], [k_scales, v_scales]))
            else:
                binding = int(fn(kind, pool, fields_json, self._scales(k_scales) or [],
                                 self._scales(v_scales) or [], []))
            if len(bound) > 64:
                bound.clear()
            entry = bound[key] = (pool, k_scales, v_scales, binding)
        self._native["materialize_pool"](ctx_hidden, positions, cache_loc, entry[3], maps)

    def _scales(self, values) -> Optional[List[float]]:
        if values is None:
            return None
        values = _per_layer(values, self.num_layers, "scales")
        if any(v is None for v in values):
            raise ValueError("scales: give one per layer, or None for all")
        return [float(v) for v in values]

    def bind_pool(self, k_buffers: Sequence, v_buffers: Sequence, k_scales=None, v_scales=None) -> int:
        """Checks the pool buffers (device, dtype, shape, slot stride, alignment) once and keeps
        their pointers; materialize_to_pool() with the same tensor objects reuses the binding.
        A tensor whose storage is replaced in place (set_, resize_) needs a new call here."""
        b = self._bound
        if (b is not None and len(k_buffers) == len(b[0]) and len(v_buffers) == len(b[1])
                and all(map(_same_objects, k_buffers, b[0]))
                and all(map(_same_objects, v_buffers, b[1]))
                and _same(k_scales, b[2]) and _same(v_scales, b[3])):
            return b[4]
        if self._native is None:
            raise RuntimeError("a helper built on meta tensors has no pool to bind")
        L = self.num_layers
        kb = _per_layer(k_buffers, L, "k_buffers")
        vb = _per_layer(v_buffers, L, "v_buffers")
        torch = _torch()
        for name, bufs in (("k_buffers", kb), ("v_buffers", vb)):
            if any(not isinstance(t, torch.Tensor) for t in bufs):
                raise TypeError(f"{name} must be torch tensors")
        tensors = isinstance(k_scales, torch.Tensor), isinstance(v_scales, torch.Tensor)
        if any(tensors):
            if not all(tensors):
                raise ValueError("k_scales and v_scales: both tensors or neither")
            binding = int(self._fn_bind(kb, vb, [], [], [k_scales, v_scales]))
        else:
            binding = int(self._fn_bind(kb, vb, self._scales(k_scales) or [],
                                        self._scales(v_scales) or [], []))
        self._bound = (tuple(k_buffers), tuple(v_buffers), k_scales, v_scales, binding)
        return binding

    def check_device_errors(self) -> int:
        """The device error bits so far (1 = a position outside the cos/sin table, 2 = a slot
        outside the pool: such tokens were skipped, never read or written out of bounds; the
        kernels always check); synchronizes the current stream. Resets them."""
        if self._native is None:
            raise RuntimeError("a helper built on meta tensors has no device to check")
        _torch().cuda.current_stream(self.device).synchronize()
        return int(self._native["read_errors"](True))

    def __repr__(self) -> str:
        fmt = "" if self.weight_format == "dense" else f", weight_format={self.weight_format!r}"
        return (f"fkv_jit.FusedKVMaterializeHelper({self.config.name!r}, layers={self.layer_ids}, "
                f"groups={len(self.groups)}, device={self.device}{fmt})")


__all__ = ["FusedKVMaterializeHelper", "ArgumentError"]
