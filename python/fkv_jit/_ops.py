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
needs no GPU.
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
    _helper(helper)
    return None
