// fp8_gemm_path (internal): FusedKVMaterializer's projection over FP8 weights above the decode
// crossover, through cuBLASLt's FP8 GEMM (docs/quantized.md, "Which path a call takes"). A call
// quantizes its activations to e4m3 (act_quant.hpp), then multiplies them by the packed weights
// as stored (scaled_gemm.hpp), with the weights' scales in the layout that GEMM reads:
//   - fp8_tensor: the per-layer scales expanded per row (row_scales), and for calls of up to
//     kBlockTokens tokens as 128 x 128 blocks (block_scales) with per-128-column activation
//     scales, where every group's rows are whole blocks: cuBLASLt's block-scaled GEMM is the
//     faster one there on the H200 (docs/performance.md);
//   - fp8_channel: the per-row scales as packed, and for calls of up to kBlockTokens tokens
//     the block-scaled GEMM with every weight block scale 1 (unit_blocks) into fp32, the rows'
//     scales applied after it (ActQuantizer::scale_rows), where hidden and the rows are whole
//     blocks: faster on the H200 there too;
//   - fp8_block: the blocks as packed, or copied with each row of blocks padded to a multiple
//     of 4 where ceil(hidden / 128) is not (row_scales).
// On sm_90, when asked for (MaterializerOptions::fp8_stream_gemm, off by default), fp8_tensor
// and fp8_channel calls of up to 64 tokens take fkv-jit's own FP8 stream GEMM instead
// (fp8_stream_gemm.hpp: activations per token and 128 columns as for the block-scaled GEMM, the row
// scales above), where hidden is a multiple of 128. The scale arrays are refilled from the packed
// scales after refresh_weights (fill_scales).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "act_quant.hpp"
#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/spec.hpp"
#include "fkv/weights.hpp"
#include "fp8_stream_gemm.hpp"
#include "scaled_gemm.hpp"

namespace fkv {

// One plan group's share of the packed weights: rows [offset, offset + width * layers), width
// rows per layer, its scales from `scale_offset` floats into the packed scales.
struct Fp8GemmGroup {
  std::int64_t offset = 0, width = 0, layers = 0, scale_offset = 0;
};

class Fp8GemmPath {
 public:
  static constexpr std::int64_t kBlockTokens = 64;

  // The path for `format` (an FP8 format) over `width` packed rows of `hidden` columns whose
  // packed scales are `w_scales` (device, weights.hpp's layouts per group), for up to
  // max_tokens tokens; its scale arrays filled on `stream`. Null when cuBLASLt has no FP8 GEMM
  // of these scales on this GPU (the caller then takes dequantized slices), or for fp8_block
  // with hidden not a multiple of 128. Shares cuBLASLt's `workspace` with the caller's GEMM.
  // stream_gemm: build the FP8 stream GEMM where this GPU and format allow it.
  static std::unique_ptr<Fp8GemmPath> make(WeightFormat format, DType act, std::int64_t hidden,
                                           std::int64_t width, std::vector<Fp8GemmGroup> groups,
                                           const float* w_scales, std::int64_t max_tokens,
                                           std::shared_ptr<DeviceBuffer> workspace, int device,
                                           CUstream stream, bool stream_gemm = false);

  // The kernels make() may build for `format` (none for fp8_block with hidden not a multiple of
  // 128): the activation quantizer, fp8_tensor's scale expansion and, hidden a multiple of 128,
  // its per-128-column quantizer (built when the plan's rows are whole blocks too). Not the
  // FP8 stream GEMM's (opt-in: MaterializerOptions::fp8_stream_gemm). What
  // precompile bakes for these weights (precompile.hpp, weight_kernels_for).
  static std::vector<KernelSource> sources(WeightFormat format, DType act, std::int64_t hidden);

  // Rows of the projection a call of `tokens` tokens writes: a multiple of 4 (cuBLASLt's
  // block-scaled GEMM takes no other), the padding rows written and never read.
  static std::int64_t rows(std::int64_t tokens) { return (tokens + 3) / 4 * 4; }

  // proj[:rows(T)] from x [T, hidden] (rows ld elements apart) and the packed weights `w`;
  // false (nothing launched) when cuBLASLt has no algorithm for this token count. Launch only.
  bool run(const void* w, const void* x, std::int64_t ld, std::int64_t T, void* proj,
           CUstream stream);
  // Whether calls of up to Fp8StreamGemm::kMaxTokens tokens take the FP8 stream GEMM.
  bool stream_gemm() const { return stream_ != nullptr; }
  // The scale arrays from the packed scales again (after refresh_weights), on `stream`.
  void fill_scales(CUstream stream) const;
  // Activation buffers for up to max_tokens tokens. The old ones go to `retired`: graphs
  // captured before keep them (and the GEMMs, with their workspace, stay).
  void reserve(std::int64_t max_tokens, std::vector<DeviceBuffer>& retired);

 private:
  Fp8GemmPath() = default;
  void size(std::int64_t max_tokens);
  std::size_t block_scale_bytes() const;
  const float* gemm_scales() const;
  bool channel_blocks() const { return format_ == WeightFormat::Fp8Channel && quant_blocks_; }

  WeightFormat format_ = WeightFormat::Fp8Tensor;
  DType act_ = DType::BF16;
  std::int64_t hidden_ = 0, width_ = 0;
  std::vector<Fp8GemmGroup> groups_;
  const float* w_scales_ = nullptr;
  std::shared_ptr<DeviceBuffer> workspace_;
  std::unique_ptr<ActQuantizer> quant_, quant_blocks_;
  std::unique_ptr<ScaledGemm> gemm_, gemm_blocks_;
  std::unique_ptr<Fp8StreamGemm> stream_;       // calls of up to 64 tokens, where it is built
  std::unique_ptr<ActQuantizer> stream_quant_;  // its quantizer where quant_blocks_ is not built
  DeviceBuffer xq_, xq_scales_, row_scales_, block_scales_;
  DeviceBuffer d32_;  // fp8_channel's block-scaled GEMM output, fp32 [rows(kBlockTokens), N]
};

}  // namespace fkv
