// scaled_gemm: cuBLASLt's FP8 GEMM with scale vectors or blocks (src/scaled_gemm.hpp).
#include "scaled_gemm.hpp"

#include <string>
#include <utility>

#include "cublaslt.hpp"
#include "fkv/errors.hpp"

namespace fkv {
namespace {

cudaDataType_t out_type(DType out) {
  if (out != DType::BF16 && out != DType::FP16 && out != DType::FP32)
    throw ArgumentError("the FP8 GEMM writes bf16, fp16 or fp32, not " + to_string(out));
  return lt_type(out);
}

}  // namespace

struct ScaledGemm::State {
  State(DType o, std::int64_t h, std::int64_t w, std::shared_ptr<DeviceBuffer> workspace)
      : out(out_type(o)), hidden(h), width(w), mm(CUDA_R_8F_E4M3, h, w, std::move(workspace)) {}

  cudaDataType_t out;
  std::int64_t hidden, width;
  LtMatmul mm;          // wq's layout, [hidden, N] column-major (e4m3)
  LtShapeCache shapes;  // by n

  const LtShape& shape(std::int64_t n) {
    return mm.shape(shapes, n, [&](LtShape& s) {
      FKV_LT(cublasLtMatrixLayoutCreate, &s.b, CUDA_R_8F_E4M3, hidden, n, hidden);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.d, out, width, n, width);
    });
  }
};

ScaledGemm::ScaledGemm(DType out, std::int64_t hidden, std::int64_t width, GemmScales scales,
                       const float* w_scales, const float* x_scales,
                       std::shared_ptr<DeviceBuffer> workspace)
    : s_(std::make_unique<State>(out, hidden, width, std::move(workspace))) {
  LtMatmul& mm = s_->mm;
  const bool rows = scales == GemmScales::RowToken;
  const cublasLtMatmulMatrixScale_t am = rows ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                              : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const cublasLtMatmulMatrixScale_t bm =
      rows ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  mm.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am);
  mm.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm);
  mm.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof w_scales);
  mm.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof x_scales);
}

ScaledGemm::~ScaledGemm() = default;

void ScaledGemm::set_x_scales(const float* x_scales) {
  s_->mm.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof x_scales);
}

bool ScaledGemm::supports(std::int64_t n) { return n > 0 && s_->shape(n).found; }

void ScaledGemm::run(const void* wq, const void* xq, std::int64_t n, void* proj, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(n);
  if (!sh.found)
    throw CudaError("cuBLASLt found no FP8 GEMM for " + std::to_string(n) + " tokens (N=" +
                        std::to_string(s.width) + ", hidden=" + std::to_string(s.hidden) + ")",
                    "cublasLtMatmulAlgoGetHeuristic");
  s.mm.run(wq, nullptr, sh, xq, proj, stream);
}

}  // namespace fkv
