// c_api_config: the C API's configs, validation and plans, the kernel description of a plan
// group and its cos/sin table (include/fkv/fkv.h; shared helpers in c_api_internal.hpp).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "c_api_internal.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/precompile.hpp"
#include "fkv/rope.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

struct fkv_plan {
  fkv::Plan plan;
  bool grouped = false;
  std::int64_t max_position_embeddings = 0;
  std::string json;
};

using namespace fkv::c_api;

namespace {

// fkv_k_norm's values are KNormKind's numbers (fkv/k_norm.hpp).
static_assert(FKV_K_NORM_NONE == static_cast<int>(fkv::KNormKind::None) &&
              FKV_K_NORM_RMS == static_cast<int>(fkv::KNormKind::Rms) &&
              FKV_K_NORM_RMS_ONE_PLUS == static_cast<int>(fkv::KNormKind::RmsOnePlus));

fkv_k_norm to_c(fkv::KNormKind k) { return static_cast<fkv_k_norm>(k); }

void fill(const fkv::AttentionSpec& s, fkv_attention_info* out) {
  out->num_kv_heads = s.num_kv_heads;
  out->head_dim = s.head_dim;
  out->rotary_dim = s.rotary_dim;
  out->is_neox_style = s.is_neox_style ? 1 : 0;
  out->k_norm = to_c(s.k_norm);
  out->rope_theta = s.rope.theta;
  out->rope_scaling_type = intern(s.rope.scaling_type);
}

// The group checks and texts are the library's (fkv/precompile.hpp), which the Python binding
// uses too.
const fkv::LayerGroup& group_of(const fkv_plan* plan, int group) {
  require(plan, "plan");
  return fkv::plan_group(plan->plan, group);
}

}  // namespace

extern "C" {

// ---- model configs ---------------------------------------------------------------------------

fkv_status fkv_config_load(const char* path, fkv_config** out) {
  return guard([&] {
    require(path, "path");
    require(out, "out");
    *out = nullptr;
    *out = new fkv_config{fkv::ModelConfig::from_file(path)};
    return FKV_OK;
  });
}

fkv_status fkv_config_from_json(const char* json_text, const char* name, fkv_config** out) {
  return guard([&] {
    require(json_text, "json_text");
    require(out, "out");
    *out = nullptr;
    *out = new fkv_config{
        fkv::ModelConfig::from_json(std::string_view(json_text), name ? name : "<string>")};
    return FKV_OK;
  });
}

void fkv_config_free(fkv_config* config) { delete config; }

int fkv_config_num_layers(const fkv_config* c) {
  return c ? static_cast<int>(c->config.layers.size()) : 0;
}
int fkv_config_hidden_size(const fkv_config* c) { return c ? c->config.hidden_size.value : 0; }
int64_t fkv_config_max_position_embeddings(const fkv_config* c) {
  return c ? c->config.max_position_embeddings.value : 0;
}
const char* fkv_config_dtype(const fkv_config* c) { return c ? c->config.dtype.value.c_str() : ""; }
const char* fkv_config_architecture(const fkv_config* c) {
  return c ? c->config.architecture.c_str() : "";
}

fkv_status fkv_config_weight_format(const fkv_config* config, const char** format) {
  return guard([&] {
    require(config, "config");
    require(format, "format");
    *format = "";
    const fkv::DeclaredWeights& w = config->config.weights;
    if (w.refused()) w.raise();  // its kind's status, with the text
    if (w.declared()) *format = intern(fkv::to_string(w.format));
    return FKV_OK;
  });
}

fkv_status fkv_config_layer(const fkv_config* config, int layer, fkv_layer_info* out) {
  return guard([&] {
    require(config, "config");
    require(out, "out");
    const auto& layers = config->config.layers;
    if (layer < 0 || layer >= static_cast<int>(layers.size()))
      throw fkv::ArgumentError("layer " + std::to_string(layer) +
                               " is out of range: the model has " + std::to_string(layers.size()) +
                               " layers");
    const fkv::LayerAttention& l = layers[static_cast<std::size_t>(layer)];
    out->index = l.index;
    out->is_attention = l.is_attention() ? 1 : 0;
    out->is_sliding = l.kind.value == fkv::LayerKind::SlidingAttention ? 1 : 0;
    out->num_kv_heads = l.num_kv_heads.value;
    out->head_dim = l.head_dim.value;
    out->rotary_dim = l.rotary_dim.value;
    out->is_neox_style = l.is_neox_style.value ? 1 : 0;
    out->k_norm = to_c(l.k_norm.value);
    out->eps = l.eps.value;
    out->rope_theta = l.rope.value.theta;
    out->sliding_window = l.sliding_window;
    out->unsupported = l.unsupported.empty() ? 0 : 1;
    return FKV_OK;
  });
}

// ---- validation and plans --------------------------------------------------------------------

fkv_status fkv_validate(const fkv_config* config, fkv_attention_info* out) {
  return guard([&] {
    require(config, "config");
    const fkv::AttentionSpec spec = fkv::validate(config->config);
    if (out) fill(spec, out);
    return FKV_OK;
  });
}

fkv_status fkv_plan_create(const fkv_config* config, int grouped, fkv_plan** out) {
  return guard([&] {
    require(config, "config");
    require(out, "out");
    *out = nullptr;
    auto p = std::make_unique<fkv_plan>();
    p->grouped = grouped != 0;
    p->plan = fkv::make_plan(
        config->config, p->grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict);
    p->max_position_embeddings = config->config.max_position_embeddings.value;
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : p->plan.groups)
      groups.push_back({{"layers", g.layers}, {"spec", fkv::to_json(g.attn)}});
    p->json = nlohmann::json{{"mode", p->grouped ? "grouped" : "strict"},
                             {"groups", groups},
                             {"skipped", p->plan.skipped_layers}}
                  .dump();
    *out = p.release();
    return FKV_OK;
  });
}

void fkv_plan_free(fkv_plan* plan) { delete plan; }

int fkv_plan_num_groups(const fkv_plan* plan) {
  return plan ? static_cast<int>(plan->plan.groups.size()) : 0;
}

int fkv_plan_group_num_layers(const fkv_plan* plan, int group) {
  if (!plan || group < 0 || group >= static_cast<int>(plan->plan.groups.size())) return 0;
  return static_cast<int>(plan->plan.groups[static_cast<std::size_t>(group)].layers.size());
}

fkv_status fkv_plan_group_layers(const fkv_plan* plan, int group, int* layers, size_t capacity) {
  return guard(
      [&] { return copy_ints(group_of(plan, group).layers, layers, capacity, "group layers"); });
}

fkv_status fkv_plan_group_spec(const fkv_plan* plan, int group, fkv_attention_info* out) {
  return guard([&] {
    require(out, "out");
    fill(group_of(plan, group).attn, out);
    return FKV_OK;
  });
}

int fkv_plan_num_skipped(const fkv_plan* plan) {
  return plan ? static_cast<int>(plan->plan.skipped_layers.size()) : 0;
}

fkv_status fkv_plan_skipped_layers(const fkv_plan* plan, int* layers, size_t capacity) {
  return guard([&] {
    require(plan, "plan");
    return copy_ints(plan->plan.skipped_layers, layers, capacity, "skipped layers");
  });
}

const char* fkv_plan_json(const fkv_plan* plan) { return plan ? plan->json.c_str() : ""; }

// ---- kernel descriptions ---------------------------------------------------------------------

fkv_status fkv_plan_kernel_desc(const fkv_plan* plan, int group, fkv_dtype act, fkv_dtype cache,
                                int mode_pool, fkv_kernel_desc* out) {
  return guard([&] {
    require(out, "out");
    const fkv::KernelSpec s =
        fkv::make_kernel_spec(group_of(plan, group).attn, to_cpp(act), to_cpp(cache),
                              mode_pool ? fkv::OutputMode::Pool : fkv::OutputMode::Stacked);
    *out = fkv_kernel_desc{};
    out->num_kv_heads = s.num_kv_heads;
    out->head_dim = s.head_dim;
    out->rotary_dim = s.rotary_dim;
    out->neox = s.neox ? 1 : 0;
    out->k_norm = to_c(s.k_norm);
    out->act = to_c(s.act);
    out->cache = to_c(s.cache);
    out->cos_sin = to_c(s.cos_sin);
    out->positions_i64 = s.positions == fkv::IndexType::I64 ? 1 : 0;
    out->slots_i64 = s.slots == fkv::IndexType::I64 ? 1 : 0;
    out->mode_pool = mode_pool ? 1 : 0;
    out->debug = 0;
    return FKV_OK;
  });
}

// ---- RoPE tables -----------------------------------------------------------------------------

fkv_status fkv_plan_cos_sin(const fkv_plan* plan, int group, int64_t max_position, fkv_dtype dtype,
                            void* out, size_t out_bytes, size_t* bytes_needed) {
  return guard([&] {
    require(plan, "plan");
    const fkv::RopeTable table =
        fkv::plan_cos_sin_table(plan->plan, group, max_position, plan->max_position_embeddings);
    const fkv::DType dt = to_cpp(dtype);
    const std::size_t need = table.size_bytes(dt);
    if (bytes_needed) *bytes_needed = need;
    if (out == nullptr) return FKV_OK;
    if (out_bytes < need)
      throw fkv::ArgumentError("the cos/sin buffer holds " + std::to_string(out_bytes) +
                               " bytes, " + std::to_string(need) + " are needed (" +
                               std::to_string(table.max_position()) + " x " +
                               std::to_string(table.rotary_dim()) + " " + fkv::to_string(dt) + ")");
    const std::vector<std::uint8_t> bytes = table.bytes(dt);
    std::memcpy(out, bytes.data(), bytes.size());
    return FKV_OK;
  });
}
}  // extern "C"
