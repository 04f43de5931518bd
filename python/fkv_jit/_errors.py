"""fkv_jit's exceptions. The binding raises tvm-ffi errors whose kind is one of these class
names; registering them with tvm_ffi makes the call raise the class itself, with the library's
text as str(e)."""

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


class ArgumentError(FkvError, ValueError):
    """Bad arguments: shapes, strides, alignment, dtypes, unknown names."""


class CompileError(FkvError, RuntimeError):
    """NVRTC rejected a kernel, is not installed, or the arch is not supported."""


class CudaError(FkvError, RuntimeError):
    """The CUDA driver is missing or a driver call failed."""


class CacheError(FkvError, RuntimeError):
    """The kernel cache cannot be used as asked."""


for _cls in (FkvError, ConfigMismatchError, BadInputError, ArgumentError, CompileError, CudaError,
             CacheError):
    tvm_ffi.register_error(_cls.__name__, _cls)
