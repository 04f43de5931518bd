// c_api_materializer: the C API's materializer (fkv_materializer_*, include/fkv/fkv.h) over
// fkv::FusedKVMaterializer, with the storage format of its K/V weights (fkv_weight_quant:
// dense, or the quantized formats of include/fkv/weights.hpp).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "c_api_internal.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/kv_layout.hpp"
#include "fkv/validate.hpp"
#include "fkv/weights.hpp"

struct fkv_materializer {
  std::unique_ptr<fkv::FusedKVMaterializer> m;
  std::string plan_json;
};

using namespace fkv::c_api;

namespace {

fkv_materializer_options materializer_defaults() {
  const fkv::MaterializerOptions d;
  fkv_materializer_options o{};
  o.struct_size = sizeof(o);
  o.grouped = d.mode == fkv::ValidationMode::Grouped;
  o.act = to_c(d.act);
  o.cache = to_c(d.cache);
  o.cos_sin = to_c(d.cos_sin);
  o.index_i64 = d.index == fkv::IndexType::I64;
  o.max_tokens = d.max_tokens;
  o.max_position = d.max_position;
  o.device = d.device;
  o.stacked = d.stacked;
  o.pool = d.pool;
  o.paged = d.paged;
  o.tp_size = d.tp_size;
  o.tp_rank = d.tp_rank;
  o.decode_crossover = d.decode_crossover;
  o.fp8_gemm = d.fp8_gemm;
  o.int8_gemm_tokens = d.int8_gemm_tokens;
  return o;
}

fkv_materializer_options read_materializer_options(const fkv_materializer_options& from) {
  check_struct_size(from, "fkv_materializer_options", "fkv_materializer_options_init");
  fkv_materializer_options o = materializer_defaults();
  FKV_TAKE(o, from, grouped);
  FKV_TAKE(o, from, act);
  FKV_TAKE(o, from, cache);
  FKV_TAKE(o, from, cos_sin);
  FKV_TAKE(o, from, index_i64);
  FKV_TAKE(o, from, max_tokens);
  FKV_TAKE(o, from, max_position);
  FKV_TAKE(o, from, device);
  FKV_TAKE(o, from, stacked);
  FKV_TAKE(o, from, pool);
  FKV_TAKE(o, from, paged);
  FKV_TAKE(o, from, tp_size);
  FKV_TAKE(o, from, tp_rank);
  FKV_TAKE(o, from, decode_crossover);
  FKV_TAKE(o, from, fp8_gemm);
  FKV_TAKE(o, from, int8_gemm_tokens);
  return o;
}

fkv_weight_quant weight_quant_defaults() {
  fkv_weight_quant q{};
  q.struct_size = sizeof(q);
  return q;
}

// How the caller's weights are stored: the format (parsed by name: a packed 4-bit scheme is an
// UnsupportedError, an unknown name an ArgumentError) and the per-layer scale pointers. NULL
// quant, or a NULL or empty format, is dense. Checked before any GPU work.
struct WeightQuant {
  fkv::WeightFormat format = fkv::WeightFormat::Dense;
  const float* const* scales = nullptr;
};

WeightQuant read_weight_quant(const fkv_weight_quant* given) {
  WeightQuant r;
  if (given == nullptr) return r;
  check_struct_size(*given, "fkv_weight_quant", "fkv_weight_quant_init");
  fkv_weight_quant q = weight_quant_defaults();
  FKV_TAKE(q, *given, format);
  FKV_TAKE(q, *given, scales);
  if (q.format != nullptr && *q.format != '\0') r.format = fkv::parse_weight_format(q.format);
  r.scales = q.scales;
  if (!fkv::is_quantized(r.format) && r.scales != nullptr)
    throw fkv::ArgumentError(
        "quant.scales is given, but quant.format is dense: name the weights' format "
        "(fp8_tensor, fp8_channel, fp8_block, int8_channel), or pass no scales");
  if (fkv::is_quantized(r.format) && r.scales == nullptr)
    throw fkv::ArgumentError("quant.scales is NULL: " + fkv::to_string(r.format) +
                             " weights need one DEVICE fp32 scale pointer per attention layer");
  return r;
}

// The C weights as fkv::MaterializerWeights; per-layer host vectors get their lengths from
// the plan (head_dim, this rank's heads), `layers` the model numbers in attention-layer order;
// `quant` says how w_kv is stored.
fkv::MaterializerWeights materializer_weights(const fkv::Plan& plan, const std::vector<int>& layers,
                                              const fkv_materializer_weights& w,
                                              const WeightQuant& quant) {
  if (w.num_layers < 0) throw fkv::ArgumentError("weights.num_layers must be >= 0");
  require(w.w_kv, "weights.w_kv");
  const auto L = static_cast<std::size_t>(w.num_layers);
  fkv::MaterializerWeights mw;
  mw.w_kv.assign(w.w_kv, w.w_kv + L);
  mw.w_kv_row_stride = w.w_kv_row_stride;
  mw.format = quant.format;
  if (quant.scales != nullptr) mw.w_scale.assign(quant.scales, quant.scales + L);
  if (w.eps) {
    mw.eps.assign(w.eps, w.eps + L);
    for (std::size_t l = 0; l < L; ++l)
      if (!std::isfinite(mw.eps[l]) || !(mw.eps[l] > 0.0f))
        throw fkv::ArgumentError("weights.eps[" + std::to_string(l) + "] is " +
                                 std::to_string(mw.eps[l]) +
                                 ": the K-norm eps must be a finite number > 0");
  }
  std::vector<std::size_t> head_dim(L, 0), row(L, 0);
  for (std::size_t i = 0; i < L && i < layers.size(); ++i)
    for (const fkv::LayerGroup& g : plan.groups)
      for (int n : g.layers)
        if (n == layers[i]) {
          head_dim[i] = static_cast<std::size_t>(g.attn.head_dim);
          row[i] = 2 * static_cast<std::size_t>(g.attn.num_kv_heads) * head_dim[i];
        }
  if (w.k_norm)
    for (std::size_t l = 0; l < L; ++l) {
      require(w.k_norm[l], "weights.k_norm[l]");
      mw.k_norm.emplace_back(w.k_norm[l], w.k_norm[l] + head_dim[l]);
    }
  if (w.kv_bias)
    for (std::size_t l = 0; l < L; ++l) {
      require(w.kv_bias[l], "weights.kv_bias[l]");
      mw.kv_bias.emplace_back(w.kv_bias[l], w.kv_bias[l] + row[l]);
    }
  return mw;
}

}  // namespace

extern "C" {

// ---- the materializer ---------------------------------------------------------------------

void fkv_materializer_options_init_v2(fkv_materializer_options* options, size_t struct_size) {
  init_sized(options, struct_size, materializer_defaults());
}

void fkv_weight_quant_init_sized(fkv_weight_quant* quant, size_t struct_size) {
  init_sized(quant, struct_size, weight_quant_defaults());
}

fkv_status fkv_weight_format_parse(const char* name, const char** canonical) {
  return guard([&] {
    require(name, "name");
    require(canonical, "canonical");
    *canonical = intern(fkv::to_string(fkv::parse_weight_format(name)));
    return FKV_OK;
  });
}

fkv_status fkv_materializer_create_v2(const fkv_config* config, const fkv_materializer_weights* w,
                                      const fkv_materializer_options* options,
                                      fkv_materializer** out) {
  return fkv_materializer_create_v3(config, w, nullptr, options, out);
}

fkv_status fkv_materializer_create_v3(const fkv_config* config, const fkv_materializer_weights* w,
                                      const fkv_weight_quant* quant,
                                      const fkv_materializer_options* options,
                                      fkv_materializer** out) {
  return guard([&] {
    require(config, "config");
    require(w, "weights");
    require(out, "out");
    *out = nullptr;
    const WeightQuant q = read_weight_quant(quant);
    const fkv_materializer_options o =
        options ? read_materializer_options(*options) : materializer_defaults();
    const fkv::Plan plan =
        fkv::shard_plan(fkv::make_plan(config->config, o.grouped ? fkv::ValidationMode::Grouped
                                                                 : fkv::ValidationMode::Strict),
                        fkv::TensorParallel{o.tp_size, o.tp_rank});
    std::vector<int> layers;
    for (const fkv::LayerAttention* layer : config->config.attention_layers())
      layers.push_back(layer->index);
    const fkv::MaterializerWeights mw = materializer_weights(plan, layers, *w, q);
    fkv::MaterializerOptions mo;
    mo.mode = o.grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict;
    mo.act = to_cpp(o.act);
    mo.cache = to_cpp(o.cache);
    mo.cos_sin = to_cpp(o.cos_sin);
    mo.index = o.index_i64 ? fkv::IndexType::I64 : fkv::IndexType::I32;
    mo.max_tokens = o.max_tokens;
    mo.max_position = o.max_position;
    mo.device = o.device;
    mo.stacked = o.stacked != 0;
    mo.pool = o.pool != 0;
    mo.paged = o.paged != 0;
    mo.tp_size = o.tp_size;
    mo.tp_rank = o.tp_rank;
    mo.decode_crossover = o.decode_crossover;
    mo.fp8_gemm = o.fp8_gemm != 0;
    mo.int8_gemm_tokens = o.int8_gemm_tokens;
    auto r = std::make_unique<fkv_materializer>();
    r->m = std::make_unique<fkv::FusedKVMaterializer>(config->config, w->hidden_size, mw, mo);
    nlohmann::json groups = nlohmann::json::array();
    for (const fkv::LayerGroup& g : r->m->plan().groups)
      groups.push_back({{"layers", g.layers},
                        {"spec", fkv::to_json(g.attn)},
                        {"first_kv_head", g.heads.first_head},
                        {"total_kv_heads", g.heads.total_heads}});
    r->plan_json = nlohmann::json{{"mode", o.grouped ? "grouped" : "strict"},
                                  {"tp_size", o.tp_size},
                                  {"tp_rank", o.tp_rank},
                                  {"groups", groups},
                                  {"skipped", r->m->plan().skipped_layers}}
                       .dump();
    *out = r.release();
    return FKV_OK;
  });
}

void fkv_materializer_free(fkv_materializer* m) { delete m; }

int fkv_materializer_num_layers(const fkv_materializer* m) {
  return m ? static_cast<int>(m->m->layers().size()) : 0;
}
int fkv_materializer_num_groups(const fkv_materializer* m) {
  return m ? static_cast<int>(m->m->plan().groups.size()) : 0;
}
int64_t fkv_materializer_decode_crossover(const fkv_materializer* m) {
  return m ? m->m->decode_crossover() : 0;
}
int fkv_materializer_fp8_gemm(const fkv_materializer* m) { return m && m->m->fp8_gemm() ? 1 : 0; }
int64_t fkv_materializer_int8_gemm_tokens(const fkv_materializer* m) {
  return m ? m->m->int8_gemm_tokens() : 0;
}
fkv_status fkv_materializer_layers(const fkv_materializer* m, int* layers, size_t capacity) {
  return guard([&] {
    require(m, "materializer");
    return copy_ints(m->m->layers(), layers, capacity, "attention layers");
  });
}
const char* fkv_materializer_plan_json(const fkv_materializer* m) {
  return m ? m->plan_json.c_str() : "";
}
const char* fkv_materializer_weight_format(const fkv_materializer* m) {
  return m ? intern(fkv::to_string(m->m->weight_format())) : "";
}

fkv_status fkv_materializer_refresh_weights(fkv_materializer* m, const fkv_materializer_weights* w,
                                            void* stream) {
  return fkv_materializer_refresh_weights_v2(m, w, nullptr, stream);
}

fkv_status fkv_materializer_refresh_weights_v2(fkv_materializer* m,
                                               const fkv_materializer_weights* w,
                                               const fkv_weight_quant* quant, void* stream) {
  return guard([&] {
    require(m, "materializer");
    require(w, "weights");
    const WeightQuant q = read_weight_quant(quant);
    m->m->refresh_weights(materializer_weights(m->m->plan(), m->m->layers(), *w, q),
                          static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

fkv_status fkv_materializer_stacked(fkv_materializer* m, const fkv_materializer_input* in,
                                    void* const* k_out, void* const* v_out, size_t num_groups,
                                    void* stream) {
  return guard([&] {
    require(m, "materializer");
    require(in, "input");
    require(k_out, "k_out");
    require(v_out, "v_out");
    fkv::MaterializerInput mi{in->hidden, in->num_tokens, in->hidden_stride, in->positions};
    m->m->materialize_stacked(mi, std::span<void* const>(k_out, num_groups),
                              std::span<void* const>(v_out, num_groups),
                              static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

fkv_status fkv_materializer_pool(fkv_materializer* m, const fkv_materializer_input* in,
                                 const fkv_materializer_pool_output* out, void* stream) {
  return guard([&] {
    require(m, "materializer");
    require(in, "input");
    require(out, "pool output");
    require(out->k_buffers, "k_buffers");
    require(out->v_buffers, "v_buffers");
    if (out->num_layers < 0) throw fkv::ArgumentError("pool output num_layers must be >= 0");
    const auto L = static_cast<std::size_t>(out->num_layers);
    fkv::FusedKVMaterializer::Pool p;
    p.cache_loc = out->cache_loc;
    p.k_buffers = std::span<void* const>(out->k_buffers, L);
    p.v_buffers = std::span<void* const>(out->v_buffers, L);
    p.num_slots = out->num_slots;
    p.slot_stride = out->slot_stride;
    if (out->k_scales) p.k_scales = std::span<const float>(out->k_scales, L);
    if (out->v_scales) p.v_scales = std::span<const float>(out->v_scales, L);
    p.k_scales_device = out->k_scales_device;
    p.v_scales_device = out->v_scales_device;
    p.block_size = out->block_size;
    p.block_stride = out->block_stride;
    p.head_stride = out->head_stride;
    if (out->slot_mappings) p.slot_mappings = std::span<const void* const>(out->slot_mappings, L);
    fkv::MaterializerInput mi{in->hidden, in->num_tokens, in->hidden_stride, in->positions};
    m->m->materialize_pool(mi, p, static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

namespace {

fkv_kv_layout kv_layout_defaults() {
  fkv_kv_layout l{};
  l.struct_size = sizeof(l);
  return l;
}

}  // namespace

void fkv_kv_layout_init_sized(fkv_kv_layout* layout, size_t struct_size) {
  init_sized(layout, struct_size, kv_layout_defaults());
}

fkv_status fkv_materializer_write(fkv_materializer* m, const fkv_materializer_input* in,
                                  const fkv_kv_layout* out, void* stream) {
  return guard([&] {
    require(m, "materializer");
    require(in, "input");
    require(out, "layout");
    check_struct_size(*out, "fkv_kv_layout", "fkv_kv_layout_init");
    fkv_kv_layout c = kv_layout_defaults();
    FKV_TAKE(c, *out, kind);
    FKV_TAKE(c, *out, cache_loc);
    FKV_TAKE(c, *out, slot_mappings);
    FKV_TAKE(c, *out, k_buffers);
    FKV_TAKE(c, *out, v_buffers);
    FKV_TAKE(c, *out, num_buffers);
    FKV_TAKE(c, *out, base);
#define FKV_TAKE_INT(f)                                                   \
  static_assert(std::is_same_v<decltype(fkv_kv_layout::f), std::int64_t>, \
                "fkv_kv_layout." #f " must be int64_t like KVLayout's");  \
  FKV_TAKE(c, *out, f);
    FKV_KV_LAYOUT_INT_FIELDS(FKV_TAKE_INT)
#undef FKV_TAKE_INT
    FKV_TAKE(c, *out, k_scales);
    FKV_TAKE(c, *out, v_scales);
    FKV_TAKE(c, *out, k_scales_device);
    FKV_TAKE(c, *out, v_scales_device);
    if (c.num_buffers < 0) throw fkv::ArgumentError("layout num_buffers must be >= 0");
    if (c.num_buffers > 0 && (c.k_buffers == nullptr || c.v_buffers == nullptr))
      throw fkv::ArgumentError("layout k_buffers / v_buffers are NULL with num_buffers " +
                               std::to_string(c.num_buffers));
    const auto B = static_cast<std::size_t>(c.num_buffers);
    const std::size_t L = m->m->layers().size();
    fkv::KVLayout l;
    if (c.kind != nullptr && *c.kind != '\0') l.kind = fkv::parse_kv_layout_kind(c.kind);
    l.cache_loc = c.cache_loc;
    if (c.slot_mappings) l.slot_mappings = std::span<const void* const>(c.slot_mappings, L);
    if (B > 0) {
      l.k_buffers = std::span<void* const>(c.k_buffers, B);
      l.v_buffers = std::span<void* const>(c.v_buffers, B);
    }
    l.base = c.base;
#define FKV_COPY_INT(f) l.f = c.f;
    FKV_KV_LAYOUT_INT_FIELDS(FKV_COPY_INT)
#undef FKV_COPY_INT
    if (c.k_scales) l.k_scales = std::span<const float>(c.k_scales, L);
    if (c.v_scales) l.v_scales = std::span<const float>(c.v_scales, L);
    l.k_scales_device = c.k_scales_device;
    l.v_scales_device = c.v_scales_device;
    fkv::MaterializerInput mi{in->hidden, in->num_tokens, in->hidden_stride, in->positions};
    m->m->materialize(mi, l, static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

void* fkv_materializer_error_flag(const fkv_materializer* m) {
  return m ? reinterpret_cast<void*>(static_cast<std::uintptr_t>(m->m->error_flag())) : nullptr;
}

fkv_status fkv_materializer_take_error_flag(fkv_materializer* m, void* stream,
                                            unsigned int* flags) {
  return guard([&] {
    require(m, "materializer");
    require(flags, "flags");
    *flags = m->m->take_error_flag(static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

// ---- entry points of programs built before struct_size -------------------------------------
// fkv.h maps these names to the *_v2 functions with macros; programs compiled against the
// first fkv.h call the symbols themselves, with the first layout (no struct_size, no
// decode_crossover). They read and write exactly that layout.

#undef fkv_materializer_options_init
#undef fkv_materializer_create

struct fkv_materializer_options_v1 {
  int grouped;
  fkv_dtype act;
  fkv_dtype cache;
  fkv_dtype cos_sin;
  int index_i64;
  int64_t max_tokens;
  int64_t max_position;
  int device;
  int stacked;
  int pool;
  int paged;
  int tp_size;
  int tp_rank;
};

FKV_API void fkv_materializer_options_init(fkv_materializer_options_v1* options);
FKV_API fkv_status fkv_materializer_create(const fkv_config* config,
                                           const fkv_materializer_weights* weights,
                                           const fkv_materializer_options_v1* options,
                                           fkv_materializer** out);

void fkv_materializer_options_init(fkv_materializer_options_v1* options) {
  if (!options) return;
  const fkv_materializer_options d = materializer_defaults();
  *options = {d.grouped, d.act,     d.cache, d.cos_sin, d.index_i64, d.max_tokens, d.max_position,
              d.device,  d.stacked, d.pool,  d.paged,   d.tp_size,   d.tp_rank};
}

fkv_status fkv_materializer_create(const fkv_config* config, const fkv_materializer_weights* w,
                                   const fkv_materializer_options_v1* v1, fkv_materializer** out) {
  if (v1 == nullptr) return fkv_materializer_create_v2(config, w, nullptr, out);
  fkv_materializer_options o = materializer_defaults();
  o.grouped = v1->grouped;
  o.act = v1->act;
  o.cache = v1->cache;
  o.cos_sin = v1->cos_sin;
  o.index_i64 = v1->index_i64;
  o.max_tokens = v1->max_tokens;
  o.max_position = v1->max_position;
  o.device = v1->device;
  o.stacked = v1->stacked;
  o.pool = v1->pool;
  o.paged = v1->paged;
  o.tp_size = v1->tp_size;
  o.tp_rank = v1->tp_rank;
  return fkv_materializer_create_v2(config, w, &o, out);
}

}  // extern "C"
