// A tensor-parallel rank, as a serving engine starts one per GPU: run by test_multi_device
// (fork + exec, so every worker initializes CUDA itself in a fresh process). Not a test on its
// own. The parent holds a barrier: the worker writes one byte to fd 4 when it is ready and
// waits for EOF on fd 3 (the parent closes the other end to start every worker at once).
//
//   fkv_gpu2_rank_worker rank <rank> <device> <cache_root> <config.json>
//     Context on <device>; then, after the barrier, a Runtime over a KernelCache rooted at
//     <cache_root> prepares every kernel the config's plan needs (bf16, stacked and pool),
//     materializes each once and checks it against the float64 reference. Prints one line
//       FKV_RANK rank=0 device=0 arch=sm_90 specs=2 context_ms=... startup_ms=... compiled=2 ...
//   fkv_gpu2_rank_worker tp <tp_size> <rank> <device> <out_dir> <seed>
//     After the barrier, a FusedKVMaterializer for rank <rank> of <tp_size> on <device>
//     materializes the shared TpCase (tests/gpu/tp_case.hpp, inputs from <seed>) and writes its
//     stacked K and V to <out_dir>/tp<tp_size>-rank<rank>.{k,v}; prints
//       FKV_TP tp_size=2 rank=1 device=1 first_head=4 num_heads=4 check=ok
//   fkv_gpu2_rank_worker mismatch <variant>
//     A call whose tensors and stream live on device 1 while another device's kernel or
//     context is in play; prints FKV_MISMATCH variant=... outcome=... detail=...
//     (outcome: correct | cuda_error | wrong | fault | other_error).
//
// Exit status: 0 all checks passed, 1 a check failed, 2 an error (message on stderr).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "fkv/cache.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "gpu/tp_case.hpp"
#include "gpu2/multi_device_case.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr int kGoFd = 3, kReadyFd = 4;

void signal_ready() {
  const char byte = 'r';
  if (::write(kReadyFd, &byte, 1) != 1) std::perror("rank_worker: write(ready)");
  ::close(kReadyFd);
}

// Blocks until the parent closes the write end of the go pipe.
void wait_for_go() {
  char byte;
  while (true) {
    const ssize_t n = ::read(kGoFd, &byte, 1);
    if (n == 0) break;
    if (n < 0 && errno != EINTR) {
      std::perror("rank_worker: read(go)");
      break;
    }
  }
  ::close(kGoFd);
}

void set_current(CUcontext ctx) { FKV_CU(cuCtxSetCurrent, ctx); }

int run_rank(int rank, int device, const std::string& cache_root, const std::string& config_path) {
  const auto t_context = Clock::now();
  fkv::Driver::get();
  fkv::ensure_context(device);
  const double context_ms = ms_since(t_context);

  const fkv::ModelConfig config = fkv::ModelConfig::from_file(config_path);
  const fkv::Plan plan = fkv::make_plan(config);
  fkv::VariantOptions variants;  // bf16 activations and cache, stacked and pool
  const std::vector<fkv::KernelSpec> specs = fkv::kernel_specs_for(plan, variants);

  signal_ready();
  wait_for_go();

  // Start-up as an engine sees it: open the shared cache and have every kernel loaded.
  const auto t_start = Clock::now();
  fkv::CacheOptions options;
  options.root = cache_root;
  fkv::KernelCache cache(options);
  fkv::Runtime runtime(cache);
  std::vector<const fkv::LoadedKernel*> kernels;
  for (const auto& spec : specs) kernels.push_back(&runtime.prepare(spec, device));
  const double startup_ms = ms_since(t_start);

  int counts[4] = {0, 0, 0, 0};  // by CacheOutcome
  std::string per_kernel;
  std::vector<std::string> failures;
  if (cache.memory_only())
    failures.push_back("the cache root " + cache_root +
                       " could not be used (memory-only cache): see the log above");
  for (const auto* k : kernels) {
    ++counts[static_cast<int>(k->outcome)];
    per_kernel += (per_kernel.empty() ? "" : ",") + k->spec.short_name() + ":" +
                  fkv::to_string(k->outcome) + ":" + std::to_string(k->load_seconds * 1e3);
    if (k->device != device)
      failures.push_back(k->spec.short_name() + " was loaded for device " +
                         std::to_string(k->device) + ", expected " + std::to_string(device));
  }

  // One call per kernel on this rank's device, checked against the reference.
  fkv::Stream stream;
  fkv_test::Rng rng(0x7a11ull * static_cast<std::uint64_t>(rank + 1));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    fkv_test::Problem p;
    p.spec = specs[i];
    p.L = static_cast<std::int64_t>(plan.groups.front().layers.size());
    for (const auto& g : plan.groups)
      if (fkv::make_kernel_spec(g.attn, variants.act, variants.cache, specs[i].mode).canonical() ==
          specs[i].canonical())
        p.L = static_cast<std::int64_t>(g.layers.size());
    p.T = 300 + rank;
    p.max_pos = 4096;
    p.num_slots = p.T + 77;
    const fkv_test::HostProblem h = fkv_test::make_host(p, rng);
    const fkv_test::DeviceProblem d = fkv_test::make_device(p, h, stream.get());
    if (const int on = fkv_test::device_of(d.proj.get()); on != device)
      failures.push_back("buffers were allocated on device " + std::to_string(on) + ", expected " +
                         std::to_string(device));
    fkv_test::launch(*kernels[i], p, h, d, stream.get());
    for (auto& f : fkv_test::check(p, h, d, stream.get())) failures.push_back(f);
  }
  for (const auto& f : failures) std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, f.c_str());

  std::printf(
      "FKV_RANK rank=%d device=%d arch=%s specs=%zu context_ms=%.3f startup_ms=%.3f compiled=%d "
      "disk=%d "
      "memory=%d readonly=%d check=%s kernels=%s\n",
      rank, device, kernels.empty() ? "none" : kernels.front()->arch.name().c_str(), specs.size(),
      context_ms, startup_ms, counts[static_cast<int>(fkv::CacheOutcome::Compiled)],
      counts[static_cast<int>(fkv::CacheOutcome::DiskHit)],
      counts[static_cast<int>(fkv::CacheOutcome::MemoryHit)],
      counts[static_cast<int>(fkv::CacheOutcome::ReadOnlyHit)], failures.empty() ? "ok" : "failed",
      per_kernel.c_str());
  std::fflush(stdout);
  return failures.empty() ? 0 : 1;
}

// ---- mismatch -------------------------------------------------------------------------------

// A DFlash-like pool kernel: bf16 -> bf16, K norm, full RoPE.
fkv::KernelSpec mismatch_spec() {
  fkv::KernelSpec s;
  s.num_kv_heads = 2, s.head_dim = 128, s.rotary_dim = 128, s.neox = true,
  s.k_norm = fkv::KNormKind::Rms;
  s.act = fkv::DType::BF16, s.cache = fkv::DType::BF16, s.mode = fkv::OutputMode::Pool;
  return s;
}

void report(const std::string& variant, const std::string& outcome, const std::string& detail) {
  std::printf("FKV_MISMATCH variant=%s outcome=%s detail=%s\n", variant.c_str(), outcome.c_str(),
              detail.c_str());
  std::fflush(stdout);
}

// Variants (tensors and stream always on device 1):
//   get_other_current: device 0's context current, kernel from Runtime::get(spec, stream of
//     device 1) (the supported way): must load for device 1 and be correct.
//   kernel0_ctx0: device 0's kernel (prepare(spec, 0)), device 0's context current.
//   kernel0_ctx1: device 0's kernel, device 1's context current.
int run_mismatch(const std::string& variant) {
  signal_ready();
  wait_for_go();
  fkv::Driver& drv = fkv::Driver::get();
  if (drv.device_count < 2) {
    std::fprintf(stderr, "mismatch: needs 2 CUDA devices, this process sees %d\n",
                 drv.device_count);
    return 2;
  }
  fkv::KernelCache cache(fkv::CacheOptions{});  // memory only: this is about devices, not disks
  fkv::Runtime runtime(cache);
  const CUcontext ctx0 = fkv::ensure_context(0);
  set_current(nullptr);
  const CUcontext ctx1 = fkv::ensure_context(1);

  // Tensors and stream on device 1.
  fkv::Stream stream1;
  fkv_test::Rng rng(0x31ull);
  fkv_test::Problem p;
  p.spec = mismatch_spec();
  p.T = 200, p.L = 3, p.max_pos = 1024, p.num_slots = 256;
  const fkv_test::HostProblem h = fkv_test::make_host(p, rng);
  const fkv_test::DeviceProblem d = fkv_test::make_device(p, h, stream1.get());
  stream1.synchronize();
  if (fkv_test::device_of(d.proj.get()) != 1) {
    std::fprintf(stderr, "mismatch: setup: buffers are not on device 1\n");
    return 2;
  }

  const fkv::LoadedKernel* kernel = nullptr;
  if (variant == "get_other_current") {
    set_current(ctx0);
    kernel = &runtime.get(p.spec, stream1.get());
    if (kernel->device != 1 || kernel->context != ctx1) {
      report(variant, "wrong",
             "Runtime::get(spec, stream of device 1) returned the kernel of device " +
                 std::to_string(kernel->device));
      return 1;
    }
  } else if (variant == "kernel0_ctx0" || variant == "kernel0_ctx1") {
    set_current(ctx0);
    kernel = &runtime.prepare(p.spec, 0);
    if (kernel->device != 0) {
      std::fprintf(stderr, "mismatch: setup: prepare(spec, 0) gave device %d\n", kernel->device);
      return 2;
    }
    set_current(variant == "kernel0_ctx0" ? ctx0 : ctx1);
  } else {
    std::fprintf(stderr, "mismatch: unknown variant %s\n", variant.c_str());
    return 2;
  }

  try {
    fkv_test::launch(*kernel, p, h, d, stream1.get());
  } catch (const fkv::CudaError& e) {
    report(variant, "cuda_error", "call=" + e.call + " code=" + e.code_name + " what=" + e.what());
    return variant == "get_other_current" ? 1 : 0;
  } catch (const std::exception& e) {
    report(variant, "other_error", e.what());
    return 1;
  }
  // Accepted: did it run cleanly, and where did it write?
  set_current(ctx1);
  CUresult r1 = drv.cuStreamSynchronize(stream1.get());
  set_current(ctx0);
  CUresult r0 = drv.cuCtxSynchronize();
  if (r1 != CUDA_SUCCESS || r0 != CUDA_SUCCESS) {
    const char* n1 = nullptr;
    const char* n0 = nullptr;
    drv.cuGetErrorName(r1, &n1);
    drv.cuGetErrorName(r0, &n0);
    report(variant, "fault",
           std::string("launch accepted, then device 1 stream sync: ") + (n1 ? n1 : "?") +
               ", device 0 context sync: " + (n0 ? n0 : "?"));
    return 1;
  }
  set_current(ctx1);
  const std::vector<std::string> failures = fkv_test::check(p, h, d, stream1.get());
  if (!failures.empty()) {
    std::string all;
    for (const auto& f : failures) all += f + " | ";
    report(variant, "wrong", "launch accepted, results differ from the reference: " + all);
    return 1;
  }
  report(variant, "correct", "launch accepted and the results on device 1 match the reference");
  return 0;
}

}  // namespace

int run_tp(int tp_size, int rank, int device, const std::string& out_dir, std::uint64_t seed) {
  fkv::Driver::get();
  fkv::ensure_context(device);
  fkv_test::TpCase c;
  c.seed = seed;
  const fkv_test::TpHost host = fkv_test::make_tp_host(c);
  signal_ready();
  wait_for_go();
  const fkv_test::TpResult r = fkv_test::run_tp_rank(c, host, tp_size, rank, device);
  const std::string base =
      out_dir + "/tp" + std::to_string(tp_size) + "-rank" + std::to_string(rank);
  for (int kind = 0; kind < 2; ++kind) {
    const std::vector<std::uint8_t>& bytes = kind ? r.v : r.k;
    std::FILE* f = std::fopen((base + (kind ? ".v" : ".k")).c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
        std::fclose(f) != 0)
      throw std::runtime_error("cannot write " + base);
  }
  std::printf("FKV_TP tp_size=%d rank=%d device=%d first_head=%d num_heads=%d check=ok\n", tp_size,
              rank, device, r.first_head, r.num_heads);
  return 0;
}

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "rank")
      return run_rank(std::stoi(args[1]), std::stoi(args[2]), args[3], args[4]);
    if (args.size() == 2 && args[0] == "mismatch") return run_mismatch(args[1]);
    if (args.size() == 6 && args[0] == "tp")
      return run_tp(std::stoi(args[1]), std::stoi(args[2]), std::stoi(args[3]), args[4],
                    std::stoull(args[5]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank_worker: error: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr,
               "usage: %s rank <rank> <device> <cache_root> <config.json>\n"
               "       %s mismatch get_other_current|kernel0_ctx0|kernel0_ctx1\n"
               "       tp <tp_size> <rank> <device> <out_dir> <seed>\n"
               "(run by test_multi_device; fd 3 = barrier pipe, fd 4 = ready pipe)\n",
               argv[0], argv[0]);
  return 2;
}
