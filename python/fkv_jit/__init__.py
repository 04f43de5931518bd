"""fkv_jit: JIT-compiled fused KV materialization (K norm + RoPE + KV write) for serving engines.

The package is one compiled binding (fkv_jit/_native.so, built on apache-tvm-ffi's C ABI, so one
wheel serves every CPython 3 and every torch that speaks DLPack) over the C++ library, which is
linked into it. Kernels are compiled with NVRTC at first use into an on-disk cache.

    import fkv_jit
    spec = fkv_jit.validate("config.json")            # ValueError with the seed's text on mismatch
    fkv_jit.precompile("config.json", arch="sm_90")     # no GPU needed
    helper = fkv_jit.FusedKVMaterializeHelper("config.json", kv_weights, k_norm_weights)
    helper.materialize(ctx_hidden, positions, write_layer_kv)

`import fkv_jit` does not import torch: validate, plan, precompile and the CLI (`fkv-jit`,
`python -m fkv_jit`) work without it. The torch parts (FusedKVMaterializeHelper, the custom ops
torch.ops.fkv_jit.*, fkv_jit.sglang) load on first use, or at import when torch is already
imported.
"""

from __future__ import annotations

import importlib
import json as _json
import operator
import os
import sys
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

from ._errors import (ArgumentError, BadInputError, CacheError, CompileError,  # noqa: F401
                      ConfigMismatchError, CudaError, FkvError, UnsupportedModelError)
from ._lib import library_path, native, nvidia_library_dirs, nvrtc_status, optional_str

__all__ = [
    "FkvError", "ConfigMismatchError", "BadInputError", "ArgumentError", "CompileError",
    "CudaError", "CacheError", "UnsupportedModelError", "Config", "LayerInfo", "AttentionSpec", "LayerGroup", "Plan",
    "KernelDesc", "Kernel", "load_config", "config_from_json", "validate", "plan", "precompile",
    "version", "driver_available", "library_path", "nvrtc_status", "nvidia_library_dirs",
    "weight_format", "FusedKVMaterializeHelper",
]


def version() -> str:
    """The library's version, e.g. "0.1.0"."""
    return str(native().version())


def driver_available() -> bool:
    """True when a CUDA driver with at least one device can be loaded."""
    return bool(native().driver_available())


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
    """A model config as read by the library (fkv::ModelConfig). Immutable: it holds the
    library's config object, read once from its file or JSON text; validate, plan, precompile
    and the helpers use that object and never read the source again (a file changed or removed
    afterwards does not change it)."""

    def __init__(self, handle, name: str):
        self._native = handle  # the binding's fkv_jit.Config object
        info = _json.loads(str(native().config_info(handle)))
        self.name = name
        self.num_layers: int = info["num_layers"]
        self.hidden_size: int = info["hidden_size"]
        self.max_position_embeddings: int = info["max_position_embeddings"]
        self.dtype: str = info["dtype"]
        self.architecture: str = info["architecture"]
        self.layers: List[LayerInfo] = [LayerInfo(**l) for l in info["layers"]]
        self._weights = info.get("weights")

    @property
    def weight_format(self) -> Optional[str]:
        """How the config's quantization_config (or compression_config) says the K/V projection
        weights are stored (docs/config-rules.md, "quantization_config"): None when it declares
        nothing, else "dense" (left unquantized), "fp8_tensor", "fp8_channel", "fp8_block" or
        "int8_channel". A declaration fkv-jit does not read (a packed 4-bit or unknown scheme)
        raises UnsupportedModelError, a malformed one BadInputError, with the library's text.
        precompile() takes it as the default of weights=."""
        w = self._weights
        if w is None:
            return None
        if "error" in w:
            from . import _errors
            raise getattr(_errors, w["python_class"])(w["error"])
        return w["format"]

    @property
    def weight_format_source(self) -> str:
        """The keys that decided weight_format ("" when nothing is declared)."""
        w = self._weights
        return "" if w is None or "error" in w else w["source"]

    def layer(self, i: int) -> LayerInfo:
        if not 0 <= i < self.num_layers:
            raise ArgumentError(f"layer {i} is out of range: the model has {self.num_layers} layers")
        return self.layers[i]

    @property
    def attention_layers(self) -> List[LayerInfo]:
        return [l for l in self.layers if l.is_attention]

    def __repr__(self) -> str:
        return f"fkv_jit.Config({self.name!r}, layers={self.num_layers})"


def _native_path(path: Union[str, bytes, os.PathLike], what: str) -> str:
    """A path for the library, which takes UTF-8: str, bytes or os.PathLike (os.fsdecode). One
    whose bytes are not UTF-8 raises ArgumentError (the fkv-jit CLI takes any bytes)."""
    path = os.fsdecode(path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentError(
            f"{what} {path!r} is not valid UTF-8: fkv_jit's Python API passes paths to the library "
            "as UTF-8; rename it, or use the fkv-jit CLI, which takes any bytes") from None
    return path


def _int_arg(name: str, value) -> int:
    """An integer argument (int, bool, numpy integers: operator.index); a float, a string or None
    raises ArgumentError naming it instead of being truncated or parsed."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})") from None


def _name_arg(name: str, value, example: str) -> str:
    """A name argument (a dtype, an arch): a str, else ArgumentError naming it."""
    if not isinstance(value, str):
        raise ArgumentError(
            f"{name} must be a str such as {example!r}, got {value!r} ({type(value).__name__})")
    return value


def _optional_name(name: str, value, example: str) -> str:
    return optional_str(None if value is None else _name_arg(name, value, example))


def load_config(path: Union[str, bytes, os.PathLike]) -> Config:
    """Reads a HuggingFace config.json (or the explicit per-layer schema). Raises BadInputError
    (a ValueError) naming the file and key for missing files, malformed JSON and bad values.
    The path may be str, bytes or os.PathLike (os.fsdecode) of UTF-8 bytes; one with a NUL, or
    not UTF-8, is an ArgumentError. JSON text or a dict goes to config_from_json."""
    path = _native_path(path, "config path")
    if path.lstrip().startswith("{") and not os.path.exists(path):
        raise BadInputError(
            f"the config path starts with '{{' and names no file: to read JSON text, call "
            f"fkv_jit.config_from_json(text) or pass a dict (text: {path[:60]!r}...)")
    return Config(native().config_load(path), path)


def config_from_json(text: Union[str, dict], name: str = "<string>") -> Config:
    """A config from JSON text or a dict."""
    if isinstance(text, dict):
        text = _json.dumps(text)
    return Config(native().config_from_json(text, name), name)


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


def validate(path_or_config) -> AttentionSpec:
    """Strict validation, the seed's semantics: raises ConfigMismatchError (a ValueError) whose
    text is exactly the seed helper's, e.g. "num_kv_heads mismatch across layers for fused KV
    path: expected 8, got 4 at layer 3." It judges the layout only: how the K/V weights are
    stored is Config.weight_format's answer (raising for a declaration fkv-jit does not read)."""
    cfg = _as_config(path_or_config)
    return AttentionSpec(**_json.loads(str(native().validate(cfg._native))))


@dataclass(frozen=True)
class LayerGroup:
    index: int
    layers: Tuple[int, ...]  # model numbering
    spec: AttentionSpec      # under tensor parallelism spec.num_kv_heads is the rank's share
    rope: Optional[dict]     # {"theta", "scaling_type", "scaling"} or None without RoPE
    first_kv_head: int = 0   # the rank holds heads [first_kv_head, first_kv_head + num_kv_heads)
    total_kv_heads: int = 0  # the model's num_kv_heads
    replicated: bool = False  # num_kv_heads < tp_size: other ranks hold this head too


class Plan:
    """Attention layers partitioned into groups: one kernel specialization, one cos/sin table and
    one launch each. Strict plans have exactly one group.

    Under tensor parallelism (tp_size > 1) it is the plan of rank tp_rank: each group's
    spec.num_kv_heads is the rank's share of the heads and first_kv_head says which they are.
    num_kv_heads % tp_size == 0 splits the heads evenly (rank r holds [r*H/tp, (r+1)*H/tp));
    num_kv_heads < tp_size with tp_size % num_kv_heads == 0 gives each rank one head,
    r * num_kv_heads / tp_size (replicated on tp_size / num_kv_heads ranks); anything else raises
    ConfigMismatchError (a ValueError) naming both numbers. tp_size < 1 or tp_rank outside
    [0, tp_size) raises ArgumentError."""

    def __init__(self, config: Config, grouped: bool, tp_size: int = 1, tp_rank: int = 0):
        self.config = config
        self.grouped = grouped
        # The library's plan of the rank (fkv::make_plan, then fkv::shard_plan), made from the
        # config object: groups, head split, kernel descriptions and cos/sin tables come from it.
        self._native = native().plan_create(config._native, bool(grouped),
                                            _int_arg("tp_size", tp_size),
                                            _int_arg("tp_rank", tp_rank))
        doc = _json.loads(str(native().plan_info(self._native)))
        self.tp_size: int = doc["tp_size"]
        self.tp_rank: int = doc["tp_rank"]
        self.groups: List[LayerGroup] = [
            LayerGroup(i, tuple(g["layers"]), AttentionSpec(**g["info"]), g["spec"]["rope"],
                       g["heads"]["first_head"], g["heads"]["total_heads"],
                       g["heads"]["replicated"])
            for i, g in enumerate(doc["groups"])]
        for g in doc["groups"]:
            g.pop("info")
        self.json = doc  # {"mode", "groups": [{"layers", "spec", "heads"}], "skipped", "tp_size", "tp_rank"}
        self.skipped: Tuple[int, ...] = tuple(doc["skipped"])

    def _group(self, group: int) -> LayerGroup:
        group = _int_arg("group", group)
        if not 0 <= group < len(self.groups):
            raise ArgumentError(f"group {group} is out of range: the plan has {len(self.groups)} group(s)")
        return self.groups[group]

    def kernel_desc(self, group: int, act="bf16", cache=None, pool: bool = False) -> "KernelDesc":
        """The kernel description of `group` (fp32 cos/sin, int64 indices; edit as needed); under
        tensor parallelism the rank's (num_kv_heads is its share)."""
        self._group(group)
        act = _name_arg("act", act, "bf16")
        cache = act if cache is None else _name_arg("cache", cache, "fp8_e4m3")
        d = _json.loads(str(native().plan_kernel_desc(self._native, group, act, cache, pool)))
        return KernelDesc(**d)

    def cos_sin_bytes(self, group: int, max_position: int = 0, dtype="fp32") -> bytes:
        """The cos/sin table of `group`, [max_position, R] row-major (cos in columns [0, R/2),
        sin in [R/2, R)), as raw bytes in `dtype` (fp32, bf16, fp16). max_position 0 = the
        config's max_position_embeddings."""
        self._group(group)
        return bytes(native().plan_cos_sin(self._native, group,
                                           _int_arg("max_position", max_position),
                                           _name_arg("dtype", dtype, "fp32")))

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
        tp = f", tp_size={self.tp_size}, tp_rank={self.tp_rank}" if self.tp_size != 1 else ""
        return (f"fkv_jit.Plan({self.config.name!r}, groups={[list(g.layers) for g in self.groups]}"
                f"{tp})")


def plan(path_or_config, grouped: bool = False, tp_size: int = 1, tp_rank: int = 0) -> Plan:
    """grouped=False: one group, failing like validate(). grouped=True: uniform groups.
    tp_size/tp_rank: the plan of that tensor-parallel rank (see Plan): its share of the KV
    heads."""
    return Plan(_as_config(path_or_config), grouped, tp_size, tp_rank)


def precompile(path_or_config, arch: str, dtype: Optional[str] = None,
               kv_dtype: Optional[str] = None,
               cache_dir: Union[str, bytes, os.PathLike, None] = None,
               decode_gpu: Optional[str] = None,
               weights: Optional[str] = None) -> Tuple[int, int]:
    """Compiles every kernel the config's grouped plan needs (stacked and pool, fp32 cos/sin,
    int64 indices) for `arch` into the cache. No GPU needed. decode_gpu (e.g. "H200", a GPU of
    the measured crossover table) adds the decode-size kernels a helper loads there for calls of
    a few tokens (docs/decode.md). weights (a format of weight_format()) adds the kernels a
    helper builds for quantized K/V weights (docs/quantized.md); without it, the format the
    config's quantization_config declares (Config.weight_format; "dense" when none), and a
    declaration fkv-jit does not read raises its error. Returns (variants, compiled now)."""
    cfg = _as_config(path_or_config)
    n, compiled = native().precompile(
        cfg._native, _name_arg("arch", arch, "sm_90"), _optional_name("dtype", dtype, "bf16"),
        _optional_name("kv_dtype", kv_dtype, "fp8_e4m3"),
        optional_str(None if cache_dir is None else _native_path(cache_dir, "cache_dir")),
        _optional_name("decode_gpu", decode_gpu, "H200"),
        _optional_name("weights", weights, "fp8_tensor"))
    return int(n), int(compiled)


def weight_format(name: str) -> str:
    """The canonical name of a K/V weight storage format (docs/quantized.md): "dense",
    "fp8_tensor", "fp8_channel", "fp8_block" or "int8_channel", also from the engines' spellings
    ("fp8", "fp8_per_channel", "fp8_block128", "int8", "w8a16"). FusedKVMaterializeHelper's
    weight_format takes the same names. A packed 4-bit scheme ("gptq", "awq", "nvfp4", "mxfp4",
    "int4", "w4a16", ...) raises UnsupportedModelError; any other unknown name ArgumentError."""
    from ._quant import format_name
    return format_name(name)


# ---- kernels ---------------------------------------------------------------------------------

@dataclass
class KernelDesc:
    """One kernel specialization; dtypes by name."""
    num_kv_heads: int
    head_dim: int
    rotary_dim: int
    neox: bool = True
    k_norm: str = "none"  # the kernel's K norm: "none" or "rms" (True / False are taken too)
    act: str = "bf16"
    cache: str = "bf16"
    cos_sin: str = "fp32"
    positions_i64: bool = True
    slots_i64: bool = True
    pool: bool = False
    debug: bool = False


class Kernel:
    """A kernel loaded (compiled, or read from the cache) into the current CUDA context of
    `device`, e.g. to warm the cache; launches go through FusedKVMaterializeHelper."""

    def __init__(self, desc: KernelDesc, device: int = 0):
        if not isinstance(desc, KernelDesc):
            raise ArgumentError(f"desc must be a fkv_jit.KernelDesc (from Plan.kernel_desc), got "
                                f"{type(desc).__name__}")
        device = _int_arg("device", device)
        self.desc = desc
        self.device = device
        self.name, self.outcome, self.arch = (
            str(s) for s in native().kernel_prepare(_json.dumps(desc.__dict__), int(device)))


# ---- the torch parts, imported on first use -----------------------------------------------

_TORCH_SUBMODULES = ("materializer", "sglang", "_ops")


def __getattr__(name: str):
    if name == "FusedKVMaterializeHelper" or name in _TORCH_SUBMODULES:
        try:
            module = importlib.import_module(
                ".materializer" if name == "FusedKVMaterializeHelper" else f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            raise ModuleNotFoundError(
                f"fkv_jit.{name} needs torch >= 2.4 with CUDA (pip install torch); validate, plan, "
                "precompile and the fkv-jit CLI work without it", name="torch") from e
        return getattr(module, name) if name == "FusedKVMaterializeHelper" else module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_TORCH_SUBMODULES))


# A process that has torch already gets the custom ops registered now, as before, so that
# torch.ops.fkv_jit.* resolves right after `import fkv_jit`.
if "torch" in sys.modules:
    from .materializer import FusedKVMaterializeHelper  # noqa: E402,F401
