// fkv_jit._native: the Python binding of fkv-jit, built on apache-tvm-ffi's C ABI.
//
// Functions are exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC and loaded by fkv_jit with
// tvm_ffi.load_module(). Tensors arrive as DLPack views (torch tensors through tvm-ffi's DLPack
// exchange, so no torch version is compiled in); the CUDA stream is torch's current stream, which
// tvm-ffi publishes for the call (TVMFFIEnvGetStream). No Python header is used, so one build
// serves every CPython version.
//
// The binding is one layer over the C++ API (include/fkv/*.hpp; the library is linked in):
// fkv_jit holds native objects (a Config parsed once, the Plan of a tensor-parallel rank, the
// materializer's state: native_config.hpp, native_materializer.hpp) and calls functions on them.
// Each error crosses as a tvm-ffi error whose kind is the fkv_jit class of its error kind
// (fkv/errors.hpp's table; native.hpp's guarded()). native.hpp lists the sources by subject;
// this one holds the module's facts: version, error kinds, seed texts, driver and NVRTC.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/seed_texts.hpp"
#include "fkv/version.hpp"
#include "native.hpp"
#include "nvrtc_loader.hpp"

namespace fkv_native {
namespace {

using json = nlohmann::json;

ffi::String version() { return fkv::kVersion; }

// The error taxonomy (fkv/errors.hpp) as JSON: [{"name", "c_status", "exit_code",
// "python_class", "python_base", "summary"}, ...]; fkv_jit/_errors.py checks its classes
// against it.
ffi::String error_kinds() {
  json out = json::array();
  for (const fkv::ErrorKindInfo& k : fkv::error_kinds())
    out.push_back({{"name", k.name},
                   {"c_status", k.c_status},
                   {"c_status_name", k.c_status_name},
                   {"exit_code", k.exit_code},
                   {"python_class", k.python_class},
                   {"python_base", k.python_base},
                   {"summary", k.summary}});
  return out.dump();
}

// The seed helper's error texts by name, as {field} templates (include/fkv/seed_texts.hpp): the
// sglang drop-in formats these, so the texts are defined once, in C++.
ffi::String seed_texts() { return json(fkv::seed::templates()).dump(); }

// True when a CUDA driver with at least one device can be loaded; never raises.
bool driver_available() {
  try {
    return fkv::Driver::available();
  } catch (...) {
    return false;
  }
}

void set_cuda_library_dirs(ffi::Array<ffi::String> dirs) {
  std::vector<std::string> v;
  for (const ffi::String& d : dirs) v.emplace_back(d);
  fkv::set_cuda_library_dirs(std::move(v));
}

// [loaded, path or the error text]
ffi::Array<ffi::String> nvrtc_status() {
  try {
    return {"1", fkv::nvrtc().path};
  } catch (const fkv::CompileError& e) {
    return {"0", e.what()};
  }
}

}  // namespace
}  // namespace fkv_native

TVM_FFI_DLL_EXPORT_TYPED_FUNC(error_kinds, fkv_native::error_kinds)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(version, fkv_native::version)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(seed_texts, fkv_native::seed_texts)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(driver_available, fkv_native::driver_available)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_cuda_library_dirs, fkv_native::set_cuda_library_dirs)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvrtc_status, fkv_native::nvrtc_status)
