"""What every Python GPU test file needs first: torch with a CUDA device and the installed fkv_jit
wheel. Without them the file exits 77, which CTest reports as skipped (not passed), so a GPU run
never passes without running. Importing this module also puts tests/ on sys.path, for
tests/plain_runner.py."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def require_gpu_and_wheel():
    """(torch, fkv_jit), or exit 77 saying what is missing."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: GPU tests not run")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch: GPU tests not run")
        sys.exit(77)
    try:
        import fkv_jit  # the installed wheel
    except ImportError as e:
        print(f"fkv_jit is not installed ({e}): pip install dist/fkv_jit-*.whl; GPU tests not run")
        sys.exit(77)
    return torch, fkv_jit
