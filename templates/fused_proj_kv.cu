// Decode-size fused KV materialization: the projection GEMM and the epilogue in one launch.
//
//   proj[t, n] = sum_k x[t, k] * W[n, k]        (W = packed W_kv [M = L*2*H*D, HIDDEN])
//   then per token t, layer l, KV head h, exactly as fused_kv.cu: K RMSNorm, RoPE, store rounded
//   once (FP8: divided by the layer's scale, saturated), stacked [L, T, H, D] or pool rows.
//   The projection never goes through memory in the activation dtype: norm and RoPE read the
//   fp32 sums, and V is rounded once from them.
// Bounds, in every build: a token whose position is outside [0, max_position) or whose slot is
//   >= num_slots is not written and error_flag gets FKV_ERROR_BAD_POSITION / _BAD_SLOT.
//
// Quantized weights (WQ: 1 = FP8 e4m3, 2 = INT8) are read as stored, one byte each: a thread's
// 16-byte load is 16 columns, converted exactly to the activation dtype in registers (every e4m3
// and int8 value is a bf16 and an fp16 value; to fp16 with the hardware's e4m3 conversion or a
// permute and a subtraction, to bf16 by moving the bits under bf16's and rebasing the exponent)
// and fed to four MMAs. Scales (WS): 1 = one per
// layer (a per-tensor scale), 2 = one per row, both multiplying the row's fp32 sum; 3 = 128 x 128
// blocks, each multiplying its block's fp32 partial sum (include/fkv/weights.hpp).
//
// For small T the GEMM is a weight stream: W (84 MB for the Qwen3-8B DFlash draft) is read once,
// everything else is small. The grid is (M / MT row tiles) x S k-splits, splits of one tile
// adjacent. A CTA of WARPS warps owns MT = WARPS * MW * 16 rows (whole heads) and a run of
// whole x stages of W's columns: split s of S takes stages [s * NST / S, (s + 1) * NST / S) of
// the NST = HIDDEN / KSL, so S need not divide them (3 splits of 16 stages: 5, 5, 6), which lets
// the grid match the SM count more closely:
//   - W goes global -> registers with 16-byte ld.global.nc (no L1 allocation), P chunks of 32
//     columns in flight per thread ahead of their use (a register ring, fully unrolled).
//   - x is staged in shared memory per K slice (KSL columns, every token of the bucket, padding
//     tokens zero-filled) by cp.async, double-buffered; or (XM = 1) every stage of the split at
//     once, each published by its own mbarrier, so the k-loop has no CTA barrier.
//   - XH = 1 (bf16 activations, 8-bit weights): x is re-encoded in shared memory, per token, as
//     fp16 times a power of two 2^k_t chosen from its largest finite element (which lands in
//     [2^15, 2^16)), so that the weights take fp16's cheaper conversions (one hardware
//     instruction per e4m3 pair, two per int8 pair) and the MMAs run in fp16. Resident x (XM = 1):
//     the whole split once it has landed, and the fp32 partial is multiplied by 2^-k_t before it
//     is stored. Staged x (XS): each stage as it lands (its tokens' warps, then a CTA barrier),
//     one k_t per token and stage; the stage's sums go to a second set of accumulators, folded
//     in times 2^-k_t at the stage's end (with block scales, at each block's end). Every
//     element whose binade is at most 32 below the largest one's is exact, so the products, and
//     the sums, are those of bf16 (rounding does not see a power of two); smaller ones round to
//     fp16's subnormals (an error of at most 2^-40 of the largest). A token whose largest
//     element is below 2^-111 takes k_t = 126 (every bf16 value exact); infinities and NaNs are
//     not counted and stay what they are.
//   - mma.sync.m16n8k16 (bf16/fp16 in, fp32 accumulate): W is the M operand, tokens the N
//     operand (TB / 8 n-tiles). Because the sum over k is order-free, a thread's 16-byte W vector
//     (row g, 8 consecutive columns) and its 16-byte x vector (token g, the same 8 columns) are
//     used as two k16 fragments under one shared permutation of k: no shuffles, no ldmatrix.
//   - Each CTA stores its fp32 partial [T, MT] to workspace[split] and bumps its tile's arrival
//     counter with one acquire-release atomic (no full fence). The last of the S CTAs of a tile
//     sums the S partials in split order (the result does not depend on arrival order), resets
//     the counter for the next launch, and runs the epilogue for the tile's heads from shared
//     memory, a few (head, token) items per warp.
#include "fkv_types.cuh"
#include "decode_params.h"  // include/fkv/decode_params.h, embedded by its file name

namespace fkv_kernels {
namespace decode_detail {

struct alignas(16) U32x4 {
  u32 x, y, z, w;
};
struct alignas(16) F32x4 {
  float x, y, z, w;
};

// A weight vector: read once, so it bypasses L1; the 256-byte L2 prefetch hint covers the next
// chunks of the same row. volatile keeps the loads where the pipeline puts them.
__device__ __forceinline__ void load_stream(U32x4& r, const void* p) {
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
}

// 16 bytes global -> shared, asynchronously; src_bytes = 0 writes zeros (padding tokens).
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// Waits until the mbarrier at `bar` completes its first phase. sm_90's try_wait may suspend
// the warp until then; sm_80 has only test_wait, polled.
__device__ __forceinline__ void wait_phase0(u32 bar) {
  u32 done = 0;
  while (!done)
    asm volatile(
#if __CUDA_ARCH__ >= 900
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
#else
        "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
#endif
        : "=r"(done)
        : "r"(bar)
        : "memory");
}

// Split partials written by other CTAs: read from L2 (never a stale L1 line).
__device__ __forceinline__ F32x4 load_partial(const float* p) {
  F32x4 r;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "l"(p));
  return r;
}

// A tile's arrival counter: one atomic add, releasing this CTA's partials (written before the
// CTA barrier that precedes it) and acquiring those of the CTAs that arrived before, at GPU
// scope. Lighter than a full fence (membar.gl) before and after a relaxed atomic.
__device__ __forceinline__ unsigned arrive_acq_rel(unsigned* counter) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}

// D[16x8] += A[16x16] * B[16x8], fp32 accumulators.
template <class Act>
__device__ __forceinline__ void mma16816(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  if constexpr (SameType<Act, bf16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// The part of a thread's 16-byte weight vector that x vector `xv` of its chunk multiplies, as 4
// registers of MMA operand pairs: for 8-bit weights words 2 * xv and 2 * xv + 1 (8 columns)
// converted exactly to Act pairs, for dense ones (one x vector) the 4 loaded registers. Converted
// one x vector at a time, right before their MMAs, so that only 4 converted registers per row
// are live at once (the MMAs run in the same order as with all 8 converted first).
template <class Act, int WQ>
__device__ __forceinline__ void weight_pairs(const U32x4& v, int xv, u32 (&r)[4]) {
  if constexpr (WQ == 0) {
    r[0] = v.x;
    r[1] = v.y;
    r[2] = v.z;
    r[3] = v.w;
    return;
  }
  const u32 w0 = xv == 0 ? v.x : v.z, w1 = xv == 0 ? v.y : v.w;
  if constexpr (WQ == 1 && SameType<Act, fp16>::value) {
    fp8x4_to_f16(w0, r[0], r[1]);
    fp8x4_to_f16(w1, r[2], r[3]);
  } else if constexpr (WQ == 2 && SameType<Act, fp16>::value) {
    int8x4_to_f16(w0, r[0], r[1]);
    int8x4_to_f16(w1, r[2], r[3]);
  } else if constexpr (WQ == 1) {
    fp8x4_to<Act>(w0, r[0], r[1]);
    fp8x4_to<Act>(w1, r[2], r[3]);
  } else {
    int8x4_to<Act>(w0, r[0], r[1]);
    int8x4_to<Act>(w1, r[2], r[3]);
  }
}

// bf16 pair `w` times 2^k (`up`), rounded to an fp16 pair. mul.rn and cvt.rn in PTX keep
// subnormals whatever --ftz the kernel is compiled with.
__device__ __forceinline__ u32 bf16x2_scaled_to_f16(u32 w, float up) {
  float lo = __uint_as_float(w << 16), hi = __uint_as_float(w & 0xffff0000u);
  asm("mul.rn.f32 %0, %0, %1;" : "+f"(lo) : "f"(up));
  asm("mul.rn.f32 %0, %0, %1;" : "+f"(hi) : "f"(up));
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The larger of `m` and the magnitudes (bf16 bits without the sign) of the finite halves of `w`.
__device__ __forceinline__ u32 finite_abs_max(u32 m, u32 w) {
  const u32 lo = w & 0x7fffu, hi = (w >> 16) & 0x7fffu;
  if (lo < 0x7f80u) m = max(m, lo);
  if (hi < 0x7f80u) m = max(m, hi);
  return m;
}

// Every split of NST stages of KSL columns into S starts at a multiple of 128 columns.
constexpr bool whole_blocks(int nst, int s, int ksl) {
  for (int i = 0; i <= s; ++i)
    if ((i * nst / s) * ksl % 128 != 0) return false;
  return true;
}

template <class Cache>
__device__ __forceinline__ Cache encode(float v, float scale) {
  if constexpr (IsFp8<Cache>::value) v = v / scale;
  return from_bits<Cache>(float_to_bits(v, (Cache*)0));
}

}  // namespace decode_detail

// HIDDEN: columns of W and x. L, H, D, R, NEOX, K_NORM, Act, Cache, CosSin, Pos, Slot, POOL: as
// in fused_kv.cu. TB: token bucket (a multiple of 8, >= num_tokens). S: k-splits. WARPS, MW:
// warps per CTA and 16-row MMA tiles per warp. P: 32-column chunks of W in flight per thread.
// KSL: columns of x per shared-memory stage. WQ, WS: weight storage and scales (above); P then
// counts chunks of 64 columns (16 bytes of each row per thread, as for dense weights). XM: 1 keeps
// every x stage of the split resident (below); XH: 1 re-encodes it as scaled fp16 (above, bf16
// activations and 8-bit weights with XM = 1). Dynamic shared memory: DecodeSpec::shared_bytes()
// on the host = max(XB * TB * XROW, 4 * TB * MT) bytes (XB below).
template <int HIDDEN, int L, int H, int D, int R, bool NEOX, int K_NORM, class Act, class Cache,
          class CosSin, class Pos, class Slot, bool POOL, int TB, int S, int WARPS, int MW, int P,
          int KSL, int WQ, int WS, int XM, int XH>
// More than 8 warps: one CTA per SM is asked for explicitly (without it ptxas for sm_80 kept
// 16-warp CTAs at 64 registers and spilled); up to 8, ptxas' own choice (two CTAs per SM at
// 8 tokens and below; with XH, two asked for: left alone, ptxas kept 64 registers and spilled).
__global__ void __launch_bounds__(WARPS * 32, WARPS > 8 ? 1 : XH ? 2 : 0) fused_proj_kv(const FkvDecodeParams p) {
  using namespace decode_detail;
  constexpr int THREADS = WARPS * 32;
  constexpr int KV = H * D;
  constexpr int M = L * 2 * KV;      // rows of W
  constexpr int MT = WARPS * MW * 16;  // rows per CTA tile
  constexpr int UPC = MT / D;         // heads (K or V) per tile
  constexpr int NST = HIDDEN / KSL;   // x stages of a row
  constexpr int SMIN = NST / S, SMAX = (NST + S - 1) / S;  // stages per split
  constexpr int CW = WQ ? 64 : 32;    // columns per chunk: 16 bytes of a row per thread x 4
  constexpr int XV = CW / 32;         // 16-byte x vectors per thread and chunk
  constexpr int CPS = KSL / CW;       // chunks per x stage
  constexpr int NT = TB / 8;          // MMA n-tiles
  // Bytes per token row of a stage, padded so that the 16-byte x loads of 8 lanes (g = 0, 1;
  // tig = 0..3) hit 8 distinct 16-byte bank groups: dense weights read 16 bytes at tig * 16, so
  // the row pad is 64 mod 128; 8-bit ones 32 at tig * 32, so it is 16 mod 32 (with 64, rows g
  // and g + 1 would share every group: two-way conflicts on each load).
  constexpr int XROW = 2 * KSL + (WQ ? 16 : 64);
  constexpr int XBUF = TB * XROW;
  // x buffers: two, double-buffered; XM = 1: every x stage of the split resident at once (SMAX
  // buffers), each published by its own mbarrier, which the copies of all threads arrive on as
  // they land: no CTA barrier in the k-loop, so the warps drift apart and one's MMAs overlap
  // another's waits.
  constexpr int XB = XM ? SMAX : 2;
  constexpr int HALF = R / 2;
  static_assert(SameType<Act, bf16>::value || SameType<Act, fp16>::value, "bf16 or fp16 activations");
  static_assert(IsFp8<Cache>::value || SameType<Cache, Act>::value, "cache: the activation dtype or fp8");
  static_assert(MT % D == 0 && D % 2 == 0, "a CTA tile covers whole heads");
  static_assert(M % MT == 0, "whole tiles");
  static_assert(HIDDEN % KSL == 0 && KSL % CW == 0 && SMIN >= 1 && (SMIN * CPS) % P == 0 &&
                    (SMAX * CPS) % P == 0 && SMIN * CPS >= P,
                "stage and pipeline sizes divide every split's columns");
  static_assert(WQ >= 0 && WQ <= 2 && WS >= 0 && WS <= 3 && (WQ == 0) == (WS == 0),
                "quantized weights come with scales, dense ones without");
  static_assert(WS != 3 || decode_detail::whole_blocks(NST, S, KSL),
                "block scales: whole 128-column blocks per split");
  constexpr int CPB = 128 / CW;  // chunks per 128-column scale block
  static_assert(TB % 8 == 0 && TB >= 8, "token bucket: a multiple of 8");
  static_assert(XM == 0 || XM == 1, "x stages: double-buffered or resident");
  static_assert(XH == 0 || (XH == 1 && WQ != 0 && SameType<Act, bf16>::value),
                "fp16 x: bf16 activations, 8-bit weights");
  // Staged fp16 x: one power of two per token and stage, so each stage's sums go through a
  // second set of accumulators (as block scales' do) and are folded in with it.
  constexpr bool XS = XH == 1 && XM == 0;
  static_assert(!XS || WS != 3 || KSL % 128 == 0, "staged fp16 x: whole scale blocks per stage");
  // The MMAs' input type: fp16 when x is re-encoded.
  using MAct = typename Conditional<XH == 1, fp16, Act>::type;
  static_assert(L >= 1 && L <= FKV_DECODE_MAX_LAYERS, "layers per launch");
  static_assert(R % 2 == 0 && R <= D, "rotary_dim must be even and <= head_dim");

  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_last;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tig = lane & 3;  // MMA fragment coordinates
  const int tile = blockIdx.x / S, split = blockIdx.x % S;
  const int m0 = tile * MT;
  const int st0 = split * NST / S;  // this split's first x stage
  // and its stage count: a constant when S divides the stages (the loops below then have
  // compile-time trip counts, as the compiler unrolls and schedules them best)
  const int nsl = NST % S == 0 ? SMIN : (split + 1) * NST / S - st0;
  const int ch = nsl * CPS;  // its chunks, a multiple of P
  const int k0 = st0 * KSL;
  const int T = (int)p.num_tokens;
  const u32 xs = smem_addr(smem);

  // ---- x stage `sl` of this split -> buffer sl % XB (issued; the caller commits) ----
  const Act* x = static_cast<const Act*>(p.x);
  auto stage = [&](int sl) {
    constexpr int VPR = KSL / 8;  // 16-byte vectors per token row
    const u32 dst = xs + (u32)((sl % XB) * XBUF);
#pragma unroll 4
    for (int i = tid; i < TB * VPR; i += THREADS) {
      const int t = i / VPR, q = i - t * VPR;
      const bool valid = t < T;
      const Act* src = x + (valid ? (long long)t * p.x_stride + k0 + sl * KSL + q * 8 : 0);
      cp_async16(dst + (u32)(t * XROW + q * 16), src, valid ? 16 : 0);
    }
  };
  __shared__ __align__(8) unsigned long long s_xbar[XM ? SMAX : 1];
  if constexpr (XH == 1 && !XS) {  // every stage at once, one group: re-encoded once all have landed
    for (int sl = 0; sl < nsl; ++sl) stage(sl);
    cp_async_commit();
  } else if constexpr (XM == 1) {
    if (tid == 0)
      for (int i = 0; i < nsl; ++i)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(&s_xbar[i])), "r"(THREADS)
                     : "memory");
    __syncthreads();  // initialized before any copy arrives on them
    for (int sl = 0; sl < nsl; ++sl) {
      stage(sl);
      // Arrives on stage sl's barrier once this thread's copies so far have landed (noinc: the
      // barrier's count of THREADS already counts these arrivals).
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(&s_xbar[sl]))
                   : "memory");
    }
  } else {
    stage(0);
    cp_async_commit();
  }

  // ---- the launch's positions and slots -> shared memory, checked, while W streams ----
  // Bounds, as in fused_kv.cu: a token whose position is outside [0, max_position) or whose
  // slot is >= num_slots is not written (its bit goes to error_flag, from the tile's last CTA);
  // a negative slot is skipped silently. A skipped token reads row 0 of cos/sin, never out of
  // bounds. Every CTA reads them (a few bytes per token), so the epilogue's only dependent
  // global loads are cos/sin and the K norm weights, issued together.
  __shared__ long long s_pos[TB], s_slot[TB];
  __shared__ bool s_write[TB];
  __shared__ unsigned s_error[TB];
  if (tid < T) {
    bool write = true;
    unsigned error = 0;
    if constexpr (R > 0) {
      long long pos = (long long)static_cast<const Pos*>(p.positions)[tid];
      if ((unsigned long long)pos >= (unsigned long long)p.max_position) {  // negative too
        error |= FKV_ERROR_BAD_POSITION;
        write = false;
        pos = 0;
      }
      s_pos[tid] = pos;
    }
    if constexpr (POOL) {
      const long long slot = (long long)static_cast<const Slot*>(p.cache_loc)[tid];
      if (slot >= p.num_slots) {
        error |= FKV_ERROR_BAD_SLOT;
        write = false;
      }
      write = write && slot >= 0;
      s_slot[tid] = slot;
    }
    s_write[tid] = write;
    s_error[tid] = error;
  }

  // ---- W: rows (m0 + (warp*MW + mi)*16 + g) and (+8), bytes 16*tig.. of each 64-byte chunk
  // (columns k0 + c*CW + tig*CW/4) ----
  constexpr long long WROW = (long long)HIDDEN * (WQ ? 1 : 2);  // bytes per row of W
  const unsigned char* wbase = static_cast<const unsigned char*>(p.w) +
                               (long long)(m0 + warp * MW * 16 + g) * WROW + (long long)k0 * (WQ ? 1 : 2) + tig * 16;
  U32x4 wr[P][MW][2];
#pragma unroll
  for (int c = 0; c < P; ++c)
#pragma unroll
    for (int mi = 0; mi < MW; ++mi)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
        load_stream(wr[c][mi][hf], wbase + (long long)(mi * 16 + hf * 8) * WROW + c * 64);

  float acc[MW][NT][4];
  // Block scales: the partial sum of the current 128-column block, folded into acc with its
  // scale at the block's end. Dense and per-row/per-layer weights accumulate into acc directly.
  constexpr bool FOLD = WS == 3 || XS;
  constexpr int NB = FOLD ? MW : 1;
  float blk[NB][FOLD ? NT : 1][4];
#pragma unroll
  for (int mi = 0; mi < MW; ++mi)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][j][e] = 0.f;
  if constexpr (FOLD) {
#pragma unroll
    for (int mi = 0; mi < NB; ++mi)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) blk[mi][j][e] = 0.f;
  }

  // ---- XH: x -> fp16 times 2^k_t per token (the file comment) ----
  // x stages [sl0, sl0 + n) of the buffers, in place, a warp per token (padding tokens stay
  // zeros); down[t] = 2^-k_t. Resident x: the whole split at once, before the k-loop, while W
  // streams; staged x (XS): each stage as it lands, down per buffer.
  __shared__ float s_down[XH ? (XS ? 2 : 1) * TB : 1];
  auto encode_x = [&](int sl0, int n, float* down) {
    constexpr int VPR = KSL / 8;  // 16-byte vectors per token row and stage
    for (int t = warp; t < T; t += WARPS) {
      auto vec = [&](int i) {
        const int sl = sl0 + i / VPR;
        return reinterpret_cast<U32x4*>(smem + sl * XBUF + t * XROW + (i % VPR) * 16);
      };
      u32 m = 0;
      for (int i = lane; i < n * VPR; i += 32) {
        const U32x4 v = *vec(i);
        m = finite_abs_max(finite_abs_max(finite_abs_max(finite_abs_max(m, v.x), v.y), v.z), v.w);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
      // The largest element's biased exponent e: it times 2^(142 - e) is in [2^15, 2^16);
      // at most 2^126, so that 2^-k is a normal float (e < 16: every element is exact anyway).
      const int k = min(142 - (int)(m >> 7), 126);
      const float up = __uint_as_float((u32)(127 + k) << 23);
      if (lane == 0) down[t] = __uint_as_float((u32)(127 - k) << 23);
      for (int i = lane; i < n * VPR; i += 32) {
        U32x4* q = vec(i);
        const U32x4 v = *q;
        *q = U32x4{bf16x2_scaled_to_f16(v.x, up), bf16x2_scaled_to_f16(v.y, up),
                   bf16x2_scaled_to_f16(v.z, up), bf16x2_scaled_to_f16(v.w, up)};
      }
    }
  };
  // 2^-k_t of tokens t and t + 1 from `down`, 0 past T (their sums are never stored).
  auto downs = [&](const float* down, int t, float& d0, float& d1) {
    d0 = t < T ? down[t] : 0.f;
    d1 = t + 1 < T ? down[t + 1] : 0.f;
  };
  if constexpr (XH == 1 && !XS) {
    cp_async_wait<0>();
    __syncthreads();
    encode_x(0, nsl, s_down);
    __syncthreads();
  }

  for (int c0 = 0; c0 < ch; c0 += P) {
#pragma unroll
    for (int pp = 0; pp < P; ++pp) {
      const int c = c0 + pp;
      if constexpr (XH == 1 && !XS) {
        // re-encoded before the loop
      } else if constexpr (XM == 1) {
        if (c % CPS == 0) wait_phase0(smem_addr(&s_xbar[c / CPS]));  // x stage c / CPS
      } else {
        if (c % CPS == 0) {  // a new x stage: wait for it, then start the next one
          cp_async_wait<0>();
          __syncthreads();  // the stage is visible, and nobody still reads the buffer refilled next
          if (c / CPS + 1 < nsl) {
            stage(c / CPS + 1);
            cp_async_commit();
          }
          if constexpr (XS) {  // re-encoded by its tokens' warps before anyone reads it
            const int b = (c / CPS) % XB;
            encode_x(b, 1, s_down + b * TB);
            __syncthreads();
          }
        }
      }
      // The thread's x columns match its weight columns: 8 (dense) or 16 (8-bit) of the chunk.
      const unsigned char* xrow =
          smem + ((c / CPS) % XB) * XBUF + g * XROW + (c % CPS) * (2 * CW) + tig * (16 * XV);
#pragma unroll
      for (int xv = 0; xv < XV; ++xv) {
        u32 ra[MW][4], rb[MW][4];  // rows g and g + 8 as Act pairs, the columns of x vector xv
#pragma unroll
        for (int mi = 0; mi < MW; ++mi) {
          weight_pairs<MAct, WQ>(wr[pp][mi][0], xv, ra[mi]);
          weight_pairs<MAct, WQ>(wr[pp][mi][1], xv, rb[mi]);
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const U32x4 b = *reinterpret_cast<const U32x4*>(xrow + j * 8 * XROW + xv * 16);
#pragma unroll
          for (int mi = 0; mi < MW; ++mi) {
            auto mma2 = [&](float (&d)[4]) {
              mma16816<MAct>(d, ra[mi][0], rb[mi][0], ra[mi][1], rb[mi][1], b.x, b.y);
              mma16816<MAct>(d, ra[mi][2], rb[mi][2], ra[mi][3], rb[mi][3], b.z, b.w);
            };
            if constexpr (FOLD)
              mma2(blk[mi % NB][j % NT]);
            else
              mma2(acc[mi][j]);
          }
        }
      }
      if constexpr (WS == 3) {
        if ((c + 1) % CPB == 0) {  // the end of a 128-column block: fold it in with its scale
          const int kb = (k0 + c * CW) / 128;
#pragma unroll
          for (int mi = 0; mi < MW; ++mi) {
            const int rblock = (m0 + (warp * MW + mi) * 16) / 128;
            const float sc = p.w_scale[(long long)rblock * p.w_scale_cols + kb];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              float s0 = sc, s1 = sc;  // XS: times the stage's 2^-k_t (a block is in one stage)
              if constexpr (XS) {
                float d0, d1;
                downs(s_down + ((c / CPS) % XB) * TB, j * 8 + tig * 2, d0, d1);
                s0 *= d0;
                s1 *= d1;
              }
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                acc[mi][j][e] += (e % 2 ? s1 : s0) * blk[mi % NB][j % NT][e];
                blk[mi % NB][j % NT][e] = 0.f;
              }
            }
          }
        }
      } else if constexpr (XS) {
        if ((c + 1) % CPS == 0) {  // the end of an x stage: fold it in with its 2^-k_t
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            float d0, d1;
            downs(s_down + ((c / CPS) % XB) * TB, j * 8 + tig * 2, d0, d1);
#pragma unroll
            for (int mi = 0; mi < MW; ++mi)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                acc[mi][j][e] += (e % 2 ? d1 : d0) * blk[mi][j][e];
                blk[mi][j][e] = 0.f;
              }
          }
        }
      }
      if (c + P < ch) {
#pragma unroll
        for (int mi = 0; mi < MW; ++mi)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            load_stream(wr[pp][mi][hf], wbase + (long long)(mi * 16 + hf * 8) * WROW + (long long)(c + P) * 64);
      }
    }
  }

  // ---- partial [T, MT] of this split -> workspace[split] (resident XH: times 2^-k_t) ----
  {
    float* ws = p.workspace + (long long)split * TB * M;
    if constexpr (XH == 1 && !XS) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float d0, d1;
        downs(s_down, j * 8 + tig * 2, d0, d1);
#pragma unroll
        for (int mi = 0; mi < MW; ++mi)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            asm("mul.rn.f32 %0, %0, %1;" : "+f"(acc[mi][j][e]) : "f"(e % 2 ? d1 : d0));
      }
    }
#pragma unroll
    for (int mi = 0; mi < MW; ++mi) {
      const int row = m0 + (warp * MW + mi) * 16 + g;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int t = j * 8 + tig * 2;
        if (t < T) {
          ws[(long long)t * M + row] = acc[mi][j][0];
          ws[(long long)t * M + row + 8] = acc[mi][j][2];
        }
        if (t + 1 < T) {
          ws[(long long)(t + 1) * M + row] = acc[mi][j][1];
          ws[(long long)(t + 1) * M + row + 8] = acc[mi][j][3];
        }
      }
    }
  }
  __syncthreads();  // the CTA's partials are written before thread 0's release below
  if (tid == 0) s_last = arrive_acq_rel(p.counters + tile) == (unsigned)(S - 1);
  __syncthreads();  // ... and the other splits' partials are visible to every thread after it
  if (!s_last) return;

  // ---- last CTA of the tile ----
  if (tid < T && s_error[tid] && p.error_flag) atomicOr(p.error_flag, s_error[tid]);
  // Sum the S partials in split order into shared [T][MT].
  float* tp = reinterpret_cast<float*>(smem);
#pragma unroll 4
  for (int i = tid; i < T * (MT / 4); i += THREADS) {
    const int t = i / (MT / 4), q = i - t * (MT / 4);
    F32x4 sum = load_partial(p.workspace + (long long)t * M + m0 + q * 4);
#pragma unroll
    for (int s = 1; s < S; ++s) {
      const F32x4 v = load_partial(p.workspace + ((long long)s * TB + t) * M + m0 + q * 4);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    if constexpr (WS == 1 || WS == 2) {  // a per-layer or per-row scale multiplies the row's sum
      const int r0 = m0 + q * 4;
      if constexpr (WS == 1) {
        const float sc = p.w_scale[r0 / (2 * KV)];  // 4 rows never cross a layer (KV % 4 == 0)
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
  if (tid == 0) p.counters[tile] = 0u;  // ready for the next launch (stream order)
  __syncthreads();

  // ---- epilogue: a warp takes IPW (head, token) items at a time, their latency chains
  // (cos/sin loads, norm reductions) interleaved; lane owns element pairs e = 2*lane + 64*i ----
  constexpr int PAIRS = (D + 63) / 64;
  constexpr int NV = 2 * PAIRS;  // elements per lane and item
  constexpr int PER_WARP = (UPC * TB + WARPS - 1) / WARPS;
  // 4 items at a time; 2 in CTAs of more than 256 threads, whose 128 registers per thread the
  // 4-item arrays would exceed.
  constexpr int IPW_MAX = THREADS > 256 ? 2 : 4;
  constexpr int IPW = PER_WARP < IPW_MAX ? PER_WARP : IPW_MAX;
  constexpr unsigned FULL = 0xffffffffu;
  const int items = UPC * T;
  for (int base = warp * IPW; base < items; base += WARPS * IPW) {
    // cos/sin and the K norm weights are loaded together, up front: one global round trip.
    float v[IPW][NV], cs_c[IPW][NV], cs_s[IPW][NV], nw[IPW][K_NORM == 1 ? NV : 1], eps[IPW];
    float* row[IPW];
    int layer[IPW], head[IPW], tok[IPW];
    bool valid[IPW], is_v[IPW];
#pragma unroll
    for (int ii = 0; ii < IPW; ++ii) {
      valid[ii] = base + ii < items;
      const int item = valid[ii] ? base + ii : items - 1;  // a real row; never stored
      const int t = item / UPC, u = item - t * UPC;
      const int unit = m0 / D + u;  // head index over the packed rows
      const int l = unit / (2 * H);
      const int r = unit - l * 2 * H;
      is_v[ii] = r >= H;  // warp-uniform
      layer[ii] = l;
      head[ii] = is_v[ii] ? r - H : r;
      tok[ii] = t;
      row[ii] = tp + t * MT + u * D;
      eps[ii] = K_NORM == 1 && !is_v[ii] ? p.eps[l] : 0.f;
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        const int e = 2 * lane + 64 * (i / 2) + (i & 1);
        v[ii][i] = e < D ? row[ii][e] : 0.f;
        cs_c[ii][i] = 1.f;
        cs_s[ii][i] = 0.f;
        if constexpr (K_NORM == 1) nw[ii][i] = !is_v[ii] && e < D ? p.k_norm_weight[(long long)l * D + e] : 1.f;
        if (R > 0 && !is_v[ii] && e < R) {
          const CosSin* cs = static_cast<const CosSin*>(p.cos_sin) + s_pos[t] * p.cos_sin_stride;
          const int idx = NEOX ? (e < HALF ? e : e - HALF) : (e >> 1);
          cs_c[ii][i] = to_float(cs[idx]);
          cs_s[ii][i] = to_float(cs[HALF + idx]);
        }
      }
    }

    if constexpr (K_NORM == 1) {  // rms
      float ss[IPW];
#pragma unroll
      for (int ii = 0; ii < IPW; ++ii) {
        ss[ii] = 0.f;
#pragma unroll
        for (int i = 0; i < NV; ++i) ss[ii] += v[ii][i] * v[ii][i];
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int ii = 0; ii < IPW; ++ii) ss[ii] += __shfl_xor_sync(FULL, ss[ii], o);
#pragma unroll
      for (int ii = 0; ii < IPW; ++ii) {
        if (is_v[ii]) continue;
        const float inv = rsqrtf(ss[ii] * (1.0f / D) + eps[ii]);
#pragma unroll
        for (int i = 0; i < NV; ++i) v[ii][i] = v[ii][i] * inv * nw[ii][i];
      }
    }

    if constexpr (R > 0) {
      // Partners through shared memory: each normed K head goes back to its row first.
#pragma unroll
      for (int ii = 0; ii < IPW; ++ii) {
        if (is_v[ii] || !valid[ii]) continue;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
          const int e = 2 * lane + 64 * (i / 2) + (i & 1);
          if (e < D) row[ii][e] = v[ii][i];
        }
      }
      __syncwarp();
#pragma unroll
      for (int ii = 0; ii < IPW; ++ii) {
        if (is_v[ii] || !valid[ii]) continue;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
          const int e = 2 * lane + 64 * (i / 2) + (i & 1);
          if (e < R) {
            const bool first = NEOX ? e < HALF : (e & 1) == 0;
            const float partner = NEOX ? row[ii][first ? e + HALF : e - HALF] : row[ii][e ^ 1];
            v[ii][i] = first ? v[ii][i] * cs_c[ii][i] - partner * cs_s[ii][i]
                             : v[ii][i] * cs_c[ii][i] + partner * cs_s[ii][i];
          }
        }
      }
    }

#pragma unroll
    for (int ii = 0; ii < IPW; ++ii) {
      if (!valid[ii] || !s_write[tok[ii]]) continue;
      const int l = layer[ii], h = head[ii], t = tok[ii];
      Cache* out;
      long long off;
      if constexpr (POOL) {
        const long long slot = s_slot[t];
        out = static_cast<Cache*>(is_v[ii] ? p.v_pool[l] : p.k_pool[l]);
        off = slot * p.slot_stride + h * D;
      } else {
        out = static_cast<Cache*>(is_v[ii] ? p.v_out : p.k_out);
        off = (long long)l * p.out_layer_stride + ((long long)t * H + h) * D;
      }
      const float scale = is_v[ii] ? p.v_scale[l] : p.k_scale[l];
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        const int e = 2 * lane + 64 * (i / 2) + (i & 1);
        if (e < D) out[off + e] = encode<Cache>(v[ii][i], scale);
      }
    }
  }
}

}  // namespace fkv_kernels
