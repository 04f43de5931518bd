// fused_kv_materializer: projection GEMM (cuBLASLt) + fused kernels for one draft model.
#include "fkv/fused_kv_materializer.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/materialize.hpp"
#include "fkv/rope.hpp"

namespace fkv {
namespace {

// ---- cuBLASLt, loaded with dlopen (the rest of the library needs only libnvrtc) -------------

struct Lt {
#define FKV_LT_FNS(X)                                                                      \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                     \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                 \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul) X(cublasLtGetStatusName)
#define FKV_LT_MEMBER(name) decltype(&::name) name = nullptr;
  FKV_LT_FNS(FKV_LT_MEMBER)
#undef FKV_LT_MEMBER

  static Lt& get() {
    static Lt lt;
    static std::string error;
    static std::once_flag once;
    std::call_once(once, [] {
      const std::string names[] = {"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR),
                                   "libcublasLt.so"};
      void* h = nullptr;
      for (const auto& n : names)
        if ((h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      if (h == nullptr) {
        error = std::string("cannot load cuBLASLt (") + names[0] +
                ") for the materializer's projection GEMM: install the CUDA Toolkit's cuBLAS "
                "libraries or add their directory to LD_LIBRARY_PATH";
        return;
      }
#define FKV_LT_LOAD(name)                                                          \
  if ((lt.name = reinterpret_cast<decltype(lt.name)>(dlsym(h, #name))) == nullptr) \
    error = "cuBLASLt has no entry point " #name;
      FKV_LT_FNS(FKV_LT_LOAD)
#undef FKV_LT_LOAD
    });
    if (!error.empty()) throw CudaError(error, "dlopen");
    return lt;
  }

  static void check(cublasStatus_t s, const char* call) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    const char* name = get().cublasLtGetStatusName(s);
    throw CudaError(std::string(call) + " failed: " + (name ? name : "?") + " (projection GEMM)", call,
                    static_cast<int>(s), name ? name : "");
  }
};
#define FKV_LT(fn, ...) Lt::check(Lt::get().fn(__VA_ARGS__), #fn)

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::FP16: return CUDA_R_16F;
    case DType::FP32: return CUDA_R_32F;
    default: break;
  }
  throw ArgumentError("the projection GEMM takes bf16, fp16 or fp32 activations, not " + to_string(d));
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
  DeviceBuffer w_packed;   // [N, hidden]
  DeviceBuffer proj;       // [max_tokens, N]
  DeviceBuffer workspace;
  DeviceBuffer error_word;

  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::unordered_map<std::int64_t, cublasLtMatmulAlgo_t> algos;  // by T, host-side only

  ~Impl() {
    if (lt == nullptr) return;
    Lt& L = Lt::get();
    if (pref) L.cublasLtMatmulPreferenceDestroy(pref);
    if (d) L.cublasLtMatrixLayoutDestroy(d);
    if (b) L.cublasLtMatrixLayoutDestroy(b);
    if (a) L.cublasLtMatrixLayoutDestroy(a);
    if (op) L.cublasLtMatmulDescDestroy(op);
    L.cublasLtDestroy(lt);
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
    FKV_LT(cublasLtMatrixLayoutCreate, &b, t, hidden, opt.max_tokens, hidden);
    FKV_LT(cublasLtMatrixLayoutCreate, &d, t, width, opt.max_tokens, width);
    FKV_LT(cublasLtMatmulPreferenceCreate, &pref);
    const std::uint64_t ws = opt.gemm_workspace_bytes;
    FKV_LT(cublasLtMatmulPreferenceSetAttribute, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
           sizeof ws);
    workspace = DeviceBuffer(opt.gemm_workspace_bytes);
  }

  // proj[:T] = hidden · W_packed^T on `stream`.
  void project(const MaterializerInput& in, CUstream stream) {
    const std::int64_t T = in.num_tokens;
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    if (ld < hidden) fail("hidden_stride " + std::to_string(ld) + " is smaller than hidden " + std::to_string(hidden));
    const std::uint64_t cols = static_cast<std::uint64_t>(T);
    const std::int64_t ldb = ld;
    FKV_LT(cublasLtMatrixLayoutSetAttribute, b, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
    FKV_LT(cublasLtMatrixLayoutSetAttribute, b, CUBLASLT_MATRIX_LAYOUT_LD, &ldb, sizeof ldb);
    FKV_LT(cublasLtMatrixLayoutSetAttribute, d, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
    auto it = algos.find(T * 1'000'003 + ld);
    if (it == algos.end()) {
      cublasLtMatmulHeuristicResult_t r{};
      int found = 0;
      FKV_LT(cublasLtMatmulAlgoGetHeuristic, lt, op, a, b, d, d, pref, 1, &r, &found);
      if (found == 0)
        throw CudaError("cuBLASLt found no algorithm for the projection GEMM (T=" + std::to_string(T) +
                            ", N=" + std::to_string(width) + ", hidden=" + std::to_string(hidden) + ")",
                        "cublasLtMatmulAlgoGetHeuristic");
      if (algos.size() > 4096) algos.clear();
      it = algos.emplace(T * 1'000'003 + ld, r.algo).first;
    }
    const float alpha = 1.0f, beta = 0.0f;
    FKV_LT(cublasLtMatmul, lt, op, &alpha, w_packed.ptr(), a, in.hidden, b, &beta, proj.ptr(), d,
           proj.ptr(), d, &it->second, workspace.ptr(), workspace.size(), stream);
  }

  FusedKVInputs inputs(const Group& g, const MaterializerInput& in) const {
    FusedKVInputs r;
    r.proj = static_cast<const char*>(proj.ptr()) + g.offset * dtype_size(opt.act);
    r.num_tokens = in.num_tokens;
    r.num_layers = static_cast<std::int64_t>(g.members.size());
    r.proj_stride_token = width;
    r.proj_stride_layer = g.width;
    r.positions = in.positions;
    r.cos_sin = g.cos_sin.ptr();
    r.max_position = g.cos_sin_rows;
    r.k_norm_weight = static_cast<const float*>(g.k_norm.ptr());
    r.eps = g.eps;
    r.error_flag = static_cast<unsigned int*>(error_word.ptr());  // bounds are always checked
    r.kv_bias = static_cast<const float*>(g.kv_bias.ptr());
    return r;
  }

  // Checks and the GEMM; false when there is nothing to do.
  bool begin(const MaterializerInput& in, CUstream stream) {
    if (in.num_tokens < 0 || in.num_tokens > opt.max_tokens)
      fail("num_tokens " + std::to_string(in.num_tokens) + " is outside [0, max_tokens=" +
           std::to_string(opt.max_tokens) + "]: construct with a larger MaterializerOptions::max_tokens");
    if (in.num_tokens == 0) return false;
    if (in.hidden == nullptr) fail("hidden is null");
    if (in.positions == nullptr) fail("positions is null");
    project(in, stream);
    return true;
  }
};

FusedKVMaterializer::FusedKVMaterializer(const ModelConfig& config, std::int64_t hidden_size,
                                         const MaterializerWeights& w, const MaterializerOptions& o)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = o;
  m.hidden = hidden_size;
  m.plan = shard_plan(make_plan(config, o.mode), TensorParallel{o.tp_size, o.tp_rank});
  if (hidden_size <= 0) fail("hidden_size must be positive, got " + std::to_string(hidden_size));
  if (o.max_tokens <= 0) fail("max_tokens must be positive");
  cuda_type(o.act);
  for (const LayerAttention* l : config.attention_layers()) m.layers.push_back(l->index);
  const std::size_t L = m.layers.size();
  if (w.w_kv.size() != L)
    fail("w_kv has " + std::to_string(w.w_kv.size()) + " layers; the config has " + std::to_string(L) +
         " attention layers (one W_kv per attention layer, in model order)");
  if (!w.eps.empty() && w.eps.size() != L)
    fail("eps has " + std::to_string(w.eps.size()) + " values for " + std::to_string(L) + " layers");
  if (!w.kv_bias.empty() && w.kv_bias.size() != L)
    fail("kv_bias has " + std::to_string(w.kv_bias.size()) + " layers; give one bias per attention layer (" +
         std::to_string(L) + ") or none");
  const std::int64_t row_stride = w.w_kv_row_stride ? w.w_kv_row_stride : hidden_size;
  if (row_stride < hidden_size) fail("w_kv_row_stride is smaller than hidden_size");
  std::unordered_map<int, std::size_t> pos_of;
  for (std::size_t i = 0; i < L; ++i) pos_of[m.layers[i]] = i;

  ensure_context(o.device);
  Stream setup;
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
  m.w_packed = DeviceBuffer(static_cast<std::size_t>(m.width * hidden_size * es));
  for (const Impl::Group& g : m.groups) {
    for (std::size_t j = 0; j < g.members.size(); ++j) {
      const void* src = w.w_kv[g.members[j]];
      if (src == nullptr) fail("w_kv of layer " + std::to_string(m.layers[g.members[j]]) + " is null");
      const CUdeviceptr dst = m.w_packed.get() + static_cast<CUdeviceptr>((g.offset + j * g.width) * hidden_size * es);
      if (row_stride == hidden_size) {
        FKV_CU(cuMemcpyDtoDAsync, dst, reinterpret_cast<CUdeviceptr>(src),
               static_cast<std::size_t>(g.width * hidden_size * es), setup.get());
      } else {
        for (std::int64_t r = 0; r < g.width; ++r)
          FKV_CU(cuMemcpyDtoDAsync, dst + static_cast<CUdeviceptr>(r * hidden_size * es),
                 reinterpret_cast<CUdeviceptr>(src) + static_cast<CUdeviceptr>(r * row_stride * es),
                 static_cast<std::size_t>(hidden_size * es), setup.get());
      }
    }
  }

  const std::int64_t rows = o.max_position > 0 ? o.max_position : config.max_position_embeddings.value;
  RopeOptions rope_options;
  rope_options.max_position_embeddings = config.max_position_embeddings.value;
  for (Impl::Group& g : m.groups) {
    const AttentionSpec& attn = g.plan_group->attn;
    const std::size_t D = static_cast<std::size_t>(attn.head_dim);
    for (std::size_t i : g.members)
      g.eps.push_back(w.eps.empty() ? static_cast<float>(config.layers[static_cast<std::size_t>(m.layers[i])].eps.value)
                                    : w.eps[i]);
    if (attn.k_norm != KNormKind::None) {
      if (w.k_norm.size() != L)
        fail("the config has a K norm (" + to_string(attn.k_norm) + "): give k_norm weights for all " +
             std::to_string(L) + " attention layers");
      std::vector<float> folded;
      for (std::size_t i : g.members) {
        if (w.k_norm[i].size() != D)
          fail("k_norm weight of layer " + std::to_string(m.layers[i]) + " has " +
               std::to_string(w.k_norm[i].size()) + " values, expected head_dim=" + std::to_string(D));
        for (float v : w.k_norm[i]) folded.push_back(attn.k_norm == KNormKind::RmsOnePlus ? 1.0f + v : v);
      }
      g.k_norm = DeviceBuffer(folded.size() * sizeof(float));
      FKV_CU(cuMemcpyHtoD, g.k_norm.get(), folded.data(), folded.size() * sizeof(float));
    }
    if (!w.kv_bias.empty()) {
      const std::size_t row = 2 * static_cast<std::size_t>(attn.num_kv_heads) * D;
      std::vector<float> packed;
      for (std::size_t i : g.members) {
        if (w.kv_bias[i].size() != row)
          fail("kv_bias of layer " + std::to_string(m.layers[i]) + " has " + std::to_string(w.kv_bias[i].size()) +
               " values, expected 2*H*D=" + std::to_string(row) +
               (m.plan.tp_size > 1 ? " (H = this rank's " + std::to_string(attn.num_kv_heads) + " KV heads)" : ""));
        packed.insert(packed.end(), w.kv_bias[i].begin(), w.kv_bias[i].end());
      }
      g.kv_bias = DeviceBuffer(packed.size() * sizeof(float));
      FKV_CU(cuMemcpyHtoD, g.kv_bias.get(), packed.data(), packed.size() * sizeof(float));
    }
    if (attn.rotary_dim > 0) {
      if (rows <= 0)
        fail("the config has no max_position_embeddings: set MaterializerOptions::max_position to the "
             "number of positions the cos/sin tables must cover");
      const RopeTable table(attn.rope, attn.rotary_dim, rows, rope_options);
      g.cos_sin = DeviceBuffer(table.size_bytes(o.cos_sin));
      g.cos_sin_rows = rows;
      upload(table, o.cos_sin, g.cos_sin.get(), setup.get());
    }
    KernelSpec spec = make_kernel_spec(attn, o.act, o.act, OutputMode::Stacked, o.cos_sin, o.index, o.index);
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
  const unsigned int zero = 0;
  FKV_CU(cuMemcpyHtoD, m.error_word.get(), &zero, sizeof zero);
  m.setup_gemm();
  setup.synchronize();
}

FusedKVMaterializer::~FusedKVMaterializer() = default;

const Plan& FusedKVMaterializer::plan() const { return impl_->plan; }
const std::vector<int>& FusedKVMaterializer::layers() const { return impl_->layers; }
CUdeviceptr FusedKVMaterializer::projection() const { return impl_->proj.get(); }
std::int64_t FusedKVMaterializer::projection_width() const { return impl_->width; }
CUdeviceptr FusedKVMaterializer::error_flag() const { return impl_->error_word.get(); }

unsigned int FusedKVMaterializer::take_error_flag(CUstream stream) {
  FKV_CU(cuStreamSynchronize, stream);
  unsigned int value = 0;
  FKV_CU(cuMemcpyDtoH, &value, impl_->error_word.get(), sizeof value);
  if (value != 0) FKV_CU(cuMemsetD8, impl_->error_word.get(), 0, sizeof value);
  return value;
}

void FusedKVMaterializer::materialize_stacked(const MaterializerInput& in, std::span<void* const> k_out,
                                              std::span<void* const> v_out, CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.stacked) fail("constructed with stacked = false: no stacked kernels were prepared");
  if (k_out.size() != m.groups.size() || v_out.size() != m.groups.size())
    fail("stacked output takes one k_out and one v_out per group: the plan has " +
         std::to_string(m.groups.size()) + ", got " + std::to_string(k_out.size()) + " and " +
         std::to_string(v_out.size()));
  if (!m.begin(in, stream)) return;
  for (std::size_t g = 0; g < m.groups.size(); ++g)
    fkv::materialize_stacked(*m.groups[g].stacked, m.inputs(m.groups[g], in),
                             StackedOutput{k_out[g], v_out[g]}, stream);
}

void FusedKVMaterializer::materialize_pool(const MaterializerInput& in, const Pool& pool, CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.pool) fail("constructed with pool = false: no pool kernels were prepared");
  const std::size_t L = m.layers.size();
  if (pool.k_buffers.size() != L || pool.v_buffers.size() != L)
    fail("pool output takes one K and one V buffer per attention layer (" + std::to_string(L) + "), got " +
         std::to_string(pool.k_buffers.size()) + " and " + std::to_string(pool.v_buffers.size()));
  if ((!pool.k_scales.empty() && pool.k_scales.size() != L) || (!pool.v_scales.empty() && pool.v_scales.size() != L))
    fail("k_scales / v_scales take one value per attention layer (" + std::to_string(L) + ") or none");
  if (!pool.slot_mappings.empty() && pool.slot_mappings.size() != L)
    fail("slot_mappings takes one pointer per attention layer (" + std::to_string(L) + ") or none, got " +
         std::to_string(pool.slot_mappings.size()));
  if (pool.k_scales_device || pool.v_scales_device)
    for (const Impl::Group& g : m.groups)
      if (!g.adjacent)
        fail("device k/v scales index the attention layers in order, but a group of this grouped plan has "
             "non-adjacent layers; pass host scales, or use a strict plan");
  if (!m.begin(in, stream)) return;
  for (Impl::Group& g : m.groups) {
    for (std::size_t j = 0; j < g.members.size(); ++j) {
      const std::size_t i = g.members[j];
      g.k_ptrs[j] = pool.k_buffers[i];
      g.v_ptrs[j] = pool.v_buffers[i];
      if (!pool.k_scales.empty()) g.k_scales[j] = pool.k_scales[i];
      if (!pool.v_scales.empty()) g.v_scales[j] = pool.v_scales[i];
      if (!pool.slot_mappings.empty()) g.slot_maps[j] = pool.slot_mappings[i];
    }
    PoolOutput out;
    out.cache_loc = pool.cache_loc;
    out.k_buffers = g.k_ptrs;
    out.v_buffers = g.v_ptrs;
    out.num_slots = pool.num_slots;
    out.slot_stride = pool.slot_stride;
    if (!pool.k_scales.empty()) out.k_scales = g.k_scales;
    if (!pool.v_scales.empty()) out.v_scales = g.v_scales;
    const std::size_t first = g.members.empty() ? 0 : g.members[0];
    if (pool.k_scales_device) out.k_scales_device = pool.k_scales_device + first;
    if (pool.v_scales_device) out.v_scales_device = pool.v_scales_device + first;
    out.block_size = pool.block_size;
    out.block_stride = pool.block_stride;
    out.head_stride = pool.head_stride;
    if (!pool.slot_mappings.empty()) out.slot_mappings = g.slot_maps;
    fkv::materialize_pool(*g.pool, m.inputs(g, in), out, stream);
  }
}

}  // namespace fkv
