"""Quantized K/V weights for FusedKVMaterializeHelper (docs/quantized.md): the storage format,
the activation dtype and the per-layer scales, checked before anything is built.

The formats, their names (with the engines' spellings) and their scale layouts are the C++
library's (include/fkv/weights.hpp): the binding answers weight_format(name), which refuses a
packed 4-bit scheme as UnsupportedModelError and an unknown name as ArgumentError, and
weight_scale_shape(format, rows, cols).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from ._errors import ArgumentError
from ._lib import native

# The dtype W_kv is stored in, per format family.
_FP8_FORMATS = ("fp8_tensor", "fp8_channel", "fp8_block")
_INT8_FORMATS = ("int8_channel",)


def format_name(weight_format) -> str:
    """The canonical name of a format ("dense" for None)."""
    if weight_format is None:
        return "dense"
    if not isinstance(weight_format, str):
        raise TypeError(f"weight_format must be a str such as 'fp8_channel', got {weight_format!r}")
    return str(native().weight_format(weight_format))


def _act_name(torch, dtype) -> Optional[str]:
    """'bf16' / 'fp16' for a torch dtype or a name of one; None otherwise."""
    if isinstance(dtype, str):
        return {"bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16", "fp16": "fp16",
                "float16": "fp16", "half": "fp16", "torch.float16": "fp16"}.get(dtype)
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype)


def storage(torch, first, weight_format, act_dtype) -> Tuple[str, str, object]:
    """(format, activation name, activation torch dtype) for weights whose first tensor is
    `first`: bf16/fp16 tensors are dense (act_dtype, if given, must agree); float8_e4m3fn and
    int8 tensors are quantized and need weight_format and act_dtype."""
    fmt = format_name(weight_format)
    act = None if act_dtype is None else _act_name(torch, act_dtype)
    if act_dtype is not None and act is None:
        raise TypeError(f"act_dtype must be torch.bfloat16 or torch.float16, got {act_dtype}")
    dense = _act_name(torch, first.dtype)
    if dense is not None:
        if fmt != "dense":
            raise TypeError(f"kv_weights are {first.dtype}, but weight_format is {fmt!r}: pass "
                            "the stored FP8 / INT8 tensors, or no weight_format")
        if act is not None and act != dense:
            raise TypeError(f"act_dtype {act_dtype} differs from the kv_weights' {first.dtype}")
        return "dense", dense, first.dtype
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if first.dtype not in (fp8, torch.int8):
        raise TypeError(f"kv_weights dtype must be bfloat16 or float16 (dense), float8_e4m3fn or "
                        f"int8 (quantized), got {first.dtype}")
    fits = _FP8_FORMATS if first.dtype == fp8 else _INT8_FORMATS
    if fmt == "dense":
        raise ArgumentError(f"kv_weights are {first.dtype}: pass weight_format (one of "
                            f"{', '.join(fits)}) and weight_scales")
    if fmt not in fits:
        raise TypeError(f"weight_format {fmt!r} does not store {first.dtype}: use one of "
                        f"{', '.join(fits)}")
    if act is None:
        raise ArgumentError("act_dtype (torch.bfloat16 or torch.float16) is required with "
                            "quantized kv_weights: the activations' dtype cannot be read from "
                            f"{first.dtype} weights")
    return fmt, act, {"bf16": torch.bfloat16, "fp16": torch.float16}[act]


def scales(torch, fmt: str, weight_scales, weights, per_layer, hidden: int) -> List:
    """Per layer, its scales as the binding takes them: contiguous float32 tensors on the weights'
    device, as many values as the format gives a [rows, hidden] weight. A scale tensor's shape,
    size-1 dimensions aside, is the format's: () per tensor, (rows,) per output row (so [rows]
    and [rows, 1] alike), (ceil(rows / 128), ceil(hidden / 128)) for 128 x 128 blocks."""
    if fmt == "dense":
        if weight_scales is not None:
            raise ValueError("weight_scales are given for dense kv_weights (bf16/fp16): pass "
                             "them with quantized weights and weight_format only")
        return []
    if weight_scales is None:
        raise ArgumentError(f"weight_scales are required with {fmt} kv_weights: one float32 "
                            "tensor per attention layer")
    values = per_layer(weight_scales, len(weights), "weight_scales")
    out = []
    for i, (s, w) in enumerate(zip(values, weights)):
        if not isinstance(s, torch.Tensor):
            raise TypeError(f"weight_scales[{i}] must be a torch tensor")
        if s.dtype != torch.float32:
            raise TypeError(f"weight_scales[{i}] is {s.dtype}; scales are float32")
        if s.device != w.device:
            raise ValueError(f"weight_scales[{i}] is on {s.device}; kv_weights[{i}] on {w.device}")
        want = [int(n) for n in native().weight_scale_shape(fmt, int(w.shape[0]), hidden)]
        if [n for n in s.shape if n != 1] != [n for n in want if n != 1]:
            raise ValueError(f"weight_scales[{i}] has shape {tuple(s.shape)}; {fmt} weights of "
                             f"{tuple(w.shape)} take {tuple(want)}")
        out.append(s.detach().reshape(-1).contiguous())
    return out
