// c_api: the C API (include/fkv/fkv.h) over the C++ modules. This file: status and errors,
// the version, dtypes, and the helpers every C API source shares (c_api_internal.hpp: the
// thread's last error, interned strings, dtype conversions). The other entry points, by subject:
// c_api_config.cpp (configs, validation, plans, kernel descriptions, cos/sin tables),
// c_api_kernels.cpp (precompilation, kernels and launches), c_api_materializer.cpp (the
// materializer and its weights).
#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "c_api_internal.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/spec.hpp"
#include "fkv/version.hpp"

namespace fkv::c_api {
namespace {

// The last error of each thread. glibc runs a thread's thread_local destructors before the
// atexit handlers, so the texts live on the heap behind a trivially destructible pointer: a call
// from an atexit handler finds no destroyed string, only a null pointer, and makes a new pair,
// which the exiting process keeps. The owner frees the pair when any other thread ends.
struct LastError {
  std::string text;
  std::string log;
};
thread_local LastError* t_last = nullptr;
struct LastErrorOwner {
  ~LastErrorOwner() {
    delete t_last;
    t_last = nullptr;
  }
};
thread_local LastErrorOwner t_last_owner;

LastError& last_error() {
  if (t_last == nullptr) {
    t_last = new LastError;
    static_cast<void>(&t_last_owner);  // registers the owner's destructor for this thread
  }
  return *t_last;
}

}  // namespace

fkv_status fail(fkv_status status, std::string text, std::string log) {
  LastError& e = last_error();
  e.text = std::move(text);
  e.log = std::move(log);
  return status;
}

const char* intern(const std::string& s) {
  static std::mutex& mu = *new std::mutex;
  static std::set<std::string>& strings = *new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  return strings.insert(s).first->c_str();
}

fkv::DType to_cpp(fkv_dtype d) {
  switch (d) {
    case FKV_DTYPE_BF16:
      return fkv::DType::BF16;
    case FKV_DTYPE_FP16:
      return fkv::DType::FP16;
    case FKV_DTYPE_FP32:
      return fkv::DType::FP32;
    case FKV_DTYPE_FP8_E4M3:
      return fkv::DType::FP8_E4M3;
    case FKV_DTYPE_FP8_E5M2:
      return fkv::DType::FP8_E5M2;
    case FKV_DTYPE_FORCE_INT_:
      break;
  }
  throw fkv::ArgumentError("invalid fkv_dtype value " + std::to_string(static_cast<int>(d)) +
                           ": use one of the FKV_DTYPE_* constants");
}

fkv_dtype to_c(fkv::DType d) {
  switch (d) {
    case fkv::DType::BF16:
      return FKV_DTYPE_BF16;
    case fkv::DType::FP16:
      return FKV_DTYPE_FP16;
    case fkv::DType::FP32:
      return FKV_DTYPE_FP32;
    case fkv::DType::FP8_E4M3:
      return FKV_DTYPE_FP8_E4M3;
    case fkv::DType::FP8_E5M2:
      return FKV_DTYPE_FP8_E5M2;
  }
  return FKV_DTYPE_BF16;
}

fkv_status copy_ints(const std::vector<int>& from, int* to, size_t capacity, const char* what) {
  if (from.size() > capacity)
    throw fkv::ArgumentError(std::string(what) + ": the buffer holds " + std::to_string(capacity) +
                             " values, " + std::to_string(from.size()) + " are needed");
  if (!from.empty()) require(to, "layers");
  std::copy(from.begin(), from.end(), to);
  return FKV_OK;
}

}  // namespace fkv::c_api

using namespace fkv::c_api;

extern "C" {

// ---- status and errors -----------------------------------------------------------------------

const char* fkv_last_error(void) { return t_last ? t_last->text.c_str() : ""; }
const char* fkv_last_error_log(void) { return t_last ? t_last->log.c_str() : ""; }

const char* fkv_status_name(fkv_status status) {
  if (status == FKV_OK) return "FKV_OK";
  for (const fkv::ErrorKindInfo& info : fkv::error_kinds())
    if (info.c_status == status) return info.c_status_name;
  return "FKV_ERR_UNKNOWN";
}

const char* fkv_version(void) { return fkv::kVersion; }

int fkv_driver_available(void) {
  try {
    return fkv::Driver::available() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// ---- dtypes ----------------------------------------------------------------------------------

fkv_status fkv_dtype_parse(const char* name, fkv_dtype* out) {
  return guard([&] {
    require(name, "name");
    require(out, "out");
    *out = to_c(fkv::parse_dtype(name));
    return FKV_OK;
  });
}

const char* fkv_dtype_name(fkv_dtype dtype) {
  try {
    return fkv::dtype_name(to_cpp(dtype));
  } catch (...) {
    return "?";
  }
}

int fkv_dtype_size(fkv_dtype dtype) {
  try {
    return fkv::dtype_size(to_cpp(dtype));
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
