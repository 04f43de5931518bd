// fkv-jit on several GPUs (label gpu2; needs 2 devices): what serving engines do with it.
//
// 1. One process driving two devices from several threads: kernels load once per device
//    (one LoadedKernel per (device, spec), bound to that device's primary context), and
//    interleaved stacked and pool calls on streams of both devices match the reference.
// 2. One process per device (tensor-parallel ranks) starting at once on an empty shared cache
//    directory: each rank is correct; each kernel is compiled once across the ranks (the
//    cache's per-key flock), the others read it from disk; then a warm start compiles
//    nothing. Prints per-rank start-up figures for docs/performance.md.
// 3. More ranks than devices on an empty cache (a start-up storm): still one compile per key.
// 4. A call whose tensors live on device 1 while device 0's kernel or context is in play:
//    either a clear CudaError or a correct result, never a silent wrong write or a fault.
//
// Ranks run tests/gpu2/rank_worker.cpp through fork + exec, so that every rank initializes
// CUDA itself in a fresh process, as engine ranks do (and a fault in case 4 cannot poison
// this process's contexts).
//
// Environment: FKV_TEST_STORM_RANKS (default 8), FKV_TEST_DEVICES (devices the ranks spread
// over, default 2), FKV_TEST_KEEP=1 keeps the temporary cache directories (they are kept
// anyway when a REQUIRE fails), FKV_TEST_RANK_WORKER (the worker executable; default: the one
// built with this test).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "fkv/cache.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/runtime.hpp"
#include "fkv/validate.hpp"
#include "gpu/tp_case.hpp"
#include "gpu2/multi_device_case.hpp"

#ifndef FKV_RANK_WORKER_PATH
#error "FKV_RANK_WORKER_PATH must name the fkv_gpu2_rank_worker executable (tests/CMakeLists.txt)"
#endif

namespace fs = std::filesystem;
using fkv::DType;
using fkv::IndexType;
using fkv::OutputMode;
using namespace fkv_test;

namespace {

using Clock = std::chrono::steady_clock;

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

// ---- one process, two devices ----------------------------------------------------------------

void require_two_devices() {
  if (!fkv::Driver::available())
    FAIL(
        "no CUDA driver or device: test_multi_device carries the label `gpu2` and needs 2 GPUs; "
        "exclude it with `ctest -LE gpu` on machines without them");
  const int n = fkv::Driver::get().device_count;
  if (n < 2)
    FAIL("test_multi_device needs 2 CUDA devices; this process sees "
         << n << " (CUDA_VISIBLE_DEVICES=" << env_text("CUDA_VISIBLE_DEVICES")
         << "). Run it on a machine with two GPUs, or exclude the label "
         << "`gpu2` (`ctest -L '^gpu$'` or `ctest -LE gpu2`)");
}

// The primary context of `device` (made current on the calling thread).
CUcontext primary_context(int device) {
  FKV_CU(cuCtxSetCurrent, nullptr);  // ensure_context keeps a current context: clear it first
  return fkv::ensure_context(device);
}

std::vector<Problem> device_problems() {
  std::vector<Problem> v;
  {
    Problem p;  // Qwen3-like: 8 KV heads, K norm, full neox RoPE, bf16 stacked
    p.spec.num_kv_heads = 8, p.spec.head_dim = 128, p.spec.rotary_dim = 128,
    p.spec.k_norm = fkv::KNormKind::Rms;
    p.spec.act = DType::BF16, p.spec.cache = DType::BF16, p.spec.mode = OutputMode::Stacked;
    p.T = 257, p.L = 3, p.max_pos = 4096;
    v.push_back(p);
  }
  {
    Problem p;  // DFlash-like into an fp8 pool with per-layer scales
    p.spec.num_kv_heads = 2, p.spec.head_dim = 128, p.spec.rotary_dim = 128,
    p.spec.k_norm = fkv::KNormKind::Rms;
    p.spec.act = DType::BF16, p.spec.cache = DType::FP8_E4M3, p.spec.mode = OutputMode::Pool;
    p.T = 513, p.L = 5, p.max_pos = 8192, p.num_slots = 700;
    v.push_back(p);
  }
  {
    Problem p;  // GPT-J style partial rotary, fp16 pool, int32 indices
    p.spec.num_kv_heads = 4, p.spec.head_dim = 64, p.spec.rotary_dim = 32, p.spec.neox = false;
    p.spec.act = DType::FP16, p.spec.cache = DType::FP16, p.spec.mode = OutputMode::Pool;
    p.spec.positions = IndexType::I32, p.spec.slots = IndexType::I32, p.spec.cos_sin = DType::FP16;
    p.T = 100, p.L = 2, p.max_pos = 2048, p.num_slots = 130;
    v.push_back(p);
  }
  return v;
}

// ---- processes ---------------------------------------------------------------------------------

struct WorkerResult {
  std::vector<std::string> args;
  int exit_code = -1;                         // -1: killed or not started
  std::string status;                         // "exit 0", "signal 9", "timed out", ...
  std::string log;                            // stdout + stderr
  std::map<std::string, std::string> fields;  // from the line starting with the tag
  std::string detail;                         // the mismatch line's free text (after "detail=")

  std::string field(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
  double number(const std::string& key) const {
    const std::string v = field(key);
    return v.empty() ? -1.0 : std::stod(v);
  }
  std::string describe() const {
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    return "worker" + cmd + ": " + status + "\n--- log ---\n" + log + "--- end of log ---";
  }
};

// Parses "TAG k=v k=v ... detail=free text" from the worker's log.
void parse_fields(WorkerResult& w, const std::string& tag) {
  std::istringstream lines(w.log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(tag + " ", 0) != 0) continue;
    std::string rest = line.substr(tag.size() + 1);
    if (auto pos = rest.find("detail="); pos != std::string::npos) {
      w.detail = rest.substr(pos + 7);
      rest = rest.substr(0, pos);
    }
    std::istringstream words(rest);
    std::string word;
    while (words >> word)
      if (auto eq = word.find('='); eq != std::string::npos)
        w.fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
}

// A temporary directory (mode 0700, as the cache wants its root), removed at the end unless
// FKV_TEST_KEEP=1 (or an exception is unwinding: a REQUIRE failed).
struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "fkv-gpu2-XXXXXX").string();
    if (!::mkdtemp(templ.data()))
      throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    path = templ;
  }
  ~TempDir() {
    if (env_int("FKV_TEST_KEEP", 0) || std::uncaught_exceptions()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Moves `fd` to `target` without FD_CLOEXEC (dup2 onto itself would keep the flag).
// Async-signal-safe: runs between fork and exec.
bool move_fd(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

// Starts one worker per argument list, waits until each has signalled readiness, releases
// them all at once (closing the barrier pipe), and waits for them (at most `timeout`).
// The parent itself needs no CUDA: the workers exec a fresh image and initialize it.
std::vector<WorkerResult> run_workers(const std::vector<std::vector<std::string>>& arg_lists,
                                      const fs::path& log_dir,
                                      std::chrono::seconds timeout = std::chrono::seconds(300)) {
  fs::create_directories(log_dir);
  std::vector<WorkerResult> results(arg_lists.size());
  std::vector<pid_t> pids(arg_lists.size(), -1);
  std::vector<int> ready_fds(arg_lists.size(), -1);
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed: " + std::string(std::strerror(errno)));

  for (std::size_t i = 0; i < arg_lists.size(); ++i) {
    WorkerResult& w = results[i];
    w.args = arg_lists[i];
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    const char* worker = std::getenv("FKV_TEST_RANK_WORKER");  // another build's worker
    std::vector<std::string> argv_text{worker && *worker ? worker : FKV_RANK_WORKER_PATH};
    argv_text.insert(argv_text.end(), w.args.begin(), w.args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log_path = (log_dir / ("worker-" + std::to_string(i) + ".log")).string();
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed: " + std::string(std::strerror(errno)));

    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed: " + std::string(std::strerror(errno)));
    if (pid == 0) {
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (log < 0 || ::dup2(log, 1) != 1 || ::dup2(log, 2) != 2) ::_exit(126);
      const int go_copy = ::fcntl(go[0], F_DUPFD_CLOEXEC, 10);
      const int ready_copy = ::fcntl(ready[1], F_DUPFD_CLOEXEC, 10);
      if (go_copy < 0 || ready_copy < 0 || !move_fd(go_copy, 3) || !move_fd(ready_copy, 4))
        ::_exit(126);
      ::execv(argv[0], argv.data());  // every other descriptor is O_CLOEXEC (or not ours)
      ::_exit(127);
    }
    pids[i] = pid;
    ::close(ready[1]);
    ready_fds[i] = ready[0];
  }
  ::close(go[0]);

  // Barrier: every worker ready (or dead: its log says why), then release all at once.
  const auto deadline = Clock::now() + timeout;
  for (std::size_t i = 0; i < ready_fds.size(); ++i) {
    pollfd pfd{ready_fds[i], POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&pfd, 1, static_cast<int>(std::max<long long>(0, left))) > 0) {
      char byte;
      if (::read(ready_fds[i], &byte, 1) != 1) results[i].status = "exited before the barrier";
    } else {
      results[i].status = "not ready within the time limit";
    }
    ::close(ready_fds[i]);
  }
  ::close(go[1]);

  for (std::size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    pid_t r = 0;
    while ((r = ::waitpid(pids[i], &status, WNOHANG)) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    WorkerResult& w = results[i];
    if (r == 0) {
      ::kill(pids[i], SIGKILL);  // our own child, by pid
      ::waitpid(pids[i], &status, 0);
      w.status = "timed out after " + std::to_string(timeout.count()) + " s (killed)";
    } else if (WIFEXITED(status)) {
      w.exit_code = WEXITSTATUS(status);
      w.status = (w.status.empty() ? "" : w.status + ", ") + "exit " + std::to_string(w.exit_code);
    } else if (WIFSIGNALED(status)) {
      w.status =
          (w.status.empty() ? "" : w.status + ", ") + "signal " + std::to_string(WTERMSIG(status));
    }
    std::ifstream in(log_dir / ("worker-" + std::to_string(i) + ".log"));
    std::stringstream ss;
    ss << in.rdbuf();
    w.log = ss.str();
  }
  return results;
}

std::string config_path() { return std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json"; }

// The kernels a rank prepares (as rank_worker computes them): for the expected counts.
std::size_t config_spec_count() {
  return fkv::kernel_specs_for(fkv::make_plan(fkv::ModelConfig::from_file(config_path())),
                               fkv::VariantOptions{})
      .size();
}

struct Round {
  std::vector<WorkerResult> ranks;
  bool all_ok = true;  // every rank exited 0 with its result line and correct results
  int compiled = 0, disk = 0;
  std::set<std::string> archs;
};

// `n` ranks on `root`, rank r on device r % devices; checks each rank's own result.
Round run_round(const std::string& name, int n, int devices, const fs::path& root,
                const fs::path& log_dir, std::size_t specs) {
  std::vector<std::vector<std::string>> args;
  for (int r = 0; r < n; ++r)
    args.push_back(
        {"rank", std::to_string(r), std::to_string(r % devices), root.string(), config_path()});
  Round round;
  round.ranks = run_workers(args, log_dir);
  for (auto& w : round.ranks) {
    parse_fields(w, "FKV_RANK");
    if (w.exit_code != 0 || w.fields.empty() || w.field("check") != "ok") {
      FAIL_CHECK(name << " round: " << w.describe());
      round.all_ok = false;
      continue;
    }
    INFO(name << " round: " << w.describe());
    CHECK(w.field("specs") == std::to_string(specs));
    CHECK(w.field("memory") == "0");    // a fresh process has nothing in memory
    CHECK(w.field("readonly") == "0");  // no read-only roots configured
    CHECK(w.number("compiled") + w.number("disk") == static_cast<double>(specs));
    round.compiled += static_cast<int>(w.number("compiled"));
    round.disk += static_cast<int>(w.number("disk"));
    round.archs.insert(w.field("arch"));
  }
  return round;
}

// Every file under `root` is a committed entry (image + meta) or a lock file: no temp files
// or half entries left by ranks racing to publish. Returns the problems found.
std::vector<std::string> cache_dir_problems(const fs::path& root, std::size_t expected_entries) {
  std::vector<std::string> problems;
  fkv::CacheOptions options;
  options.root = root;
  fkv::KernelCache cache(options);
  const auto entries = cache.list();
  if (entries.size() != expected_entries)
    problems.push_back("the cache holds " + std::to_string(entries.size()) + " entries, expected " +
                       std::to_string(expected_entries));
  for (const auto& e : entries)
    if (!e.ok) problems.push_back("bad entry " + e.path.string() + ": " + e.problem);
  for (const auto& f : fs::recursive_directory_iterator(root)) {
    if (!f.is_regular_file()) continue;
    const std::string n = f.path().filename().string();
    auto ends = [&](const std::string& s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    if (!ends(".cubin") && !ends(".ptx") && !ends(".meta.json") && !ends(".lock"))
      problems.push_back("unexpected file left in the cache: " + f.path().string());
  }
  return problems;
}

}  // namespace

// ---- 1. one process, two devices
// -----------------------------------------------------------------

TEST_CASE("one process, two devices: one load per device, interleaved calls from threads",
          "[gpu2][devices]") {
  require_two_devices();
  std::array<CUcontext, 2> ctx{};
  for (int d = 0; d < 2; ++d) ctx[static_cast<std::size_t>(d)] = primary_context(d);
  REQUIRE(ctx[0] != ctx[1]);

  fkv::KernelCache cache(fkv::CacheOptions{});  // memory only: counts compiles in this process
  fkv::Runtime rt(cache);
  const std::vector<Problem> problems = device_problems();
  const std::size_t np = problems.size();
  constexpr int kThreads = 4, kIters = 6;

  // seen[thread][device][problem]: the LoadedKernel each thread got.
  std::vector<std::array<std::vector<const fkv::LoadedKernel*>, 2>> seen(kThreads);
  std::vector<std::vector<std::string>> failures(kThreads);
  std::atomic<int> calls{0};
  std::latch start(kThreads);  // all threads ask for the first kernels at once
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int ti = 0; ti < kThreads; ++ti) {
    threads.emplace_back([&, ti] {
      auto& fail = failures[static_cast<std::size_t>(ti)];
      std::array<std::unique_ptr<fkv::Stream>, 2> streams;
      try {
        for (int d = 0; d < 2; ++d) {
          seen[static_cast<std::size_t>(ti)][static_cast<std::size_t>(d)].assign(np, nullptr);
          FKV_CU(cuCtxSetCurrent, ctx[static_cast<std::size_t>(d)]);
          streams[static_cast<std::size_t>(d)] = std::make_unique<fkv::Stream>();
        }
      } catch (const std::exception& e) {
        fail.push_back(std::string("thread setup: ") + e.what());
      }
      start.arrive_and_wait();  // even after a failed setup, so that no thread waits forever
      try {
        if (!fail.empty()) throw std::runtime_error("skipped after the setup failure");
        Rng rng(0x600d + static_cast<std::uint64_t>(ti));
        for (int it = 0; it < kIters; ++it) {
          // Launch on both devices (order alternating), then check both: the calls overlap.
          struct Pending {
            int dev;
            const Problem* p;
            HostProblem h;
            DeviceProblem d;
          };
          std::vector<Pending> pending;
          for (int j = 0; j < 2; ++j) {
            const int dev = (ti + it + j) % 2;
            const auto udev = static_cast<std::size_t>(dev);
            // Iteration 0: every thread asks for problem 0, two threads per device at once
            // (a race for one load per device, and for one compile across the devices).
            const std::size_t pi = it == 0 ? 0 : static_cast<std::size_t>(ti + it + j) % np;
            const Problem& p = problems[pi];
            FKV_CU(cuCtxSetCurrent, ctx[udev]);
            const CUstream s = streams[udev]->get();
            // Both ways an engine gets a kernel: prepare() in the current context, get() by stream.
            const fkv::LoadedKernel& k =
                (it % 2 == 0) ? rt.prepare(p.spec, dev) : rt.get(p.spec, s);
            const fkv::LoadedKernel*& first = seen[static_cast<std::size_t>(ti)][udev][pi];
            if (!first) first = &k;
            if (first != &k)
              fail.push_back("device " + std::to_string(dev) + ": a second LoadedKernel for " +
                             p.spec.short_name());
            if (k.device != dev || k.context != ctx[udev])
              fail.push_back("device " + std::to_string(dev) + ": got the kernel of device " +
                             std::to_string(k.device) + " for " + p.spec.short_name());
            HostProblem h = make_host(p, rng);
            DeviceProblem dp = make_device(p, h, s);
            if (device_of(dp.proj.get()) != dev)
              fail.push_back("buffers not on device " + std::to_string(dev));
            launch(k, p, h, dp, s);
            calls.fetch_add(1);
            pending.push_back({dev, &p, std::move(h), std::move(dp)});
          }
          for (auto& q : pending) {
            FKV_CU(cuCtxSetCurrent, ctx[static_cast<std::size_t>(q.dev)]);
            for (auto& f : check(*q.p, q.h, q.d, streams[static_cast<std::size_t>(q.dev)]->get()))
              fail.push_back("device " + std::to_string(q.dev) + ", iteration " +
                             std::to_string(it) + ": " + f);
          }
        }
      } catch (const std::exception& e) {
        fail.push_back(std::string("thread error: ") + e.what());
      }
      for (int d = 0; d < 2; ++d) {  // destroy each stream in its own context
        if (fkv::Driver::get().cuCtxSetCurrent(ctx[static_cast<std::size_t>(d)]) == CUDA_SUCCESS)
          streams[static_cast<std::size_t>(d)].reset();
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("test_multi_device: %d threads, %d interleaved calls on 2 devices in %.1f ms\n",
              kThreads, calls.load(), seconds * 1e3);
  for (int ti = 0; ti < kThreads; ++ti) {
    INFO("thread " << ti);
    for (const auto& f : failures[static_cast<std::size_t>(ti)]) FAIL_CHECK(f);
  }

  // One LoadedKernel per (device, spec): every thread saw the same one, prepare() returns it
  // again, and the two devices' differ.
  const std::string arch0 = fkv::Runtime::device_arch(0).name(),
                    arch1 = fkv::Runtime::device_arch(1).name();
  for (std::size_t pi = 0; pi < np; ++pi) {
    const fkv::KernelSpec& spec = problems[pi].spec;
    INFO(spec.short_name());
    std::array<const fkv::LoadedKernel*, 2> k{};
    for (int d = 0; d < 2; ++d) {
      const auto ud = static_cast<std::size_t>(d);
      FKV_CU(cuCtxSetCurrent, ctx[ud]);
      k[ud] = &rt.prepare(spec, d);
      CHECK(k[ud] == &rt.prepare(spec, d));
      CHECK(k[ud]->device == d);
      CHECK(k[ud]->context == ctx[ud]);
      for (int ti = 0; ti < kThreads; ++ti) {
        const fkv::LoadedKernel* s = seen[static_cast<std::size_t>(ti)][ud][pi];
        if (s) CHECK(s == k[ud]);
      }
    }
    CHECK(k[0] != k[1]);
    CHECK(k[0]->function != k[1]->function);
    // The image is built once per arch in this process; the other device loads it from memory.
    const int compiled = (k[0]->outcome == fkv::CacheOutcome::Compiled) +
                         (k[1]->outcome == fkv::CacheOutcome::Compiled);
    CHECK(compiled == (arch0 == arch1 ? 1 : 2));
    std::printf("  %s: device 0 %s (%.1f ms), device 1 %s (%.1f ms)\n", spec.short_name().c_str(),
                fkv::to_string(k[0]->outcome).c_str(), k[0]->load_seconds * 1e3,
                fkv::to_string(k[1]->outcome).c_str(), k[1]->load_seconds * 1e3);
  }
  std::fflush(stdout);
  FKV_CU(cuCtxSetCurrent, ctx[0]);
}

// ---- 2. one process per device on a shared cache
// ----------------------------------------------------

TEST_CASE(
    "one rank per device on an empty shared cache: correct, one compile per kernel, then warm",
    "[gpu2][ranks]") {
  const std::size_t specs = config_spec_count();
  REQUIRE(specs > 0);
  TempDir tmp;
  const fs::path root = tmp.path / "cache";  // empty: the ranks create it
  INFO("cache root " << root.string() << " (FKV_TEST_KEEP=1 keeps it)");
  constexpr int kRanks = 2;

  const Round cold = run_round("cold", kRanks, 2, root, tmp.path / "cold", specs);
  REQUIRE(cold.all_ok);  // each failing rank is reported above, with its log
  // Both ranks asked for every kernel at once; the per-key lock lets one compile it and the
  // other read it from disk.
  CHECK(cold.compiled == static_cast<int>(specs * cold.archs.size()));
  CHECK(cold.disk == static_cast<int>(kRanks * specs) - cold.compiled);
  for (const auto& p : cache_dir_problems(root, specs * cold.archs.size())) FAIL_CHECK(p);

  const Round warm = run_round("warm", kRanks, 2, root, tmp.path / "warm", specs);
  REQUIRE(warm.all_ok);
  CHECK(warm.compiled == 0);
  CHECK(warm.disk == static_cast<int>(kRanks * specs));

  std::printf("test_multi_device: %d ranks, config %s, %zu kernels per rank, shared cache on %s\n",
              kRanks, fs::path(config_path()).filename().c_str(), specs,
              root.parent_path().c_str());
  for (std::size_t r = 0; r < cold.ranks.size() && r < warm.ranks.size(); ++r) {
    const WorkerResult& c = cold.ranks[r];
    const WorkerResult& w = warm.ranks[r];
    if (c.fields.empty() || w.fields.empty()) continue;
    std::printf(
        "rank %zu: cold start %.1f ms (%s compiled, %s disk hits); warm start %.1f ms (%s "
        "compiled, %s disk hits)"
        "  [device %s, %s; context creation %.1f / %.1f ms, not included]\n",
        r, c.number("startup_ms"), c.field("compiled").c_str(), c.field("disk").c_str(),
        w.number("startup_ms"), w.field("compiled").c_str(), w.field("disk").c_str(),
        c.field("device").c_str(), c.field("arch").c_str(), c.number("context_ms"),
        w.number("context_ms"));
  }
  std::fflush(stdout);
}

// ---- 3. a start-up storm
// ------------------------------------------------------------------------------

TEST_CASE("many ranks starting at once on an empty cache compile each kernel once",
          "[gpu2][ranks][storm]") {
  const std::size_t specs = config_spec_count();
  const int ranks = static_cast<int>(env_int("FKV_TEST_STORM_RANKS", 8));
  const int devices = static_cast<int>(env_int("FKV_TEST_DEVICES", 2));
  REQUIRE(ranks >= 2);
  REQUIRE(devices >= 1);
  TempDir tmp;
  const fs::path root = tmp.path / "cache";
  INFO("cache root " << root.string() << " (FKV_TEST_KEEP=1 keeps it)");
  const Round storm = run_round("storm", ranks, devices, root, tmp.path / "storm", specs);
  REQUIRE(storm.all_ok);
  CHECK(storm.compiled == static_cast<int>(specs * storm.archs.size()));
  CHECK(storm.disk == static_cast<int>(ranks * specs) - storm.compiled);
  for (const auto& p : cache_dir_problems(root, specs * storm.archs.size())) FAIL_CHECK(p);

  double slowest = 0, fastest = 1e300;
  for (const auto& w : storm.ranks) {
    if (w.fields.empty()) continue;
    slowest = std::max(slowest, w.number("startup_ms"));
    fastest = std::min(fastest, w.number("startup_ms"));
  }
  std::printf(
      "test_multi_device: storm: %d ranks on %d devices, %zu kernels each: %d compiles, %d disk "
      "hits in total; "
      "start-up %.1f .. %.1f ms\n",
      ranks, devices, specs, storm.compiled, storm.disk, fastest, slowest);
  for (const auto& w : storm.ranks)
    if (!w.fields.empty())
      std::printf("  rank %s (device %s): %.1f ms, %s compiled, %s disk hits\n",
                  w.field("rank").c_str(), w.field("device").c_str(), w.number("startup_ms"),
                  w.field("compiled").c_str(), w.field("disk").c_str());
  std::fflush(stdout);
}

// ---- 4. tensors on one device, kernel or context of another
// ------------------------------------------

TEST_CASE("a call with tensors on device 1 while device 0's kernel or context is in play",
          "[gpu2][mismatch]") {
  TempDir tmp;
  struct Variant {
    std::string name, what;
    bool must_be_correct;
  };
  const std::vector<Variant> variants = {
      {"get_other_current",
       "Runtime::get(spec, stream of device 1) with device 0's context current", true},
      {"kernel0_ctx0", "device 0's kernel on a stream of device 1, device 0's context current",
       false},
      {"kernel0_ctx1", "device 0's kernel on a stream of device 1, device 1's context current",
       false},
  };
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    // One process each: a fault must not poison the contexts of the next variant.
    std::vector<WorkerResult> r =
        run_workers({{"mismatch", v.name}}, tmp.path / v.name, std::chrono::seconds(120));
    WorkerResult& w = r.front();
    parse_fields(w, "FKV_MISMATCH");
    const std::string outcome = w.field("outcome");
    std::printf("mismatch %s (%s): %s: %s\n", v.name.c_str(), v.what.c_str(),
                outcome.empty() ? "no result" : outcome.c_str(), w.detail.c_str());
    std::fflush(stdout);
    INFO(v.what << "\n" << w.describe());
    if (outcome.empty()) {
      FAIL_CHECK("the worker gave no result");
      continue;
    }
    if (v.must_be_correct) {
      CHECK(outcome == "correct");
    } else {
      // A clear CudaError, or (peer access) a correct result; never a silent wrong write or a
      // fault.
      CHECK((outcome == "cuda_error" || outcome == "correct"));
    }
    CHECK(w.exit_code == 0);
  }
}

// ---- 5. tensor parallelism: one process per GPU, shards equal TP=1 bit for bit
// ---------------------

TEST_CASE("tensor parallelism: two ranks on two GPUs together equal the TP=1 result bit for bit",
          "[gpu2][tp]") {
  require_two_devices();
  TempDir tmp;
  const std::string out = tmp.path.string();
  const std::string seed = std::to_string(env_int("FKV_TEST_SEED", 12345));
  // TP=1 on device 0 first, then both ranks at once, each on its own device.
  auto full = run_workers({{"tp", "1", "0", "0", out, seed}}, tmp.path / "tp1");
  auto ranks = run_workers({{"tp", "2", "0", "0", out, seed}, {"tp", "2", "1", "1", out, seed}},
                           tmp.path / "tp2");
  for (auto* set : {&full, &ranks})
    for (auto& w : *set) {
      parse_fields(w, "FKV_TP");
      INFO(w.describe());
      REQUIRE(w.exit_code == 0);
      REQUIRE(w.field("check") == "ok");
    }
  auto read = [&](const std::string& name) {
    std::ifstream in(tmp.path / name, std::ios::binary);
    return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  fkv_test::TpCase c;  // the worker's case: the same shapes
  fkv_test::TpResult tp1;
  tp1.num_heads = c.num_kv_heads;
  tp1.k = read("tp1-rank0.k");
  tp1.v = read("tp1-rank0.v");
  const std::size_t bytes =
      static_cast<std::size_t>(c.layers * c.tokens * c.num_kv_heads * c.head_dim * 2);
  REQUIRE(tp1.k.size() == bytes);
  REQUIRE(tp1.v.size() == bytes);
  for (int r = 0; r < 2; ++r) {
    fkv_test::TpResult shard;
    shard.first_head = r * c.num_kv_heads / 2;
    shard.num_heads = c.num_kv_heads / 2;
    shard.k = read("tp2-rank" + std::to_string(r) + ".k");
    shard.v = read("tp2-rank" + std::to_string(r) + ".v");
    INFO("rank " << r << " (device " << r << ")");
    REQUIRE(shard.k.size() == bytes / 2);
    REQUIRE(shard.v.size() == bytes / 2);
    CHECK(ranks[static_cast<std::size_t>(r)].field("first_head") ==
          std::to_string(shard.first_head));
    CHECK(fkv_test::compare_shard(c, tp1, shard) == "");
  }
}
