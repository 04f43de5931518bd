// weights: storage formats of the packed K/V projection weights (include/fkv/weights.hpp).
#include "fkv/weights.hpp"

#include <algorithm>
#include <cctype>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

struct Name {
  const char* name;
  WeightFormat format;
};
constexpr Name kNames[] = {
    {"dense", WeightFormat::Dense},
    {"fp8_tensor", WeightFormat::Fp8Tensor},
    {"fp8_channel", WeightFormat::Fp8Channel},
    {"fp8_block", WeightFormat::Fp8Block},
    {"int8_channel", WeightFormat::Int8Channel},
    // The engines' spellings.
    {"fp8", WeightFormat::Fp8Tensor},
    {"fp8_per_tensor", WeightFormat::Fp8Tensor},
    {"fp8_per_channel", WeightFormat::Fp8Channel},
    {"fp8_block128", WeightFormat::Fp8Block},
    {"int8", WeightFormat::Int8Channel},
    {"w8a16", WeightFormat::Int8Channel},
};

// Packed sub-byte schemes: two or more weights per byte, group-wise zero points and scales.
constexpr const char* kPacked4Bit[] = {
    "gptq", "awq",    "nvfp4",       "mxfp4",      "int4",         "uint4", "w4a16", "w4a8",
    "fp4",  "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "nf4",   "exl2",  "hqq"};

}  // namespace

std::string to_string(WeightFormat f) {
  for (const Name& n : kNames)
    if (n.format == f) return n.name;
  return "dense";
}

WeightFormat parse_weight_format(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return c == '-' ? '_' : static_cast<char>(std::tolower(c));
  });
  for (const Name& n : kNames)
    if (s == n.name) return n.format;
  for (const char* p : kPacked4Bit)
    if (s == p)
      throw UnsupportedError(
          "weight format '" + name +
          "' packs 4-bit weights with group-wise scales: fkv-jit reads FP8 e4m3 (per-tensor, "
          "per-channel or 128x128 block scales) and INT8 per-channel (W8A16) K/V weights. "
          "Dequantize the draft's qkv_proj to bf16, or quantize it to one of those.");
  throw ArgumentError("unknown weight format '" + name +
                      "': expected dense, fp8_tensor, fp8_channel, fp8_block or int8_channel");
}

bool is_quantized(WeightFormat f) { return f != WeightFormat::Dense; }

ScaleLayout scale_layout(WeightFormat f) {
  switch (f) {
    case WeightFormat::Dense:
      return ScaleLayout::None;
    case WeightFormat::Fp8Tensor:
      return ScaleLayout::PerLayer;
    case WeightFormat::Fp8Channel:
    case WeightFormat::Int8Channel:
      return ScaleLayout::PerRow;
    case WeightFormat::Fp8Block:
      return ScaleLayout::Block128;
  }
  return ScaleLayout::None;
}

int weight_element_bytes(WeightFormat f, int dense_bytes) {
  return is_quantized(f) ? 1 : dense_bytes;
}

std::int64_t layer_scale_count(WeightFormat f, std::int64_t rows, std::int64_t cols) {
  switch (scale_layout(f)) {
    case ScaleLayout::None:
      return 0;
    case ScaleLayout::PerLayer:
      return 1;
    case ScaleLayout::PerRow:
      return rows;
    case ScaleLayout::Block128:
      return ((rows + kWeightBlock - 1) / kWeightBlock) *
             ((cols + kWeightBlock - 1) / kWeightBlock);
  }
  return 0;
}

}  // namespace fkv
