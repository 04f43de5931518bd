// native_weights: the materializer's weights as fkv_jit passes them (native_materializer.cpp's
// materializer_create and refresh_weights): dense bf16/fp16 W_kv, or quantized W_kv (FP8 e4m3
// or INT8 bytes, include/fkv/weights.hpp) with fp32 scales on the device, each tensor checked
// before the library copies it; and what fkv_jit asks about the formats (weight_format,
// weight_scale_shape), answered by the library's one definition of them.
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cmath>
#include <string>
#include <vector>

#include "native.hpp"

namespace fkv_native {
namespace {

// Host fp32 vectors from contiguous float32 CPU tensors (K-norm weights, K/V biases).
std::vector<std::vector<float>> host_vectors(const ffi::Array<ffi::Tensor>& tensors,
                                             const char* what) {
  std::vector<std::vector<float>> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ffi::TensorView t(tensors[i]);
    if (t.device().device_type != kDLCPU || !is(t.dtype(), kDLFloat, 32) || !contiguous(t))
      raise("TypeError",
            std::string(what) + " reach the binding as contiguous float32 CPU tensors");
    const float* p = static_cast<const float*>(data(t));
    out.emplace_back(p, p + t.numel());
  }
  return out;
}

// Layer i's scales: a contiguous float32 tensor on the helper's device with as many values as
// the format gives a [rows, hidden] weight (fkv::layer_scale_count).
const float* layer_scales(const WeightTarget& tg, const ffi::TensorView& t, std::size_t i,
                          std::int64_t rows) {
  const std::string what = "weight_scales[" + std::to_string(i) + "]";
  check_device(t, tg.device, what.c_str());
  if (!is(t.dtype(), kDLFloat, 32) || !contiguous(t))
    raise("TypeError", what + " is " + dl_name(t.dtype()) +
                           "; scales reach the binding as contiguous float32 tensors");
  const std::int64_t want = fkv::layer_scale_count(tg.format, rows, tg.hidden);
  if (t.numel() != want)
    raise("ValueError", what + " has " + std::to_string(t.numel()) + " values; " +
                            fkv::to_string(tg.format) + " weights of [" + std::to_string(rows) +
                            ", " + std::to_string(tg.hidden) + "] take " + std::to_string(want));
  return static_cast<const float*>(data(t));
}

}  // namespace

DLDataType stored_dtype(const WeightTarget& t) {
  switch (t.format) {
    case fkv::WeightFormat::Dense:
      return t.act == fkv::DType::FP16 ? DLDataType{kDLFloat, 16, 1} : DLDataType{kDLBfloat, 16, 1};
    case fkv::WeightFormat::Int8Channel:
      return DLDataType{kDLInt, 8, 1};
    default:  // FP8 e4m3 as bytes: not every torch passes float8 through DLPack
      return DLDataType{kDLUInt, 8, 1};
  }
}

fkv::MaterializerWeights materializer_weights(const WeightTarget& tg,
                                              const ffi::Array<ffi::Tensor>& w_kv,
                                              const ffi::Array<ffi::Tensor>& k_norm,
                                              const ffi::Array<ffi::Tensor>& kv_bias,
                                              const ffi::Array<double>& eps,
                                              const ffi::Array<ffi::Tensor>& w_scale) {
  fkv::MaterializerWeights w;
  w.format = tg.format;
  const DLDataType stored = stored_dtype(tg);
  const bool quantized = fkv::is_quantized(tg.format);
  if (quantized && w_scale.size() != w_kv.size())
    raise("ValueError", "weight_scales: " + fkv::to_string(tg.format) +
                            " weights take one fp32 scale tensor per attention layer (" +
                            std::to_string(w_kv.size()) + "), got " +
                            std::to_string(w_scale.size()));
  if (!quantized && w_scale.size() != 0)
    raise("ValueError", "weight_scales are given for dense weights");
  std::int64_t row_stride = 0;
  for (std::size_t i = 0; i < w_kv.size(); ++i) {
    const ffi::TensorView t(w_kv[i]);
    const std::string what = "kv_weights[" + std::to_string(i) + "]";
    check_device(t, tg.device, what.c_str());
    const bool fp8 = quantized && tg.format != fkv::WeightFormat::Int8Channel;
    if (!is(t.dtype(), stored.code, stored.bits) && !(fp8 && is(t.dtype(), kDLFloat8_e4m3fn, 8)))
      raise("TypeError",
            what + " is " + dl_name(t.dtype()) + ", expected " +
                (fp8 ? std::string("float8_e4m3fn (or its bytes as uint8)") : dl_name(stored)) +
                (quantized ? " (" + fkv::to_string(tg.format) + " weights)" : ""));
    if (t.ndim() != 2 || t.size(1) != tg.hidden || t.stride(1) != 1)
      raise("ValueError", what + " must be [2 * num_kv_heads * head_dim, " +
                              std::to_string(tg.hidden) + "] with contiguous rows");
    const std::int64_t rs = t.size(0) > 1 ? t.stride(0) : tg.hidden;
    if (i > 0 && rs != row_stride)
      raise("ValueError", "every kv_weights tensor must have the same row stride");
    row_stride = rs;
    w.w_kv.push_back(data(t));
    if (quantized) w.w_scale.push_back(layer_scales(tg, ffi::TensorView(w_scale[i]), i, t.size(0)));
  }
  w.w_kv_row_stride = row_stride;
  w.k_norm = host_vectors(k_norm, "k_norm weights");
  w.kv_bias = host_vectors(kv_bias, "kv biases");
  for (double e : eps) {
    if (!std::isfinite(e) || !(e > 0.0))
      raise("ValueError", "eps[" + std::to_string(w.eps.size()) + "] is " + std::to_string(e) +
                              ": the K-norm eps must be a finite number > 0");
    w.eps.push_back(static_cast<float>(e));
  }
  return w;
}

namespace {

// The canonical name of a weight format (fkv::parse_weight_format): a packed 4-bit scheme
// raises UnsupportedModelError, an unknown name ArgumentError.
ffi::String weight_format(ffi::String name) {
  return guarded([&] {
    return ffi::String(
        fkv::to_string(fkv::parse_weight_format(c_str(name, "the weight format name"))));
  });
}

// The shape of one layer's scales for a [rows, cols] weight in `format`: [] (dense), [1]
// (per tensor), [rows] (per output row), [ceil(rows / 128), ceil(cols / 128)] (128 x 128
// blocks, row-major).
ffi::Array<int64_t> weight_scale_shape(ffi::String format, std::int64_t rows, std::int64_t cols) {
  const fkv::WeightFormat f =
      guarded([&] { return fkv::parse_weight_format(std::string(format)); });
  const std::int64_t b = fkv::kWeightBlock;
  switch (fkv::scale_layout(f)) {
    case fkv::ScaleLayout::None:
      return {};
    case fkv::ScaleLayout::PerLayer:
      return {1};
    case fkv::ScaleLayout::PerRow:
      return {rows};
    case fkv::ScaleLayout::Block128:
      return {(rows + b - 1) / b, (cols + b - 1) / b};
  }
  return {};
}

}  // namespace
}  // namespace fkv_native

TVM_FFI_DLL_EXPORT_TYPED_FUNC(weight_format, fkv_native::weight_format)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(weight_scale_shape, fkv_native::weight_scale_shape)
