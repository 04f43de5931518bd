// weights: the storage formats of the packed K/V projection weights a draft model may bring.
//
// A quantized weight is read as stored, never dequantized into a full copy:
//   - fp8_tensor:  FP8 e4m3 [N, hidden], one fp32 scale per layer (a per-tensor weight_scale);
//   - fp8_channel: FP8 e4m3 [N, hidden], one fp32 scale per output row;
//   - fp8_block:   FP8 e4m3 [N, hidden], one fp32 scale per 128 x 128 block (DeepSeek's
//                  weight_scale_inv layout: [ceil(N / 128), ceil(hidden / 128)], row-major);
//   - int8_channel: INT8 [N, hidden] (W8A16), one fp32 scale per output row.
// The projection is then sum_k x[t, k] * (q[n, k] * scale(n, k)), activations bf16/fp16,
// accumulated in fp32: the per-row and per-tensor scales multiply the row's fp32 sum, a block
// scale each 128-column partial sum of its block (as sglang's and vLLM's Fp8LinearMethod /
// block-FP8 / W8A16 reference paths do with dequantized weights, docs/quantized.md). On the FP8
// GEMM (FP8 weights above the decode crossover, MaterializerOptions::fp8_gemm) x is first
// quantized to e4m3 per token (per token and 128 columns for blocks), as their W8A8 paths do.
// Packed 4-bit schemes (GPTQ, AWQ, NVFP4, MXFP4, ...) are refused by name.
#pragma once

#include <cstdint>
#include <string>

namespace fkv {

enum class WeightFormat { Dense, Fp8Tensor, Fp8Channel, Fp8Block, Int8Channel };

// How the scales of a format are laid out for the kernels (per packed row set).
enum class ScaleLayout {
  None,      // dense weights
  PerLayer,  // [L]: a per-tensor scale of each layer's weight
  PerRow,    // [N]: one per output row
  Block128,  // [ceil(N / 128), ceil(hidden / 128)] row-major
};

constexpr int kWeightBlock = 128;  // the block edge of Fp8Block

// "dense", "fp8_tensor", "fp8_channel", "fp8_block", "int8_channel".
std::string to_string(WeightFormat f);
// Parses a format name (those above, plus the engines' spellings: "fp8" = fp8_tensor,
// "fp8_per_channel", "fp8_block128", "w8a16", "int8"). A packed 4-bit scheme ("gptq", "awq",
// "nvfp4", "mxfp4", "int4", "w4a16", "fp4", ...) is an UnsupportedError naming it; any other
// unknown name an ArgumentError listing the formats.
WeightFormat parse_weight_format(const std::string& name);

bool is_quantized(WeightFormat f);
ScaleLayout scale_layout(WeightFormat f);
// Bytes per stored weight element: 1 for the quantized formats, else `dense_bytes`.
int weight_element_bytes(WeightFormat f, int dense_bytes);
// Scales of one layer's K/V weight of `rows` rows and `cols` columns: 0 (dense), 1 (tensor),
// rows (channel), ceil(rows / 128) * ceil(cols / 128) (block).
std::int64_t layer_scale_count(WeightFormat f, std::int64_t rows, std::int64_t cols);

}  // namespace fkv
