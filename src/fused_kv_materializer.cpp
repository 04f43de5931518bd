// fused_kv_materializer: projection GEMM (cuBLASLt) + fused kernels for one draft model.
#include "fkv/fused_kv_materializer.hpp"

#include <cublasLt.h>
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dequant.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/materialize.hpp"
#include "fkv/rope.hpp"
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

[[noreturn]] void fail(const std::string& what) {
  throw ArgumentError("FusedKVMaterializer: " + what);
}

}  // namespace

struct FusedKVMaterializer::Impl {
  struct Group {
    const LayerGroup* plan_group = nullptr;
    std::vector<std::size_t> members;  // indices into layers_ (attention-layer order)
    std::int64_t offset = 0;           // first proj column
    std::int64_t width = 0;            // 2*H*D
    DeviceBuffer k_norm;               // fp32 [L_g, D], folded
    DeviceBuffer kv_bias;              // fp32 [L_g, 2*H*D], when the weights have a bias
    bool adjacent = true;              // members are consecutive attention layers
    std::vector<float> eps;
    DeviceBuffer cos_sin;
    std::int64_t cos_sin_rows = 0;
    const void* cos_sin_external = nullptr;  // set_cos_sin(): the caller's table, not owned
    std::int64_t cos_sin_stride = 0;         // elements; 0 = R
    const LoadedKernel* stacked = nullptr;
    const LoadedKernel* pool = nullptr;
    // Per-call scratch for pool launches, sized here so that a call allocates nothing.
    std::vector<void*> k_ptrs, v_ptrs;
    std::vector<float> k_scales, v_scales;
    std::vector<const void*> slot_maps;
  };

  MaterializerOptions opt;
  Plan plan;
  std::vector<int> layers;
  std::vector<Group> groups;
  std::int64_t hidden = 0;
  std::int64_t width = 0;  // N
  DeviceBuffer w_packed;   // [N, hidden], in act or one byte per element (quantized)
  WeightFormat format = WeightFormat::Dense;
  DeviceBuffer w_scales;  // quantized: each group's scales in plan order (scale_offset below)
  std::vector<std::int64_t> scale_offset;  // per group: first float of its scales in w_scales
  // The cuBLASLt path of quantized weights: up to dq_rows rows at a time are dequantized into
  // dq_scratch ([dq_rows, hidden] in act), then multiplied.
  std::unique_ptr<Dequantizer> dequant;
  DeviceBuffer dq_scratch;
  std::int64_t dq_rows = 0;
  DeviceBuffer proj;                  // [max_tokens, N]
  std::vector<DeviceBuffer> retired;  // earlier projection buffers (reserve_tokens)
  DeviceBuffer workspace;
  DeviceBuffer error_word;
  // The decode-size path (decode.hpp) for calls of 1..crossover tokens; null when unused.
  std::unique_ptr<DecodeKV> decode;
  std::int64_t crossover = 0;

  // The layouts of hidden and proj for one (T, hidden stride), with cuBLASLt's algorithm for
  // them: made once per shape, so that a call only looks them up (no attribute is set per call).
  struct GemmShape {
    cublasLtMatrixLayout_t b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::unordered_map<std::int64_t, GemmShape> shapes;  // by T * 1'000'003 + stride

  ~Impl() {
    if (lt == nullptr) return;
    Lt& L = Lt::get();
    clear_shapes();
    clear_slice_shapes();
    if (pref) L.cublasLtMatmulPreferenceDestroy(pref);
    if (a) L.cublasLtMatrixLayoutDestroy(a);
    if (op) L.cublasLtMatmulDescDestroy(op);
    L.cublasLtDestroy(lt);
  }

  void clear_shapes() {
    Lt& L = Lt::get();
    for (auto& [key, s] : shapes) {
      if (s.d) L.cublasLtMatrixLayoutDestroy(s.d);
      if (s.b) L.cublasLtMatrixLayoutDestroy(s.b);
    }
    shapes.clear();
  }

  const GemmShape& gemm_shape(std::int64_t T, std::int64_t ld) {
    const std::int64_t key = T * 1'000'003 + ld;
    if (auto it = shapes.find(key); it != shapes.end()) return it->second;
    if (shapes.size() >= 1024) clear_shapes();  // engines use a few sizes; bound the rest
    const cudaDataType_t t = cuda_type(opt.act);
    GemmShape s;
    auto destroy = [&] {
      if (s.d) Lt::get().cublasLtMatrixLayoutDestroy(s.d);
      if (s.b) Lt::get().cublasLtMatrixLayoutDestroy(s.b);
    };
    try {
      FKV_LT(cublasLtMatrixLayoutCreate, &s.b, t, hidden, T, ld);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.d, t, width, T, width);
      cublasLtMatmulHeuristicResult_t r{};
      int found = 0;
      FKV_LT(cublasLtMatmulAlgoGetHeuristic, lt, op, a, s.b, s.d, s.d, pref, 1, &r, &found);
      if (found == 0)
        throw CudaError(
            "cuBLASLt found no algorithm for the projection GEMM (T=" + std::to_string(T) +
                ", N=" + std::to_string(width) + ", hidden=" + std::to_string(hidden) + ")",
            "cublasLtMatmulAlgoGetHeuristic");
      s.algo = r.algo;
    } catch (...) {
      destroy();
      throw;
    }
    return shapes.emplace(key, s).first->second;
  }

  void setup_gemm() {
    const cudaDataType_t t = cuda_type(opt.act);
    FKV_LT(cublasLtCreate, &lt);
    FKV_LT(cublasLtMatmulDescCreate, &op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    // Column-major view: proj^T [N, T] = (W as [hidden, N])^T · (hidden^T as [hidden, T]).
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FKV_LT(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    FKV_LT(cublasLtMatmulDescSetAttribute, op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    FKV_LT(cublasLtMatrixLayoutCreate, &a, t, hidden, width, hidden);
    FKV_LT(cublasLtMatmulPreferenceCreate, &pref);
    const std::uint64_t ws = opt.gemm_workspace_bytes;
    FKV_LT(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           &ws, sizeof ws);
    workspace = DeviceBuffer(opt.gemm_workspace_bytes);
  }

  // Quantized weights: for each slice of at most dq_rows rows of a group, the layout of the
  // dequantized slice ([hidden, n]), of proj's columns for it, and the algorithm.
  struct SliceShape {
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  std::unordered_map<std::int64_t, SliceShape> slice_shapes;  // by (T, ld, n)

  void clear_slice_shapes() {
    Lt& L = Lt::get();
    for (auto& [key, s] : slice_shapes)
      for (cublasLtMatrixLayout_t l : {s.a, s.b, s.d})
        if (l) L.cublasLtMatrixLayoutDestroy(l);
    slice_shapes.clear();
  }

  const SliceShape& slice_shape(std::int64_t T, std::int64_t ld, std::int64_t n) {
    const std::int64_t key = (T * 1'000'003 + ld) * 65'537 + n;
    if (auto it = slice_shapes.find(key); it != slice_shapes.end()) return it->second;
    if (slice_shapes.size() >= 1024) clear_slice_shapes();
    const cudaDataType_t t = cuda_type(opt.act);
    SliceShape s;
    try {
      FKV_LT(cublasLtMatrixLayoutCreate, &s.a, t, hidden, n, hidden);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.b, t, hidden, T, ld);
      FKV_LT(cublasLtMatrixLayoutCreate, &s.d, t, n, T, width);
      cublasLtMatmulHeuristicResult_t r{};
      int found = 0;
      FKV_LT(cublasLtMatmulAlgoGetHeuristic, lt, op, s.a, s.b, s.d, s.d, pref, 1, &r, &found);
      if (found == 0)
        throw CudaError("cuBLASLt found no algorithm for a dequantized projection slice (T=" +
                            std::to_string(T) + ", n=" + std::to_string(n) + ")",
                        "cublasLtMatmulAlgoGetHeuristic");
      s.algo = r.algo;
    } catch (...) {
      for (cublasLtMatrixLayout_t l : {s.a, s.b, s.d})
        if (l) Lt::get().cublasLtMatrixLayoutDestroy(l);
      throw;
    }
    return slice_shapes.emplace(key, s).first->second;
  }

  // proj[:T] = hidden · dequant(W_packed)^T, slice by slice: the dequantized rows live only in
  // dq_scratch, reused for each slice in stream order.
  void project_quantized(const MaterializerInput& in, CUstream stream) {
    const std::int64_t T = in.num_tokens;
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    const int es = dtype_size(opt.act);
    const float alpha = 1.0f, beta = 0.0f;
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const Group& g = groups[gi];
      const std::int64_t rows = g.width * static_cast<std::int64_t>(g.members.size());
      const char* w = static_cast<const char*>(w_packed.ptr()) + g.offset * hidden;
      const float* scales = static_cast<const float*>(w_scales.ptr()) + scale_offset[gi];
      for (std::int64_t r0 = 0; r0 < rows; r0 += dq_rows) {
        const std::int64_t n = std::min(dq_rows, rows - r0);
        dequant->run(w, scales, dq_scratch.ptr(), r0, n, g.width, stream);
        const SliceShape& s = slice_shape(T, ld, n);
        void* d = static_cast<char*>(proj.ptr()) + (g.offset + r0) * es;
        FKV_LT(cublasLtMatmul, lt, op, &alpha, dq_scratch.ptr(), s.a, in.hidden, s.b, &beta, d, s.d,
               d, s.d, &s.algo, workspace.ptr(), workspace.size(), stream);
      }
    }
  }

  // proj[:T] = hidden · W_packed^T on `stream`.
  void project(const MaterializerInput& in, CUstream stream) {
    if (is_quantized(format)) return project_quantized(in, stream);
    const std::int64_t T = in.num_tokens;
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    const GemmShape& g = gemm_shape(T, ld);
    const float alpha = 1.0f, beta = 0.0f;
    FKV_LT(cublasLtMatmul, lt, op, &alpha, w_packed.ptr(), a, in.hidden, g.b, &beta, proj.ptr(),
           g.d, proj.ptr(), g.d, &g.algo, workspace.ptr(), workspace.size(), stream);
  }

  FusedKVInputs inputs(const Group& g, const MaterializerInput& in) const {
    FusedKVInputs r;
    r.proj = static_cast<const char*>(proj.ptr()) + g.offset * dtype_size(opt.act);
    r.num_tokens = in.num_tokens;
    r.num_layers = static_cast<std::int64_t>(g.members.size());
    r.proj_stride_token = width;
    r.proj_stride_layer = g.width;
    r.positions = in.positions;
    r.cos_sin = g.cos_sin_external != nullptr ? g.cos_sin_external : g.cos_sin.ptr();
    r.max_position = g.cos_sin_rows;
    r.cos_sin_stride = g.cos_sin_stride;
    r.k_norm_weight = static_cast<const float*>(g.k_norm.ptr());
    r.eps = g.eps;
    r.error_flag = static_cast<unsigned int*>(error_word.ptr());  // bounds are always checked
    r.kv_bias = static_cast<const float*>(g.kv_bias.ptr());
    return r;
  }

  // The checks every call makes; false when there is nothing to do.
  bool check_call(const MaterializerInput& in) const {
    if (in.num_tokens < 0 || in.num_tokens > opt.max_tokens)
      fail("num_tokens " + std::to_string(in.num_tokens) +
           " is outside [0, max_tokens=" + std::to_string(opt.max_tokens) +
           "]: construct with a larger MaterializerOptions::max_tokens");
    if (in.num_tokens == 0) return false;
    if (opt.external_cos_sin)
      for (std::size_t g = 0; g < groups.size(); ++g)
        if (groups[g].plan_group->attn.rotary_dim > 0 && groups[g].cos_sin_external == nullptr)
          fail("group " + std::to_string(g) +
               " has no cos/sin table: constructed with external_cos_sin, so "
               "call set_cos_sin() for every group with RoPE before materializing");
    if (in.hidden == nullptr) fail("hidden is null");
    if (in.positions == nullptr) fail("positions is null");
    if (in.hidden_stride != 0 && in.hidden_stride < hidden)
      fail("hidden_stride " + std::to_string(in.hidden_stride) + " is smaller than hidden " +
           std::to_string(hidden));
    return true;
  }

  // True when this call goes to the decode kernel: few enough tokens, and hidden rows as it
  // reads them (16-byte vectors).
  bool decode_call(const MaterializerInput& in) const {
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    return decode != nullptr && use_decode_path(in.num_tokens, crossover) && ld % 8 == 0 &&
           reinterpret_cast<std::uintptr_t>(in.hidden) % 16 == 0;
  }

  DecodeInput decode_input(const MaterializerInput& in) const {
    DecodeInput d;
    d.hidden = in.hidden;
    d.num_tokens = in.num_tokens;
    d.hidden_stride = in.hidden_stride;
    d.positions = in.positions;
    return d;
  }

  // The decode path, when the model allows it and the crossover for this GPU is positive.
  // Compiling its kernels needs NVRTC: a read-only cache made without them on a machine with no
  // NVRTC keeps the cuBLASLt path (with a warning) rather than failing.
  void setup_decode(const MaterializerWeights& w, const ModelConfig& config) {
    crossover =
        opt.decode_crossover >= 0 ? opt.decode_crossover : fkv::decode_crossover(opt.device);
    if (crossover <= 0) return;
    // Quantized weights: the decode kernel reads them as stored at every size it covers, and
    // beat dequantize + cuBLASLt by 2.5x at 64 tokens on the H200 (docs/performance.md), so it
    // takes every call up to 64 tokens unless the caller set a crossover.
    if (is_quantized(format) && opt.decode_crossover < 0) crossover = kDecodeMaxBucket;
    const Group& g = groups.front();
    const AttentionSpec& attn = g.plan_group->attn;
    KernelSpec spec = make_kernel_spec(attn, opt.act, opt.cache, OutputMode::Pool, opt.cos_sin,
                                       opt.index, opt.index);
    spec.debug_checks = opt.debug_checks;
    spec.kv_bias = !w.kv_bias.empty();
    spec.paged = opt.paged;
    const int L = static_cast<int>(g.members.size());
    std::string why;
    if (groups.size() != 1)
      why = "the plan has " + std::to_string(groups.size()) + " groups";
    else
      why = decode_unsupported(spec, static_cast<int>(hidden), L, format);
    if (!why.empty()) {
      spdlog::debug("fkv: {}: no decode-size path ({})", config.path, why);
      crossover = 0;
      return;
    }
    DecodeModel dm;
    dm.epilogue = spec;
    dm.hidden = static_cast<int>(hidden);
    dm.num_layers = L;
    dm.w_kv = w_packed.ptr();
    dm.weight = format;
    dm.w_scale = static_cast<const float*>(w_scales.ptr());
    dm.k_norm = static_cast<const float*>(g.k_norm.ptr());
    dm.eps = g.eps;
    dm.cos_sin = opt.external_cos_sin ? nullptr : g.cos_sin.ptr();
    dm.max_position = g.cos_sin_rows;
    dm.error_flag = static_cast<unsigned int*>(error_word.ptr());
    DecodeOptions dopt;
    dopt.device = opt.device;
    dopt.max_tokens = std::min<std::int64_t>(crossover, kDecodeMaxBucket);
    dopt.stacked = opt.stacked;
    dopt.pool = opt.pool;
    try {
      decode = std::make_unique<DecodeKV>(dm, dopt);
    } catch (const CompileError& e) {
      spdlog::warn(
          "fkv: {}: the decode-size kernels could not be compiled, so every call takes "
          "cuBLASLt + the epilogue kernel: {}",
          config.path, e.what());
      crossover = 0;
      return;
    }
    crossover = std::min<std::int64_t>(crossover, kDecodeMaxBucket);
  }

  // The checks shared by the constructor and refresh_weights (counts and strides; per-layer
  // sizes are checked where the values are gathered).
  std::int64_t check_weights(const MaterializerWeights& w) const {
    const std::size_t L = layers.size();
    if (w.w_kv.size() != L)
      fail("w_kv has " + std::to_string(w.w_kv.size()) + " layers; the config has " +
           std::to_string(L) + " attention layers (one W_kv per attention layer, in model order)");
    if (!w.eps.empty() && w.eps.size() != L)
      fail("eps has " + std::to_string(w.eps.size()) + " values for " + std::to_string(L) +
           " layers");
    if (!w.kv_bias.empty() && w.kv_bias.size() != L)
      fail("kv_bias has " + std::to_string(w.kv_bias.size()) +
           " layers; give one bias per attention layer (" + std::to_string(L) + ") or none");
    const std::int64_t row_stride = w.w_kv_row_stride ? w.w_kv_row_stride : hidden;
    if (row_stride < hidden) fail("w_kv_row_stride is smaller than hidden_size");
    if (w.format != format)
      fail("the weights are " + to_string(w.format) + ", but this materializer was built for " +
           to_string(format) + " weights");
    if (is_quantized(format)) {
      if (w.w_scale.size() != L)
        fail("w_scale has " + std::to_string(w.w_scale.size()) + " entries; " + to_string(format) +
             " weights need one scale pointer per attention layer (" + std::to_string(L) + ")");
      for (std::size_t i = 0; i < L; ++i)
        if (w.w_scale[i] == nullptr)
          fail("w_scale of layer " + std::to_string(layers[i]) + " is null");
      if (row_stride % 16 != 0)
        fail("quantized w_kv rows are read in 16-byte vectors: w_kv_row_stride " +
             std::to_string(row_stride) + " must be a multiple of 16");
    } else if (!w.w_scale.empty()) {
      fail("w_scale is given for dense weights: set MaterializerWeights::format");
    }
    return row_stride;
  }

  // The checks a quantized format makes of the model, once at construction.
  void check_format() const {
    if (!is_quantized(format)) return;
    if (opt.act != DType::BF16 && opt.act != DType::FP16)
      fail(to_string(format) + " weights take bf16 or fp16 activations, not " + to_string(opt.act));
    if (hidden % 16 != 0)
      fail(to_string(format) + " weights need hidden_size a multiple of 16, got " +
           std::to_string(hidden));
    if (format == WeightFormat::Fp8Block)
      for (const Group& g : groups)
        if (g.width % kWeightBlock != 0)
          throw UnsupportedError("fp8_block weights: each layer's K/V rows (2*H*D = " +
                                 std::to_string(g.width) + ") must be whole 128-row scale blocks");
  }

  // Each layer's scales into w_scales (allocated), groups in plan order, on `stream`.
  void pack_scales(const MaterializerWeights& w, CUstream stream) const {
    if (!is_quantized(format)) return;
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const Group& g = groups[gi];
      const std::int64_t per = layer_scale_count(format, g.width, hidden);
      for (std::size_t j = 0; j < g.members.size(); ++j)
        FKV_CU(cuMemcpyDtoDAsync,
               w_scales.get() + static_cast<CUdeviceptr>((scale_offset[gi] + j * per) * 4),
               reinterpret_cast<CUdeviceptr>(w.w_scale[g.members[j]]),
               static_cast<std::size_t>(per) * sizeof(float), stream);
    }
  }

  // W_kv of every layer into w_packed (allocated), groups in plan order, on `stream`.
  void pack(const MaterializerWeights& w, std::int64_t row_stride, CUstream stream) const {
    const int es = weight_element_bytes(format, dtype_size(opt.act));
    for (const Group& g : groups) {
      for (std::size_t j = 0; j < g.members.size(); ++j) {
        const void* src = w.w_kv[g.members[j]];
        if (src == nullptr)
          fail("w_kv of layer " + std::to_string(layers[g.members[j]]) + " is null");
        const CUdeviceptr dst =
            w_packed.get() + static_cast<CUdeviceptr>((g.offset + j * g.width) * hidden * es);
        if (row_stride == hidden) {
          FKV_CU(cuMemcpyDtoDAsync, dst, reinterpret_cast<CUdeviceptr>(src),
                 static_cast<std::size_t>(g.width * hidden * es), stream);
        } else {
          for (std::int64_t r = 0; r < g.width; ++r)
            FKV_CU(
                cuMemcpyDtoDAsync, dst + static_cast<CUdeviceptr>(r * hidden * es),
                reinterpret_cast<CUdeviceptr>(src) + static_cast<CUdeviceptr>(r * row_stride * es),
                static_cast<std::size_t>(hidden * es), stream);
        }
      }
    }
  }

  // Group g's K-norm weights as the kernel reads them: [L_g, D] fp32, (1 + w) folded.
  std::vector<float> folded_norms(const Group& g, const MaterializerWeights& w) const {
    const AttentionSpec& attn = g.plan_group->attn;
    const std::size_t D = static_cast<std::size_t>(attn.head_dim);
    if (w.k_norm.size() != layers.size())
      fail("the config has a K norm (" + to_string(attn.k_norm) +
           "): give k_norm weights for all " + std::to_string(layers.size()) + " attention layers");
    std::vector<float> folded;
    for (std::size_t i : g.members) {
      if (w.k_norm[i].size() != D)
        fail("k_norm weight of layer " + std::to_string(layers[i]) + " has " +
             std::to_string(w.k_norm[i].size()) +
             " values, expected head_dim=" + std::to_string(D));
      for (float v : w.k_norm[i]) folded.push_back(fold_k_norm_weight(attn.k_norm, v));
    }
    return folded;
  }

  // Group g's K/V bias: [L_g, 2*H*D] fp32.
  std::vector<float> packed_bias(const Group& g, const MaterializerWeights& w) const {
    const AttentionSpec& attn = g.plan_group->attn;
    const std::size_t row =
        2 * static_cast<std::size_t>(attn.num_kv_heads) * static_cast<std::size_t>(attn.head_dim);
    std::vector<float> packed;
    for (std::size_t i : g.members) {
      if (w.kv_bias[i].size() != row)
        fail("kv_bias of layer " + std::to_string(layers[i]) + " has " +
             std::to_string(w.kv_bias[i].size()) +
             " values, expected 2*H*D=" + std::to_string(row) +
             (plan.tp_size > 1
                  ? " (H = this rank's " + std::to_string(attn.num_kv_heads) + " KV heads)"
                  : ""));
      packed.insert(packed.end(), w.kv_bias[i].begin(), w.kv_bias[i].end());
    }
    return packed;
  }
};

FusedKVMaterializer::FusedKVMaterializer(const ModelConfig& config, std::int64_t hidden_size,
                                         const MaterializerWeights& w, const MaterializerOptions& o)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = o;
  m.hidden = hidden_size;
  m.format = w.format;
  m.plan = shard_plan(make_plan(config, o.mode), TensorParallel{o.tp_size, o.tp_rank});
  if (hidden_size <= 0) fail("hidden_size must be positive, got " + std::to_string(hidden_size));
  if (o.max_tokens <= 0) fail("max_tokens must be positive");
  cuda_type(o.act);
  for (const LayerAttention* l : config.attention_layers()) m.layers.push_back(l->index);
  const std::size_t L = m.layers.size();
  const std::int64_t row_stride = m.check_weights(w);
  std::unordered_map<int, std::size_t> pos_of;
  for (std::size_t i = 0; i < L; ++i) pos_of[m.layers[i]] = i;

  const int es = dtype_size(o.act);

  // Groups in plan order; their layers adjacent in the packed weight (and so in proj).
  for (const LayerGroup& pg : m.plan.groups) {
    Impl::Group g;
    g.plan_group = &pg;
    g.offset = m.width;
    g.width = 2 * std::int64_t{pg.attn.num_kv_heads} * pg.attn.head_dim;
    for (int layer : pg.layers) g.members.push_back(pos_of.at(layer));
    for (std::size_t j = 1; j < g.members.size(); ++j)
      if (g.members[j] != g.members[0] + j) g.adjacent = false;
    m.width += g.width * static_cast<std::int64_t>(g.members.size());
    m.groups.push_back(std::move(g));
  }
  m.check_format();  // before the first GPU call: its refusals need no device

  ensure_context(o.device);
  Stream setup;
  m.w_packed = DeviceBuffer(
      static_cast<std::size_t>(m.width * hidden_size * weight_element_bytes(m.format, es)));
  m.pack(w, row_stride, setup.get());
  if (is_quantized(m.format)) {
    std::int64_t scales = 0;
    for (const Impl::Group& g : m.groups) {
      m.scale_offset.push_back(scales);
      scales += layer_scale_count(m.format, g.width, hidden_size) *
                static_cast<std::int64_t>(g.members.size());
    }
    m.w_scales = DeviceBuffer(static_cast<std::size_t>(scales) * sizeof(float));
    m.pack_scales(w, setup.get());
    // Slices of up to dequant_slice_bytes (whole 128-row blocks), at most one group's rows.
    std::int64_t most = 0;
    for (const Impl::Group& g : m.groups)
      most = std::max(most, g.width * static_cast<std::int64_t>(g.members.size()));
    const std::int64_t fit =
        std::max<std::int64_t>(kWeightBlock, static_cast<std::int64_t>(o.dequant_slice_bytes) /
                                                 (hidden_size * es) / kWeightBlock * kWeightBlock);
    m.dq_rows = std::min(most, fit);
    m.dq_scratch = DeviceBuffer(static_cast<std::size_t>(m.dq_rows * hidden_size * es));
    m.dequant =
        std::make_unique<Dequantizer>(m.format, o.act, static_cast<int>(hidden_size), o.device);
  }

  const std::int64_t rows =
      o.max_position > 0 ? o.max_position : config.max_position_embeddings.value;
  RopeOptions rope_options;
  rope_options.max_position_embeddings = config.max_position_embeddings.value;
  for (Impl::Group& g : m.groups) {
    const AttentionSpec& attn = g.plan_group->attn;
    for (std::size_t i : g.members)
      g.eps.push_back(
          w.eps.empty()
              ? static_cast<float>(config.layers[static_cast<std::size_t>(m.layers[i])].eps.value)
              : w.eps[i]);
    if (k_norm_weighted(attn.k_norm)) {
      const std::vector<float> folded = m.folded_norms(g, w);
      g.k_norm = DeviceBuffer(folded.size() * sizeof(float));
      FKV_CU(cuMemcpyHtoDAsync, g.k_norm.get(), folded.data(), folded.size() * sizeof(float),
             setup.get());
    }
    if (!w.kv_bias.empty()) {
      const std::vector<float> packed = m.packed_bias(g, w);
      g.kv_bias = DeviceBuffer(packed.size() * sizeof(float));
      FKV_CU(cuMemcpyHtoDAsync, g.kv_bias.get(), packed.data(), packed.size() * sizeof(float),
             setup.get());
    }
    if (attn.rotary_dim > 0 && !o.external_cos_sin) {
      if (rows <= 0)
        fail(
            "the config has no max_position_embeddings: set MaterializerOptions::max_position to "
            "the "
            "number of positions the cos/sin tables must cover");
      const RopeTable table(attn.rope, attn.rotary_dim, rows, rope_options);
      g.cos_sin = DeviceBuffer(table.size_bytes(o.cos_sin));
      g.cos_sin_rows = rows;
      upload(table, o.cos_sin, g.cos_sin.get(), setup.get());
    }
    KernelSpec spec =
        make_kernel_spec(attn, o.act, o.act, OutputMode::Stacked, o.cos_sin, o.index, o.index);
    spec.debug_checks = o.debug_checks;
    spec.kv_bias = !w.kv_bias.empty();
    if (o.stacked) g.stacked = &Runtime::global().prepare(spec, o.device);
    spec = make_kernel_spec(attn, o.act, o.cache, OutputMode::Pool, o.cos_sin, o.index, o.index);
    spec.debug_checks = o.debug_checks;
    spec.kv_bias = !w.kv_bias.empty();
    spec.paged = o.paged;
    if (o.pool) g.pool = &Runtime::global().prepare(spec, o.device);
    g.k_ptrs.resize(g.members.size());
    g.v_ptrs.resize(g.members.size());
    g.k_scales.resize(g.members.size());
    g.v_scales.resize(g.members.size());
    g.slot_maps.resize(g.members.size());
  }
  m.proj = DeviceBuffer(static_cast<std::size_t>(o.max_tokens * m.width * es));
  m.error_word = DeviceBuffer(sizeof(unsigned int));
  FKV_CU(cuMemsetD32Async, m.error_word.get(), 0u, 1, setup.get());
  m.setup_gemm();
  m.setup_decode(w, config);
  // Every upload above went on `setup` (pageable sources are staged before the call returns):
  // a synchronous cuMemcpyHtoD runs on the legacy stream and may still be in flight when it
  // returns, and the caller's non-blocking streams would not wait for it.
  setup.synchronize();
}

void FusedKVMaterializer::refresh_weights(const MaterializerWeights& w, CUstream stream) {
  Impl& m = *impl_;
  const std::int64_t row_stride = m.check_weights(w);
  const bool has_bias = m.groups.empty() ? false : m.groups.front().kv_bias.size() > 0;
  if (w.kv_bias.empty() == has_bias)
    fail(has_bias ? "refresh_weights: constructed with a K/V bias, so give kv_bias for every layer"
                  : "refresh_weights: constructed without a K/V bias; a bias cannot be added by a "
                    "refresh");
  // Everything is gathered and checked before the first copy, so an error changes nothing.
  std::vector<std::vector<float>> norms(m.groups.size()), biases(m.groups.size());
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    const Impl::Group& g = m.groups[gi];
    if (!w.eps.empty())
      for (std::size_t j = 0; j < g.members.size(); ++j)
        if (w.eps[g.members[j]] != g.eps[j])
          fail("refresh_weights: eps of layer " + std::to_string(m.layers[g.members[j]]) +
               " changed (" + std::to_string(g.eps[j]) + " -> " +
               std::to_string(w.eps[g.members[j]]) +
               "); eps is a launch argument, fixed in captured graphs: construct a new "
               "materializer");
    if (k_norm_weighted(g.plan_group->attn.k_norm)) norms[gi] = m.folded_norms(g, w);
    if (has_bias) biases[gi] = m.packed_bias(g, w);
  }
  for (std::size_t i = 0; i < w.w_kv.size(); ++i)
    if (w.w_kv[i] == nullptr) fail("w_kv of layer " + std::to_string(m.layers[i]) + " is null");
  ensure_context(m.opt.device);
  m.pack(w, row_stride, stream);
  m.pack_scales(w, stream);
  // From pageable host memory: each copy returns once its source is staged, so the vectors
  // may go out of scope before the stream reaches the copy.
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    const Impl::Group& g = m.groups[gi];
    if (!norms[gi].empty())
      FKV_CU(cuMemcpyHtoDAsync, g.k_norm.get(), norms[gi].data(), norms[gi].size() * sizeof(float),
             stream);
    if (!biases[gi].empty())
      FKV_CU(cuMemcpyHtoDAsync, g.kv_bias.get(), biases[gi].data(),
             biases[gi].size() * sizeof(float), stream);
  }
}

void FusedKVMaterializer::set_cos_sin(std::size_t group, const void* table, std::int64_t rows,
                                      std::int64_t row_stride) {
  Impl& m = *impl_;
  if (group >= m.groups.size())
    fail("set_cos_sin: group " + std::to_string(group) + " is out of range (the plan has " +
         std::to_string(m.groups.size()) + ")");
  Impl::Group& g = m.groups[group];
  const int R = g.plan_group->attn.rotary_dim;
  if (R == 0) fail("set_cos_sin: group " + std::to_string(group) + " has no RoPE (rotary_dim 0)");
  if (table == nullptr) fail("set_cos_sin: the table is null");
  if (rows <= 0) fail("set_cos_sin: rows must be positive, got " + std::to_string(rows));
  if (row_stride != 0 && row_stride < R)
    fail("set_cos_sin: row_stride " + std::to_string(row_stride) + " is smaller than rotary_dim " +
         std::to_string(R));
  g.cos_sin_external = table;
  g.cos_sin_rows = rows;
  g.cos_sin_stride = row_stride;
  if (m.decode) m.decode->set_cos_sin(table, rows, row_stride);
}

void FusedKVMaterializer::reserve_tokens(std::int64_t max_tokens) {
  Impl& m = *impl_;
  if (max_tokens <= m.opt.max_tokens) return;
  ensure_context(m.opt.device);
  DeviceBuffer bigger(static_cast<std::size_t>(max_tokens * m.width * dtype_size(m.opt.act)));
  m.retired.push_back(std::move(m.proj));
  m.proj = std::move(bigger);
  m.opt.max_tokens = max_tokens;
}

std::int64_t FusedKVMaterializer::max_tokens() const { return impl_->opt.max_tokens; }

std::string cublaslt_library() { return Lt::get().path; }

CUdeviceptr FusedKVMaterializer::packed_weights() const { return impl_->w_packed.get(); }
CUdeviceptr FusedKVMaterializer::packed_weight_scales() const { return impl_->w_scales.get(); }
WeightFormat FusedKVMaterializer::weight_format() const { return impl_->format; }

CUdeviceptr FusedKVMaterializer::k_norm_weights(std::size_t group) const {
  if (group >= impl_->groups.size())
    fail("k_norm_weights: group " + std::to_string(group) + " is out of range");
  return impl_->groups[group].k_norm.get();
}

FusedKVMaterializer::~FusedKVMaterializer() = default;

const Plan& FusedKVMaterializer::plan() const { return impl_->plan; }
const std::vector<int>& FusedKVMaterializer::layers() const { return impl_->layers; }
CUdeviceptr FusedKVMaterializer::projection() const { return impl_->proj.get(); }
std::int64_t FusedKVMaterializer::projection_width() const { return impl_->width; }
CUdeviceptr FusedKVMaterializer::error_flag() const { return impl_->error_word.get(); }
std::int64_t FusedKVMaterializer::decode_crossover() const { return impl_->crossover; }

unsigned int FusedKVMaterializer::take_error_flag(CUstream stream) {
  FKV_CU(cuStreamSynchronize, stream);
  unsigned int value = 0;
  FKV_CU(cuMemcpyDtoH, &value, impl_->error_word.get(), sizeof value);
  if (value != 0)
    FKV_CU(cuMemsetD8Async, impl_->error_word.get(), 0, sizeof value, stream);  // in stream order
  return value;
}

void FusedKVMaterializer::materialize_stacked(const MaterializerInput& in,
                                              std::span<void* const> k_out,
                                              std::span<void* const> v_out, CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.stacked) fail("constructed with stacked = false: no stacked kernels were prepared");
  if (k_out.size() != m.groups.size() || v_out.size() != m.groups.size())
    fail("stacked output takes one k_out and one v_out per group: the plan has " +
         std::to_string(m.groups.size()) + ", got " + std::to_string(k_out.size()) + " and " +
         std::to_string(v_out.size()));
  if (!m.check_call(in)) return;
  if (m.decode_call(in)) {
    m.decode->run_stacked(m.decode_input(in), k_out[0], v_out[0], stream);
    return;
  }
  m.project(in, stream);
  for (std::size_t g = 0; g < m.groups.size(); ++g)
    fkv::materialize_stacked(*m.groups[g].stacked, m.inputs(m.groups[g], in),
                             StackedOutput{k_out[g], v_out[g]}, stream);
}

void FusedKVMaterializer::materialize_pool(const MaterializerInput& in, const Pool& pool,
                                           CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.pool) fail("constructed with pool = false: no pool kernels were prepared");
  // The layout is checked over every attention layer with each group's heads (per-call checks
  // of counts, pointers, strides and overlap; no allocation).
  KVGeometry geo;
  geo.num_layers = static_cast<std::int64_t>(m.layers.size());
  geo.cache = m.opt.cache;
  geo.slots = m.opt.index;
  KVAddressing a;
  for (const Impl::Group& g : m.groups) {
    geo.num_kv_heads = g.plan_group->attn.num_kv_heads;
    geo.head_dim = g.plan_group->attn.head_dim;
    if (pool.kind == KVLayoutKind::TokenMajor && g.width != m.groups.front().width &&
        (pool.layer_stride == 0 || pool.kv_offset == 0 || pool.slot_stride == 0))
      fail(
          "token_major layout: the plan's groups differ in 2*H*D, so give layer_stride, "
          "kv_offset and slot_stride explicitly");
    try {
      a = resolve_kv_layout(pool, geo);
    } catch (const ArgumentError& e) {
      fail(e.what());
    }
    if (a.paged && !m.opt.paged)
      fail(to_string(pool.kind) +
           " layout: block_size, block_stride, a head_stride other than D and slot_mappings need "
           "the paged kernels: construct with MaterializerOptions::paged = true");
  }
  if (pool.k_scales_device || pool.v_scales_device)
    for (const Impl::Group& g : m.groups)
      if (!g.adjacent)
        fail(
            "device k/v scales index the attention layers in order, but a group of this grouped "
            "plan has non-adjacent layers; pass host scales, or use a strict plan");
  if (!m.check_call(in)) return;
  if (m.decode_call(in) && !a.paged && pool.k_scales_device == nullptr &&
      pool.v_scales_device == nullptr) {
    m.decode->run_pool(m.decode_input(in), pool, stream);
    return;
  }
  m.project(in, stream);
  for (Impl::Group& g : m.groups) {
    geo.num_kv_heads = g.plan_group->attn.num_kv_heads;
    geo.head_dim = g.plan_group->attn.head_dim;
    for (std::size_t j = 0; j < g.members.size(); ++j) {
      const std::size_t i = g.members[j];
      g.k_ptrs[j] = kv_layer_buffer(pool, geo, static_cast<std::int64_t>(i), false);
      g.v_ptrs[j] = kv_layer_buffer(pool, geo, static_cast<std::int64_t>(i), true);
      if (!pool.k_scales.empty()) g.k_scales[j] = pool.k_scales[i];
      if (!pool.v_scales.empty()) g.v_scales[j] = pool.v_scales[i];
      if (!pool.slot_mappings.empty()) g.slot_maps[j] = pool.slot_mappings[i];
    }
    PoolOutput out = per_layer_view(pool, resolve_kv_layout(pool, geo), g.k_ptrs, g.v_ptrs);
    out.k_scales = pool.k_scales.empty() ? std::span<const float>{} : g.k_scales;
    out.v_scales = pool.v_scales.empty() ? std::span<const float>{} : g.v_scales;
    const std::size_t first = g.members.empty() ? 0 : g.members[0];
    if (pool.k_scales_device) out.k_scales_device = pool.k_scales_device + first;
    if (pool.v_scales_device) out.v_scales_device = pool.v_scales_device + first;
    out.slot_mappings = pool.slot_mappings.empty() ? std::span<const void* const>{} : g.slot_maps;
    fkv::materialize_pool(*g.pool, m.inputs(g, in), out, stream);
  }
}

void FusedKVMaterializer::materialize(const MaterializerInput& in, const KVLayout& out,
                                      CUstream stream) {
  if (out.kind == KVLayoutKind::Stacked)
    materialize_stacked(in, out.k_buffers, out.v_buffers, stream);
  else
    materialize_pool(in, out, stream);
}

}  // namespace fkv
