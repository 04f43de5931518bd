// native: what the binding's sources share: errors crossing as the fkv_jit classes of
// fkv/errors.hpp's table, the checks of Python arguments (ints past 32 bits, strs with a NUL),
// DLPack tensor checks, and the declarations the sources give each other.
//
// The sources, by subject (each exports its own tvm-ffi functions):
//   fkv_native.cpp           the module: version, error kinds, seed texts, driver and NVRTC
//   native_config.cpp        Config and Plan objects (native_config.hpp), validate, kernel
//                            descriptions, cos/sin tables, precompile, kernel loading
//   native_materializer.cpp  the materializer: creation, stacked output, tables, error flag
//   native_pool.cpp          the materializer's KV pools: binding the buffers, pool calls
//   native_weights.cpp       the materializer's weights and their storage formats
// Every call goes to the C++ API (include/fkv/*.hpp), the library being linked in.
#pragma once

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <string>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/spec.hpp"
#include "fkv/weights.hpp"

namespace fkv_native {

namespace ffi = tvm::ffi;

[[noreturn]] inline void raise(const char* kind, const std::string& message) {
  throw ffi::Error(kind, message, "");
}

// C++ exceptions of the library -> the same classes, through the same table.
template <class F>
auto guarded(F&& body) {
  try {
    return body();
  } catch (const ffi::Error&) {
    throw;
  } catch (const fkv::CompileError& e) {
    raise("CompileError",
          e.log.empty() ? std::string(e.what()) : std::string(e.what()) + "\n" + e.log);
  } catch (const std::bad_alloc&) {
    raise("MemoryError", "out of host memory");
  } catch (const std::exception& e) {
    const fkv::ErrorKindInfo& info = fkv::error_kind_info(fkv::error_kind_of(e));
    raise(info.python_class, info.kind == fkv::ErrorKind::Internal
                                 ? std::string("internal error: ") + e.what()
                                 : std::string(e.what()));
  }
}

// ---- arguments -------------------------------------------------------------------------------
// Python ints arrive as int64 (tvm-ffi would cut them to 32 bits for an `int` parameter, so that
// 2**32 + 8 read as 8) and Python strs as counted strings (a NUL inside would end the C string
// the library reads, so that "a.json\0junk" read "a.json"). Both are refused here, by name.

inline int to_int(std::int64_t v, const char* what) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    raise("ArgumentError", std::string(what) + " is " + std::to_string(v) +
                               ", outside the 32-bit range the library takes");
  return static_cast<int>(v);
}

// A string the library reads as a C string: no NUL inside.
inline std::string c_str(const ffi::String& s, const char* what) {
  if (const void* nul = std::memchr(s.data(), '\0', s.size()))
    raise("ArgumentError", std::string(what) + " contains a NUL character (at offset " +
                               std::to_string(static_cast<const char*>(nul) - s.data()) +
                               "), which a path, name or JSON text cannot hold");
  return std::string(s.data(), s.size());
}

// An integer of a JSON object fkv_jit passes (options, kernel descriptions): range-checked,
// not truncated.
template <class T>
T json_int(const nlohmann::json& o, const char* key, T fallback, bool required = false) {
  if (!o.contains(key)) {
    if (required) raise("ArgumentError", std::string("option '") + key + "' is missing");
    return fallback;
  }
  const nlohmann::json& v = o.at(key);
  if (!v.is_number_integer())
    raise("ArgumentError", std::string("option '") + key + "' must be an integer, got " + v.dump());
  if (v.is_number_unsigned()
          ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max())
          : (v.get<std::int64_t>() < std::numeric_limits<T>::min() ||
             v.get<std::int64_t>() > std::numeric_limits<T>::max()))
    raise("ArgumentError", std::string(key) + " is " + v.dump() + ", outside the range [" +
                               std::to_string(std::numeric_limits<T>::min()) + ", " +
                               std::to_string(std::numeric_limits<T>::max()) + "]");
  return v.get<T>();
}

// ---- tensors ---------------------------------------------------------------------------------

inline bool is(const DLDataType& t, uint8_t code, uint8_t bits) {
  return t.code == code && t.bits == bits && t.lanes == 1;
}

inline std::string dl_name(const DLDataType& t) {
  switch (t.code) {
    case kDLInt:
      return "int" + std::to_string(t.bits);
    case kDLUInt:
      return "uint" + std::to_string(t.bits);
    case kDLFloat:
      return "float" + std::to_string(t.bits);
    case kDLBfloat:
      return "bfloat16";
    case kDLFloat8_e4m3fn:
      return "float8_e4m3fn";
    case kDLFloat8_e5m2:
      return "float8_e5m2";
    default:
      return "dtype code " + std::to_string(t.code) + " bits " + std::to_string(t.bits);
  }
}

// `t` holds values of the library dtype `d` (fp8 pools may also be uint8 tensors).
inline bool matches(const DLDataType& t, fkv::DType d) {
  switch (d) {
    case fkv::DType::BF16:
      return is(t, kDLBfloat, 16);
    case fkv::DType::FP16:
      return is(t, kDLFloat, 16);
    case fkv::DType::FP32:
      return is(t, kDLFloat, 32);
    case fkv::DType::FP8_E4M3:
      return is(t, kDLFloat8_e4m3fn, 8) || is(t, kDLUInt, 8);
    case fkv::DType::FP8_E5M2:
      return is(t, kDLFloat8_e5m2, 8) || is(t, kDLUInt, 8);
  }
  return false;
}

inline void* data(const ffi::TensorView& t) {
  return static_cast<char*>(t.data_ptr()) + t.byte_offset();
}

inline bool contiguous(const ffi::TensorView& t) { return t.IsContiguous(); }

inline void check_device(const ffi::TensorView& t, int device, const char* what) {
  const DLDevice d = t.device();
  if (d.device_type != kDLCUDA || d.device_id != device)
    raise("ValueError", std::string(what) + " must be on cuda:" + std::to_string(device) +
                            ", the helper's device");
}

// ---- the materializer's weights (native_weights.cpp) -----------------------------------------

// What the weights are checked against: the helper's device, activation dtype, hidden size and
// the storage format of W_kv.
struct WeightTarget {
  int device = 0;
  fkv::DType act = fkv::DType::BF16;
  std::int64_t hidden = 0;
  fkv::WeightFormat format = fkv::WeightFormat::Dense;
};

// The DLPack dtype W_kv crosses in: the activation dtype, int8, or for FP8 formats uint8 (the
// bytes; fkv_jit views them as float8_e4m3fn, which not every torch passes through DLPack).
DLDataType stored_dtype(const WeightTarget& t);

// The tensors fkv_jit passes (per attention layer: W_kv [rows, hidden] with contiguous rows,
// K-norm weights and K/V biases as contiguous float32 CPU tensors, eps, and for quantized
// formats the fp32 scales on the device) as fkv::MaterializerWeights, each checked first:
// TypeError / ValueError naming the argument.
fkv::MaterializerWeights materializer_weights(const WeightTarget& target,
                                              const ffi::Array<ffi::Tensor>& w_kv,
                                              const ffi::Array<ffi::Tensor>& k_norm,
                                              const ffi::Array<ffi::Tensor>& kv_bias,
                                              const ffi::Array<double>& eps,
                                              const ffi::Array<ffi::Tensor>& w_scale);

}  // namespace fkv_native
