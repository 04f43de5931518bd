// scaled_gemm: cuBLASLt's FP8 GEMM with scale vectors or blocks (src/scaled_gemm.hpp).
#include "scaled_gemm.hpp"

#include <string>

#include "cublaslt.hpp"
#include "fkv/errors.hpp"

namespace fkv {

struct ScaledGemm::State {
  std::int64_t hidden = 0, width = 0;
  cudaDataType_t out = CUDA_R_16BF;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr;  // wq, [hidden, N] column-major (e4m3)
  cublasLtMatmulPreference_t pref = nullptr;
  DeviceBuffer workspace;
  LtShapeCache shapes;  // by n

  const LtShape& shape(std::int64_t n) {
    return shapes.get(n, lt, op, w, pref, [&](LtShape& s) {
      FKV_LT(cublasLtMatrixLayoutCreate, &s.b, CUDA_R_8F_E4M3, hidden, n, hidden);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.d, out, width, n, width);
    });
  }
};

ScaledGemm::ScaledGemm(DType out, std::int64_t hidden, std::int64_t width, GemmScales scales,
                       const float* w_scales, const float* x_scales, std::size_t workspace_bytes)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.hidden = hidden;
  s.width = width;
  if (out != DType::BF16 && out != DType::FP16)
    throw ArgumentError("the FP8 GEMM writes bf16 or fp16, not " + to_string(out));
  s.out = lt_type(out);
  Lt& L = Lt::get();
  try {
    FKV_LT(cublasLtCreate, &s.lt);
    FKV_LT(cublasLtMatmulDescCreate, &s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    // Column-major view, as the dense projection: proj^T [N, n] = (wq as [hidden, N])^T · xq^T.
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    const cublasLtMatmulMatrixScale_t am = scales == GemmScales::RowToken
                                               ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                               : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const cublasLtMatmulMatrixScale_t bm = scales == GemmScales::RowToken
                                               ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                               : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am);
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm);
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales,
           sizeof w_scales);
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales,
           sizeof x_scales);
    FKV_LT(cublasLtMatrixLayoutCreate, &s.w, CUDA_R_8F_E4M3, hidden, width, hidden);
    FKV_LT(cublasLtMatmulPreferenceCreate, &s.pref);
    const std::uint64_t ws = workspace_bytes;
    FKV_LT(cublasLtMatmulPreferenceSetAttribute, s.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           &ws, sizeof ws);
    s.workspace = DeviceBuffer(workspace_bytes);
  } catch (...) {
    if (s.pref) L.cublasLtMatmulPreferenceDestroy(s.pref);
    if (s.w) L.cublasLtMatrixLayoutDestroy(s.w);
    if (s.op) L.cublasLtMatmulDescDestroy(s.op);
    if (s.lt) L.cublasLtDestroy(s.lt);
    throw;
  }
}

ScaledGemm::~ScaledGemm() {
  State& s = *s_;
  Lt& L = Lt::get();
  s.shapes.clear();
  if (s.pref) L.cublasLtMatmulPreferenceDestroy(s.pref);
  if (s.w) L.cublasLtMatrixLayoutDestroy(s.w);
  if (s.op) L.cublasLtMatmulDescDestroy(s.op);
  L.cublasLtDestroy(s.lt);
}

bool ScaledGemm::supports(std::int64_t n) { return n > 0 && s_->shape(n).found; }

void ScaledGemm::run(const void* wq, const void* xq, std::int64_t n, void* proj, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(n);
  if (!sh.found)
    throw CudaError("cuBLASLt found no FP8 GEMM for " + std::to_string(n) + " tokens (N=" +
                        std::to_string(s.width) + ", hidden=" + std::to_string(s.hidden) + ")",
                    "cublasLtMatmulAlgoGetHeuristic");
  const float alpha = 1.0f, beta = 0.0f;
  FKV_LT(cublasLtMatmul, s.lt, s.op, &alpha, wq, s.w, xq, sh.b, &beta, proj, sh.d, proj, sh.d,
         &sh.algo, s.workspace.ptr(), s.workspace.size(), stream);
}

}  // namespace fkv
