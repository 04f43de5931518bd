// int8_gemm_path (internal): FusedKVMaterializer's projection over INT8 (W8A16) weights above
// the decode crossover, through cuBLASLt's int8 GEMM (docs/quantized.md, "Which path a call
// takes"). A call splits its bf16/fp16 activations into two int8 parts per token
// (templates/int8_split.cu: x = s * (hi + lo / 254), within 2^-16 of the token's largest
// value), multiplies both by the packed weights as stored in one GEMM of 2n tokens with int32
// sums (exact), then combines the two sums with the token and row scales into the projection,
// rounded once to the activation dtype. Calls of more tokens than the path was sized for
// (MaterializerOptions::int8_gemm_tokens) take dequantized slices.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cublaslt.hpp"
#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"

namespace fkv {

class Int8GemmPath {
 public:
  // The path over `width` packed rows of `hidden` columns whose per-row scales are `w_scales`
  // (device, [width] fp32), for calls of up to `max_tokens` tokens. Null when cuBLASLt has no
  // int8 GEMM for these shapes on this GPU or width is not a multiple of 4 (the caller then
  // takes dequantized slices). Shares cuBLASLt's `workspace` with the caller's GEMM.
  static std::unique_ptr<Int8GemmPath> make(DType act, std::int64_t hidden, std::int64_t width,
                                            const float* w_scales, std::int64_t max_tokens,
                                            std::shared_ptr<DeviceBuffer> workspace, int device);
  // Its kernels: the activation split and the combine. What precompile bakes for INT8 weights.
  static std::vector<KernelSource> sources(DType act, std::int64_t hidden);
  // Tokens of a call's GEMM: a multiple of 4 (int8 GEMMs take no other), the padding zeros.
  static std::int64_t rows(std::int64_t tokens) { return (tokens + 3) / 4 * 4; }

  std::int64_t max_tokens() const { return max_tokens_; }
  // proj[:T] from x [T, hidden] (rows ld elements apart) and the packed weights `w`; false
  // (nothing launched) above max_tokens() or when cuBLASLt has no algorithm for this count.
  // Launch only (graph capturable).
  bool run(const void* w, const void* x, std::int64_t ld, std::int64_t T, void* proj,
           CUstream stream);
  // Buffers for up to max_tokens tokens, if that is more than now. The old ones go to
  // `retired`: graphs captured before keep them.
  void reserve(std::int64_t max_tokens, std::vector<DeviceBuffer>& retired);

 private:
  Int8GemmPath() = default;
  const LtShape& shape(std::int64_t n);

  std::int64_t hidden_ = 0, width_ = 0, max_tokens_ = 0;
  const float* w_scales_ = nullptr;
  std::unique_ptr<LtMatmul> mm_;  // the weights as [hidden, width] int8
  LtShapeCache shapes_;           // by GEMM token count (2n)
  LoadedFunction split_, combine_;
  DeviceBuffer xq_, x_scales_, acc_;
};

}  // namespace fkv
