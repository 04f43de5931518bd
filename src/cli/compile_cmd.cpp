// fkv-jit precompile / source: kernels a config's plan needs, compiled into the cache or
// printed. Neither needs a GPU or a driver.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fkv::cli {
namespace {

struct VariantArgs {
  std::string config;
  std::string dtype;  // empty: the config's dtype
  std::string kv_dtype;
  std::string cos_sin = "fp32";
  std::string index = "int64";
  std::string mode = "both";
  bool strict = false;
};

void add_variant_options(CLI::App* cmd, VariantArgs& a) {
  cmd->add_option("CONFIG", a.config, "model config.json")->required();
  cmd->add_option("--dtype", a.dtype, "activation dtype: bf16, fp16, fp32 (default: the config's)");
  cmd->add_option("--kv-dtype", a.kv_dtype,
                  "cache dtype: same as --dtype (default), fp8_e4m3 or fp8_e5m2");
  cmd->add_option("--cos-sin-dtype", a.cos_sin, "cos/sin cache dtype: fp32 or the activation dtype")
      ->capture_default_str();
  cmd->add_option("--index-dtype", a.index, "positions and cache_loc dtype")
      ->check(CLI::IsMember({"int32", "int64"}))
      ->capture_default_str();
  cmd->add_option("--mode", a.mode, "output modes to build")
      ->check(CLI::IsMember({"stacked", "pool", "both"}))
      ->capture_default_str();
  cmd->add_flag("--strict", a.strict, "require one uniform group (the seed's semantics)");
}

std::vector<KernelSpec> specs_of(const VariantArgs& a) {
  const ModelConfig cfg = load_config(a.config);
  const Plan plan = make_plan(cfg, a.strict ? ValidationMode::Strict : ValidationMode::Grouped);
  VariantOptions o;
  o.act = a.dtype.empty() ? act_dtype_of(cfg.dtype.value) : parse_dtype(a.dtype);
  o.cache = a.kv_dtype.empty() ? o.act : parse_dtype(a.kv_dtype);
  o.cos_sin = parse_dtype(a.cos_sin);
  o.index = a.index == "int32" ? IndexType::I32 : IndexType::I64;
  o.stacked = a.mode != "pool";
  o.pool = a.mode != "stacked";
  return kernel_specs_for(plan, o);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void add_compile_commands(CLI::App& app) {
  // precompile ---------------------------------------------------------------------------
  static VariantArgs pre;
  static std::vector<std::string> archs;
  static std::string cache_dir;
  static bool ptx = false;
  static int jobs = 0;
  CLI::App* p = app.add_subcommand(
      "precompile", "compile every kernel a config's plan needs into the cache (no GPU needed)");
  add_variant_options(p, pre);
  p->add_option("--arch", archs, "target arch, repeatable (sm_80 ... sm_120)")->required();
  p->add_option("--cache-dir", cache_dir,
                "cache root to write (default: $FKV_CACHE_DIR, $XDG_CACHE_HOME/fkv-jit or "
                "~/.cache/fkv-jit)");
  p->add_flag("--ptx", ptx, "emit PTX instead of CUBIN");
  p->add_option("-j,--jobs", jobs, "parallel compilations (default: number of cores)");
  p->callback([] {
    std::vector<Arch> targets;
    for (const auto& a : archs) targets.push_back(Arch::parse(a));
    const auto specs = specs_of(pre);
    CacheOptions opts = CacheOptions::from_env();
    if (!cache_dir.empty()) {
      opts.root = cache_dir;
      opts.disabled = false;
    }
    KernelCache cache(opts);
    struct Row {
      std::string variant, arch, outcome, path;
      double ms = 0;
    };
    std::vector<std::pair<KernelSpec, Arch>> work;
    for (const auto& a : targets)
      for (const auto& s : specs) work.emplace_back(s, a);
    std::vector<Row> rows(work.size());
    std::atomic<std::size_t> next{0}, done{0};
    std::mutex io;
    std::exception_ptr error;
    const auto t0 = std::chrono::steady_clock::now();
    auto worker = [&] {
      for (std::size_t i; (i = next++) < work.size();) {
        try {
          const auto& [spec, arch] = work[i];
          const CacheResult r = cache.get(generate(spec), CompileOptions{arch, ptx});
          rows[i] = {spec.short_name(), arch.name(), to_string(r.outcome), r.path.string(),
                     r.seconds * 1e3};
          std::lock_guard<std::mutex> lock(io);
          std::fprintf(stderr, "[%zu/%zu] %-9s %-7s %s (%.1f ms)\n", ++done, work.size(),
                       to_string(r.outcome).c_str(), arch.name().c_str(), spec.short_name().c_str(),
                       r.seconds * 1e3);
        } catch (...) {
          std::lock_guard<std::mutex> lock(io);
          if (!error) error = std::current_exception();
        }
      }
    };
    const unsigned n = static_cast<unsigned>(
        std::min<std::size_t>(work.size(), jobs > 0 ? jobs : std::max(1u, std::thread::hardware_concurrency())));
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < n; ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    const double total = ms_since(t0);

    std::printf("%-44s %-7s %-9s %9s  %s\n", "variant", "arch", "result", "ms", "path");
    std::size_t hits = 0;
    for (const auto& r : rows) {
      std::printf("%-44s %-7s %-9s %9.1f  %s\n", r.variant.c_str(), r.arch.c_str(),
                  r.outcome.c_str(), r.ms, r.path.empty() ? "(memory only)" : r.path.c_str());
      hits += r.outcome != "compiled";
    }
    std::printf("%zu variants (%zu compiled, %zu cache hits) in %.1f ms%s\n", rows.size(),
                rows.size() - hits, hits, total,
                cache.memory_only() ? "; cache is memory-only, nothing was saved" : "");
  });

  // source -------------------------------------------------------------------------------
  static VariantArgs src;
  static int group = -1;
  CLI::App* s = app.add_subcommand("source", "print the specialized kernel source for a config");
  add_variant_options(s, src);
  s->add_option("--index", group, "print only the N-th variant (0-based)");
  s->callback([] {
    const auto specs = specs_of(src);
    if (group >= static_cast<int>(specs.size()))
      throw CommandFailure(Usage, "--index " + std::to_string(group) + " is out of range: the plan has " +
                                      std::to_string(specs.size()) + " variants");
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (group >= 0 && static_cast<int>(i) != group) continue;
      const KernelSource k = generate(specs[i]);
      std::cout << "// ---- variant " << i << ": " << specs[i].short_name() << "\n"
                << "// name expression: " << k.name_expression << "\n"
                << k.source << "\n";
    }
  });
}

}  // namespace fkv::cli
