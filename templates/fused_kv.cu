// Fused KV materialization: K RMSNorm + RoPE + K/V store, for all draft layers in one launch.
//
// Per token t, layer l, KV head h (D = head_dim, R = rotary_dim, KV = H * D):
//   k = proj[t, l, h*D : (h+1)*D], v = proj[t, l, KV + h*D : KV + (h+1)*D]
//   K_NORM (fkv::KNormKind's number: 0 none, 1 rms):
//     1: k = k * rsqrt(mean(k^2) + eps[l]) * w[l]                  (fp32)
//   RoPE on dims < R with row positions[t] of cos_sin [max_pos, R] (cos | sin halves):
//     NEOX pairs (i, i + R/2), GPT-J pairs (2i, 2i + 1), both with cos_i, sin_i:
//     x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin;  dims >= R pass through (normed).
//   store k, v rounded once to Cache (FP8: divided by the layer's scale first, saturated).
// BIAS: k += bias[l, h*D + d] before the norm and v = v + bias[l, KV + h*D + d] (fp32), so V is
//   rounded once like K; without BIAS, V is copied bit-exact (non-FP8 caches).
// Bounds, in every build: a token whose position is outside [0, max_position) or whose slot is
//   >= num_slots is not written, and error_flag (when given) gets FKV_ERROR_BAD_POSITION /
//   FKV_ERROR_BAD_SLOT; a negative slot means "skip" and is no error. One compare per token for
//   the position and one for the slot (per layer only with per-layer slot mappings).
// Pool layouts: flat (row slot of [num_slots, slot_stride]) or PAGED, where element (slot, h, d)
//   of a layer's buffer is at (slot / block_size) * block_stride + (slot % block_size) *
//   slot_stride + h * head_stride + d (vLLM's and FlashInfer's NHD and HND caches), with an
//   optional slot mapping per layer.
//
// Work split (all sizes are template arguments, derived on the host by KernelSpec::tiling()):
//   A (token, head) pair is handled by SEG = D / EPT consecutive lanes of one warp; each lane
//   owns EPT = VEC * LOADS elements (LOADS loads of VEC elements, 16 bytes each where D allows)
//   of K and the same elements of V. A warp holds PPW = 32 / SEG pairs and never splits one, so
//   the K-norm reduction and the NEOX partner exchange are warp shuffles for every head_dim
//   (80, 96, ... included: the tiling picks EPT so that at most a few lanes per warp idle).
//   Pairs are numbered token-major, so the heads of one token sit side by side and share its
//   cos/sin row through L1. Each lane reads its cos/sin once, into registers, and reuses them
//   for every layer of its chunk (gridDim.y chunks of p.layers_per_block layers).
// K/V loads: cp.async into a ring of two layers in shared memory, the lane's own bytes only (no
//   barrier): the next layer's copies are in flight while the current layer is processed, and
//   they hold no registers. On the H200 this beat the same one-layer-ahead prefetch through
//   registers by 4-10% (deeper rings, 3 to 6 layers, were slower: docs/performance.md). Loads
//   of under 4 bytes (a single 16-bit element), which cp.async cannot move, or a ring over
//   48 KB (tuning knobs only) go straight to registers, a layer at a time.
#include "fkv_types.cuh"
#include "fkv/kernel_params.h"

namespace fkv_kernels {

// Reads slot index[t] into `slot`; false when the token is skipped: a negative slot (no error),
// or one >= num_slots (sets FKV_ERROR_BAD_SLOT; never written out of bounds).
template <class Slot>
__device__ __forceinline__ bool slot_ok(const void* index, long long t, const FkvKernelParams& p,
                                        long long& slot) {
  slot = (long long)static_cast<const Slot*>(index)[t];
  if (slot < 0) return false;
  if (slot >= p.num_slots) {
    if (p.error_flag) atomicOr(p.error_flag, FKV_ERROR_BAD_SLOT);
    return false;
  }
  return true;
}

// Element offset of a slot's first row in a paged layer buffer (slot >= 0).
__device__ __forceinline__ long long paged_offset(long long slot, const FkvKernelParams& p) {
  const long long block = slot / p.block_size;
  return block * p.block_stride + (slot - block * p.block_size) * p.slot_stride;
}

// N fp32 values at b (16-byte loads when the host guaranteed alignment: see materialize.cpp).
template <int N, int D>
__device__ __forceinline__ void load_floats(const float* b, float* out, bool load) {
  if constexpr (N % 4 == 0 && D % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const Vec<float, 4> v = load ? load_vec<float, 4>(b + 4 * q) : Vec<float, 4>{{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int i = 0; i < 4; ++i) out[4 * q + i] = v.v[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = load ? b[i] : 0.f;
  }
}

template <int H, int D, int R, bool NEOX, int K_NORM, class Act, class Cache, class CosSin,
          class Pos, class Slot, bool POOL, bool PAGED, bool BIAS, int VEC, int LOADS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) fused_kv_materialize(const FkvKernelParams p) {
  constexpr int EPT = VEC * LOADS;  // elements per lane
  constexpr int SEG = D / EPT;      // lanes per (token, head) pair
  constexpr int PPW = 32 / SEG;     // pairs per warp
  constexpr int HALF = R / 2;
  constexpr int KV = H * D;
  constexpr bool FP8 = IsFp8<Cache>::value;
  static_assert(D % EPT == 0 && SEG >= 1 && SEG <= 32, "a head must fit in one warp");
  static_assert(R % 2 == 0 && R <= D, "rotary_dim must be even and <= head_dim");
  static_assert(R == 0 || NEOX || EPT % 2 == 0, "GPT-J pairs must stay within a lane");
  static_assert(POOL || !PAGED, "a paged layout is a pool layout");
  constexpr unsigned FULL = 0xffffffffu;

  const int lane = threadIdx.x & 31;
  const int seg = lane / SEG;          // pair within the warp (== PPW on idle lanes)
  const int seg_base = seg * SEG;      // first lane of this pair
  const int j = lane - seg_base;       // lane within the pair
  const int e0 = j * EPT;              // first element of this lane within the head
  const long long pair = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * PPW + seg;
  const long long t = pair / H;
  const int h = (int)(pair - t * H);
  bool active = seg < PPW && t < p.num_tokens;

  // The first layer's K/V copies go out before the position and slot reads, so their latencies
  // overlap. Lanes whose token is skipped still take part in the shuffles below.
  const bool load = active;
  const int l0 = blockIdx.y * p.layers_per_block;
  const int l1 = min(l0 + p.layers_per_block, p.num_layers);
  const Act* src = static_cast<const Act*>(p.proj) + (load ? t * p.proj_stride_token + h * D + e0 : 0);
  constexpr int CHUNK = VEC * (int)sizeof(Act);  // bytes per load
  constexpr int NT = WARPS * 32;
  constexpr int STAGES = 2;  // layers in the ring: STAGES - 1 in flight ahead of the current one
  constexpr int RING_BYTES = STAGES * 2 * LOADS * NT * CHUNK;
  constexpr bool RING = (CHUNK == 4 || CHUNK == 8 || CHUNK == 16) && RING_BYTES <= 48 * 1024;
  __shared__ __align__(16) unsigned char ring[RING ? RING_BYTES : 16];
  // Load c of this thread's K (c < LOADS) or V (c - LOADS) in stage s: consecutive threads
  // hold consecutive chunks, so a warp's shared accesses are free of bank conflicts.
  auto slot = [&](int s, int c) { return ring + ((s * 2 * LOADS + c) * NT + threadIdx.x) * CHUNK; };
  auto issue = [&](int l, int s) {  // layer l's copies into stage s, as one group (maybe empty)
    if constexpr (RING) {
      if (load && l < l1) {
#pragma unroll
        for (int c = 0; c < LOADS; ++c) {
          cp_async<CHUNK>(slot(s, c), src + l * p.proj_stride_layer + c * VEC);
          cp_async<CHUNK>(slot(s, LOADS + c), src + l * p.proj_stride_layer + KV + c * VEC);
        }
      }
      cp_async_commit();
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) issue(l0 + s, s);

  // cos/sin of this lane's elements, once per token, reused for every layer.
  float cs_cos[EPT], cs_sin[EPT];
#pragma unroll
  for (int i = 0; i < EPT; ++i) { cs_cos[i] = 1.f; cs_sin[i] = 0.f; }
  if (R > 0 && active) {
    const long long pos = (long long)static_cast<const Pos*>(p.positions)[t];
    if ((unsigned long long)pos >= (unsigned long long)p.max_position) {  // negative too
      if (p.error_flag) atomicOr(p.error_flag, FKV_ERROR_BAD_POSITION);
      active = false;
    } else {
      const CosSin* row = static_cast<const CosSin*>(p.cos_sin) + pos * p.cos_sin_stride;
      // A lane's cos (and sin) indices are contiguous when its elements do not straddle R/2
      // (NEOX) or always (GPT-J, two elements per index): then 16-byte loads, if the row allows.
      constexpr bool CONTIGUOUS = !NEOX || HALF % EPT == 0;
      constexpr int N = NEOX ? EPT : EPT / 2;  // cos values this lane needs
      constexpr int C = (N * (int)sizeof(CosSin)) % 16 == 0 ? 16 / (int)sizeof(CosSin) : 1;
      const bool wide = CONTIGUOUS && C > 1 && e0 + EPT <= R &&
                        ((unsigned long long)row % 16 == 0) && ((HALF * sizeof(CosSin)) % 16 == 0);
      if (wide) {
        const int idx0 = NEOX ? (e0 < HALF ? e0 : e0 - HALF) : e0 / 2;
        float c[N], sn[N];
#pragma unroll
        for (int q = 0; q < N / C; ++q) {
          const Vec<CosSin, C> vc = load_vec<CosSin, C>(row + idx0 + q * C);
          const Vec<CosSin, C> vs = load_vec<CosSin, C>(row + HALF + idx0 + q * C);
#pragma unroll
          for (int i = 0; i < C; ++i) {
            c[q * C + i] = to_float(vc.v[i]);
            sn[q * C + i] = to_float(vs.v[i]);
          }
        }
#pragma unroll
        for (int i = 0; i < EPT; ++i) {
          cs_cos[i] = c[NEOX ? i : i / 2];
          cs_sin[i] = sn[NEOX ? i : i / 2];
        }
      } else {
#pragma unroll
        for (int i = 0; i < EPT; ++i) {
          const int e = e0 + i;
          if (e < R) {
            const int idx = NEOX ? (e < HALF ? e : e - HALF) : (e >> 1);
            cs_cos[i] = to_float(row[idx]);
            cs_sin[i] = to_float(row[HALF + idx]);
          }
        }
      }
    }
  }

  // The slot: once per token (shared cache_loc), or per layer below (per-layer slot mappings).
  bool write = active;
  long long pool_off = 0;  // element offset of this lane's K/V in every layer's buffer
  if constexpr (POOL) {
    if (!PAGED || !p.per_layer_slots) {
      write = write && slot_ok<Slot>(p.cache_loc, t, p, pool_off);
      if constexpr (PAGED) pool_off = paged_offset(pool_off, p) + h * p.head_stride + e0;
      else pool_off = pool_off * p.slot_stride + h * D + e0;
    }
  }

  for (int l = l0; l < l1; ++l) {
    Vec<Act, VEC> kv[LOADS], vv[LOADS];
    if constexpr (RING) {
      const int i = l - l0;
      issue(l + STAGES - 1, (i + STAGES - 1) % STAGES);  // the stage the last layer was read from
      cp_async_wait<STAGES - 1>();                       // this layer's group has landed
      if (load) {
#pragma unroll
        for (int c = 0; c < LOADS; ++c) {
          kv[c] = load_vec_shared<Act, VEC>(slot(i % STAGES, c));
          vv[c] = load_vec_shared<Act, VEC>(slot(i % STAGES, LOADS + c));
        }
      }
    } else if (load) {
#pragma unroll
      for (int c = 0; c < LOADS; ++c) {
        kv[c] = load_vec<Act, VEC>(src + l * p.proj_stride_layer + c * VEC);
        vv[c] = load_vec<Act, VEC>(src + l * p.proj_stride_layer + KV + c * VEC);
      }
    }
    float k[EPT];
#pragma unroll
    for (int i = 0; i < EPT; ++i) k[i] = load ? to_float(kv[i / VEC].v[i % VEC]) : 0.f;
    float vb[EPT];  // V bias (BIAS only)
    if constexpr (BIAS) {
      const float* b = p.kv_bias + l * p.kv_bias_stride + h * D + e0;
      float kb[EPT];
      load_floats<EPT, D>(b, kb, load);
      load_floats<EPT, D>(b + KV, vb, load);
#pragma unroll
      for (int i = 0; i < EPT; ++i) k[i] += kb[i];
    }

    if constexpr (K_NORM == 1) {  // rms
      float ss = 0.f;
#pragma unroll
      for (int i = 0; i < EPT; ++i) ss += k[i] * k[i];
      if constexpr ((SEG & (SEG - 1)) == 0) {
#pragma unroll
        for (int o = SEG / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(FULL, ss, o);
      } else {  // segment of SEG lanes, not a power of two: reduce to its first lane, broadcast
#pragma unroll
        for (int o = 1; o < SEG; o <<= 1) {
          const float v = __shfl_down_sync(FULL, ss, o);
          if (j + o < SEG) ss += v;
        }
        ss = __shfl_sync(FULL, ss, seg_base);
      }
      const float inv = rsqrtf(ss * (1.0f / D) + p.eps[l]);
      if (load) {
        const float* w = p.k_norm_weight + (long long)l * D + e0;
#pragma unroll
        for (int i = 0; i < EPT; ++i) k[i] = k[i] * inv * w[i];
      }
    }

    if constexpr (R > 0) {
      float partner[EPT];
      if constexpr (!NEOX) {
#pragma unroll
        for (int i = 0; i < EPT; ++i) partner[i] = k[i ^ 1];
      } else if constexpr (HALF % EPT == 0) {  // partner lane holds the matching elements
        constexpr int P = HALF / EPT;
        const int src_lane = j < P ? lane + P : (j < 2 * P ? lane - P : lane);
#pragma unroll
        for (int i = 0; i < EPT; ++i) partner[i] = __shfl_sync(FULL, k[i], src_lane);
      } else {  // element e pairs with e +- HALF, at another offset in another lane
#pragma unroll
        for (int i = 0; i < EPT; ++i) {
          const int e = e0 + i;
          const int up = min(seg_base + (e + HALF) / EPT, 31);
          const int down = seg_base + max(e - HALF, 0) / EPT;
          const float from_up = __shfl_sync(FULL, k[(i + HALF) % EPT], up);
          const float from_down = __shfl_sync(FULL, k[((i - HALF) % EPT + EPT) % EPT], down);
          partner[i] = e < HALF ? from_up : from_down;
        }
      }
#pragma unroll
      for (int i = 0; i < EPT; ++i) {
        const int e = e0 + i;
        if (e < R) {
          const bool first = NEOX ? e < HALF : (e & 1) == 0;
          k[i] = first ? k[i] * cs_cos[i] - partner[i] * cs_sin[i]
                       : k[i] * cs_cos[i] + partner[i] * cs_sin[i];
        }
      }
    }

    bool write_l = write;
    long long off = pool_off;
    if constexpr (PAGED) {
      if (p.per_layer_slots) {  // uniform branch: this layer's own slot mapping
        long long slot = 0;
        write_l = active && slot_ok<Slot>(p.slot_mapping[l], t, p, slot);
        off = paged_offset(slot, p) + h * p.head_stride + e0;
      }
    }
    if (write_l) {
      Cache* kbase;
      Cache* vbase;
      if constexpr (POOL) {
        kbase = static_cast<Cache*>(p.k_pool[l]);
        vbase = static_cast<Cache*>(p.v_pool[l]);
      } else {
        off = ((long long)l * p.num_tokens + t) * KV + h * D + e0;
        kbase = static_cast<Cache*>(p.k_out);
        vbase = static_cast<Cache*>(p.v_out);
      }
      // FP8: device scales (graph-safe: a captured launch reads the current values) win.
      float ks = 1.f, vs = 1.f;
      if constexpr (FP8) {
        ks = p.k_scale_ptr ? p.k_scale_ptr[l] : p.k_scale[l];
        vs = p.v_scale_ptr ? p.v_scale_ptr[l] : p.v_scale[l];
      }
#pragma unroll
      for (int c = 0; c < LOADS; ++c) {
        Vec<Cache, VEC> ko, vo;
        if constexpr (FP8) {
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            float v = to_float(vv[c].v[i]);
            if constexpr (BIAS) v += vb[c * VEC + i];
            ko.v[i] = from_bits<Cache>(float_to_bits(k[c * VEC + i] / ks, (Cache*)0));
            vo.v[i] = from_bits<Cache>(float_to_bits(v / vs, (Cache*)0));
          }
        } else {
          static_assert(SameType<Cache, Act>::value, "a non-FP8 cache has the activation dtype");
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            ko.v[i] = from_bits<Cache>(float_to_bits(k[c * VEC + i], (Cache*)0));
            if constexpr (BIAS)
              vo.v[i] = from_bits<Cache>(float_to_bits(to_float(vv[c].v[i]) + vb[c * VEC + i], (Cache*)0));
            else
              vo.v[i] = vv[c].v[i];  // V passthrough: bit-exact
          }
        }
        store_vec<Cache, VEC>(kbase + off + c * VEC, ko);
        store_vec<Cache, VEC>(vbase + off + c * VEC, vo);
      }
    }
  }
}

}  // namespace fkv_kernels
