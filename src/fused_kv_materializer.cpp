// fused_kv_materializer: one draft model's packed weights, its projection (projection_gemm.hpp;
// for 8-bit weights fp8_gemm_path.hpp's FP8 GEMM, int8_gemm_path.hpp's INT8 GEMM or dequantized
// slices) and the fused kernels
// after it: construction, weight refresh, cos/sin tables and accessors. The calls are in
// materializer_calls.cpp; the state both share is materializer_impl.hpp.
#include "fkv/fused_kv_materializer.hpp"

#include <unordered_map>

#include "fkv/rope.hpp"
#include "materializer_impl.hpp"

namespace fkv {

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
  if (o.int8_gemm_tokens < 0 || o.int8_gemm_tokens > 65535)
    fail("int8_gemm_tokens " + std::to_string(o.int8_gemm_tokens) +
         " is outside [0, 65535] (0: INT8 weights above the decode crossover take dequantized "
         "slices)");
  check_gemm_dtype(o.act);
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
  m.proj = DeviceBuffer(static_cast<std::size_t>(Impl::proj_rows(o.max_tokens) * m.width * es));
  m.error_word = DeviceBuffer(sizeof(unsigned int));
  FKV_CU(cuMemsetD32Async, m.error_word.get(), 0u, 1, setup.get());
  m.gemm = std::make_unique<ProjectionGemm>(o.act, hidden_size, m.width, o.gemm_workspace_bytes);
  m.setup_fp8_gemm(setup.get());
  m.setup_int8_gemm();
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
  if (m.fp8) m.fp8->fill_scales(stream);
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
  DeviceBuffer bigger(
      static_cast<std::size_t>(Impl::proj_rows(max_tokens) * m.width * dtype_size(m.opt.act)));
  m.retired.push_back(std::move(m.proj));
  m.proj = std::move(bigger);
  if (m.fp8) m.fp8->reserve(max_tokens, m.retired);  // graphs captured before keep the old
  if (m.int8) m.int8->reserve(std::min(max_tokens, m.opt.int8_gemm_tokens), m.retired);
  m.opt.max_tokens = max_tokens;
}

std::int64_t FusedKVMaterializer::max_tokens() const { return impl_->opt.max_tokens; }

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
bool FusedKVMaterializer::fp8_gemm() const { return impl_->fp8 != nullptr; }
bool FusedKVMaterializer::fp8_stream_gemm() const {
  return impl_->fp8 && impl_->fp8->stream_gemm();
}
std::int64_t FusedKVMaterializer::int8_gemm_tokens() const {
  return impl_->int8 ? impl_->int8->max_tokens() : 0;
}

}  // namespace fkv
