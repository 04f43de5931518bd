// projection_gemm: the projection GEMMs in the activation dtype (src/projection_gemm.hpp).
#include "projection_gemm.hpp"

#include <string>

#include "cublaslt.hpp"
#include "fkv/errors.hpp"

namespace fkv {

void check_gemm_dtype(DType act) { lt_type(act); }

struct ProjectionGemm::State {
  State(DType a, std::int64_t h, std::int64_t w, std::size_t workspace_bytes)
      : act(a),
        hidden(h),
        width(w),
        mm(lt_type(a), h, w, std::make_shared<DeviceBuffer>(workspace_bytes)) {}

  DType act;
  std::int64_t hidden, width;
  LtMatmul mm;                // the dense packed weights' layout, [hidden, N] column-major
  LtShapeCache dense_shapes;  // by T * 1'000'003 + stride
  LtShapeCache slice_shapes;  // by (T, stride, n)

  // The shape for T tokens of stride ld and n output rows (sliced: A is a dequantized slice).
  const LtShape& shape(LtShapeCache& shapes, std::int64_t key, std::int64_t T, std::int64_t ld,
                       std::int64_t n, bool sliced) {
    const cudaDataType_t t = lt_type(act);
    const LtShape& sh = mm.shape(shapes, key, [&](LtShape& s) {
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
};

ProjectionGemm::ProjectionGemm(DType act, std::int64_t hidden, std::int64_t width,
                               std::size_t workspace_bytes)
    : s_(std::make_unique<State>(act, hidden, width, workspace_bytes)) {}

ProjectionGemm::~ProjectionGemm() = default;

std::shared_ptr<DeviceBuffer> ProjectionGemm::workspace() const { return s_->mm.workspace(); }

void ProjectionGemm::dense(const void* w, const void* x, std::int64_t T, std::int64_t ld,
                           void* proj, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(s.dense_shapes, T * 1'000'003 + ld, T, ld, s.width, false);
  s.mm.run(w, nullptr, sh, x, proj, stream);
}

void ProjectionGemm::slice(const void* a, std::int64_t n, const void* x, std::int64_t T,
                           std::int64_t ld, void* out, CUstream stream) {
  State& s = *s_;
  const LtShape& sh = s.shape(s.slice_shapes, (T * 1'000'003 + ld) * 65'537 + n, T, ld, n, true);
  s.mm.run(a, sh.a, sh, x, out, stream);
}

}  // namespace fkv
