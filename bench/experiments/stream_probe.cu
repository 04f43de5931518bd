// How fast one weight stream of the draft's 8-bit K/V projection (10240 x 4096 bytes, 42 MB)
// can be read on this GPU, by the access pattern (docs/performance.md, "The FP8 stream GEMM"):
// the FP8 stream GEMM's TMA ring read its weights at about 55% of DRAM peak, while the LSU probe
// that defines the weight-read floor reads faster. Timing only: every variant reads the bytes
// and nothing else (no MMA, no output but a checksum word).
//   ldg/<m>        the weight-read probe (bench/read_probe.hpp): grid-stride 16-byte loads, 8 in
//                  flight per thread, 256 threads, m CTAs per SM;
//   tma2d/<S>      the stream GEMM's pattern: one CTA per SM owning rows [c*R/G, (c+1)*R/G),
//                  boxes of ceil(R/G) (to 8) rows x 128 bytes (128-byte swizzle), one per k block,
//                  S stages in a full/empty mbarrier ring;
//   tma3d/<K>/<S>  the same rows, K k blocks per box (a 3-D map: 128 bytes, rows, k blocks), so
//                  each row is read K*128 contiguous bytes at a time;
//   bulk/<KB>/<S>  each CTA's share of the buffer as one contiguous byte range, read in order by
//                  1-D bulk copies of KB KiB into S stages: what a weight layout pre-tiled per CTA
//                  would read.
// And, after them, the tma2d stream consumed as a decode kernel would (ninth session):
//   band<cvt>/<T>/<KS>/<S>/c<CS>  random e4m3 weights times T bf16 tokens, fp32 sums of every row
//                  checked against float64 first (worst error / sum of |products|); band_mma below.
//   wg<mode>/64/<S>  64 tokens, weights converted to bf16 in shared memory and multiplied by
//                  warpgroup MMAs (twelfth session; wg_w8a16 below), checked the same way.
// Each call reads another of 5 copies (210 MB, over 4 L2s), so every read comes from HBM, as in
// a server; figures are medians over CUDA-graph replays of 20 calls, per call.
// Standalone: nvcc -O2 -std=c++17 -arch=sm_90a bench/experiments/stream_probe.cu -lcuda -o sp
//   ./sp [rows=10240] [hidden=4096] [wg | wg1]   ("wg", "wg1": the wg section alone). The wg
//   runs of the twelfth session were built with -gencode arch=compute_90a,code=sm_90a.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);     \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CU(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      const char* s_ = nullptr;                                               \
      cuGetErrorString(r_, &s_);                                              \
      std::printf("driver error %s at %s:%d\n", s_ ? s_ : "?", __FILE__, __LINE__); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

typedef unsigned u32;

struct alignas(16) U4 {
  u32 x, y, z, w;
};

__device__ __forceinline__ U4 ld_nc(const U4* p) {
  U4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__global__ void __launch_bounds__(256) ldg_probe(const U4* __restrict__ src,
                                                 unsigned long long n16,
                                                 unsigned long long* sum) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    U4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = ld_nc(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += (unsigned long long)v[j].x + v[j].y + v[j].z + v[j].w;
  }
  for (; i < n16; i += stride) {
    const U4 v = ld_nc(src + i);
    acc += (unsigned long long)v.x + v.y + v.z + v.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

__device__ __forceinline__ u32 smem(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

// Which copy a stage issues: mode 0 = 2-D box (c0 = k column, c1 = row), 1 = 3-D box (c0 = 0,
// c1 = row, c2 = k block), 2 = 1-D bulk copy of `bytes` from src + offset.
struct StreamArgs {
  const unsigned char* src;  // mode 2
  int mode;
  int rows, hidden;          // the weight matrix
  int box_rows, kb_per_box;  // modes 0 and 1
  int chunk_bytes;           // mode 2
  int stages;
  int stage_bytes;           // shared memory per stage
};

// 64 threads: warp 0 lane 0 issues the copies, warp 1 lane 0 consumes (reads one word of each
// stage into a checksum and hands the stage back).
__global__ void __launch_bounds__(64, 1) tma_stream(const __grid_constant__ CUtensorMap map,
                                                     StreamArgs a, unsigned long long* sum) {
  extern __shared__ __align__(1024) unsigned char ring[];
  __shared__ __align__(8) unsigned long long full[32], empty[32];
  const int G = gridDim.x, c = blockIdx.x;
  // The CTA's work: `items` copies.
  int items = 0;
  long long begin = 0, end = 0;
  int row0 = 0;
  if (a.mode == 2) {
    const long long total = (long long)a.rows * a.hidden;
    begin = total * c / G / 16 * 16;
    end = c + 1 == G ? total : total * (c + 1) / G / 16 * 16;
    items = (int)((end - begin + a.chunk_bytes - 1) / a.chunk_bytes);
  } else {
    row0 = (int)((long long)a.rows * c / G);
    items = a.hidden / 128 / (a.mode == 1 ? a.kb_per_box : 1);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      mbar_init(smem(&full[s]), 1);
      mbar_init(smem(&empty[s]), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const u32 base = smem(ring);
  if (threadIdx.x == 0) {
    for (int i = 0; i < items; ++i) {
      const int s = i % a.stages;
      if (i >= a.stages) mbar_wait(smem(&empty[s]), ((i / a.stages) - 1) & 1);
      const u32 bar = smem(&full[s]), dst = base + s * a.stage_bytes;
      if (a.mode == 2) {
        const long long off = begin + (long long)i * a.chunk_bytes;
        const int bytes = (int)(end - off < a.chunk_bytes ? end - off : a.chunk_bytes);
        mbar_expect_tx(bar, bytes);
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];" ::"r"(dst),
            "l"(a.src + off), "r"(bytes), "r"(bar)
            : "memory");
      } else if (a.mode == 0) {
        mbar_expect_tx(bar, a.box_rows * 128);
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(reinterpret_cast<unsigned long long>(&map)), "r"(i * 128), "r"(row0), "r"(bar)
            : "memory");
      } else {
        mbar_expect_tx(bar, a.box_rows * 128 * a.kb_per_box);
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3, %4}], [%5];" ::"r"(dst),
            "l"(reinterpret_cast<unsigned long long>(&map)), "r"(0), "r"(row0),
            "r"(i * a.kb_per_box), "r"(bar)
            : "memory");
      }
    }
  } else if (threadIdx.x == 32) {
    unsigned long long acc = 0;
    for (int i = 0; i < items; ++i) {
      const int s = i % a.stages;
      mbar_wait(smem(&full[s]), (i / a.stages) & 1);
      acc += *reinterpret_cast<const u32*>(ring + s * a.stage_bytes);
      mbar_arrive(smem(&empty[s]));
    }
    atomicAdd(sum, acc);
  }
}


// ---- band/<T>/<KS>/<S>: the tma2d stream consumed by MMAs, as a decode kernel would ----
// One CTA per SM owns 16-row units [c*NU/G, (c+1)*NU/G) of W (NU = rows / 16), over all of
// hidden: no split-K. Warp 0 lane 0 copies the band's 128-column blocks (one box of the band's
// rows, 128-byte swizzle) into an S-stage ring; consumer warp (u, ks) takes unit u and 8 / KS of
// the block's 16-byte segments: ldmatrix (rows g, g + 8; 4 bytes at 4 * tig of each segment),
// e4m3 -> bf16 in registers, mma.m16n8k16 against x (bf16, every token, all of hidden resident in
// shared memory, copied by cp.async in 512-column chunks behind mbarriers). The fp32 sums
// [T, rows] go to `out`; the KS partials are added in shared memory first.
__device__ __forceinline__ void fp8x4_bf16(u32 w, u32& lo, u32& hi) {
  u32 a, b;
  asm("prmt.b32 %0, %1, %2, 0x1404;" : "=r"(a) : "r"(w), "r"(0u));
  asm("prmt.b32 %0, %1, %2, 0x3424;" : "=r"(b) : "r"(w), "r"(0u));
  a = ((a >> 4) & (0x7f007f00u >> 4)) | (a & 0x80008000u);
  b = ((b >> 4) & (0x7f007f00u >> 4)) | (b & 0x80008000u);
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(0x7b807b80u), "r"(0x80008000u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(0x7b807b80u), "r"(0x80008000u));
}
// The same in four instructions per pair (templates/fkv_types.cuh's form since the ninth session):
// a sign-replicating permute, a shift, a mask, the FMA.
__device__ __forceinline__ void fp8x4_bf16_v2(u32 w, u32& lo, u32& hi) {
  u32 a, b;
  asm("prmt.b32 %0, %1, %2, 0x9180;" : "=r"(a) : "r"(w), "r"(0u));
  asm("prmt.b32 %0, %1, %2, 0xB3A2;" : "=r"(b) : "r"(w), "r"(0u));
  a = (a << 4) & 0x87f087f0u;
  b = (b << 4) & 0x87f087f0u;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(0x7b807b80u), "r"(0x80008000u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(0x7b807b80u), "r"(0x80008000u));
}
// D[16x8] += A[16x16] * B[16x8]: bf16 operands, or fp16 (F16).
template <bool F16>
__device__ __forceinline__ void mma16816(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                         u32 b1) {
#define BAND_MMA(T)                                                                          \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." T "." T                                       \
      ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                 \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                       \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
  if constexpr (F16)
    BAND_MMA("f16");
  else
    BAND_MMA("bf16");
#undef BAND_MMA
}

struct BandArgs {
  const unsigned short* x;  // bf16 [T, hidden]
  float* out;               // [T, rows]
  int rows, hidden, T;
};

// CS: 0 = x copied by the consumers (cp.async); >= 1 = by warp 1 with 1-D bulk copies, each
// token's 512-column chunk by one CTA of a cluster of CS, multicast to all of them. CVT: 0 =
// e4m3 -> bf16 in registers (exact); 1 = the weight bytes go to the MMAs unconverted; 2 = the
// hardware's e4m3 -> fp16 conversion and fp16 MMAs, x's bf16 bits read as fp16 (1 and 2 give
// wrong sums: timing only, what the conversion costs); 3 = 0 in four instructions per pair.
template <int TB, int KS, int STAGES, int MAXU, int CS = 0, int CVT = 0>
__global__ void __launch_bounds__(32 * (1 + (CS > 0) + MAXU * KS), 1)
    band_mma(const __grid_constant__ CUtensorMap map_lo, const __grid_constant__ CUtensorMap map_hi,
             BandArgs a) {
  constexpr int NT = TB / 8, CONS = MAXU * KS, SB = MAXU * 16 * 128, SEG = 8 / KS, XCH = 512;
  constexpr int CW0 = 1 + (CS > 0);  // the first consumer warp
  static_assert(SEG >= 2, "two segments per ldmatrix");
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES], xbar[32];
  const int NU = a.rows / 16, G = gridDim.x, c = blockIdx.x;
  const int u0 = (int)((long long)NU * c / G), nu = (int)((long long)NU * (c + 1) / G) - u0;
  const int ksteps = a.hidden / 128, nxc = a.hidden / XCH, XROW = 2 * a.hidden + 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // The ring at a 1024-byte boundary (the 128-byte swizzle's period), x after it.
  const u32 ring = (smem(sm) + 1023u) & ~1023u, xs = ring + STAGES * SB;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem(&full[s]), 1);
      mbar_init(smem(&empty[s]), nu * KS);
    }
    for (int i = 0; i < nxc; ++i) mbar_init(smem(&xbar[i]), CS ? 1 : CONS * 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CS > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                 ::: "memory");
  else
    __syncthreads();
  if (warp == 0) {
    if (lane == 0) {
      const CUtensorMap* map = nu == NU / G ? &map_lo : &map_hi;
      const u32 bytes = nu * 16 * 128;
      for (int i = 0; i < ksteps; ++i) {
        const int s = i % STAGES;
        if (i >= STAGES) mbar_wait(smem(&empty[s]), ((i / STAGES) - 1) & 1);
        const u32 bar = smem(&full[s]);
        mbar_expect_tx(bar, bytes);
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3}], [%4];" ::"r"(ring + s * SB),
            "l"(reinterpret_cast<unsigned long long>(map)), "r"(i * 128), "r"(u0 * 16), "r"(bar)
            : "memory");
      }
    }
  } else if (CS > 0 && warp == 1) {
    if (lane == 0) {
      u32 rank = 0;
      if constexpr (CS > 1) asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
      for (int ch = 0; ch < nxc; ++ch) {
        const u32 bar = smem(&xbar[ch]);
        mbar_expect_tx(bar, a.T * XCH * 2);
        for (int t = (int)rank; t < a.T; t += CS > 1 ? CS : 1) {
          const u32 dst = xs + t * XROW + ch * XCH * 2;
          const unsigned short* src = a.x + (long long)t * a.hidden + ch * XCH;
          if constexpr (CS > 1)
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
                "cluster [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                "l"(src), "r"(XCH * 2), "r"(bar), "h"((unsigned short)((1 << CS) - 1))
                : "memory");
          else
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                "%2, [%3];" ::"r"(dst),
                "l"(src), "r"(XCH * 2), "r"(bar)
                : "memory");
        }
      }
    }
  } else {
    const int cw = warp - CW0, ct = threadIdx.x - 32 * CW0;
    if constexpr (CS == 0) {
      for (int ch = 0; ch < nxc; ++ch) {
        for (int i = ct; i < TB * (XCH / 8); i += CONS * 32) {
          const int t = i / (XCH / 8), q = i % (XCH / 8);
          const bool valid = t < a.T;
          const unsigned short* src =
              a.x + (valid ? (long long)t * a.hidden + ch * XCH + q * 8 : 0);
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                           xs + t * XROW + (ch * XCH + q * 8) * 2),
                       "l"(src), "r"(valid ? 16 : 0)
                       : "memory");
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                         smem(&xbar[ch]))
                     : "memory");
      }
    }
    const int u = cw / KS, ks = cw % KS, g = lane >> 2, tig = lane & 3;
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    if (u < nu) {
      const int lrow = (lane & 7) + 8 * ((lane >> 3) & 1);
      for (int i = 0; i < ksteps; ++i) {
        const int s = i % STAGES;
        if ((i * 128) % XCH == 0) mbar_wait(smem(&xbar[i * 128 / XCH]), 0);
        mbar_wait(smem(&full[s]), (i / STAGES) & 1);
        const u32 wb = ring + s * SB + (u * 16 + lrow) * 128;
#pragma unroll
        for (int jj = 0; jj < SEG; jj += 2) {
          const int j = ks * SEG + jj;
          u32 r[4];
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                       : "r"(wb + (((j + (lane >> 4)) ^ (lane & 7)) << 4)));
          u32 lo[4], hi[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            if constexpr (CVT == 1) {
              lo[q] = r[q] & 0x3f3f3f3fu;
              hi[q] = r[q] >> 2 & 0x3f3f3f3fu;
            } else if constexpr (CVT == 2) {
              asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
                  "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
                  : "=r"(lo[q]), "=r"(hi[q])
                  : "r"(r[q]));
            } else if constexpr (CVT == 3) {
              fp8x4_bf16_v2(r[q], lo[q], hi[q]);
            } else {
              fp8x4_bf16(r[q], lo[q], hi[q]);
            }
          }
#pragma unroll
          for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint2 b;
              asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                           : "=r"(b.x), "=r"(b.y)
                           : "r"(xs + (n * 8 + g) * XROW + (i * 128 + (j + h) * 16 + 4 * tig) * 2));
              mma16816<CVT == 2>(acc[n], lo[2 * h], lo[2 * h + 1], hi[2 * h], hi[2 * h + 1], b.x,
                                 b.y);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem(&empty[s]));
      }
    }
    // The ring is free: every copy landed (each was waited on). Add the KS partials there.
    asm volatile("bar.sync 1, %0;" ::"r"(CONS * 32) : "memory");
    float* red = reinterpret_cast<float*>(sm + (ring - smem(sm)));
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[((cw * NT + n) * 4 + e) * 32 + lane] = acc[n][e];
    asm volatile("bar.sync 1, %0;" ::"r"(CONS * 32) : "memory");
    if (u < nu && ks == 0) {
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = 0.f;
          for (int k = 0; k < KS; ++k) v += red[(((cw + k) * NT + n) * 4 + e) * 32 + lane];
          const int t = n * 8 + 2 * tig + (e & 1), row = (u0 + u) * 16 + g + 8 * (e >> 1);
          if (t < a.T) a.out[(long long)t * a.rows + row] = v;
        }
    }
  }
  // No CTA leaves while a multicast copy of the cluster may still write into it.
  if constexpr (CS > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                 ::: "memory");
}


// ---- wg<MODE>/<S>: 64 tokens, W8A16 through warpgroup MMAs (twelfth session) ----
// One CTA per SM owns rows [c*R/G, (c+1)*R/G) (at most 80) over all of hidden, as tma2d. Warp 0
// lane 0 copies each 128-column k block into an S-stage ring: the weights (80 rows x 128 bytes)
// and x (bf16 [64 tokens][128 columns], two 64-column boxes), all with the 128-byte swizzle.
// Two consumer warpgroups take alternate stages: each converts its stage's e4m3 weights to bf16
// into its own shared buffer (the wgmma B operand, K-major, 128-byte swizzle), then runs eight
// wgmma m64n80k16 (A = x from the ring, B = the converted weights; fp32 accumulators [64 tokens
// x 80 rows]), waits for them and hands the stage back. At the end the two warpgroups' sums are
// added and written, fp32 [T, rows]. MODE 1 leaves the MMAs out, MODE 2 the conversion, MODE 3
// the copies of x, MODE 4 both MMAs and conversion (the skeleton), MODE 5 the skeleton without
// the copies of x (timing only, wrong sums): what each costs. CL = 2: clusters of two CTAs, each
// copying one 64-column half of x multicast to both, so L2 sends x once per pair; a stage goes
// back to a producer once the consumers of both CTAs are done with it.
__device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
#define WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_D8(i) WG_D4(i), WG_D4(i + 4)
// D[64 x 80] += A[64 x 16] * B[16 x 80], bf16 from shared memory (descriptors a, b).
__device__ __forceinline__ void wgmma_m64n80k16(float (&d)[40], unsigned long long a,
                                                unsigned long long b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // -arch=sm_90a also builds compute_90 PTX: no wgmma there
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, %40, %41, p, 1, 1, 0, 0;\n}\n"
      : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32)
      : "l"(a), "l"(b));
#endif
}
#undef WG_D8
#undef WG_D4

struct WgArgs {
  float* out;  // [T, rows]
  int rows, hidden, T;
};

template <int STAGES, int MODE, int CL = 1, int NWG = 2>
__global__ void __launch_bounds__(128 * (NWG + 1), 1)
    wg_w8a16(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map,
             WgArgs a) {
  constexpr u32 kW = 80 * 128, kX = 64 * 128, kStage = kW + 2 * kX, kB = 2 * 80 * 128;
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const int G = gridDim.x, c = blockIdx.x;
  const int r0 = (int)((long long)a.rows * c / G), nr = (int)((long long)a.rows * (c + 1) / G) - r0;
  const int kblocks = a.hidden / 128, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const u32 ring = (smem(sm) + 1023u) & ~1023u, bbuf = ring + STAGES * kStage;
  u32 rank = 0;
  if constexpr (CL > 1) asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem(&full[s]), 1);
      mbar_init(smem(&empty[s]), 4 * CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CL > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                 ::: "memory");
  else
    __syncthreads();
  if (warp < 4) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < kblocks; ++i) {
        const int s = i % STAGES;
        if (i >= STAGES) mbar_wait(smem(&empty[s]), ((i / STAGES) - 1) & 1);
        const u32 bar = smem(&full[s]), dst = ring + s * kStage;
        mbar_expect_tx(bar, MODE == 3 || MODE == 5 ? kW : kStage);
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(reinterpret_cast<unsigned long long>(&w_map)), "r"(i * 128), "r"(r0), "r"(bar)
            : "memory");
        if constexpr (MODE == 3 || MODE == 5) continue;
        if constexpr (CL > 1)
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes."
              "multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst + kW + rank * kX),
              "l"(reinterpret_cast<unsigned long long>(&x_map)), "r"(i * 128 + (int)rank * 64),
              "r"(0), "r"(bar), "h"((unsigned short)3)
              : "memory");
        else
          for (int h = 0; h < 2; ++h)
            asm volatile(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst + kW + h * kX),
                "l"(reinterpret_cast<unsigned long long>(&x_map)), "r"(i * 128 + h * 64), "r"(0),
                "r"(bar)
                : "memory");
      }
    }
  } else {
  const int wg = warp / 4 - 1, t = threadIdx.x - 128 * (wg + 1);
  const u32 mine = bbuf + wg * kB;
  float d[40];
#pragma unroll
  for (int j = 0; j < 40; ++j) d[j] = 0.f;
  for (int i = wg; i < kblocks; i += NWG) {
    const int s = i % STAGES;
    mbar_wait(smem(&full[s]), (i / STAGES) & 1);
    const u32 wst = ring + s * kStage;
    if constexpr (MODE != 2 && MODE != 4 && MODE != 5) {
      // 640 16-byte units (80 rows x 8): unit u of row r holds columns 16u..16u+15 at
      // (u ^ r % 8) in the ring; their bf16 go to half u / 4, units 2 (u % 4) and 2 (u % 4) + 1
      // of that half's row r, swizzled the same way.
      // All five loads first: the asm statements keep their order.
      U4 vs[5];
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        const int q = t + 128 * k, r = q >> 3, u = q & 7;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(vs[k].x), "=r"(vs[k].y), "=r"(vs[k].z), "=r"(vs[k].w)
                     : "r"(wst + r * 128 + ((u ^ (r & 7)) << 4)));
      }
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        const int q = t + 128 * k, r = q >> 3, u = q & 7;
        const U4 v = vs[k];
        u32 o[8];
        fp8x4_bf16_v2(v.x, o[0], o[1]);
        fp8x4_bf16_v2(v.y, o[2], o[3]);
        fp8x4_bf16_v2(v.z, o[4], o[5]);
        fp8x4_bf16_v2(v.w, o[6], o[7]);
        const u32 row = mine + (u >> 2) * (80 * 128) + r * 128;
        const int j0 = 2 * (u & 3);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + ((j0 ^ (r & 7)) << 4)),
                     "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3])
                     : "memory");
        asm volatile(
            "st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + (((j0 + 1) ^ (r & 7)) << 4)),
            "r"(o[4]), "r"(o[5]), "r"(o[6]), "r"(o[7])
            : "memory");
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (MODE != 1 && MODE != 4 && MODE != 5) {
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          wgmma_m64n80k16(d, wg_desc(wst + kW + h * kX + 32 * k),
                          wg_desc(mine + h * (80 * 128) + 32 * k));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
#endif
    if (lane == 0) {
      mbar_arrive(smem(&empty[s]));
      if constexpr (CL > 1) {
        u32 peer;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                     : "=r"(peer)
                     : "r"(smem(&empty[s])), "r"(rank ^ 1u));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(peer)
                     : "memory");
      }
    }
  }
  // Once both warpgroups are past their last MMAs, the ring is free (every stage was waited
  // on): warpgroup 1 leaves its sums there.
  asm volatile("bar.sync 15, %0;" ::"r"(128 * NWG) : "memory");
  float* red = reinterpret_cast<float*>(sm + (ring - smem(sm)));
  if (wg > 0)
#pragma unroll
    for (int j = 0; j < 40; ++j) red[((wg - 1) * 40 + j) * 128 + t] = d[j];
  asm volatile("bar.sync 15, %0;" ::"r"(128 * NWG) : "memory");
  if (wg == 0) {
    const int w4 = t >> 5;
#pragma unroll
    for (int j = 0; j < 40; ++j) {
      const int tok = 16 * w4 + (lane >> 2) + 8 * ((j & 3) >> 1);
      const int n = 8 * (j >> 2) + 2 * (lane & 3) + (j & 1);
      float v = d[j];
      for (int g = 1; g < NWG; ++g) v += red[((g - 1) * 40 + j) * 128 + t];
      if (tok < a.T && n < nr) a.out[(long long)tok * a.rows + r0 + n] = v;
    }
  }
  }
  // No CTA leaves while its peer may still arrive on its barriers.
  if constexpr (CL > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                 ::: "memory");
}

struct Timer {
  cudaStream_t s;
  float run(const std::function<void(int)>& call, int calls = 20, int reps = 30) {
    call(0);
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) call(i);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(a, s));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1000.f / calls);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
  }
};

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 10240;
  const int hidden = argc > 2 ? std::atoi(argv[2]) : 4096;
  const std::string only = argc > 3 ? argv[3] : "";  // "wg": the wg section alone
  const size_t bytes = (size_t)rows * hidden;
  constexpr int kCopies = 5;
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::vector<unsigned char*> w(kCopies);
  for (auto& p : w) {
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x11, bytes));
  }
  unsigned long long* sum;
  CK(cudaMalloc(&sum, 8));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer timer{s};
  std::printf("stream_probe: %s, %d SMs, %d x %d bytes (%.1f MB), %d copies\n", prop.name, sms,
              rows, hidden, bytes / 1e6, kCopies);
  auto report = [&](const std::string& name, float us) {
    std::printf("%-16s %8.2f us  %7.1f GB/s\n", name.c_str(), us, bytes / (us * 1e3));
  };

  for (int m : {2, 4, 8, 16}) {
    if (only.rfind("wg", 0) == 0) break;
    const float us = timer.run([&](int i) {
      ldg_probe<<<sms * m, 256, 0, s>>>(reinterpret_cast<const U4*>(w[i % kCopies]), bytes / 16,
                                        sum);
    });
    report("ldg/" + std::to_string(m), us);
  }

  CK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  // Tensor maps per copy: 2-D [rows, hidden] and 3-D [kblocks][rows][128].
  const int G = sms;
  const int box_rows = ((rows + G - 1) / G + 7) / 8 * 8;
  auto map2d = [&](unsigned char* p) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)hidden, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)hidden};
    cuuint32_t box[2] = {128, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return m;
  };
  auto map3d = [&](unsigned char* p, int kb) {
    CUtensorMap m;
    cuuint64_t dims[3] = {128, (cuuint64_t)rows, (cuuint64_t)hidden / 128};
    cuuint64_t strides[2] = {(cuuint64_t)hidden, 128};
    cuuint32_t box[3] = {128, (cuuint32_t)box_rows, (cuuint32_t)kb}, es[3] = {1, 1, 1};
    CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, p, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return m;
  };
  auto run_tma = [&](const std::string& name, StreamArgs a, const std::vector<CUtensorMap>& maps,
                     int grid) {
    const int shared = a.stages * a.stage_bytes;
    if (shared > 200 * 1024 || a.stages > 32) return;
    const float us = timer.run([&](int i) {
      StreamArgs ai = a;
      ai.src = w[i % kCopies];
      tma_stream<<<grid, 64, shared, s>>>(maps[i % kCopies], ai, sum);
    });
    report(name, us);
  };
  std::vector<CUtensorMap> m2, none(kCopies);
  for (auto* p : w) m2.push_back(map2d(p));
  for (int S : {4, 8, 16}) {
    StreamArgs a{nullptr, 0, rows, hidden, box_rows, 1, 0, S, box_rows * 128};
    a.stage_bytes = (a.stage_bytes + 1023) / 1024 * 1024;
    if (only.empty()) run_tma("tma2d/" + std::to_string(S), a, m2, G);
  }
  for (int kb : {2, 4, 8}) {
    std::vector<CUtensorMap> m3;
    for (auto* p : w) m3.push_back(map3d(p, kb));
    for (int S : {2, 4, 8}) {
      StreamArgs a{nullptr, 1, rows, hidden, box_rows, kb, 0, S, box_rows * 128 * kb};
      a.stage_bytes = (a.stage_bytes + 1023) / 1024 * 1024;
      if (only.empty()) run_tma("tma3d/" + std::to_string(kb) + "/" + std::to_string(S), a, m3, G);
    }
  }
  for (int kb : {4, 8, 16, 32}) {
    for (int S : {4, 8, 16}) {
      StreamArgs a{nullptr, 2, rows, hidden, 0, 0, kb * 1024, S, kb * 1024};
      if (!only.empty()) continue;
      run_tma("bulk/" + std::to_string(kb) + "/" + std::to_string(S), a, none, G);
      run_tma("bulk2x/" + std::to_string(kb) + "/" + std::to_string(S), a, none, 2 * G);
    }
  }

  // band: random e4m3 weights (no NaN codes) in every copy, random bf16 x; checked against a
  // float64 reference on every 7th row before timing.
  {
    std::vector<unsigned char> hw(bytes);
    unsigned long long st = 12345;
    auto rnd = [&]() {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      return (u32)(st >> 33);
    };
    for (auto& b : hw) {
      b = (unsigned char)(rnd() & 0xff);
      if ((b & 0x7f) == 0x7f) b &= 0xfe;
      // keep |w| <= 8 or so: exponent field <= 10
      if (((b >> 3) & 0xf) > 10) b = (unsigned char)((b & 0x87) | (10 << 3));
    }
    for (auto* p : w) CK(cudaMemcpy(p, hw.data(), bytes, cudaMemcpyHostToDevice));
    const int TMAX = 64;
    std::vector<unsigned short> hx((size_t)TMAX * hidden);
    for (auto& v : hx) {
      const float f = (float)((int)(rnd() % 2001) - 1000) / 1000.f;
      u32 bits;
      std::memcpy(&bits, &f, 4);
      v = (unsigned short)(bits >> 16);
    }
    unsigned short* dx;
    float* dout;
    CK(cudaMalloc(&dx, hx.size() * 2));
    CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, (size_t)TMAX * rows * 4));
    auto e4m3 = [](unsigned char b) {
      const int e = (b >> 3) & 0xf, m = b & 7;
      const double v = e ? std::ldexp(1.0 + m / 8.0, e - 7) : std::ldexp(m / 8.0, -6);
      return b & 0x80 ? -v : v;
    };
    auto bf = [](unsigned short v) {
      u32 bits = (u32)v << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return (double)f;
    };
    const int NU = rows / 16;
    const int ulo = NU / G, uhi = (NU + G - 1) / G;
    auto bandmap = [&](unsigned char* p, int units) {
      CUtensorMap m;
      cuuint64_t dims[2] = {(cuuint64_t)hidden, (cuuint64_t)rows};
      cuuint64_t strides[1] = {(cuuint64_t)hidden};
      cuuint32_t box[2] = {128, (cuuint32_t)(units * 16)}, es[2] = {1, 1};
      CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p, dims, strides, box, es,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      return m;
    };
    std::vector<CUtensorMap> lo, hi;
    for (auto* p : w) {
      lo.push_back(bandmap(p, ulo > 0 ? ulo : 1));
      hi.push_back(bandmap(p, uhi));
    }
    // The worst error of the first T tokens' sums in dout over every 7th row, against float64,
    // relative to the sum of |products| (1e30 for a NaN); band and wg check with it.
    auto check = [&](int T) {
      std::vector<float> got((size_t)T * rows);
      CK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (int r = 0; r < rows; r += 7)
        for (int t = 0; t < T; ++t) {
          double ref = 0, mag = 0;
          for (int k = 0; k < hidden; ++k) {
            const double p = e4m3(hw[(size_t)r * hidden + k]) * bf(hx[(size_t)t * hidden + k]);
            ref += p;
            mag += std::fabs(p);
          }
          const double err = std::fabs(got[(size_t)t * rows + r] - ref) / (mag + 1e-30);
          worst = std::isnan(got[(size_t)t * rows + r]) ? 1e30 : std::max(worst, err);
        }
      return worst;
    };
    if ((rows + G - 1) / G <= 80 && hidden % 128 == 0) {
      auto wmap = [&](unsigned char* p) {
        CUtensorMap m;
        cuuint64_t dims[2] = {(cuuint64_t)hidden, (cuuint64_t)rows};
        cuuint64_t strides[1] = {(cuuint64_t)hidden};
        cuuint32_t box[2] = {128, 80}, es[2] = {1, 1};
        CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p, dims, strides, box, es,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        return m;
      };
      CUtensorMap xm;
      {
        cuuint64_t dims[2] = {(cuuint64_t)hidden, 64};
        cuuint64_t strides[1] = {(cuuint64_t)hidden * 2};
        cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
        CU(cuTensorMapEncodeTiled(&xm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dx, dims, strides, box,
                                  es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      }
      std::vector<CUtensorMap> wm;
      for (auto* p : w) wm.push_back(wmap(p));
      auto wgrun = [&](auto kern, int S, int mode, int CL = 1, int NWG = 2) {
        const int shared = 1024 + S * (80 * 128 + 2 * 64 * 128) + NWG * 2 * 80 * 128;
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
        if (CL > 1) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 0));
        WgArgs wa{dout, rows, hidden, 64};
        auto launch = [&](int copy) {
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3(G);
          cfg.blockDim = dim3(128 * (NWG + 1));
          cfg.dynamicSmemBytes = shared;
          cfg.stream = s;
          cudaLaunchAttribute at[1];
          at[0].id = cudaLaunchAttributeClusterDimension;
          at[0].val.clusterDim.x = CL;
          at[0].val.clusterDim.y = 1;
          at[0].val.clusterDim.z = 1;
          cfg.attrs = at;
          cfg.numAttrs = 1;
          CK(cudaLaunchKernelEx(&cfg, kern, wm[copy], xm, wa));
        };
        CK(cudaMemset(dout, 0xff, (size_t)64 * rows * 4));  // NaN poison
        launch(0);
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        const double worst = mode == 0 ? check(64) : 0.0;
        const float us = timer.run([&](int i) { launch(i % kCopies); });
        const char* tag[] = {"", "-nomma", "-nocvt", "-nox", "-none", "-none-nox"};
        char name[64];
        std::snprintf(name, sizeof name, "wg%s%s%s/64/%d", CL > 1 ? "c2" : "", NWG > 2 ? "w3" : "",
                      tag[mode], S);
        std::printf("%-20s %8.2f us  %7.1f GB/s  worst err/|sum| %.2e%s\n", name, us,
                    bytes / (us * 1e3), worst, mode != 0 || worst < 1e-5 ? "" : "  WRONG");
      };
      // Run 1 (twelfth session): S = 4, 6, 7; at 6 without MMAs, conversion or x; clusters of
      // two (slower: 30.7-31.8 us). Run 2: the loads of a stage first, three warpgroups, and
      // nothing but the handshake and the output.
      if (only == "wg1") {
        wgrun(wg_w8a16<4, 0>, 4, 0);
        wgrun(wg_w8a16<7, 0>, 7, 0);
        wgrun(wg_w8a16<6, 3>, 6, 3);
        if (G % 2 == 0) {
          wgrun(wg_w8a16<5, 0, 2>, 5, 0, 2);
          wgrun(wg_w8a16<6, 0, 2>, 6, 0, 2);
          wgrun(wg_w8a16<7, 0, 2>, 7, 0, 2);
          wgrun(wg_w8a16<6, 1, 2>, 6, 1, 2);
          wgrun(wg_w8a16<6, 2, 2>, 6, 2, 2);
          wgrun(wg_w8a16<6, 3, 2>, 6, 3, 2);
        }
      }
      wgrun(wg_w8a16<6, 0>, 6, 0);
      wgrun(wg_w8a16<6, 1>, 6, 1);
      wgrun(wg_w8a16<6, 2>, 6, 2);
      wgrun(wg_w8a16<6, 4>, 6, 4);
      wgrun(wg_w8a16<6, 5>, 6, 5);  // the skeleton without x: are the x fills its 4 us?
      wgrun(wg_w8a16<6, 0, 1, 3>, 6, 0, 1, 3);
      wgrun(wg_w8a16<5, 0, 1, 3>, 5, 0, 1, 3);
      wgrun(wg_w8a16<6, 1, 1, 3>, 6, 1, 1, 3);
      wgrun(wg_w8a16<6, 2, 1, 3>, 6, 2, 1, 3);
      wgrun(wg_w8a16<6, 4, 1, 3>, 6, 4, 1, 3);
    }
    if (only.rfind("wg", 0) == 0) return 0;
    if (uhi != 5) {
      std::printf("band: %d units per CTA, built for 5; skipped\n", uhi);
      return 0;
    }
    auto band = [&](auto kern, int TB, int KS, int S, int T, int CS = 0, int cvt = 0) {
      const int threads = 32 * (1 + (CS > 0) + 5 * KS);
      const int shared = 1024 + S * 5 * 2048 + TB * (2 * hidden + 32);
      if (shared > 227 * 1024) return;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
      BandArgs ba{dx, dout, rows, hidden, T};
      auto launch = [&](int copy) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(G);
        cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = shared;
        cfg.stream = s;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = CS > 1 ? CS : 1;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, kern, lo[copy], hi[copy], ba));
      };
      CK(cudaMemset(dout, 0xff, (size_t)TMAX * rows * 4));  // NaN poison
      launch(0);
      CK(cudaStreamSynchronize(s));
      CK(cudaGetLastError());
      const double worst = check(T);
      const float us = timer.run([&](int i) { launch(i % kCopies); });
      char name[64];
      const char* tag[] = {"", "-raw", "-f16", "-v2"};
      std::snprintf(name, sizeof name, "band%s/%d/%d/%d/c%d", tag[cvt], T, KS, S, CS);
      const bool exact = cvt == 0 || cvt == 3;
      std::printf("%-20s %8.2f us  %7.1f GB/s  worst err/|sum| %.2e%s\n", name, us,
                  bytes / (us * 1e3), worst, !exact || worst < 1e-5 ? "" : "  WRONG");
    };
    // Every variant of docs/performance.md's band table: consumer warps per unit (KS), ring
    // stages, how x arrives (c0: the consumers' cp.async; c1: one thread's bulk copies; c2, c4:
    // multicast over a cluster of 2 or 4), and the conversion (exact, v2, raw, f16).
    for (int T : {1, 8, 16}) {
      if (T <= 8) {
        band(band_mma<8, 1, 8, 5>, 8, 1, 8, T);
        band(band_mma<8, 2, 8, 5>, 8, 2, 8, T);
        band(band_mma<8, 4, 8, 5>, 8, 4, 8, T);
        band(band_mma<8, 2, 4, 5>, 8, 2, 4, T);
        band(band_mma<8, 2, 12, 5>, 8, 2, 12, T);
        band(band_mma<8, 4, 8, 5, 1>, 8, 4, 8, T, 1);
        band(band_mma<8, 4, 8, 5, 2>, 8, 4, 8, T, 2);
        band(band_mma<8, 4, 8, 5, 4>, 8, 4, 8, T, 4);
        band(band_mma<8, 4, 8, 5, 0, 3>, 8, 4, 8, T, 0, 3);
        band(band_mma<8, 4, 8, 5, 0, 1>, 8, 4, 8, T, 0, 1);
        band(band_mma<8, 2, 8, 5, 0, 2>, 8, 2, 8, T, 0, 2);
      } else {
        band(band_mma<16, 1, 8, 5>, 16, 1, 8, T);
        band(band_mma<16, 2, 8, 5>, 16, 2, 8, T);
        band(band_mma<16, 4, 8, 5>, 16, 4, 8, T);
        band(band_mma<16, 4, 8, 5, 1>, 16, 4, 8, T, 1);
        band(band_mma<16, 4, 8, 5, 2>, 16, 4, 8, T, 2);
        band(band_mma<16, 4, 8, 5, 0, 3>, 16, 4, 8, T, 0, 3);
        band(band_mma<16, 4, 8, 5, 0, 1>, 16, 4, 8, T, 0, 1);
        band(band_mma<16, 2, 8, 5, 0, 2>, 16, 2, 8, T, 0, 2);
      }
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
