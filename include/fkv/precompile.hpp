// precompile: every kernel a plan needs, compiled into a cache ahead of use (no GPU needed).
// The one implementation behind `fkv-jit precompile`, fkv_precompile(), fkv_jit.precompile and
// the benchmark's precompile figures. Also what the front-ends (the C API, the Python binding)
// hand out of a plan ahead of use, with the same checks and texts in each: a group by number,
// its cos/sin table, and a config's precompile request with names as a user gives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/config.hpp"
#include "fkv/decode.hpp"
#include "fkv/errors.hpp"
#include "fkv/rope.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fkv {

struct PrecompiledKernel {
  KernelSpec spec;                   // the epilogue's (decode kernels: DecodeSpec::epilogue)
  std::optional<DecodeSpec> decode;  // set for a decode-size kernel
  // Set for a kernel of quantized weights (weight_kernels_for): spec and decode then unused.
  std::optional<KernelSource> weight_kernel;
  ArchTarget target;
  CacheOutcome outcome = CacheOutcome::Compiled;
  // The entry in the cache's writable root (a kernel found in a read-only root is copied
  // there); empty when it could not be written there: the root was refused, publishing failed
  // (disk full, a directory at the entry's path).
  std::filesystem::path path;
  double seconds = 0;  // time the cache lookup (and compile) took
  bool persisted() const { return !path.empty(); }
  std::string short_name() const {
    return weight_kernel ? weight_kernel->short_name
           : decode      ? decode->short_name()
                         : spec.short_name();
  }
};

// The decode-size kernels FusedKVMaterializer loads on one GPU model (include/fkv/decode.hpp),
// to build ahead of time too: for calls of 1..crossover tokens on a GPU with sm_count SMs
// (measured_decode_gpus() has both for the GPUs measured), the config's hidden size. Nothing
// is added when crossover or sm_count is 0, or when the plan cannot take the decode kernel
// (more than one group, or decode_unsupported()). Quantized weights (VariantOptions::weights):
// the kernels over the stored bytes, for calls of 1..64 tokens whatever the crossover (the
// materializer's crossover for them is 32 tokens where cuBLASLt's FP8 GEMM takes the calls
// above, else 64).
struct DecodePrecompile {
  int sm_count = 0;
  std::int64_t crossover = 0;
  int hidden = 0;
};

struct PrecompileResult {
  std::vector<PrecompiledKernel> kernels;  // target-major, then kernel_specs_for() order
  double seconds = 0;                      // wall time of the whole run
  std::size_t compiled() const;            // built now (the rest were cache hits)
  std::size_t not_persisted() const;       // kernels with an empty path
  // Bytes the persisted kernels take on disk (images and meta files), and the cache's size cap
  // (CacheOptions::max_bytes, 0 = none). The run's own prune keeps its kernels; when they alone
  // pass the cap, the next publish into that root evicts some of them: over_cap().
  std::uint64_t bytes_on_disk = 0;
  std::uint64_t max_bytes = 0;
  bool over_cap() const { return max_bytes != 0 && bytes_on_disk > max_bytes; }
};

// Called after each kernel, never concurrently: the kernel and how many of `total` are done.
using PrecompileProgress =
    std::function<void(const PrecompiledKernel&, std::size_t done, std::size_t total)>;

// The kernels a FusedKVMaterializer builds for quantized weights (options.weights) besides the
// epilogue and decode kernels, for `hidden` columns (the config's hidden_size): the dequantize
// kernel (calls above the decode crossover that take dequantized slices), and for FP8 formats
// the activation quantizer of cuBLASLt's FP8 GEMM (per token, or per token and 128 columns for
// fp8_block where hidden is a multiple of 128) and, for fp8_tensor, the per-row scale
// expansion and (hidden a multiple of 128) the per-128-column quantizer of its calls of up to
// 64 tokens; for int8_channel the INT8 GEMM's activation split and combine. Empty for dense
// weights. ArgumentError when hidden is not positive.
std::vector<KernelSource> weight_kernels_for(const VariantOptions& options, int hidden);

// Builds kernel_specs_for(plan, options) for every target into `cache`'s writable root (under
// a KernelCache::PrecompileScope: read-only hits are copied there, and the run's own size-cap
// prune never evicts its kernels), `jobs` at a time
// (0 = one per hardware thread; NVRTC programs are independent). Targets come from
// arch_for_compute_capability / resolve_arch, so that each entry is the one the runtime looks
// up on that device. The plan decides the kernels: a tensor-parallel deployment passes the
// plan of its rank. The first error stops the remaining work and is rethrown once the
// workers have finished; kernels compiled before it stay in the cache.
// Then the decode kernels of `decode` (decode_specs_for) and, for quantized weights
// (options.weights), weight_kernels_for(options, hidden), hidden being the config's
// hidden_size.
PrecompileResult precompile(const Plan& plan, const VariantOptions& options,
                            const std::vector<ArchTarget>& targets, KernelCache& cache,
                            unsigned jobs = 0, const PrecompileProgress& progress = {},
                            const DecodePrecompile& decode = {}, int hidden = 0);

// The decode kernels `decode` asks for, for this plan and options (empty when none apply).
std::vector<DecodeSpec> decode_specs_for(const Plan& plan, const VariantOptions& options,
                                         const DecodePrecompile& decode);

// ---- for front-ends -----------------------------------------------------------------------

// Group `group` of `plan`; ArgumentError "group G is out of range: the plan has N group(s)".
const LayerGroup& plan_group(const Plan& plan, int group);

// The cos/sin table of group `group` with max_position rows; 0 = the config's
// max_position_embeddings (`max_position_embeddings`, which also feeds RopeOptions). Under
// tensor parallelism every rank has the same table. ArgumentError for a group without RoPE
// (rotary_dim 0), max_position outside [0, 2^31], or 0 without a max_position_embeddings;
// ConfigError from RopeTable.
RopeTable plan_cos_sin_table(const Plan& plan, int group, std::int64_t max_position,
                             std::int64_t max_position_embeddings);

// A config's precompile as the C API and fkv_jit.precompile take it: names as the user gives
// them, an empty name = the default.
struct ConfigPrecompile {
  std::string arch;                 // required: "sm_90", "90", "compute_90" (resolve_arch)
  std::string act_dtype;            // default: the config's dtype (act_dtype_of)
  std::string kv_dtype;             // default: act_dtype
  std::string cos_sin_dtype;        // default: fp32
  std::string index_dtype;          // "int32" or "int64" (default)
  std::string modes;                // "both" (default), "stacked" or "pool"
  std::filesystem::path cache_dir;  // default: KernelCache::global(); given: written even
                                    // under FKV_DISABLE_CACHE
  bool strict = false;              // the strict plan instead of the grouped one
  int jobs = 0;                     // 0: one per core
  std::string decode_gpu;           // a measured GPU ("H200"): its decode-size kernels too
  // How the draft's K/V weights are stored: empty or "dense" (default), or a quantized format
  // (parse_weight_format: "fp8_tensor", "fp8_channel", "fp8_block", "int8_channel", ...):
  // the kernels FusedKVMaterializer builds for it too (weight_kernels_for, and with decode_gpu
  // the decode kernels over the stored bytes).
  std::string weights;
};

// precompile_config's CacheError: the run finished, but its kernels are not all safe in the
// cache. Carries the run's result, so that a front-end can report the counts with the error
// (fkv_precompile_result with FKV_ERR_CACHE).
struct PrecompileCacheError : CacheError {
  PrecompileCacheError(const std::string& what, PrecompileResult run)
      : CacheError(what), result(std::move(run)) {}
  PrecompileResult result;
};

// Builds the kernels of `config`'s plan (unsharded) for `request`. Beyond precompile()'s
// errors: ArgumentError for a bad name, negative jobs, an unmeasured decode_gpu or quantized
// weights with no hidden_size in the config; UnsupportedError for a packed 4-bit scheme;
// PrecompileCacheError (a CacheError) when a kernel was compiled but not saved (naming them),
// or when the saved set is larger than FKV_CACHE_MAX_BYTES (the next publish there would evict
// some).
PrecompileResult precompile_config(const ModelConfig& config, const ConfigPrecompile& request);

}  // namespace fkv
