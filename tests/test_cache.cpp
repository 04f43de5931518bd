// Tests of the kernel cache (docs/cache.md). Most use the builder-function get() with a fake,
// counting builder, so they need neither NVRTC nor a GPU; one test at the end compiles a
// tiny kernel with the real NVRTC.
#include <fcntl.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "cache_fs.hpp"
#include "env_guard.hpp"
#include "fkv/cache.hpp"
#include "fkv/errors.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using fkv::CacheKey;
using fkv::CacheOutcome;
using fkv::CompiledKernel;
using fkv::KernelCache;

namespace {

using fkv_test::EnvGuard;

using TempDir = fkv_test::TempDir;

CacheKey::Fields base_fields(const std::string& variant) {
  return {
      {"schema", "1"},
      {"fkv", "0.1.0"},
      {"nvrtc", "12.8"},
      {"arch", "sm_90"},
      {"options", "-std=c++17\n--gpu-architecture=sm_90\n"},
      {"output", "cubin"},
      {"template", "fused_kv.cu"},
      {"template_hash", "0123456789abcdef0123456789abcdef"},
      {"specialization", "H=8;D=128;R=128;neox=1;variant=" + variant},
      {"source_hash", "fedcba9876543210fedcba9876543210"},
      {"kernel", "fkv_kernels::fused_kv_materialize<" + variant + ">"},
  };
}

CacheKey test_key(const std::string& variant, const std::string& output = "cubin") {
  auto f = base_fields(variant);
  for (auto& [label, value] : f)
    if (label == "output") value = output;
  return CacheKey::from_fields(f);
}

// The image a fake compiler produces for a key: deterministic, a few hundred bytes.
CompiledKernel fake_kernel(const CacheKey& key) {
  CompiledKernel k;
  k.image = "FAKE-CUBIN " + key.digest + " ";
  for (int i = 0; k.image.size() < 512; ++i)
    k.image += static_cast<char>('a' + (i * 7 + key.digest[i % 32]) % 26);
  k.lowered_name = "_Z18fused_kv_" + key.digest;
  k.is_ptx = key.field("output") == "ptx";
  return k;
}

struct CountingBuilder {
  std::atomic<int> calls{0};
  std::chrono::milliseconds delay{0};
  std::function<CompiledKernel()> operator()(const CacheKey& key) {
    return [this, key] {
      ++calls;
      if (delay.count()) std::this_thread::sleep_for(delay);
      return fake_kernel(key);
    };
  }
};

std::string short_name(const CacheKey& key) { return fkv::cache_short_name(key.field("kernel")); }

using LogCapture = fkv_test::LogCapture;

fkv::CacheOptions options_for(const fs::path& root) {
  fkv::CacheOptions o;
  o.root = root;
  return o;
}

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

int count_with_suffix(const fs::path& dir, const std::string& suffix) {
  int n = 0;
  for (const auto& f : files_under(dir)) {
    std::string s = f.filename().string();
    if (s.size() >= suffix.size() &&
        s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

fs::path meta_of(const fs::path& image) {
  std::string s = image.string();
  return fs::path(s.substr(0, s.rfind('.')) + ".meta.json");
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spill(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("cache key: labeled, length-prefixed, every field counts", "[cache]") {
  CacheKey a = CacheKey::from_fields(base_fields("x"));
  CacheKey again = CacheKey::from_fields(base_fields("x"));
  REQUIRE(a.digest.size() == 32);
  CHECK(a.digest.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a.digest == again.digest);
  CHECK(a.field("arch") == "sm_90");
  CHECK(a.field("no such label").empty());

  std::set<std::string> digests{a.digest};
  auto fields = base_fields("x");
  for (std::size_t i = 0; i < fields.size(); ++i) {
    auto changed = fields;
    changed[i].second += "!";
    CacheKey k = CacheKey::from_fields(changed);
    INFO("field " << fields[i].first);
    CHECK(digests.insert(k.digest).second);
    auto relabeled = fields;
    relabeled[i].first += "_";
    CHECK(digests.insert(CacheKey::from_fields(relabeled).digest).second);
  }
  // Length prefixes: moving a character across a field boundary changes the digest.
  CHECK(CacheKey::from_fields({{"a", "bc"}}).digest != CacheKey::from_fields({{"ab", "c"}}).digest);
  CHECK(CacheKey::from_fields({{"x", "ab"}, {"y", ""}}).digest !=
        CacheKey::from_fields({{"x", "a"}, {"y", "b"}}).digest);
  // Order matters.
  auto swapped = fields;
  std::swap(swapped[0], swapped[1]);
  CHECK(CacheKey::from_fields(swapped).digest != a.digest);
}

TEST_CASE("cache short names are file-system safe", "[cache]") {
  CHECK(fkv::cache_short_name("fkv_kernels::fused_kv_materialize<128, 8, true, fkv::bf16>") ==
        "fused_kv_materialize_128_8_true_fkv_bf16");
  CHECK(fkv::cache_short_name("") == "kernel");
  CHECK(fkv::cache_short_name("::<>") == "kernel");
  std::string evil = fkv::cache_short_name("../../etc/passwd<../../x>");
  CHECK(evil.find('/') == std::string::npos);
  CHECK(evil.find("..") == std::string::npos);
  CHECK(evil.front() != '.');
  CHECK(evil.front() != '-');
  std::string long_name = fkv::cache_short_name("k<" + std::string(500, '7') + ">");
  CHECK(long_name.size() <= 64);
  for (char c : evil + long_name)
    CHECK((std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'));
  CHECK(fkv::to_string(CacheOutcome::DiskHit) == "disk");
}

TEST_CASE("miss, memory hit, disk hit", "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  CacheKey key = test_key("a");

  KernelCache first(options_for(root));
  REQUIRE_FALSE(first.memory_only());
  auto r1 = first.get(key, short_name(key), builder(key));
  CHECK(r1.outcome == CacheOutcome::Compiled);
  CHECK(builder.calls == 1);
  REQUIRE(r1.kernel);
  CHECK(r1.kernel->image == fake_kernel(key).image);
  CHECK(r1.path ==
        root / "v1" / "nvrtc-12.8" / "sm_90" / ("fused_kv_materialize_a-" + key.digest + ".cubin"));
  CHECK(fs::is_regular_file(r1.path));
  CHECK(fs::is_regular_file(meta_of(r1.path)));
  CHECK(mode_of(root / "v1") == 0700);
  CHECK(mode_of(r1.path.parent_path()) == 0700);
  CHECK(mode_of(r1.path.parent_path().parent_path()) == 0700);
  CHECK(mode_of(r1.path) == 0600);
  CHECK(count_with_suffix(root, ".lock") <= 1);
  for (const auto& f : files_under(root))
    CHECK(f.filename().string().find(".tmp.") == std::string::npos);

  auto meta = nlohmann::json::parse(slurp(meta_of(r1.path)));
  CHECK(meta["digest"] == key.digest);
  CHECK(meta["bytes"] == r1.kernel->image.size());
  CHECK(meta["lowered_name"] == r1.kernel->lowered_name);
  CHECK(meta["key"].size() == key.fields.size());

  auto r2 = first.get(key, short_name(key), builder(key));
  CHECK(r2.outcome == CacheOutcome::MemoryHit);
  CHECK(r2.kernel == r1.kernel);
  CHECK(builder.calls == 1);

  KernelCache second(options_for(root));
  auto r3 = second.get(key, short_name(key), builder(key));
  CHECK(r3.outcome == CacheOutcome::DiskHit);
  CHECK(builder.calls == 1);
  CHECK(r3.kernel->image == r1.kernel->image);
  CHECK(r3.kernel->lowered_name == r1.kernel->lowered_name);
  CHECK(r3.path == r1.path);

  SECTION("ptx entries get their own extension and key") {
    CacheKey ptx = test_key("a", "ptx");
    CHECK(ptx.digest != key.digest);
    auto r = second.get(ptx, short_name(ptx), builder(ptx));
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(r.path.extension() == ".ptx");
    KernelCache third(options_for(root));
    auto again = third.get(ptx, short_name(ptx), builder(ptx));
    CHECK(again.outcome == CacheOutcome::DiskHit);
    CHECK(again.kernel->is_ptx);
  }
  SECTION("a malformed digest is refused") {
    CacheKey bad = key;
    bad.digest = "../../x";
    CHECK_THROWS_AS(second.get(bad, "k", builder(bad)), fkv::CacheError);
  }
}

TEST_CASE("bad entries are detected, removed and rebuilt", "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  CacheKey key = test_key("a");
  CacheKey other = test_key("b");
  fs::path image, other_image;
  {
    KernelCache c(options_for(root));
    image = c.get(key, short_name(key), builder(key)).path;
    other_image = c.get(other, short_name(other), builder(other)).path;
  }
  REQUIRE(builder.calls == 2);
  fs::path meta = meta_of(image);
  std::string good = slurp(image);

  bool expect_warning = true;
  std::string reason;
  SECTION("truncated image") {
    fs::resize_file(image, good.size() / 2);
    reason = "truncated";
  }
  SECTION("corrupted image byte") {
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x20;
    spill(image, bad);
    reason = "checksum";
  }
  SECTION("missing image") {
    fs::remove(image);
    reason = "missing";
  }
  SECTION("meta file of another key") {
    fs::copy_file(meta_of(other_image), meta, fs::copy_options::overwrite_existing);
    reason = "digest";
  }
  SECTION("key field edited in the meta file") {
    auto m = nlohmann::json::parse(slurp(meta));
    m["key"][2][1] = "11.0";
    spill(meta, m.dump());
    reason = "hash";
  }
  SECTION("meta file is not JSON") {
    spill(meta, "{ this is not json");
    reason = "JSON";
  }
  SECTION("meta file lacks a field") {
    auto m = nlohmann::json::parse(slurp(meta));
    m.erase("checksum");
    spill(meta, m.dump());
    reason = "malformed";
  }
  SECTION("missing meta file (uncommitted entry) is a plain miss") {
    fs::remove(meta);
    expect_warning = false;
  }

  LogCapture log;
  KernelCache c(options_for(root));
  auto r = c.get(key, short_name(key), builder(key));
  CHECK(r.outcome == CacheOutcome::Compiled);
  CHECK(builder.calls == 3);
  CHECK(r.kernel->image == good);
  if (expect_warning) {
    INFO(log.text());
    CHECK(log.count("removing bad entry " + image.string()) == 1);
    CHECK(log.count(reason) == 1);
  } else {
    CHECK(log.warnings() == 0);
  }
  // The rebuilt entry is good again, and the other key's entry was not touched.
  KernelCache fresh(options_for(root));
  CHECK(fresh.get(key, short_name(key), builder(key)).outcome == CacheOutcome::DiskHit);
  CHECK(fresh.get(other, short_name(other), builder(other)).outcome == CacheOutcome::DiskHit);
  CHECK(builder.calls == 3);
}

TEST_CASE("threads asking for one key compile it once", "[cache]") {
  TempDir tmp;
  KernelCache c(options_for(tmp.path / "cache"));
  CountingBuilder builder;
  builder.delay = std::chrono::milliseconds(100);
  CacheKey key = test_key("threads");
  std::vector<fkv::CacheResult> results(16);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] { results[i] = c.get(key, short_name(key), builder(key)); });
  for (auto& t : threads) t.join();
  CHECK(builder.calls == 1);
  int compiled = 0;
  for (const auto& r : results) {
    CHECK(r.kernel == results[0].kernel);
    compiled += r.outcome == CacheOutcome::Compiled;
  }
  CHECK(compiled == 1);
}

TEST_CASE("a failing build propagates and caches nothing", "[cache]") {
  TempDir tmp;
  KernelCache c(options_for(tmp.path / "cache"));
  CacheKey key = test_key("fails");
  auto failing = []() -> CompiledKernel { throw fkv::CompileError("nvrtc said no", "log", "src"); };
  CHECK_THROWS_AS(c.get(key, short_name(key), failing), fkv::CompileError);
  CHECK(count_with_suffix(tmp.path, ".meta.json") == 0);
  CountingBuilder builder;
  CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
  CHECK(builder.calls == 1);
}

TEST_CASE("8 processes fill one empty cache at once", "[cache][processes]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  fs::path counter = tmp.path / "compiles";
  constexpr int kProcesses = 8;
  std::vector<CacheKey> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(test_key("proc" + std::to_string(i)));

  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(go[1]);
      char byte;
      (void)!::read(go[0], &byte,
                    1);  // returns 0 when the parent closes the pipe: all start together
      int status = 0;
      try {
        KernelCache c(options_for(root));
        for (int round = 0; round < 2; ++round) {
          for (std::size_t i = 0; i < keys.size(); ++i) {
            const CacheKey& key = keys[(i + static_cast<std::size_t>(p)) % keys.size()];
            auto r = c.get(key, short_name(key), [&] {
              int fd = ::open(counter.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
              (void)!::write(fd, "x", 1);
              ::close(fd);
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
              return fake_kernel(key);
            });
            CompiledKernel want = fake_kernel(key);
            if (r.kernel->image != want.image || r.kernel->lowered_name != want.lowered_name)
              status = 2;
            if (round == 1 && r.outcome != CacheOutcome::MemoryHit) status = 3;
          }
        }
      } catch (...) {
        status = 4;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  int ok = 0;
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  CHECK(ok == kProcesses);
  auto compiles = fs::exists(counter) ? fs::file_size(counter) : 0;
  WARN(compiles << " compiles for " << keys.size() << " keys in " << kProcesses << " processes");
  // Each key is compiled by the first process to take its lock; the others wait and read it.
  CHECK(compiles == keys.size());

  KernelCache check(options_for(root));
  auto entries = check.verify();
  CHECK(entries.size() == keys.size());
  for (const auto& e : entries) {
    INFO(e.path << ": " << e.problem);
    CHECK(e.ok);
    CHECK_FALSE(e.removed);
  }
  for (const auto& f : files_under(root))
    CHECK(f.filename().string().find(".tmp.") == std::string::npos);
  for (const auto& key : keys)
    CHECK(check.get(key, short_name(key), [&] { return fake_kernel(key); }).outcome ==
          CacheOutcome::DiskHit);
}

TEST_CASE("read-only roots are used and never written", "[cache]") {
  TempDir tmp;
  fs::path baked = tmp.path / "baked";
  CountingBuilder builder;
  CacheKey key = test_key("ro");
  fs::path baked_image;
  {
    KernelCache c(options_for(baked));
    baked_image = c.get(key, short_name(key), builder(key)).path;
  }
  auto snapshot = [&] {
    std::vector<std::pair<std::string, std::int64_t>> s;
    for (const auto& f : files_under(baked))
      s.emplace_back(f.string(), fs::last_write_time(f).time_since_epoch().count());
    return s;
  };
  auto before = snapshot();
  fs::permissions(baked, fs::perms::owner_read | fs::perms::owner_exec);  // 0500, as in an image

  fs::path writable = tmp.path / "home";
  fkv::CacheOptions o = options_for(writable);
  o.readonly_roots = {baked};
  SECTION("a good entry is a read-only hit") {
    KernelCache c(o);
    auto r = c.get(key, short_name(key), builder(key));
    CHECK(r.outcome == CacheOutcome::ReadOnlyHit);
    CHECK(r.path == baked_image);
    CHECK(builder.calls == 1);
    CHECK(files_under(writable).empty());
    auto listed = c.list();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].readonly);
    CHECK(listed[0].ok);
  }
  SECTION("a bad entry is skipped, not removed") {
    fs::permissions(baked, fs::perms::owner_all);
    std::string text = slurp(baked_image);
    text[20] ^= 1;
    spill(baked_image, text);
    fs::last_write_time(baked_image, fs::last_write_time(meta_of(baked_image)));
    before = snapshot();
    fs::permissions(baked, fs::perms::owner_read | fs::perms::owner_exec);
    LogCapture log;
    KernelCache c(o);
    auto r = c.get(key, short_name(key), builder(key));
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(builder.calls == 2);
    CHECK(log.count("skipping bad entry in read-only root") == 1);
    CHECK(r.path.string().rfind(writable.string(), 0) == 0);
    auto verified = c.verify();
    int ro_bad = 0;
    for (const auto& e : verified) ro_bad += e.readonly && !e.ok && !e.removed;
    CHECK(ro_bad == 1);
  }
  fs::permissions(baked, fs::perms::owner_all);
  CHECK(snapshot() == before);
}

TEST_CASE("roots writable by others are refused", "[cache][security]") {
  TempDir tmp;
  fs::path root = tmp.path / "shared";
  fs::create_directories(root);
  CountingBuilder builder;
  CacheKey key = test_key("sec");

  SECTION("group-writable writable root") {
    ::chmod(root.c_str(), 0770);
    LogCapture log;
    KernelCache c(options_for(root));
    CHECK(c.memory_only());
    CHECK(log.count("writable by group or others (mode 0770)") == 1);
    CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
    CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::MemoryHit);
    CHECK(files_under(root).empty());
  }
  SECTION("world-writable v1 below a private root") {
    ::chmod(root.c_str(), 0700);
    fs::create_directories(root / "v1");
    ::chmod((root / "v1").c_str(), 0777);
    LogCapture log;
    KernelCache c(options_for(root));
    CHECK(c.memory_only());
    CHECK(log.count("refusing cache root") == 1);
  }
  SECTION("root owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot chown to test foreign ownership");
      return;
    }
    ::chmod(root.c_str(), 0700);
    REQUIRE(::chown(root.c_str(), 12345, 12345) == 0);
    LogCapture log;
    KernelCache c(options_for(root));
    CHECK(c.memory_only());
    CHECK(log.count("owned by uid 12345") == 1);
  }
  SECTION("world-writable read-only root") {
    fs::path baked = tmp.path / "baked";
    {
      KernelCache c(options_for(baked));
      c.get(key, short_name(key), builder(key));
    }
    ::chmod(baked.c_str(), 0777);
    LogCapture log;
    fkv::CacheOptions o = options_for(tmp.path / "mine");
    o.readonly_roots = {baked};
    KernelCache c(o);
    CHECK(log.count("ignoring read-only cache root") == 1);
    CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
  }
}

// Issue 13 item 3: a read makes the same directory and file checks as a publish, in writable
// and read-only roots alike. Before, these entries were served.
TEST_CASE("every read checks entry directories and files", "[cache][security]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  CacheKey key = test_key("trust");
  fs::path image;
  {
    KernelCache c(options_for(root));
    image = c.get(key, short_name(key), builder(key)).path;
  }
  REQUIRE(builder.calls == 1);
  const fs::path arch_dir = image.parent_path();
  const bool can_chown = ::geteuid() == 0;
  std::string refused_because;  // expected in the log
  bool removed = true;          // a bad entry in a trusted directory is removed and rebuilt

  SECTION("entry directory writable by group") {
    ::chmod(arch_dir.c_str(), 0770);
    refused_because = "writable by group or others (mode 0770)";
    removed = false;  // an untrusted directory is neither read nor written
  }
  SECTION("nvrtc directory writable by others") {
    ::chmod(arch_dir.parent_path().c_str(), 0777);
    refused_because = "writable by group or others (mode 0777)";
    removed = false;
  }
  SECTION("entry directory owned by another user") {
    if (!can_chown) return;
    REQUIRE(::chown(arch_dir.c_str(), 12345, 12345) == 0);
    refused_because = "owned by uid 12345";
    removed = false;
  }
  SECTION("image writable by others") {
    ::chmod(image.c_str(), 0606);
    refused_because = "writable by group or others";
  }
  SECTION("meta file writable by group") {
    ::chmod(meta_of(image).c_str(), 0620);
    refused_because = "writable by group or others";
  }
  SECTION("image owned by another user") {
    if (!can_chown) return;
    REQUIRE(::chown(image.c_str(), 12345, 12345) == 0);
    refused_because = "owned by uid 12345";
  }
  SECTION("meta file owned by another user") {
    if (!can_chown) return;
    REQUIRE(::chown(meta_of(image).c_str(), 12345, 12345) == 0);
    refused_because = "owned by uid 12345";
  }

  LogCapture log;
  KernelCache c(options_for(root));
  auto r = c.get(key, short_name(key), builder(key));
  INFO(log.text());
  CHECK(r.outcome == CacheOutcome::Compiled);
  CHECK(builder.calls == 2);
  CHECK(r.kernel->image == fake_kernel(key).image);
  CHECK(log.count(refused_because) >= 1);
  if (removed) {
    CHECK(log.count("removing bad entry " + image.string()) == 1);
    KernelCache again(options_for(root));  // the rebuilt entry is trusted again
    CHECK(again.get(key, short_name(key), builder(key)).outcome == CacheOutcome::DiskHit);
  } else {
    CHECK(r.path.empty());  // not published into a directory it does not trust
    auto listed = c.list();
    REQUIRE(listed.size() == 1);
    CHECK_FALSE(listed[0].ok);
    CHECK(listed[0].problem.find(refused_because) != std::string::npos);
  }
}

TEST_CASE("read-only roots: entry files of another user or writable by others are skipped",
          "[cache][security]") {
  TempDir tmp;
  fs::path baked = tmp.path / "baked";
  CountingBuilder builder;
  CacheKey key = test_key("ro_trust");
  fs::path image;
  {
    KernelCache c(options_for(baked));
    image = c.get(key, short_name(key), builder(key)).path;
  }
  std::string refused_because;
  SECTION("image writable by others") {
    ::chmod(image.c_str(), 0646);
    refused_because = "writable by group or others";
  }
  SECTION("meta file owned by another user") {
    if (::geteuid() != 0) return;
    REQUIRE(::chown(meta_of(image).c_str(), 12345, 12345) == 0);
    refused_because = "owned by uid 12345";
  }
  SECTION("entry directory writable by group") {
    ::chmod(image.parent_path().c_str(), 0770);
    refused_because = "writable by group or others";
  }
  fkv::CacheOptions o = options_for(tmp.path / "mine");
  o.readonly_roots = {baked};
  LogCapture log;
  KernelCache c(o);
  auto r = c.get(key, short_name(key), builder(key));
  INFO(log.text());
  CHECK(r.outcome == CacheOutcome::Compiled);
  CHECK(builder.calls == 2);
  CHECK(log.count(refused_because) >= 1);
  CHECK(fs::exists(image));  // a read-only root is never modified
}

TEST_CASE("every meta field is under the checksum", "[cache][security]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  CacheKey key = test_key("sum");
  fs::path image;
  {
    KernelCache c(options_for(root));
    image = c.get(key, short_name(key), builder(key)).path;
  }
  auto m = nlohmann::json::parse(slurp(meta_of(image)));
  SECTION("lowered_name") { m["lowered_name"] = "_Z5otherv"; }
  SECTION("ptx flag") { m["ptx"] = true; }
  spill(meta_of(image), m.dump(2));
  LogCapture log;
  KernelCache c(options_for(root));
  auto r = c.get(key, short_name(key), builder(key));
  INFO(log.text());
  CHECK(r.outcome == CacheOutcome::Compiled);
  CHECK(r.kernel->lowered_name == fake_kernel(key).lowered_name);
  CHECK(log.count("removing bad entry") == 1);
}

TEST_CASE("size cap prunes the least recently used entries", "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  CacheKey a = test_key("lru_a"), b = test_key("lru_b"), c = test_key("lru_c");
  fs::path pa, pb;
  {
    KernelCache cache(options_for(root));
    pa = cache.get(a, short_name(a), builder(a)).path;
    pb = cache.get(b, short_name(b), builder(b)).path;
  }
  auto entry_bytes = fs::file_size(pa) + fs::file_size(meta_of(pa));
  auto now = fs::file_time_type::clock::now();
  for (const auto& [p, age] : {std::pair{pa, 300}, std::pair{pb, 200}}) {
    fs::last_write_time(p, now - std::chrono::seconds(age));
    fs::last_write_time(meta_of(p), now - std::chrono::seconds(age));
  }
  fkv::CacheOptions o = options_for(root);
  o.max_bytes = entry_bytes * 5 / 2;  // room for two entries
  KernelCache cache(o);
  CHECK(cache.get(a, short_name(a), builder(a)).outcome == CacheOutcome::DiskHit);  // touches a
  auto rc = cache.get(c, short_name(c), builder(c));
  CHECK(rc.outcome == CacheOutcome::Compiled);
  CHECK(fs::exists(pa));
  CHECK_FALSE(fs::exists(pb));
  CHECK_FALSE(fs::exists(meta_of(pb)));
  CHECK_FALSE(fs::exists(fs::path(pb).replace_extension(".lock")));
  CHECK(fs::exists(fs::path(rc.path).replace_extension(".lock")));
  CHECK(fs::exists(rc.path));
  CHECK(cache.list().size() == 2);

  CHECK(cache.prune(0) >= 2 * entry_bytes);
  CHECK(cache.list().empty());
}

TEST_CASE("list, verify, prune and clear", "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache cache(options_for(root));
  CountingBuilder builder;
  std::vector<CacheKey> keys = {test_key("l0"), test_key("l1"), test_key("l2")};
  std::vector<fs::path> paths;
  for (const auto& k : keys) paths.push_back(cache.get(k, short_name(k), builder(k)).path);

  auto listed = cache.list();
  REQUIRE(listed.size() == 3);
  std::set<std::string> digests;
  for (const auto& e : listed) {
    CHECK(e.ok);
    CHECK(e.arch == "sm_90");
    CHECK(e.kernel.rfind("fused_kv_materialize_l", 0) == 0);
    CHECK(e.bytes > 512);
    digests.insert(e.digest);
  }
  CHECK(digests == std::set<std::string>{keys[0].digest, keys[1].digest, keys[2].digest});

  fs::resize_file(paths[1], 10);
  LogCapture log;
  auto verified = cache.verify();
  REQUIRE(verified.size() == 3);
  int removed = 0;
  for (const auto& e : verified) {
    if (e.path == paths[1]) {
      CHECK_FALSE(e.ok);
      CHECK(e.removed);
      CHECK(e.problem.find("truncated") != std::string::npos);
    }
    removed += e.removed;
  }
  CHECK(removed == 1);
  CHECK(log.count("removing bad entry") == 1);
  CHECK(cache.list().size() == 2);

  CHECK(cache.clear() == 2);
  CHECK(cache.list().empty());
  CHECK(count_with_suffix(root, ".cubin") == 0);
  CHECK(count_with_suffix(root, ".lock") == 0);
  CHECK(fs::is_directory(root / "v1"));
  // clear() also forgets the in-memory kernels.
  CHECK(cache.get(keys[0], short_name(keys[0]), builder(keys[0])).outcome ==
        CacheOutcome::Compiled);
  CHECK(builder.calls == 4);
}

TEST_CASE("options from the environment", "[cache][env]") {
  EnvGuard env;
  env.set("FKV_CACHE_DIR", "/some/where");
  env.set("XDG_CACHE_HOME", "/xdg");
  env.set("HOME", "/home/me");
  env.set("FKV_CACHE_READONLY_DIRS", "/opt/a::/opt/b");
  env.set("FKV_CACHE_MAX_BYTES", "10M");
  env.set("FKV_DISABLE_CACHE", std::nullopt);
  auto o = fkv::CacheOptions::from_env();
  CHECK(o.root == "/some/where");
  CHECK(o.readonly_roots == std::vector<fs::path>{"/opt/a", "/opt/b"});
  CHECK(o.max_bytes == 10u << 20);
  CHECK_FALSE(o.disabled);

  env.set("FKV_CACHE_DIR", std::nullopt);
  CHECK(fkv::CacheOptions::from_env().root == "/xdg/fkv-jit");
  env.set("XDG_CACHE_HOME", std::nullopt);
  CHECK(fkv::CacheOptions::from_env().root == "/home/me/.cache/fkv-jit");
  env.set("HOME", std::nullopt);
  CHECK(fkv::CacheOptions::from_env().root.empty());

  env.set("FKV_CACHE_MAX_BYTES", "12345");
  CHECK(fkv::CacheOptions::from_env().max_bytes == 12345);
  // A malformed value is an error, not a silent "no cap" (issue 13 item 8); 0 is refused as
  // well: unset means no cap, and a cap of N bytes means at most N bytes, as in `prune
  // --max-bytes`.
  env.set("FKV_CACHE_MAX_BYTES", "lots");
  CHECK_THROWS_WITH(fkv::CacheOptions::from_env(),
                    Catch::Contains("FKV_CACHE_MAX_BYTES='lots' is not valid"));
  env.set("FKV_CACHE_MAX_BYTES", "0");
  CHECK_THROWS_AS(fkv::CacheOptions::from_env(), fkv::ConfigError);
  env.set("FKV_CACHE_MAX_BYTES", std::nullopt);
  CHECK(fkv::CacheOptions::from_env().max_bytes == 0);
  env.set("FKV_DISABLE_CACHE", "1");
  CHECK(fkv::CacheOptions::from_env().disabled);
  env.set("FKV_DISABLE_CACHE", "off");
  CHECK_FALSE(fkv::CacheOptions::from_env().disabled);
  env.set("FKV_DISABLE_CACHE", "maybe");
  CHECK_THROWS_WITH(fkv::CacheOptions::from_env(), Catch::Contains("FKV_DISABLE_CACHE='maybe'"));

  CHECK(fkv::parse_byte_count("2G") == std::optional<std::uint64_t>(2ull << 30));
  CHECK(fkv::parse_byte_count("512K") == std::optional<std::uint64_t>(512ull << 10));
  CHECK_FALSE(fkv::parse_byte_count("-5"));
  CHECK_FALSE(fkv::parse_byte_count(" 5"));
  CHECK_FALSE(fkv::parse_byte_count("5T"));
  CHECK_FALSE(fkv::parse_byte_count("99999999999999999999"));
  CHECK_FALSE(fkv::parse_byte_count("17179869184G"));  // overflows 64 bits
}

TEST_CASE("FKV_DISABLE_CACHE=1 touches no disk", "[cache][env]") {
  TempDir tmp;
  fs::path baked = tmp.path / "baked";
  CountingBuilder builder;
  CacheKey key = test_key("off");
  {
    KernelCache c(options_for(baked));
    c.get(key, short_name(key), builder(key));
  }

  EnvGuard env;
  env.set("FKV_DISABLE_CACHE", "1");
  env.set("FKV_CACHE_DIR", (tmp.path / "cache").string());
  env.set("FKV_CACHE_READONLY_DIRS", baked.string());
  LogCapture log;
  KernelCache c(fkv::CacheOptions::from_env());
  CHECK(c.memory_only());
  auto r = c.get(key, short_name(key), builder(key));
  CHECK(r.outcome == CacheOutcome::Compiled);  // not the read-only entry either
  CHECK(r.path.empty());
  CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::MemoryHit);
  CHECK(builder.calls == 2);
  CHECK_FALSE(fs::exists(tmp.path / "cache"));
  CHECK(c.list().empty());
  CHECK(log.warnings() == 0);
}

TEST_CASE("no usable directory: memory only, one warning", "[cache]") {
  TempDir tmp;
  spill(tmp.path / "a-file", "not a directory");
  LogCapture log;
  KernelCache c(options_for(tmp.path / "a-file" / "cache"));
  CHECK(c.memory_only());
  CountingBuilder builder;
  for (const auto& v : {"m0", "m1", "m2", "m0"}) {
    CacheKey key = test_key(v);
    auto r = c.get(key, short_name(key), builder(key));
    CHECK(r.path.empty());
  }
  CHECK(builder.calls == 3);
  INFO(log.text());
  CHECK(log.warnings() == 1);
  CHECK(log.count("in memory only") == 1);
  CHECK(c.list().empty());

  SECTION("no root configured at all") {
    LogCapture log2;
    KernelCache none{fkv::CacheOptions{}};
    CHECK(none.memory_only());
    CHECK(log2.warnings() == 1);
  }
}

TEST_CASE("an entry directory that cannot be created: kernel kept in memory, one warning",
          "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  REQUIRE_FALSE(c.memory_only());
  spill(root / "v1" / "nvrtc-12.8", "a file where a directory should be");
  LogCapture log;
  CountingBuilder builder;
  for (const auto& v : {"p0", "p1", "p0"}) {
    CacheKey key = test_key(v);
    auto r = c.get(key, short_name(key), builder(key));
    CHECK(r.path.empty());
    CHECK(r.kernel->image == fake_kernel(key).image);
  }
  CHECK(builder.calls == 2);
  INFO(log.text());
  CHECK(log.warnings() == 1);
  CHECK(log.count("cannot publish") == 1);
}

TEST_CASE("CacheKey::make sees every compile input", "[cache]") {
  fkv::KernelSource src;
  src.template_name = "tiny.cu";
  src.template_hash = "00112233445566778899aabbccddeeff";
  src.short_name = "tiny_3";
  src.name_expression = "tiny<3>";
  src.specialization = "N=3";
  src.source =
      "// fkv spec: N=4 (a comment the key does not read)\ntemplate <int N> __global__ void "
      "tiny(int* p) { p[threadIdx.x] = N; }\n"
      "template __global__ void tiny<3>(int*);\n";
  src.headers = {{"tiny.cuh", "#pragma once\n"}};
  fkv::CompileOptions opts;
  opts.arch = fkv::Arch{9, 0, false};
  CacheKey base = CacheKey::make(src, opts);
  CHECK(base.field("schema") == "1");
  CHECK(base.field("nvrtc") == fkv::nvrtc_version());
  CHECK(base.field("arch") == "sm_90");
  CHECK(base.field("output") == "cubin");
  CHECK(base.field("specialization") == "N=3");
  CHECK(base.field("kernel") == "tiny<3>");
  CHECK(base.field("options").find("sm_90") != std::string::npos);
  CHECK(CacheKey::make(src, opts).digest == base.digest);

  std::vector<std::pair<std::string, std::function<void(fkv::KernelSource&, fkv::CompileOptions&)>>>
      changes = {
          {"arch",
           [](auto&, auto& o) {
             o.arch = fkv::Arch{8, 0, false};
           }},
          {"arch-specific", [](auto&, auto& o) { o.arch.arch_specific = true; }},
          {"ptx", [](auto&, auto& o) { o.ptx = true; }},
          {"template name", [](auto& s, auto&) { s.template_name = "other.cu"; }},
          {"template hash", [](auto& s, auto&) { s.template_hash[0] = '9'; }},
          {"source", [](auto& s, auto&) { s.source += "\n"; }},
          {"header", [](auto& s, auto&) { s.headers[0].second += "// x\n"; }},
          {"header name", [](auto& s, auto&) { s.headers[0].first = "other.cuh"; }},
          {"name expression", [](auto& s, auto&) { s.name_expression = "tiny<4>"; }},
          {"specialization", [](auto& s, auto&) { s.specialization = "N=5"; }},
      };
  for (const auto& [what, change] : changes) {
    fkv::KernelSource s = src;
    fkv::CompileOptions o = opts;
    change(s, o);
    INFO(what);
    CHECK(CacheKey::make(s, o).digest != base.digest);
  }
  // The short name only names the file; it is not part of the key.
  fkv::KernelSource renamed = src;
  renamed.short_name = "x";
  CHECK(CacheKey::make(renamed, opts).digest == base.digest);
}

// Compiles a tiny kernel with the real NVRTC (no GPU needed) through get(src, options).
TEST_CASE("real NVRTC compile is cached on disk", "[cache][nvrtc]") {
  TempDir tmp;
  fkv::KernelSource src;
  src.template_name = "tiny.cu";
  src.template_hash = "00112233445566778899aabbccddeeff";
  src.short_name = "tiny_3";
  src.name_expression = "tiny<3>";
  src.source =
      "template <int N> __global__ void tiny(int* p) { p[threadIdx.x] = N; }\n"
      "template __global__ void tiny<3>(int*);\n";
  fkv::CompileOptions opts;
  opts.arch = fkv::Arch{8, 0, false};
  fs::path root = tmp.path / "cache";
  fkv::CacheResult first;
  {
    KernelCache c(options_for(root));
    first = c.get(src, opts);
  }
  CHECK(first.outcome == CacheOutcome::Compiled);
  REQUIRE(first.kernel);
  CHECK_FALSE(first.kernel->image.empty());
  CHECK_FALSE(first.kernel->lowered_name.empty());
  CHECK(first.path.filename().string().rfind("tiny_3-", 0) == 0);
  CHECK(first.path.parent_path() == root / "v1" / ("nvrtc-" + fkv::nvrtc_version()) / "sm_80");
  KernelCache again(options_for(root));
  auto second = again.get(src, opts);
  CHECK(second.outcome == CacheOutcome::DiskHit);
  CHECK(second.kernel->image == first.kernel->image);
  CHECK(second.kernel->lowered_name == first.kernel->lowered_name);
}

// ---- issue 23, part B: precompile scopes, unusable directories, publishes in progress, logs ---

TEST_CASE("a precompile scope keeps its whole set under a size cap smaller than the set",
          "[cache]") {
  // Before: every publish pruned to the cap, evicting the entries the same run had just
  // written, while each was reported persisted.
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  std::vector<CacheKey> keys = {test_key("cap0"), test_key("cap1"), test_key("cap2")};
  std::uint64_t entry_bytes = 0;
  {
    KernelCache probe(options_for(tmp.path / "probe"));
    auto r = probe.get(keys[0], short_name(keys[0]), builder(keys[0]));
    entry_bytes = fs::file_size(r.path) + fs::file_size(meta_of(r.path));
  }
  fkv::CacheOptions o = options_for(root);
  o.max_bytes = entry_bytes * 3 / 2;  // room for one entry of the three
  KernelCache old_entries(options_for(root));
  CacheKey stale = test_key("cap-old");
  old_entries.get(stale, short_name(stale), builder(stale));  // evicted first: not in the set

  KernelCache cache(o);
  std::vector<fs::path> paths;
  {
    KernelCache::PrecompileScope scope(cache);
    for (const auto& k : keys) paths.push_back(cache.get(k, short_name(k), builder(k)).path);
    for (const auto& p : paths) {
      INFO(p);
      CHECK(fs::exists(p));
      CHECK(fs::exists(meta_of(p)));
    }
    CHECK(cache.list().size() == 3);  // the old entry went, the set stayed
    CHECK(cache.prune(0) == 0);       // an explicit prune keeps the set too, while the scope lives
  }
  // Without a scope (a serving process), the cap holds again: the next publish prunes.
  CacheKey later = test_key("cap-later");
  cache.get(later, short_name(later), builder(later));
  CHECK(cache.list().size() == 1);
}

TEST_CASE("a precompile scope copies read-only hits into the writable root", "[cache]") {
  // Before: `FKV_CACHE_READONLY_DIRS=old fkv-jit precompile --cache-dir NEW` reported cache
  // hits and left NEW empty.
  TempDir tmp;
  fs::path old_root = tmp.path / "old", fresh = tmp.path / "new";
  CountingBuilder builder;
  CacheKey key = test_key("copy");
  {
    KernelCache c(options_for(old_root));
    c.get(key, short_name(key), builder(key));
  }
  fkv::CacheOptions o = options_for(fresh);
  o.readonly_roots = {old_root};
  {
    KernelCache plain(o);  // a lookup outside a precompile still just reads the read-only root
    auto r = plain.get(key, short_name(key), builder(key));
    CHECK(r.outcome == CacheOutcome::ReadOnlyHit);
    CHECK(files_under(fresh).empty());
  }
  KernelCache c(o);
  {
    KernelCache::PrecompileScope scope(c);
    auto r = c.get(key, short_name(key), builder(key));
    CHECK(r.outcome == CacheOutcome::ReadOnlyHit);
    CHECK(r.path.string().rfind(fresh.string(), 0) == 0);
    CHECK(fs::exists(r.path));
    auto again = c.get(key, short_name(key), builder(key));  // a memory hit: same path
    CHECK(again.outcome == CacheOutcome::MemoryHit);
    CHECK(again.path == r.path);
  }
  CHECK(builder.calls == 1);  // copied, not compiled again
  KernelCache only_new(options_for(fresh));
  auto hit = only_new.get(key, short_name(key), builder(key));
  CHECK(hit.outcome == CacheOutcome::DiskHit);
  CHECK(hit.kernel->image == fake_kernel(key).image);

  SECTION("no usable writable root: not persisted") {
    fs::path bad = tmp.path / "open";
    fs::create_directories(bad);
    fs::permissions(bad, fs::perms::all);  // writable by others: refused
    fkv::CacheOptions ob = options_for(bad);
    ob.readonly_roots = {old_root};
    KernelCache mem(ob);
    REQUIRE(mem.memory_only());
    KernelCache::PrecompileScope scope(mem);
    CHECK(mem.get(key, short_name(key), builder(key)).path.empty());
  }
}

TEST_CASE("unusable entry directories are named, not invisible", "[cache][security]") {
  // Before: a symlinked v1/nvrtc-13.0 or an sm_90 directory of another user was skipped by
  // every scan, so `cache verify` said "0 entries checked" while every lookup ran memory-only.
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  REQUIRE_FALSE(c.memory_only());
  CHECK(c.unusable_dirs().empty());
  fs::path elsewhere = tmp.path / "elsewhere";
  fs::create_directories(elsewhere / "sm_90");
  fs::permissions(elsewhere, fs::perms::owner_all);
  fs::create_directory_symlink(elsewhere, root / "v1" / "nvrtc-13.0");
  fs::create_directories(root / "v1" / "nvrtc-12.8" / "sm_80");
  fs::permissions(root / "v1" / "nvrtc-12.8", fs::perms::owner_all);
  fs::permissions(root / "v1" / "nvrtc-12.8" / "sm_80",
                  fs::perms::owner_all | fs::perms::group_write);
  spill(root / "v1" / "nvrtc-12.8" / "sm_90", "a file where a directory belongs");
  auto dirs = c.unusable_dirs();
  REQUIRE(dirs.size() == 3);
  CHECK(dirs[0].path == root / "v1" / "nvrtc-12.8" / "sm_80");
  CHECK(dirs[0].problem.find("writable by group or others") != std::string::npos);
  CHECK(dirs[1].path == root / "v1" / "nvrtc-12.8" / "sm_90");
  CHECK(dirs[1].problem.find("not a directory") != std::string::npos);
  CHECK(dirs[2].path == root / "v1" / "nvrtc-13.0");
  CHECK(dirs[2].problem.find("symbolic link") != std::string::npos);
  if (::geteuid() == 0) {  // another owner
    fs::create_directories(root / "v1" / "nvrtc-12.9" / "sm_90");
    fs::permissions(root / "v1" / "nvrtc-12.9", fs::perms::owner_all);
    fs::permissions(root / "v1" / "nvrtc-12.9" / "sm_90", fs::perms::owner_all);
    REQUIRE(::lchown((root / "v1" / "nvrtc-12.9" / "sm_90").c_str(), 65534, 65534) == 0);
    dirs = c.unusable_dirs();
    REQUIRE(dirs.size() == 4);
    CHECK(dirs[2].problem.find("owned by uid 65534") != std::string::npos);
  }
}

TEST_CASE("verify skips a publish in progress", "[cache]") {
  // Before: an image whose meta file was not written yet (another process between its two
  // renames) was a bad entry, and `cache verify` exited 6.
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  CountingBuilder builder;
  CacheKey done = test_key("done"), writing = test_key("writing"), locked = test_key("locked");
  fs::path image = c.get(done, short_name(done), builder(done)).path;
  const fs::path dir = image.parent_path();
  spill(dir / (short_name(writing) + "-" + writing.digest + ".cubin"), "half of a publish");
  spill(dir / (short_name(writing) + "-" + writing.digest + ".cubin.tmp.1.2.3"), "temp");
  auto verified = c.verify();
  REQUIRE(verified.size() == 1);
  CHECK(verified[0].ok);
  auto listed = c.list();  // still shown by list(), as a publish in progress
  REQUIRE(listed.size() == 2);
  for (const auto& e : listed)
    if (!e.ok) CHECK(e.in_progress);

  SECTION("a bad entry whose key lock is held is being replaced: left alone") {
    fs::path limage = c.get(locked, short_name(locked), builder(locked)).path;
    fs::resize_file(limage, 10);  // what a reader sees between the publisher's two renames
    {
      fkv::cache_fs::FileLock held(fs::path(limage).replace_extension(".lock"));
      REQUIRE(held.held());
      std::string report;
      pid_t pid = ::fork();  // flock is per open file: verify from another process
      if (pid == 0) {
        KernelCache other(options_for(root));
        auto v = other.verify();
        bool skipped = true;
        for (const auto& e : v) skipped &= e.path != limage && e.ok;
        ::_exit(skipped && fs::exists(limage) ? 0 : 1);
      }
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    auto v = c.verify();  // unlocked now: removed
    int removed = 0;
    for (const auto& e : v) removed += e.removed;
    CHECK(removed == 1);
  }
}

TEST_CASE("log messages escape control characters in paths", "[cache][security]") {
  // Before: the cache root's path reached the log (and the terminal) raw.
  TempDir tmp;
  fs::path root = tmp.path / "c\x1b]0;owned\x07\n";
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all);  // refused: the warning names the root
  LogCapture log;
  KernelCache c(options_for(root));
  CHECK(c.memory_only());
  const std::string text = log.text();
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("c\\x1b]0;owned\\x07\\x0a") != std::string::npos);
  CHECK(fkv::cache_fs::printable("a\tb\nc\x7f") == "a\\x09b\\x0ac\\x7f");
  CHECK(fkv::cache_fs::printable("a\tb\nc", true) == "a\tb\nc");
}

TEST_CASE("an entry outside the directory its key names is bad", "[cache]") {
  // Before: list() and verify() called an entry moved into another arch's directory ok, and
  // `cache verify --config` said "ok" for a kernel no lookup would ever find there.
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  CountingBuilder builder;
  const CacheKey key = test_key("moved");
  const fs::path image = c.get(key, short_name(key), builder(key)).path;
  const fs::path elsewhere = image.parent_path().parent_path() / "sm_86";
  fs::create_directory(elsewhere);
  fs::permissions(elsewhere, fs::perms::owner_all);
  fs::rename(image, elsewhere / image.filename());
  fs::rename(meta_of(image), elsewhere / meta_of(image).filename());
  auto listed = c.list();
  REQUIRE(listed.size() == 1);
  CHECK_FALSE(listed[0].ok);
  CHECK(listed[0].problem.find("its key belongs in nvrtc-12.8/sm_90") != std::string::npos);
  auto verified = c.verify();
  REQUIRE(verified.size() == 1);
  CHECK(verified[0].removed);
  CHECK(count_with_suffix(root, ".cubin") == 0);
  KernelCache fresh(options_for(root));
  CHECK(fresh.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
}

TEST_CASE("a directory at an image path is bad on every verify, never a publish in progress",
          "[cache]") {
  // Before: once verify had removed its meta file, the directory passed for "a publish in
  // progress" for 10 minutes (verify exited 0), and list() showed its size as 16 EiB.
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  CountingBuilder builder;
  const CacheKey key = test_key("imgdir");
  const fs::path image = c.get(key, short_name(key), builder(key)).path;
  fs::remove(image);
  fs::create_directory(image);
  for (int round = 0; round < 2; ++round) {
    INFO("verify " << round);
    std::vector<std::string> failures;
    auto verified = c.verify(&failures);
    REQUIRE(verified.size() == 1);
    CHECK_FALSE(verified[0].ok);
    CHECK_FALSE(verified[0].in_progress);
    CHECK(failures.size() == 1);  // the directory cannot be unlinked
  }
  auto listed = c.list();
  REQUIRE(listed.size() == 1);
  CHECK_FALSE(listed[0].in_progress);
  CHECK(listed[0].problem.find("a directory") != std::string::npos);
  CHECK(listed[0].bytes == 0);
}

TEST_CASE("entry paths longer than PATH_MAX: the root is refused, no entry called bad", "[cache]") {
  // Before: the root was taken, and every lookup logged "removing bad entry ...: File name too
  // long" for entries that did not exist.
  TempDir tmp;
  fs::path root = tmp.path;
  while (root.string().size() < PATH_MAX - 200) root /= std::string(200, 'd');
  LogCapture log;
  KernelCache c(options_for(root));
  CHECK(c.memory_only());
  CHECK(log.count("longer than PATH_MAX") == 1);
  CHECK_FALSE(fs::exists(tmp.path / std::string(200, 'd')));  // nothing created
  const CacheKey key = test_key("long");
  CountingBuilder builder;
  CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
  CHECK(log.count("removing bad entry") == 0);
  // The loader itself: a meta file it cannot open because of its path is no bad entry.
  fs::path meta = tmp.path;
  while (meta.string().size() <= PATH_MAX) meta /= std::string(200, 'e');
  auto e = fkv::cache_entry::load_entry(meta / "k-0123.meta.json", nullptr);
  CHECK(e.state == fkv::cache_entry::EntryState::Unreadable);
  CHECK(e.problem.find("File name too long") != std::string::npos);
}

TEST_CASE("a wait for another holder's lock is announced once", "[cache]") {
  // Before: precompile sat silent for 60 s per kernel behind a hung process's lock.
  TempDir tmp;
  const fs::path lock = tmp.path / ("fused_kv_x-" + std::string(32, 'c') + ".lock");
  fkv::cache_fs::FileLock held(lock);
  REQUIRE(held.held());
  LogCapture log;
  fkv::cache_fs::FileLock waiting(lock, std::chrono::seconds(2));  // flock: per open file
  CHECK_FALSE(waiting.held());
  CHECK(waiting.busy());
  INFO(log.text());
  CHECK(log.count("another process holds the lock " + lock.string() +
                  " (compiling kernel fused_kv_x); waiting up to 2 s") == 1);
  CHECK(log.count("waited 2 s") == 1);
  LogCapture quiet;
  fkv::cache_fs::FileLock tried(lock, std::chrono::seconds(0));  // a try-lock says nothing
  CHECK(quiet.warnings() == 0);
}

TEST_CASE("a root opened read-only is listed and verified, never written", "[cache]") {
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  CountingBuilder builder;
  const CacheKey key = test_key("ro"), other = test_key("ro-other");
  fs::path image;
  {
    KernelCache w(options_for(root));
    image = w.get(key, short_name(key), builder(key)).path;
  }
  fkv::CacheOptions o = options_for(root);
  o.root_readonly = true;
  LogCapture log;
  KernelCache c(o);
  CHECK(log.warnings() == 0);  // no "no cache directory" warning: there is none, by request
  auto listed = c.list();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].ok);
  CHECK(listed[0].readonly);
  CHECK(c.get(key, short_name(key), builder(key)).outcome == CacheOutcome::ReadOnlyHit);
  fs::resize_file(image, 10);
  auto verified = c.verify();
  REQUIRE(verified.size() == 1);
  CHECK_FALSE(verified[0].ok);
  CHECK_FALSE(verified[0].removed);
  CHECK(fs::exists(image));
  c.get(other, short_name(other), builder(other));
  CHECK(count_with_suffix(root, ".cubin") == 1);  // nothing published
}

TEST_CASE("a symbolic link at an entry path is named as one, never followed", "[cache][security]") {
  // Before: "cannot read image: Too many levels of symbolic links" (O_NOFOLLOW's ELOOP text).
  TempDir tmp;
  fs::path root = tmp.path / "cache";
  KernelCache c(options_for(root));
  CountingBuilder builder;
  const CacheKey key = test_key("linked");
  const fs::path image = c.get(key, short_name(key), builder(key)).path;
  const fs::path outside = tmp.path / "outside.cubin";
  fs::copy_file(image, outside);
  const std::string said = "it is a symbolic link, and fkv-jit does not follow links in its cache";
  for (const fs::path& at : {image, meta_of(image)}) {
    INFO(at);
    const fs::path copy = tmp.path / "copy";
    fs::copy_file(at, copy, fs::copy_options::overwrite_existing);
    fs::remove(at);
    fs::create_symlink(copy, at);
    auto listed = c.list();
    REQUIRE(listed.size() == 1);
    CHECK_FALSE(listed[0].ok);
    CHECK_THAT(listed[0].problem, Catch::Contains(said) && !Catch::Contains("Too many levels"));
    LogCapture log;
    KernelCache fresh(options_for(root));  // no memory hit
    CHECK(fresh.get(key, short_name(key), builder(key)).outcome == CacheOutcome::Compiled);
    INFO(log.text());
    CHECK(log.count("removing bad entry " + image.string()) == 1);
    CHECK(log.count(said) == 1);
    CHECK(fs::exists(copy));  // the link was removed, not its target
    CHECK_FALSE(fs::is_symlink(at));
  }
  // An image without its meta file that is a link: the same words in list().
  fs::remove(meta_of(image));
  fs::remove(image);
  fs::create_symlink(outside, image);
  auto listed = c.list();
  REQUIRE(listed.size() == 1);
  CHECK_THAT(listed[0].problem, Catch::Contains(said));
}

TEST_CASE("a refused root's advice fits its cause", "[cache]") {
  // Before: a file, a path below a file, a dangling symlink, a symlink loop and a symlinked v1/
  // got "It is not a directory", "Create it" or "chmod 700 DIR", whatever was wrong.
  TempDir tmp;
  spill(tmp.path / "a-file", "not a directory");
  auto refusal = [&](const fs::path& root) {
    LogCapture log;
    KernelCache c(options_for(root));
    CHECK(c.memory_only());
    return log.text();
  };
  SECTION("a file") {
    const std::string said = refusal(tmp.path / "a-file");
    CHECK_THAT(said, Catch::Contains("It is a regular file, not a directory: set FKV_CACHE_DIR"));
  }
  SECTION("a path below a file") {
    const std::string said = refusal(tmp.path / "a-file" / "cache");
    CHECK_THAT(said, Catch::Contains((tmp.path / "a-file").string() +
                                     " is a regular file, not a directory, so the root cannot be "
                                     "created below it"));
  }
  SECTION("a symbolic link to nothing") {
    fs::create_symlink(tmp.path / "gone", tmp.path / "link");
    const std::string said = refusal(tmp.path / "link");
    CHECK_THAT(said, Catch::Contains("It is a symbolic link to " + (tmp.path / "gone").string() +
                                     ", which does not exist: create that directory"));
  }
  SECTION("a symbolic link loop") {
    fs::create_symlink(tmp.path / "loop", tmp.path / "loop");
    CHECK_THAT(refusal(tmp.path / "loop"),
               Catch::Contains("It is a symbolic link that leads back to itself"));
  }
  SECTION("v1/ is a symbolic link below a good root") {
    fs::create_directory(tmp.path / "root");
    fs::create_directory(tmp.path / "elsewhere");
    fs::create_directory_symlink(tmp.path / "elsewhere", tmp.path / "root" / "v1");
    const std::string said = refusal(tmp.path / "root");
    CHECK_THAT(said, Catch::Contains((tmp.path / "root" / "v1").string() +
                                     " is a symbolic link, and fkv-jit does not follow links "
                                     "below a cache root"));
    CHECK_THAT(said, Catch::Contains("The root itself is fine") && !Catch::Contains("chmod"));
  }
  SECTION("writable by group: chmod") {
    fs::create_directory(tmp.path / "shared");
    fs::permissions(tmp.path / "shared", fs::perms::group_write, fs::perm_options::add);
    CHECK_THAT(refusal(tmp.path / "shared"),
               Catch::Contains("(chmod 700 " + (tmp.path / "shared").string() + ")"));
  }
  SECTION("missing, below a read-only file system") {
    const fs::path mnt = tmp.path / "ro";
    fs::create_directory(mnt);
    if (::geteuid() != 0 || std::system(("mount -t tmpfs -o size=1m,mode=700,ro tmpfs '" +
                                         mnt.string() + "' 2>/dev/null")
                                            .c_str()) != 0) {
      WARN("needs root and mount: skipped");
      return;
    }
    const std::string said = refusal(mnt / "cache");
    const std::string in_root = refusal(mnt);
    CHECK(std::system(("umount '" + mnt.string() + "'").c_str()) == 0);
    CHECK_THAT(said, Catch::Contains("It cannot be created: " + mnt.string() +
                                     " is on a read-only file system") &&
                         !Catch::Contains("Create it"));
    CHECK_THAT(in_root,
               Catch::Contains("It is on a read-only file system") && !Catch::Contains("chmod"));
  }
}

TEST_CASE("a lock wait that timed out cuts this process's later waits on that root short",
          "[cache]") {
  // Before: each kernel whose lock a hung process held cost the whole timeout again (60 s per
  // kernel of a precompile). The timeout here is 2 s, so the test takes about 7 s.
  using Clock = std::chrono::steady_clock;
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  fkv::CacheOptions o = options_for(root);
  o.lock_timeout = std::chrono::seconds(2);
  KernelCache c(o);
  CountingBuilder builder;
  const CacheKey first = test_key("lock-0");
  c.get(first, short_name(first), builder(first));  // creates the entry directory
  // A "hung process" holds the locks of the next keys (flock: one per open file).
  std::vector<CacheKey> keys;
  std::vector<std::unique_ptr<fkv::cache_fs::FileLock>> held;
  for (int i = 1; i <= 4; ++i) {
    keys.push_back(test_key("lock-" + std::to_string(i)));
    const fs::path lock =
        fkv::cache_entry::entry_paths(root, keys.back(), short_name(keys.back())).lock;
    held.push_back(std::make_unique<fkv::cache_fs::FileLock>(lock));
    REQUIRE(held.back()->held());
  }
  LogCapture log;
  std::vector<double> waited;
  auto get = [&](KernelCache& cache, const CacheKey& key) {
    const auto t0 = Clock::now();
    const auto r = cache.get(key, short_name(key), builder(key));
    waited.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK_FALSE(r.path.empty());  // published without the lock
  };
  get(c, keys[0]);
  get(c, keys[1]);
  get(c, keys[2]);
  KernelCache other(o);  // another cache on the same root in this process: the same
  get(other, keys[3]);
  INFO(log.text());
  CHECK(waited[0] >= 1.9);
  for (std::size_t i = 1; i < waited.size(); ++i) {
    INFO("wait " << i << ": " << waited[i] << " s");
    CHECK(waited[i] >= 0.9);  // the holder may still be compiling: a short wait, not none
    CHECK(waited[i] < 1.9);   // kStalledLockWait (1 s), not the timeout again
  }
  CHECK(log.count("waited 2 s for") == 1);
  CHECK(log.count("Its holder looks hung: this process's later lock waits in this cache last at "
                  "most 1 s") == 1);
  CHECK(log.count("another process holds the lock") == 1);  // only the long wait is announced
  // Another root is not affected.
  KernelCache fresh(options_for(tmp.path / "other"));
  const CacheKey k = test_key("lock-5");
  fresh.get(k, short_name(k), builder(k));
  fkv::cache_fs::FileLock mine(fkv::cache_entry::entry_paths(tmp.path / "other", test_key("lock-6"),
                                                             short_name(test_key("lock-6")))
                                   .lock);
  fkv::CacheOptions other_root = options_for(tmp.path / "other");
  other_root.lock_timeout = std::chrono::seconds(2);
  KernelCache second(other_root);
  const auto t0 = Clock::now();
  second.get(test_key("lock-6"), short_name(test_key("lock-6")), builder(test_key("lock-6")));
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() >= 1.9);
}
