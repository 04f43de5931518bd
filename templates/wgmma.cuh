// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only) as fused_proj_kv.cu uses it for 8-bit
// weights: A (64 rows of weights, converted to the activation dtype in registers) from
// registers, B (the tokens' x) from shared memory in the no-swizzle K-major layout, fp32
// accumulators. Per warp of the warpgroup, A's fragment and the accumulators are laid out as
// mma.sync.m16n8k16's (rows 16 * warp + g and + 8; accumulator 4 j + e is column 8 j + 2 tig +
// (e & 1) of row g + 8 (e >> 1)), so the kernel's partial stores serve both paths.
#pragma once

#include "fkv_types.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FKV_HAS_WGMMA 1
#else
#define FKV_HAS_WGMMA 0
#endif

namespace fkv_kernels {
namespace wgmma {

// A shared-memory matrix descriptor without swizzling: the start address, the leading byte
// offset (K-major: between the two 8 x 16-byte core matrices of a k16 step) and the stride byte
// offset (between groups of 8 rows), each in 16-byte units (PTX ISA, "Matrix Descriptor").
__device__ __forceinline__ unsigned long long descriptor(u32 smem_addr, u32 lbo, u32 sbo) {
  return (unsigned long long)((smem_addr & 0x3ffffu) >> 4) |
         ((unsigned long long)(lbo >> 4) << 16) | ((unsigned long long)(sbo >> 4) << 32);
}

// Orders this thread's register writes (A fragments, accumulators) before the wgmmas that read
// them.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Makes this thread's shared-memory writes (cp.async) visible to the async proxy wgmma reads
// through; then a CTA barrier.
__device__ __forceinline__ void fence_shared_for_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

#define FKV_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FKV_D8(i) FKV_D4(i), FKV_D4(i + 4)
#define FKV_D16(i) FKV_D8(i), FKV_D8(i + 8)
#define FKV_D32(i) FKV_D16(i), FKV_D16(i + 16)
// D[64 x N] += A[64 x 16] (registers a0..a3) * B[16 x N] (descriptor b), fp32 accumulators.
#define FKV_WGMMA(N, TY, DREGS, AREGS, B, DLIST)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n" #N \
               "k16.f32." TY "." TY " " DREGS ", " AREGS ", " B ", p, 1, 1, 0;\n}\n"          \
               : DLIST                                                                        \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b))

template <class Act, int N>
__device__ __forceinline__ void mma(float (&d)[N / 2], u32 a0, u32 a1, u32 a2, u32 a3,
                                    unsigned long long b) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64, "n: 8, 16, 32 or 64 tokens");
  if constexpr (N == 8) {
    if constexpr (SameType<Act, bf16>::value)
      FKV_WGMMA(8, "bf16", "{%0, %1, %2, %3}", "{%4, %5, %6, %7}", "%8", FKV_D4(0));
    else
      FKV_WGMMA(8, "f16", "{%0, %1, %2, %3}", "{%4, %5, %6, %7}", "%8", FKV_D4(0));
  } else if constexpr (N == 16) {
#define FKV_R16 "{%0, %1, %2, %3, %4, %5, %6, %7}"
    if constexpr (SameType<Act, bf16>::value)
      FKV_WGMMA(16, "bf16", FKV_R16, "{%8, %9, %10, %11}", "%12", FKV_D8(0));
    else
      FKV_WGMMA(16, "f16", FKV_R16, "{%8, %9, %10, %11}", "%12", FKV_D8(0));
#undef FKV_R16
  } else if constexpr (N == 32) {
#define FKV_R32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
    if constexpr (SameType<Act, bf16>::value)
      FKV_WGMMA(32, "bf16", FKV_R32, "{%16, %17, %18, %19}", "%20", FKV_D16(0));
    else
      FKV_WGMMA(32, "f16", FKV_R32, "{%16, %17, %18, %19}", "%20", FKV_D16(0));
#undef FKV_R32
  } else {
#define FKV_R64                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
    if constexpr (SameType<Act, bf16>::value)
      FKV_WGMMA(64, "bf16", FKV_R64, "{%32, %33, %34, %35}", "%36", FKV_D32(0));
    else
      FKV_WGMMA(64, "f16", FKV_R64, "{%32, %33, %34, %35}", "%36", FKV_D32(0));
#undef FKV_R64
  }
}
#undef FKV_WGMMA
#undef FKV_D32
#undef FKV_D16
#undef FKV_D8
#undef FKV_D4

}  // namespace wgmma
}  // namespace fkv_kernels
