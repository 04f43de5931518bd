#!/usr/bin/env python3
"""Kernel experiments of docs/performance.md ("Third sweep"): writes variants of the epilogue
templates into OUT_DIR/<name>/ for FKV_TEMPLATE_DIR (gpu-run.sh's sweep setting tpl:DIR), so
they are timed by the same fkv_bench, output checks included, without a rebuild.

    python3 bench/experiments/variants.py build-exp &&
      SWEEP="default tpl:build-exp/pf2 tpl:build-exp/cs" STEPS=build,sweep scripts/gpu-run.sh

build-exp/ is ignored by git, so it does not travel to the GPU machine: make it there, in the
same command as the sweep.

  pf<N>  the K/V loads of N layers are issued together (N layers in flight per lane) instead of
         one layer ahead;
  cs     K/V stores with st.global.cs (evict first), so the writes do not push the projection
         out of L2;
  mb<N>  __launch_bounds__ with a minimum of N blocks per SM (a register cap for N > 16).
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


def layers_ahead(src, n):
    """The layer loop in groups of n, every load of a group issued before its first layer."""
    load = ("          kbuf[i][c] = load_vec<Act, VEC>(src + ({l} + i) * p.proj_stride_layer + c * VEC);\n"
            "          vbuf[i][c] = load_vec<Act, VEC>(src + ({l} + i) * p.proj_stride_layer + KV + c * VEC);\n")
    group = ("#pragma unroll\n    for (int i = 0; i < PF; ++i) {{\n      if (load && {l} + i < l1) {{\n"
             "#pragma unroll\n        for (int c = 0; c < LOADS; ++c) {{\n" + load +
             "        }}\n      }}\n    }}\n")
    a, b = cut(src, "  Vec<Act, VEC> kv_next[LOADS], vv_next[LOADS];", "  // cos/sin of this lane")
    src = (src[:a] + f"  constexpr int PF = {n};\n  Vec<Act, VEC> kbuf[PF][LOADS], vbuf[PF][LOADS];\n  {{\n"
           + group.format(l="l0") + "  }\n\n" + src[b:])
    a, b = cut(src, "  for (int l = l0; l < l1; ++l) {", "    float k[EPT];")
    head = ("  for (int lg = l0; lg < l1; lg += PF) {\n  if (lg != l0) {\n" + group.format(l="lg") +
            "  }\n#pragma unroll\n  for (int li = 0; li < PF; ++li) {\n    const int l = lg + li;\n"
            "    if (l >= l1) break;\n    Vec<Act, VEC> kv[LOADS], vv[LOADS];\n#pragma unroll\n"
            "    for (int c = 0; c < LOADS; ++c) { kv[c] = kbuf[li][c]; vv[c] = vbuf[li][c]; }\n")
    src = src[:a] + head + src[b:]
    tail = "  }\n}\n\n}  // namespace fkv_kernels"
    body = src.rstrip()
    assert body.endswith(tail), "the template's end changed: update layers_ahead()"
    return body[:-len(tail)] + "  }\n  }\n}\n\n}  // namespace fkv_kernels\n"


def main(out):
    kernel, types = read("fused_kv.cu"), read("fkv_types.cuh")
    bounds = "__launch_bounds__(WARPS * 32)"
    assert bounds in kernel
    variants = {f"pf{n}": {"fused_kv.cu": layers_ahead(kernel, n)} for n in (2, 4, 8)}
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
