"""fkv_jit: JIT-compiled fused KV materialization (K norm + RoPE + KV write) for serving engines.

A pure-Python binding over the fkv-jit C API (include/fkv/fkv.h) through ctypes: it works with
any Python 3.8+ and any torch, and needs only the built C library (libfkv.so), found through
$FKV_JIT_LIBRARY, then next to this package, then a build directory of the source tree
(docs/integration.md).

    import fkv_jit
    spec = fkv_jit.validate("config.json")            # ValueError with the SPEC §3 text on mismatch
    fkv_jit.precompile("config.json", arch="sm_90")     # no GPU needed
    helper = fkv_jit.FusedKVMaterializeHelper("config.json", kv_weights, k_norm_weights)
    helper.materialize(ctx_hidden, positions, write_layer_kv)
"""

from __future__ import annotations

import ctypes
import json as _json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from . import _capi
from ._capi import library_path

__all__ = [
    "FkvError", "ConfigMismatchError", "BadInputError", "ArgumentError", "CompileError",
    "CudaError", "CacheError", "Config", "LayerInfo", "AttentionSpec", "LayerGroup", "Plan",
    "KernelDesc", "Kernel", "load_config", "config_from_json", "validate", "plan", "precompile",
    "version", "driver_available", "library_path", "FusedKVMaterializeHelper",
]


# ---- errors ----------------------------------------------------------------------------------

class FkvError(Exception):
    """Base of every error raised by fkv_jit for a failing C call; `status` is the fkv_status."""

    status = _capi.FKV_ERR_INTERNAL


class ConfigMismatchError(FkvError, ValueError):
    """The layers of a config cannot share the fused KV path; str() is exactly the SPEC §3 text."""

    status = _capi.FKV_ERR_CONFIG_MISMATCH


class BadInputError(FkvError, ValueError):
    """A config file that is missing, unreadable, malformed or has bad values."""

    status = _capi.FKV_ERR_BAD_INPUT


class ArgumentError(FkvError, ValueError):
    """Bad arguments: shapes, strides, alignment, dtypes, unknown names."""

    status = _capi.FKV_ERR_ARGUMENT


class CompileError(FkvError, RuntimeError):
    """NVRTC rejected a kernel, or the arch is not supported. `log` holds the NVRTC log."""

    status = _capi.FKV_ERR_COMPILE
    log = ""


class CudaError(FkvError, RuntimeError):
    """The CUDA driver is missing or a driver call failed."""

    status = _capi.FKV_ERR_CUDA


class CacheError(FkvError, RuntimeError):
    """The kernel cache cannot be used as asked."""

    status = _capi.FKV_ERR_CACHE


_ERRORS = {cls.status: cls for cls in
           (ConfigMismatchError, BadInputError, ArgumentError, CompileError, CudaError, CacheError)}


def _check(status: int) -> None:
    if status == _capi.FKV_OK:
        return
    lib = _capi.lib()
    text = (lib.fkv_last_error() or b"").decode("utf-8", "replace")
    if status == _capi.FKV_ERR_OUT_OF_MEMORY:
        raise MemoryError(text)
    cls = _ERRORS.get(status, FkvError)
    err = cls(text)
    if cls is CompileError:
        err.log = (lib.fkv_last_error_log() or b"").decode("utf-8", "replace")
    raise err


def _s(b: Optional[bytes]) -> str:
    return (b or b"").decode("utf-8", "replace")


def version() -> str:
    """The C library's version, e.g. "0.1.0"."""
    return _s(_capi.lib().fkv_version())


def driver_available() -> bool:
    """True when a CUDA driver with at least one device can be loaded."""
    return bool(_capi.lib().fkv_driver_available())


def _dtype_code(dtype) -> int:
    """An fkv_dtype from "bf16", "bfloat16", torch.bfloat16, ..."""
    if isinstance(dtype, int):
        return dtype
    code = ctypes.c_int(0)
    _check(_capi.lib().fkv_dtype_parse(str(dtype).encode(), ctypes.byref(code)))
    return code.value


# ---- configs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerInfo:
    index: int
    is_attention: bool
    is_sliding: bool
    num_kv_heads: int
    head_dim: int
    rotary_dim: int
    is_neox_style: bool
    k_norm: str  # "none", "rms", "rms_one_plus"
    eps: float
    rope_theta: float
    sliding_window: int
    unsupported: bool


class Config:
    """A model config read by the C library (fkv::ModelConfig). Immutable."""

    def __init__(self, handle: int, name: str):
        self._handle = ctypes.c_void_p(handle)
        self.name = name

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h and h.value and _capi._lib is not None:
            _capi._lib.fkv_config_free(h)
            self._handle = None

    @property
    def num_layers(self) -> int:
        return _capi.lib().fkv_config_num_layers(self._handle)

    @property
    def hidden_size(self) -> int:
        return _capi.lib().fkv_config_hidden_size(self._handle)

    @property
    def max_position_embeddings(self) -> int:
        return _capi.lib().fkv_config_max_position_embeddings(self._handle)

    @property
    def dtype(self) -> str:
        return _s(_capi.lib().fkv_config_dtype(self._handle))

    @property
    def architecture(self) -> str:
        return _s(_capi.lib().fkv_config_architecture(self._handle))

    def layer(self, i: int) -> LayerInfo:
        info = _capi.LayerInfo()
        _check(_capi.lib().fkv_config_layer(self._handle, i, ctypes.byref(info)))
        return LayerInfo(info.index, bool(info.is_attention), bool(info.is_sliding),
                         info.num_kv_heads, info.head_dim, info.rotary_dim,
                         bool(info.is_neox_style), _capi.K_NORM_NAMES.get(info.k_norm, "?"),
                         info.eps, info.rope_theta, info.sliding_window, bool(info.unsupported))

    @property
    def layers(self) -> List[LayerInfo]:
        return [self.layer(i) for i in range(self.num_layers)]

    @property
    def attention_layers(self) -> List[LayerInfo]:
        return [l for l in self.layers if l.is_attention]

    def __repr__(self) -> str:
        return f"fkv_jit.Config({self.name!r}, layers={self.num_layers})"


def load_config(path: Union[str, os.PathLike]) -> Config:
    """Reads a HuggingFace config.json (or the explicit per-layer schema). Raises BadInputError
    (a ValueError) naming the file and key for missing files, malformed JSON and bad values."""
    handle = ctypes.c_void_p()
    path = os.fspath(path)
    _check(_capi.lib().fkv_config_load(path.encode(), ctypes.byref(handle)))
    return Config(handle.value, path)


def config_from_json(text: Union[str, dict], name: str = "<string>") -> Config:
    """A config from JSON text or a dict."""
    if isinstance(text, dict):
        text = _json.dumps(text)
    handle = ctypes.c_void_p()
    _check(_capi.lib().fkv_config_from_json(text.encode(), name.encode(), ctypes.byref(handle)))
    return Config(handle.value, name)


def _as_config(path_or_config) -> Config:
    if isinstance(path_or_config, Config):
        return path_or_config
    if isinstance(path_or_config, dict):
        return config_from_json(path_or_config, "<dict>")
    return load_config(path_or_config)


# ---- validation and plans --------------------------------------------------------------------

@dataclass(frozen=True)
class AttentionSpec:
    """What the layers of one launch share."""
    num_kv_heads: int
    head_dim: int
    rotary_dim: int
    is_neox_style: bool
    k_norm: str  # "none", "rms", "rms_one_plus"
    rope_theta: float
    rope_scaling_type: str

    @staticmethod
    def _from(info: _capi.AttentionInfo) -> "AttentionSpec":
        return AttentionSpec(info.num_kv_heads, info.head_dim, info.rotary_dim,
                             bool(info.is_neox_style), _capi.K_NORM_NAMES.get(info.k_norm, "?"),
                             info.rope_theta, _s(info.rope_scaling_type))


def validate(path_or_config) -> AttentionSpec:
    """Strict validation, the seed's semantics: raises ConfigMismatchError (a ValueError) whose
    text is exactly SPEC §3's, e.g. "num_kv_heads mismatch across layers for fused KV path:
    expected 8, got 4 at layer 3." """
    cfg = _as_config(path_or_config)
    info = _capi.AttentionInfo()
    _check(_capi.lib().fkv_validate(cfg._handle, ctypes.byref(info)))
    return AttentionSpec._from(info)


@dataclass(frozen=True)
class LayerGroup:
    index: int
    layers: Tuple[int, ...]  # model numbering
    spec: AttentionSpec
    rope: Optional[dict]     # {"theta", "scaling_type", "scaling"} or None without RoPE


class Plan:
    """Attention layers partitioned into groups: one kernel specialization, one cos/sin table and
    one launch each. Strict plans have exactly one group."""

    def __init__(self, handle: int, config: Config, grouped: bool):
        self._handle = ctypes.c_void_p(handle)
        self.config = config
        self.grouped = grouped
        lib = _capi.lib()
        self.json = _json.loads(_s(lib.fkv_plan_json(self._handle)))
        groups = []
        for g in range(lib.fkv_plan_num_groups(self._handle)):
            n = lib.fkv_plan_group_num_layers(self._handle, g)
            arr = (ctypes.c_int * max(n, 1))()
            _check(lib.fkv_plan_group_layers(self._handle, g, arr, n))
            info = _capi.AttentionInfo()
            _check(lib.fkv_plan_group_spec(self._handle, g, ctypes.byref(info)))
            groups.append(LayerGroup(g, tuple(arr[:n]), AttentionSpec._from(info),
                                     self.json["groups"][g]["spec"]["rope"]))
        self.groups: List[LayerGroup] = groups
        self.skipped: Tuple[int, ...] = tuple(self.json["skipped"])

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h and h.value and _capi._lib is not None:
            _capi._lib.fkv_plan_free(h)
            self._handle = None

    def kernel_desc(self, group: int, act="bf16", cache=None, pool: bool = False) -> "KernelDesc":
        """The kernel description of `group` (fp32 cos/sin, int64 indices; edit as needed)."""
        act_code = _dtype_code(act)
        cache_code = act_code if cache is None else _dtype_code(cache)
        d = _capi.KernelDesc()
        _check(_capi.lib().fkv_plan_kernel_desc(self._handle, group, act_code, cache_code,
                                                int(pool), ctypes.byref(d)))
        return KernelDesc._from(d)

    def cos_sin_bytes(self, group: int, max_position: int = 0, dtype="fp32") -> bytes:
        """The cos/sin table of `group`, [max_position, R] row-major, as raw bytes in `dtype`
        (fp32, bf16, fp16). max_position 0 = the config's max_position_embeddings."""
        lib = _capi.lib()
        code = _dtype_code(dtype)
        need = ctypes.c_size_t(0)
        _check(lib.fkv_plan_cos_sin(self._handle, group, max_position, code, None, 0,
                                    ctypes.byref(need)))
        buf = ctypes.create_string_buffer(need.value)
        _check(lib.fkv_plan_cos_sin(self._handle, group, max_position, code, buf, need.value,
                                    None))
        return buf.raw

    def cos_sin_tensor(self, group: int, max_position: int = 0, dtype=None, device=None):
        """The cos/sin table of `group` as a torch tensor [max_position, R] (default fp32)."""
        import torch
        dtype = torch.float32 if dtype is None else dtype
        name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype)
        if name is None:
            raise TypeError(f"cos/sin dtype must be torch.float32, bfloat16 or float16, got {dtype}")
        raw = bytearray(self.cos_sin_bytes(group, max_position, name))
        R = self.groups[group].spec.rotary_dim
        t = torch.frombuffer(raw, dtype=dtype).reshape(-1, R).clone()
        return t.to(device) if device is not None else t

    def __repr__(self) -> str:
        return f"fkv_jit.Plan({self.config.name!r}, groups={[list(g.layers) for g in self.groups]})"


def plan(path_or_config, grouped: bool = False) -> Plan:
    """grouped=False: one group, failing like validate(). grouped=True: uniform groups."""
    cfg = _as_config(path_or_config)
    handle = ctypes.c_void_p()
    _check(_capi.lib().fkv_plan_create(cfg._handle, int(grouped), ctypes.byref(handle)))
    return Plan(handle.value, cfg, grouped)


def precompile(path_or_config, arch: str, dtype: Optional[str] = None,
               kv_dtype: Optional[str] = None, cache_dir: Optional[str] = None) -> Tuple[int, int]:
    """Compiles every kernel the config's grouped plan needs (stacked and pool, fp32 cos/sin,
    int64 indices) for `arch` into the cache. No GPU needed. Returns (variants, compiled now)."""
    cfg = _as_config(path_or_config)
    n_variants, n_compiled = ctypes.c_size_t(0), ctypes.c_size_t(0)
    enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
    _check(_capi.lib().fkv_precompile(cfg._handle, enc(arch), enc(dtype), enc(kv_dtype),
                                      enc(None if cache_dir is None else os.fspath(cache_dir)),
                                      ctypes.byref(n_variants), ctypes.byref(n_compiled)))
    return n_variants.value, n_compiled.value


# ---- kernels ---------------------------------------------------------------------------------

@dataclass
class KernelDesc:
    """One kernel specialization (fkv_kernel_desc); dtypes by name."""
    num_kv_heads: int
    head_dim: int
    rotary_dim: int
    neox: bool = True
    k_norm: bool = False
    act: str = "bf16"
    cache: str = "bf16"
    cos_sin: str = "fp32"
    positions_i64: bool = True
    slots_i64: bool = True
    pool: bool = False
    debug: bool = False

    @staticmethod
    def _from(d: _capi.KernelDesc) -> "KernelDesc":
        n = _capi.DTYPE_NAMES
        return KernelDesc(d.num_kv_heads, d.head_dim, d.rotary_dim, bool(d.neox), bool(d.k_norm),
                          n[d.act], n[d.cache], n[d.cos_sin], bool(d.positions_i64),
                          bool(d.slots_i64), bool(d.mode_pool), bool(d.debug))

    def _to_c(self) -> _capi.KernelDesc:
        return _capi.KernelDesc(self.num_kv_heads, self.head_dim, self.rotary_dim, int(self.neox),
                                int(self.k_norm), _dtype_code(self.act), _dtype_code(self.cache),
                                _dtype_code(self.cos_sin), int(self.positions_i64),
                                int(self.slots_i64), int(self.pool), int(self.debug))


class Kernel:
    """A kernel loaded into the calling thread's current CUDA context (torch's, when torch has
    initialized CUDA on that device). Prepare kernels before CUDA graph capture."""

    def __init__(self, desc: KernelDesc, device: int = 0):
        self.desc = desc
        self.device = device
        handle = ctypes.c_void_p()
        _check(_capi.lib().fkv_kernel_prepare(ctypes.byref(desc._to_c()), device,
                                              ctypes.byref(handle)))
        self._handle = handle

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h and h.value and _capi._lib is not None:
            _capi._lib.fkv_kernel_free(h)
            self._handle = None

    @property
    def name(self) -> str:
        return _s(_capi.lib().fkv_kernel_name(self._handle))

    @property
    def outcome(self) -> str:
        """How the image was obtained: "memory", "disk", "readonly" or "compiled"."""
        return _s(_capi.lib().fkv_kernel_outcome(self._handle))

    @property
    def arch(self) -> str:
        return _s(_capi.lib().fkv_kernel_arch(self._handle))

    def materialize_stacked(self, inputs: _capi.Inputs, k_out: int, v_out: int,
                            stream: int) -> None:
        """Raw launch (device pointers as ints); see FusedKVMaterializeHelper for tensors."""
        _check(_capi.lib().fkv_materialize_stacked(self._handle, ctypes.byref(inputs),
                                                   ctypes.c_void_p(k_out), ctypes.c_void_p(v_out),
                                                   ctypes.c_void_p(stream)))

    def materialize_pool(self, inputs: _capi.Inputs, cache_loc: int, k_ptrs, v_ptrs,
                         num_slots: int, slot_stride: int, k_scales=None, v_scales=None,
                         stream: int = 0) -> None:
        """Raw launch: k_ptrs/v_ptrs are ctypes c_void_p arrays, scales ctypes float arrays."""
        _check(_capi.lib().fkv_materialize_pool(self._handle, ctypes.byref(inputs),
                                                ctypes.c_void_p(cache_loc), k_ptrs, v_ptrs,
                                                num_slots, slot_stride, k_scales, v_scales,
                                                ctypes.c_void_p(stream)))


Inputs = _capi.Inputs

from .materializer import FusedKVMaterializeHelper  # noqa: E402  (needs the names above)
