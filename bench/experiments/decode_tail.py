#!/usr/bin/env python3
"""Where the decode kernel's time goes after its weight stream (docs/performance.md, "The decode
kernel's tail"): writes variants of templates/fused_proj_kv.cu into OUT_DIR/<name>/ for
FKV_TEMPLATE_DIR, timed by quant_bench without a rebuild:

    python3 bench/experiments/decode_tail.py build-exp &&
      FKV_TEMPLATE_DIR=build-exp/nored build-gpu/bench/quant_bench --weights dense,fp8_tensor ...

  nored    every CTA returns after its k-loop (the sums are kept alive by a test no value passes):
           the weight stream alone, no partials, no epilogue. Its output is WRONG (not written);
           it measures, it is never checked.
  noepi    the split partials are exchanged and summed as usual, then the last CTA returns
           before the epilogue (norm, RoPE, stores). Output not written either.
  pf       positions are read and the tokens' cos/sin rows prefetched into L2 at the kernel's
           start, so the epilogue's dependent loads find them there.
  cluster  the S CTAs of a row tile form a thread-block cluster (__cluster_dims__(S, 1, 1)): each
           leaves its fp32 partial in its own shared memory, and split 0 sums them in split order
           through distributed shared memory after a cluster barrier, instead of partials through
           L2, a fence and an arrival counter. Same sums in the same order as the kernel's.
  clpf     cluster and pf together.
  ipw8     the epilogue takes up to 8 (head, token) items per warp at a time instead of 4.

nored, noepi, pf, cluster and clpf were measured on the template of commit c5560bb (before the
arrival became one acquire-release atomic and the token checks moved to the kernel's start); on
a later template a variant whose anchor text is gone is skipped with a note: check that commit
out to make them again.

build-exp/ is ignored by git, so it does not travel to the GPU machine: make it there, in the same
command as the bench.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "templates")
KERNEL = "fused_proj_kv.cu"


def read(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read()


def replace_once(text, old, new):
    if text.count(old) != 1:
        raise LookupError(f"the template changed: {old[:60]!r} is not there once")
    return text.replace(old, new)


LOOP_END = "  // ---- partial [T, MT] of this split -> workspace[split] ----\n"
EPILOGUE = "  // ---- epilogue: a warp takes IPW"
START = "  stage(0);\n"
REDUCE_START = LOOP_END
REDUCE_END = "  if (tid == 0) p.counters[tile] = 0u;  // ready for the next launch (stream order)\n  __syncthreads();\n"


NORED = r"""  {  // experiment: stream only; every sum stays alive through a test no value passes
    float z = 0.f;
#pragma unroll
    for (int mi = 0; mi < MW; ++mi)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) z += acc[mi][j][e];
    if (z != -1.2345e37f) return;
  }
"""


def nored(k):
    return replace_once(k, LOOP_END, NORED + LOOP_END)


def noepi(k):
    return replace_once(k, EPILOGUE, "  return;  // experiment: no epilogue\n" + EPILOGUE)


PREFETCH = r"""  stage(0);
  if constexpr (R > 0) {  // experiment: the tokens' cos/sin rows -> L2 now
    if (tid < T) {
      const long long pos = (long long)static_cast<const Pos*>(p.positions)[tid];
      if ((unsigned long long)pos < (unsigned long long)p.max_position) {
        const char* cs = reinterpret_cast<const char*>(static_cast<const CosSin*>(p.cos_sin) + pos * p.cos_sin_stride);
        for (int b = 0; b < R * (int)sizeof(CosSin); b += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(cs + b));
      }
    }
  }
"""


def pf(k):
    return replace_once(k, START, PREFETCH)


CLUSTER = r"""  // ---- experiment: partials through distributed shared memory ----
  __syncthreads();  // every warp is done with the x stages
  float* tp = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int mi = 0; mi < MW; ++mi) {
    const int row = (warp * MW + mi) * 16 + g;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int t = j * 8 + tig * 2;
      if (t < T) {
        tp[t * MT + row] = acc[mi][j][0];
        tp[t * MT + row + 8] = acc[mi][j][2];
      }
      if (t + 1 < T) {
        tp[(t + 1) * MT + row] = acc[mi][j][1];
        tp[(t + 1) * MT + row + 8] = acc[mi][j][3];
      }
    }
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  if (split != 0) {  // stay until split 0 has read this CTA's partial
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    return;
  }
  __shared__ long long s_pos[TB], s_slot[TB];
  __shared__ bool s_write[TB];
  if (tid < T) {
    bool write = true;
    if constexpr (R > 0) {
      long long pos = (long long)static_cast<const Pos*>(p.positions)[tid];
      if ((unsigned long long)pos >= (unsigned long long)p.max_position) {
        if (p.error_flag) atomicOr(p.error_flag, FKV_ERROR_BAD_POSITION);
        write = false;
        pos = 0;
      }
      s_pos[tid] = pos;
    }
    if constexpr (POOL) {
      const long long slot = (long long)static_cast<const Slot*>(p.cache_loc)[tid];
      if (slot >= p.num_slots) {
        if (p.error_flag) atomicOr(p.error_flag, FKV_ERROR_BAD_SLOT);
        write = false;
      }
      write = write && slot >= 0;
      s_slot[tid] = slot;
    }
    s_write[tid] = write;
  }
  const u32 tp_addr = smem_addr(tp);
#pragma unroll 4
  for (int i = tid; i < T * (MT / 4); i += THREADS) {
    const int t = i / (MT / 4), q = i - t * (MT / 4);
    F32x4 sum = *reinterpret_cast<const F32x4*>(tp + t * MT + q * 4);
#pragma unroll
    for (int s = 1; s < S; ++s) {
      u32 remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(tp_addr + (u32)((t * MT + q * 4) * 4)), "r"(s));
      F32x4 v;
      asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote));
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    if constexpr (WS == 1 || WS == 2) {
      const int r0 = m0 + q * 4;
      if constexpr (WS == 1) {
        const float sc = p.w_scale[r0 / (2 * KV)];
        sum.x *= sc;
        sum.y *= sc;
        sum.z *= sc;
        sum.w *= sc;
      } else {
        sum.x *= p.w_scale[r0];
        sum.y *= p.w_scale[r0 + 1];
        sum.z *= p.w_scale[r0 + 2];
        sum.w *= p.w_scale[r0 + 3];
      }
    }
    *reinterpret_cast<F32x4*>(tp + t * MT + q * 4) = sum;
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");  // done with their partials
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  __syncthreads();
"""


def cluster(k):
    if "__threadfence();  // this thread's partials" not in k:
        raise LookupError("the template changed: its arrival counter code is not c5560bb's")
    a = k.index(REDUCE_START)
    b = k.index(REDUCE_END, a) + len(REDUCE_END)
    k = k[:a] + CLUSTER + k[b:]
    return replace_once(k, "__global__ void __launch_bounds__(WARPS * 32) fused_proj_kv(",
                        "__global__ void __launch_bounds__(WARPS * 32) __cluster_dims__(S, 1, 1) fused_proj_kv(")


VARIANTS = {
    "nored": nored,
    "noepi": noepi,
    "pf": pf,
    "cluster": cluster,
    "clpf": lambda k: pf(cluster(k)),
    "ipw8": lambda k: replace_once(k, "PER_WARP < 4 ? PER_WARP : 4", "PER_WARP < 8 ? PER_WARP : 8"),
}


def main(out):
    kernel = read(KERNEL)
    for name, make in VARIANTS.items():
        try:
            text = make(kernel)
        except LookupError as e:
            print(f"{name}: skipped ({e})", file=sys.stderr)
            continue
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, KERNEL), "w") as f:
            f.write(text)
        print(d)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build-exp")
