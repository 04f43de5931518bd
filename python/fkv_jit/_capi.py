"""ctypes declarations of the C API (include/fkv/fkv.h) and the search for libfkv.

Pure Python: no compiled extension, so the package works with any Python 3 and any torch.
The structs below mirror fkv.h field by field; keep them in the same order.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from pathlib import Path
from typing import List, Optional

# ---- status codes (enum fkv_status) -------------------------------------------------------
FKV_OK = 0
FKV_ERR_CONFIG_MISMATCH = 1
FKV_ERR_BAD_INPUT = 2
FKV_ERR_COMPILE = 3
FKV_ERR_CUDA = 4
FKV_ERR_CACHE = 5
FKV_ERR_ARGUMENT = 6
FKV_ERR_OUT_OF_MEMORY = 7
FKV_ERR_INTERNAL = 8

# ---- enum fkv_dtype / fkv_k_norm -----------------------------------------------------------
DTYPE_BF16, DTYPE_FP16, DTYPE_FP32, DTYPE_FP8_E4M3, DTYPE_FP8_E5M2 = range(5)
DTYPE_NAMES = {DTYPE_BF16: "bf16", DTYPE_FP16: "fp16", DTYPE_FP32: "fp32",
               DTYPE_FP8_E4M3: "fp8_e4m3", DTYPE_FP8_E5M2: "fp8_e5m2"}
K_NORM_NAMES = {0: "none", 1: "rms", 2: "rms_one_plus"}


class LayerInfo(ctypes.Structure):
    _fields_ = [
        ("index", ctypes.c_int),
        ("is_attention", ctypes.c_int),
        ("is_sliding", ctypes.c_int),
        ("num_kv_heads", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("rotary_dim", ctypes.c_int),
        ("is_neox_style", ctypes.c_int),
        ("k_norm", ctypes.c_int),
        ("eps", ctypes.c_double),
        ("rope_theta", ctypes.c_double),
        ("sliding_window", ctypes.c_int),
        ("unsupported", ctypes.c_int),
    ]


class AttentionInfo(ctypes.Structure):
    _fields_ = [
        ("num_kv_heads", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("rotary_dim", ctypes.c_int),
        ("is_neox_style", ctypes.c_int),
        ("k_norm", ctypes.c_int),
        ("rope_theta", ctypes.c_double),
        ("rope_scaling_type", ctypes.c_char_p),
    ]


class KernelDesc(ctypes.Structure):
    _fields_ = [
        ("num_kv_heads", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("rotary_dim", ctypes.c_int),
        ("neox", ctypes.c_int),
        ("k_norm", ctypes.c_int),
        ("act", ctypes.c_int),
        ("cache", ctypes.c_int),
        ("cos_sin", ctypes.c_int),
        ("positions_i64", ctypes.c_int),
        ("slots_i64", ctypes.c_int),
        ("mode_pool", ctypes.c_int),
        ("debug", ctypes.c_int),
    ]


class Inputs(ctypes.Structure):
    _fields_ = [
        ("proj", ctypes.c_void_p),
        ("num_tokens", ctypes.c_int64),
        ("num_layers", ctypes.c_int64),
        ("proj_stride_token", ctypes.c_int64),
        ("proj_stride_layer", ctypes.c_int64),
        ("positions", ctypes.c_void_p),
        ("cos_sin", ctypes.c_void_p),
        ("max_position", ctypes.c_int64),
        ("cos_sin_stride", ctypes.c_int64),
        ("k_norm_weight", ctypes.c_void_p),
        ("eps", ctypes.c_void_p),  # host float[L]
        ("error_flag", ctypes.c_void_p),
    ]


def _candidates() -> List[str]:
    """Where libfkv is looked for, in order (docs/integration.md)."""
    out: List[str] = []
    env = os.environ.get("FKV_JIT_LIBRARY")
    if env:
        return [env]  # explicit: no fallback that could load a different build
    here = Path(__file__).resolve().parent
    out += [str(here / "libfkv.so"), str(here / "lib" / "libfkv.so")]
    # The source tree: python/fkv_jit/ -> repository root; newest build-*/libfkv.so first.
    root = here.parent.parent
    builds = glob.glob(str(root / "build*" / "libfkv.so"))
    builds.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out += builds
    found = ctypes.util.find_library("fkv")
    if found:
        out.append(found)
    out.append("libfkv.so")  # LD_LIBRARY_PATH / system paths
    return out


_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded C library (loaded and declared on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        _declare(handle)
        _lib = handle
        return handle
    raise ImportError(
        "fkv_jit cannot find the fkv-jit C library (libfkv.so). Build it (cmake --build build) "
        "and set FKV_JIT_LIBRARY=/path/to/libfkv.so, or copy libfkv.so next to the fkv_jit "
        "package. Tried:\n  " + "\n  ".join(tried))


def library_path() -> str:
    """The file the C library was loaded from."""
    handle = lib()
    return handle._name


def _declare(L: ctypes.CDLL) -> None:
    c_int, c_int64, c_size_t, c_void_p, c_char_p = (
        ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p)
    P = ctypes.POINTER

    def fn(name, restype, *argtypes):
        f = getattr(L, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    fn("fkv_last_error", c_char_p)
    fn("fkv_last_error_log", c_char_p)
    fn("fkv_status_name", c_char_p, c_int)
    fn("fkv_version", c_char_p)
    fn("fkv_driver_available", c_int)

    fn("fkv_config_load", c_int, c_char_p, P(c_void_p))
    fn("fkv_config_from_json", c_int, c_char_p, c_char_p, P(c_void_p))
    fn("fkv_config_free", None, c_void_p)
    fn("fkv_config_num_layers", c_int, c_void_p)
    fn("fkv_config_hidden_size", c_int, c_void_p)
    fn("fkv_config_max_position_embeddings", c_int64, c_void_p)
    fn("fkv_config_dtype", c_char_p, c_void_p)
    fn("fkv_config_architecture", c_char_p, c_void_p)
    fn("fkv_config_layer", c_int, c_void_p, c_int, P(LayerInfo))

    fn("fkv_validate", c_int, c_void_p, P(AttentionInfo))
    fn("fkv_plan_create", c_int, c_void_p, c_int, P(c_void_p))
    fn("fkv_plan_free", None, c_void_p)
    fn("fkv_plan_num_groups", c_int, c_void_p)
    fn("fkv_plan_group_num_layers", c_int, c_void_p, c_int)
    fn("fkv_plan_group_layers", c_int, c_void_p, c_int, P(c_int), c_size_t)
    fn("fkv_plan_group_spec", c_int, c_void_p, c_int, P(AttentionInfo))
    fn("fkv_plan_num_skipped", c_int, c_void_p)
    fn("fkv_plan_skipped_layers", c_int, c_void_p, P(c_int), c_size_t)
    fn("fkv_plan_json", c_char_p, c_void_p)

    fn("fkv_dtype_parse", c_int, c_char_p, P(c_int))
    fn("fkv_dtype_name", c_char_p, c_int)
    fn("fkv_dtype_size", c_int, c_int)
    fn("fkv_plan_kernel_desc", c_int, c_void_p, c_int, c_int, c_int, c_int, P(KernelDesc))
    fn("fkv_plan_cos_sin", c_int, c_void_p, c_int, c_int64, c_int, c_void_p, c_size_t, P(c_size_t))
    fn("fkv_precompile", c_int, c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, P(c_size_t),
       P(c_size_t))

    fn("fkv_kernel_prepare", c_int, P(KernelDesc), c_int, P(c_void_p))
    fn("fkv_kernel_free", None, c_void_p)
    fn("fkv_kernel_name", c_char_p, c_void_p)
    fn("fkv_kernel_outcome", c_char_p, c_void_p)
    fn("fkv_kernel_arch", c_char_p, c_void_p)
    fn("fkv_materialize_stacked", c_int, c_void_p, P(Inputs), c_void_p, c_void_p, c_void_p)
    fn("fkv_materialize_pool", c_int, c_void_p, P(Inputs), c_void_p, P(c_void_p), P(c_void_p),
       c_int64, c_int64, P(ctypes.c_float), P(ctypes.c_float), c_void_p)
