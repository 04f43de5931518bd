// driver: libcuda, loaded with dlopen on first GPU use; entry points via cuGetProcAddress.
// Nothing else in fkv-jit links against libcuda, so everything but launching works without a
// driver, and its absence is a clear CudaError.
//
// Contexts: fkv-jit never creates a private context. It uses the calling thread's current
// context (PyTorch's primary context, typically) or, when there is none, makes the device's
// primary context current (ensure_context).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <utility>

#include "fkv/errors.hpp"

namespace fkv {

class Driver {
 public:
  // Loads libcuda and calls cuInit(0) once. Throws CudaError when the driver or a device is
  // missing (the same error on every call; loading is not retried). Thread-safe.
  static Driver& get();
  // True when a driver with at least one device can be loaded (never throws).
  static bool available();

  // Throws CudaError("<call> failed: <name>: <description>") for r != CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;

  // One member per entry point, typed as cuda.h declares it. Members carry cuda.h's names, so
  // drv.cuMemAlloc(...) calls cuMemAlloc_v2 exactly as plain CUDA code would.
#define FKV_DRIVER_FN(name, abi_version) decltype(&::name) name = nullptr;
#include "fkv/driver_functions.inc"
#undef FKV_DRIVER_FN

  int version = 0;       // cuDriverGetVersion, e.g. 13000
  int device_count = 0;  // cuDeviceGetCount, >= 1

 private:
  Driver();
  void* handle_ = nullptr;  // never dlclose'd: handles may outlive static destructors
};

// Calls a driver entry point and checks it: FKV_CU(cuMemAlloc, &ptr, bytes). The error names
// the call as written ("cuMemAlloc").
#define FKV_CU(fn, ...) ::fkv::Driver::get().check(::fkv::Driver::get().fn(__VA_ARGS__), #fn)

// RAII: a retained primary context of a device (never a private context).
class PrimaryContext {
 public:
  explicit PrimaryContext(int device);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  CUcontext get() const { return ctx_; }
  int device() const { return device_; }

 private:
  int device_;
  CUcontext ctx_ = nullptr;
};

// RAII: a loaded module. Unloads in the context it was loaded in.
class Module {
 public:
  Module() = default;
  Module(CUcontext ctx, const std::string& image);  // CUBIN or PTX
  ~Module();
  Module(Module&& o) noexcept { *this = std::move(o); }
  Module& operator=(Module&& o) noexcept;
  CUfunction function(const std::string& lowered_name) const;
  CUmodule get() const { return mod_; }

 private:
  CUcontext ctx_ = nullptr;
  CUmodule mod_ = nullptr;
};

// RAII: device memory (tests, benchmarks, the materializer's own buffers), allocated in the
// calling thread's context (ensure_context() first). Zero bytes allocates nothing.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  CUdeviceptr get() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  CUcontext ctx_ = nullptr;  // freed in the context it was allocated in
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// RAII: a non-blocking stream and a (timing) event, created in the calling thread's context
// (ensure_context() first).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void synchronize() const;

 private:
  CUstream s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return e_; }

 private:
  CUevent e_ = nullptr;
};

// Makes sure the calling thread has a current context: keeps the current one (e.g. PyTorch's
// primary context), else makes the primary context of `device` current. Returns it. The
// primary context is retained once per device for the life of the process.
CUcontext ensure_context(int device = 0);

// The CUdevice of ordinal `device`; a clear CudaError when there is no such device.
CUdevice device_handle(int device);

// Makes `ctx` current for a scope (push/pop) when it is not already; restores on exit.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace fkv
