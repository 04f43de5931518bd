// The INT8 GEMM path of INT8 (W8A16) weights above the decode crossover: cuBLASLt's int8 GEMM
// with int32 accumulation reads the stored weights, and the bf16/fp16 activations go in as two
// int8 parts per token, so that they keep about 16 bits of each token's range instead of 8:
//
//   split_act_int8:   s[t] = max(amax(x[t, :]) / 127, FLT_MIN)
//                     hi[t, k] = rint(x[t, k] / s[t])                       in [-127, 127]
//                     lo[t, k] = rint((x[t, k] / s[t] - hi[t, k]) * 254)     in [-127, 127]
//                     so x[t, k] = s[t] * (hi + lo / 254) within s[t] / 508 (2^-16 of amax),
//                     the quotient the fp32 one (round to nearest even). xq holds the hi rows
//                     [0, n) then the lo rows [n, 2n); rows t in [T, n) (padding up to the
//                     GEMM's token count) are zeros with scale 1.
//   combine_int8:     proj[t, c] = Act((acc[t, c] + acc[n + t, c] / 254) * s[t] * w_scale[c])
//                     from the GEMM's int32 sums acc [2n, N] (exact: |sum| < 127 * 127 * hidden),
//                     in fp32, rounded once; t < T.
//
// One CTA per token row for the split (each thread keeps its 8-element vectors in registers
// between the reduction and the conversion, so x is read once); the combine reads four columns
// of both rows per thread with 16-byte loads.
#include "act_row.cuh"

namespace fkv_kernels {
namespace int8_split_detail {

__device__ __forceinline__ u32 byte_of(float v) { return u32(int(v)) & 0xffu; }

}  // namespace int8_split_detail

template <class Act, int HIDDEN, int THREADS>
__global__ void __launch_bounds__(THREADS)
    split_act_int8(const Act* __restrict__ x, long long ld, long long T, long long n,
                   signed char* __restrict__ xq, float* __restrict__ scales) {
  using namespace int8_split_detail;
  static_assert(HIDDEN % 8 == 0, "rows are whole 8-element vectors");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  constexpr int NV = HIDDEN / 8;
  constexpr int VPT = (NV + THREADS - 1) / THREADS;
  const long long t = blockIdx.x;
  const int tid = threadIdx.x;
  signed char* hi_row = xq + t * (long long)HIDDEN;
  signed char* lo_row = xq + (n + t) * (long long)HIDDEN;
  if (t >= T) {  // padding row: zeros, scale 1
    for (int v = tid; v < NV; v += THREADS) {
      *reinterpret_cast<unsigned long long*>(hi_row + v * 8) = 0ull;
      *reinterpret_cast<unsigned long long*>(lo_row + v * 8) = 0ull;
    }
    if (tid == 0) scales[t] = 1.0f;
    return;
  }
  float f[VPT][8];
  act_row::load<Act, NV, VPT, THREADS>(x + t * ld, tid, f);
  const float amax = act_row::amax<VPT, THREADS>(f, tid);
  const float s = fmaxf(amax / 127.0f, 1.17549435e-38f);
  if (tid == 0) scales[t] = s;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = tid + i * THREADS;
    if (v >= NV) continue;
    u32 h[8], l[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float q = __fdiv_rn(f[i][e], s);  // |q| <= 127 up to rounding
      const float qh = fminf(fmaxf(rintf(q), -127.0f), 127.0f);
      // q - qh is exact (Sterbenz, or both below 2^24 with the same ulp); times 254 rounds once.
      const float ql = fminf(fmaxf(rintf(__fmul_rn(q - qh, 254.0f)), -127.0f), 127.0f);
      h[e] = byte_of(qh);
      l[e] = byte_of(ql);
    }
    const unsigned long long hv = (unsigned long long)(h[4] | h[5] << 8 | h[6] << 16 | h[7] << 24)
                                      << 32 |
                                  (h[0] | h[1] << 8 | h[2] << 16 | h[3] << 24);
    const unsigned long long lv = (unsigned long long)(l[4] | l[5] << 8 | l[6] << 16 | l[7] << 24)
                                      << 32 |
                                  (l[0] | l[1] << 8 | l[2] << 16 | l[3] << 24);
    *reinterpret_cast<unsigned long long*>(hi_row + v * 8) = hv;
    *reinterpret_cast<unsigned long long*>(lo_row + v * 8) = lv;
  }
}

// proj [T, N] (rows N elements apart) from acc [2n, N] int32, the token scales and the per-row
// weight scales; N a multiple of 4. Grid: (ceil(N / (4 * THREADS)), T).
template <class Act, int THREADS>
__global__ void __launch_bounds__(THREADS)
    combine_int8(const int* __restrict__ acc, long long n, long long N,
                 const float* __restrict__ x_scales, const float* __restrict__ w_scales,
                 Act* __restrict__ proj) {
  const long long t = blockIdx.y;
  const long long c = ((long long)blockIdx.x * THREADS + threadIdx.x) * 4;
  if (c >= N) return;
  const int4 h = *reinterpret_cast<const int4*>(acc + t * N + c);
  const int4 l = *reinterpret_cast<const int4*>(acc + (n + t) * N + c);
  const float4 ws = *reinterpret_cast<const float4*>(w_scales + c);
  const float s = x_scales[t];
  const float inv = 1.0f / 254.0f;
  const float v0 = fmaf((float)l.x, inv, (float)h.x) * (s * ws.x);
  const float v1 = fmaf((float)l.y, inv, (float)h.y) * (s * ws.y);
  const float v2 = fmaf((float)l.z, inv, (float)h.z) * (s * ws.z);
  const float v3 = fmaf((float)l.w, inv, (float)h.w) * (s * ws.w);
  uint2 out;
  out.x = float_to_bits(v0, (Act*)0) | float_to_bits(v1, (Act*)0) << 16;
  out.y = float_to_bits(v2, (Act*)0) | float_to_bits(v3, (Act*)0) << 16;
  *reinterpret_cast<uint2*>(proj + t * N + c) = out;
}

}  // namespace fkv_kernels
