// Error types of fkv-jit. Each carries what a user needs to fix the problem.
#pragma once

#include <stdexcept>
#include <string>

namespace fkv {

// A model config that cannot be read, or whose layers cannot share the fused KV path.
// Derived from std::invalid_argument so that bindings map it to ValueError.
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Bad arguments to a launch: shapes, strides, alignment, dtypes, missing buffers.
struct ArgumentError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// NVRTC rejected a specialized source, or an arch is not supported. Carries the NVRTC log
// and the specialized source so that a kernel developer can reproduce the failure.
struct CompileError : std::runtime_error {
  CompileError(const std::string& what, std::string log_ = {}, std::string source_ = {})
      : std::runtime_error(what), log(std::move(log_)), source(std::move(source_)) {}
  std::string log;
  std::string source;
};

// A CUDA driver call failed (or the driver is missing). `call` names the entry point and
// `code_name` is cuGetErrorName's answer (e.g. "CUDA_ERROR_INVALID_VALUE").
struct CudaError : std::runtime_error {
  CudaError(const std::string& what, std::string call_ = {}, int code_ = 0,
            std::string code_name_ = {})
      : std::runtime_error(what),
        call(std::move(call_)),
        code(code_),
        code_name(std::move(code_name_)) {}
  std::string call;
  int code;
  std::string code_name;
};

// The kernel cache cannot be used as asked (unsafe root, unreadable entry on an explicit
// verify, ...). Ordinary bad entries are not errors: they are logged, removed and rebuilt.
struct CacheError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace fkv
