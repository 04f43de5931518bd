// Storage types and conversions for the fused KV kernels.
//
// Compiled by NVRTC without any CUDA toolkit header (no cuda_bf16.h / cuda_fp8.h), so a
// serving machine needs only libnvrtc. Every conversion rounds to nearest even; FP8 saturates
// to the largest finite value (satfinite), as FP8 KV caches expect.
#pragma once

namespace fkv_kernels {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Storage types: plain bit containers, so loads and stores stay bit-exact.
struct bf16 { u16 bits; };
struct fp16 { u16 bits; };
struct fp8_e4m3 { u8 bits; };
struct fp8_e5m2 { u8 bits; };

template <class T> struct Bits;
template <> struct Bits<float> { typedef u32 type; };
template <> struct Bits<bf16> { typedef u16 type; };
template <> struct Bits<fp16> { typedef u16 type; };
template <> struct Bits<fp8_e4m3> { typedef u8 type; };
template <> struct Bits<fp8_e5m2> { typedef u8 type; };

template <class T> struct IsFp8 { static constexpr bool value = false; };
template <> struct IsFp8<fp8_e4m3> { static constexpr bool value = true; };
template <> struct IsFp8<fp8_e5m2> { static constexpr bool value = true; };

template <class A, class B> struct SameType { static constexpr bool value = false; };
template <class A> struct SameType<A, A> { static constexpr bool value = true; };
template <bool C, class A, class B> struct Conditional { using type = A; };
template <class A, class B> struct Conditional<false, A, B> { using type = B; };

// ---- to float -------------------------------------------------------------------------
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(u32(x.bits) << 16); }
__device__ __forceinline__ float to_float(fp16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

// ---- from float (round to nearest even) -------------------------------------------------
__device__ __forceinline__ u32 float_to_bits(float f, float*) { return __float_as_uint(f); }
__device__ __forceinline__ u32 float_to_bits(float f, bf16*) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ u32 float_to_bits(float f, fp16*) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// Software FP8 encode: round to nearest even, saturate to +-max_finite, NaN -> canonical NaN.
// EXP/MAN bits, BIAS; MAX_BITS = bit pattern (without sign) of the largest finite value.
template <int EXP, int MAN, int BIAS, u32 MAX_BITS, u32 NAN_BITS>
__device__ __forceinline__ u32 fp8_encode_sw(float f) {
  u32 x = __float_as_uint(f);
  u32 sign = (x >> 24) & 0x80u;
  u32 ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | NAN_BITS;
  // Value of the largest finite FP8 number as float bits, to saturate (also catches inf).
  const int max_exp = int(MAX_BITS >> MAN) - BIAS;
  const u32 max_float = u32(max_exp + 127) << 23 | ((MAX_BITS & ((1u << MAN) - 1)) << (23 - MAN));
  if (ax >= max_float) return sign | MAX_BITS;
  int e = int(ax >> 23) - 127;  // unbiased exponent of the float
  u32 mant = (ax & 0x7fffffu) | 0x800000u;
  int min_normal_exp = 1 - BIAS;
  int shift;                   // bits dropped from the 24-bit mantissa
  u32 exp_field;
  if (ax < 0x00800000u) return sign;  // float denormals are far below FP8's smallest subnormal
  if (e >= min_normal_exp) {
    shift = 23 - MAN;
    exp_field = u32(e + BIAS);
  } else {
    shift = 23 - MAN + (min_normal_exp - e);
    exp_field = 0;
    if (shift > 24) return sign;  // rounds to zero
  }
  u32 kept = mant >> shift;
  u32 rem = mant & ((1u << shift) - 1);
  u32 half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u))) kept += 1;
  // kept includes the implicit bit for normals; a carry out of the mantissa bumps the exponent.
  u32 result;
  if (exp_field == 0) {
    result = kept;  // subnormal (a carry into bit MAN makes it the smallest normal, correctly)
  } else {
    result = (exp_field << MAN) + (kept - (1u << MAN));
  }
  if (result > MAX_BITS) result = MAX_BITS;
  return sign | result;
}

__device__ __forceinline__ u32 float_to_bits(float f, fp8_e4m3*) {
#if __CUDA_ARCH__ >= 890
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  return r & 0xffu;
#else
  return fp8_encode_sw<4, 3, 7, 0x7eu, 0x7fu>(f);
#endif
}
__device__ __forceinline__ u32 float_to_bits(float f, fp8_e5m2*) {
#if __CUDA_ARCH__ >= 890
  u16 r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  return r & 0xffu;
#else
  return fp8_encode_sw<5, 2, 15, 0x7bu, 0x7fu>(f);
#endif
}

// ---- raw bits ------------------------------------------------------------------------------
__device__ __forceinline__ u32 raw_bits(float x) { return __float_as_uint(x); }
template <class T> __device__ __forceinline__ u32 raw_bits(T x) { return x.bits; }
template <class T> __device__ __forceinline__ T from_bits(u32 b) {
  T r;
  r.bits = (typename Bits<T>::type)b;
  return r;
}
template <> __device__ __forceinline__ float from_bits<float>(u32 b) { return __uint_as_float(b); }

// ---- vectors -------------------------------------------------------------------------------
// N elements of T moved by one load/store of N * sizeof(T) bytes (16 B = ld/st.global.v4.b32).
template <class T, int N>
struct Vec {
  T v[N];
};

template <int BYTES> struct Words { u32 w[BYTES >= 4 ? BYTES / 4 : 1]; };

template <int BYTES>
__device__ __forceinline__ Words<BYTES> load_words(const void* p) {
  Words<BYTES> r;
  if constexpr (BYTES == 16) {
    asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  } else if constexpr (BYTES == 8) {
    asm volatile("ld.global.v2.b32 {%0, %1}, [%2];" : "=r"(r.w[0]), "=r"(r.w[1]) : "l"(p));
  } else if constexpr (BYTES == 4) {
    r.w[0] = *static_cast<const u32*>(p);
  } else if constexpr (BYTES == 2) {
    r.w[0] = *static_cast<const u16*>(p);
  } else {
    r.w[0] = *static_cast<const u8*>(p);
  }
  return r;
}

template <int BYTES>
__device__ __forceinline__ void store_words(void* p, const Words<BYTES>& r) {
  if constexpr (BYTES == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]) : "memory");
  } else if constexpr (BYTES == 8) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" :: "l"(p), "r"(r.w[0]), "r"(r.w[1]) : "memory");
  } else if constexpr (BYTES == 4) {
    *static_cast<u32*>(p) = r.w[0];
  } else if constexpr (BYTES == 2) {
    *static_cast<u16*>(p) = (u16)r.w[0];
  } else {
    *static_cast<u8*>(p) = (u8)r.w[0];
  }
}

// The N elements of T packed in w (the inverse of store_vec's packing).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> unpack_vec(const Words<N * (int)sizeof(T)>& w) {
  constexpr int BITS = 8 * (int)sizeof(T);
  constexpr int PER_WORD = N * (int)sizeof(T) >= 4 ? 4 / (int)sizeof(T) : N;
  Vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const u32 word = w.w[i / PER_WORD];
    const int shift = (i % PER_WORD) * BITS;
    r.v[i] = from_bits<T>(BITS == 32 ? word : (word >> shift) & ((1u << (BITS & 31)) - 1u));
  }
  return r;
}

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return unpack_vec<T, N>(load_words<N * (int)sizeof(T)>(p));
}

// ---- cp.async (sm_80+): global -> shared memory without registers -------------------------
// The shared-window address of a generic pointer to shared memory.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  u64 a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (u32)a;
}
// BYTES (4, 8 or 16; 16 bypasses L1) from gmem to smem; in flight until cp_async_wait.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async moves 4, 8 or 16 bytes");
  const u32 s = smem_addr(smem);
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(gmem), "n"(BYTES) : "memory");
}
// Closes the group of the copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// N elements of T from shared memory at p (BYTES-aligned), e.g. what cp_async put there.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_shared(const void* p) {
  constexpr int BYTES = N * (int)sizeof(T);
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "a shared load of 4, 8 or 16 bytes");
  Words<BYTES> w;
  if constexpr (BYTES == 16) {
    const uint4 q = *static_cast<const uint4*>(p);
    w.w[0] = q.x; w.w[1] = q.y; w.w[2] = q.z; w.w[3] = q.w;
  } else if constexpr (BYTES == 8) {
    const uint2 q = *static_cast<const uint2*>(p);
    w.w[0] = q.x; w.w[1] = q.y;
  } else {
    w.w[0] = *static_cast<const u32*>(p);
  }
  return unpack_vec<T, N>(w);
}

template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& r) {
  constexpr int BYTES = N * (int)sizeof(T);
  constexpr int BITS = 8 * (int)sizeof(T);
  constexpr int PER_WORD = BYTES >= 4 ? 4 / (int)sizeof(T) : N;
  Words<BYTES> w;
#pragma unroll
  for (int i = 0; i < (BYTES >= 4 ? BYTES / 4 : 1); ++i) w.w[i] = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) w.w[i / PER_WORD] |= raw_bits(r.v[i]) << ((i % PER_WORD) * BITS % 32);
  store_words<BYTES>(p, w);
}

// ---- 8-bit weights -> activation pairs (quantized K/V weights: fused_proj_kv.cu and
// dequant_weights.cu) -----------------------------------------------------------------------
// Four e4m3 bytes -> two pairs of Act (lo: bytes 0, 1; hi: bytes 2, 3), exactly, then one
// multiply by 2^(Act bias - 7) rebases the exponent (subnormal e4m3 values become subnormal Act
// values first, which the half-precision FMA keeps).
//   bf16: one permute puts each byte in the low byte of its 16-bit half and its sign, replicated,
//   in the high byte; a shift by 4 moves exponent and mantissa under bf16's (bits 10..4) and the
//   sign copies to bit 15, and a mask clears the sign copies in between: four instructions per
//   pair (the permute, shift and logic op of the fp16 form below cost five).
//   fp16 (devices without the hardware conversion, fp8x4_to_f16): each byte goes into the high
//   byte of its half, exponent and mantissa shift down by 1 and the sign stays.
template <class Act>
__device__ __forceinline__ void fp8x4_to(u32 w, u32& lo, u32& hi) {
  u32 a, b;
  const u32 zero = 0x80008000u;  // -0: keeps the sign of zero
  if constexpr (SameType<Act, bf16>::value) {
    asm("prmt.b32 %0, %1, %2, 0x9180;" : "=r"(a) : "r"(w), "r"(0u));  // s1* b1 s0* b0
    asm("prmt.b32 %0, %1, %2, 0xB3A2;" : "=r"(b) : "r"(w), "r"(0u));  // s3* b3 s2* b2
    a = (a << 4) & 0x87f087f0u;
    b = (b << 4) & 0x87f087f0u;
    const u32 k = 0x7b807b80u;  // 2^120
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(k), "r"(zero));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(k), "r"(zero));
  } else {
    asm("prmt.b32 %0, %1, %2, 0x1404;" : "=r"(a) : "r"(w), "r"(0u));  // b1 0 b0 0
    asm("prmt.b32 %0, %1, %2, 0x3424;" : "=r"(b) : "r"(w), "r"(0u));  // b3 0 b2 0
    a = ((a >> 1) & 0x3f803f80u) | (a & 0x80008000u);
    b = ((b >> 1) & 0x3f803f80u) | (b & 0x80008000u);
    const u32 k = 0x5c005c00u;  // 2^8
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(k), "r"(zero));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(k), "r"(zero));
  }
}

// Four int8 bytes -> two pairs of Act, exactly: each byte (offset by 128) goes into the mantissa
// of 2^23, the float subtraction gives the signed value, and one cvt packs two.
template <class Act>
__device__ __forceinline__ void int8x4_to(u32 w, u32& lo, u32& hi) {
  const u32 u = w ^ 0x80808080u;
  const u32 magic = 0x4b000000u;
  u32 e0, e1, e2, e3;
  asm("prmt.b32 %0, %1, %2, 0x7540;" : "=r"(e0) : "r"(u), "r"(magic));
  asm("prmt.b32 %0, %1, %2, 0x7541;" : "=r"(e1) : "r"(u), "r"(magic));
  asm("prmt.b32 %0, %1, %2, 0x7542;" : "=r"(e2) : "r"(u), "r"(magic));
  asm("prmt.b32 %0, %1, %2, 0x7543;" : "=r"(e3) : "r"(u), "r"(magic));
  const float f0 = __uint_as_float(e0) - 8388736.0f, f1 = __uint_as_float(e1) - 8388736.0f;
  const float f2 = __uint_as_float(e2) - 8388736.0f, f3 = __uint_as_float(e3) - 8388736.0f;
  if constexpr (SameType<Act, bf16>::value) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(f1), "f"(f0));
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(f3), "f"(f2));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(f1), "f"(f0));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(f3), "f"(f2));
  }
}

// The fast forms for fp16 activations (fused_proj_kv.cu): four e4m3 bytes -> two fp16 pairs
// with the hardware's conversion (sm_89 and later; one instruction per pair, exact: every e4m3
// value is an fp16 value), the bit form above before sm_89.
__device__ __forceinline__ void fp8x4_to_f16(u32 w, u32& lo, u32& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  fp8x4_to<fp16>(w, lo, hi);
#endif
}

// Four int8 bytes -> two fp16 pairs, exactly: each byte offset by 128 becomes the low mantissa
// byte of 1024 (0x6400, where fp16's unit in the last place is 1), and one subtraction of
// 1152 per pair gives the signed values.
__device__ __forceinline__ void int8x4_to_f16(u32 w, u32& lo, u32& hi) {
  const u32 u = w ^ 0x80808080u;
  u32 a, b;
  asm("prmt.b32 %0, %1, %2, 0x4140;" : "=r"(a) : "r"(u), "r"(0x64646464u));
  asm("prmt.b32 %0, %1, %2, 0x4342;" : "=r"(b) : "r"(u), "r"(0x64646464u));
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(lo) : "r"(a), "r"(0x64806480u));
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(hi) : "r"(b), "r"(0x64806480u));
}

}  // namespace fkv_kernels
