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

// ---- to float -------------------------------------------------------------------------
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(u32(x.bits) << 16); }
__device__ __forceinline__ float to_float(fp16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float bits_to_float(u32 b, float*) { return __uint_as_float(b); }
__device__ __forceinline__ float bits_to_float(u32 b, bf16*) { return __uint_as_float(b << 16); }
__device__ __forceinline__ float bits_to_float(u32 b, fp16*) {
  float f;
  u16 h = (u16)b;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
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
// N elements of T in one aligned load/store (N * sizeof(T) is 2..16 bytes).
template <int BYTES> struct VecStorage;
template <> struct VecStorage<1> { typedef u8 type; };
template <> struct VecStorage<2> { typedef u16 type; };
template <> struct VecStorage<4> { typedef u32 type; };
template <> struct VecStorage<8> { typedef u64 type; };
struct alignas(16) U128 { u64 lo, hi; };
template <> struct VecStorage<16> { typedef U128 type; };

template <class T, int N>
struct alignas(N * sizeof(T)) Vec {
  T v[N];
};

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  typedef typename VecStorage<N * sizeof(T)>::type S;
  S s = *reinterpret_cast<const S*>(p);
  Vec<T, N> r;
  memcpy(&r, &s, sizeof(S));
  return r;
}

template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& r) {
  typedef typename VecStorage<N * sizeof(T)>::type S;
  S s;
  memcpy(&s, &r, sizeof(S));
  *reinterpret_cast<S*>(p) = s;
}

}  // namespace fkv_kernels
