// precompile: a plan's kernels into the cache, in parallel, and what the front-ends hand out of
// a plan (see include/fkv/precompile.hpp).
#include "fkv/precompile.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "dequant.hpp"
#include "fkv/codegen.hpp"
#include "fkv/errors.hpp"
#include "fp8_gemm_path.hpp"
#include "int8_gemm_path.hpp"

namespace fkv {

std::size_t PrecompileResult::compiled() const {
  return static_cast<std::size_t>(std::count_if(kernels.begin(), kernels.end(), [](const auto& k) {
    return k.outcome == CacheOutcome::Compiled;
  }));
}

std::size_t PrecompileResult::not_persisted() const {
  return static_cast<std::size_t>(
      std::count_if(kernels.begin(), kernels.end(), [](const auto& k) { return !k.persisted(); }));
}

std::vector<DecodeSpec> decode_specs_for(const Plan& plan, const VariantOptions& options,
                                         const DecodePrecompile& decode) {
  if (decode.crossover <= 0 || decode.sm_count <= 0 || plan.groups.size() != 1) return {};
  const LayerGroup& g = plan.groups.front();
  // The epilogue spec FusedKVMaterializer gives its DecodeKV (no bias, flat pool, no debug).
  const KernelSpec e = make_kernel_spec(g.attn, options.act, options.cache, OutputMode::Pool,
                                        options.cos_sin, options.index, options.index);
  const int L = static_cast<int>(g.layers.size());
  if (!decode_unsupported(e, decode.hidden, L, options.weights).empty()) return {};
  DecodeOptions o;
  // Quantized weights: every bucket (FusedKVMaterializer's crossover for them is 32 or 64).
  o.max_tokens = is_quantized(options.weights)
                     ? kDecodeMaxBucket
                     : std::min<std::int64_t>(decode.crossover, kDecodeMaxBucket);
  o.stacked = options.stacked;
  o.pool = options.pool;
  return decode_specs(e, decode.hidden, L, o, decode.sm_count, options.weights);
}

std::vector<KernelSource> weight_kernels_for(const VariantOptions& options, int hidden) {
  const WeightFormat w = options.weights;
  if (!is_quantized(w)) return {};
  if (hidden <= 0)
    throw ArgumentError("the kernels of " + to_string(w) +
                        " weights are specialized on the hidden size, and it is " +
                        std::to_string(hidden) + ": give the config's hidden_size");
  // The dequantize kernel (fused_kv_materializer.cpp), then the FP8 or INT8 GEMM path's own.
  std::vector<KernelSource> out = {generate_dequant(w, options.act, hidden)};
  for (KernelSource& k : w == WeightFormat::Int8Channel
                             ? Int8GemmPath::sources(options.act, hidden)
                             : Fp8GemmPath::sources(w, options.act, hidden))
    out.push_back(std::move(k));
  return out;
}

PrecompileResult precompile(const Plan& plan, const VariantOptions& options,
                            const std::vector<ArchTarget>& targets, KernelCache& cache,
                            unsigned jobs, const PrecompileProgress& progress,
                            const DecodePrecompile& decode, int hidden) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<KernelSpec> specs = kernel_specs_for(plan, options);
  const std::vector<DecodeSpec> decode_specs = decode_specs_for(plan, options, decode);
  const std::vector<KernelSource> weight_kernels = weight_kernels_for(options, hidden);
  PrecompileResult result;
  for (const ArchTarget& t : targets) {
    for (const KernelSpec& s : specs)
      result.kernels.push_back({s, std::nullopt, std::nullopt, t, CacheOutcome::Compiled, {}, 0});
    for (const DecodeSpec& d : decode_specs)
      result.kernels.push_back({d.epilogue, d, std::nullopt, t, CacheOutcome::Compiled, {}, 0});
    for (const KernelSource& k : weight_kernels)
      result.kernels.push_back({{}, std::nullopt, k, t, CacheOutcome::Compiled, {}, 0});
  }

  KernelCache::PrecompileScope scope(cache);
  const std::size_t total = result.kernels.size();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;  // guards `done`, `error` and the progress callback
  std::size_t done = 0;
  std::exception_ptr error;
  auto worker = [&] {
    for (std::size_t i; !failed && (i = next++) < total;) {
      PrecompiledKernel& k = result.kernels[i];
      try {
        const CacheResult r = cache.get(k.weight_kernel ? *k.weight_kernel
                                        : k.decode      ? generate_decode(*k.decode)
                                                        : generate(k.spec),
                                        CompileOptions{k.target.arch, k.target.ptx});
        k.outcome = r.outcome;
        k.path = r.path;
        k.seconds = r.seconds;
        std::lock_guard<std::mutex> lock(mu);
        ++done;
        if (progress) progress(k, done, total);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const auto n = static_cast<unsigned>(std::min<std::size_t>(total, jobs > 0 ? jobs : hw));
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back(worker);
  worker();  // the calling thread is one of the workers
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  // The size of the set on disk, for the cap check. An entry another process removed since
  // (its own prune, a `cache clear`) is not counted; that is the other process's doing, and the
  // kernel was written, so it stays "persisted".
  result.max_bytes = cache.options().max_bytes;
  for (const PrecompiledKernel& k : result.kernels) {
    if (k.path.empty()) continue;
    std::error_code ec, ec2;
    std::filesystem::path meta = k.path;
    meta.replace_extension(cache_entry::kMetaSuffix);
    const auto image = std::filesystem::file_size(k.path, ec);
    const auto meta_bytes = std::filesystem::file_size(meta, ec2);
    if (!ec && !ec2) result.bytes_on_disk += image + meta_bytes;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

const LayerGroup& plan_group(const Plan& plan, int group) {
  if (group < 0 || group >= static_cast<int>(plan.groups.size()))
    throw ArgumentError("group " + std::to_string(group) + " is out of range: the plan has " +
                        std::to_string(plan.groups.size()) + " group(s)");
  return plan.groups[static_cast<std::size_t>(group)];
}

RopeTable plan_cos_sin_table(const Plan& plan, int group, std::int64_t max_position,
                             std::int64_t max_position_embeddings) {
  const LayerGroup& g = plan_group(plan, group);
  if (g.attn.rotary_dim == 0)
    throw ArgumentError("group " + std::to_string(group) +
                        " has no RoPE (rotary_dim 0): it needs no cos/sin table");
  if (max_position < 0 || max_position > kMaxRopePositions)
    throw ArgumentError("max_position is " + std::to_string(max_position) +
                        ": give the number of positions the cos/sin table must cover, from 1 to "
                        "2^31, or 0 for the config's max_position_embeddings");
  const std::int64_t rows = max_position > 0 ? max_position : max_position_embeddings;
  if (rows <= 0)
    throw ArgumentError(
        "max_position is 0 and the config has no max_position_embeddings: pass the number of "
        "positions the cos/sin table must cover");
  RopeOptions options;
  options.max_position_embeddings = max_position_embeddings;
  return RopeTable(g.attn.rope, g.attn.rotary_dim, rows, options);
}

PrecompileResult precompile_config(const ModelConfig& config, const ConfigPrecompile& request) {
  if (request.jobs < 0)
    throw ArgumentError("jobs is " + std::to_string(request.jobs) +
                        ": give 0 (one per core) or more");
  const ArchTarget target = resolve_arch(request.arch).target;
  const Plan plan =
      make_plan(config, request.strict ? ValidationMode::Strict : ValidationMode::Grouped);
  VariantOptions o;
  o.act = request.act_dtype.empty() ? act_dtype_of(config) : parse_dtype(request.act_dtype);
  o.cache = request.kv_dtype.empty() ? o.act : parse_dtype(request.kv_dtype);
  if (!request.cos_sin_dtype.empty()) o.cos_sin = parse_dtype(request.cos_sin_dtype);
  if (!request.index_dtype.empty()) {
    if (request.index_dtype != "int32" && request.index_dtype != "int64")
      throw ArgumentError("index_dtype '" + request.index_dtype + "' is not int32 or int64");
    o.index = request.index_dtype == "int32" ? IndexType::I32 : IndexType::I64;
  }
  // The weight format: the request's, else what the config's quantization_config declares
  // (a declaration fkv-jit does not read throws its refusal unless the request names one).
  std::optional<WeightFormat> requested;
  if (!request.weights.empty()) requested = parse_weight_format(request.weights);
  const WeightChoice choice =
      choose_weight_format(config, requested ? &*requested : nullptr, "weights");
  if (!choice.message.empty()) {
    if (choice.warning)
      spdlog::warn("fkv: {}", choice.message);
    else
      spdlog::info("fkv: {}", choice.message);
  }
  o.weights = choice.format;
  if (is_quantized(o.weights) && config.hidden_size.value <= 0)
    throw ArgumentError(
        "weights '" + (requested ? request.weights : to_string(o.weights)) + "'" +
        (requested ? std::string() : " (declared by " + config.weights.source + ")") +
        ": the config has no hidden_size, which the kernels of quantized weights "
        "are specialized on");
  if (!request.modes.empty()) {
    if (request.modes != "both" && request.modes != "stacked" && request.modes != "pool")
      throw ArgumentError("modes '" + request.modes + "' is not both, stacked or pool");
    o.stacked = request.modes != "pool";
    o.pool = request.modes != "stacked";
  }

  std::unique_ptr<KernelCache> own;
  KernelCache* cache = &KernelCache::global();
  if (!request.cache_dir.empty()) {
    CacheOptions opts = CacheOptions::from_env();
    opts.root = request.cache_dir;
    opts.disabled = false;  // an explicit directory is what the caller wants written
    own = std::make_unique<KernelCache>(opts);
    cache = own.get();
  }
  DecodePrecompile decode;
  if (!request.decode_gpu.empty()) {
    const MeasuredDecodeGpu g = measured_decode_gpu(request.decode_gpu);
    decode = {g.sm_count, g.crossover, config.hidden_size.value};
  }
  PrecompileResult r = precompile(plan, o, {target}, *cache, static_cast<unsigned>(request.jobs),
                                  {}, decode, config.hidden_size.value);
  if (r.not_persisted() > 0) {
    std::string names;
    for (const auto& k : r.kernels)
      if (!k.persisted()) names += (names.empty() ? "" : ", ") + k.short_name();
    throw PrecompileCacheError(
        std::to_string(r.not_persisted()) + " of " + std::to_string(r.kernels.size()) +
            " kernels were compiled but not saved to the cache (" +
            (cache->memory_only() ? "no usable cache directory" : "publishing failed") +
            "; see the log): " + names,
        std::move(r));
  }
  if (r.over_cap())  // as the CLI's exit 8: the next publish there would evict some of them
    throw PrecompileCacheError(
        "the " + std::to_string(r.kernels.size()) + " kernels take " +
            std::to_string(r.bytes_on_disk) +
            " bytes in the cache, more than FKV_CACHE_MAX_BYTES=" + std::to_string(r.max_bytes) +
            " allows: they are all saved now, but the next kernel published there "
            "evicts some. Raise FKV_CACHE_MAX_BYTES, or unset it for the image's cache",
        std::move(r));
  return r;
}

}  // namespace fkv
