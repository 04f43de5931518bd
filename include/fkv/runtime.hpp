// runtime: KernelSpec -> a loaded CUfunction in the calling thread's context, and launch.
// Get = key -> memory -> disk -> compile (KernelCache) -> load (per context).
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/driver.hpp"
#include "fkv/kernel_params.h"
#include "fkv/spec.hpp"

namespace fkv {

// A kernel loaded into one context. Owned by the Runtime; valid until the Runtime goes away.
struct LoadedKernel {
  KernelSpec spec;
  Tiling tiling;
  CUcontext context = nullptr;
  int device = 0;
  int sm_count = 0;
  // Blocks of this kernel the device runs at once: sm_count x the driver's occupancy for its
  // block size (registers and static shared memory decide it: 16 per SM for the 64-register,
  // 4 KB variants measured on an H200). launch_grid's wave.
  std::int64_t resident_blocks = 0;
  Arch arch;
  CUfunction function = nullptr;
  CacheOutcome outcome = CacheOutcome::Compiled;  // how the image was obtained
  double load_seconds = 0;                        // get -> function handle
};

// A kernel of the materializer's other templates (the dequantize kernel, the activation
// quantizer): `source` compiled for `device`'s target through the kernel cache and loaded into
// its context, owned by the caller. An arch-specific source (KernelSource::arch_specific) is
// built as sm_90a, and refused (UnsupportedError) on a device whose target is not sm_90.
struct LoadedFunction {
  Module module;
  CUfunction function = nullptr;
};
LoadedFunction load_function(const KernelSource& source, int device);
// Launches such a function: grid (gx, gy), `threads` per block, `shared` bytes of dynamic shared
// memory, the kernel's arguments in `args` (cuLaunchKernel's kernelParams). Throws CudaError
// naming cuLaunchKernel when the launch is rejected.
void launch_function(const LoadedFunction& f, unsigned gx, unsigned gy, unsigned threads,
                     void** args, CUstream stream, unsigned shared = 0);

class Runtime {
 public:
  // `options` (copied) are the tuning knobs and NVRTC options of every kernel this runtime
  // loads: the tiling (FKV_BLOCK_WARPS, FKV_LAYERS_PER_BLOCK), the templates
  // (FKV_TEMPLATE_DIR), the NVRTC options (FKV_NVRTC_OPTIONS, part of the cache key).
  explicit Runtime(KernelCache& cache = KernelCache::global(),
                   const JitOptions& options = JitOptions::global());
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Loads (compiling or reading the cache as needed) the kernel for the calling thread's
  // current context; without one, the primary context of `device` is made current (a current
  // context wins over `device`). Call it ahead of graph capture. Thread-safe: a kernel is
  // loaded once per context, and threads asking for one being loaded wait for it. The
  // reference stays valid for the life of the Runtime.
  const LoadedKernel& prepare(const KernelSpec& spec, int device = 0);

  // The kernel for `stream`'s context (the current context for the legacy/per-thread
  // streams): returned at once when loaded; else loaded like prepare(), but refused while
  // `stream` is capturing a graph (a clear CudaError telling the caller to prepare() first;
  // the capture stays usable) instead of breaking the capture.
  const LoadedKernel& get(const KernelSpec& spec, CUstream stream);

  // What the kernels of `device` (an ordinal) are built for, CUBIN or PTX:
  // fkv::arch_for_compute_capability of its compute capability (include/fkv/arch.hpp), the
  // rule `fkv-jit precompile` uses too. Throws CompileError listing the supported archs for a
  // device older than sm_80.
  static ArchTarget device_target(int device);
  static Arch device_arch(int device) { return device_target(device).arch; }

  KernelCache& cache() { return cache_; }
  const JitOptions& options() const { return options_; }

  // The process-wide runtime over KernelCache::global().
  static Runtime& global();

 private:
  struct Impl;
  KernelCache& cache_;
  JitOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Launches `k` over `grid` with `params` on `stream` (block: k.tiling.block_threads threads, no
// dynamic shared memory): no allocation, no sync, no copy, so it can be
// captured in a CUDA graph. A zero grid dimension launches nothing. Throws CudaError naming
// cuLaunchKernel when the launch is rejected.
void launch(const LoadedKernel& k, const FkvKernelParams& params, unsigned grid_x, unsigned grid_y,
            unsigned grid_z, CUstream stream);

}  // namespace fkv
