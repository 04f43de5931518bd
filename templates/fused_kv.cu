// Fused KV materialization: K RMSNorm + RoPE + K/V store, for all draft layers in one launch.
//
// Per token t, layer l, KV head h (D = head_dim, R = rotary_dim, KV = H * D):
//   k = proj[t, l, h*D : (h+1)*D], v = proj[t, l, KV + h*D : KV + (h+1)*D]
//   K_NORM: k = k * rsqrt(mean(k^2) + eps[l]) * w[l]                (fp32)
//   RoPE on dims < R with row positions[t] of cos_sin [max_pos, R] (cos | sin halves):
//     NEOX pairs (i, i + R/2), GPT-J pairs (2i, 2i + 1), both with cos_i, sin_i:
//     x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin;  dims >= R pass through (normed).
//   store k, v rounded once to Cache (FP8: divided by the layer's scale first, saturated).
//
// Work split (all sizes are template arguments, derived on the host by KernelSpec::tiling()):
//   block  = TPB tokens x HPB heads x a chunk of layers (gridDim.y chunks of p.layers_per_block)
//   thread = one VEC-element vector (16 bytes of Act where D allows) of K and of V of one head,
//            for every layer of the chunk. cos/sin for its elements are read once, into
//            registers, and reused across layers; each layer's K/V loads for the next layer
//            are issued before the current one is processed.
//   WARP_LOCAL: a head's VPH = D / VEC threads are aligned lanes of one warp, so the norm
//            reduction and the NEOX partner exchange are warp shuffles. Otherwise (D = 80, 96,
//            ... or R/2 not a multiple of VEC) they go through shared memory.
#include "fkv_types.cuh"
#include "fkv/kernel_params.h"

namespace fkv_kernels {

template <int H, int D, int R, bool NEOX, bool K_NORM, class Act, class Cache, class CosSin,
          class Pos, class Slot, bool POOL, bool DEBUG, int VEC, int HPB, int TPB, int BLOCK,
          bool WARP_LOCAL>
__global__ void __launch_bounds__(BLOCK) fused_kv_materialize(const FkvKernelParams p) {
  constexpr int VPH = D / VEC;      // threads per head
  constexpr int ROW = HPB * VPH;    // threads per token
  constexpr int HALF = R / 2;
  constexpr int KV = H * D;
  constexpr bool FP8 = IsFp8<Cache>::value;
  // NEOX partners live in another thread's vector unless R is 0; GPT-J pairs (2i, 2i+1) stay
  // inside a vector when VEC is even.
  constexpr bool EXCHANGE = R > 0 && (NEOX || VEC % 2 != 0);
  static_assert(D % VEC == 0, "head_dim must be a multiple of the vector width");
  static_assert(R % 2 == 0 && R <= D, "rotary_dim must be even and <= head_dim");
  static_assert(!WARP_LOCAL || (VPH <= 32 && (VPH & (VPH - 1)) == 0), "warp-local needs VPH | 32");
  static_assert(!(WARP_LOCAL && EXCHANGE && NEOX) || HALF % VEC == 0, "warp-local NEOX needs R/2 % VEC == 0");
  static_assert(BLOCK % 32 == 0 && BLOCK >= TPB * ROW, "block covers the tile");

  extern __shared__ float smem[];  // !WARP_LOCAL: [BLOCK * VEC] normed K, then [BLOCK] sums

  const int tid = threadIdx.x;
  const int r = tid / ROW;
  const int c = tid - r * ROW;
  const int hl = c / VPH;
  const int j = c - hl * VPH;  // vector index within the head
  const int e0 = j * VEC;      // first element of this thread's vector within the head
  const long long t = (long long)blockIdx.x * TPB + r;
  const int h = blockIdx.z * HPB + hl;
  bool active = r < TPB && t < p.num_tokens;

  // The first layer's K/V loads go out before the position and slot reads, so their latencies
  // overlap. Threads whose token is skipped still take part in the shuffles and barriers.
  const bool load = active;
  const int l0 = blockIdx.y * p.layers_per_block;
  const int l1 = min(l0 + p.layers_per_block, p.num_layers);
  const Act* src = static_cast<const Act*>(p.proj) + (load ? t * p.proj_stride_token : 0) + h * D + e0;
  Vec<Act, VEC> kv_next, vv_next;
  if (load && l0 < l1) {
    kv_next = load_vec<Act, VEC>(src + l0 * p.proj_stride_layer);
    vv_next = load_vec<Act, VEC>(src + l0 * p.proj_stride_layer + KV);
  }

  // cos/sin of this thread's elements, once per token, reused for every layer.
  float cs_cos[VEC], cs_sin[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) { cs_cos[i] = 1.f; cs_sin[i] = 0.f; }
  if (R > 0 && active) {
    long long pos = (long long)static_cast<const Pos*>(p.positions)[t];
    if (DEBUG && (pos < 0 || pos >= p.max_position)) {
      atomicOr(p.error_flag, FKV_ERROR_BAD_POSITION);
      active = false;
    } else {
      const CosSin* row = static_cast<const CosSin*>(p.cos_sin) + pos * p.cos_sin_stride;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const int e = e0 + i;
        if (e < R) {
          const int idx = NEOX ? (e < HALF ? e : e - HALF) : (e >> 1);
          cs_cos[i] = to_float(row[idx]);
          cs_sin[i] = to_float(row[HALF + idx]);
        }
      }
    }
  }

  bool write = active;
  long long slot = 0;
  if (POOL && active) {
    slot = (long long)static_cast<const Slot*>(p.cache_loc)[t];
    if (slot < 0) {
      write = false;
    } else if (DEBUG && slot >= p.num_slots) {
      atomicOr(p.error_flag, FKV_ERROR_BAD_SLOT);
      write = false;
    }
  }
  for (int l = l0; l < l1; ++l) {
    const Vec<Act, VEC> kv = kv_next, vv = vv_next;
    if (load && l + 1 < l1) {  // issue the next layer's loads before working on this one
      kv_next = load_vec<Act, VEC>(src + (l + 1) * p.proj_stride_layer);
      vv_next = load_vec<Act, VEC>(src + (l + 1) * p.proj_stride_layer + KV);
    }
    float k[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) k[i] = load ? to_float(kv.v[i]) : 0.f;

    if constexpr (K_NORM) {
      float ss = 0.f;
#pragma unroll
      for (int i = 0; i < VEC; ++i) ss += k[i] * k[i];
      if constexpr (WARP_LOCAL) {
#pragma unroll
        for (int o = VPH / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      } else {
        float* sums = smem + BLOCK * VEC;
        sums[tid] = ss;
        __syncthreads();
        ss = 0.f;
#pragma unroll 4
        for (int g = 0; g < VPH; ++g) ss += sums[tid - j + g];
      }
      const float inv = rsqrtf(ss * (1.0f / D) + p.eps[l]);
      const float* w = p.k_norm_weight + (long long)l * D + e0;
      if (load) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) k[i] = k[i] * inv * w[i];
      }
    }

    if constexpr (R > 0) {
      float partner[VEC];
      if constexpr (!EXCHANGE) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) partner[i] = k[i ^ 1];
      } else if constexpr (WARP_LOCAL) {
        constexpr int P = HALF / VEC;  // vectors per half
        const int lane = tid & 31;
        const int src_lane = j < P ? lane + P : (j < 2 * P ? lane - P : lane);
#pragma unroll
        for (int i = 0; i < VEC; ++i) partner[i] = __shfl_sync(0xffffffffu, k[i], src_lane);
      } else {
        float* sk = smem;
#pragma unroll
        for (int i = 0; i < VEC; ++i) sk[tid * VEC + i] = k[i];
        __syncthreads();
        const float* head = sk + (tid - j) * VEC;  // this head's D values
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const int e = e0 + i;
          const int pe = NEOX ? (e < HALF ? e + HALF : e - HALF) : (e ^ 1);
          partner[i] = e < R ? head[pe] : 0.f;
        }
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const int e = e0 + i;
        if (e < R) {
          const bool first = NEOX ? e < HALF : (e & 1) == 0;
          k[i] = first ? k[i] * cs_cos[i] - partner[i] * cs_sin[i]
                       : k[i] * cs_cos[i] + partner[i] * cs_sin[i];
        }
      }
    }
    if (!WARP_LOCAL && (K_NORM || EXCHANGE)) __syncthreads();  // smem reused next layer

    if (write) {
      Cache* kdst;
      Cache* vdst;
      if constexpr (POOL) {
        const long long off = slot * p.slot_stride + h * D + e0;
        kdst = static_cast<Cache*>(p.k_pool[l]) + off;
        vdst = static_cast<Cache*>(p.v_pool[l]) + off;
      } else {
        const long long off = ((long long)l * p.num_tokens + t) * KV + h * D + e0;
        kdst = static_cast<Cache*>(p.k_out) + off;
        vdst = static_cast<Cache*>(p.v_out) + off;
      }
      Vec<Cache, VEC> ko, vo;
      if constexpr (FP8) {
        const float ks = p.k_scale[l], vs = p.v_scale[l];
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          ko.v[i] = from_bits<Cache>(float_to_bits(k[i] / ks, (Cache*)0));
          vo.v[i] = from_bits<Cache>(float_to_bits(to_float(vv.v[i]) / vs, (Cache*)0));
        }
      } else {
        static_assert(SameType<Cache, Act>::value, "a non-FP8 cache has the activation dtype");
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          ko.v[i] = from_bits<Cache>(float_to_bits(k[i], (Cache*)0));
          vo.v[i] = vv.v[i];  // V passthrough: bit-exact
        }
      }
      store_vec<Cache, VEC>(kdst, ko);
      store_vec<Cache, VEC>(vdst, vo);
    }
  }
}

}  // namespace fkv_kernels
