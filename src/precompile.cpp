// precompile: a plan's kernels into the cache, in parallel (see include/fkv/precompile.hpp).
#include "fkv/precompile.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "fkv/codegen.hpp"

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
  if (!decode_unsupported(e, decode.hidden, L).empty()) return {};
  DecodeOptions o;
  o.max_tokens = std::min<std::int64_t>(decode.crossover, kDecodeMaxBucket);
  o.stacked = options.stacked;
  o.pool = options.pool;
  return decode_specs(e, decode.hidden, L, o, decode.sm_count);
}

PrecompileResult precompile(const Plan& plan, const VariantOptions& options,
                            const std::vector<ArchTarget>& targets, KernelCache& cache,
                            unsigned jobs, const PrecompileProgress& progress,
                            const DecodePrecompile& decode) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<KernelSpec> specs = kernel_specs_for(plan, options);
  const std::vector<DecodeSpec> decode_specs = decode_specs_for(plan, options, decode);
  PrecompileResult result;
  for (const ArchTarget& t : targets) {
    for (const KernelSpec& s : specs)
      result.kernels.push_back({s, std::nullopt, t, CacheOutcome::Compiled, {}, 0});
    for (const DecodeSpec& d : decode_specs)
      result.kernels.push_back({d.epilogue, d, t, CacheOutcome::Compiled, {}, 0});
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
        const CacheResult r = cache.get(k.decode ? generate_decode(*k.decode) : generate(k.spec),
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

}  // namespace fkv
