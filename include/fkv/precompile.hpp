// precompile: every kernel a plan needs, compiled into a cache ahead of use (no GPU needed).
// The one implementation behind `fkv-jit precompile`, fkv_precompile() (and through it
// fkv_jit.precompile) and the benchmark's precompile figures.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fkv {

struct PrecompiledKernel {
  KernelSpec spec;
  ArchTarget target;
  CacheOutcome outcome = CacheOutcome::Compiled;
  // The entry on disk (in the writable root, or a read-only root on a ReadOnlyHit); empty
  // when the kernel is only in memory: the root was refused or publishing failed (disk full).
  std::filesystem::path path;
  double seconds = 0;  // time the cache lookup (and compile) took
  bool persisted() const { return !path.empty(); }
};

struct PrecompileResult {
  std::vector<PrecompiledKernel> kernels;  // target-major, then kernel_specs_for() order
  double seconds = 0;                      // wall time of the whole run
  std::size_t compiled() const;            // built now (the rest were cache hits)
  std::size_t not_persisted() const;       // kernels with an empty path
};

// Called after each kernel, never concurrently: the kernel and how many of `total` are done.
using PrecompileProgress =
    std::function<void(const PrecompiledKernel&, std::size_t done, std::size_t total)>;

// Builds kernel_specs_for(plan, options) for every target into `cache`, `jobs` at a time
// (0 = one per hardware thread; NVRTC programs are independent). Targets come from
// arch_for_compute_capability / resolve_arch, so that each entry is the one the runtime looks
// up on that device. The plan decides the kernels: a tensor-parallel deployment passes the
// plan of its rank. The first error stops the remaining work and is rethrown once the
// workers have finished; kernels compiled before it stay in the cache.
PrecompileResult precompile(const Plan& plan, const VariantOptions& options,
                            const std::vector<ArchTarget>& targets, KernelCache& cache,
                            unsigned jobs = 0, const PrecompileProgress& progress = {});

}  // namespace fkv
