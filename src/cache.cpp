// cache: compiled kernels on disk and in memory. See docs/cache.md.
//
// Lookup order: memory -> writable root -> read-only roots -> compile, then publish into the
// writable root. Entries on disk are trusted only after their meta file parses, names exactly
// the requested key, and the image has the recorded size and XXH3-128 checksum
// (cache_entry.cpp); keys are built in cache_key.cpp, file-system steps in cache_fs.cpp.
#include "fkv/cache.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include "cache_fs.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"

namespace fkv {
namespace fs = std::filesystem;
using namespace cache_fs;
using namespace cache_entry;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Whether a lock wait on this root has timed out in this process (FileLock sets it): one flag
// per root, shared by every KernelCache on it, never destroyed (a cache may outlive statics).
std::atomic<bool>* lock_stall_flag(const fs::path& root) {
  static std::mutex mu;
  static auto& flags = *new std::map<std::string, std::unique_ptr<std::atomic<bool>>>;
  std::error_code ec;
  fs::path key = fs::weakly_canonical(root, ec);
  if (ec) key = root.lexically_normal();
  std::lock_guard<std::mutex> lock(mu);
  auto& flag = flags[key.string()];
  if (!flag) flag = std::make_unique<std::atomic<bool>>(false);
  return flag.get();
}

// A path in a log message, control characters escaped (cache_fs::printable).
std::string shown(const fs::path& p) { return printable(p.string()); }

// The lock file of the entry that `file` (its image or meta file) belongs to: names in an entry
// directory are "<short>-<digest>.<ext>", with no '.' before the extension.
fs::path lock_of(const fs::path& file) {
  const std::string n = file.filename().string();
  return file.parent_path() / (n.substr(0, n.find('.')) + ".lock");
}

// The longest path below a root that the cache opens: "/v1/nvrtc-<32>/<32>/<64>-<32 hex digits>
// .meta.json.tmp.<pid>.<counter>.<16 hex digits>" (cache_entry::entry_paths, write_atomic).
constexpr std::size_t kLongestEntryPath = 256;

// The fix to suggest for a root that was refused, by what is wrong with it: the root's path, a
// symbolic link that leads nowhere, a missing root and the directory it would be created in, a
// file, a read-only file system, the owner and mode, or (the root being fine) its v1/.
std::string root_advice(const fs::path& root) {
  if (root.string().size() + kLongestEntryPath > PATH_MAX)
    return "Set FKV_CACHE_DIR to a shorter path";
  const std::string elsewhere = "set FKV_CACHE_DIR to a directory this user can write";
  struct stat st {
  }, lst{};
  const bool link = ::lstat(root.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
  if (::stat(root.c_str(), &st) != 0) {
    const int e = errno;
    if (link) {
      std::error_code ec;
      const std::string target = shown(fs::read_symlink(root, ec));
      if (e == ELOOP)
        return "It is a symbolic link that leads back to itself (to " + target +
               "): point it at a directory, or " + elsewhere;
      return "It is a symbolic link to " + target +
             ", which does not exist: create that directory (mode 0700), or " + elsewhere;
    }
    if (e != ENOENT && e != ENOTDIR) return "Fix its path, or " + elsewhere;
    // Missing: the nearest existing directory above it says whether it can be created.
    fs::path above = root.parent_path();
    for (; !above.empty(); above = above.parent_path()) {
      if (::stat(above.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) break;
      if (above == above.parent_path()) break;
    }
    if (above.empty()) above = ".";
    if (::stat(above.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return shown(above) + " is " + file_kind(st.st_mode) +
               ", not a directory, so the root cannot be created below it: " + elsewhere;
      if (::access(above.c_str(), W_OK | X_OK) != 0)
        return errno == EROFS ? "It cannot be created: " + shown(above) +
                                    " is on a read-only file system; " + elsewhere
                              : "It cannot be created: this user cannot write " + shown(above) +
                                    "; create the root (mode 0700, owned by this user) as one "
                                    "who can, or " +
                                    elsewhere;
    }
    return "Create it (mode 0700), or " + elsewhere;
  }
  if (!S_ISDIR(st.st_mode))
    return "It is " + file_kind(st.st_mode) + ", not a directory: " + elsewhere +
           " (or move the file out of the way)";
  if (::access(root.c_str(), W_OK) != 0 && errno == EROFS)
    return "It is on a read-only file system: to read a cache there, name it in "
           "FKV_CACHE_READONLY_DIRS; to write one, set FKV_CACHE_DIR to a writable directory";
  if (st.st_uid != ::geteuid())
    return "It belongs to another user: " + elsewhere + " (one of its own, mode 0700)";
  if (trust_problem(st, false).empty() && ::access(root.c_str(), W_OK | X_OK) == 0)
    return "The root itself is fine: make " + shown(layout_dir(root)) +
           " a real directory owned by this user with mode 0700, or remove it (fkv-jit creates "
           "it again), or " +
           elsewhere;
  return "Make it private to this user (chmod 700 " + shown(root) + "), or " + elsewhere;
}

// A removal that failed: handed to the caller's list when it asked for one (it reports them),
// else logged.
void report_failure(const std::string& failure, std::vector<std::string>* failures) {
  if (failure.empty()) return;
  if (failures)
    failures->push_back(failure);
  else
    spdlog::warn("fkv-jit cache: {}", printable(failure));
}

}  // namespace

std::optional<std::uint64_t> parse_byte_count(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const std::uint64_t n = std::stoull(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  std::uint64_t mul = 0;
  if (suffix.empty())
    mul = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB")
    mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB")
    mul = 1ull << 30;
  if (mul == 0 || n > UINT64_MAX / mul) return std::nullopt;
  return n * mul;
}

// ---- options -----------------------------------------------------------------------------

CacheOptions CacheOptions::from(const JitOptions& jit) {
  CacheOptions o;
  o.root = jit.cache_dir;
  o.readonly_roots = jit.cache_readonly_dirs;
  o.max_bytes = jit.cache_max_bytes;
  o.disabled = jit.disable_cache;
  return o;
}

CacheOptions CacheOptions::from_env() { return from(JitOptions::from_env()); }

std::string to_string(CacheOutcome o) {
  switch (o) {
    case CacheOutcome::MemoryHit:
      return "memory";
    case CacheOutcome::DiskHit:
      return "disk";
    case CacheOutcome::ReadOnlyHit:
      return "readonly";
    case CacheOutcome::Compiled:
      return "compiled";
  }
  return "unknown";
}

// ---- cache -------------------------------------------------------------------------------

struct KernelCache::Impl {
  struct Entry {
    std::shared_ptr<const CompiledKernel> kernel;
    fs::path path;
  };

  CacheOptions options;
  bool memory_only = true;
  std::atomic<bool>* lock_stalled = nullptr;  // lock_stall_flag(options.root), once it is used
  std::vector<fs::path> readonly_roots;       // the trusted ones

  std::mutex mu;
  std::unordered_map<std::string, Entry> memory;
  std::unordered_map<std::string, std::shared_future<Entry>> inflight;  // single flight
  std::atomic<bool> publish_warned{false};

  // PrecompileScope: how many are alive, and the writable root's entries (image paths) that
  // prune keeps meanwhile. Guarded by `mu`.
  int scopes = 0;
  std::set<fs::path> pinned;

  std::string first_publish_error;  // guarded by `mu`

  void warn_publish(const std::string& what) {
    {
      std::lock_guard lock(mu);
      if (first_publish_error.empty()) first_publish_error = what;
    }
    if (!publish_warned.exchange(true))
      spdlog::warn(
          "fkv-jit cache: cannot publish to {}: {}; kernels stay in memory for this process "
          "(further failures are logged at debug level)",
          shown(options.root), printable(what));
    else
      spdlog::debug("fkv-jit cache: cannot publish: {}", printable(what));
  }

  bool in_scope() {
    std::lock_guard lock(mu);
    return scopes > 0;
  }

  void pin(const fs::path& image) {
    std::lock_guard lock(mu);
    if (scopes > 0 && !image.empty()) pinned.insert(image);
  }

  // Creates the entry's nvrtc and arch directories (0700) when missing. A concurrent
  // `fkv-jit cache clear` removes them once they are empty, which can happen between two of
  // our steps: when one vanished, make them again (a few times) instead of giving up.
  std::string ensure_entry_dirs(const EntryPaths& p) {
    for (int attempt = 0;; ++attempt) {
      std::string problem = ensure_private_dir(p.dir.parent_path());
      if (problem.empty()) problem = ensure_private_dir(p.dir);
      if (problem.empty()) return problem;
      const bool vanished = !fs::is_directory(p.dir.parent_path()) || !fs::is_directory(p.dir);
      if (!vanished || attempt == 3) return problem;  // there but not usable: a real problem
    }
  }

  // Loads the writable root's entry. A bad one is removed, under the key's lock when held.
  std::optional<LoadedEntry> load_writable(const EntryPaths& p, const CacheKey& key) {
    LoadedEntry e = load_entry(p.meta, &key);
    if (e.state == EntryState::Ok) {
      touch(p.image);
      touch(p.meta);
      return e;
    }
    if (e.state == EntryState::Bad) {
      spdlog::warn("fkv-jit cache: removing bad entry {}: {}", shown(p.image),
                   printable(e.problem));
      report_failure(remove_entry(p.meta, p.image), nullptr);
    }
    return std::nullopt;
  }

  std::pair<Entry, CacheOutcome> load_or_build(const CacheKey& key, const std::string& short_name,
                                               const std::function<CompiledKernel()>& build) {
    auto compiled = [&] {
      auto kernel = std::make_shared<const CompiledKernel>(build());
      // One line per build, which the multi-process stress test counts (FKV_LOG_LEVEL=debug).
      spdlog::debug("fkv-jit cache: compiled {} key {}", short_name, key.digest);
      return Entry{std::move(kernel), {}};
    };
    if (options.disabled) return {compiled(), CacheOutcome::Compiled};

    std::optional<EntryPaths> wp;
    if (!memory_only) {
      wp = entry_paths(options.root, key, short_name);
      // The directory checks of a publish, on every read: an entry in a directory that another
      // user could have written is not read (and the publish below refuses it too, with a warning).
      bool missing = false;
      std::string problem = entry_dir_problem(options.root, wp->dir, false, &missing);
      // Debug only: the publish below fails on the same check and warns (once per process).
      if (!problem.empty())
        spdlog::debug("fkv-jit cache: not reading {}: {}", shown(wp->image), printable(problem));
      LoadedEntry e;
      if (problem.empty() && !missing) e = load_entry(wp->meta, &key);  // fast path, no lock
      if (e.state == EntryState::Ok) {
        touch(wp->image);
        touch(wp->meta);
        return {Entry{std::make_shared<const CompiledKernel>(std::move(e.kernel)), wp->image},
                CacheOutcome::DiskHit};
      }
      if (e.state == EntryState::Bad) {  // re-check under the lock: a writer may be mid-publish
        FileLock lock(wp->lock, options.lock_timeout, lock_stalled, kStalledLockWait);
        if (auto again = load_writable(*wp, key))
          return {
              Entry{std::make_shared<const CompiledKernel>(std::move(again->kernel)), wp->image},
              CacheOutcome::DiskHit};
      }
    }

    for (const auto& ro : readonly_roots) {
      EntryPaths p = entry_paths(ro, key, short_name);
      if (!std::filesystem::exists(p.meta)) continue;
      bool missing = false;
      std::string problem = entry_dir_problem(ro, p.dir, true, &missing);
      if (missing) continue;
      if (!problem.empty()) {
        spdlog::warn("fkv-jit cache: skipping read-only entry {}: {}", shown(p.image),
                     printable(problem));
        continue;
      }
      LoadedEntry e = load_entry(p.meta, &key, true);
      if (e.state == EntryState::Ok)
        return {Entry{std::make_shared<const CompiledKernel>(std::move(e.kernel)), p.image},
                CacheOutcome::ReadOnlyHit};
      if (e.state == EntryState::Bad || e.state == EntryState::Unreadable)
        spdlog::warn("fkv-jit cache: skipping {} entry in read-only root {}: {}",
                     e.state == EntryState::Bad ? "bad" : "unreadable", shown(p.image),
                     printable(e.problem));
    }

    if (!wp) return {compiled(), CacheOutcome::Compiled};

    return publish_locked(*wp, key, compiled);
  }

  // Under the key's lock: the entry if another process published it meanwhile (DiskHit), else
  // make() published into the writable root (Compiled; path empty when that failed).
  std::pair<Entry, CacheOutcome> publish_locked(const EntryPaths& wp, const CacheKey& key,
                                                const std::function<Entry()>& make) {
    // Another process may be compiling this key: wait for its lock. The lock file keeps the
    // directory non-empty, so a concurrent `cache clear` leaves it (and our entry) alone once
    // we hold it; if the directory vanished before we could open the lock, make it again.
    std::optional<FileLock> lock;
    for (int attempt = 0; attempt < 4 && !(lock && lock->held()); ++attempt) {
      if (std::string problem = ensure_entry_dirs(wp); !problem.empty()) {
        warn_publish(problem);
        return {make(), CacheOutcome::Compiled};
      }
      lock.reset();
      lock.emplace(wp.lock, options.lock_timeout, lock_stalled, kStalledLockWait);
      if (!lock->held() && (lock->busy() || fs::is_directory(wp.dir)))
        break;  // flock unusable or timed out
    }
    if (auto e = load_writable(wp, key)) {
      pin(wp.image);
      return {Entry{std::make_shared<const CompiledKernel>(std::move(e->kernel)), wp.image},
              CacheOutcome::DiskHit};
    }

    Entry built = make();
    fs::path published = publish(wp, key, *built.kernel);
    built.path = published;
    pin(published);  // before the prune below, which would otherwise see it as any other entry
    if (!published.empty() && options.max_bytes) prune(options.max_bytes, published);
    return {built, CacheOutcome::Compiled};
  }

  // PrecompileScope: `e` (returned by a lookup) into the writable root when it is not there,
  // publishing its verified bytes; pinned against prune either way. Returns the entry's path
  // in the writable root, or empty when it cannot be written there.
  fs::path settle(const CacheKey& key, const std::string& short_name, const Entry& e) {
    if (memory_only || options.disabled || !e.kernel) return {};
    const EntryPaths wp = entry_paths(options.root, key, short_name);
    if (e.path == wp.image && fs::exists(wp.meta)) {
      pin(wp.image);
      return wp.image;
    }
    auto [entry, outcome] = publish_locked(wp, key, [&] { return Entry{e.kernel, {}}; });
    return entry.path;
  }

  // Image first, then the meta file, which commits the entry. Returns the image path, or
  // empty when the entry could not be written (disk full, read-only file system, ...).
  fs::path publish(const EntryPaths& p, const CacheKey& key, const CompiledKernel& k) {
    // A concurrent `fkv-jit cache clear` may remove the directory (or a temp file) under us:
    // make the directories again and retry a few times before calling it a failure.
    std::string err = publish_entry(p, key, k);
    for (int retry = 0; !err.empty() && retry < 3; ++retry)
      if (ensure_entry_dirs(p).empty()) err = publish_entry(p, key, k);
    if (!err.empty()) {
      warn_publish(err);
      return {};
    }
    if (!fsync_dir(p.dir)) spdlog::debug("fkv-jit cache: cannot fsync {}", p.dir.string());
    return p.image;
  }

  // Removes least recently used entries (by image mtime; hits touch it) of the writable root
  // until it holds at most max_bytes. `keep` (the entry just published) and the entries pinned
  // by a PrecompileScope are never removed. Returns the bytes really removed.
  std::uint64_t prune(std::uint64_t max_bytes, const fs::path& keep = {},
                      std::vector<std::string>* failures = nullptr) {
    if (memory_only) return 0;
    remove_stale_temps(options.root);
    auto entries = scan_root(options.root, false);
    std::sort(entries.begin(), entries.end(),
              [](const Scanned& a, const Scanned& b) { return a.mtime < b.mtime; });
    std::set<fs::path> kept;
    {
      std::lock_guard lock(mu);
      kept = pinned;
    }
    kept.insert(keep);
    std::uint64_t total = 0, removed = 0;
    for (const auto& s : entries) total += s.info.bytes;
    for (const auto& s : entries) {
      if (total <= max_bytes && max_bytes > 0) break;  // 0: every entry, empty ones too
      if (kept.count(s.info.path)) continue;
      if (s.untrusted_dir) continue;  // never touched: the directory is not ours alone
      if (s.meta.empty() && !older_than(s.info.path, kStaleAfter)) continue;  // maybe mid-publish
      if (std::string err = remove_entry(s.meta, s.info.path); !err.empty()) {
        report_failure(err, failures);
        continue;  // still there (at least in part): it still counts against the cap
      }
      // Its lock file too, so evicted keys leave nothing behind. A process holding that lock
      // keeps it on the unlinked inode; at worst a second process compiles the key as well.
      report_failure(remove_file(lock_of(s.info.path)), failures);
      total -= s.info.bytes;
      removed += s.info.bytes;
    }
    return removed;
  }
};

KernelCache::KernelCache(CacheOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = std::move(options);
  if (m.options.disabled) {
    spdlog::debug(
        "fkv-jit cache: disabled (FKV_DISABLE_CACHE): kernels are compiled once per process");
    return;
  }
  std::vector<fs::path> readonly_roots = m.options.readonly_roots;
  if (m.options.root_readonly && !m.options.root.empty())
    readonly_roots.insert(readonly_roots.begin(), m.options.root);
  for (const auto& ro : readonly_roots) {
    std::error_code ec;
    if (!m.options.root_readonly && !m.options.root.empty() &&
        fs::equivalent(ro, m.options.root, ec))
      continue;  // it is the writable root
    std::string problem = readonly_dir_problem(ro);
    if (problem.empty() && fs::exists(layout_dir(ro)))
      problem = readonly_dir_problem(layout_dir(ro));
    if (problem.empty())
      m.readonly_roots.push_back(ro);
    else
      spdlog::warn("fkv-jit cache: ignoring read-only cache root {}: {}", shown(ro),
                   printable(problem));
  }
  if (m.options.root_readonly) return;  // asked for: nothing is written, nothing to warn about
  if (m.options.root.empty()) {
    spdlog::warn(
        "fkv-jit cache: no cache directory (set FKV_CACHE_DIR, or an absolute XDG_CACHE_HOME or "
        "HOME: relative ones are ignored); kernels are cached in memory only");
    return;
  }
  std::string problem;
  if (m.options.root.string().size() + kLongestEntryPath > PATH_MAX)
    problem = "its entry paths would be longer than PATH_MAX (" + std::to_string(PATH_MAX) +
              " bytes): the path of the root is " + std::to_string(m.options.root.string().size()) +
              " bytes long";
  if (problem.empty()) problem = prepare_root(m.options.root);
  if (problem.empty()) problem = ensure_private_dir(layout_dir(m.options.root));
  if (!problem.empty()) {
    CacheError refused("refusing cache root " + shown(m.options.root) + ": " + printable(problem) +
                       ". " + root_advice(m.options.root));
    spdlog::warn("fkv-jit cache: {}; kernels are cached in memory only", refused.what());
    return;
  }
  m.lock_stalled = lock_stall_flag(m.options.root);
  m.memory_only = false;
}

KernelCache::~KernelCache() = default;

CacheResult KernelCache::get(const KernelSource& src, const CompileOptions& options) {
  return get(src, options, JitOptions::global());
}

CacheResult KernelCache::get(const KernelSource& src, const CompileOptions& options,
                             const JitOptions& jit) {
  // The short name only makes the file recognizable; entry_paths() sanitizes it again.
  const std::string name =
      src.short_name.empty() ? cache_short_name(src.name_expression) : src.short_name;
  return get(CacheKey::make(src, options, jit), name, [&] { return compile(src, options, jit); });
}

CacheResult KernelCache::get(const CacheKey& key, const std::string& short_name,
                             const std::function<CompiledKernel()>& build) {
  auto t0 = Clock::now();
  if (!is_cache_digest(key.digest))
    throw CacheError("cache key digest '" + key.digest + "' is not 32 hex digits");
  Impl& m = *impl_;
  CacheResult r = [&]() -> CacheResult {
    std::promise<Impl::Entry> promise;
    {
      std::unique_lock lock(m.mu);
      if (auto it = m.memory.find(key.digest); it != m.memory.end())
        return {it->second.kernel, CacheOutcome::MemoryHit, it->second.path, 0};
      if (auto it = m.inflight.find(key.digest); it != m.inflight.end()) {
        auto waiting = it->second;
        lock.unlock();
        const Impl::Entry& e = waiting.get();  // rethrows the builder's exception
        return {e.kernel, CacheOutcome::MemoryHit, e.path, 0};
      }
      m.inflight.emplace(key.digest, promise.get_future().share());
    }
    try {
      auto [entry, outcome] = m.load_or_build(key, short_name, build);
      {
        std::lock_guard lock(m.mu);
        m.memory[key.digest] = entry;
        m.inflight.erase(key.digest);
      }
      promise.set_value(entry);
      return {entry.kernel, outcome, entry.path, 0};
    } catch (...) {
      {
        std::lock_guard lock(m.mu);
        m.inflight.erase(key.digest);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  }();
  if (m.in_scope()) {  // a precompile: the kernel must be in the writable root
    const fs::path path = m.settle(key, short_name, Impl::Entry{r.kernel, r.path});
    if (path != r.path) {
      std::lock_guard lock(m.mu);
      if (auto it = m.memory.find(key.digest); it != m.memory.end() && !path.empty())
        it->second.path = path;
      r.path = path;
    }
  }
  r.seconds = seconds_since(t0);
  return r;
}

const CacheOptions& KernelCache::options() const { return impl_->options; }

bool KernelCache::memory_only() const { return impl_->memory_only; }

std::string KernelCache::publish_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->first_publish_error;
}

std::vector<CacheEntryInfo> KernelCache::list() const {
  std::vector<CacheEntryInfo> out;
  if (impl_->options.disabled) return out;
  if (!impl_->memory_only)
    for (auto& s : scan_root(impl_->options.root, false)) out.push_back(std::move(s.info));
  for (const auto& ro : impl_->readonly_roots)
    for (auto& s : scan_root(ro, true)) out.push_back(std::move(s.info));
  return out;
}

std::vector<CacheEntryInfo> KernelCache::verify(std::vector<std::string>* failures) {
  std::vector<CacheEntryInfo> out;
  if (impl_->options.disabled) return out;
  if (!impl_->memory_only) {
    remove_stale_temps(impl_->options.root);
    for (auto& s : scan_root(impl_->options.root, false)) {
      if (s.info.in_progress) continue;  // another process is between its two renames
      if (s.unreadable) {                // reported as it is, never removed
        out.push_back(std::move(s.info));
        continue;
      }
      if (!s.info.ok && !s.untrusted_dir && !s.meta.empty()) {
        // Confirm under the key's lock, as a lookup does: a publisher holds it from compile to
        // commit, and between its two renames the new image sits beside the old meta file.
        FileLock lock(lock_of(s.meta), std::chrono::seconds(0));
        if (lock.busy()) continue;  // being written right now
        LoadedEntry again = load_entry(s.meta, nullptr);
        if (again.state != EntryState::Bad) continue;  // replaced meanwhile (or gone)
      }
      if (!s.info.ok && !s.untrusted_dir) {
        spdlog::warn("fkv-jit cache: removing bad entry {}: {}", shown(s.info.path),
                     printable(s.info.problem));
        if (std::string err = remove_entry(s.meta, s.info.path); err.empty()) {
          s.info.removed = true;
        } else {
          report_failure(err, failures);
          s.info.problem += "; " + err;
        }
      }
      out.push_back(std::move(s.info));
    }
  }
  for (const auto& ro : impl_->readonly_roots)
    for (auto& s : scan_root(ro, true))
      if (!s.info.in_progress) out.push_back(std::move(s.info));
  return out;
}

std::vector<CacheDirProblem> KernelCache::unusable_dirs() const {
  std::vector<CacheDirProblem> out;
  if (impl_->options.disabled) return out;
  if (!impl_->memory_only) out = cache_entry::unusable_dirs(impl_->options.root, false);
  for (const auto& ro : impl_->readonly_roots)
    for (auto& d : cache_entry::unusable_dirs(ro, true)) out.push_back(std::move(d));
  return out;
}

std::uint64_t KernelCache::prune(std::uint64_t max_bytes, std::vector<std::string>* failures) {
  return impl_->prune(max_bytes, {}, failures);
}

std::size_t KernelCache::clear(std::vector<std::string>* failures) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    m.memory.clear();
  }
  if (m.memory_only) return 0;
  std::size_t entries = 0;
  for (const auto& dir : entry_dirs(m.options.root, false)) {
    // Never into a directory a lookup refuses (another owner, writable by others): its files
    // are not ours to remove. Named as a failure, so that the caller does not report "empty".
    if (std::string problem = entry_dir_problem(m.options.root, dir, false, nullptr);
        !problem.empty()) {
      report_failure("left alone: " + problem, failures);
      continue;
    }
    // One entry at a time, under its key's lock, so that a clear running beside a publish (which
    // holds that lock from compile to commit) never removes half of a new entry: an entry whose
    // lock is busy is being written right now and is left alone.
    std::map<std::string, std::vector<fs::path>> by_entry;  // "<short>-<digest>" -> its files
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      const std::string n = f.path().filename().string();
      if (ends_with(n, kMetaSuffix) || is_image_name(n) || is_temp_name(n) || ends_with(n, ".lock"))
        by_entry[n.substr(0, n.find('.'))].push_back(f.path());
    }
    for (auto& [base, files] : by_entry) {
      FileLock lock(dir / (base + ".lock"), std::chrono::seconds(0));
      if (lock.busy()) continue;
      // Meta files first: a clear that is interrupted leaves uncommitted images, never a
      // committed entry without its image. The lock file goes last, while we hold it. An entry
      // counts as removed once its meta file is gone (it is no longer committed).
      std::stable_partition(files.begin(), files.end(), [](const fs::path& f) {
        return ends_with(f.filename().string(), kMetaSuffix);
      });
      bool kept = false;  // a meta file could not be removed: leave the entry whole
      for (const auto& f : files) {
        const std::string n = f.filename().string();
        const bool meta = ends_with(n, kMetaSuffix);
        if (ends_with(n, ".lock") || (kept && !meta)) continue;
        const std::string err = remove_file(f);
        report_failure(err, failures);
        if (meta && err.empty()) ++entries;
        if (meta && !err.empty()) kept = true;
      }
      if (!kept) report_failure(remove_file(dir / (base + ".lock")), failures);
    }
    ::rmdir(dir.c_str());                // only when now empty
    ::rmdir(dir.parent_path().c_str());  // likewise
  }
  return entries;
}

KernelCache::PrecompileScope::PrecompileScope(KernelCache& cache) : cache_(cache) {
  std::lock_guard lock(cache_.impl_->mu);
  ++cache_.impl_->scopes;
}

KernelCache::PrecompileScope::~PrecompileScope() {
  std::lock_guard lock(cache_.impl_->mu);
  if (--cache_.impl_->scopes == 0) cache_.impl_->pinned.clear();
}

KernelCache& KernelCache::global() {
  // Never destroyed: Runtime::global() holds it, and atexit handlers may still call the library.
  static KernelCache& cache = *new KernelCache(CacheOptions::from(JitOptions::global()));
  return cache;
}

}  // namespace fkv