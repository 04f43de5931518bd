// act_row.cuh: one token's row of bf16/fp16 activations as the activation quantizers read it
// (templates/quantize_act.cu for the FP8 GEMM, templates/int8_split.cu for the INT8 GEMM): one
// CTA per row, thread tid holding the row's 8-element vectors tid + i * THREADS in registers as
// floats, so the row is read once for both the reduction and the conversion.
#pragma once

#include "fkv_types.cuh"

namespace fkv_kernels {
namespace act_row {

struct alignas(16) U32x4 {
  u32 x, y, z, w;
};

// Eight Act values of a vector as floats.
template <class Act>
__device__ __forceinline__ void unpack8(const U32x4& v, float (&f)[8]) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = to_float(from_bits<Act>(w[i] & 0xffffu));
    f[2 * i + 1] = to_float(from_bits<Act>(w[i] >> 16));
  }
}

// f[i] = vector tid + i * THREADS of `row` (NV vectors), zeros past its end; 16-byte loads when
// the row allows them (its pointer comes from the caller's stride: any alignment).
template <class Act, int NV, int VPT, int THREADS>
__device__ __forceinline__ void load(const Act* row, int tid, float (&f)[VPT][8]) {
  const bool vec16 = (reinterpret_cast<unsigned long long>(row) & 15ull) == 0;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = tid + i * THREADS;
    if (v < NV) {
      if (vec16) {
        unpack8<Act>(*reinterpret_cast<const U32x4*>(row + v * 8), f[i]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) f[i][e] = to_float(row[v * 8 + e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) f[i][e] = 0.0f;
    }
  }
}

// The row's largest magnitude, in every thread of the CTA (one __syncthreads).
template <int VPT, int THREADS>
__device__ __forceinline__ float amax(const float (&f)[VPT][8], int tid) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) m = fmaxf(m, fabsf(f[i][e]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float warp_max[THREADS / 32];
  if ((tid & 31) == 0) warp_max[tid >> 5] = m;
  __syncthreads();
  m = warp_max[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) m = fmaxf(m, warp_max[w]);
  return m;
}

}  // namespace act_row
}  // namespace fkv_kernels
