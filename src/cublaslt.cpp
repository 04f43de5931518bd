// cublaslt: loading cuBLASLt, its status check and the shape cache (src/cublaslt.hpp).
#include "cublaslt.hpp"

#include <dlfcn.h>

#include <mutex>
#include <utility>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "nvrtc_loader.hpp"

namespace fkv {

Lt& Lt::get() {
  static Lt& lt = *new Lt;  // never destroyed: atexit handlers may still build materializers
  static std::string& error = *new std::string;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_cuda_library("cublasLt", &tried);
    if (h == nullptr) {
      error = "cannot load cuBLASLt (libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR) +
              ") for the materializer's projection GEMM (tried " + tried +
              "): install the CUDA Toolkit's cuBLAS libraries or the nvidia-cublas wheel, or "
              "add their directory to LD_LIBRARY_PATH";
      return;
    }
#define FKV_LT_LOAD(name)                                                          \
  if ((lt.name = reinterpret_cast<decltype(lt.name)>(dlsym(h, #name))) == nullptr) \
    error = "cuBLASLt has no entry point " #name;
    FKV_LT_FNS(FKV_LT_LOAD)
#undef FKV_LT_LOAD
    if (!error.empty()) return;
    const std::size_t major = lt.cublasLtGetVersion() / 10000;
    if (major != CUBLAS_VER_MAJOR) {
      error = "the cuBLASLt found (version " + std::to_string(lt.cublasLtGetVersion()) +
              ") is not of CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
              ", which fkv-jit was built against: install cuBLAS " +
              std::to_string(CUBLAS_VER_MAJOR) + ".x";
      return;
    }
    Dl_info info{};
    lt.path = dladdr(reinterpret_cast<void*>(lt.cublasLtCreate), &info) && info.dli_fname
                  ? info.dli_fname
                  : "libcublasLt.so";
  });
  if (!error.empty()) throw CudaError(error, "dlopen");
  return lt;
}

void Lt::check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* name = get().cublasLtGetStatusName(s);
  throw CudaError(std::string(call) + " failed: " + (name ? name : "?") + " (projection GEMM)",
                  call, static_cast<int>(s), name ? name : "");
}

std::string cublaslt_library() { return Lt::get().path; }

cudaDataType_t lt_type(DType d) {
  switch (d) {
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::FP16:
      return CUDA_R_16F;
    case DType::FP32:
      return CUDA_R_32F;
    default:
      break;
  }
  throw ArgumentError("the projection GEMM takes bf16, fp16 or fp32 activations, not " +
                      to_string(d));
}

void destroy_layouts(std::initializer_list<cublasLtMatrixLayout_t> layouts) {
  for (cublasLtMatrixLayout_t l : layouts)
    if (l) Lt::get().cublasLtMatrixLayoutDestroy(l);
}

const LtShape& LtShapeCache::get(std::int64_t key, cublasLtHandle_t lt, cublasLtMatmulDesc_t op,
                                 cublasLtMatrixLayout_t fixed_a, cublasLtMatmulPreference_t pref,
                                 const std::function<void(LtShape&)>& make) {
  if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  if (shapes_.size() >= 1024) clear();
  LtShape sh;
  try {
    make(sh);
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    // NOT_SUPPORTED: no algorithm for this combination on this GPU (as found == 0).
    const cublasStatus_t s = Lt::get().cublasLtMatmulAlgoGetHeuristic(
        lt, op, sh.a ? sh.a : fixed_a, sh.b, sh.d, sh.d, pref, 1, &r, &found);
    if (s != CUBLAS_STATUS_NOT_SUPPORTED) Lt::check(s, "cublasLtMatmulAlgoGetHeuristic");
    sh.found = s == CUBLAS_STATUS_SUCCESS && found > 0;
    sh.algo = r.algo;
  } catch (...) {
    destroy_layouts({sh.a, sh.b, sh.d});
    throw;
  }
  if (!sh.found) {
    destroy_layouts({sh.a, sh.b, sh.d});
    sh.a = sh.b = sh.d = nullptr;
  }
  return shapes_.emplace(key, sh).first->second;
}

LtMatmul::LtMatmul(cudaDataType_t w_type, std::int64_t hidden, std::int64_t width,
                   std::shared_ptr<DeviceBuffer> workspace, bool int32)
    : workspace_(std::move(workspace)), int32_(int32) {
  try {
    FKV_LT(cublasLtCreate, &lt_);
    FKV_LT(cublasLtMatmulDescCreate, &op_, int32 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
           int32 ? CUDA_R_32I : CUDA_R_32F);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    FKV_LT(cublasLtMatrixLayoutCreate, &w_, w_type, hidden, width, hidden);
    FKV_LT(cublasLtMatmulPreferenceCreate, &pref_);
    const std::uint64_t ws = workspace_->size();
    FKV_LT(cublasLtMatmulPreferenceSetAttribute, pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           &ws, sizeof ws);
  } catch (...) {
    destroy();
    throw;
  }
}

LtMatmul::~LtMatmul() { destroy(); }

void LtMatmul::destroy() {
  Lt& L = Lt::get();
  if (pref_) L.cublasLtMatmulPreferenceDestroy(pref_);
  if (w_) L.cublasLtMatrixLayoutDestroy(w_);
  if (op_) L.cublasLtMatmulDescDestroy(op_);
  if (lt_) L.cublasLtDestroy(lt_);
  pref_ = nullptr;
  w_ = nullptr;
  op_ = nullptr;
  lt_ = nullptr;
}

void LtMatmul::set(cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t size) {
  FKV_LT(cublasLtMatmulDescSetAttribute, op_, attr, value, size);
}

const LtShape& LtMatmul::shape(LtShapeCache& cache, std::int64_t key,
                               const std::function<void(LtShape&)>& make) {
  return cache.get(key, lt_, op_, w_, pref_, make);
}

void LtMatmul::run(const void* a, cublasLtMatrixLayout_t a_layout, const LtShape& sh, const void* x,
                   void* out, CUstream stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  const std::int32_t alpha_i = 1, beta_i = 0;
  FKV_LT(cublasLtMatmul, lt_, op_, int32_ ? static_cast<const void*>(&alpha_i) : &alpha, a,
         a_layout ? a_layout : w_, x, sh.b, int32_ ? static_cast<const void*>(&beta_i) : &beta, out,
         sh.d, out, sh.d, &sh.algo, workspace_->ptr(), workspace_->size(), stream);
}

void LtShapeCache::clear() {
  for (auto& [key, sh] : shapes_) destroy_layouts({sh.a, sh.b, sh.d});
  shapes_.clear();
}

}  // namespace fkv
