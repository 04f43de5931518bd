// driver and runtime without a GPU: CI machines have no NVIDIA driver, and there everything
// that needs one must fail with a clear CudaError instead of crashing or linking libcuda.
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <type_traits>

#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// Whether this process could load a driver at all, found independently of fkv::Driver.
bool libcuda_loadable() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) ::dlclose(h);
  return h != nullptr;
}

const char* kHint =
    "fkv-jit needs an NVIDIA driver to launch kernels; validate, plan, source and precompile work "
    "without one.";

}  // namespace

// cuda.h renames entry points (cuMemAlloc -> cuMemAlloc_v2, cuGraphInstantiate ->
// cuGraphInstantiateWithFlags); the Driver's members follow, so code written against the
// plain names calls the signature the header declares.
static_assert(std::is_same_v<decltype(fkv::Driver::cuMemAlloc), decltype(&::cuMemAlloc_v2)>);
static_assert(
    std::is_same_v<decltype(fkv::Driver::cuCtxPushCurrent), decltype(&::cuCtxPushCurrent_v2)>);
static_assert(std::is_same_v<decltype(fkv::Driver::cuGraphInstantiate),
                             CUresult (*)(CUgraphExec*, CUgraph, unsigned long long)>);
static_assert(std::is_same_v<decltype(fkv::Driver::cuCtxGetDevice), CUresult (*)(CUdevice*)>);
static_assert(
    std::is_same_v<decltype(fkv::Driver::cuStreamGetCtx), CUresult (*)(CUstream, CUcontext*)>);

TEST_CASE("Driver::available never throws and agrees with get()", "[driver]") {
  bool available = false;
  REQUIRE_NOTHROW(available = fkv::Driver::available());
  REQUIRE_NOTHROW(fkv::Driver::available());  // a second query answers the same way
  CHECK(fkv::Driver::available() == available);
  if (available) {
    WARN("a CUDA driver with a device is present: the no-driver checks are skipped");
    CHECK_NOTHROW(fkv::Driver::get());
    CHECK(fkv::Driver::get().device_count >= 1);
    CHECK(fkv::Driver::get().version >= 12000);
    return;
  }
  CHECK_THROWS_AS(fkv::Driver::get(), fkv::CudaError);
}

TEST_CASE("without a driver, Driver::get() throws a CudaError that says what to do", "[driver]") {
  if (fkv::Driver::available()) {
    WARN("a CUDA driver with a device is present: skipped");
    return;
  }
  std::string first;
  try {
    fkv::Driver::get();
    FAIL("Driver::get() returned without a driver");
  } catch (const fkv::CudaError& e) {
    first = e.what();
    if (!libcuda_loadable()) {
      CHECK_THAT(first, StartsWith("CUDA driver not found: dlopen(libcuda.so.1) failed: "));
      CHECK(e.call == "dlopen");
    } else {
      WARN("libcuda.so.1 loads but no device is usable: " << first);
    }
    CHECK_THAT(first, Contains(kHint));
  }
  // The failure is remembered, not retried into a different error.
  try {
    fkv::Driver::get();
    FAIL("Driver::get() returned on the second call");
  } catch (const fkv::CudaError& e) {
    CHECK(std::string(e.what()) == first);
  }
}

TEST_CASE("without a driver, GPU entry points throw CudaError instead of crashing", "[driver]") {
  if (fkv::Driver::available()) {
    WARN("a CUDA driver with a device is present: skipped");
    return;
  }
  CHECK_THROWS_AS(fkv::ensure_context(0), fkv::CudaError);
  CHECK_THROWS_AS(fkv::device_handle(0), fkv::CudaError);
  CHECK_THROWS_AS(fkv::PrimaryContext(0), fkv::CudaError);
  CHECK_THROWS_AS(fkv::DeviceBuffer(256), fkv::CudaError);
  CHECK_THROWS_AS(fkv::Stream(), fkv::CudaError);
  CHECK_THROWS_AS(fkv::Event(), fkv::CudaError);
  CHECK_THROWS_AS(fkv::Runtime::device_arch(0), fkv::CudaError);

  fkv::KernelCache cache{fkv::CacheOptions{}};  // memory only: nothing written to disk
  fkv::Runtime runtime(cache);
  fkv::KernelSpec spec;
  spec.num_kv_heads = 8;
  spec.head_dim = 128;
  spec.rotary_dim = 128;
  CHECK_THROWS_WITH(runtime.prepare(spec, 0), Contains("CUDA driver") || Contains("cuInit"));
  CHECK_THROWS_AS(runtime.get(spec, nullptr), fkv::CudaError);
}

TEST_CASE("resources that hold nothing need no driver", "[driver]") {
  // Empty handles are destroyed and moved without touching libcuda.
  fkv::DeviceBuffer empty(0);
  CHECK(empty.get() == 0);
  CHECK(empty.size() == 0);
  fkv::DeviceBuffer moved(std::move(empty));
  CHECK(moved.get() == 0);
  fkv::Module module;
  fkv::Module other(std::move(module));
  CHECK(other.get() == nullptr);

  // A zero grid is no work (T = 0): launch returns before any driver call.
  fkv::LoadedKernel k;
  FkvKernelParams params{};
  CHECK_NOTHROW(fkv::launch(k, params, 0, 1, 1, nullptr));
  CHECK_NOTHROW(fkv::launch(k, params, 4, 0, 1, nullptr));
  CHECK_NOTHROW(fkv::launch(k, params, 4, 1, 0, nullptr));
}

// Run in a child process by the test below, with a stub libcuda.so.1 first on the search path.
TEST_CASE("stub child: print what Driver::get() throws", "[.stub_child]") {
  std::cout << "AVAILABLE=" << fkv::Driver::available() << "\n";
  try {
    fkv::Driver::get();
    std::cout << "NO-ERROR\n";
  } catch (const fkv::CudaError& e) {
    std::cout << "WHAT=" << e.what() << "\nCALL=" << e.call << "\n";
  }
}

TEST_CASE("the toolkit's stub libcuda is reported as such, not as a driver", "[driver]") {
  namespace fs = std::filesystem;
  fs::path stub;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"})
    if (fs::exists(p)) stub = p;
  if (stub.empty()) {
    WARN("no CUDA toolkit stub libcuda.so found: skipped");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("fkv-test-stub-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::remove(dir / "libcuda.so.1");
  fs::create_symlink(stub, dir / "libcuda.so.1");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd =
      "LD_LIBRARY_PATH='" + dir.string() + "' '" + self + "' '[.stub_child]' 2>&1";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    std::array<char, 512> buf{};
    while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
    ::pclose(f);
  }
  fs::remove_all(dir);
  INFO(out);
  CHECK_THAT(out, Contains("AVAILABLE=0"));
  CHECK_THAT(out, Contains("WHAT=CUDA driver not found: "));
  CHECK_THAT(out, Contains("is the CUDA toolkit's stub library, not an NVIDIA driver"));
  CHECK_THAT(out, Contains("LD_LIBRARY_PATH"));
  CHECK_THAT(out, Contains(kHint));
  CHECK_THAT(out, Contains("CALL=cuGetProcAddress"));
}
