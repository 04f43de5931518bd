"""Quantized K/V weights for FusedKVMaterializeHelper (docs/quantized.md): the storage format,
the activation dtype and the per-layer scales, checked before anything is built.

The formats, their names (with the engines' spellings) and their scale layouts are the C++
library's (include/fkv/weights.hpp): the binding answers weight_format(name), which refuses a
packed 4-bit scheme as UnsupportedModelError and an unknown name as ArgumentError, and
weight_scale_shape(format, rows, cols).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from ._errors import ArgumentError, UnsupportedModelError
from ._lib import native

# The dtype W_kv is stored in, per format family.
_FP8_FORMATS = ("fp8_tensor", "fp8_channel", "fp8_block")
_INT8_FORMATS = ("int8_channel",)
_BLOCK = 128  # the block edge of fp8_block (include/fkv/weights.hpp kWeightBlock)


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


# ---- the K/V rows of an engine's fused QKV layer -----------------------------------------

def qkv_block_size(proj):
    """The weight_block_size of qkv_proj's quantization (sglang's Fp8LinearMethod keeps it, and
    its quant_config), or None."""
    method = getattr(proj, "quant_method", None)
    for owner in (method, getattr(method, "quant_config", None), proj):
        size = getattr(owner, "weight_block_size", None)
        if size is not None:
            return [int(x) for x in size]
    return None


def qkv_kv_rows(proj, q_size: int, kv_size: int, layer_id: int):
    """The K/V rows of one layer's fused qkv_proj: (weight [2*kv_size, hidden], scales or None,
    format name), as sglang's and vLLM's linear methods keep a layer (fkv_jit.sglang's docstring
    lists the layouts; vLLM's compressed-tensors FP8 keeps the same ones: [out, in] with 3
    per-partition scales or [out, 1] before process_weights_after_loading, the .t() view with
    one scale after it, and block scales [ceil(out/128), ceil(in/128)] as weight_scale)."""
    import torch
    w = getattr(proj, "weight", None)
    if w is None:
        packed = " (it has a qweight: packed 4-bit GPTQ/AWQ weights)" if hasattr(proj, "qweight") else ""
        raise UnsupportedModelError(f"layer {layer_id}: self_attn.qkv_proj has no weight{packed}; "
                                    "fkv-jit reads bf16/fp16, FP8 e4m3 and INT8 K/V weights")
    if w.dim() == 2 and w.stride(0) == 1 and w.stride(1) != 1:
        w = w.t()  # the [in, out] view the engines' FP8/INT8 methods keep: rows of [out, in]
    rows = w[q_size:q_size + 2 * kv_size].detach()
    if w.dtype in (torch.bfloat16, torch.float16):
        return rows, None, "dense"
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if w.dtype not in (fp8, torch.int8):
        raise UnsupportedModelError(
            f"layer {layer_id}: self_attn.qkv_proj.weight is {w.dtype} (a Marlin-repacked or packed "
            "4-bit layout?); fkv-jit reads bf16/fp16, float8_e4m3fn and int8 K/V weights")
    n = q_size + 2 * kv_size
    inv = getattr(proj, "weight_scale_inv", None)
    if w.dtype == fp8 and inv is not None:
        size = qkv_block_size(proj)
        if size is not None and size != [_BLOCK, _BLOCK]:
            raise UnsupportedModelError(
                f"layer {layer_id}: block-FP8 qkv_proj with weight_block_size {size}; fkv-jit "
                f"reads {_BLOCK}x{_BLOCK} blocks")
        if getattr(inv, "format_ue8m0", False) or inv.dtype != torch.float32:
            raise UnsupportedModelError(
                f"layer {layer_id}: qkv_proj.weight_scale_inv is {inv.dtype} in a packed UE8M0 "
                "layout (DeepGEMM's requantization); fkv-jit reads float32 block scales")
        want = (-(-n // _BLOCK), -(-int(w.shape[1]) // _BLOCK))
        if tuple(inv.shape) != want:
            raise ValueError(f"layer {layer_id}: qkv_proj.weight_scale_inv has shape "
                             f"{tuple(inv.shape)}, expected {want} for a {tuple(w.shape)} weight")
        if q_size % _BLOCK or (2 * kv_size) % _BLOCK:
            raise UnsupportedModelError(
                f"layer {layer_id}: block-FP8 qkv_proj: q_size={q_size} and 2*kv_size="
                f"{2 * kv_size} must be whole {_BLOCK}-row scale blocks")
        return rows, inv[q_size // _BLOCK:n // _BLOCK].detach(), "fp8_block"
    scale = getattr(proj, "weight_scale", None)
    if scale is None:
        raise ValueError(f"layer {layer_id}: qkv_proj.weight is {w.dtype} but has no weight_scale "
                         "(or weight_scale_inv)")
    kind = "fp8_channel" if w.dtype == fp8 else "int8_channel"
    if scale.numel() == 1 and w.dtype == fp8:
        return rows, scale.detach().reshape(1), "fp8_tensor"
    if scale.numel() == 3:
        # One scale per logical partition (q, k, v), as the engines keep a fused QKV layer's
        # per-tensor scales before process_weights_after_loading (vLLM's compressed-tensors and
        # Fp8LinearMethod, sglang's): per row, the K rows at the k scale, the V rows at the v one.
        s = scale.detach().reshape(3).float()
        return rows, torch.cat([s[1].expand(kv_size), s[2].expand(kv_size)]).contiguous(), kind
    if w.dtype == fp8 and scale.dim() == 2 and scale.shape[1] > 1:
        # compressed-tensors' block strategy keeps its block scales as weight_scale.
        want = (-(-n // _BLOCK), -(-int(w.shape[1]) // _BLOCK))
        if tuple(scale.shape) != want:
            raise ValueError(f"layer {layer_id}: qkv_proj.weight_scale has shape "
                             f"{tuple(scale.shape)}; block scales of a {tuple(w.shape)} weight "
                             f"are {want}")
        if q_size % _BLOCK or (2 * kv_size) % _BLOCK:
            raise UnsupportedModelError(
                f"layer {layer_id}: block-FP8 qkv_proj: q_size={q_size} and 2*kv_size="
                f"{2 * kv_size} must be whole {_BLOCK}-row scale blocks")
        return rows, scale[q_size // _BLOCK:n // _BLOCK].detach().float(), "fp8_block"
    if scale.numel() == n:
        return rows, scale.detach().reshape(-1)[q_size:n], kind
    raise ValueError(f"layer {layer_id}: qkv_proj.weight_scale has {scale.numel()} values; "
                     f"{w.dtype} weights are read with {'1 (per tensor), ' if w.dtype == fp8 else ''}3 (one "
                     f"per q, k, v partition) or {n} (one per output row)")
