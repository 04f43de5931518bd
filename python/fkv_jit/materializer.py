"""FusedKVMaterializeHelper: the seed helper's shape over fkv-jit kernels, with torch tensors.

One projection GEMM for every layer (torch), then one fused norm + RoPE + KV-write launch per
layer group on torch's current stream. Nothing here synchronizes or copies between host and
device on the call path, so both materialize methods can be captured in a CUDA graph once their
kernels are prepared (call prepare(), or run once before capture).
"""

from __future__ import annotations

import ctypes
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _capi

_ACT_DTYPES = ("bf16", "fp16", "fp32")


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fkv_jit.FusedKVMaterializeHelper needs torch") from e
    return torch


def _dtype_name(t) -> Optional[str]:
    """fkv's name for a torch dtype, or None."""
    torch = _torch()
    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    for attr, name in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    return names.get(t)


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


class _Group:
    """One plan group: its layers, spec, weights slice and launch constants."""

    def __init__(self, index, layers, spec, offset, width):
        self.index = index
        self.layers = layers          # model numbering
        self.spec = spec              # fkv_jit.AttentionSpec
        self.offset = offset          # first proj column of this group (elements)
        self.width = width            # 2 * H * D: proj columns per layer
        self.k_norm_weight = None     # torch fp32 [Lg, D] on the device, (1+w) folded
        self.eps = None               # ctypes float[Lg]
        self.cos_sin = None           # torch [max_position, R] on the device, or None (R = 0)


class FusedKVMaterializeHelper:
    """Fused KV materialization for the attention layers of a (draft) model config.

    Args:
      config: path of config.json, a dict, or an fkv_jit.Config.
      kv_weights: per attention layer (model order) the K/V rows of its QKV projection weight,
        [2*KV, hidden] (K rows then V rows), as a sequence of tensors or one [L, 2*KV, hidden]
        tensor, all on one CUDA device in bf16, fp16 or fp32 (the activation dtype).
      k_norm_weights: per layer [D] K-norm weights (required iff the config has a K norm). For
        (1 + w) norms (Gemma, Qwen3.5) pass w as stored: it is folded once here.
      eps: float or per-layer floats; default: the config's per-layer eps.
      cos_sin_cache: [max_position, R] (cos in columns [0, R/2), sin in [R/2, R)), fp32 or the
        activation dtype, e.g. rotary_emb.cos_sin_cache; in grouped mode one per group (None for
        groups without RoPE). None: computed from the config (float64, rounded once to fp32)
        for max_position rows (default: the config's max_position_embeddings).
      grouped: False (default) = strict, the seed's semantics: one group, ValueError with the
        SPEC §3 text on mismatch. True = one launch per uniform group of layers.
      kv_cache_dtype: the pool dtype when the pool tensors are stored as uint8 (fp8 caches
        viewed as bytes): "fp8_e4m3" or "fp8_e5m2".
      debug: check positions and slots on the device (see check_device_errors()).

    write_layer_kv(layer_id, k, v) receives the model layer number (0..L-1 for a draft whose
    layers are all attention layers) and [T, H, D] tensors, like the seed.
    """

    def __init__(self, config, kv_weights, k_norm_weights=None, eps=None, cos_sin_cache=None,
                 *, grouped: bool = False, max_position: Optional[int] = None,
                 kv_cache_dtype: Optional[str] = None, debug: bool = False):
        torch = _torch()
        from . import _as_config, plan as make_plan
        self.config = _as_config(config)
        self.plan = make_plan(self.config, grouped=grouped)  # ValueError on mismatch
        self.grouped = grouped
        self.debug = debug
        self.kv_cache_dtype = kv_cache_dtype

        layer_infos = {l.index: l for l in self.config.attention_layers}
        self.layer_ids: List[int] = sorted(layer_infos)
        L = len(self.layer_ids)
        pos_of = {layer: i for i, layer in enumerate(self.layer_ids)}

        weights = _per_layer(kv_weights, L, "kv_weights")
        if any(not isinstance(w, torch.Tensor) for w in weights):
            raise TypeError("kv_weights must be torch tensors")
        first = weights[0]
        if first.device.type != "cuda":
            raise ValueError(f"kv_weights must be on a CUDA device, got {first.device}")
        self.device = first.device
        self.act = _dtype_name(first.dtype)
        if self.act not in _ACT_DTYPES:
            raise TypeError(f"kv_weights dtype must be bfloat16, float16 or float32, got {first.dtype}")
        self.act_dtype = first.dtype
        self.hidden = int(first.shape[-1])
        for i, w in enumerate(weights):
            spec = self._spec_of(self.layer_ids[i])
            want = (2 * spec.num_kv_heads * spec.head_dim, self.hidden)
            if tuple(w.shape) != want:
                raise ValueError(f"kv_weights[{i}] (layer {self.layer_ids[i]}) has shape "
                                 f"{tuple(w.shape)}, expected {want} (2 * num_kv_heads * head_dim "
                                 "rows: K then V)")
            if w.device != self.device or w.dtype != self.act_dtype:
                raise ValueError(f"kv_weights[{i}] is {w.dtype} on {w.device}; every layer must be "
                                 f"{self.act_dtype} on {self.device}")

        norms = _per_layer(k_norm_weights, L, "k_norm_weights")
        if eps is None:
            eps_values = [layer_infos[l].eps for l in self.layer_ids]
        else:
            eps_values = [float(e) for e in _per_layer(eps, L, "eps")]

        caches = cos_sin_cache
        if caches is not None and not isinstance(caches, (list, tuple)):
            rope_groups = [g for g in self.plan.groups if g.spec.rotary_dim > 0]
            if any(g.rope != rope_groups[0].rope for g in rope_groups[1:]):
                raise ValueError("the plan's groups use different RoPE frequencies, so one "
                                 "cos/sin cache cannot serve them all: pass one per group "
                                 "(None for groups without RoPE), or None to compute them")
            caches = [caches if g.spec.rotary_dim > 0 else None for g in self.plan.groups]
        if caches is not None and len(caches) != len(self.plan.groups):
            raise ValueError(f"cos_sin_cache: {len(caches)} tables for {len(self.plan.groups)} groups")

        # Layers sorted by group, so that each group's layers are adjacent columns of the one
        # projection output [T, sum of 2*H*D]: one GEMM, one launch per group.
        self.groups: List[_Group] = []
        ordered = []
        offset = 0
        for g in self.plan.groups:
            width = 2 * g.spec.num_kv_heads * g.spec.head_dim
            grp = _Group(g.index, list(g.layers), g.spec, offset, width)
            offset += width * len(g.layers)
            idx = [pos_of[l] for l in g.layers]
            ordered += [weights[i] for i in idx]
            if g.spec.k_norm != "none":
                if any(norms[i] is None for i in idx):
                    raise ValueError(f"layers {list(g.layers)} have a K norm ({g.spec.k_norm}) in "
                                     "the config: pass k_norm_weights")
                w = torch.stack([norms[i].to(device=self.device, dtype=torch.float32).reshape(-1)
                                 for i in idx])
                if w.shape[1] != g.spec.head_dim:
                    raise ValueError(f"k_norm_weights have {w.shape[1]} values per layer, expected "
                                     f"head_dim={g.spec.head_dim}")
                if g.spec.k_norm == "rms_one_plus":
                    w = w + 1.0
                grp.k_norm_weight = w.contiguous()
            elif any(norms[i] is not None for i in idx):
                raise ValueError(f"k_norm_weights were given, but layers {list(g.layers)} have no K "
                                 "norm in the config")
            grp.eps = (ctypes.c_float * len(idx))(*[eps_values[i] for i in idx])
            if g.spec.rotary_dim > 0:
                table = caches[g.index] if caches is not None else None
                if table is None:
                    table = self.plan.cos_sin_tensor(g.index, max_position or 0, device=self.device)
                grp.cos_sin = self._check_cos_sin(table, g.spec.rotary_dim)
            self.groups.append(grp)
        self.proj_width = offset
        self.w_all = torch.cat(ordered, dim=0).contiguous()  # [proj_width, hidden]
        self.num_layers = L
        self.error_flag = torch.zeros(1, dtype=torch.int32, device=self.device) if debug else None
        self._kernels: Dict[tuple, object] = {}
        self._pool_arrays: Dict[tuple, tuple] = {}

    # ---- setup helpers ---------------------------------------------------------------------

    def _spec_of(self, layer: int):
        for g in self.plan.groups:
            if layer in g.layers:
                return g.spec
        raise KeyError(layer)

    def _check_cos_sin(self, t, R: int):
        torch = _torch()
        if not isinstance(t, torch.Tensor):
            raise TypeError("cos_sin_cache must be a torch tensor")
        if t.dim() != 2 or t.shape[1] != R or t.stride(1) != 1:
            raise ValueError(f"cos_sin_cache must be [max_position, rotary_dim={R}] with contiguous "
                             f"rows, got shape {tuple(t.shape)} strides {t.stride()}")
        if t.dtype not in (torch.float32, self.act_dtype):
            raise TypeError(f"cos_sin_cache dtype must be float32 or {self.act_dtype}, got {t.dtype}")
        if t.device != self.device:
            t = t.to(self.device)
        return t

    def kernel(self, group: int, pool: bool, cache: str, positions_i64: bool = True,
               slots_i64: bool = True):
        """The loaded kernel of a group for one output mode and dtype set (prepared on first
        use; prepare before CUDA graph capture)."""
        from . import Kernel, KernelDesc
        grp = self.groups[group]
        cs = "fp32" if grp.cos_sin is None else _dtype_name(grp.cos_sin.dtype)
        key = (group, pool, cache, cs, positions_i64, slots_i64)
        k = self._kernels.get(key)
        if k is None:
            s = grp.spec
            desc = KernelDesc(s.num_kv_heads, s.head_dim, s.rotary_dim, s.is_neox_style,
                              s.k_norm != "none", self.act, cache, cs, positions_i64, slots_i64,
                              pool, self.debug)
            torch = _torch()
            with torch.cuda.device(self.device):
                k = Kernel(desc, self.device.index if self.device.index is not None else
                           torch.cuda.current_device())
            self._kernels[key] = k
        return k

    def prepare(self, pool: bool = True, stacked: bool = True, kv_cache_dtype=None,
                positions_dtype=None, cache_loc_dtype=None) -> None:
        """Loads every kernel the given modes need (compiling or reading the disk cache), so
        that later calls, and CUDA graph capture, do no loading."""
        torch = _torch()
        pos64 = positions_dtype in (None, torch.int64)
        slot64 = cache_loc_dtype in (None, torch.int64)
        cache = self._cache_name(kv_cache_dtype) if kv_cache_dtype is not None else self.act
        for g in range(len(self.groups)):
            if stacked:
                self.kernel(g, False, self.act, pos64, True)
            if pool:
                self.kernel(g, True, cache, pos64, slot64)

    def _cache_name(self, dtype) -> str:
        torch = _torch()
        if isinstance(dtype, str):
            return dtype
        if dtype == torch.uint8:
            if self.kv_cache_dtype is None:
                raise TypeError("KV buffers are uint8: say which fp8 format they hold with "
                                "kv_cache_dtype='fp8_e4m3' or 'fp8_e5m2' when constructing the helper")
            return self.kv_cache_dtype
        name = _dtype_name(dtype)
        if name is None:
            raise TypeError(f"KV cache dtype {dtype} is not supported: use the activation dtype "
                            f"({self.act_dtype}), float8_e4m3fn or float8_e5m2")
        return name

    # ---- per-call checks -------------------------------------------------------------------

    def _check_call(self, ctx_hidden, positions):
        torch = _torch()
        if not isinstance(ctx_hidden, torch.Tensor) or not isinstance(positions, torch.Tensor):
            raise TypeError("ctx_hidden and positions must be torch tensors")
        if ctx_hidden.dim() != 2 or ctx_hidden.shape[1] != self.hidden:
            raise ValueError(f"ctx_hidden must be [num_tokens, {self.hidden}], got "
                             f"{tuple(ctx_hidden.shape)}")
        if ctx_hidden.device != self.device:
            raise ValueError(f"ctx_hidden is on {ctx_hidden.device}, the weights on {self.device}")
        if ctx_hidden.dtype != self.act_dtype:
            raise TypeError(f"ctx_hidden dtype {ctx_hidden.dtype} differs from the weights' "
                            f"{self.act_dtype}")
        total_ctx = int(ctx_hidden.shape[0])
        if positions.dim() != 1:
            positions = positions.reshape(-1)
        if positions.numel() != total_ctx:
            raise ValueError(
                "positions must match ctx_hidden token count for fused KV materialization: "
                f"positions={positions.numel()}, total_ctx={total_ctx}.")
        if positions.device != self.device:
            raise ValueError(f"positions are on {positions.device}, expected {self.device}")
        if positions.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"positions must be int32 or int64, got {positions.dtype}")
        if not positions.is_contiguous():
            positions = positions.contiguous()
        return total_ctx, positions

    def _project(self, ctx_hidden):
        """proj [T, sum over layers of 2*H*D], group by group: one GEMM for every layer."""
        return ctx_hidden.matmul(self.w_all.t())

    def _inputs(self, grp: _Group, proj, positions) -> _capi.Inputs:
        T = int(proj.shape[0])
        es = proj.element_size()
        cs = grp.cos_sin
        return _capi.Inputs(
            proj=proj.data_ptr() + grp.offset * es,
            num_tokens=T,
            num_layers=len(grp.layers),
            proj_stride_token=int(proj.stride(0)),
            proj_stride_layer=grp.width,
            positions=positions.data_ptr(),
            cos_sin=cs.data_ptr() if cs is not None else None,
            max_position=int(cs.shape[0]) if cs is not None else 0,
            cos_sin_stride=int(cs.stride(0)) if cs is not None else 0,
            k_norm_weight=grp.k_norm_weight.data_ptr() if grp.k_norm_weight is not None else None,
            eps=ctypes.cast(grp.eps, ctypes.c_void_p).value,
            error_flag=self.error_flag.data_ptr() if self.error_flag is not None else None,
        )

    def _stream(self) -> int:
        return _torch().cuda.current_stream(self.device).cuda_stream

    # ---- the operations --------------------------------------------------------------------

    def materialize(self, ctx_hidden, positions,
                    write_layer_kv: Callable[[int, object, object], None]) -> None:
        """The seed's operation: K/V of every layer for ctx_hidden [T, hidden] at `positions`
        [T], handed to write_layer_kv(layer_id, k [T, H, D], v [T, H, D]) layer by layer."""
        torch = _torch()
        total_ctx, positions = self._check_call(ctx_hidden, positions)
        if total_ctx == 0:
            return
        proj = self._project(ctx_hidden)
        pos64 = positions.dtype == torch.int64
        stream = self._stream()
        out = {}
        for grp in self.groups:
            s = grp.spec
            k_out = torch.empty((len(grp.layers), total_ctx, s.num_kv_heads, s.head_dim),
                                dtype=self.act_dtype, device=self.device)
            v_out = torch.empty_like(k_out)
            kern = self.kernel(grp.index, False, self.act, pos64, True)
            kern.materialize_stacked(self._inputs(grp, proj, positions), k_out.data_ptr(),
                                     v_out.data_ptr(), stream)
            for i, layer in enumerate(grp.layers):
                out[layer] = (k_out[i], v_out[i])
        for layer in self.layer_ids:
            write_layer_kv(layer, *out[layer])

    def materialize_to_pool(self, ctx_hidden, positions, cache_loc, k_buffers, v_buffers,
                            k_scales=None, v_scales=None) -> None:
        """Writes K/V straight into the KV pool: row cache_loc[t] of each layer's buffers
        (k_buffers[i], v_buffers[i] for the i-th attention layer, [num_slots, H, D] or
        [num_slots, H*D] with contiguous rows); cache_loc[t] < 0 is skipped. k_scales/v_scales:
        per-layer floats for fp8 pools (stored = x / scale, saturated); None = 1.0."""
        torch = _torch()
        total_ctx, positions = self._check_call(ctx_hidden, positions)
        if not isinstance(cache_loc, torch.Tensor):
            raise TypeError("cache_loc must be a torch tensor")
        if cache_loc.dim() != 1:
            cache_loc = cache_loc.reshape(-1)
        if cache_loc.numel() != total_ctx:
            raise ValueError(f"cache_loc has {cache_loc.numel()} entries for {total_ctx} tokens")
        if cache_loc.device != self.device:
            raise ValueError(f"cache_loc is on {cache_loc.device}, expected {self.device}")
        if cache_loc.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"cache_loc must be int32 or int64, got {cache_loc.dtype}")
        if not cache_loc.is_contiguous():
            cache_loc = cache_loc.contiguous()
        L = self.num_layers
        kb = _per_layer(k_buffers, L, "k_buffers")
        vb = _per_layer(v_buffers, L, "v_buffers")
        ks = _per_layer(k_scales, L, "k_scales")
        vs = _per_layer(v_scales, L, "v_scales")
        if total_ctx == 0:
            return
        proj = self._project(ctx_hidden)
        pos64 = positions.dtype == torch.int64
        slot64 = cache_loc.dtype == torch.int64
        stream = self._stream()
        pos_of = {layer: i for i, layer in enumerate(self.layer_ids)}
        for grp in self.groups:
            idx = [pos_of[l] for l in grp.layers]
            cache, num_slots, slot_stride = self._check_pool(grp, [kb[i] for i in idx],
                                                             [vb[i] for i in idx])
            k_ptrs, v_ptrs = self._ptr_arrays([kb[i] for i in idx], [vb[i] for i in idx])
            kscale = self._scales([ks[i] for i in idx])
            vscale = self._scales([vs[i] for i in idx])
            kern = self.kernel(grp.index, True, cache, pos64, slot64)
            kern.materialize_pool(self._inputs(grp, proj, positions), cache_loc.data_ptr(),
                                  k_ptrs, v_ptrs, num_slots, slot_stride, kscale, vscale, stream)

    def check_device_errors(self) -> int:
        """Debug mode: the device error bits so far (1 = a position outside the cos/sin cache,
        2 = a slot outside the pool); synchronizes. Resets them."""
        if self.error_flag is None:
            raise RuntimeError("construct the helper with debug=True to check on the device")
        bits = int(self.error_flag.item())
        self.error_flag.zero_()
        return bits

    # ---- pool helpers ----------------------------------------------------------------------

    def _check_pool(self, grp: _Group, kb: list, vb: list) -> Tuple[str, int, int]:
        torch = _torch()
        hd = grp.spec.num_kv_heads * grp.spec.head_dim
        cache = None
        shape = None
        for name, bufs in (("k_buffers", kb), ("v_buffers", vb)):
            for layer, b in zip(grp.layers, bufs):
                if not isinstance(b, torch.Tensor):
                    raise TypeError(f"{name} of layer {layer} must be a torch tensor")
                if b.device != self.device:
                    raise ValueError(f"{name} of layer {layer} is on {b.device}, expected {self.device}")
                if b.dim() < 2 or b[0].numel() != hd or not b[0].is_contiguous():
                    raise ValueError(f"{name} of layer {layer} must be [num_slots, {grp.spec.num_kv_heads}, "
                                     f"{grp.spec.head_dim}] (or [num_slots, {hd}]) with contiguous "
                                     f"rows, got shape {tuple(b.shape)} strides {b.stride()}")
                c = self._cache_name(b.dtype)
                if cache is None:
                    cache, shape = c, (int(b.shape[0]), int(b.stride(0)))
                elif c != cache or (int(b.shape[0]), int(b.stride(0))) != shape:
                    raise ValueError(f"{name} of layer {layer}: every buffer of a group must share "
                                     f"dtype, slot count and slot stride ({cache}, {shape[0]} slots, "
                                     f"stride {shape[1]}); got {c}, {int(b.shape[0])}, {int(b.stride(0))}")
        if cache in ("bf16", "fp16", "fp32") and cache != self.act:
            raise TypeError(f"KV buffers are {cache} but the activations {self.act}: a non-fp8 pool "
                            "must have the activation dtype")
        return cache, shape[0], shape[1]

    def _ptr_arrays(self, kb: list, vb: list):
        key = tuple(b.data_ptr() for b in kb) + tuple(b.data_ptr() for b in vb)
        hit = self._pool_arrays.get(key)
        if hit is None:
            n = len(kb)
            hit = ((ctypes.c_void_p * n)(*[b.data_ptr() for b in kb]),
                   (ctypes.c_void_p * n)(*[b.data_ptr() for b in vb]))
            if len(self._pool_arrays) > 64:
                self._pool_arrays.clear()
            self._pool_arrays[key] = hit
        return hit

    @staticmethod
    def _scales(values: list):
        if all(v is None for v in values):
            return None
        if any(v is None for v in values):
            raise ValueError("scales: give one per layer, or None for all")
        return (ctypes.c_float * len(values))(*[float(v) for v in values])
