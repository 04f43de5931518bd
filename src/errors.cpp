// errors: the error taxonomy's one table (include/fkv/errors.hpp).
#include "fkv/errors.hpp"

#include <new>

#include "fkv/fkv.h"

namespace fkv {

namespace detail {
std::string without_nul(const std::string& text) {
  if (text.find('\0') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    if (c == '\0')
      out += "\\x00";
    else
      out += c;
  }
  return out;
}
}  // namespace detail

namespace {

// Constant initialization only: the table is usable before main and during exit.
constexpr ErrorKindInfo kKinds[] = {
    {ErrorKind::BadInput, "bad_input", FKV_ERR_BAD_INPUT, "FKV_ERR_BAD_INPUT", 2, "BadInputError",
     "ValueError",
     "a config file or environment value that cannot be read: missing, malformed, or a value "
     "that is present but wrong"},
    {ErrorKind::Mismatch, "config_mismatch", FKV_ERR_CONFIG_MISMATCH, "FKV_ERR_CONFIG_MISMATCH", 1,
     "ConfigMismatchError", "ValueError",
     "the config was read, but its attention layers cannot share the fused KV path"},
    {ErrorKind::Unsupported, "unsupported", FKV_ERR_UNSUPPORTED, "FKV_ERR_UNSUPPORTED", 9,
     "UnsupportedModelError", "ValueError",
     "the architecture or a layer's attention is not one the fused KV path can serve, or the "
     "model_type is unknown"},
    {ErrorKind::Argument, "argument", FKV_ERR_ARGUMENT, "FKV_ERR_ARGUMENT", 2, "ArgumentError",
     "ValueError", "a bad argument: shapes, strides, alignment, dtypes, unknown names"},
    {ErrorKind::Compile, "compile", FKV_ERR_COMPILE, "FKV_ERR_COMPILE", 4, "CompileError",
     "RuntimeError", "NVRTC rejected a kernel, is not installed, or the arch is not supported"},
    {ErrorKind::Cuda, "cuda", FKV_ERR_CUDA, "FKV_ERR_CUDA", 5, "CudaError", "RuntimeError",
     "the CUDA driver is missing or a driver call failed"},
    {ErrorKind::Cache, "cache", FKV_ERR_CACHE, "FKV_ERR_CACHE", 6, "CacheError", "RuntimeError",
     "the kernel cache cannot be used as asked"},
    {ErrorKind::OutOfMemory, "out_of_memory", FKV_ERR_OUT_OF_MEMORY, "FKV_ERR_OUT_OF_MEMORY", 10,
     "MemoryError", "MemoryError", "a host allocation failed"},
    {ErrorKind::Internal, "internal", FKV_ERR_INTERNAL, "FKV_ERR_INTERNAL", 11, "FkvError",
     "Exception", "anything else: a bug (please report it with the text)"},
};

}  // namespace

std::span<const ErrorKindInfo> error_kinds() noexcept { return kKinds; }

const ErrorKindInfo& error_kind_info(ErrorKind kind) noexcept {
  for (const ErrorKindInfo& info : kKinds)
    if (info.kind == kind) return info;
  return kKinds[std::size(kKinds) - 1];
}

const ErrorKindInfo& error_kind_of_status(int c_status) noexcept {
  for (const ErrorKindInfo& info : kKinds)
    if (info.c_status == c_status) return info;
  return error_kind_info(ErrorKind::Internal);
}

ErrorKind error_kind_of(const std::exception& e) noexcept {
  // Most derived first: MismatchError and UnsupportedError are ConfigErrors.
  if (dynamic_cast<const MismatchError*>(&e)) return ErrorKind::Mismatch;
  if (dynamic_cast<const UnsupportedError*>(&e)) return ErrorKind::Unsupported;
  if (dynamic_cast<const ConfigError*>(&e)) return ErrorKind::BadInput;
  if (dynamic_cast<const ArgumentError*>(&e)) return ErrorKind::Argument;
  if (dynamic_cast<const CompileError*>(&e)) return ErrorKind::Compile;
  if (dynamic_cast<const CudaError*>(&e)) return ErrorKind::Cuda;
  if (dynamic_cast<const CacheError*>(&e)) return ErrorKind::Cache;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ErrorKind::OutOfMemory;
  if (dynamic_cast<const std::invalid_argument*>(&e)) return ErrorKind::Argument;
  return ErrorKind::Internal;
}

ErrorKind current_error_kind() noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    return error_kind_of(e);
  } catch (...) {
    return ErrorKind::Internal;
  }
}

}  // namespace fkv
