#include "fkv/runtime.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "fkv/arch.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"

namespace fkv {

namespace {

int device_attribute(CUdevice dev, CUdevice_attribute attr) {
  int value = 0;
  FKV_CU(cuDeviceGetAttribute, &value, attr, dev);
  return value;
}

// What to build for a device: fkv::arch_for_compute_capability, the rule precompile uses
// too, so that a cache baked with `fkv-jit precompile --arch sm_XY` is what this looks up.
ArchTarget target_for(CUdevice dev) {
  const int major = device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = device_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  try {
    return arch_for_compute_capability(major, minor);
  } catch (const CompileError& e) {
    char name[256] = {};
    Driver::get().cuDeviceGetName(name, sizeof name - 1, dev);
    throw CompileError("device " + std::string(name) + ": " + e.what());
  }
}

}  // namespace

struct Runtime::Impl {
  // One (context, spec) pair. `mutex` is held while loading, so that other threads asking for
  // the same kernel wait for the first one instead of loading it again; `ready` publishes the
  // finished `kernel` to readers that do not take `mutex`.
  struct Slot {
    std::mutex mutex;
    std::atomic<bool> ready{false};
    LoadedKernel kernel;
    Module module;
  };

  using Key = std::pair<CUcontext, std::string>;  // context, KernelSpec::canonical()
  std::mutex mutex;                               // guards `slots` (not the loads)
  std::map<Key, std::unique_ptr<Slot>> slots;

  const LoadedKernel* find(CUcontext ctx, const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = slots.find({ctx, key});
    if (it == slots.end() || !it->second->ready.load(std::memory_order_acquire)) return nullptr;
    return &it->second->kernel;
  }

  Slot& slot(CUcontext ctx, const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& s = slots[{ctx, key}];
    if (!s) s = std::make_unique<Slot>();
    return *s;
  }

  const LoadedKernel& load(KernelCache& cache, const JitOptions& jit, CUcontext ctx,
                           const KernelSpec& spec, const std::string& key);
};

Runtime::Runtime(KernelCache& cache, const JitOptions& options)
    : cache_(cache), options_(options), impl_(std::make_unique<Impl>()) {}

Runtime::~Runtime() = default;

Runtime& Runtime::global() {
  // Never destroyed: its modules live in contexts that may be gone by static destruction.
  static Runtime* runtime = new Runtime(KernelCache::global());
  return *runtime;
}

ArchTarget Runtime::device_target(int device) { return target_for(device_handle(device)); }

LoadedFunction load_function(const KernelSource& source, int device) {
  const CUcontext ctx = ensure_context(device);
  const ArchTarget target = Runtime::device_target(device);
  CompileOptions options;
  options.arch = target.arch;
  options.ptx = target.ptx;
  if (source.arch_specific) {
    if (!runs_sm90a(target))
      throw UnsupportedError(source.short_name +
                             " uses Hopper-only instructions (sm_90a), and "
                             "device " +
                             std::to_string(device) + "'s target is " + target.name());
    options.arch.arch_specific = true;
  }
  const CacheResult image = KernelCache::global().get(source, options);
  LoadedFunction f;
  f.module = Module(ctx, image.kernel->image);
  f.function = f.module.function(image.kernel->lowered_name);
  return f;
}

void launch_function(const LoadedFunction& f, unsigned gx, unsigned gy, unsigned threads,
                     void** args, CUstream stream, unsigned shared) {
  Driver& d = Driver::get();
  const CUresult r =
      d.cuLaunchKernel(f.function, gx, gy, 1, threads, 1, 1, shared, stream, args, nullptr);
  if (r != CUDA_SUCCESS) d.check(r, "cuLaunchKernel");
}

// Loads `spec` into `ctx` unless that already happened. The steps, in data-flow order:
// spec -> source (codegen) -> image (cache: memory, disk, or NVRTC) -> module -> function.
const LoadedKernel& Runtime::Impl::load(KernelCache& cache, const JitOptions& jit, CUcontext ctx,
                                        const KernelSpec& spec, const std::string& key) {
  Slot& slot = this->slot(ctx, key);
  if (slot.ready.load(std::memory_order_acquire)) return slot.kernel;
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.ready.load(std::memory_order_acquire)) return slot.kernel;  // loaded while we waited

  const auto start = std::chrono::steady_clock::now();
  spec.check();
  ScopedContext scope(ctx);  // get() may load for a stream of a context not current here
  Driver& d = Driver::get();
  CUdevice dev = 0;
  d.check(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const ArchTarget target = target_for(dev);

  CompileOptions options;
  options.arch = target.arch;
  options.ptx = target.ptx;
  CacheResult image = cache.get(generate(spec, jit), options, jit);

  Module module(ctx, image.kernel->image);
  CUfunction function = module.function(image.kernel->lowered_name);
  const Tiling tiling = spec.tiling(jit);  // as generate() baked it in

  LoadedKernel& k = slot.kernel;
  k.spec = spec;
  k.tiling = tiling;
  k.context = ctx;
  k.device = static_cast<int>(dev);
  k.sm_count = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  int per_sm = 0;
  FKV_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &per_sm, function, tiling.block_threads, 0);
  k.resident_blocks = std::int64_t{k.sm_count} * std::max(per_sm, 1);
  k.arch = target.arch;
  k.function = function;
  k.outcome = image.outcome;
  k.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  slot.module = std::move(module);
  slot.ready.store(true, std::memory_order_release);
  spdlog::debug("fkv: loaded {} for {}{} on device {} ({}, {:.1f} ms)", spec.short_name(),
                target.arch.name(), target.ptx ? " (PTX)" : "", k.device, to_string(k.outcome),
                k.load_seconds * 1e3);
  return k;
}

const LoadedKernel& Runtime::prepare(const KernelSpec& spec, int device) {
  CUcontext ctx = ensure_context(device);
  return impl_->load(cache_, options_, ctx, spec, spec.canonical());
}

const LoadedKernel& Runtime::get(const KernelSpec& spec, CUstream stream) {
  Driver& d = Driver::get();
  CUcontext ctx = nullptr;
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    d.check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");  // the special streams follow it
  } else {
    d.check(d.cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx");
  }
  if (!ctx) ctx = ensure_context(0);  // a special stream with no current context: as prepare()
  const std::string key = spec.canonical();
  if (const LoadedKernel* k = impl_->find(ctx, key)) return *k;

  // Loading a module during capture would invalidate the capture (cuModuleLoadData is not a
  // capturable call); refuse before touching anything. On the legacy stream the query itself
  // answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while another stream captures globally.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = d.cuStreamIsCapturing(stream, &status);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
      (r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE)) {
    throw CudaError("cannot load kernel " + spec.short_name() +
                        " while stream is capturing a CUDA graph: call Runtime::prepare() for it "
                        "before capture "
                        "(a FusedKVMaterializer prepares its kernels when it is constructed)",
                    "cuStreamIsCapturing", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  }
  d.check(r, "cuStreamIsCapturing");
  return impl_->load(cache_, options_, ctx, spec, key);
}

void launch(const LoadedKernel& k, const FkvKernelParams& params, unsigned grid_x, unsigned grid_y,
            unsigned grid_z, CUstream stream) {
  if (grid_x == 0 || grid_y == 0 || grid_z == 0) return;  // no work (e.g. T = 0)
  void* args[] = {const_cast<FkvKernelParams*>(&params)};
  Driver& d = Driver::get();
  CUresult r = d.cuLaunchKernel(k.function, grid_x, grid_y, grid_z,
                                static_cast<unsigned>(k.tiling.block_threads), 1, 1, 0, stream,
                                args, nullptr);
  if (r != CUDA_SUCCESS) d.check(r, "cuLaunchKernel");
}

}  // namespace fkv
