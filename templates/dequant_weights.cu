// Dequantizes a slice of quantized packed K/V weights (one byte per element: FP8 e4m3 or INT8,
// with fp32 scales; include/fkv/weights.hpp) into the activation dtype, for the cuBLASLt path of
// calls above the decode crossover. The materializer converts a few thousand rows at a time into
// a scratch buffer and runs the projection GEMM on them, so no full dense copy of the weights is
// ever kept.
//
//   out[r, k] = round_to_Act(value(w[row0 + r, k]) * scale(row0 + r, k)),  r < rows
// scale: WS 1 = scale[row / rows_per_layer] (a per-tensor scale of each layer), 2 = scale[row],
// 3 = scale[(row / 128) * scale_cols + k / 128] (128 x 128 blocks). One thread per 16 columns.
#include "fkv_types.cuh"

namespace fkv_kernels {
namespace dequant_detail {

// An e4m3 byte as a float, exactly, without float subnormals (so --ftz cannot change it).
__device__ __forceinline__ float e4m3_value(u32 b) {
  const u32 mag = b & 0x7fu;
  float f = (mag >> 3) == 0 ? (float)(mag & 7u) * 0.001953125f  // subnormal: m * 2^-9
                            : __uint_as_float((mag << 20) + (120u << 23));  // 2^(e-7) (1 + m/8)
  return (b & 0x80u) ? -f : f;
}

}  // namespace dequant_detail

template <class Act, int WQ, int WS, int HIDDEN>
__global__ void __launch_bounds__(256) dequant_weights(const unsigned char* __restrict__ w,
                                                       const float* __restrict__ scale,
                                                       Act* __restrict__ out, long long row0,
                                                       long long rows, long long rows_per_layer,
                                                       long long scale_cols) {
  static_assert(HIDDEN % 16 == 0, "rows are whole 16-byte vectors");
  static_assert(WQ == 1 || WQ == 2, "FP8 e4m3 or INT8");
  constexpr int VPR = HIDDEN / 16;  // vectors per row
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * VPR) return;
  const long long r = i / VPR;
  const int c = (int)(i - r * VPR) * 16;
  const long long row = row0 + r;
  const u32* src = reinterpret_cast<const u32*>(w + row * (long long)HIDDEN + c);
  u32 word[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) word[q] = __ldg(src + q);
  float s;
  if constexpr (WS == 1)
    s = scale[row / rows_per_layer];
  else if constexpr (WS == 2)
    s = scale[row];
  else
    s = scale[(row / 128) * scale_cols + c / 128];
  u32 packed[8];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      u32 bits[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const u32 b = (word[q] >> (8 * (2 * h + e))) & 0xffu;
        const float v = WQ == 1 ? dequant_detail::e4m3_value(b) : (float)(int)(signed char)b;
        bits[e] = float_to_bits(v * s, (Act*)0);
      }
      packed[2 * q + h] = bits[0] | (bits[1] << 16);
    }
  }
  u32* dst = reinterpret_cast<u32*>(out + r * (long long)HIDDEN + c);
#pragma unroll
  for (int q = 0; q < 8; ++q) dst[q] = packed[q];
}

}  // namespace fkv_kernels
