// projection_gemm: the projection GEMMs in the activation dtype (src/projection_gemm.hpp).
#include "projection_gemm.hpp"

#include <string>

#include "cublaslt.hpp"
#include "fkv/errors.hpp"

namespace fkv {

void check_gemm_dtype(DType act) { lt_type(act); }

struct ProjectionGemm::State {
  DType act;
  std::int64_t hidden = 0, width = 0;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr;  // the dense packed weights, [hidden, N] column-major
  cublasLtMatmulPreference_t pref = nullptr;
  DeviceBuffer workspace;
  LtShapeCache dense_shapes;  // by T * 1'000'003 + stride
  LtShapeCache slice_shapes;  // by (T, stride, n)

  // The shape for T tokens of stride ld and n output rows (sliced: A is a dequantized slice).
  const LtShape& shape(LtShapeCache& shapes, std::int64_t key, std::int64_t T, std::int64_t ld,
                       std::int64_t n, bool sliced) {
    const cudaDataType_t t = lt_type(act);
    const LtShape& sh = shapes.get(key, lt, op, w, pref, [&](LtShape& s) {
      if (sliced) FKV_LT(cublasLtMatrixLayoutCreate, &s.a, t, hidden, n, hidden);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.b, t, hidden, T, ld);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.d, t, n, T, width);
    });
    if (!sh.found)
      throw CudaError(std::string("cuBLASLt found no algorithm for ") +
                          (sliced ? "a dequantized projection slice" : "the projection GEMM") +
                          " (T=" + std::to_string(T) + ", N=" + std::to_string(n) +
                          ", hidden=" + std::to_string(hidden) + ")",
                      "cublasLtMatmulAlgoGetHeuristic");
    return sh;
  }

  void matmul(const void* a, cublasLtMatrixLayout_t a_layout, const LtShape& sh, const void* x,
              void* out, CUstream stream) {
    const float alpha = 1.0f, beta = 0.0f;
    FKV_LT(cublasLtMatmul, lt, op, &alpha, a, a_layout, x, sh.b, &beta, out, sh.d, out, sh.d,
           &sh.algo, workspace.ptr(), workspace.size(), stream);
  }
};

ProjectionGemm::ProjectionGemm(DType act, std::int64_t hidden, std::int64_t width,
                               std::size_t workspace_bytes)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.act = act;
  s.hidden = hidden;
  s.width = width;
  const cudaDataType_t t = lt_type(act);
  Lt& L = Lt::get();
  try {
    FKV_LT(cublasLtCreate, &s.lt);
    FKV_LT(cublasLtMatmulDescCreate, &s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    // Column-major view: proj^T [N, T] = (W as [hidden, N])^T · (hidden^T as [hidden, T]).
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    FKV_LT(cublasLtMatmulDescSetAttribute, s.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    FKV_LT(cublasLtMatrixLayoutCreate, &s.w, t, hidden, width, hidden);
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

ProjectionGemm::~ProjectionGemm() {
  State& s = *s_;
  Lt& L = Lt::get();
  s.dense_shapes.clear();
  s.slice_shapes.clear();
  if (s.pref) L.cublasLtMatmulPreferenceDestroy(s.pref);
  if (s.w) L.cublasLtMatrixLayoutDestroy(s.w);
  if (s.op) L.cublasLtMatmulDescDestroy(s.op);
  L.cublasLtDestroy(s.lt);
}

void ProjectionGemm::dense(const void* w, const void* x, std::int64_t T, std::int64_t ld,
                           void* proj, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(s.dense_shapes, T * 1'000'003 + ld, T, ld, s.width, false);
  s.matmul(w, s.w, sh, x, proj, stream);
}

void ProjectionGemm::slice(const void* a, std::int64_t n, const void* x, std::int64_t T,
                           std::int64_t ld, void* out, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(s.slice_shapes, (T * 1'000'003 + ld) * 65'537 + n, T, ld, n, true);
  s.matmul(a, sh.a, sh, x, out, stream);
}

}  // namespace fkv
