// Dequantizes a slice of quantized packed K/V weights (one byte per element: FP8 e4m3 or INT8,
// with fp32 scales; include/fkv/weights.hpp) into the activation dtype, for the cuBLASLt path of
// calls above the decode crossover. The materializer converts a few thousand rows at a time into
// a scratch buffer and runs the projection GEMM on them, so no full dense copy of the weights is
// ever kept.
//
//   out[r, k] = round_to_Act(value(w[row0 + r, k]) * scale(row0 + r, k)),  r < rows
// scale: WS 1 = scale[row / rows_per_layer] (a per-tensor scale of each layer), 2 = scale[row],
// 3 = scale[(row / 128) * scale_cols + k / 128] (128 x 128 blocks). One thread per 16 columns:
// one 16-byte load, the exact conversion the decode kernel uses (fkv_types.cuh), an fp32 multiply
// by the scale, two 16-byte stores.
#include "fkv_types.cuh"

namespace fkv_kernels {
namespace dequant_detail {

struct alignas(16) U32x4 {
  u32 x, y, z, w;
};

// A pair of Act values (exact: every e4m3 and int8 value is one) times s, rounded once.
template <class Act>
__device__ __forceinline__ u32 scale_pair(u32 pair, float s) {
  const float lo = to_float(from_bits<Act>(pair & 0xffffu)) * s;
  const float hi = to_float(from_bits<Act>(pair >> 16)) * s;
  return float_to_bits(lo, (Act*)0) | (float_to_bits(hi, (Act*)0) << 16);
}

}  // namespace dequant_detail

template <class Act, int WQ, int WS, int HIDDEN>
__global__ void __launch_bounds__(256) dequant_weights(const unsigned char* __restrict__ w,
                                                       const float* __restrict__ scale,
                                                       Act* __restrict__ out, long long row0,
                                                       long long rows, long long rows_per_layer,
                                                       long long scale_cols) {
  using namespace dequant_detail;
  static_assert(HIDDEN % 16 == 0, "rows are whole 16-byte vectors");
  static_assert(WQ == 1 || WQ == 2, "FP8 e4m3 or INT8");
  constexpr int VPR = HIDDEN / 16;  // 16-byte vectors (16 weights) per row
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * VPR) return;
  const long long r = i / VPR;
  const int c = (int)(i - r * VPR) * 16;
  const long long row = row0 + r;
  const U32x4 v = *reinterpret_cast<const U32x4*>(w + row * (long long)HIDDEN + c);
  float s;
  if constexpr (WS == 1)
    s = scale[row / rows_per_layer];
  else if constexpr (WS == 2)
    s = scale[row];
  else
    s = scale[(row / 128) * scale_cols + c / 128];
  const u32 in[4] = {v.x, v.y, v.z, v.w};
  u32 o[8];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if constexpr (WQ == 1)
      fp8x4_to<Act>(in[q], o[2 * q], o[2 * q + 1]);
    else
      int8x4_to<Act>(in[q], o[2 * q], o[2 * q + 1]);
    o[2 * q] = scale_pair<Act>(o[2 * q], s);
    o[2 * q + 1] = scale_pair<Act>(o[2 * q + 1], s);
  }
  U32x4* dst = reinterpret_cast<U32x4*>(out + r * (long long)HIDDEN + c);
  dst[0] = U32x4{o[0], o[1], o[2], o[3]};
  dst[1] = U32x4{o[4], o[5], o[6], o[7]};
}

}  // namespace fkv_kernels
