// fkv-jit cache ls|verify|prune|clear: inspect and maintain the kernel cache (docs/cache.md).
//
// The commands act on the cache directory whatever FKV_DISABLE_CACHE says: they manage files,
// they do not compile. --cache-dir overrides FKV_CACHE_DIR / XDG_CACHE_HOME / HOME; read-only
// roots (FKV_CACHE_READONLY_DIRS) are listed and verified, never changed.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../cache_fs.hpp"
#include "commands.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/errors.hpp"

namespace fkv::cli {
namespace {

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string age(std::filesystem::file_time_type t) {
  using namespace std::chrono;
  if (t == std::filesystem::file_time_type{}) return "?";  // neither file's mtime could be read
  const auto s = duration_cast<seconds>(std::filesystem::file_time_type::clock::now() - t).count();
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%llds ago", static_cast<long long>(s));
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%lldm ago", static_cast<long long>(s / 60));
  else if (s < 2 * 86400)
    std::snprintf(buf, sizeof buf, "%lldh ago", static_cast<long long>(s / 3600));
  else
    std::snprintf(buf, sizeof buf, "%lldd ago", static_cast<long long>(s / 86400));
  return buf;
}

// A file name or path on one line of output: every control character escaped, newlines too.
std::string shown(std::string_view text) { return cache_fs::printable(text); }

// How a command uses the root it is given.
enum class Access {
  List,    // ls: a missing root is an empty cache; one this user cannot write is listed read-only
  Verify,  // verify: as ls, but a missing root is an error (a health check of a mistyped path)
  Write,   // prune, clear: a missing root is an empty cache; the root must be writable
};

// The cache the commands act on. They never create a root: one that does not exist is said
// on stderr and leaves `*missing` set (the root cleared: only read-only roots are left to
// check), or is an error (exit 6) for verify without read-only roots. A root that cannot be
// used is an error too (require_writable), not a silent fallback to memory as in the library.
CacheOptions options_for(const std::string& cache_dir, Access access, bool* missing = nullptr) {
  CacheOptions o = CacheOptions::from_env();
  if (!cache_dir.empty()) o.root = cache_dir;
  o.disabled = false;
  if (o.root.empty())
    throw CacheError(
        "no cache directory: pass --cache-dir DIR or set FKV_CACHE_DIR (or an absolute "
        "XDG_CACHE_HOME or HOME; relative ones are ignored)");
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(o.root, ec))) {
    const std::string none = "no cache at " + shown(o.root.string()) +
                             ": the directory does not exist (nothing was created)";
    if (access == Access::Verify && o.readonly_roots.empty()) throw CacheError(none);
    std::fprintf(stderr, "fkv-jit: note: %s\n", none.c_str());
    if (missing) *missing = true;
    o.root.clear();
    o.root_readonly = true;
  } else if (access != Access::Write && ::access(o.root.c_str(), W_OK) != 0 &&
             (errno == EROFS || errno == EACCES || errno == EPERM)) {
    // A cache baked into an image, on a read-only file system or owned by root, is checked the
    // way the runtime reads it: as a read-only root.
    std::fprintf(stderr,
                 "fkv-jit: note: %s is not writable (%s): checked read-only, nothing removed\n",
                 shown(o.root.string()).c_str(), cache_fs::errno_text(errno).c_str());
    o.root_readonly = true;
  }
  return o;
}

void require_writable(const KernelCache& cache) {
  if (cache.memory_only())
    throw CacheError("cannot use cache root " + cache.options().root.string() +
                     " (see the warning above); nothing was changed");
}

void print_table(const std::vector<CacheEntryInfo>& entries) {
  std::printf("%-48s %-7s %10s  %-10s %-3s %-8s %s\n", "kernel", "arch", "size", "last used", "ro",
              "status", "path");
  for (const auto& e : entries) {
    std::string status = e.ok ? "ok" : e.removed ? "removed" : e.in_progress ? "writing" : "BAD";
    std::printf("%-48s %-7s %10s  %-10s %-3s %-8s %s\n", shown(e.kernel).c_str(),
                shown(e.arch).c_str(), human_bytes(e.bytes).c_str(), age(e.last_used).c_str(),
                e.readonly ? "ro" : "", status.c_str(), shown(e.path.string()).c_str());
    if (!e.ok) std::printf("    %s\n", shown(e.problem).c_str());
  }
}

// Directories lookups refuse, one line each; verify counts them as problems.
void print_unusable(const std::vector<CacheDirProblem>& dirs) {
  for (const auto& d : dirs)
    std::printf("unusable directory%s: %s\n", d.readonly ? " (read-only root)" : "",
                shown(d.problem).c_str());
}

// Removals that failed: exit 6 (CacheFailure) naming them (the first in the message, every one
// on stderr when there are several).
void fail_on_removals(const std::vector<std::string>& failures, const std::string& what) {
  if (failures.empty()) return;
  if (failures.size() == 1) throw CommandFailure(CacheFailure, what + ": " + failures.front());
  for (const auto& f : failures) std::fprintf(stderr, "fkv-jit: %s\n", shown(f).c_str());
  throw CommandFailure(CacheFailure, what + ": " + std::to_string(failures.size()) +
                                         " files could not be removed (listed above), the first: " +
                                         failures.front());
}

std::string roots_text(const KernelCache& cache) {
  const CacheOptions& o = cache.options();
  std::string s;
  auto add = [&](const std::filesystem::path& root, bool readonly) {
    if (root.empty()) return;
    s += (s.empty() ? "" : ", ") + shown(root.string()) + (readonly ? " (read-only)" : "");
  };
  add(o.root, o.root_readonly);
  for (const auto& ro : o.readonly_roots) add(ro, true);
  return s.empty() ? "no cache root" : s;
}

// roots_text() when the writable root does not exist (options_for cleared it): named anyway.
std::string missing_root_text(const KernelCache& cache, const std::string& cache_dir) {
  const std::string root =
      shown(cache_dir.empty() ? CacheOptions::from_env().root.string() : cache_dir) +
      " (does not exist)";
  return cache.options().readonly_roots.empty() ? root : root + ", " + roots_text(cache);
}

struct VerifyArgs {
  VariantArgs variants;
  std::vector<std::string> archs;
  bool ptx = false;
};

// cache verify --config: every kernel `precompile` would build for these options must be in
// the writable root or a read-only root, with a valid entry (CacheEntryInfo::ok: meta parses,
// key fields hash to the digest, checksum matches). Looked up by the runtime's key
// (CacheKey::make over the generated source and the target), without compiling anything.
void verify_config(const std::string& cache_dir, const VerifyArgs& a) {
  if (a.variants.config.empty() || a.archs.empty())
    throw CommandFailure(
        Usage, "cache verify: --config and --arch go together (which kernels, for which devices)");
  const std::vector<ArchTarget> targets = targets_of(a.archs, a.ptx);
  const Variants v = variants_of(a.variants);
  KernelCache cache(options_for(cache_dir, Access::Verify));
  const std::vector<CacheEntryInfo> entries = cache.list();
  std::size_t missing = 0, total = 0;
  std::printf("%-44s %-13s %-8s %s\n", "kernel", "arch", "status", "path");
  const std::vector<NeededKernel> kernels = needed_kernels(v);
  for (const ArchTarget& t : targets) {
    for (const NeededKernel& k : kernels) {
      ++total;
      const CacheKey key = CacheKey::make(k.source, CompileOptions{t.arch, t.ptx});
      const CacheEntryInfo* found = nullptr;
      for (const auto& e : entries)
        // The first good copy, in lookup order (writable root first), else the first copy.
        if (e.digest == key.digest && (!found || (e.ok && !found->ok))) found = &e;
      const std::string status = !found ? "MISSING" : found->ok ? "ok" : "BAD";
      missing += status != "ok";
      std::printf("%-44s %-13s %-8s %s\n", k.name.c_str(), t.name().c_str(), status.c_str(),
                  found ? shown(found->path.string()).c_str() : "-");
      if (found && !found->ok) std::printf("    %s\n", shown(found->problem).c_str());
    }
  }
  std::printf("%zu kernels needed, %zu present and valid, %zu missing or bad, in %s\n", total,
              total - missing, missing, roots_text(cache).c_str());
  if (missing)
    throw CommandFailure(Incomplete,
                         std::to_string(missing) + " of " + std::to_string(total) +
                             " kernels the config needs are missing or bad: run fkv-jit precompile "
                             "with the same options");
}

}  // namespace

void add_cache_commands(CLI::App& app) {
  CLI::App* cache =
      app.add_subcommand("cache", "inspect and maintain the kernel cache (docs/cache.md)");
  cache->require_subcommand(1);
  static std::string cache_dir;
  auto add_dir = [](CLI::App* cmd) {
    add_cache_dir_option(
        cmd, cache_dir,
        "cache root (default: $FKV_CACHE_DIR, $XDG_CACHE_HOME/fkv-jit or ~/.cache/fkv-jit)");
  };

  CLI::App* ls =
      cache->add_subcommand("ls", "list the entries of the cache (and of read-only roots)");
  add_dir(ls);
  ls->callback([] {
    bool missing = false;
    KernelCache c(options_for(cache_dir, Access::List, &missing));
    const auto entries = c.list();
    print_table(entries);
    std::uint64_t bytes = 0;
    std::size_t bad = 0;
    for (const auto& e : entries) {
      bytes += e.bytes;
      bad += !e.ok && !e.in_progress;
    }
    std::printf("%zu entries, %s, %zu bad, in %s%s\n", entries.size(), human_bytes(bytes).c_str(),
                bad, (missing ? missing_root_text(c, cache_dir) : roots_text(c)).c_str(),
                c.memory_only() && !c.options().root_readonly ? " (writable root not usable)" : "");
    print_unusable(c.unusable_dirs());
  });

  CLI::App* verify = cache->add_subcommand(
      "verify",
      "check every entry's key and checksum; remove bad entries of the writable root (exit 6 if "
      "any "
      "was bad). With --config and --arch: check that every kernel the config needs is there "
      "and valid (exit 8 if not)");
  add_dir(verify);
  static VerifyArgs need;
  add_variant_options(verify, need.variants, false);
  verify->get_option("--config")->required(false);
  verify->add_option("--arch", need.archs,
                     "device arch, repeatable, as for precompile (with --config)");
  verify->add_flag("--ptx", need.ptx, "the kernels were precompiled with --ptx");
  verify->callback([] {
    if (!need.variants.config.empty() || !need.archs.empty()) return verify_config(cache_dir, need);
    KernelCache c(options_for(cache_dir, Access::Verify));
    if (!c.options().root_readonly) require_writable(c);
    std::vector<std::string> failures;
    const auto entries = c.verify(&failures);
    std::vector<CacheEntryInfo> bad;
    for (const auto& e : entries)
      if (!e.ok) bad.push_back(e);
    if (!bad.empty()) print_table(bad);
    // Entries in these cannot be seen at all (a symlinked nvrtc directory, an arch directory of
    // another user): every process runs memory-only for their kernels.
    const std::vector<CacheDirProblem> dirs = c.unusable_dirs();
    print_unusable(dirs);
    std::size_t removed = 0;
    for (const auto& e : bad) removed += e.removed;
    std::printf(
        "%zu entries checked, %zu bad (%zu removed, %zu left: in read-only roots, or could not "
        "be removed), %zu unusable directories\n",
        entries.size(), bad.size(), removed, bad.size() - removed, dirs.size());
    fail_on_removals(failures, "cache verify");
    if (!bad.empty() || !dirs.empty())
      throw CommandFailure(
          CacheFailure,
          bad.empty() ? std::to_string(dirs.size()) +
                            " unusable cache directories: lookups neither read nor write entries "
                            "in them; fix or remove them (listed above)"
                      : std::to_string(bad.size()) + " bad cache entries found" +
                            (dirs.empty() ? std::string()
                                          : " and " + std::to_string(dirs.size()) +
                                                " unusable cache directories"));
  });

  static std::string max_bytes;
  CLI::App* prune = cache->add_subcommand(
      "prune", "remove least recently used entries until the cache holds at most --max-bytes");
  add_dir(prune);
  prune->add_option("--max-bytes", max_bytes,
                    "size cap, e.g. 500000000, 500M, 2G (default: $FKV_CACHE_MAX_BYTES)");
  prune->callback([] {
    bool missing = false;
    KernelCache c(options_for(cache_dir, Access::Write, &missing));
    if (!missing) require_writable(c);
    std::uint64_t cap = c.options().max_bytes;
    if (!max_bytes.empty()) {
      auto n = parse_byte_count(max_bytes);
      if (!n)
        throw CommandFailure(Usage,
                             "--max-bytes '" + max_bytes + "' is not a byte count (e.g. 500M)");
      cap = *n;
    } else if (cap == 0) {
      throw CommandFailure(Usage, "no size cap: pass --max-bytes N or set FKV_CACHE_MAX_BYTES");
    }
    if (missing) return;  // nothing to prune (said on stderr)
    std::vector<std::string> failures;
    const std::uint64_t removed = c.prune(cap, &failures);
    std::uint64_t left = 0;
    for (const auto& e : c.list())
      if (!e.readonly) left += e.bytes;
    std::printf("removed %s; %s left in %s (cap %s)\n", human_bytes(removed).c_str(),
                human_bytes(left).c_str(), shown(c.options().root.string()).c_str(),
                human_bytes(cap).c_str());
    fail_on_removals(failures, "cache prune");
  });

  CLI::App* clear = cache->add_subcommand("clear", "remove every entry of the writable cache root");
  add_dir(clear);
  clear->callback([] {
    bool missing = false;
    KernelCache c(options_for(cache_dir, Access::Write, &missing));
    if (missing) return;  // nothing to clear (said on stderr)
    require_writable(c);
    std::vector<std::string> failures;
    const std::size_t n = c.clear(&failures);
    std::printf("removed %zu entries from %s\n", n, shown(c.options().root.string()).c_str());
    fail_on_removals(failures, "cache clear");
  });
}

}  // namespace fkv::cli
