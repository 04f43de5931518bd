// The weight-read probe of decode_bench and quant_bench: a kernel that reads a buffer once
// (grid-stride, 8 independent 16-byte loads in flight per thread) into a checksum, so that
// nothing but the reads costs time and the loads cannot be dropped: the weight-read floor.
#pragma once

#include <cuda.h>

#include <string>

#include "fkv/compiler.hpp"
#include "fkv/driver.hpp"

namespace fkv_bench {

inline constexpr const char* kProbe =
    R"(// decode_bench's weight-read probe: reads n16 16-byte words once
// (grid-stride, 8 independent loads in flight per thread) and folds them into a checksum, so
// that nothing but the reads costs time and the loads cannot be dropped.
struct alignas(16) U4 { unsigned x, y, z, w; };
__device__ __forceinline__ U4 ld(const U4* p) {
  U4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
extern "C" __global__ void __launch_bounds__(256)
fkv_read_probe(const U4* __restrict__ src, unsigned long long n16, unsigned long long* sum) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    U4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = ld(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += (unsigned long long)v[j].x + v[j].y + v[j].z + v[j].w;
  }
  for (; i < n16; i += stride) {
    const U4 v = ld(src + i);
    acc += (unsigned long long)v.x + v.y + v.z + v.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}
)";

// Compiles `source`, whose one extern "C" kernel is `kernel`, for `o` (NVRTC, no cache), loads
// it into `module` in `ctx` and returns the kernel. `name` names the source in NVRTC's log.
inline CUfunction load_probe_kernel(CUcontext ctx, const fkv::CompileOptions& o, const char* name,
                                    const char* kernel, const char* source, fkv::Module& module) {
  fkv::KernelSource src;
  src.template_name = std::string(name) + ".cu";
  src.short_name = name;
  src.name_expression = kernel;
  src.source = source;
  const fkv::CompiledKernel k = fkv::compile(src, o);
  module = fkv::Module(ctx, k.image);
  return module.function(k.lowered_name);
}

class Probe {
 public:
  Probe(CUcontext ctx, const fkv::CompileOptions& o)
      : fn_(load_probe_kernel(ctx, o, "decode_bench_probe", "fkv_read_probe", kProbe, module_)) {}
  void run(CUdeviceptr src, std::size_t bytes, CUdeviceptr sum, unsigned blocks, CUstream s) const {
    unsigned long long n16 = bytes / 16;
    void* args[] = {&src, &n16, &sum};
    FKV_CU(cuLaunchKernel, fn_, blocks, 1, 1, 256, 1, 1, 0, s, args, nullptr);
  }

 private:
  fkv::Module module_;
  CUfunction fn_ = nullptr;
};

}  // namespace fkv_bench
