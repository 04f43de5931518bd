"""fkv_jit's exceptions. The library's error taxonomy (C++ fkv/errors.hpp: one table of kinds,
each with its C status, CLI exit code and Python class) decides which class an error raises;
the binding raises tvm-ffi errors whose kind is that class's name, and registering the classes
with tvm_ffi makes the call raise the class itself, with the library's text as str(e).
check_kinds() checks, when the binding loads, that every class the table names exists here."""

from __future__ import annotations

import tvm_ffi


class FkvError(Exception):
    """Base of every error raised by the fkv-jit library."""


class ConfigMismatchError(FkvError, ValueError):
    """The layers of a config cannot share the fused KV path; str() is exactly the mismatch text
    of sglang's FusedKVMaterializeHelper, e.g. "num_kv_heads mismatch across layers for fused KV
    path: expected 8, got 4 at layer 3." """


class BadInputError(FkvError, ValueError):
    """A config file that is missing, unreadable, malformed or has bad values."""


class UnsupportedModelError(FkvError, ValueError):
    """The architecture, or a layer's attention, is not one the fused KV path can serve (MLA,
    linear attention, K norm across heads, ...), or the model_type is unknown."""


class ArgumentError(FkvError, ValueError):
    """Bad arguments: shapes, strides, alignment, dtypes, unknown names."""


class CompileError(FkvError, RuntimeError):
    """NVRTC rejected a kernel, is not installed, or the arch is not supported."""


class CudaError(FkvError, RuntimeError):
    """The CUDA driver is missing or a driver call failed."""


class CacheError(FkvError, RuntimeError):
    """The kernel cache cannot be used as asked."""


_CLASSES = (FkvError, ConfigMismatchError, BadInputError, UnsupportedModelError, ArgumentError,
            CompileError, CudaError, CacheError)
for _cls in _CLASSES:
    tvm_ffi.register_error(_cls.__name__, _cls)


def check_kinds(kinds: list) -> None:
    """Raises ImportError when the native table (the binding's error_kinds()) names a class that
    is not defined here, or one whose builtin base differs: the two would then disagree."""
    import builtins

    by_name = {c.__name__: c for c in _CLASSES}
    for k in kinds:
        cls = by_name.get(k["python_class"]) or getattr(builtins, k["python_class"], None)
        base = getattr(builtins, k["python_base"], None)
        if cls is None or base is None or not issubclass(cls, base):
            raise ImportError(f"fkv_jit's error classes disagree with the library's error kind "
                              f"{k['name']!r} ({k['python_class']}, a {k['python_base']}): "
                              "reinstall the fkv-jit wheel")
