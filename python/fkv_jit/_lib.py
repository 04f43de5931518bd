"""Loads the compiled binding (fkv_jit/_native.so, built on apache-tvm-ffi) once.

Before the first kernel compile, fkv-jit looks for NVRTC (libnvrtc.so.13 or .12) in the lib
folders of the nvidia-* wheels installed beside this package (the ones torch brings), then in
the system's CUDA; $FKV_NVRTC_LIBRARY names the file explicitly. A machine whose kernels are
all in the cache never loads NVRTC.
"""

from __future__ import annotations

import importlib.util
import os
from typing import List, Optional

_native = None


def nvidia_library_dirs() -> List[str]:
    """The lib folders of installed nvidia-* wheels that can hold NVRTC: nvidia/cu13/lib (CUDA
    13 wheels), nvidia/cuda_nvrtc/lib (CUDA 12 wheels)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        for sub in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib"):
            d = os.path.join(root, sub)
            if os.path.isdir(d):
                dirs.append(d)
    return dirs


def library_path() -> str:
    """The path of the compiled binding."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native.so")


def native():
    """The loaded binding (a tvm_ffi.Module)."""
    global _native
    if _native is None:
        import tvm_ffi

        from . import _errors  # noqa: F401  (registers the error kinds first)

        path = library_path()
        if not os.path.exists(path):
            raise ImportError(f"fkv_jit's compiled binding {path} is missing: install the fkv-jit "
                              "wheel (pip install fkv-jit-*.whl) instead of importing the source tree")
        mod = tvm_ffi.load_module(path)
        import json

        _errors.check_kinds(json.loads(mod.error_kinds()))
        mod.set_cuda_library_dirs(nvidia_library_dirs())
        _native = mod
    return _native


def nvrtc_status() -> tuple:
    """(loaded: bool, path of the NVRTC library, or the error text saying what to install)."""
    ok, text = native().nvrtc_status()
    return ok == "1", str(text)


def optional_str(s: Optional[object]) -> str:
    return "" if s is None else str(s)
