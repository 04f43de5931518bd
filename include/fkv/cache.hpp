// cache: compiled kernels on disk and in memory (docs/cache.md).
//
// Key (XXH3-128 over labeled, length-prefixed fields, in this order): schema version,
// library version, NVRTC version, arch, NVRTC options, output kind (cubin/ptx), template name,
// template content hash, specialization (KernelSpec::canonical), hash of the specialized
// source and its in-memory headers, kernel name expression. See CacheKey::make (cache_key.hpp).
// Layout: <root>/v<schema>/nvrtc-<ver>/<arch>/<short_name>-<key>.cubin (+ .meta.json beside it,
// holding the key fields, the XXH3-128 checksum of the image and the lowered name); see
// cache_entry.hpp. File-system steps: cache_fs.hpp.
// Publish: unique temp file in the same directory (O_EXCL|O_NOFOLLOW) -> fsync -> rename; the
// image first, then the meta file, which marks the entry committed. Readers verify the
// checksum and key; a bad entry is logged, removed and recompiled, never handed to the driver.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fkv/cache_entry.hpp"
#include "fkv/cache_key.hpp"
#include "fkv/compiler.hpp"
#include "fkv/options.hpp"

namespace fkv {

struct CacheOptions {
  std::filesystem::path root;  // writable root; empty = memory only
  std::vector<std::filesystem::path> readonly_roots;
  std::uint64_t max_bytes = 0;  // 0 = no cap; else LRU prune after each publish
  bool disabled = false;        // FKV_DISABLE_CACHE=1: compile every time a process needs a kernel
  // `root` (when set) is read like the read-only roots, searched first, never written or
  // created; the cache has no writable root and does not warn about that. How `fkv-jit cache ls`
  // and `verify` check a cache this user cannot write.
  bool root_readonly = false;
  // How long a process waits for another process's lock on a key (compiling it) before it
  // compiles the kernel itself. Once a wait on a root has run this long, the lock's holder looks
  // hung, and every later wait of this process on that root (any KernelCache on it) lasts at
  // most kStalledLockWait: a precompile behind a hung process pays the timeout once, not once per
  // kernel. 0 = never wait (try the lock once).
  std::chrono::seconds lock_timeout = std::chrono::seconds(60);
  // The cache part of JitOptions: cache_dir ($FKV_CACHE_DIR, else $XDG_CACHE_HOME/fkv-jit, else
  // ~/.cache/fkv-jit), FKV_CACHE_READONLY_DIRS, FKV_CACHE_MAX_BYTES, FKV_DISABLE_CACHE.
  static CacheOptions from(const JitOptions& jit);
  // from(JitOptions::from_env()): reads the environment now; ConfigError on a malformed value.
  static CacheOptions from_env();
};

// The longest a lock wait lasts, in a process and root where one wait has already timed out.
inline constexpr std::chrono::seconds kStalledLockWait{1};

enum class CacheOutcome { MemoryHit, DiskHit, ReadOnlyHit, Compiled };
std::string to_string(CacheOutcome);

struct CacheResult {
  std::shared_ptr<const CompiledKernel> kernel;
  CacheOutcome outcome = CacheOutcome::Compiled;
  std::filesystem::path path;  // the entry on disk, empty when memory-only
  double seconds = 0;          // time this call took
};

// Parses a byte count: "500000000", "512K", "500M", "2G" (binary units). nullopt if malformed.
std::optional<std::uint64_t> parse_byte_count(const std::string& text);

// Thread-safe. Many threads asking for one key compile it once (single flight); many
// processes never see a torn file (atomic rename) and re-verify what they read.
class KernelCache {
 public:
  explicit KernelCache(CacheOptions options = CacheOptions::from(JitOptions::global()));
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // memory -> writable root -> read-only roots -> compile (+ publish), keyed and compiled with
  // jit's NVRTC options (FKV_NVRTC_OPTIONS); the two-argument form uses JitOptions::global().
  CacheResult get(const KernelSource& src, const CompileOptions& options, const JitOptions& jit);
  CacheResult get(const KernelSource& src, const CompileOptions& options);

  // The same lookup with the compile step supplied by the caller (fkv::compile for the
  // overload above; a counting fake in tests). The entry's directory comes from the key's
  // "nvrtc" and "arch" fields, its extension from the "output" field ("ptx" or "cubin").
  // `build` runs at most once per key and process at a time; its exceptions propagate to
  // every caller waiting on that key, and nothing is cached for it.
  CacheResult get(const CacheKey& key, const std::string& short_name,
                  const std::function<CompiledKernel()>& build);

  const CacheOptions& options() const;
  bool memory_only() const;  // true when no writable root could be used
  // Why the first publish of this cache failed ("" when none did), as the warning said it:
  // "cannot write <path>: No space left on device", "<dir>: it is not a directory", ...
  std::string publish_error() const;
  std::vector<CacheEntryInfo> list() const;  // entries of every root

  // The maintenance calls. Each one counts only what it really removed; a file it could not
  // remove (EACCES, EISDIR, EBUSY, ...) is appended to `failures` as "cannot remove <path>:
  // <errno text>" when the caller gives a list (and reports them), else logged as a warning.
  //
  // Checks each entry; removes bad ones in the writable root. A publish in progress (an image
  // whose meta file is not there yet, younger than 10 minutes, or a bad entry whose key lock is
  // held) is skipped, neither listed nor removed.
  std::vector<CacheEntryInfo> verify(std::vector<std::string>* failures = nullptr);
  // Directories of every root that lookups refuse (see CacheDirProblem); verify() cannot see
  // entries in them, so `cache verify` reports these as well.
  std::vector<CacheDirProblem> unusable_dirs() const;
  // LRU; returns the bytes of the entries actually removed.
  std::uint64_t prune(std::uint64_t max_bytes, std::vector<std::string>* failures = nullptr);
  // Removes every entry of the writable root (except those being published at that moment) and
  // empties the in-memory map; returns the number of entries actually removed.
  std::size_t clear(std::vector<std::string>* failures = nullptr);

  // While one is alive (fkv::precompile holds one), every kernel get() returns is put into the
  // writable root: a read-only hit, or a memory hit that is not on disk there, is published
  // there (the verified bytes, under the same key). Prune, the automatic one after each publish
  // included, keeps each of those entries, so a precompile run fills the root it was given, and
  // its own size cap never evicts part of the set it is building. Nested scopes are fine.
  class PrecompileScope {
   public:
    explicit PrecompileScope(KernelCache& cache);
    ~PrecompileScope();
    PrecompileScope(const PrecompileScope&) = delete;
    PrecompileScope& operator=(const PrecompileScope&) = delete;

   private:
    KernelCache& cache_;
  };

  // The process-wide cache, configured from JitOptions::global() on first use.
  static KernelCache& global();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fkv
