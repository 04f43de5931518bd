// cublaslt (internal): cuBLASLt, loaded with dlopen (the rest of the library needs only
// NVRTC), and what its GEMM users share: the status check, the element type of a DType, and a
// cache of one matmul's shapes (matrix layouts and the algorithm chosen for them), made once per
// shape so that a call only looks them up. projection_gemm.hpp (activation-dtype GEMMs) and
// scaled_gemm.hpp (FP8 GEMMs with scales) are built on it.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>

#include "fkv/driver.hpp"
#include "fkv/spec.hpp"

namespace fkv {

struct Lt {
// clang-format off
#define FKV_LT_FNS(X)                     \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)                       \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetVersion)
// clang-format on
#define FKV_LT_MEMBER(name) decltype(&::name) name = nullptr;
  FKV_LT_FNS(FKV_LT_MEMBER)
#undef FKV_LT_MEMBER

  std::string path;  // the file it was loaded from

  // Found as NVRTC is (nvrtc_loader.hpp's open_cuda_library: the pip nvidia-* folders given to
  // set_cuda_library_dirs, the dynamic linker, /usr/local/cuda/lib64), and only with the major
  // version fkv-jit was built against (cuBLASLt's structs and enums are per major). Throws
  // CudaError when it cannot be loaded.
  static Lt& get();
  // Throws CudaError naming `call` and the status unless s is CUBLAS_STATUS_SUCCESS.
  static void check(cublasStatus_t s, const char* call);
};
#define FKV_LT(fn, ...) ::fkv::Lt::check(::fkv::Lt::get().fn(__VA_ARGS__), #fn)

// CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F; ArgumentError for any other dtype.
cudaDataType_t lt_type(DType d);

// The matrix layouts of one GEMM shape and the algorithm cuBLASLt chose for them.
struct LtShape {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: cuBLASLt has no algorithm for it (layouts destroyed)
};

// Shapes by key, made on first use and destroyed with the cache. Engines use a few sizes; past
// 1024 shapes the cache starts over.
class LtShapeCache {
 public:
  LtShapeCache() = default;
  ~LtShapeCache() { clear(); }
  LtShapeCache(const LtShapeCache&) = delete;
  LtShapeCache& operator=(const LtShapeCache&) = delete;

  // The shape for `key`; `make` fills the layouts of a new one (a = null: the caller's fixed
  // A layout, `fixed_a`), then cuBLASLt's heuristic picks the algorithm for `op`.
  const LtShape& get(std::int64_t key, cublasLtHandle_t lt, cublasLtMatmulDesc_t op,
                     cublasLtMatrixLayout_t fixed_a, cublasLtMatmulPreference_t pref,
                     const std::function<void(LtShape&)>& make);
  void clear();

 private:
  std::unordered_map<std::int64_t, LtShape> shapes_;
};

void destroy_layouts(std::initializer_list<cublasLtMatrixLayout_t> layouts);

// The cuBLASLt objects of one projection GEMM, made and destroyed together: a handle; the
// operation, fp32 compute and scales, in the column-major view proj^T [N, T] = (W as
// [hidden, N])^T · (x^T as [hidden, T]) (TRANSA = T, TRANSB = N); the weights' layout
// [hidden, N] of `w_type`; the preference (the workspace's size) and the workspace, which GEMMs
// whose calls are stream-ordered with each other (one materializer's) may share. `int32`: int32
// compute and scales instead (int8 inputs, int32 output: int8_gemm_path.hpp). A constructor
// that throws (CudaError: cuBLASLt missing or failing) leaves nothing allocated.
class LtMatmul {
 public:
  LtMatmul(cudaDataType_t w_type, std::int64_t hidden, std::int64_t width,
           std::shared_ptr<DeviceBuffer> workspace, bool int32 = false);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // One more attribute of the operation (scale modes and pointers), before the first shape.
  void set(cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t size);
  // The shape for `key` in `cache` (LtShapeCache::get with this operation and weights).
  const LtShape& shape(LtShapeCache& cache, std::int64_t key,
                       const std::function<void(LtShape&)>& make);
  const std::shared_ptr<DeviceBuffer>& workspace() const { return workspace_; }
  // out = a · x with sh's layouts and algorithm; a_layout null: the weights' layout.
  void run(const void* a, cublasLtMatrixLayout_t a_layout, const LtShape& sh, const void* x,
           void* out, CUstream stream) const;

 private:
  void destroy();
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t w_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  std::shared_ptr<DeviceBuffer> workspace_;
  bool int32_ = false;  // alpha and beta are int32
};

}  // namespace fkv
