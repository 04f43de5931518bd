// cache: compiled kernels on disk and in memory (SPEC §5). See docs/cache.md.
//
// Lookup order: memory -> writable root -> read-only roots -> compile, then publish into the
// writable root. Entries on disk are trusted only after their meta file parses, names exactly
// the requested key, and the image has the recorded size and XXH3-128 checksum.
#include "fkv/cache.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "fkv/errors.hpp"
#include "fkv/version.hpp"

namespace fkv {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::uint64_t kMaxImageBytes = 512ull << 20;  // a kernel image is tens of KiB
constexpr std::uint64_t kMaxMetaBytes = 1ull << 20;
constexpr auto kLockTimeout = std::chrono::seconds(60);     // then compile anyway
constexpr auto kStaleAfter = std::chrono::minutes(10);      // temp files / uncommitted images
constexpr const char* kMetaSuffix = ".meta.json";
constexpr const char* kMetaFormat = "fkv-jit cache entry";

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

std::string hex128(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (unsigned char b : c.digest) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string xxh3_hex(std::string_view bytes) { return hex128(XXH3_128bits(bytes.data(), bytes.size())); }

// Appends `value` with an 8-byte little-endian length in front, so that no two different
// field lists serialize to the same bytes.
void append_prefixed(std::string& out, std::string_view value) {
  std::uint64_t n = value.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(value);
}

bool is_digest(const std::string& s) {
  return s.size() == 32 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool safe_char(char c, bool allow_dot) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || (allow_dot && c == '.');
}

// Every run of characters outside the safe set becomes one '_'; no leading '-', '_' or '.'
// (so never "..", never an option-looking name), at most `max` characters, never empty.
std::string sanitize(std::string_view in, std::size_t max, bool allow_dot = false) {
  std::string out;
  for (char c : in) {
    if (safe_char(c, allow_dot)) {
      if (out.empty() && (c == '-' || c == '_' || c == '.')) continue;
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  if (out.size() > max) out.resize(max);
  while (!out.empty() && (out.back() == '_' || out.back() == '-' || out.back() == '.')) out.pop_back();
  return out.empty() ? "kernel" : out;
}

// ---- files -------------------------------------------------------------------------------

// Reads a regular file without following a symlink in its last component.
// Returns std::nullopt and sets `err` (errno in `code`) on failure.
std::optional<std::string> read_file(const fs::path& path, std::uint64_t max, std::string& err,
                                     int* code = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (code) *code = errno;
    err = errno_text(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    err = "not a regular file";
    return std::nullopt;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max) {
    ::close(fd);
    err = "file is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max) + " allowed";
    return std::nullopt;
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // the file grew (or st_size was 0)
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno_text(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max) {
      ::close(fd);
      err = "file grew past the " + std::to_string(max) + " bytes allowed";
      return std::nullopt;
    }
  }
  ::close(fd);
  out.resize(done);
  return out;
}

bool fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// Publishes `content` as dir/name: unique temp file in the same directory (O_CREAT|O_EXCL|
// O_NOFOLLOW, 0600) -> write -> fsync -> rename. A reader sees the old file, no file, or the
// whole new file, never a torn one. Returns "" or what went wrong (temp file removed).
std::string write_atomic(const fs::path& dir, const std::string& name, std::string_view content) {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::ostringstream tmp_name;
    tmp_name << name << ".tmp." << ::getpid() << '.' << counter.fetch_add(1) << '.' << std::hex << rng();
    fs::path tmp = dir / tmp_name.str();
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return "cannot create " + tmp.string() + ": " + errno_text(errno);
    std::string err;
    std::size_t done = 0;
    while (done < content.size() && err.empty()) {
      ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = "cannot write " + tmp.string() + ": " + errno_text(errno);
      else done += static_cast<std::size_t>(n);
    }
    if (err.empty() && ::fsync(fd) != 0) err = "cannot fsync " + tmp.string() + ": " + errno_text(errno);
    if (::close(fd) != 0 && err.empty()) err = "cannot close " + tmp.string() + ": " + errno_text(errno);
    if (err.empty() && ::rename(tmp.c_str(), (dir / name).c_str()) != 0)
      err = "cannot rename " + tmp.string() + ": " + errno_text(errno);
    if (!err.empty()) ::unlink(tmp.c_str());
    return err;
  }
  return "cannot create a unique temp file in " + dir.string();
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Whether a directory may hold cache entries that this process will hand to the driver:
// owned by this user (or, for read-only roots, by root) and not writable by group/others.
std::string trust_problem(const struct stat& st, bool allow_root_owner) {
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  uid_t me = ::geteuid();
  if (st.st_uid != me && !(allow_root_owner && st.st_uid == 0))
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "it is writable by group or others (mode " + mode_text(st.st_mode) + ")";
  return {};
}

// Creates `dir` (0700) if missing; it must then be a real directory (no symlink) we trust.
std::string ensure_private_dir(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return "cannot access " + dir.string() + ": " + errno_text(errno);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + dir.string() + ": " + errno_text(errno);
    if (::lstat(dir.c_str(), &st) != 0) return "cannot access " + dir.string() + ": " + errno_text(errno);
  }
  if (S_ISLNK(st.st_mode)) return dir.string() + " is a symbolic link";
  std::string p = trust_problem(st, false);
  return p.empty() ? p : dir.string() + ": " + p;
}

// The writable root itself may be a symlink (e.g. ~/.cache -> /data/cache); missing
// components are created 0700.
std::string prepare_root(const fs::path& root) {
  std::vector<fs::path> missing;
  for (fs::path p = root; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) break;
    if (errno != ENOENT) return "cannot access " + p.string() + ": " + errno_text(errno);
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + it->string() + ": " + errno_text(errno);
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return "cannot access " + root.string() + ": " + errno_text(errno);
  if (std::string p = trust_problem(st, false); !p.empty()) return p;
  if (::access(root.c_str(), W_OK | X_OK) != 0) return root.string() + " is not writable: " + errno_text(errno);
  return ensure_private_dir(root / "v1");
}

// Read-only roots may be owned by root (baked into an image) but not writable by others.
std::string readonly_dir_problem(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "cannot access " + dir.string() + ": " + errno_text(errno);
  std::string p = trust_problem(st, true);
  return p.empty() ? p : dir.string() + ": " + p;
}

// An exclusive advisory lock on a per-key lock file, so that processes sharing a cache do not
// all compile the same kernel at once. Never required for correctness (publishing is atomic):
// when flock is unsupported (some NFS setups) or the wait passes kLockTimeout, we go on
// without it.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      spdlog::debug("fkv-jit cache: no lock file {}: {}", path.string(), errno_text(errno));
      return;
    }
    auto t0 = Clock::now();
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      int e = errno;
      if (e == EINTR) continue;
      if (e != EWOULDBLOCK) {
        spdlog::debug("fkv-jit cache: cannot lock {}: {}; compiling without it", path.string(), errno_text(e));
        break;
      }
      if (Clock::now() - t0 > kLockTimeout) {
        spdlog::warn("fkv-jit cache: waited {} s for {}; compiling without the lock", kLockTimeout.count(),
                     path.string());
        break;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    ::close(fd_);
    fd_ = -1;
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// ---- entries -----------------------------------------------------------------------------

struct EntryPaths {
  fs::path dir, image, meta, lock;
};

EntryPaths entry_paths(const fs::path& root, const CacheKey& key, const std::string& short_name) {
  EntryPaths p;
  std::string nvrtc = key.field("nvrtc");
  std::string arch = key.field("arch");
  p.dir = root / "v1" / ("nvrtc-" + sanitize(nvrtc.empty() ? "unknown" : nvrtc, 32, true)) /
          sanitize(arch.empty() ? "unknown" : arch, 32, true);
  std::string base = sanitize(short_name, 64) + "-" + key.digest;
  p.image = p.dir / (base + (key.field("output") == "ptx" ? ".ptx" : ".cubin"));
  p.meta = p.dir / (base + kMetaSuffix);
  p.lock = p.dir / (base + ".lock");
  return p;
}

enum class EntryState { Ok, Missing, Bad };

struct LoadedEntry {
  EntryState state = EntryState::Missing;
  std::string problem;
  CompiledKernel kernel;
  fs::path image;
  std::string digest;
  std::string arch;
  std::uint64_t bytes = 0;  // image + meta
};

std::string describe_field_difference(const CacheKey::Fields& cached, const CacheKey::Fields& wanted) {
  for (std::size_t i = 0; i < std::max(cached.size(), wanted.size()); ++i) {
    if (i >= cached.size()) return "cached key lacks field '" + wanted[i].first + "'";
    if (i >= wanted.size()) return "cached key has extra field '" + cached[i].first + "'";
    if (cached[i] != wanted[i])
      return "key field '" + wanted[i].first + "' is '" + cached[i].second + "' in the entry, '" + wanted[i].second +
             "' requested";
  }
  return "key fields differ";
}

// Loads and verifies the entry whose meta file is `meta_path`. With `expect`, the entry must
// hold exactly that key; without, it must be self-consistent (its fields hash to its digest).
LoadedEntry load_entry(const fs::path& meta_path, const CacheKey* expect) {
  LoadedEntry e;
  auto bad = [&](std::string why) {
    e.state = EntryState::Bad;
    e.problem = std::move(why);
    return e;
  };
  std::string err;
  int code = 0;
  auto meta_text = read_file(meta_path, kMaxMetaBytes, err, &code);
  if (!meta_text) {
    if (code == ENOENT || code == ENOTDIR) return e;  // not committed: a miss, not an error
    return bad("cannot read meta file: " + err);
  }
  json meta = json::parse(*meta_text, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) return bad("meta file is not valid JSON");
  CacheKey key;
  std::string image_name, checksum;
  std::uint64_t size = 0;
  try {
    if (meta.at("format").get<std::string>() != kMetaFormat) return bad("meta file has an unknown format");
    for (const auto& f : meta.at("key")) key.fields.emplace_back(f.at(0).get<std::string>(), f.at(1).get<std::string>());
    e.digest = meta.at("digest").get<std::string>();
    image_name = meta.at("image").get<std::string>();
    size = meta.at("bytes").get<std::uint64_t>();
    checksum = meta.at("xxh3_128").get<std::string>();
    e.kernel.lowered_name = meta.at("lowered_name").get<std::string>();
    e.kernel.is_ptx = meta.at("ptx").get<bool>();
  } catch (const json::exception& ex) {
    return bad(std::string("meta file is malformed: ") + ex.what());
  }
  e.arch = key.field("arch");
  std::string base = meta_path.filename().string();
  base.resize(base.size() - std::string_view(kMetaSuffix).size());
  if (CacheKey::from_fields(key.fields).digest != e.digest) return bad("key fields do not hash to the recorded digest");
  if (base.size() < 33 || base.substr(base.size() - 32) != e.digest) return bad("file name does not match the digest");
  if (expect && key.fields != expect->fields) return bad(describe_field_difference(key.fields, expect->fields));
  std::string want_image = base + (e.kernel.is_ptx ? ".ptx" : ".cubin");
  if (image_name != want_image) return bad("meta file names image '" + image_name + "', expected '" + want_image + "'");
  if (e.kernel.lowered_name.empty()) return bad("meta file has an empty lowered name");
  e.image = meta_path.parent_path() / image_name;
  auto image = read_file(e.image, kMaxImageBytes, err, &code);
  if (!image) return bad(code == ENOENT ? "image file is missing" : "cannot read image: " + err);
  e.bytes = image->size() + meta_text->size();
  if (image->size() != size)
    return bad("image is " + std::to_string(image->size()) + " bytes, meta file says " + std::to_string(size) +
               " (truncated?)");
  if (xxh3_hex(*image) != checksum) return bad("image checksum does not match the meta file (corrupted)");
  e.kernel.image = std::move(*image);
  e.state = EntryState::Ok;
  return e;
}

// Meta first: once it is gone the entry is no longer committed, whatever happens next.
void remove_entry(const fs::path& meta, const fs::path& image) {
  ::unlink(meta.c_str());
  if (!image.empty()) ::unlink(image.c_str());
}

void touch(const fs::path& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_image_name(std::string_view n) { return ends_with(n, ".cubin") || ends_with(n, ".ptx"); }
bool is_temp_name(std::string_view n) { return n.find(".tmp.") != std::string_view::npos; }

// The <root>/v1/nvrtc-*/<arch>/ directories that exist (no symlinks followed in writable roots).
std::vector<fs::path> entry_dirs(const fs::path& root, bool follow) {
  std::vector<fs::path> out;
  std::error_code ec;
  auto is_dir = [&](const fs::directory_entry& d) {
    return follow ? d.is_directory(ec) : d.is_directory(ec) && !d.is_symlink(ec);
  };
  for (const auto& nv : fs::directory_iterator(root / "v1", ec)) {
    if (!is_dir(nv)) continue;
    std::error_code ec2;
    for (const auto& arch : fs::directory_iterator(nv.path(), ec2))
      if (is_dir(arch)) out.push_back(arch.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Also true for a time more than `age` in the future: after a clock jump, a crashed
// publisher's leftovers must not look fresh (and count against the size cap) for years.
bool older_than(const fs::path& p, std::chrono::seconds age) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec) return false;
  auto d = fs::file_time_type::clock::now() - t;
  return d > age || d < -age;
}

struct Scanned {
  CacheEntryInfo info;
  fs::path meta;
  fs::file_time_type mtime;
};

// Every entry of one root, verified (checksums included), plus uncommitted images.
std::vector<Scanned> scan_root(const fs::path& root, bool readonly) {
  std::vector<Scanned> out;
  for (const auto& dir : entry_dirs(root, readonly)) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string name = f.filename().string();
      if (is_temp_name(name)) continue;
      Scanned s;
      s.info.readonly = readonly;
      s.info.arch = dir.filename().string();
      std::string base;
      if (ends_with(name, kMetaSuffix)) {
        base = name.substr(0, name.size() - std::string_view(kMetaSuffix).size());
        s.meta = f;
        LoadedEntry e = load_entry(f, nullptr);
        s.info.ok = e.state == EntryState::Ok;
        s.info.problem = e.problem;
        s.info.path = e.image.empty() ? f : e.image;
        if (!e.arch.empty()) s.info.arch = e.arch;
        s.info.bytes = e.bytes;
        if (e.state != EntryState::Ok) {  // count what is there, for prune
          std::error_code ec2;
          for (const auto& part : {f, e.image}) {
            auto sz = part.empty() ? 0 : fs::file_size(part, ec2);
            if (!ec2) s.info.bytes += sz;
          }
        }
      } else if (is_image_name(name)) {
        base = name.substr(0, name.rfind('.'));
        if (fs::exists(dir / (base + kMetaSuffix))) continue;  // listed with its meta file
        s.info.path = f;
        s.info.ok = false;
        s.info.problem = "no meta file (uncommitted: a publish in progress or interrupted)";
        std::error_code ec2;
        s.info.bytes = fs::file_size(f, ec2);
      } else {
        continue;  // lock files
      }
      auto dash = base.rfind('-');
      s.info.kernel = dash == std::string::npos ? base : base.substr(0, dash);
      s.info.digest = dash == std::string::npos ? "" : base.substr(dash + 1);
      std::error_code ec3;
      s.mtime = fs::last_write_time(s.info.path, ec3);
      s.info.last_used = s.mtime;
      out.push_back(std::move(s));
    }
  }
  return out;
}

void remove_stale_temps(const fs::path& root) {
  for (const auto& dir : entry_dirs(root, false)) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec))
      if (is_temp_name(f.path().filename().string()) && older_than(f.path(), kStaleAfter)) ::unlink(f.path().c_str());
  }
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::optional<std::uint64_t> parse_byte_count(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const std::uint64_t n = std::stoull(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  std::uint64_t mul = 0;
  if (suffix.empty()) mul = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mul = 1ull << 30;
  if (mul == 0 || n > UINT64_MAX / mul) return std::nullopt;
  return n * mul;
}

// ---- key ---------------------------------------------------------------------------------

CacheKey CacheKey::from_fields(Fields fields) {
  std::string buf;
  for (const auto& [label, value] : fields) {
    append_prefixed(buf, label);
    append_prefixed(buf, value);
  }
  CacheKey k;
  k.digest = xxh3_hex(buf);
  k.fields = std::move(fields);
  return k;
}

std::string CacheKey::field(const std::string& label) const {
  for (const auto& [l, v] : fields)
    if (l == label) return v;
  return {};
}

CacheKey CacheKey::make(const KernelSource& src, const CompileOptions& options) {
  // Everything NVRTC sees, in this order (a new input gets a field, and kCacheSchemaVersion
  // is bumped, before it may influence an image):
  //   1. schema          kCacheSchemaVersion: meaning of these fields and the entry layout
  //   2. fkv             library version
  //   3. nvrtc           NVRTC version
  //   4. arch            target arch name ("sm_90a")
  //   5. options         the exact NVRTC options, one per line
  //   6. output          "cubin" or "ptx"
  //   7. template        template file name
  //   8. template_hash   XXH3-128 of the template and every header it includes
  //   9. specialization  KernelSpec::canonical(), from the source's "// fkv spec: " line
  //  10. source_hash     XXH3-128 of the specialized source and its in-memory headers
  //  11. kernel          NVRTC name expression
  std::string opts;
  for (const auto& o : nvrtc_options(options)) opts += o + "\n";
  std::string spec;
  constexpr std::string_view kSpecLine = "// fkv spec: ";
  if (src.source.compare(0, kSpecLine.size(), kSpecLine) == 0)
    spec = src.source.substr(kSpecLine.size(), src.source.find('\n') - kSpecLine.size());
  std::string seen;
  append_prefixed(seen, src.source);
  for (const auto& [name, text] : src.headers) {
    append_prefixed(seen, name);
    append_prefixed(seen, text);
  }
  return from_fields({
      {"schema", std::to_string(kCacheSchemaVersion)},
      {"fkv", kVersion},
      {"nvrtc", nvrtc_version()},
      {"arch", options.arch.name()},
      {"options", opts},
      {"output", options.ptx ? "ptx" : "cubin"},
      {"template", src.template_name},
      {"template_hash", src.template_hash},
      {"specialization", spec},
      {"source_hash", xxh3_hex(seen)},
      {"kernel", src.name_expression},
  });
}

std::string cache_short_name(const std::string& name_expression) {
  std::string_view e = name_expression;
  std::size_t lt = e.find('<');
  std::string_view head = e.substr(0, lt);
  std::size_t colons = head.rfind("::");
  std::size_t start = colons == std::string_view::npos ? 0 : colons + 2;
  return sanitize(e.substr(start), 64);
}

// ---- options -----------------------------------------------------------------------------

CacheOptions CacheOptions::from_env() {
  CacheOptions o;
  if (std::string dir = env("FKV_CACHE_DIR"); !dir.empty()) o.root = dir;
  else if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') o.root = fs::path(xdg) / "fkv-jit";
  else if (std::string home = env("HOME"); !home.empty()) o.root = fs::path(home) / ".cache" / "fkv-jit";
  std::stringstream ro(env("FKV_CACHE_READONLY_DIRS"));
  for (std::string part; std::getline(ro, part, ':');)
    if (!part.empty()) o.readonly_roots.emplace_back(part);
  if (std::string cap = env("FKV_CACHE_MAX_BYTES"); !cap.empty()) {
    if (auto n = parse_byte_count(cap)) o.max_bytes = *n;
    else spdlog::warn("fkv-jit cache: ignoring FKV_CACHE_MAX_BYTES='{}': expected a byte count such as 500000000 or 500M", cap);
  }
  std::string off = env("FKV_DISABLE_CACHE");
  o.disabled = off == "1" || off == "true" || off == "yes" || off == "on";
  return o;
}

std::string to_string(CacheOutcome o) {
  switch (o) {
    case CacheOutcome::MemoryHit: return "memory";
    case CacheOutcome::DiskHit: return "disk";
    case CacheOutcome::ReadOnlyHit: return "readonly";
    case CacheOutcome::Compiled: return "compiled";
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
  std::vector<fs::path> readonly_roots;  // the trusted ones

  std::mutex mu;
  std::unordered_map<std::string, Entry> memory;
  std::unordered_map<std::string, std::shared_future<Entry>> inflight;  // single flight
  std::atomic<bool> publish_warned{false};

  void warn_publish(const std::string& what) {
    if (!publish_warned.exchange(true))
      spdlog::warn("fkv-jit cache: cannot publish to {}: {}; kernels stay in memory for this process (further "
                   "failures are logged at debug level)",
                   options.root.string(), what);
    else
      spdlog::debug("fkv-jit cache: cannot publish: {}", what);
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
      spdlog::warn("fkv-jit cache: removing bad entry {}: {}", p.image.string(), e.problem);
      remove_entry(p.meta, p.image);
    }
    return std::nullopt;
  }

  std::pair<Entry, CacheOutcome> load_or_build(const CacheKey& key, const std::string& short_name,
                                               const std::function<CompiledKernel()>& build) {
    auto compiled = [&] { return Entry{std::make_shared<const CompiledKernel>(build()), {}}; };
    if (options.disabled) return {compiled(), CacheOutcome::Compiled};

    std::optional<EntryPaths> wp;
    if (!memory_only) {
      wp = entry_paths(options.root, key, short_name);
      LoadedEntry e = load_entry(wp->meta, &key);  // fast path, no lock
      if (e.state == EntryState::Ok) {
        touch(wp->image);
        touch(wp->meta);
        return {Entry{std::make_shared<const CompiledKernel>(std::move(e.kernel)), wp->image}, CacheOutcome::DiskHit};
      }
      if (e.state == EntryState::Bad) {  // re-check under the lock: a writer may be mid-publish
        FileLock lock(wp->lock);
        if (auto again = load_writable(*wp, key))
          return {Entry{std::make_shared<const CompiledKernel>(std::move(again->kernel)), wp->image},
                  CacheOutcome::DiskHit};
      }
    }

    for (const auto& ro : readonly_roots) {
      EntryPaths p = entry_paths(ro, key, short_name);
      if (!std::filesystem::exists(p.meta)) continue;
      std::string problem;
      for (const auto& d : {ro / "v1", p.dir.parent_path(), p.dir})
        if (problem.empty()) problem = readonly_dir_problem(d);
      if (!problem.empty()) {
        spdlog::warn("fkv-jit cache: skipping read-only entry {}: {}", p.image.string(), problem);
        continue;
      }
      LoadedEntry e = load_entry(p.meta, &key);
      if (e.state == EntryState::Ok)
        return {Entry{std::make_shared<const CompiledKernel>(std::move(e.kernel)), p.image}, CacheOutcome::ReadOnlyHit};
      if (e.state == EntryState::Bad)
        spdlog::warn("fkv-jit cache: skipping bad entry in read-only root {}: {}", p.image.string(), e.problem);
    }

    if (!wp) return {compiled(), CacheOutcome::Compiled};

    std::string problem = ensure_private_dir(wp->dir.parent_path());
    if (problem.empty()) problem = ensure_private_dir(wp->dir);
    if (!problem.empty()) {
      warn_publish(problem);
      return {compiled(), CacheOutcome::Compiled};
    }

    FileLock lock(wp->lock);  // another process may be compiling this key: wait for it
    if (auto e = load_writable(*wp, key))
      return {Entry{std::make_shared<const CompiledKernel>(std::move(e->kernel)), wp->image}, CacheOutcome::DiskHit};

    Entry built = compiled();
    fs::path published = publish(*wp, key, *built.kernel);
    built.path = published;
    if (!published.empty() && options.max_bytes) prune(options.max_bytes, published);
    return {built, CacheOutcome::Compiled};
  }

  // Image first, then the meta file, which commits the entry. Returns the image path, or
  // empty when the entry could not be written (disk full, read-only file system, ...).
  fs::path publish(const EntryPaths& p, const CacheKey& key, const CompiledKernel& k) {
    json fields = json::array();
    for (const auto& [l, v] : key.fields) fields.push_back({l, v});
    json meta = {
        {"format", kMetaFormat},
        {"digest", key.digest},
        {"key", fields},
        {"image", p.image.filename().string()},
        {"bytes", k.image.size()},
        {"xxh3_128", xxh3_hex(k.image)},
        {"lowered_name", k.lowered_name},
        {"ptx", k.is_ptx},
    };
    std::string err = write_atomic(p.dir, p.image.filename().string(), k.image);
    if (err.empty()) err = write_atomic(p.dir, p.meta.filename().string(), meta.dump(2) + "\n");
    if (!err.empty()) {
      remove_entry(p.meta, p.image);
      warn_publish(err);
      return {};
    }
    if (!fsync_dir(p.dir)) spdlog::debug("fkv-jit cache: cannot fsync {}", p.dir.string());
    return p.image;
  }

  // Removes least recently used entries (by image mtime; hits touch it) of the writable root
  // until it holds at most max_bytes. `keep` (the entry just published) is never removed.
  std::uint64_t prune(std::uint64_t max_bytes, const fs::path& keep = {}) {
    if (memory_only) return 0;
    remove_stale_temps(options.root);
    auto entries = scan_root(options.root, false);
    std::sort(entries.begin(), entries.end(), [](const Scanned& a, const Scanned& b) { return a.mtime < b.mtime; });
    std::uint64_t total = 0, removed = 0;
    for (const auto& s : entries) total += s.info.bytes;
    for (const auto& s : entries) {
      if (total <= max_bytes) break;
      if (s.info.path == keep) continue;
      if (s.meta.empty() && !older_than(s.info.path, kStaleAfter)) continue;  // maybe mid-publish
      remove_entry(s.meta, s.info.path);
      // Its lock file too, so evicted keys leave nothing behind. A process holding that lock
      // keeps it on the unlinked inode; at worst a second process compiles the key as well.
      fs::path lock = s.info.path;
      ::unlink(lock.replace_extension(".lock").c_str());
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
    spdlog::debug("fkv-jit cache: disabled (FKV_DISABLE_CACHE): kernels are compiled once per process");
    return;
  }
  for (const auto& ro : m.options.readonly_roots) {
    std::error_code ec;
    if (!m.options.root.empty() && fs::equivalent(ro, m.options.root, ec)) continue;  // it is the writable root
    std::string problem = readonly_dir_problem(ro);
    if (problem.empty() && fs::exists(ro / "v1")) problem = readonly_dir_problem(ro / "v1");
    if (problem.empty()) m.readonly_roots.push_back(ro);
    else spdlog::warn("fkv-jit cache: ignoring read-only cache root {}: {}", ro.string(), problem);
  }
  if (m.options.root.empty()) {
    spdlog::warn("fkv-jit cache: no cache directory (set FKV_CACHE_DIR, XDG_CACHE_HOME or HOME); kernels are cached "
                 "in memory only");
    return;
  }
  if (std::string problem = prepare_root(m.options.root); !problem.empty()) {
    CacheError refused("refusing cache root " + m.options.root.string() + ": " + problem +
                       ". Use a directory owned by this user with mode 0700 (chmod 700 DIR), or set FKV_CACHE_DIR");
    spdlog::warn("fkv-jit cache: {}; kernels are cached in memory only", refused.what());
    return;
  }
  m.memory_only = false;
}

KernelCache::~KernelCache() = default;

CacheResult KernelCache::get(const KernelSource& src, const CompileOptions& options) {
  // The short name only makes the file recognizable; entry_paths() sanitizes it again.
  const std::string name = src.short_name.empty() ? cache_short_name(src.name_expression) : src.short_name;
  return get(CacheKey::make(src, options), name, [&] { return compile(src, options); });
}

CacheResult KernelCache::get(const CacheKey& key, const std::string& short_name,
                             const std::function<CompiledKernel()>& build) {
  auto t0 = Clock::now();
  if (!is_digest(key.digest)) throw CacheError("cache key digest '" + key.digest + "' is not 32 hex digits");
  Impl& m = *impl_;
  std::promise<Impl::Entry> promise;
  {
    std::unique_lock lock(m.mu);
    if (auto it = m.memory.find(key.digest); it != m.memory.end())
      return {it->second.kernel, CacheOutcome::MemoryHit, it->second.path, seconds_since(t0)};
    if (auto it = m.inflight.find(key.digest); it != m.inflight.end()) {
      auto waiting = it->second;
      lock.unlock();
      const Impl::Entry& e = waiting.get();  // rethrows the builder's exception
      return {e.kernel, CacheOutcome::MemoryHit, e.path, seconds_since(t0)};
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
    return {entry.kernel, outcome, entry.path, seconds_since(t0)};
  } catch (...) {
    {
      std::lock_guard lock(m.mu);
      m.inflight.erase(key.digest);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

const CacheOptions& KernelCache::options() const { return impl_->options; }

bool KernelCache::memory_only() const { return impl_->memory_only; }

std::vector<CacheEntryInfo> KernelCache::list() const {
  std::vector<CacheEntryInfo> out;
  if (impl_->options.disabled) return out;
  if (!impl_->memory_only)
    for (auto& s : scan_root(impl_->options.root, false)) out.push_back(std::move(s.info));
  for (const auto& ro : impl_->readonly_roots)
    for (auto& s : scan_root(ro, true)) out.push_back(std::move(s.info));
  return out;
}

std::vector<CacheEntryInfo> KernelCache::verify() {
  std::vector<CacheEntryInfo> out;
  if (impl_->options.disabled) return out;
  if (!impl_->memory_only) {
    remove_stale_temps(impl_->options.root);
    for (auto& s : scan_root(impl_->options.root, false)) {
      bool uncommitted = s.meta.empty();
      if (!s.info.ok && (!uncommitted || older_than(s.info.path, kStaleAfter))) {
        spdlog::warn("fkv-jit cache: removing bad entry {}: {}", s.info.path.string(), s.info.problem);
        remove_entry(s.meta, s.info.path);
        s.info.removed = true;
      }
      out.push_back(std::move(s.info));
    }
  }
  for (const auto& ro : impl_->readonly_roots)
    for (auto& s : scan_root(ro, true)) out.push_back(std::move(s.info));
  return out;
}

std::uint64_t KernelCache::prune(std::uint64_t max_bytes) { return impl_->prune(max_bytes); }

std::size_t KernelCache::clear() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    m.memory.clear();
  }
  if (m.memory_only) return 0;
  std::size_t entries = 0;
  for (const auto& dir : entry_dirs(m.options.root, false)) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    // Meta files first: a clear that is interrupted leaves uncommitted images, never a
    // committed entry without its image.
    std::stable_partition(files.begin(), files.end(),
                          [](const fs::path& f) { return ends_with(f.filename().string(), kMetaSuffix); });
    for (const auto& f : files) {
      std::string n = f.filename().string();
      if (ends_with(n, kMetaSuffix)) ++entries;
      if (ends_with(n, kMetaSuffix) || is_image_name(n) || is_temp_name(n) || ends_with(n, ".lock"))
        ::unlink(f.c_str());
    }
    ::rmdir(dir.c_str());                // only when now empty
    ::rmdir(dir.parent_path().c_str());  // likewise
  }
  return entries;
}

KernelCache& KernelCache::global() {
  static KernelCache cache;
  return cache;
}

}  // namespace fkv
