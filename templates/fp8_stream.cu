// The FP8 stream GEMM (sm_90a: TMA and warpgroup MMAs): FP8 weights with per-row scales (the
// fp8_tensor scales expanded per row, or fp8_channel's) times a call's activations in e4m3, for
// calls of up to N tokens:
//
//   proj[t, r] = Act(row_scales[r] * sum_g x_scales[g, t] * sum_{k in g} w[r, k] * xq[t, k])
//
// for t < T, r < rows, over the 128-column groups g, the activations quantized per token and
// 128 columns (quantize_act.cu, GROUP 128; x_scales [kblocks, N], token fastest). Each group's
// sum comes from the tensor cores (their fp32 accumulation keeps fewer bits than fp32 adds),
// then is scaled and added in fp32 registers, as cuBLASLt's block-scaled GEMM promotes; the
// result is rounded once. It is built
// to stream the weights at the GPU's read bandwidth where the decode kernel is bound by its
// k-loop's latency (docs/quantized.md, "The FP8 stream GEMM"):
//   - one CTA per SM, each owning an even share of the rows (at most 128) over all of hidden,
//     so no partial sums cross CTAs; the tokens' scales of every k block copied once into
//     shared memory;
//   - warp 0 issues the TMA copies of each 128-column k block's weights (the CTA's rows x 128
//     bytes) and x (N tokens x 128 bytes), both swizzled by 128 bytes, into a ring of STAGES
//     stages, each published by a "full" mbarrier that the copies' bytes complete;
//   - two consumer warpgroups, each owning 64 of the CTA's rows, multiply every stage with
//     four wgmma m64nNk32 e4m3 x e4m3 (fp32 accumulators), hand it back through an "empty"
//     mbarrier (one arrival per consumer warp), and add the block's sums with their scales;
//   - at the end each thread scales its sums by their rows' scales and writes them.
#include "fkv_types.cuh"

namespace fkv_kernels {
namespace fp8_stream {

// A CUtensorMap (cuda.h) as the kernel receives it: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  unsigned long long words[16];
};

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
// Until the phase of parity `parity` of the mbarrier at `bar` has completed.
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
// A 2-D TMA copy of the box at (c0, c1) of `map` into shared memory at `dst`, completing
// bytes on the mbarrier at `bar`.
__device__ __forceinline__ void tma_load(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// A K-major operand of 128-byte rows in wgmma's 128-byte swizzle (as TMA's SWIZZLE_128B writes
// it): groups of 8 rows 1024 bytes apart (the stride byte offset), the layout type in bits
// 62-63 (PTX ISA, "Matrix Descriptor"). The start address moves by 32 bytes per k32 step.
__device__ __forceinline__ unsigned long long descriptor(u32 addr) {
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

#define FKV_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FKV_D8(i) FKV_D4(i), FKV_D4(i + 4)
#define FKV_D16(i) FKV_D8(i), FKV_D8(i + 8)
#define FKV_D32(i) FKV_D16(i), FKV_D16(i + 16)
// D[64 x N] (+)= A[64 x 32] * B[32 x N], both e4m3 from shared memory (descriptors a, b); D is
// overwritten when `add` is 0.
template <int N>
__device__ __forceinline__ void mma(float (&d)[N / 2], unsigned long long a, unsigned long long b,
                                    int add) {
  static_assert(N == 32 || N == 64, "32 or 64 tokens");
  if constexpr (N == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, "
        "%8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
        : FKV_D16(0)
        : "l"(a), "l"(b), "r"(add));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, "
        "%8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "
        "%26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
        : FKV_D32(0)
        : "l"(a), "l"(b), "r"(add));
  }
}
#undef FKV_D32
#undef FKV_D16
#undef FKV_D8
#undef FKV_D4

constexpr int kMaxRows = 128;  // a CTA's rows: two warpgroups of 64
constexpr int kBlock = 128;    // k block: 128 e4m3 columns, one 128-byte swizzle row
constexpr int kThreads = 384;  // the producer's warpgroup and two consumer warpgroups

}  // namespace fp8_stream

// w_map: the weights [rows, hidden] e4m3, box box_rows x 128 (box_rows <= 128, a multiple of 8);
// x_map: xq [N, hidden] e4m3 (rows T..N zeros), box N x 128. The ring: STAGES stages of 128 x 128
// weight bytes (box_rows of them written) then N x 128 of x, from a 1024-byte aligned start;
// then the x scales (kblocks x N floats).
template <class Act, int N, int STAGES>
__global__ void __launch_bounds__(fp8_stream::kThreads, 1)
    fp8_stream_gemm(const __grid_constant__ fp8_stream::TensorMap w_map,
                    const __grid_constant__ fp8_stream::TensorMap x_map,
                    const float* __restrict__ row_scales, const float* __restrict__ x_scales,
                    Act* __restrict__ proj, int T, int rows, int kblocks, int box_rows) {
  using namespace fp8_stream;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr u32 kWBytes = kMaxRows * kBlock, kXBytes = N * kBlock, kStage = kWBytes + kXBytes;
  static_assert(kStage % 1024 == 0, "stages stay 1024-byte aligned (the swizzle's period)");
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const u32 ring = (smem_addr(smem_raw) + 1023u) & ~1023u;

  // This CTA's rows: [r0, r1), box_rows or fewer.
  const long long G = gridDim.x, c = blockIdx.x;
  const int r0 = (int)(c * rows / G), r1 = (int)((c + 1) * rows / G);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {  // the producer: one thread of warp 0 issues every copy
    if (threadIdx.x == 0) {
      const u32 bytes = (u32)box_rows * kBlock + kXBytes;
      for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % STAGES;
        const u32 round = (u32)(kb / STAGES);
        if (round > 0) mbar_wait(smem_addr(&empty[s]), (round - 1) & 1u);
        const u32 bar = smem_addr(&full[s]);
        mbar_expect_tx(bar, bytes);
        tma_load(ring + s * kStage, &w_map, kb * kBlock, r0, bar);
        tma_load(ring + s * kStage + kWBytes, &x_map, kb * kBlock, 0, bar);
      }
    }
    return;
  }

  const int wg = warp / 4 - 1;  // consumer warpgroup: the CTA's rows 64 wg .. 64 wg + 63
  // Accumulator 4 j + e: token 8 j + 2 (lane % 4) + (e & 1), row 16 (warp % 4) + lane / 4 +
  // 8 (e >> 1) of the warpgroup's 64 (wgmma's m64nN layout). acc holds one k block's sums, tot
  // the whole row's, each block's added with its tokens' scales (fp32 promotion per 128
  // columns). A warpgroup whose 64 rows are all past the CTA's (box_rows <= 64) skips the MMAs
  // but still hands the stages back. Shared-memory rows past box_rows hold stale bytes: their
  // sums are never written.
  const bool active = 64 * wg < r1 - r0;
  // The tokens' scales of every k block, copied once into shared memory after the ring: read
  // from global memory in the k-loop, their latency would add to every stage's.
  float* s_scales = reinterpret_cast<float*>(smem_raw + (ring - smem_addr(smem_raw)) +
                                             (u32)STAGES * kStage);
  for (int i = threadIdx.x - 128; i < kblocks * N; i += 256) s_scales[i] = x_scales[i];
  asm volatile("bar.sync 1, 256;" ::: "memory");
  float acc[N / 2], tot[N / 2];
#pragma unroll
  for (int j = 0; j < N / 2; ++j) tot[j] = 0.0f;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % STAGES;
    const float2* xs = reinterpret_cast<const float2*>(s_scales + kb * N) + lane % 4;
    float2 sc[N / 8];
#pragma unroll
    for (int j = 0; j < N / 8; ++j) sc[j] = xs[4 * j];
    mbar_wait(smem_addr(&full[s]), (u32)(kb / STAGES) & 1u);
    if (active) {
      const u32 a = ring + s * kStage + wg * 64 * kBlock, b = ring + s * kStage + kWBytes;
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int k = 0; k < kBlock / 32; ++k)
        mma<N>(acc, descriptor(a + 32 * k), descriptor(b + 32 * k), k);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    if (lane == 0) mbar_arrive(smem_addr(&empty[s]));
    if (active) {
#pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        tot[4 * j] += acc[4 * j] * sc[j].x;
        tot[4 * j + 1] += acc[4 * j + 1] * sc[j].y;
        tot[4 * j + 2] += acc[4 * j + 2] * sc[j].x;
        tot[4 * j + 3] += acc[4 * j + 3] * sc[j].y;
      }
    }
  }
  if (!active) return;

  const int rw = r0 + wg * 64 + 16 * (warp % 4) + lane / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rw + 8 * h;
    if (r >= r1) continue;
    const float ws = row_scales[r];
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int t = 8 * j + 2 * (lane % 4) + e;
        if (t < T)
          proj[(long long)t * rows + r] =
              from_bits<Act>(float_to_bits(tot[4 * j + 2 * h + e] * ws, (Act*)0));
      }
  }
#endif
}

}  // namespace fkv_kernels
