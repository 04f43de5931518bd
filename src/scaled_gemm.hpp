// scaled_gemm (internal): the materializer's projection over FP8 weights as stored, through
// cuBLASLt's FP8 GEMM (sm_90: per-row and per-token scale vectors, or 128 x 128 weight blocks
// with 128-column activation groups):
//   proj[:n, 0:N] = (xq · s_x) (wq · s_w)^T   rounded once to the activation dtype,
// xq [n, hidden] e4m3 (act_quant.hpp), wq [N, hidden] e4m3 (the packed weights), fp32
// accumulation. The scale pointers are fixed at construction (the materializer's buffers);
// layouts and the algorithm are made once per n. Calls only enqueue work (graph capturable).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fkv/driver.hpp"
#include "fkv/spec.hpp"

namespace fkv {

enum class GemmScales {
  RowToken,    // w_scales [N] per row, x_scales [n] per token (OUTER_VEC)
  BlockGroup,  // w_scales [N / 128, KB4] (KB = ceil(hidden / 128) blocks per row, padded to a
               // multiple of 4), x_scales [KB, n] token fastest (BLK128x128 and VEC128)
};

class ScaledGemm {
 public:
  // out: the activation dtype (bf16 or fp16), or fp32; N = width rows of wq; cuBLASLt's workspace,
  // shared with the materializer's other GEMM (their calls are stream-ordered). Throws
  // CudaError when cuBLASLt cannot be loaded.
  ScaledGemm(DType out, std::int64_t hidden, std::int64_t width, GemmScales scales,
             const float* w_scales, const float* x_scales, std::shared_ptr<DeviceBuffer> workspace);
  ~ScaledGemm();
  ScaledGemm(const ScaledGemm&) = delete;
  ScaledGemm& operator=(const ScaledGemm&) = delete;

  // Whether cuBLASLt has an FP8 GEMM of these scales for n tokens on this GPU (asked once per
  // n; none before sm_90, nor for block scales unless n is a multiple of 4).
  bool supports(std::int64_t n);
  // proj [n, width] (row-major) from wq and xq as above.
  void run(const void* wq, const void* xq, std::int64_t n, void* proj, CUstream stream);
  // The activation scales of later calls (a grown buffer). Graphs captured before keep the
  // pointer they captured, and the workspace, which this GEMM keeps.
  void set_x_scales(const float* x_scales);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace fkv
