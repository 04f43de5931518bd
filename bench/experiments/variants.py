#!/usr/bin/env python3
"""Kernel experiments of docs/performance.md ("Third sweep", "Fourth sweep"): writes variants
of the epilogue templates into OUT_DIR/<name>/ for FKV_TEMPLATE_DIR (gpu-run.sh's sweep setting tpl:DIR), so
they are timed by the same fkv_bench, output checks included, without a rebuild.

    python3 bench/experiments/variants.py build-exp &&
      SWEEP="default tpl:build-exp/ring4 tpl:build-exp/cs" STEPS=build,sweep scripts/gpu-run.sh

build-exp/ is ignored by git, so it does not travel to the GPU machine: make it there, in the
same command as the sweep.

  ring<N> a ring of N layers in shared memory for the K/V copies (N - 1 in flight ahead of
          the layer being processed) instead of 2;
  cs     K/V stores with st.global.cs (evict first), so the writes do not push the projection
         out of L2;
  mb<N>  __launch_bounds__ with a minimum of N blocks per SM (a register cap for N > 16).

The third sweep's pf<N> variants (N layers of loads issued together, through registers) were
made by this script at commit 0b1a696, from that commit's template (before the shared-memory
ring): check that commit out to make them again.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "templates")


def read(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read()


def cut(text, start, end):
    a = text.index(start)
    return a, text.index(end, a)


def main(out):
    kernel, types = read("fused_kv.cu"), read("fkv_types.cuh")
    bounds = "__launch_bounds__(WARPS * 32)"
    assert bounds in kernel
    stages = "constexpr int STAGES = 2;"
    assert stages in kernel
    variants = {f"ring{n}": {"fused_kv.cu": kernel.replace(stages, f"constexpr int STAGES = {n};")}
                for n in (1, 3, 4, 6)}
    variants["cs"] = {"fkv_types.cuh": types.replace("st.global.v4.b32", "st.global.cs.v4.b32")
                      .replace("st.global.v2.b32", "st.global.cs.v2.b32")}
    for n in (16, 18, 20):
        variants[f"mb{n}"] = {"fused_kv.cu": kernel.replace(
            bounds, f"__launch_bounds__(WARPS * 32, {n * 64} / (WARPS * 32))")}
    for name, files in variants.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for file, text in files.items():
            with open(os.path.join(out, name, file), "w") as f:
                f.write(text)
        print(f"{out}/{name}: {', '.join(files)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build-exp")
