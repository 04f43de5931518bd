// projection_gemm (internal): the materializer's projection through cuBLASLt (cublaslt.hpp loads
// it with dlopen; the rest of the library needs only NVRTC):
//   proj[:T, 0:N] = hidden[:T] · W^T  over the dense packed weights W [N, hidden], and
//   proj[:T, c:c+n] = hidden[:T] · A^T  over a slice A [n, hidden] of dequantized rows.
// Matrix layouts and cuBLASLt's algorithm are made once per shape, so that a call only looks
// them up (no attribute is set per call); calls only enqueue work (graph capturable).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fkv/driver.hpp"
#include "fkv/spec.hpp"

namespace fkv {

// Throws ArgumentError unless the projection GEMM takes `act` (bf16, fp16 or fp32); needs no GPU.
void check_gemm_dtype(DType act);

class ProjectionGemm {
 public:
  // act: the activation dtype (bf16, fp16 or fp32); N = width output columns; a workspace of
  // workspace_bytes for cuBLASLt. Throws CudaError when cuBLASLt cannot be loaded.
  ProjectionGemm(DType act, std::int64_t hidden, std::int64_t width, std::size_t workspace_bytes);
  ~ProjectionGemm();
  // Its cuBLASLt workspace, for another GEMM whose calls are stream-ordered with this one's.
  std::shared_ptr<DeviceBuffer> workspace() const;
  ProjectionGemm(const ProjectionGemm&) = delete;
  ProjectionGemm& operator=(const ProjectionGemm&) = delete;

  // proj [T, width] (row-major) = x [T, hidden] (rows ld elements apart) · w^T, w [width, hidden].
  void dense(const void* w, const void* x, std::int64_t T, std::int64_t ld, void* proj,
             CUstream stream);
  // proj's columns [c, c + n) of its [T, width] rows, with `out` = proj + c: x · a^T,
  // a [n, hidden] (one dequantized slice).
  void slice(const void* a, std::int64_t n, const void* x, std::int64_t T, std::int64_t ld,
             void* out, CUstream stream);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace fkv
