// How fast one weight stream of the draft's 8-bit K/V projection (10240 x 4096 bytes, 42 MB)
// can be read on this GPU, by the access pattern (docs/performance.md, "The FP8 stream GEMM"):
// the FP8 stream GEMM's TMA ring read its weights at about 55% of DRAM peak, while the LSU probe
// that defines the weight-read floor reads faster. Timing only: every variant reads the bytes
// and nothing else (no MMA, no output but a checksum word).
//   ldg/<m>        the weight-read probe (bench/read_probe.hpp): grid-stride 16-byte loads, 8 in
//                  flight per thread, 256 threads, m CTAs per SM;
//   tma2d/<S>      the stream GEMM's pattern: one CTA per SM owning rows [c*R/G, (c+1)*R/G),
//                  boxes of ceil(R/G) (to 8) rows x 128 bytes (128-byte swizzle), one per k block,
//                  S stages in a full/empty mbarrier ring;
//   tma3d/<K>/<S>  the same rows, K k blocks per box (a 3-D map: 128 bytes, rows, k blocks), so
//                  each row is read K*128 contiguous bytes at a time;
//   bulk/<KB>/<S>  each CTA's share of the buffer as one contiguous byte range, read in order by
//                  1-D bulk copies of KB KiB into S stages: what a weight layout pre-tiled per CTA
//                  would read.
// Each call reads another of 5 copies (210 MB, over 4 L2s), so every read comes from HBM, as in
// a server; figures are medians over CUDA-graph replays of 20 calls, per call.
// Standalone: nvcc -O2 -std=c++17 -arch=sm_90a bench/experiments/stream_probe.cu -lcuda -o sp
//   ./sp [rows=10240] [hidden=4096]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);     \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CU(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      const char* s_ = nullptr;                                               \
      cuGetErrorString(r_, &s_);                                              \
      std::printf("driver error %s at %s:%d\n", s_ ? s_ : "?", __FILE__, __LINE__); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

typedef unsigned u32;

struct alignas(16) U4 {
  u32 x, y, z, w;
};

__device__ __forceinline__ U4 ld_nc(const U4* p) {
  U4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__global__ void __launch_bounds__(256) ldg_probe(const U4* __restrict__ src,
                                                 unsigned long long n16,
                                                 unsigned long long* sum) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    U4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = ld_nc(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += (unsigned long long)v[j].x + v[j].y + v[j].z + v[j].w;
  }
  for (; i < n16; i += stride) {
    const U4 v = ld_nc(src + i);
    acc += (unsigned long long)v.x + v.y + v.z + v.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

__device__ __forceinline__ u32 smem(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

// Which copy a stage issues: mode 0 = 2-D box (c0 = k column, c1 = row), 1 = 3-D box (c0 = 0,
// c1 = row, c2 = k block), 2 = 1-D bulk copy of `bytes` from src + offset.
struct StreamArgs {
  const unsigned char* src;  // mode 2
  int mode;
  int rows, hidden;          // the weight matrix
  int box_rows, kb_per_box;  // modes 0 and 1
  int chunk_bytes;           // mode 2
  int stages;
  int stage_bytes;           // shared memory per stage
};

// 64 threads: warp 0 lane 0 issues the copies, warp 1 lane 0 consumes (reads one word of each
// stage into a checksum and hands the stage back).
__global__ void __launch_bounds__(64, 1) tma_stream(const __grid_constant__ CUtensorMap map,
                                                     StreamArgs a, unsigned long long* sum) {
  extern __shared__ __align__(1024) unsigned char ring[];
  __shared__ __align__(8) unsigned long long full[32], empty[32];
  const int G = gridDim.x, c = blockIdx.x;
  // The CTA's work: `items` copies.
  int items = 0;
  long long begin = 0, end = 0;
  int row0 = 0;
  if (a.mode == 2) {
    const long long total = (long long)a.rows * a.hidden;
    begin = total * c / G / 16 * 16;
    end = c + 1 == G ? total : total * (c + 1) / G / 16 * 16;
    items = (int)((end - begin + a.chunk_bytes - 1) / a.chunk_bytes);
  } else {
    row0 = (int)((long long)a.rows * c / G);
    items = a.hidden / 128 / (a.mode == 1 ? a.kb_per_box : 1);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      mbar_init(smem(&full[s]), 1);
      mbar_init(smem(&empty[s]), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const u32 base = smem(ring);
  if (threadIdx.x == 0) {
    for (int i = 0; i < items; ++i) {
      const int s = i % a.stages;
      if (i >= a.stages) mbar_wait(smem(&empty[s]), ((i / a.stages) - 1) & 1);
      const u32 bar = smem(&full[s]), dst = base + s * a.stage_bytes;
      if (a.mode == 2) {
        const long long off = begin + (long long)i * a.chunk_bytes;
        const int bytes = (int)(end - off < a.chunk_bytes ? end - off : a.chunk_bytes);
        mbar_expect_tx(bar, bytes);
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];" ::"r"(dst),
            "l"(a.src + off), "r"(bytes), "r"(bar)
            : "memory");
      } else if (a.mode == 0) {
        mbar_expect_tx(bar, a.box_rows * 128);
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(reinterpret_cast<unsigned long long>(&map)), "r"(i * 128), "r"(row0), "r"(bar)
            : "memory");
      } else {
        mbar_expect_tx(bar, a.box_rows * 128 * a.kb_per_box);
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
            "[%1, {%2, %3, %4}], [%5];" ::"r"(dst),
            "l"(reinterpret_cast<unsigned long long>(&map)), "r"(0), "r"(row0),
            "r"(i * a.kb_per_box), "r"(bar)
            : "memory");
      }
    }
  } else if (threadIdx.x == 32) {
    unsigned long long acc = 0;
    for (int i = 0; i < items; ++i) {
      const int s = i % a.stages;
      mbar_wait(smem(&full[s]), (i / a.stages) & 1);
      acc += *reinterpret_cast<const u32*>(ring + s * a.stage_bytes);
      mbar_arrive(smem(&empty[s]));
    }
    atomicAdd(sum, acc);
  }
}

struct Timer {
  cudaStream_t s;
  float run(const std::function<void(int)>& call, int calls = 20, int reps = 30) {
    call(0);
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) call(i);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(a, s));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1000.f / calls);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
  }
};

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 10240;
  const int hidden = argc > 2 ? std::atoi(argv[2]) : 4096;
  const size_t bytes = (size_t)rows * hidden;
  constexpr int kCopies = 5;
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::vector<unsigned char*> w(kCopies);
  for (auto& p : w) {
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x11, bytes));
  }
  unsigned long long* sum;
  CK(cudaMalloc(&sum, 8));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer timer{s};
  std::printf("stream_probe: %s, %d SMs, %d x %d bytes (%.1f MB), %d copies\n", prop.name, sms,
              rows, hidden, bytes / 1e6, kCopies);
  auto report = [&](const std::string& name, float us) {
    std::printf("%-16s %8.2f us  %7.1f GB/s\n", name.c_str(), us, bytes / (us * 1e3));
  };

  for (int m : {2, 4, 8, 16}) {
    const float us = timer.run([&](int i) {
      ldg_probe<<<sms * m, 256, 0, s>>>(reinterpret_cast<const U4*>(w[i % kCopies]), bytes / 16,
                                        sum);
    });
    report("ldg/" + std::to_string(m), us);
  }

  CK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  // Tensor maps per copy: 2-D [rows, hidden] and 3-D [kblocks][rows][128].
  const int G = sms;
  const int box_rows = ((rows + G - 1) / G + 7) / 8 * 8;
  auto map2d = [&](unsigned char* p) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)hidden, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)hidden};
    cuuint32_t box[2] = {128, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, p, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return m;
  };
  auto map3d = [&](unsigned char* p, int kb) {
    CUtensorMap m;
    cuuint64_t dims[3] = {128, (cuuint64_t)rows, (cuuint64_t)hidden / 128};
    cuuint64_t strides[2] = {(cuuint64_t)hidden, 128};
    cuuint32_t box[3] = {128, (cuuint32_t)box_rows, (cuuint32_t)kb}, es[3] = {1, 1, 1};
    CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, p, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return m;
  };
  auto run_tma = [&](const std::string& name, StreamArgs a, const std::vector<CUtensorMap>& maps,
                     int grid) {
    const int shared = a.stages * a.stage_bytes;
    if (shared > 200 * 1024 || a.stages > 32) return;
    const float us = timer.run([&](int i) {
      StreamArgs ai = a;
      ai.src = w[i % kCopies];
      tma_stream<<<grid, 64, shared, s>>>(maps[i % kCopies], ai, sum);
    });
    report(name, us);
  };
  std::vector<CUtensorMap> m2, none(kCopies);
  for (auto* p : w) m2.push_back(map2d(p));
  for (int S : {4, 8, 16}) {
    StreamArgs a{nullptr, 0, rows, hidden, box_rows, 1, 0, S, box_rows * 128};
    a.stage_bytes = (a.stage_bytes + 1023) / 1024 * 1024;
    run_tma("tma2d/" + std::to_string(S), a, m2, G);
  }
  for (int kb : {2, 4, 8}) {
    std::vector<CUtensorMap> m3;
    for (auto* p : w) m3.push_back(map3d(p, kb));
    for (int S : {2, 4, 8}) {
      StreamArgs a{nullptr, 1, rows, hidden, box_rows, kb, 0, S, box_rows * 128 * kb};
      a.stage_bytes = (a.stage_bytes + 1023) / 1024 * 1024;
      run_tma("tma3d/" + std::to_string(kb) + "/" + std::to_string(S), a, m3, G);
    }
  }
  for (int kb : {4, 8, 16, 32}) {
    for (int S : {4, 8, 16}) {
      StreamArgs a{nullptr, 2, rows, hidden, 0, 0, kb * 1024, S, kb * 1024};
      run_tma("bulk/" + std::to_string(kb) + "/" + std::to_string(S), a, none, G);
      run_tma("bulk2x/" + std::to_string(kb) + "/" + std::to_string(S), a, none, 2 * G);
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
