// projection_gemm: cuBLASLt loading and the projection GEMMs (src/projection_gemm.hpp).
#include "projection_gemm.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "nvrtc_loader.hpp"

namespace fkv {
namespace {

// ---- cuBLASLt, loaded with dlopen (the rest of the library needs only libnvrtc) -------------

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
  // version fkv-jit was built against (cuBLASLt's structs and enums are per major).
  static Lt& get() {
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

  static void check(cublasStatus_t s, const char* call) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    const char* name = get().cublasLtGetStatusName(s);
    throw CudaError(std::string(call) + " failed: " + (name ? name : "?") + " (projection GEMM)",
                    call, static_cast<int>(s), name ? name : "");
  }
};
#define FKV_LT(fn, ...) Lt::check(Lt::get().fn(__VA_ARGS__), #fn)

cudaDataType_t cuda_type(DType d) {
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

// Destroys the layouts that were created (null entries are skipped).
void destroy_layouts(std::initializer_list<cublasLtMatrixLayout_t> layouts) {
  for (cublasLtMatrixLayout_t l : layouts)
    if (l) Lt::get().cublasLtMatrixLayoutDestroy(l);
}

}  // namespace

std::string cublaslt_library() { return Lt::get().path; }

void check_gemm_dtype(DType act) { cuda_type(act); }

struct ProjectionGemm::State {
  DType act;
  std::int64_t hidden = 0, width = 0;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr;  // the dense packed weights, [hidden, N] column-major
  cublasLtMatmulPreference_t pref = nullptr;
  DeviceBuffer workspace;
  // One (T, hidden stride[, slice rows]) shape: the layouts of A (slices only), x and proj, and
  // the algorithm cuBLASLt chose for them.
  struct Shape {
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  std::unordered_map<std::int64_t, Shape> dense_shapes;  // by T * 1'000'003 + stride
  std::unordered_map<std::int64_t, Shape> slice_shapes;  // by (T, stride, n)

  static void clear(std::unordered_map<std::int64_t, Shape>& shapes) {
    for (auto& [key, sh] : shapes) destroy_layouts({sh.a, sh.b, sh.d});
    shapes.clear();
  }

  // The shape for T tokens of stride ld and n output rows (a = null: the dense weights).
  const Shape& shape(std::unordered_map<std::int64_t, Shape>& shapes, std::int64_t key,
                     std::int64_t T, std::int64_t ld, std::int64_t n, bool sliced) {
    if (auto it = shapes.find(key); it != shapes.end()) return it->second;
    if (shapes.size() >= 1024) clear(shapes);  // engines use a few sizes; bound the rest
    const cudaDataType_t t = cuda_type(act);
    Shape sh;
    try {
      if (sliced) FKV_LT(cublasLtMatrixLayoutCreate, &sh.a, t, hidden, n, hidden);
      FKV_LT(cublasLtMatrixLayoutCreate, &sh.b, t, hidden, T, ld);
      FKV_LT(cublasLtMatrixLayoutCreate, &sh.d, t, n, T, width);
      cublasLtMatmulHeuristicResult_t r{};
      int found = 0;
      FKV_LT(cublasLtMatmulAlgoGetHeuristic, lt, op, sliced ? sh.a : w, sh.b, sh.d, sh.d, pref, 1,
             &r, &found);
      if (found == 0)
        throw CudaError(std::string("cuBLASLt found no algorithm for ") +
                            (sliced ? "a dequantized projection slice" : "the projection GEMM") +
                            " (T=" + std::to_string(T) + ", N=" + std::to_string(n) +
                            ", hidden=" + std::to_string(hidden) + ")",
                        "cublasLtMatmulAlgoGetHeuristic");
      sh.algo = r.algo;
    } catch (...) {
      destroy_layouts({sh.a, sh.b, sh.d});
      throw;
    }
    return shapes.emplace(key, sh).first->second;
  }

  void matmul(const void* a, cublasLtMatrixLayout_t a_layout, const Shape& sh, const void* x,
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
  const cudaDataType_t t = cuda_type(act);
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
  State::clear(s.dense_shapes);
  State::clear(s.slice_shapes);
  if (s.pref) L.cublasLtMatmulPreferenceDestroy(s.pref);
  if (s.w) L.cublasLtMatrixLayoutDestroy(s.w);
  if (s.op) L.cublasLtMatmulDescDestroy(s.op);
  L.cublasLtDestroy(s.lt);
}

void ProjectionGemm::dense(const void* w, const void* x, std::int64_t T, std::int64_t ld,
                           void* proj, CUstream stream) {
  State& s = *s_;
  const State::Shape& sh = s.shape(s.dense_shapes, T * 1'000'003 + ld, T, ld, s.width, false);
  s.matmul(w, s.w, sh, x, proj, stream);
}

void ProjectionGemm::slice(const void* a, std::int64_t n, const void* x, std::int64_t T,
                           std::int64_t ld, void* out, CUstream stream) {
  State& s = *s_;
  const State::Shape& sh =
      s.shape(s.slice_shapes, (T * 1'000'003 + ld) * 65'537 + n, T, ld, n, true);
  s.matmul(a, sh.a, sh, x, out, stream);
}

}  // namespace fkv
