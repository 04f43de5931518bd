// Fault injection for the kernel cache (issue 6, docs/reliability.md): processes killed while
// compiling and publishing, a full disk, read-only and vanishing roots, planted symlinks,
// entries of other NVRTC/library versions, and clock skew under the size cap.
//
// After every fault: no torn or foreign entry is ever returned (each result is compared with
// what the builder makes for that key), the next KernelCache recovers by itself, and the log
// says what happened. Everything runs on the CPU with a fake, counting builder.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "fkv/cache.hpp"
#include "fkv/errors.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using fkv::CacheKey;
using fkv::CacheOutcome;
using fkv::CompiledKernel;
using fkv::KernelCache;
using Clock = std::chrono::steady_clock;

namespace {

using TempDir = fkv_test::TempDir;

CacheKey key_of(const std::string& variant, const std::string& fkv_version = "0.1.0",
                const std::string& nvrtc = "12.8") {
  return CacheKey::from_fields({
      {"schema", "1"},
      {"fkv", fkv_version},
      {"nvrtc", nvrtc},
      {"arch", "sm_90"},
      {"options", "-std=c++17\n--gpu-architecture=sm_90\n"},
      {"output", "cubin"},
      {"template", "fused_kv.cu"},
      {"specialization", "variant=" + variant},
      {"kernel", "fkv_kernels::fused_kv_materialize<" + variant + ">"},
  });
}

// Deterministic bytes per key: a returned image that differs is torn or foreign.
CompiledKernel fake_kernel(const CacheKey& key, std::size_t bytes = 2048) {
  CompiledKernel k;
  k.image = "FAKE-CUBIN " + key.digest + " ";
  for (std::size_t i = 0; k.image.size() < bytes; ++i)
    k.image +=
        static_cast<char>('a' + (i * 13 + static_cast<unsigned char>(key.digest[i % 32])) % 26);
  k.lowered_name = "_Z8fused_kv_" + key.digest;
  return k;
}

bool is_expected(const fkv::CacheResult& r, const CacheKey& key, std::size_t bytes = 2048) {
  CompiledKernel want = fake_kernel(key, bytes);
  return r.kernel && r.kernel->image == want.image && r.kernel->lowered_name == want.lowered_name;
}

std::string short_name(const CacheKey& key) { return fkv::cache_short_name(key.field("kernel")); }

fkv::CacheOptions options_for(const fs::path& root, std::uint64_t max_bytes = 0) {
  fkv::CacheOptions o;
  o.root = root;
  o.max_bytes = max_bytes;
  return o;
}

using LogCapture = fkv_test::LogCapture;

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec) || e.is_symlink(ec)) out.push_back(e.path());
  return out;
}

int count_named(const fs::path& dir, const std::string& needle) {
  int n = 0;
  for (const auto& f : files_under(dir))
    n += f.filename().string().find(needle) != std::string::npos;
  return n;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spill(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

fs::path meta_of(const fs::path& image) {
  std::string s = image.string();
  return fs::path(s.substr(0, s.rfind('.')) + ".meta.json");
}

// Runs `body` in a forked child and returns what it reports: "" when every check passed,
// else the first failure. The child never returns into Catch.
std::string in_child(const std::function<std::string()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string report;
    try {
      report = body();
    } catch (const std::exception& e) {
      report = std::string("exception: ") + e.what();
    }
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(report.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    report.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status))
    return "child died with signal " + std::to_string(WTERMSIG(status)) + " " + report;
  if (WEXITSTATUS(status) != 0 && report.empty())
    return "child exited " + std::to_string(WEXITSTATUS(status));
  return report;
}

#define CHILD_CHECK(cond)                                                                         \
  do {                                                                                            \
    if (!(cond)) return std::string("failed: " #cond " (line ") + std::to_string(__LINE__) + ")"; \
  } while (0)

void set_mtime(const fs::path& p, std::chrono::system_clock::time_point t) {
  auto since = t.time_since_epoch();
  auto s = std::chrono::duration_cast<std::chrono::seconds>(since);
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(s.count());
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& f : files_under(dir)) {
    std::string name = f.filename().string();
    if (name.find(".lock") == std::string::npos) n += fs::file_size(f);
  }
  return n;
}

// Unprivileged uid for permission tests when the suite runs as root (root ignores modes).
constexpr uid_t kNobody = 65534;

// False where uid 65534 cannot own files (e.g. a user namespace that does not map it).
bool give_to_nobody(const fs::path& dir) {
  if (::lchown(dir.c_str(), kNobody, kNobody) != 0) return false;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (::lchown(e.path().c_str(), kNobody, kNobody) != 0) return false;
  return true;
}

std::string drop_root() {
  if (::geteuid() != 0) return {};
  if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) return "cannot drop to uid 65534";
  return {};
}

}  // namespace

TEST_CASE("SIGKILL at random points while compiling and publishing", "[faults][kill]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  std::vector<CacheKey> keys;
  for (int i = 0; i < 16; ++i) keys.push_back(key_of("kill" + std::to_string(i)));
  const int kKills = 100;
  std::mt19937 rng(20240606);
  int committed_seen = 0, orphans_seen = 0, temps_seen = 0, recovered_hits = 0;
  double slowest_recovery = 0;

  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    const unsigned child_seed = rng();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Publish the key set over and over (clear, then get each key), compiling slowly now
      // and then, until killed.
      spdlog::set_level(spdlog::level::off);
      std::mt19937 crng(child_seed);
      while (true) {
        KernelCache c(options_for(root));
        c.clear();
        for (const auto& key : keys)
          c.get(key, short_name(key), [&] {
            if (crng() % 4 == 0)
              std::this_thread::sleep_for(std::chrono::microseconds(crng() % 3000));
            return fake_kernel(key);
          });
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 40000));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));

    // What the crash left: committed entries must all verify; images without meta files are
    // uncommitted leftovers, never entries.
    LogCapture log;
    KernelCache after(options_for(root));
    for (const auto& e : after.list()) {
      INFO("after kill " << kill_no << ": " << e.path << ": " << e.problem);
      if (e.ok) {
        ++committed_seen;
      } else {
        CHECK(e.problem.find("uncommitted") != std::string::npos);
        ++orphans_seen;
      }
    }
    temps_seen += count_named(root, ".tmp.");
    // The next run recovers by itself, without waiting for the dead process's locks.
    auto t0 = Clock::now();
    for (const auto& key : keys) {
      auto r = after.get(key, short_name(key), [&] { return fake_kernel(key); });
      INFO("after kill " << kill_no << ", key " << key.field("specialization"));
      CHECK(is_expected(r, key));
      recovered_hits += r.outcome == CacheOutcome::DiskHit;
    }
    slowest_recovery =
        std::max(slowest_recovery, std::chrono::duration<double>(Clock::now() - t0).count());
    CHECK(log.text().empty());  // a killed writer leaves nothing that a reader must complain about
  }
  CHECK(slowest_recovery < 5.0);

  // Ten minutes later, verify() sweeps what the crashes left behind (temp files and
  // uncommitted images); committed entries stay.
  for (const auto& f : files_under(root))
    set_mtime(f, std::chrono::system_clock::now() - std::chrono::minutes(11));
  KernelCache sweep(options_for(root));
  for (const auto& e : sweep.verify()) CHECK(e.ok);
  CHECK(count_named(root, ".tmp.") == 0);
  CHECK(sweep.list().size() == keys.size());
  WARN("SIGKILL: " << kKills << " kills; seen after them: " << committed_seen
                   << " committed entries (all verified), " << orphans_seen
                   << " uncommitted images, " << temps_seen << " temp files; " << recovered_hits
                   << " disk hits on recovery; slowest recovery " << slowest_recovery << " s");
}

TEST_CASE("a process killed while holding a key's lock does not stall the next one",
          "[faults][kill]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  const fs::path started = tmp.path / "compiling";
  CacheKey key = key_of("lock-holder");
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    spdlog::set_level(spdlog::level::off);
    KernelCache c(options_for(root));
    c.get(key, short_name(key), [&]() -> CompiledKernel {
      spill(started, "x");
      std::this_thread::sleep_for(std::chrono::seconds(60));
      ::_exit(3);
    });
    ::_exit(4);
  }
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!fs::exists(started) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(started));
  REQUIRE(::kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);

  KernelCache next(options_for(root));
  auto t0 = Clock::now();
  auto r = next.get(key, short_name(key), [&] { return fake_kernel(key); });
  double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(r.outcome == CacheOutcome::Compiled);
  CHECK(is_expected(r, key));
  CHECK(waited < 2.0);  // flock is released with the process, no 60 s lock timeout
}

TEST_CASE("disk full (RLIMIT_FSIZE): clear warning, correct kernel from memory, no leftovers",
          "[faults][disk]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  // The image (4 KiB) does not fit: the first write fails.
  // The image (400 B) fits but its meta file does not: the image must not be left behind.
  for (std::size_t image_bytes : {std::size_t{4096}, std::size_t{400}}) {
    DYNAMIC_SECTION("image of " << image_bytes << " bytes") {
      CacheKey key = key_of("full" + std::to_string(image_bytes));
      { KernelCache prepare(options_for(root)); }  // directories exist before the limit
      std::string report = in_child([&]() -> std::string {
        ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
        struct rlimit lim {};
        lim.rlim_cur = lim.rlim_max = 600;
        CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
        LogCapture log;
        KernelCache c(options_for(root));
        CHILD_CHECK(!c.memory_only());
        auto r = c.get(key, short_name(key), [&] { return fake_kernel(key, image_bytes); });
        CHILD_CHECK(r.outcome == CacheOutcome::Compiled);
        CHILD_CHECK(is_expected(r, key, image_bytes));
        CHILD_CHECK(r.path.empty());  // not on disk
        if (!log.has("cannot publish") || !log.has("File too large") || !log.has("in memory"))
          return "warning does not say what happened: " + log.text();
        auto again = c.get(key, short_name(key), [&] { return fake_kernel(key, image_bytes); });
        CHILD_CHECK(again.outcome == CacheOutcome::MemoryHit);
        CHILD_CHECK(is_expected(again, key, image_bytes));
        return {};
      });
      CHECK(report == "");
      // Nothing half-written stays: no temp file, no image without its meta file.
      CHECK(count_named(root, ".tmp.") == 0);
      CHECK(count_named(root, ".cubin") == 0);
      CHECK(count_named(root, ".meta.json") == 0);
      // Space again: the next run publishes.
      KernelCache next(options_for(root));
      auto r = next.get(key, short_name(key), [&] { return fake_kernel(key, image_bytes); });
      CHECK(r.outcome == CacheOutcome::Compiled);
      CHECK(!r.path.empty());
      KernelCache later(options_for(root));
      CHECK(
          later.get(key, short_name(key), [&] { return fake_kernel(key, image_bytes); }).outcome ==
          CacheOutcome::DiskHit);
    }
  }
}

TEST_CASE("read-only root: at start and mid-run", "[faults][readonly]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  CacheKey old_key = key_of("ro-old"), new_key = key_of("ro-new");
  {
    KernelCache seed(options_for(root));
    REQUIRE(seed.get(old_key, short_name(old_key), [&] { return fake_kernel(old_key); }).outcome ==
            CacheOutcome::Compiled);
  }
  if (::geteuid() == 0 && !give_to_nobody(tmp.path)) {
    WARN(
        "running as root and cannot chown to uid 65534: read-only root test skipped (root ignores "
        "modes)");
    return;
  }

  SECTION("root mode 0500 before the cache opens: memory only, with a warning naming the root") {
    std::string report = in_child([&]() -> std::string {
      if (auto e = drop_root(); !e.empty()) return e;
      CHILD_CHECK(::chmod(root.c_str(), 0500) == 0);
      LogCapture log;
      KernelCache c(options_for(root));
      CHILD_CHECK(c.memory_only());
      if (!log.has("not writable") || !log.has(root.string())) return "warning: " + log.text();
      auto r = c.get(new_key, short_name(new_key), [&] { return fake_kernel(new_key); });
      CHILD_CHECK(r.outcome == CacheOutcome::Compiled);
      CHILD_CHECK(is_expected(r, new_key));
      CHILD_CHECK(c.prune(0) == 0);  // a memory-only cache never touches the root
      CHILD_CHECK(::chmod(root.c_str(), 0700) == 0);
      return {};
    });
    CHECK(report == "");
  }
  SECTION(
      "entry directory made read-only mid-run: old entries still hit, new ones stay in memory") {
    std::string report = in_child([&]() -> std::string {
      if (auto e = drop_root(); !e.empty()) return e;
      LogCapture log;
      KernelCache c(options_for(root));
      CHILD_CHECK(!c.memory_only());
      auto old_hit = c.get(old_key, short_name(old_key), [&] { return fake_kernel(old_key); });
      CHILD_CHECK(old_hit.outcome == CacheOutcome::DiskHit);
      fs::path dir = old_hit.path.parent_path();
      CHILD_CHECK(::chmod(dir.c_str(), 0500) == 0);
      auto r = c.get(new_key, short_name(new_key), [&] { return fake_kernel(new_key); });
      CHILD_CHECK(r.outcome == CacheOutcome::Compiled);
      CHILD_CHECK(is_expected(r, new_key));
      if (!log.has("cannot publish") || !log.has("Permission denied"))
        return "warning: " + log.text();
      KernelCache other(options_for(root));  // another process: the old entry is still served
      auto again = other.get(old_key, short_name(old_key), [&] { return fake_kernel(old_key); });
      CHILD_CHECK(again.outcome == CacheOutcome::DiskHit);
      CHILD_CHECK(is_expected(again, old_key));
      CHILD_CHECK(::chmod(dir.c_str(), 0700) == 0);
      KernelCache fixed(options_for(root));  // writable again: the next run publishes
      CHILD_CHECK(
          fixed.get(new_key, short_name(new_key), [&] { return fake_kernel(new_key); }).outcome ==
          CacheOutcome::Compiled);
      KernelCache later(options_for(root));
      CHILD_CHECK(
          later.get(new_key, short_name(new_key), [&] { return fake_kernel(new_key); }).outcome ==
          CacheOutcome::DiskHit);
      return {};
    });
    CHECK(report == "");
  }
}

TEST_CASE("a root that vanishes between calls", "[faults][vanish]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  CacheKey a = key_of("vanish-a"), b = key_of("vanish-b");
  LogCapture log;
  KernelCache c(options_for(root));
  REQUIRE(c.get(a, short_name(a), [&] { return fake_kernel(a); }).outcome ==
          CacheOutcome::Compiled);
  fs::remove_all(root);

  auto rb = c.get(b, short_name(b), [&] { return fake_kernel(b); });
  CHECK(rb.outcome == CacheOutcome::Compiled);
  CHECK(is_expected(rb, b));
  CHECK(log.has("cannot"));  // names the path it could not create or write
  CHECK(log.has(root.string()));
  auto ra = c.get(a, short_name(a), [&] { return fake_kernel(a); });
  CHECK(ra.outcome == CacheOutcome::MemoryHit);
  CHECK(is_expected(ra, a));
  // Maintenance on a missing root neither throws nor recreates entries.
  CHECK_NOTHROW(c.list());
  CHECK_NOTHROW(c.verify());
  CHECK(c.prune(0) == 0);
  CHECK_NOTHROW(c.clear());

  // The next run recreates the root and publishes again.
  KernelCache next(options_for(root));
  CHECK_FALSE(next.memory_only());
  CHECK(next.get(a, short_name(a), [&] { return fake_kernel(a); }).outcome ==
        CacheOutcome::Compiled);
  KernelCache later(options_for(root));
  CHECK(later.get(a, short_name(a), [&] { return fake_kernel(a); }).outcome ==
        CacheOutcome::DiskHit);
}

TEST_CASE("planted symlinks are never followed", "[faults][symlink]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  const fs::path victim = tmp.path / "victim";
  const std::string victim_text = "a file the cache must never read as an entry nor write";
  CacheKey key = key_of("symlink");
  fs::path image, meta;
  {
    KernelCache c(options_for(root));
    image = c.get(key, short_name(key), [&] { return fake_kernel(key); }).path;
    REQUIRE(!image.empty());
    meta = meta_of(image);
  }
  const std::string good_image = slurp(image), good_meta = slurp(meta);
  LogCapture log;

  SECTION("image path -> a file outside the cache with the right bytes: refused, rebuilt") {
    spill(victim, good_image);  // even a byte-perfect target is not trusted through a link
    fs::remove(image);
    fs::create_symlink(victim, image);
    KernelCache c(options_for(root));
    auto r = c.get(key, short_name(key), [&] { return fake_kernel(key); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, key));
    CHECK(log.has("removing bad entry"));
    // Named as a link (it said "Too many levels of symbolic links", O_NOFOLLOW's ELOOP text).
    CHECK(log.has("it is a symbolic link, and fkv-jit does not follow links in its cache"));
    CHECK(slurp(victim) == good_image);
    CHECK_FALSE(fs::is_symlink(image));
  }
  SECTION("meta path -> a valid meta file elsewhere: refused, rebuilt") {
    spill(victim, good_meta);
    fs::remove(meta);
    fs::create_symlink(victim, meta);
    KernelCache c(options_for(root));
    auto r = c.get(key, short_name(key), [&] { return fake_kernel(key); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, key));
    CHECK(log.has("removing bad entry"));
    CHECK(slurp(victim) == good_meta);
    CHECK_FALSE(fs::is_symlink(meta));
  }
  SECTION(
      "final paths of a new entry and its lock file planted as symlinks: nothing written through "
      "them") {
    CacheKey fresh = key_of("symlink-fresh");
    fs::path dir = image.parent_path();
    std::string base = short_name(fresh) + "-" + fresh.digest;
    spill(victim, victim_text);
    fs::create_symlink(victim, dir / (base + ".cubin"));
    fs::create_symlink(tmp.path / "lock-target", dir / (base + ".lock"));
    KernelCache c(options_for(root));
    auto r = c.get(fresh, short_name(fresh), [&] { return fake_kernel(fresh); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, fresh));
    CHECK(slurp(victim) == victim_text);  // rename replaced the link, not its target
    CHECK_FALSE(
        fs::exists(tmp.path / "lock-target"));  // O_NOFOLLOW: the lock was not created there
    CHECK_FALSE(fs::is_symlink(dir / (base + ".cubin")));
    KernelCache later(options_for(root));
    auto hit = later.get(fresh, short_name(fresh), [&] { return fake_kernel(fresh); });
    CHECK(hit.outcome == CacheOutcome::DiskHit);
    CHECK(is_expected(hit, fresh));
  }
  SECTION("entry directory replaced by a symlink: publishing refused with a message") {
    fs::path dir = image.parent_path();
    fs::path elsewhere = tmp.path / "elsewhere";
    fs::create_directory(elsewhere);
    fs::permissions(elsewhere, fs::perms::owner_all);
    fs::remove_all(dir);
    fs::create_directory_symlink(elsewhere, dir);
    CacheKey fresh = key_of("symlink-dir");
    KernelCache c(options_for(root));
    auto r = c.get(fresh, short_name(fresh), [&] { return fake_kernel(fresh); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, fresh));
    CHECK(log.has("is a symbolic link"));
    CHECK(fs::is_empty(elsewhere));
  }
}

TEST_CASE("entries of another NVRTC or library version are misses, never hits",
          "[faults][versions]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  CacheKey now = key_of("ver", "0.1.0", "12.8");
  CacheKey old_lib = key_of("ver", "0.0.9", "12.8");
  CacheKey old_nvrtc = key_of("ver", "0.1.0", "12.4");
  fs::path old_image;
  {
    KernelCache c(options_for(root));
    old_image = c.get(old_lib, short_name(old_lib), [&] { return fake_kernel(old_lib); }).path;
    REQUIRE(c.get(old_nvrtc, short_name(old_nvrtc), [&] {
               return fake_kernel(old_nvrtc);
             }).outcome == CacheOutcome::Compiled);
  }
  {
    KernelCache c(options_for(root));
    auto r = c.get(now, short_name(now), [&] { return fake_kernel(now); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, now));
    CHECK(r.path.parent_path().parent_path().filename() == "nvrtc-12.8");
  }
  SECTION("an old entry renamed to the new key's file names is refused, named by its field") {
    KernelCache c(options_for(root));
    fs::path new_image = old_image.parent_path() / (short_name(now) + "-" + now.digest + ".cubin");
    fs::copy_file(old_image, new_image, fs::copy_options::overwrite_existing);
    std::string meta = slurp(meta_of(old_image));
    for (std::size_t at; (at = meta.find(old_lib.digest)) != std::string::npos;)
      meta.replace(at, 32, now.digest);
    spill(meta_of(new_image), meta);
    LogCapture log;
    KernelCache fresh(options_for(root));
    auto r = fresh.get(now, short_name(now), [&] { return fake_kernel(now); });
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(is_expected(r, now));
    CHECK(log.has("removing bad entry"));
    INFO(log.text());
    // Either the stale digest or the differing field is named.
    CHECK((log.has("do not hash to the recorded digest") || log.has("key field 'fkv' is '0.0.9'")));
  }
  // Old entries stay valid on their own terms until pruned; verify() keeps them.
  KernelCache c(options_for(root));
  for (const auto& e : c.verify()) CHECK(e.ok);
}

TEST_CASE("clock skew: entries stamped in the future or the past; prune keeps the cap",
          "[faults][clock]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  std::vector<CacheKey> keys;
  std::uint64_t entry_bytes = 0;
  {
    KernelCache c(options_for(root));
    for (int i = 0; i < 8; ++i) {
      keys.push_back(key_of("clock" + std::to_string(i)));
      auto r =
          c.get(keys.back(), short_name(keys.back()), [&] { return fake_kernel(keys.back()); });
      REQUIRE(!r.path.empty());
      entry_bytes = fs::file_size(r.path) + fs::file_size(meta_of(r.path));
    }
  }
  const auto now = std::chrono::system_clock::now();
  const auto future = now + std::chrono::hours(24 * 365 * 30);  // 30 years ahead
  const auto past = std::chrono::system_clock::time_point{} + std::chrono::seconds(1);  // 1970
  for (const auto& f : files_under(root)) {
    std::string n = f.filename().string();
    bool even = n.find("clock0") != std::string::npos || n.find("clock2") != std::string::npos ||
                n.find("clock4") != std::string::npos || n.find("clock6") != std::string::npos;
    set_mtime(f, even ? future : past);
  }
  // An uncommitted image (a crashed publisher's) stamped in the future as well.
  fs::path dir = files_under(root).front().parent_path();
  spill(dir / ("fused_kv_materialize-" + std::string(32, 'e') + ".cubin"),
        std::string(entry_bytes * 4, 'x'));
  set_mtime(dir / ("fused_kv_materialize-" + std::string(32, 'e') + ".cubin"), future);

  const std::uint64_t cap = entry_bytes * 4 + entry_bytes / 2;
  KernelCache c(options_for(root, cap));
  for (int i = 0; i < 6; ++i) {
    CacheKey k = key_of("clock-new" + std::to_string(i));
    auto r = c.get(k, short_name(k), [&] { return fake_kernel(k); });
    CHECK(is_expected(r, k));
    INFO("publish " << i);
    CHECK(bytes_under(root) <= cap);  // the cap holds whatever the clocks say
    CHECK(fs::exists(r.path));        // the entry just published is never the one pruned
  }
  // Hits on old entries still return the right bytes (or a rebuild if pruned).
  for (const auto& k : keys)
    CHECK(is_expected(c.get(k, short_name(k), [&] { return fake_kernel(k); }), k));
  for (const auto& e : KernelCache(options_for(root)).verify()) CHECK(e.ok);
}

// ---- issue 23, part B: FIFOs, failed removals -------------------------------------------------

TEST_CASE("a FIFO at an entry's meta, image or lock path never hangs a reader", "[faults][fifo]") {
  // Before: open(O_RDONLY) of a FIFO without a writer waited forever, so a lookup, list() and
  // verify() hung. In a child with an alarm, so that a hang fails the test instead of CI.
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  const fs::path ro_root = tmp.path / "baked";
  CacheKey meta_key = key_of("fifo-meta"), image_key = key_of("fifo-image"),
           lock_key = key_of("fifo-lock"), ro_key = key_of("fifo-ro");
  fs::path meta_image, image_image, ro_image;
  {
    KernelCache c(options_for(root));
    meta_image = c.get(meta_key, short_name(meta_key), [&] { return fake_kernel(meta_key); }).path;
    image_image =
        c.get(image_key, short_name(image_key), [&] { return fake_kernel(image_key); }).path;
    KernelCache baked(options_for(ro_root));
    ro_image = baked.get(ro_key, short_name(ro_key), [&] { return fake_kernel(ro_key); }).path;
  }
  REQUIRE(fs::remove(meta_of(meta_image)));
  REQUIRE(::mkfifo(meta_of(meta_image).c_str(), 0600) == 0);
  REQUIRE(fs::remove(image_image));
  REQUIRE(::mkfifo(image_image.c_str(), 0600) == 0);
  REQUIRE(fs::remove(meta_of(ro_image)));
  REQUIRE(::mkfifo(meta_of(ro_image).c_str(), 0600) == 0);
  const fs::path lock_path =
      meta_image.parent_path() /
      (short_name(lock_key) + "-" + lock_key.digest + ".lock");  // a key not published yet
  REQUIRE(::mkfifo(lock_path.c_str(), 0600) == 0);

  std::string report = in_child([&]() -> std::string {
    ::alarm(30);  // a hang ends the child with SIGALRM, which the parent reports
    LogCapture log;
    fkv::CacheOptions o = options_for(root);
    o.readonly_roots = {ro_root};
    KernelCache c(o);
    auto listed = c.list();
    int bad = 0;
    for (const auto& e : listed) bad += !e.ok;
    CHILD_CHECK(bad == 3);  // both FIFO entries of the writable root, and the read-only one
    for (const auto& key : {meta_key, image_key, lock_key, ro_key}) {
      auto r = c.get(key, short_name(key), [&] { return fake_kernel(key); });
      CHILD_CHECK(r.outcome == CacheOutcome::Compiled);
      CHILD_CHECK(is_expected(r, key));
      CHILD_CHECK(!r.path.empty());
    }
    if (!log.has("a FIFO, not a regular file")) return "log: " + log.text();
    CHILD_CHECK(::mkfifo(meta_of(meta_image).c_str(), 0600) != 0);  // replaced by the rebuild
    for (const auto& e : c.verify()) CHILD_CHECK(e.ok || e.readonly);
    return {};
  });
  CHECK(report == "");
}

TEST_CASE("clear, prune and verify count only real removals and name each failure",
          "[faults][unlink]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  CacheKey a = key_of("unlink-a"), b = key_of("unlink-b");
  fs::path pa, pb;
  {
    KernelCache c(options_for(root));
    pa = c.get(a, short_name(a), [&] { return fake_kernel(a); }).path;
    pb = c.get(b, short_name(b), [&] { return fake_kernel(b); }).path;
  }

  SECTION("a directory where an entry's meta file belongs (EISDIR, also as root)") {
    REQUIRE(fs::remove(meta_of(pa)));
    fs::create_directory(meta_of(pa));
    LogCapture log;
    KernelCache c(options_for(root));
    std::vector<std::string> failures;
    CHECK(c.clear(&failures) == 1);  // b only: a's meta "file" could not be removed
    REQUIRE(failures.size() == 1);
    CHECK(failures[0].find(meta_of(pa).string()) != std::string::npos);
    CHECK(failures[0].find("Is a directory") != std::string::npos);
    CHECK(fs::exists(pa));  // its image stays with it: never half an entry
    CHECK_FALSE(fs::exists(pb));
    CHECK_FALSE(log.has("cannot remove"));  // handed to the caller, who reports it
    c.clear();                              // without a list: logged instead
    CHECK(log.has("cannot remove"));

    failures.clear();
    CHECK(c.prune(0, &failures) == 0);
    CHECK(failures.size() == 1);
    failures.clear();
    auto verified = c.verify(&failures);
    REQUIRE(verified.size() == 1);
    CHECK_FALSE(verified[0].removed);
    CHECK(verified[0].problem.find("Is a directory") != std::string::npos);
    CHECK(failures.size() == 1);
  }
  SECTION("an entry directory this user cannot write (EACCES)") {
    if (::geteuid() == 0 && !give_to_nobody(tmp.path)) {
      WARN("running as root and cannot chown to uid 65534: EACCES case skipped");
      return;
    }
    std::string report = in_child([&]() -> std::string {
      if (auto e = drop_root(); !e.empty()) return e;
      const fs::path dir = pa.parent_path();
      CHILD_CHECK(::chmod(dir.c_str(), 0500) == 0);
      KernelCache c(options_for(root));
      std::vector<std::string> failures;
      CHILD_CHECK(c.clear(&failures) == 0);  // before: 2, with nothing removed
      CHILD_CHECK(failures.size() == 2);
      CHILD_CHECK(failures[0].find("Permission denied") != std::string::npos);
      failures.clear();
      CHILD_CHECK(c.prune(0, &failures) == 0);  // before: both entries' bytes
      CHILD_CHECK(failures.size() == 2);
      CHILD_CHECK(c.list().size() == 2);
      CHILD_CHECK(fs::exists(pa) && fs::exists(meta_of(pa)) && fs::exists(pb));
      CHILD_CHECK(::chmod(dir.c_str(), 0700) == 0);
      failures.clear();
      CHILD_CHECK(c.clear(&failures) == 2);
      CHILD_CHECK(failures.empty());
      return {};
    });
    CHECK(report == "");
  }
}
