// Multi-process stress of the kernel cache (docs/reliability.md), two tests:
//
// 1. Stub builder: 16 processes x 4 threads request overlapping key sets from one cold cache,
//    three cold rounds and a warm one. The "compile" is a stub that sleeps 15 ms and returns
//    fixed bytes (no NVRTC), so many rounds fit in seconds. Every result must be the bytes the
//    stub makes for that key, each key is built once per round across all processes (file
//    lock + single flight), and no temp file is left.
// 2. Real NVRTC through the CLI: several `fkv-jit precompile` processes of overlapping configs
//    into one empty cache while `fkv-jit cache prune` (and, in the last round, `cache clear`)
//    run beside them; compiles are counted from the cache's debug log lines.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "fkv/cache.hpp"
#include "temp_dir.hpp"

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
constexpr auto kStubCompileTime = std::chrono::milliseconds(15);  // the stub builder's sleep

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
int run_process(const fs::path& root, const fs::path& compile_log, int p,
                const std::vector<CacheKey>& keys) {
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
              std::this_thread::sleep_for(kStubCompileTime);
              return kernel_of(key, i);
            });
            CompiledKernel want = kernel_of(key, i);
            if (!r.kernel || r.kernel->image != want.image ||
                r.kernel->lowered_name != want.lowered_name)
              ++wrong;
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

TEST_CASE("stub builder: 16 processes x 4 threads, overlapping keys, cold cache, repeated",
          "[stress][processes]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  std::vector<CacheKey> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(key_of(i));
  std::ostringstream report;
  int total_compiles = 0, total_requests = 0;
  auto t_all = Clock::now();

  for (int round = 0; round <= kColdRounds; ++round) {
    const bool warm =
        round == kColdRounds;  // the last round reuses what the previous one published
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
    report << "round " << round << (warm ? " (warm)" : " (cold)") << ": " << seconds << " s, "
           << round_compiles << " compiles, at most " << most << " per key; ";
  }
  double all = std::chrono::duration<double>(Clock::now() - t_all).count();
  WARN("stress (stub builder, 15 ms per build): "
       << kProcesses << " processes x " << kThreads << " threads, " << kKeys << " keys ("
       << kKeysPerProcess << " per process), " << total_requests << " requests, " << total_compiles
       << " compiles in " << all << " s. " << report.str());
}

// ---- real NVRTC, through the CLI ---------------------------------------------------------

namespace {

// Runs `fkv-jit args...` with stdout and stderr into `log`; returns the pid.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) ::_exit(120);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::setenv("FKV_LOG_LEVEL", "debug", 1);  // the cache logs one "compiled" line per NVRTC build
  ::unsetenv("FKV_CACHE_READONLY_DIRS");
  ::unsetenv("FKV_CACHE_MAX_BYTES");
  ::unsetenv("FKV_DISABLE_CACHE");
  std::vector<char*> argv;
  std::string cli = FKV_CLI_PATH;
  argv.push_back(cli.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(cli.c_str(), argv.data());
  ::_exit(121);
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// digest -> number of "fkv-jit cache: compiled <name> key <digest>" lines in the logs.
std::map<std::string, int> nvrtc_compiles(const std::vector<fs::path>& logs) {
  std::map<std::string, int> out;
  const std::string marker = "fkv-jit cache: compiled ";
  for (const auto& log : logs) {
    std::istringstream in(slurp_file(log));
    for (std::string line; std::getline(in, line);) {
      auto at = line.find(marker);
      if (at == std::string::npos) continue;
      auto key = line.find(" key ", at);
      if (key != std::string::npos) ++out[line.substr(key + 5, 32)];
    }
  }
  return out;
}

}  // namespace

// Issue 13 item 9. Three configs (two of them share their kernels: Qwen3-8B and Qwen3-32B have
// the same KV layout), two precompile processes each, six at once into one cache root:
//   rounds 0, 1: from an empty cache, with `cache prune` (a cap above what a round writes) and
//                `cache ls` looping beside them: every key is compiled by NVRTC exactly once
//                across the six processes, and `cache verify` finds every entry good;
//   round 2:     with `cache clear` looping beside them: no process fails, no entry is torn
//                (verify is clean), nothing is left half-written; then a last round without
//                clear compiles exactly the keys the clears removed, each once.
TEST_CASE("real NVRTC: concurrent fkv-jit precompile with cache prune and clear",
          "[stress][processes][nvrtc]") {
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  const std::string data = FKV_TEST_DATA_DIR;
  const std::vector<std::string> configs = {data + "/qwen3-8b.json", data + "/qwen3-32b.json",
                                            data + "/llama3.1-8b-instruct.json"};
  constexpr int kPrecompilers = 6;
  auto t_all = Clock::now();
  std::ostringstream report;
  int log_id = 0;
  auto next_log = [&] { return tmp.path / ("log-" + std::to_string(log_id++)); };
  auto cli_ok = [&](const std::vector<std::string>& args) {
    fs::path log = next_log();
    int rc = wait_exit(spawn_cli(args, log));
    INFO("fkv-jit " << args[0] << " " << args[1] << ": " << slurp_file(log));
    CHECK(rc == 0);
  };
  // Runs the six precompiles; `maintenance` (if any) is run again and again until they finish.
  auto run_round = [&](const std::vector<std::string>& maintenance, int& maintenance_runs) {
    std::vector<pid_t> pids;
    std::vector<fs::path> logs;
    for (int p = 0; p < kPrecompilers; ++p) {
      logs.push_back(next_log());
      pids.push_back(spawn_cli({"precompile", configs[p % configs.size()], "--arch", "sm_80",
                                "--cache-dir", root.string(), "-j", "1"},
                               logs.back()));
    }
    std::vector<int> rcs(kPrecompilers, -1);
    int running = kPrecompilers;
    while (running > 0) {
      if (!maintenance.empty()) {
        cli_ok(maintenance);
        ++maintenance_runs;
        if (maintenance[1] == "prune") cli_ok({"cache", "ls", "--cache-dir", root.string()});
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      for (int p = 0; p < kPrecompilers; ++p) {
        if (rcs[p] != -1) continue;
        int status = 0;
        if (::waitpid(pids[p], &status, WNOHANG) == pids[p]) {
          rcs[p] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --running;
        }
      }
    }
    for (int p = 0; p < kPrecompilers; ++p) {
      INFO("precompile " << p << ": " << slurp_file(logs[p]));
      CHECK(rcs[p] == 0);
    }
    return nvrtc_compiles(logs);
  };
  // Every entry good, nothing half-written; returns the digests present.
  auto verify_clean = [&] {
    cli_ok({"cache", "verify", "--cache-dir", root.string()});
    std::set<std::string> present;
    for (const auto& e : KernelCache(fkv::CacheOptions{root, {}, 0, false}).list()) {
      CHECK(e.ok);
      present.insert(e.digest);
    }
    int temps = 0;
    for (const auto& f : fs::recursive_directory_iterator(root))
      temps += f.path().filename().string().find(".tmp.") != std::string::npos;
    CHECK(temps == 0);
    return present;
  };

  std::set<std::string> all_keys;
  for (int r = 0; r < 2; ++r) {
    cli_ok({"cache", "clear", "--cache-dir", root.string()});
    auto t0 = Clock::now();
    int prunes = 0;
    auto compiles =
        run_round({"cache", "prune", "--max-bytes", "1G", "--cache-dir", root.string()}, prunes);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO("round " << r);
    CHECK(compiles.size() == 4);  // 2 kernels (stacked, pool) x 2 distinct KV layouts
    for (const auto& [digest, n] : compiles) {
      INFO(digest);
      CHECK(n == 1);
    }
    std::set<std::string> compiled;
    for (const auto& [digest, n] : compiles) compiled.insert(digest);
    CHECK(verify_clean() == compiled);
    if (r == 0) all_keys = compiled;
    CHECK(compiled == all_keys);
    report << "round " << r << ": " << seconds << " s, " << compiles.size() << " NVRTC compiles, "
           << prunes << " prunes beside; ";
  }

  cli_ok({"cache", "clear", "--cache-dir", root.string()});
  int clears = 0;
  auto t0 = Clock::now();
  auto raced = run_round({"cache", "clear", "--cache-dir", root.string()}, clears);
  const std::set<std::string> left = verify_clean();
  int raced_total = 0;
  for (const auto& [digest, n] : raced) {
    CHECK(all_keys.count(digest) == 1);
    raced_total += n;
  }
  CHECK(raced.size() == all_keys.size());  // every key was compiled at least once
  int none = 0;
  auto fill = run_round({}, none);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::set<std::string> refilled;
  for (const auto& [digest, n] : fill) {
    CHECK(n == 1);
    CHECK(left.count(digest) == 0);  // only what the clears removed is compiled again
    refilled.insert(digest);
  }
  CHECK(refilled.size() + left.size() == all_keys.size());
  CHECK(verify_clean() == all_keys);
  report << "clear round: " << seconds << " s, " << clears << " clears beside, " << raced_total
         << " NVRTC compiles, " << left.size() << " of " << all_keys.size() << " keys left, "
         << refilled.size() << " compiled again";
  WARN("stress (real NVRTC via fkv-jit precompile, "
       << kPrecompilers << " processes, " << all_keys.size() << " keys) in "
       << std::chrono::duration<double>(Clock::now() - t_all).count() << " s: " << report.str());
}
