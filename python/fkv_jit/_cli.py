"""The `fkv-jit` command of the wheel: the native CLI (fkv_jit/bin/fkv-jit, built with the
extension, libfkv inside) run in place of this process, so that exit codes, signals, stdin and
stdout are the CLI's own. The console script `fkv-jit` and `python -m fkv_jit` both land here."""

from __future__ import annotations

import os
import sys
from typing import List, Optional


def executable() -> str:
    """The path of the native fkv-jit CLI inside the installed package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fkv-jit")


def main(argv: Optional[List[str]] = None) -> int:
    exe = executable()
    args = sys.argv[1:] if argv is None else list(argv)
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"fkv-jit: the native CLI {exe} is missing or not executable; "
                         "reinstall the fkv-jit wheel\n")
        return 127
    # The same NVRTC search as the Python package (fkv_jit._lib): the nvidia-* wheels' lib folders
    # go to the CLI through FKV_NVRTC_LIBRARY only when the user has not named a file.
    if "FKV_NVRTC_LIBRARY" not in os.environ:
        from ._lib import nvidia_library_dirs
        for d in nvidia_library_dirs():
            for name in ("libnvrtc.so.13", "libnvrtc.so.12"):
                if os.path.exists(os.path.join(d, name)):
                    os.environ["FKV_NVRTC_LIBRARY"] = os.path.join(d, name)
                    break
            if "FKV_NVRTC_LIBRARY" in os.environ:
                break
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["fkv-jit", *args])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
