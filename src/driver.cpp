#include "fkv/driver.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <link.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

namespace fkv {

// Each (name, abi_version) pair of driver_functions.inc must name the signature cuda.h
// declares: the member's type (decltype of cuda.h's possibly renamed function) has to equal
// cudaTypedefs.h's PFN_<name>_v<abi_version>, which is what cuGetProcAddress returns for it.
#define FKV_DRIVER_FN(name, abi_version)                                               \
  static_assert(std::is_same_v<decltype(&::name), PFN_##name##_v##abi_version>, #name  \
                ": driver_functions.inc names a version whose signature differs from " \
                "cuda.h's declaration");                                               \
  static_assert(abi_version <= CUDA_VERSION, #name ": version newer than the CUDA headers");
#include "fkv/driver_functions.inc"
#undef FKV_DRIVER_FN

namespace {

constexpr const char* kNoDriverHint =
    ". fkv-jit needs an NVIDIA driver to launch kernels; validate, plan, source and precompile "
    "work without one.";

using GetProcAddress = decltype(&::cuGetProcAddress);  // cuGetProcAddress_v2 (CUDA >= 12.0)

std::string error_name(const Driver& d, CUresult r) {
  const char* s = nullptr;
  if (d.cuGetErrorName && d.cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

std::string error_string(const Driver& d, CUresult r) {
  const char* s = nullptr;
  if (d.cuGetErrorString && d.cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown error";
}

[[noreturn]] void throw_cuda(const Driver& d, CUresult r, const char* call,
                             const std::string& hint = {}) {
  std::string name = error_name(d, r);
  throw CudaError(std::string(call) + " failed: " + name + ": " + error_string(d, r) + hint, call,
                  static_cast<int>(r), name);
}

}  // namespace

Driver::Driver() {
  handle_ = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = ::dlerror();
    throw CudaError(std::string("CUDA driver not found: dlopen(libcuda.so.1) failed: ") +
                        (why ? why : "unknown reason") + kNoDriverHint,
                    "dlopen");
  }
  // The only symbol taken with dlsym; the 5-argument cuGetProcAddress exists since CUDA 12.0.
  auto get_proc = reinterpret_cast<GetProcAddress>(::dlsym(handle_, "cuGetProcAddress_v2"));
  if (!get_proc) {
    throw CudaError(
        "CUDA driver too old: libcuda.so.1 has no cuGetProcAddress_v2 (a driver for CUDA 12.0 or "
        "newer is needed); update the NVIDIA driver" +
            std::string(kNoDriverHint),
        "dlsym");
  }
  // cuGetProcAddress refuses (CUDA_ERROR_INVALID_VALUE) a version above the driver's, so ask
  // for min(abi_version, driver version): a driver older than an entry's abi_version hands
  // out the previous version, which driver_functions.inc only allows where the signature is
  // unchanged (cuEventElapsedTime_v2, CUDA 12.8).
  int driver_version = 0;
  auto resolve = [&](const char* name, int abi_version, void** slot) {
    const int ask = driver_version > 0 ? std::min(abi_version, driver_version) : abi_version;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = get_proc(name, slot, ask, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
      // A container or build environment with the toolkit's lib64/stubs on the search path.
      link_map* map = nullptr;
      const std::string path = ::dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name
                                   ? map->l_name
                                   : "libcuda.so.1";
      throw CudaError("CUDA driver not found: " + path +
                          " is the CUDA toolkit's stub library, not an NVIDIA driver; remove its "
                          "directory from LD_LIBRARY_PATH" +
                          std::string(kNoDriverHint),
                      "cuGetProcAddress", r, "CUDA_ERROR_STUB_LIBRARY");
    }
    if (r != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
      *slot = nullptr;
      throw CudaError(std::string("CUDA driver too old: cuGetProcAddress(\"") + name + "\", " +
                          std::to_string(ask) + ") found no entry point (status " +
                          std::to_string(static_cast<int>(found)) + ", result " +
                          std::to_string(static_cast<int>(r)) + "); update the NVIDIA driver",
                      "cuGetProcAddress");
    }
  };
  resolve("cuDriverGetVersion", 2020, reinterpret_cast<void**>(&cuDriverGetVersion));
  if (cuDriverGetVersion(&driver_version) != CUDA_SUCCESS || driver_version <= 0) {
    throw CudaError(
        "cuDriverGetVersion failed: libcuda.so.1 is not usable" + std::string(kNoDriverHint),
        "cuDriverGetVersion");
  }
#define FKV_DRIVER_FN(name, abi_version) \
  resolve(#name, abi_version, reinterpret_cast<void**>(&this->name));
#include "fkv/driver_functions.inc"
#undef FKV_DRIVER_FN

  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
    throw_cuda(*this, r, "cuInit",
               r == CUDA_ERROR_NO_DEVICE ? std::string(" (no CUDA device is visible; check "
                                                       "CUDA_VISIBLE_DEVICES)") +
                                               kNoDriverHint
                                         : std::string(kNoDriverHint));
  }
  version = driver_version;
  check(cuDeviceGetCount(&device_count), "cuDeviceGetCount");
  if (device_count < 1) {
    throw CudaError(std::string("no CUDA device: the driver sees 0 devices (check "
                                "CUDA_VISIBLE_DEVICES)") +
                        kNoDriverHint,
                    "cuDeviceGetCount");
  }
  spdlog::debug("fkv: CUDA driver {}.{} loaded, {} device(s)", version / 1000,
                (version % 1000) / 10, device_count);
}

Driver& Driver::get() {
  // Loaded once; a failure is remembered and rethrown, not retried. The Driver is never
  // destroyed: modules and contexts may be released by static destructors after main().
  static std::once_flag once;
  static Driver* instance = nullptr;
  static std::exception_ptr& failure = *new std::exception_ptr;  // never destroyed, like instance
  std::call_once(once, [] {
    try {
      instance = new Driver();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (!instance) std::rethrow_exception(failure);
  return *instance;
}

bool Driver::available() {
  try {
    get();
    return true;
  } catch (...) {
    return false;
  }
}

void Driver::check(CUresult r, const char* call) const {
  if (r != CUDA_SUCCESS) throw_cuda(*this, r, call);
}

// ---------------------------------------------------------------------------------------------

CUdevice device_handle(int device) {
  Driver& d = Driver::get();
  if (device < 0 || device >= d.device_count) {
    throw CudaError("CUDA device " + std::to_string(device) +
                        " does not exist: this process sees " + std::to_string(d.device_count) +
                        " device(s) (ordinals follow CUDA_VISIBLE_DEVICES)",
                    "cuDeviceGet", CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE");
  }
  CUdevice dev = 0;
  d.check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  return dev;
}

CUcontext ensure_context(int device) {
  Driver& d = Driver::get();
  CUcontext current = nullptr;
  d.check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current) return current;

  // Primary contexts retained here are kept for the life of the process: releasing one would
  // destroy it (and every module fkv-jit loaded into it) while callers may still use it.
  // Never destroyed: atexit handlers and static destructors may still prepare kernels.
  static std::mutex& mutex = *new std::mutex;
  static std::map<int, CUcontext>& retained = *new std::map<int, CUcontext>;
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = retained.find(device);
    if (it == retained.end()) {
      CUdevice dev = device_handle(device);
      d.check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
      retained.emplace(device, ctx);
    } else {
      ctx = it->second;
    }
  }
  d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

ScopedContext::ScopedContext(CUcontext ctx) {
  Driver& d = Driver::get();
  CUcontext current = nullptr;
  d.check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (ctx && ctx != current) {
    d.check(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  Driver::get().cuCtxPopCurrent(&popped);  // a destructor cannot report; pop cannot fail here
}

// ---------------------------------------------------------------------------------------------

PrimaryContext::PrimaryContext(int device) : device_(device) {
  Driver& d = Driver::get();
  CUdevice dev = device_handle(device);
  d.check(d.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain");
}

PrimaryContext::~PrimaryContext() {
  if (!ctx_) return;
  Driver& d = Driver::get();
  CUdevice dev = 0;
  if (d.cuDeviceGet(&dev, device_) == CUDA_SUCCESS) d.cuDevicePrimaryCtxRelease(dev);
}

// ---------------------------------------------------------------------------------------------

Module::Module(CUcontext ctx, const std::string& image) : ctx_(ctx) {
  Driver& d = Driver::get();
  ScopedContext scope(ctx);
  // PTX must be NUL-terminated: std::string's data() is.
  d.check(d.cuModuleLoadData(&mod_, image.data()), "cuModuleLoadData");
}

Module::~Module() {
  if (!mod_) return;
  try {
    Driver& d = Driver::get();
    ScopedContext scope(ctx_);
    d.cuModuleUnload(mod_);
  } catch (...) {
    // The context is gone (e.g. process teardown): the module went with it.
  }
}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    Module old;  // unloads what this held, in its own context
    old.ctx_ = ctx_;
    old.mod_ = mod_;
    ctx_ = std::exchange(o.ctx_, nullptr);
    mod_ = std::exchange(o.mod_, nullptr);
  }
  return *this;
}

CUfunction Module::function(const std::string& lowered_name) const {
  Driver& d = Driver::get();
  CUfunction f = nullptr;
  CUresult r = d.cuModuleGetFunction(&f, mod_, lowered_name.c_str());
  if (r != CUDA_SUCCESS) {
    std::string name = error_name(d, r);
    throw CudaError(
        "cuModuleGetFunction(\"" + lowered_name + "\") failed: " + name + ": " + error_string(d, r),
        "cuModuleGetFunction", static_cast<int>(r), name);
  }
  return f;
}

// ---------------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  Driver& d = Driver::get();
  ctx_ = ensure_context();
  d.check(d.cuMemAlloc(&ptr_, bytes), "cuMemAlloc");
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  try {
    Driver& d = Driver::get();
    ScopedContext scope(ctx_);
    d.cuMemFree(ptr_);
  } catch (...) {
  }
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old;  // frees what this held
    old.ctx_ = ctx_;
    old.ptr_ = ptr_;
    old.bytes_ = bytes_;
    ctx_ = std::exchange(o.ctx_, nullptr);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Stream::Stream() {
  ensure_context();
  FKV_CU(cuStreamCreate, &s_, CU_STREAM_NON_BLOCKING);
}

Stream::~Stream() {
  if (s_) Driver::get().cuStreamDestroy(s_);
}

void Stream::synchronize() const { FKV_CU(cuStreamSynchronize, s_); }

Event::Event() {
  ensure_context();
  FKV_CU(cuEventCreate, &e_, CU_EVENT_DEFAULT);
}

Event::~Event() {
  if (e_) Driver::get().cuEventDestroy(e_);
}

}  // namespace fkv
