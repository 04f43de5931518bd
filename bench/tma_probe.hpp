// The TMA weight-read probe of quant_bench (sm_90 and newer): a weight buffer (8-bit or bf16,
// read as bytes) read once by TMA copies into shared memory, nothing else. One CTA per SM owns
// an even share of the rows; one thread copies its boxes (ceil(rows / CTAs), to 8, rows x 128
// bytes per 128-byte column block, left to right; `kb` column blocks per copy) into a ring of
// `stages` stages behind full and empty mbarriers; another takes one word of each stage into a
// checksum and hands the stage back. kb = 1 is a 2-D map (one column block per box); kb > 1 a
// 3-D map [column blocks][rows][128 bytes], kb blocks per box, which
// bench/experiments/stream_probe.cu measured 2-3% faster still (tma3d). On the H200 the 2-D
// form reads the 42 MB of the Qwen3-8B draft's FP8 weights in about 12.0 us against the LSU
// probe's 13.0 (read_probe.hpp), so each weight-read floor quant_bench reports is the fastest of
// every pattern and stage count it runs.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "fkv/compiler.hpp"
#include "fkv/driver.hpp"
#include "read_probe.hpp"  // load_probe_kernel
#include "tensor_map.hpp"  // src/: encode_byte_map

namespace fkv_bench {

inline constexpr const char* kTmaProbe =
    R"(// quant_bench's TMA weight-read probe (bench/tma_probe.hpp).
struct alignas(64) TensorMap { unsigned long long w[16]; };
__device__ __forceinline__ unsigned sa(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
extern "C" __global__ void __launch_bounds__(64, 1)
fkv_tma_probe(const __grid_constant__ TensorMap map, int rows, int kblocks, int box_rows,
              int kb, int stages, unsigned long long* sum) {
  extern __shared__ __align__(1024) unsigned char ring[];
  __shared__ __align__(8) unsigned long long full[16], empty[16];
  const int row0 = (int)((long long)rows * blockIdx.x / gridDim.x);
  const int stage_bytes = (box_rows * 128 * kb + 1023) / 1024 * 1024;
  const int copies = kblocks / kb;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&empty[s])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < copies; ++i) {
      const int s = i % stages;
      if (i >= stages) wait(sa(&empty[s]), (unsigned)(i / stages - 1) & 1u);
      const unsigned bar = sa(&full[s]), dst = sa(ring) + (unsigned)(s * stage_bytes);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                   :: "r"(bar), "r"(box_rows * 128 * kb) : "memory");
      if (kb == 1)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%0], [%1, {%2, %3}], [%4];"
                     :: "r"(dst), "l"((unsigned long long)&map), "r"(i * 128), "r"(row0), "r"(bar)
                     : "memory");
      else
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%0], [%1, {%2, %3, %4}], [%5];"
                     :: "r"(dst), "l"((unsigned long long)&map), "r"(0), "r"(row0), "r"(i * kb),
                        "r"(bar)
                     : "memory");
    }
  } else if (threadIdx.x == 32) {
    unsigned long long acc = 0;
    for (int i = 0; i < copies; ++i) {
      const int s = i % stages;
      wait(sa(&full[s]), (unsigned)(i / stages) & 1u);
      acc += *(const unsigned*)(ring + s * stage_bytes);
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(sa(&empty[s])) : "memory");
    }
    atomicAdd(sum, acc);
  }
}
)";

class TmaProbe {
 public:
  static constexpr int kMaxStages = 16;
  static constexpr unsigned kMaxShared = 200 * 1024;

  // Needs an sm_90 or newer device (check before constructing).
  TmaProbe(CUcontext ctx, const fkv::CompileOptions& o)
      : fn_(load_probe_kernel(ctx, o, "quant_bench_tma_probe", "fkv_tma_probe", kTmaProbe,
                              module_)) {
    FKV_CU(cuFuncSetAttribute, fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
           static_cast<int>(kMaxShared));
  }

  // The maps over `copies` buffers of rows x cols bytes (cols a multiple of 128), boxes for
  // `ctas` CTAs of `kb` (1, or a divisor of cols / 128) column blocks each.
  void prepare(const std::vector<CUdeviceptr>& copies, int rows, int cols, int ctas, int kb = 1) {
    if (kb < 1 || cols % (128 * kb) != 0)
      throw std::invalid_argument("TmaProbe: kb must divide the column blocks");
    rows_ = rows;
    cols_ = cols;
    ctas_ = ctas;
    kb_ = kb;
    box_rows_ = ((rows + ctas - 1) / ctas + 7) / 8 * 8;
    maps_.clear();
    for (CUdeviceptr p : copies) {
      const void* base = reinterpret_cast<const void*>(p);
      maps_.push_back(kb == 1 ? fkv::encode_byte_map(base, cols, rows, cols, box_rows_)
                              : encode_blocks_map(base, rows, cols));
    }
  }

  // Shared memory of `stages` stages of the prepared boxes.
  unsigned shared_bytes(int stages) const {
    return static_cast<unsigned>(stages * ((box_rows_ * 128 * kb_ + 1023) / 1024 * 1024));
  }

  // Reads copy `copy` once with `stages` (1..kMaxStages) ring stages.
  void run(std::size_t copy, int stages, CUdeviceptr sum, CUstream s) {
    if (stages < 1 || stages > kMaxStages) throw std::invalid_argument("TmaProbe: 1 to 16 stages");
    if (shared_bytes(stages) > kMaxShared)
      throw std::invalid_argument("TmaProbe: the stages do not fit in shared memory");
    int kblocks = cols_ / 128;
    const unsigned shared = shared_bytes(stages);
    void* args[] = {&maps_[copy], &rows_, &kblocks, &box_rows_, &kb_, &stages, &sum};
    FKV_CU(cuLaunchKernel, fn_, static_cast<unsigned>(ctas_), 1, 1, 64, 1, 1, shared, s, args,
           nullptr);
  }

 private:
  // A 3-D map [cols / 128][rows][128] over rows of `cols` bytes: boxes of kb_ column blocks of
  // box_rows_ rows, the same 128-byte swizzle as the 2-D map.
  CUtensorMap encode_blocks_map(const void* base, int rows, int cols) const {
    CUtensorMap map;
    const cuuint64_t dims[3] = {128, static_cast<cuuint64_t>(rows),
                                static_cast<cuuint64_t>(cols / 128)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols), 128};
    const cuuint32_t box[3] = {128, static_cast<cuuint32_t>(box_rows_),
                               static_cast<cuuint32_t>(kb_)};
    const cuuint32_t unit[3] = {1, 1, 1};
    FKV_CU(cuTensorMapEncodeTiled, &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base),
           dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
  }

  fkv::Module module_;
  CUfunction fn_ = nullptr;
  std::vector<CUtensorMap> maps_;
  int rows_ = 0, cols_ = 0, ctas_ = 0, box_rows_ = 0, kb_ = 1;
};

}  // namespace fkv_bench
