// Multi-process stress of the kernel cache (issue 6, docs/reliability.md): 16 processes x 4
// threads request overlapping key sets from one cold cache, three cold rounds and a warm one.
// Every result must be the bytes the builder makes for that key, each key is compiled once
// per round across all processes (file lock + single flight), and no temp file is left.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>

#include "temp_dir.hpp"
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "fkv/cache.hpp"

namespace fs = std::filesystem;
using fkv::CacheKey;
using fkv::CacheOutcome;
using fkv::CompiledKernel;
using fkv::KernelCache;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kProcesses = 16;
constexpr int kThreads = 4;
constexpr int kKeys = 48;
constexpr int kKeysPerProcess = 24;  // process p asks for keys 3p .. 3p+23 (mod 48): overlapping
constexpr int kColdRounds = 3;
constexpr auto kCompileTime = std::chrono::milliseconds(15);

using TempDir = fkv_test::TempDir;

CacheKey key_of(int i) {
  std::string v = "stress" + std::to_string(i);
  return CacheKey::from_fields({{"schema", "1"},
                                {"fkv", "0.1.0"},
                                {"nvrtc", "12.8"},
                                {"arch", i % 3 == 0 ? "sm_80" : "sm_90"},
                                {"output", "cubin"},
                                {"specialization", "variant=" + v},
                                {"kernel", "fkv_kernels::fused_kv_materialize<" + v + ">"}});
}

CompiledKernel kernel_of(const CacheKey& key, int i) {
  CompiledKernel k;
  k.image = "STRESS " + key.digest + " ";
  k.image.resize(1024 + 97 * static_cast<std::size_t>(i), static_cast<char>('A' + i % 26));
  k.lowered_name = "_Z6stress" + std::to_string(i);
  return k;
}

// One process: kThreads threads share one KernelCache, each walks the process's keys in its
// own order, twice. Returns the number of wrong results.
int run_process(const fs::path& root, const fs::path& compile_log, int p, const std::vector<CacheKey>& keys) {
  spdlog::set_level(spdlog::level::warn);
  KernelCache cache([&] {
    fkv::CacheOptions o;
    o.root = root;
    return o;
  }());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int pass = 0; pass < 2; ++pass)
        for (int j = 0; j < kKeysPerProcess; ++j) {
          int i = (3 * p + (j * (t + 1) + t * 5) % kKeysPerProcess) % kKeys;
          const CacheKey& key = keys[static_cast<std::size_t>(i)];
          try {
            auto r = cache.get(key, fkv::cache_short_name(key.field("kernel")), [&] {
              std::string line = std::to_string(i) + "\n";
              int fd = ::open(compile_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
              (void)!::write(fd, line.data(), line.size());
              ::close(fd);
              std::this_thread::sleep_for(kCompileTime);
              return kernel_of(key, i);
            });
            CompiledKernel want = kernel_of(key, i);
            if (!r.kernel || r.kernel->image != want.image || r.kernel->lowered_name != want.lowered_name) ++wrong;
            if (pass == 1 && r.outcome != CacheOutcome::MemoryHit) ++wrong;
          } catch (...) {
            ++wrong;
          }
        }
    });
  for (auto& t : threads) t.join();
  return wrong.load();
}

std::map<int, int> compiles_per_key(const fs::path& log) {
  std::map<int, int> out;
  std::ifstream in(log);
  for (int i; in >> i;) ++out[i];
  return out;
}

}  // namespace

TEST_CASE("16 processes x 4 threads, overlapping keys, cold cache, repeated", "[stress][processes]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  std::vector<CacheKey> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(key_of(i));
  std::ostringstream report;
  int total_compiles = 0, total_requests = 0;
  auto t_all = Clock::now();

  for (int round = 0; round <= kColdRounds; ++round) {
    const bool warm = round == kColdRounds;  // the last round reuses what the previous one published
    if (!warm) KernelCache(fkv::CacheOptions{root, {}, 0, false}).clear();
    const fs::path log = tmp.path / ("compiles-" + std::to_string(round));
    int go[2];
    REQUIRE(::pipe(go) == 0);
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(go[1]);
        char byte;
        (void)!::read(go[0], &byte, 1);  // all start together when the parent closes the pipe
        int wrong = 0;
        try {
          wrong = run_process(root, log, p, keys);
        } catch (...) {
          wrong = 100;
        }
        ::_exit(std::min(wrong, 100));
      }
      children.push_back(pid);
    }
    auto t0 = Clock::now();
    ::close(go[0]);
    ::close(go[1]);
    int ok = 0;
    for (pid_t pid : children) {
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      INFO("round " << round << ": child status " << status);
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
      ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    CHECK(ok == kProcesses);

    auto compiles = compiles_per_key(log);
    int round_compiles = 0, most = 0;
    for (const auto& [i, n] : compiles) {
      round_compiles += n;
      most = std::max(most, n);
    }
    total_compiles += round_compiles;
    total_requests += kProcesses * kThreads * kKeysPerProcess * 2;
    INFO("round " << round);
    if (warm) {
      CHECK(round_compiles == 0);
    } else {
      CHECK(compiles.size() == static_cast<std::size_t>(kKeys));  // every key was asked for
      CHECK(most == 1);  // once per key across 16 processes: the others waited and read it
    }
    // Nothing left over: every key committed and verified, no temp file.
    KernelCache check(fkv::CacheOptions{root, {}, 0, false});
    auto entries = check.verify();
    CHECK(entries.size() == static_cast<std::size_t>(kKeys));
    for (const auto& e : entries) CHECK(e.ok);
    int temps = 0;
    for (const auto& f : fs::recursive_directory_iterator(root))
      temps += f.path().filename().string().find(".tmp.") != std::string::npos;
    CHECK(temps == 0);
    report << "round " << round << (warm ? " (warm)" : " (cold)") << ": " << seconds << " s, " << round_compiles
           << " compiles, at most " << most << " per key; ";
  }
  double all = std::chrono::duration<double>(Clock::now() - t_all).count();
  WARN("stress: " << kProcesses << " processes x " << kThreads << " threads, " << kKeys << " keys ("
                  << kKeysPerProcess << " per process), " << total_requests << " requests, " << total_compiles
                  << " compiles in " << all << " s. " << report.str());
}
