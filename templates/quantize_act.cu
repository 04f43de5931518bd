// The activations of one call, quantized to FP8 e4m3 for cuBLASLt's FP8 GEMM (the
// materializer's path for FP8 weights above the decode crossover), as the engines' W8A8 FP8
// linear methods quantize them dynamically:
//
//   GROUP 0:   one scale per token:                   s[t] = max(amax(x[t, :]) / 448, FLT_MIN)
//   GROUP 128: one per token and 128-column group g:  s[g * n + t] = max(amax(x[t, 128g:128g+128])
//                                                     / 448, FLT_MIN)   (token fastest)
//   q[t, k] = e4m3(x[t, k] / s), the fp32 quotient rounded once (nearest even, saturated)
//
// so that x[t, k] ~ q[t, k] * s. Rows t in [T, n) (padding up to the GEMM's token count) are
// written as zeros with scale 1. One CTA per token row; each thread keeps its 8-element vectors
// in registers between the reduction and the conversion, so x is read once.
//
// expand_scales: the per-layer scale of fp8_tensor weights repeated for each of the layer's
// rows, the per-row scale vector the GEMM reads for every FP8 format but blocks.
//
// scale_rows: fp8_channel's per-row scales applied after the block-scaled GEMM of its calls of
// up to 64 tokens, which ran with every weight block scale 1 into fp32:
//   proj[t, c] = Act(d[t, c] * row_scales[c]),  t < T, the product rounded once.
#include "act_row.cuh"

namespace fkv_kernels {
namespace quantize_detail {

__device__ __forceinline__ float scale_of(float amax) { return fmaxf(amax / 448.0f, 1.17549435e-38f); }

}  // namespace quantize_detail

template <class Act, int HIDDEN, int GROUP, int THREADS>
__global__ void __launch_bounds__(THREADS)
    quantize_act(const Act* __restrict__ x, long long ld, long long T, long long n,
                 unsigned char* __restrict__ xq, float* __restrict__ scales) {
  using namespace quantize_detail;
  static_assert(HIDDEN % 8 == 0, "rows are whole 8-element vectors");
  static_assert(GROUP == 0 || GROUP == 128, "per token, or per token and 128 columns");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  constexpr int NV = HIDDEN / 8;                     // vectors per row
  constexpr int VPT = (NV + THREADS - 1) / THREADS;  // vectors per thread
  constexpr int NG = (HIDDEN + 127) / 128;           // groups per row (GROUP 128)
  const long long t = blockIdx.x;
  const int tid = threadIdx.x;
  unsigned char* out = xq + t * (long long)HIDDEN;
  if (t >= T) {  // padding row: zeros, scale 1
    for (int v = tid; v < NV; v += THREADS) *reinterpret_cast<unsigned long long*>(out + v * 8) = 0ull;
    if constexpr (GROUP == 0) {
      if (tid == 0) scales[t] = 1.0f;
    } else {
      for (int g = tid; g < NG; g += THREADS) scales[g * n + t] = 1.0f;
    }
    return;
  }
  float f[VPT][8];
  act_row::load<Act, NV, VPT, THREADS>(x + t * ld, tid, f);
  float s[VPT];
  if constexpr (GROUP == 0) {
    const float amax = act_row::amax<VPT, THREADS>(f, tid);
    const float sc = scale_of(amax);
    if (tid == 0) scales[t] = sc;
#pragma unroll
    for (int i = 0; i < VPT; ++i) s[i] = sc;
  } else {
    // A group's 16 vectors are 16 adjacent threads of one half warp (THREADS is a multiple of
    // 16, so vector v = tid + i * THREADS is in group v / 16 with its half warp's lanes).
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      float amax = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(f[i][e]));
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      s[i] = scale_of(amax);
      const int v = tid + i * THREADS;
      if (v < NV && v % 16 == 0) scales[(v / 16) * n + t] = s[i];
    }
  }
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = tid + i * THREADS;
    if (v >= NV) continue;
    u32 b[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) b[e] = float_to_bits(__fdiv_rn(f[i][e], s[i]), (fp8_e4m3*)0);
    const u32 lo = b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24;
    const u32 hi = b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24;
    *reinterpret_cast<unsigned long long*>(out + v * 8) = (unsigned long long)hi << 32 | lo;
  }
}

// rows[r] = per_layer[r / rows_per_layer], r < n.
__global__ void expand_scales(const float* __restrict__ per_layer, float* __restrict__ rows,
                              long long rows_per_layer, long long n) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) rows[r] = per_layer[r / rows_per_layer];
}

// d and proj [T, N] row-major, N a multiple of 4 (16-byte loads of d and row_scales).
template <class Act>
__global__ void scale_rows(const float* __restrict__ d, const float* __restrict__ row_scales,
                           Act* __restrict__ proj, long long T, long long N) {
  const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i >= T * N) return;
  const float4 v = *reinterpret_cast<const float4*>(d + i);
  const float4 s = *reinterpret_cast<const float4*>(row_scales + i % N);
  uint2 out;
  out.x = float_to_bits(v.x * s.x, (Act*)0) | float_to_bits(v.y * s.y, (Act*)0) << 16;
  out.y = float_to_bits(v.z * s.z, (Act*)0) | float_to_bits(v.w * s.w, (Act*)0) << 16;
  *reinterpret_cast<uint2*>(proj + i) = out;
}

}  // namespace fkv_kernels
