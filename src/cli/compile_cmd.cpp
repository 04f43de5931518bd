// fkv-jit precompile / source: kernels a config's plan needs, compiled into the cache
// (fkv::precompile) or printed. Neither needs a GPU or a driver.
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/precompile.hpp"

namespace fkv::cli {
namespace {

struct PrecompileArgs {
  VariantArgs variants;
  std::vector<std::string> archs;
  std::string cache_dir;
  bool ptx = false;
  int jobs = 0;  // 0: not given, one per core
  bool json = false;
};

// Why nothing or not everything reached the disk, for the summary: the cache's own reason.
std::string why_not_persisted(const KernelCache& cache) {
  if (cache.options().disabled) return "FKV_DISABLE_CACHE is set and no --cache-dir was given";
  if (cache.memory_only())
    return cache.options().root.empty()
               ? std::string(
                     "no cache directory (pass --cache-dir, or set FKV_CACHE_DIR, or an "
                     "absolute XDG_CACHE_HOME or HOME)")
               : "cache root " + cache.options().root.string() +
                     " cannot be used (see the warning above)";
  const std::string e = cache.publish_error();
  return "publishing to " + cache.options().root.string() + " failed" +
         (e.empty() ? std::string(" (see the warning above)") : ": " + e);
}

void run_precompile(const PrecompileArgs& a) {
  std::vector<std::string> notes;
  const std::vector<ArchTarget> targets = targets_of(a.archs, a.ptx, &notes);
  const Variants v = variants_of(a.variants);
  notes.insert(notes.end(), v.notes.begin(), v.notes.end());
  CacheOptions opts = CacheOptions::from_env();
  if (!a.cache_dir.empty()) {
    opts.root = a.cache_dir;
    opts.disabled = false;  // an explicit directory is what the user wants written
  }
  KernelCache cache(opts);

  const PrecompileResult r = precompile(
      v.plan, v.options, targets, cache, static_cast<unsigned>(a.jobs),
      [](const PrecompiledKernel& k, std::size_t done, std::size_t total) {
        std::fprintf(stderr, "[%zu/%zu] %-9s %-13s %s (%.1f ms)\n", done, total,
                     to_string(k.outcome).c_str(), k.target.name().c_str(), k.short_name().c_str(),
                     k.seconds * 1e3);
      },
      v.decode, v.hidden);

  const std::size_t missing = r.not_persisted();
  const std::string why = missing ? why_not_persisted(cache) : "";
  if (a.json) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const auto& k : r.kernels)
      kernels.push_back({{"variant", k.short_name()},
                         {"arch", k.target.arch.name()},
                         {"ptx", k.target.ptx},
                         {"outcome", to_string(k.outcome)},
                         {"ms", k.seconds * 1e3},
                         {"persisted", k.persisted()},
                         {"path", k.path.string()}});
    nlohmann::json out = {{"ok", missing == 0 && !r.over_cap()},
                          {"config", a.variants.config},
                          {"kernels", kernels},
                          {"compiled", r.compiled()},
                          {"cache_hits", r.kernels.size() - r.compiled()},
                          {"not_persisted", missing},
                          {"seconds", r.seconds},
                          {"notes", notes}};
    if (missing) {
      out["error"] = std::to_string(missing) + " of " + std::to_string(r.kernels.size()) +
                     " kernels were not saved: " + why;
      out["exit_code"] = Incomplete;
    } else if (r.over_cap()) {
      out["error"] =
          "the kernels take " + std::to_string(r.bytes_on_disk) +
          " bytes, more than the size cap FKV_CACHE_MAX_BYTES=" + std::to_string(r.max_bytes);
      out["exit_code"] = Incomplete;
    }
    out["bytes"] = r.bytes_on_disk;
    std::cout << json_text(out) << std::endl;
  } else {
    std::printf("%-44s %-13s %-9s %9s  %s\n", "variant", "arch", "result", "ms", "path");
    for (const auto& k : r.kernels)
      std::printf("%-44s %-13s %-9s %9.1f  %s\n", k.short_name().c_str(), k.target.name().c_str(),
                  to_string(k.outcome).c_str(), k.seconds * 1e3,
                  k.persisted() ? printable(k.path.string()).c_str() : "NOT SAVED (memory only)");
    std::printf("%zu kernels (%zu compiled, %zu cache hits) in %.1f ms\n", r.kernels.size(),
                r.compiled(), r.kernels.size() - r.compiled(), r.seconds * 1e3);
  }
  if (missing == 0 && r.over_cap()) {
    // Every kernel is on disk, kept there by the run itself; the next publish into this root
    // would evict some of them.
    const std::string message =
        "the " + std::to_string(r.kernels.size()) + " kernels take " +
        std::to_string(r.bytes_on_disk) + " bytes, more than the cache's size cap of " +
        std::to_string(r.max_bytes) +
        " bytes (FKV_CACHE_MAX_BYTES): they are all in the cache now, but the next kernel "
        "published there evicts some of them. Raise FKV_CACHE_MAX_BYTES to at least " +
        std::to_string(r.bytes_on_disk) + " or unset it";
    if (a.json) print_error(message);
    throw CommandFailure(Incomplete, a.json ? "" : message);
  }
  if (missing == 0) return;
  // Exit 8 with a summary naming what a deployment would lack.
  std::string list;
  std::size_t named = 0;
  for (const auto& k : r.kernels) {
    if (k.persisted()) continue;
    if (named++ == 8) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "" : ", ") + k.short_name() + " (" + k.target.name() + ")";
  }
  const std::string message = (missing == r.kernels.size() ? "nothing was saved: " : "") +
                              std::to_string(missing) + " of " + std::to_string(r.kernels.size()) +
                              " kernels are in memory only, not in the cache: " + why +
                              "; not saved: " + list;
  if (a.json) print_error(message);
  throw CommandFailure(Incomplete, a.json ? "" : message);
}

}  // namespace

void add_compile_commands(CLI::App& app) {
  // precompile ---------------------------------------------------------------------------
  static PrecompileArgs pre;
  CLI::App* p = app.add_subcommand(
      "precompile", "compile every kernel a config's plan needs into the cache (no GPU needed)");
  add_variant_options(p, pre.variants);
  p->add_option("--arch", pre.archs,
                "device arch, repeatable: sm_80, sm_86, sm_89, sm_90, sm_100, sm_120, ... (what "
                "the runtime loads on it is built; sm_90a etc. map to it with a note)")
      ->required();
  add_cache_dir_option(p, pre.cache_dir,
                       "cache root to write (default: $FKV_CACHE_DIR, $XDG_CACHE_HOME/fkv-jit or "
                       "~/.cache/fkv-jit)");
  p->add_flag("--ptx", pre.ptx,
              "emit PTX instead of CUBIN (the runtime loads PTX only on devices newer than NVRTC)");
  p->add_option("-j,--jobs", pre.jobs, "parallel compilations (default: number of cores)")
      ->check(CLI::Range(1, 1024));
  p->add_flag("--json", pre.json, "print one JSON object instead of the table");
  p->callback([] { run_precompile(pre); });

  // source -------------------------------------------------------------------------------
  static VariantArgs src;
  static int index = -1;
  CLI::App* s = app.add_subcommand("source", "print the specialized kernel source for a config");
  add_variant_options(s, src);
  s->add_option("--index", index, "print only the N-th variant (0-based)")
      ->check(integer_at_least(0));
  s->callback([] {
    const std::vector<NeededKernel> kernels = needed_kernels(variants_of(src));
    if (index >= static_cast<int>(kernels.size()))
      throw CommandFailure(Usage, "--index " + std::to_string(index) +
                                      " is out of range: the plan has " +
                                      std::to_string(kernels.size()) + " variants (0-" +
                                      std::to_string(kernels.size() - 1) + ")");
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      if (index >= 0 && static_cast<int>(i) != index) continue;
      const KernelSource& k = kernels[i].source;
      std::cout << "// ---- variant " << i << ": " << kernels[i].name << "\n"
                << "// name expression: " << k.name_expression << "\n"
                << k.source << "\n";
    }
  });
}

}  // namespace fkv::cli
