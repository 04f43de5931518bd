// Error types of fkv-jit, and the one table that says how each kind of error reaches a user:
// the C status (fkv.h), the CLI's exit code (docs/cli.md) and the Python exception class
// (fkv_jit). Every front-end looks the kind up here; none re-decides it from context.
#pragma once

#include <exception>
#include <span>
#include <stdexcept>
#include <string>

namespace fkv {

namespace detail {
// what() is a C string: a NUL inside a message (from a config string, a path) would cut the
// text there. Every fkv error stores its message with each NUL written as "\x00".
std::string without_nul(const std::string& text);
}  // namespace detail

// A model config or environment value that cannot be read: a missing or malformed file, a
// value that is present but wrong, a malformed FKV_* variable. Derived from
// std::invalid_argument so that bindings map it to ValueError. Its subclasses below are the
// other config-side kinds; a plain ConfigError is "bad input".
struct ConfigError : std::invalid_argument {
  explicit ConfigError(const std::string& what)
      : std::invalid_argument(detail::without_nul(what)) {}
  explicit ConfigError(const char* what) : ConfigError(std::string(what)) {}
};

// The config was read, but its attention layers cannot share the fused KV path (the seed's
// "... mismatch across layers for fused KV path: ..." texts), or a TP degree does not split
// its KV heads.
struct MismatchError : ConfigError {
  using ConfigError::ConfigError;
};

// The architecture or a layer's attention is not something a fused per-head K/V path can serve
// (MLA, linear attention, K norm across heads, an unknown model_type, ...).
struct UnsupportedError : ConfigError {
  using ConfigError::ConfigError;
};

// Bad arguments to a launch: shapes, strides, alignment, dtypes, missing buffers.
struct ArgumentError : std::invalid_argument {
  explicit ArgumentError(const std::string& what)
      : std::invalid_argument(detail::without_nul(what)) {}
  explicit ArgumentError(const char* what) : ArgumentError(std::string(what)) {}
};

// NVRTC rejected a specialized source, or an arch is not supported. Carries the NVRTC log
// and the specialized source so that a kernel developer can reproduce the failure.
struct CompileError : std::runtime_error {
  CompileError(const std::string& what, std::string log_ = {}, std::string source_ = {})
      : std::runtime_error(detail::without_nul(what)),
        log(std::move(log_)),
        source(std::move(source_)) {}
  std::string log;
  std::string source;
};

// A CUDA driver call failed (or the driver is missing). `call` names the entry point and
// `code_name` is cuGetErrorName's answer (e.g. "CUDA_ERROR_INVALID_VALUE").
struct CudaError : std::runtime_error {
  CudaError(const std::string& what, std::string call_ = {}, int code_ = 0,
            std::string code_name_ = {})
      : std::runtime_error(detail::without_nul(what)),
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
  explicit CacheError(const std::string& what) : std::runtime_error(detail::without_nul(what)) {}
  explicit CacheError(const char* what) : CacheError(std::string(what)) {}
};

// ---- the taxonomy -------------------------------------------------------------------------

enum class ErrorKind {
  BadInput,     // ConfigError
  Mismatch,     // MismatchError
  Unsupported,  // UnsupportedError
  Argument,     // ArgumentError (and any other std::invalid_argument)
  Compile,      // CompileError
  Cuda,         // CudaError
  Cache,        // CacheError
  OutOfMemory,  // std::bad_alloc
  Internal,     // anything else: a bug
};

// How one kind reaches the user through each front-end.
struct ErrorKindInfo {
  ErrorKind kind;
  const char* name;           // stable lowercase name: "bad_input", "config_mismatch", ...
  int c_status;               // fkv_status (fkv.h)
  const char* c_status_name;  // "FKV_ERR_BAD_INPUT"
  int exit_code;              // the fkv-jit CLI's exit code
  const char* python_class;   // the fkv_jit exception class ("BadInputError")
  const char* python_base;    // its builtin base ("ValueError", "RuntimeError", "MemoryError")
  const char* summary;        // one line for docs and --help
};

// Every kind, in ErrorKind order. The table is constant data (no static constructor), so it
// may be used at any time, during process exit too.
std::span<const ErrorKindInfo> error_kinds() noexcept;
const ErrorKindInfo& error_kind_info(ErrorKind kind) noexcept;
// The kind of a C status; Internal for a value that is not one.
const ErrorKindInfo& error_kind_of_status(int c_status) noexcept;

// The kind of an exception, by its type (the most derived class in the list above).
ErrorKind error_kind_of(const std::exception& e) noexcept;
// The kind of the exception being handled (call inside a catch block); Internal for a
// non-std exception.
ErrorKind current_error_kind() noexcept;

}  // namespace fkv
