"""The torch custom ops behind FusedKVMaterializeHelper, for torch.compile and the dispatcher.

    fkv_jit::materialize(int helper, Tensor hidden, Tensor positions) -> Tensor
        the stacked K/V of every layer, flat: per group K [L_g, T, H, D] then V;
    fkv_jit::materialize_to_pool(int helper, Tensor hidden, Tensor positions, Tensor cache_loc,
                                 Tensor(a!)[] k_buffers, Tensor(b!)[] v_buffers,
                                 float[]? k_scales, float[]? v_scales) -> ()
        writes the pool buffers in place (declared mutated, so torch.compile orders reads and
        writes of the pool around it).

`helper` is the id of a live helper (a registry of weak references), a constant in a traced
graph. The fake implementations give output shapes from the helper's plan alone, so tracing
needs no GPU. They make the checks the binding makes before a launch
(python/src/native_materializer.cpp and native_pool.cpp: State::input, bind_pool, check_slots),
with the same texts and exception types, so that a call the CUDA path would refuse fails at
trace time (and on a meta helper) instead of producing shapes from the wrong dimensions.
"""

from __future__ import annotations

import itertools
import weakref
from typing import List, Optional

import torch

_helpers: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_ids = itertools.count(1)


def register(helper) -> int:
    i = next(_ids)
    _helpers[i] = helper
    return i


def _helper(i: int):
    h = _helpers.get(i)
    if h is None:
        raise RuntimeError(f"fkv_jit helper {i} no longer exists (a compiled graph outlived it)")
    return h


def _dtype_ok(dtype, name: str) -> bool:
    """dtype is what the binding's matches() accepts for the library dtype `name`."""
    want = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
            "fp8_e4m3": getattr(torch, "float8_e4m3fn", None),
            "fp8_e5m2": getattr(torch, "float8_e5m2", None)}.get(name)
    return dtype == want or (name.startswith("fp8") and dtype == torch.uint8)


def check_inputs(h, hidden, positions) -> None:
    """ctx_hidden [T, hidden] in the activation dtype on the helper's device; positions [T]
    int64 (the helper converts int32 and flattens before the op)."""
    for what, t in (("ctx_hidden", hidden), ("positions", positions)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be a torch tensor")
        if t.device != h.device:
            raise ValueError(f"{what} must be on {h.device}, the helper's device")
    if hidden.dim() != 2 or hidden.shape[1] != h.hidden:
        raise ValueError(f"ctx_hidden must be [num_tokens, {h.hidden}] with contiguous rows")
    if hidden.dtype != h.act_dtype:
        raise TypeError(f"ctx_hidden dtype {hidden.dtype} differs from the helper's activation "
                        f"dtype {h.act}")
    T = hidden.shape[0]
    if positions.dim() != 1 or positions.shape[0] != T:
        raise ValueError("positions must match ctx_hidden token count for fused KV "
                         f"materialization: positions={positions.numel()}, total_ctx={T}.")
    if positions.dtype != torch.int64:
        raise TypeError(f"positions must be a contiguous int64 tensor, got {positions.dtype}")


def check_pool(h, T, cache_loc, k_buffers, v_buffers, k_scales, v_scales) -> None:
    """One buffer per attention layer, of the pool dtype, each [num_slots, H, D] or
    [num_slots, H*D] (paged: [num_blocks, block_size, H, D]) with the same number of slots;
    cache_loc [T] int64; float scales for fp8 pools only, one per layer."""
    L = h.num_layers
    if len(k_buffers) != L or len(v_buffers) != L:
        raise ValueError(f"k_buffers and v_buffers need one buffer per attention layer ({L}), "
                         f"got {len(k_buffers)} and {len(v_buffers)}")
    fp8 = h.cache_name.startswith("fp8")
    for scales in (k_scales, v_scales):
        if scales is not None and (not fp8 or len(scales) != L):
            raise ValueError(f"k_scales / v_scales take one value per attention layer ({L}) "
                             f"and apply to fp8 pools only; this pool is {h.cache_name}")
    slots = None
    for name, bufs in (("k_buffers", k_buffers), ("v_buffers", v_buffers)):
        for i, t in enumerate(bufs):
            what = f"{name}[{i}]"
            if t.device != h.device:
                raise ValueError(f"{what} must be on {h.device}, the helper's device")
            if not _dtype_ok(t.dtype, h.cache_name):
                raise TypeError(f"{what} is {t.dtype}; the helper writes {h.cache_name} pools "
                                "(kv_cache_dtype)")
            width = h.layer_widths[i]
            if h.paged:
                if t.dim() != 4 or t.shape[2] * t.shape[3] != width:
                    raise ValueError(f"{what} must be a [num_blocks, block_size, num_kv_heads, "
                                     f"head_dim] view with a contiguous last dim (H*D = {width})")
                n = t.shape[0] * t.shape[1]
            else:
                inner = 1
                for d in t.shape[1:]:
                    inner *= d
                if t.dim() < 2 or inner != width:
                    raise ValueError(f"{what} must be [num_slots, num_kv_heads, head_dim] (or "
                                     f"[num_slots, {width}]) with contiguous rows")
                n = t.shape[0]
            if slots is None:
                slots = n
            elif n != slots:
                raise ValueError(f"{what}: every pool buffer must have the same layout (slots, "
                                 f"block size and strides) as k_buffers[0]: {slots} slots; got {n}")
    if not isinstance(cache_loc, torch.Tensor) or cache_loc.device != h.device:
        raise ValueError(f"cache_loc must be a tensor on {h.device}, the helper's device")
    if cache_loc.dim() != 1 or cache_loc.shape[0] != T:
        raise ValueError(f"cache_loc has {cache_loc.numel()} entries for {T} tokens")
    if cache_loc.dtype != torch.int64:
        raise TypeError(f"cache_loc must be a contiguous int64 tensor, got {cache_loc.dtype}")


@torch.library.custom_op("fkv_jit::materialize", mutates_args=())
def materialize(helper: int, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    h = _helper(helper)
    if h._native is None:
        raise RuntimeError("a helper built on meta tensors cannot run on real tensors")
    out = torch.empty(hidden.shape[0] * h._stacked_elems, dtype=h.act_dtype, device=h.device)
    if hidden.shape[0] != 0:
        h._fn_stacked(hidden, positions, out)
    return out


@materialize.register_fake
def _materialize_fake(helper: int, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    h = _helper(helper)
    check_inputs(h, hidden, positions)
    return hidden.new_empty((hidden.shape[0] * h._stacked_elems,), dtype=h.act_dtype)


@torch.library.custom_op("fkv_jit::materialize_to_pool", mutates_args=("k_buffers", "v_buffers"))
def materialize_to_pool(helper: int, hidden: torch.Tensor, positions: torch.Tensor,
                        cache_loc: torch.Tensor, k_buffers: List[torch.Tensor],
                        v_buffers: List[torch.Tensor], k_scales: Optional[List[float]],
                        v_scales: Optional[List[float]]) -> None:
    h = _helper(helper)
    if h._native is None:
        raise RuntimeError("a helper built on meta tensors cannot run on real tensors")
    binding = h.bind_pool(k_buffers, v_buffers, k_scales, v_scales)
    if hidden.shape[0] != 0:
        h._fn_pool(hidden, positions, cache_loc, binding, [])


@materialize_to_pool.register_fake
def _materialize_to_pool_fake(helper, hidden, positions, cache_loc, k_buffers, v_buffers,
                              k_scales, v_scales) -> None:
    h = _helper(helper)
    check_inputs(h, hidden, positions)
    check_pool(h, hidden.shape[0], cache_loc, k_buffers, v_buffers, k_scales, v_scales)
    return None
