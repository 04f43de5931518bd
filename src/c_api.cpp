// c_api: the C API (include/fkv/fkv.h) over the C++ modules: status and errors, configs, plans,
// dtypes, cos/sin tables, precompilation, kernels and launches. The materializer's entry points
// are in c_api_materializer.cpp; what both share in c_api_internal.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "c_api_internal.hpp"
#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/materialize.hpp"
#include "fkv/precompile.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "fkv/version.hpp"

struct fkv_plan {
  fkv::Plan plan;
  bool grouped = false;
  std::int64_t max_position_embeddings = 0;
  std::string json;
};

struct fkv_kernel {
  const fkv::LoadedKernel* kernel = nullptr;
  std::string name;
  std::string outcome;
  std::string arch;
};

namespace fkv::c_api {
namespace {

// The last error of each thread. glibc runs a thread's thread_local destructors before the
// atexit handlers, so the texts live on the heap behind a trivially destructible pointer: a call
// from an atexit handler finds no destroyed string, only a null pointer, and makes a new pair,
// which the exiting process keeps. The owner frees the pair when any other thread ends.
struct LastError {
  std::string text;
  std::string log;
};
thread_local LastError* t_last = nullptr;
struct LastErrorOwner {
  ~LastErrorOwner() {
    delete t_last;
    t_last = nullptr;
  }
};
thread_local LastErrorOwner t_last_owner;

LastError& last_error() {
  if (t_last == nullptr) {
    t_last = new LastError;
    static_cast<void>(&t_last_owner);  // registers the owner's destructor for this thread
  }
  return *t_last;
}

}  // namespace

fkv_status fail(fkv_status status, std::string text, std::string log) {
  LastError& e = last_error();
  e.text = std::move(text);
  e.log = std::move(log);
  return status;
}

const char* intern(const std::string& s) {
  static std::mutex& mu = *new std::mutex;
  static std::set<std::string>& strings = *new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  return strings.insert(s).first->c_str();
}

fkv::DType to_cpp(fkv_dtype d) {
  switch (d) {
    case FKV_DTYPE_BF16:
      return fkv::DType::BF16;
    case FKV_DTYPE_FP16:
      return fkv::DType::FP16;
    case FKV_DTYPE_FP32:
      return fkv::DType::FP32;
    case FKV_DTYPE_FP8_E4M3:
      return fkv::DType::FP8_E4M3;
    case FKV_DTYPE_FP8_E5M2:
      return fkv::DType::FP8_E5M2;
    case FKV_DTYPE_FORCE_INT_:
      break;
  }
  throw fkv::ArgumentError("invalid fkv_dtype value " + std::to_string(static_cast<int>(d)) +
                           ": use one of the FKV_DTYPE_* constants");
}

fkv_dtype to_c(fkv::DType d) {
  switch (d) {
    case fkv::DType::BF16:
      return FKV_DTYPE_BF16;
    case fkv::DType::FP16:
      return FKV_DTYPE_FP16;
    case fkv::DType::FP32:
      return FKV_DTYPE_FP32;
    case fkv::DType::FP8_E4M3:
      return FKV_DTYPE_FP8_E4M3;
    case fkv::DType::FP8_E5M2:
      return FKV_DTYPE_FP8_E5M2;
  }
  return FKV_DTYPE_BF16;
}

fkv_status copy_ints(const std::vector<int>& from, int* to, size_t capacity, const char* what) {
  if (from.size() > capacity)
    throw fkv::ArgumentError(std::string(what) + ": the buffer holds " + std::to_string(capacity) +
                             " values, " + std::to_string(from.size()) + " are needed");
  if (!from.empty()) require(to, "layers");
  std::copy(from.begin(), from.end(), to);
  return FKV_OK;
}

}  // namespace fkv::c_api

using namespace fkv::c_api;

namespace {

fkv_k_norm to_c(fkv::KNormKind k) {
  switch (k) {
    case fkv::KNormKind::None:
      return FKV_K_NORM_NONE;
    case fkv::KNormKind::Rms:
      return FKV_K_NORM_RMS;
    case fkv::KNormKind::RmsOnePlus:
      return FKV_K_NORM_RMS_ONE_PLUS;
  }
  return FKV_K_NORM_NONE;
}

void fill(const fkv::AttentionSpec& s, fkv_attention_info* out) {
  out->num_kv_heads = s.num_kv_heads;
  out->head_dim = s.head_dim;
  out->rotary_dim = s.rotary_dim;
  out->is_neox_style = s.is_neox_style ? 1 : 0;
  out->k_norm = to_c(s.k_norm);
  out->rope_theta = s.rope.theta;
  out->rope_scaling_type = intern(s.rope.scaling_type);
}

fkv_precompile_options precompile_defaults() {
  fkv_precompile_options o{};
  o.struct_size = sizeof(o);
  return o;
}

fkv_precompile_options read_precompile_options(const fkv_precompile_options& from) {
  check_struct_size(from, "fkv_precompile_options", "fkv_precompile_options_init");
  if (from.struct_size < offsetof(fkv_precompile_options, arch) + sizeof(from.arch))
    throw fkv::ArgumentError("fkv_precompile_options.struct_size is " +
                             std::to_string(from.struct_size) +
                             ": too small to hold arch, which is required");
  fkv_precompile_options o = precompile_defaults();
  FKV_TAKE(o, from, arch);
  FKV_TAKE(o, from, act_dtype);
  FKV_TAKE(o, from, kv_dtype);
  FKV_TAKE(o, from, cos_sin_dtype);
  FKV_TAKE(o, from, index_dtype);
  FKV_TAKE(o, from, modes);
  FKV_TAKE(o, from, cache_dir);
  FKV_TAKE(o, from, strict);
  FKV_TAKE(o, from, jobs);
  FKV_TAKE(o, from, decode_gpu);
  return o;
}

fkv::KernelSpec to_spec(const fkv_kernel_desc& d) {
  fkv::KernelSpec s;
  s.num_kv_heads = d.num_kv_heads;
  s.head_dim = d.head_dim;
  s.rotary_dim = d.rotary_dim;
  s.neox = d.neox != 0;
  s.k_norm = d.k_norm != 0;
  s.act = to_cpp(d.act);
  s.cache = to_cpp(d.cache);
  s.cos_sin = to_cpp(d.cos_sin);
  s.positions = d.positions_i64 ? fkv::IndexType::I64 : fkv::IndexType::I32;
  s.slots = d.slots_i64 ? fkv::IndexType::I64 : fkv::IndexType::I32;
  s.mode = d.mode_pool ? fkv::OutputMode::Pool : fkv::OutputMode::Stacked;
  s.debug_checks = d.debug != 0;
  s.check();
  return s;
}

const fkv::LayerGroup& group_of(const fkv_plan* plan, int group) {
  require(plan, "plan");
  if (group < 0 || group >= static_cast<int>(plan->plan.groups.size()))
    throw fkv::ArgumentError("group " + std::to_string(group) + " is out of range: the plan has " +
                             std::to_string(plan->plan.groups.size()) + " group(s)");
  return plan->plan.groups[static_cast<std::size_t>(group)];
}

fkv::FusedKVInputs to_inputs(const fkv_inputs& in) {
  fkv::FusedKVInputs r;
  r.proj = in.proj;
  r.num_tokens = in.num_tokens;
  r.num_layers = in.num_layers;
  r.proj_stride_token = in.proj_stride_token;
  r.proj_stride_layer = in.proj_stride_layer;
  r.positions = in.positions;
  r.cos_sin = in.cos_sin;
  r.max_position = in.max_position;
  r.cos_sin_stride = in.cos_sin_stride;
  r.k_norm_weight = in.k_norm_weight;
  if (in.eps != nullptr && in.num_layers > 0)
    r.eps = std::span<const float>(in.eps, static_cast<std::size_t>(in.num_layers));
  r.error_flag = in.error_flag;
  return r;
}

}  // namespace

extern "C" {

// ---- status and errors -----------------------------------------------------------------------

const char* fkv_last_error(void) { return t_last ? t_last->text.c_str() : ""; }
const char* fkv_last_error_log(void) { return t_last ? t_last->log.c_str() : ""; }

const char* fkv_status_name(fkv_status status) {
  if (status == FKV_OK) return "FKV_OK";
  for (const fkv::ErrorKindInfo& info : fkv::error_kinds())
    if (info.c_status == status) return info.c_status_name;
  return "FKV_ERR_UNKNOWN";
}

const char* fkv_version(void) { return fkv::kVersion; }

int fkv_driver_available(void) {
  try {
    return fkv::Driver::available() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

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

// ---- dtypes and kernel descriptions ----------------------------------------------------------

fkv_status fkv_dtype_parse(const char* name, fkv_dtype* out) {
  return guard([&] {
    require(name, "name");
    require(out, "out");
    *out = to_c(fkv::parse_dtype(name));
    return FKV_OK;
  });
}

const char* fkv_dtype_name(fkv_dtype dtype) {
  try {
    return fkv::dtype_name(to_cpp(dtype));
  } catch (...) {
    return "?";
  }
}

int fkv_dtype_size(fkv_dtype dtype) {
  try {
    return fkv::dtype_size(to_cpp(dtype));
  } catch (...) {
    return 0;
  }
}

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
    out->k_norm = s.k_norm ? 1 : 0;
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
    const fkv::LayerGroup& g = group_of(plan, group);
    if (g.attn.rotary_dim == 0)
      throw fkv::ArgumentError("group " + std::to_string(group) +
                               " has no RoPE (rotary_dim 0): it needs no cos/sin table");
    if (max_position < 0 || max_position > fkv::kMaxRopePositions)
      throw fkv::ArgumentError("max_position is " + std::to_string(max_position) +
                               ": give the number of positions the cos/sin table must cover, "
                               "from 1 to 2^31, or 0 for the config's max_position_embeddings");
    const std::int64_t rows = max_position > 0 ? max_position : plan->max_position_embeddings;
    if (rows <= 0)
      throw fkv::ArgumentError(
          "max_position is 0 and the config has no max_position_embeddings: pass the number of "
          "positions the cos/sin table must cover");
    fkv::RopeOptions options;
    options.max_position_embeddings = plan->max_position_embeddings;
    const fkv::RopeTable table(g.attn.rope, g.attn.rotary_dim, rows, options);
    const fkv::DType dt = to_cpp(dtype);
    const std::size_t need = table.size_bytes(dt);
    if (bytes_needed) *bytes_needed = need;
    if (out == nullptr) return FKV_OK;
    if (out_bytes < need)
      throw fkv::ArgumentError("the cos/sin buffer holds " + std::to_string(out_bytes) +
                               " bytes, " + std::to_string(need) + " are needed (" +
                               std::to_string(rows) + " x " + std::to_string(g.attn.rotary_dim) +
                               " " + fkv::to_string(dt) + ")");
    const std::vector<std::uint8_t> bytes = table.bytes(dt);
    std::memcpy(out, bytes.data(), bytes.size());
    return FKV_OK;
  });
}

// ---- precompilation --------------------------------------------------------------------------

void fkv_precompile_options_init_v2(fkv_precompile_options* options, size_t struct_size) {
  init_sized(options, struct_size, precompile_defaults());
}

fkv_status fkv_precompile_with_options_v2(const fkv_config* config,
                                          const fkv_precompile_options* given,
                                          fkv_precompile_result* result) {
  return guard([&] {
    require(config, "config");
    require(given, "options");
    const fkv_precompile_options read = read_precompile_options(*given);
    const fkv_precompile_options* options = &read;
    require(options->arch, "arch");
    auto given = [](const char* s) { return s != nullptr && *s != '\0'; };
    if (options->jobs < 0)
      throw fkv::ArgumentError("jobs is " + std::to_string(options->jobs) +
                               ": give 0 (one per core) or more");
    const fkv::ArchTarget target = fkv::resolve_arch(options->arch).target;
    const fkv::Plan plan =
        fkv::make_plan(config->config, options->strict ? fkv::ValidationMode::Strict
                                                       : fkv::ValidationMode::Grouped);
    fkv::VariantOptions o;
    o.act = given(options->act_dtype) ? fkv::parse_dtype(options->act_dtype)
                                      : fkv::act_dtype_of(config->config.dtype.value);
    o.cache = given(options->kv_dtype) ? fkv::parse_dtype(options->kv_dtype) : o.act;
    if (given(options->cos_sin_dtype)) o.cos_sin = fkv::parse_dtype(options->cos_sin_dtype);
    if (given(options->index_dtype)) {
      const std::string index = options->index_dtype;
      if (index != "int32" && index != "int64")
        throw fkv::ArgumentError("index_dtype '" + index + "' is not int32 or int64");
      o.index = index == "int32" ? fkv::IndexType::I32 : fkv::IndexType::I64;
    }
    if (given(options->modes)) {
      const std::string modes = options->modes;
      if (modes != "both" && modes != "stacked" && modes != "pool")
        throw fkv::ArgumentError("modes '" + modes + "' is not both, stacked or pool");
      o.stacked = modes != "pool";
      o.pool = modes != "stacked";
    }

    std::unique_ptr<fkv::KernelCache> own;
    fkv::KernelCache* cache = &fkv::KernelCache::global();
    if (given(options->cache_dir)) {
      fkv::CacheOptions opts = fkv::CacheOptions::from_env();
      opts.root = options->cache_dir;
      opts.disabled = false;
      own = std::make_unique<fkv::KernelCache>(opts);
      cache = own.get();
    }
    fkv::DecodePrecompile decode;
    if (given(options->decode_gpu)) {
      const fkv::MeasuredDecodeGpu g = fkv::measured_decode_gpu(options->decode_gpu);
      decode = {g.sm_count, g.crossover, config->config.hidden_size.value};
    }
    const fkv::PrecompileResult r = fkv::precompile(
        plan, o, {target}, *cache, static_cast<unsigned>(options->jobs), {}, decode);
    if (result) *result = {r.kernels.size(), r.compiled(), r.not_persisted()};
    if (r.not_persisted() > 0) {
      std::string names;
      for (const auto& k : r.kernels)
        if (!k.persisted()) names += (names.empty() ? "" : ", ") + k.short_name();
      throw fkv::CacheError(
          std::to_string(r.not_persisted()) + " of " + std::to_string(r.kernels.size()) +
          " kernels were compiled but not saved to the cache (" +
          (cache->memory_only() ? "no usable cache directory" : "publishing failed") +
          "; see the log): " + names);
    }
    if (r.over_cap())  // as the CLI's exit 8: the next publish there would evict some of them
      throw fkv::CacheError(
          "the " + std::to_string(r.kernels.size()) + " kernels take " +
          std::to_string(r.bytes_on_disk) +
          " bytes in the cache, more than FKV_CACHE_MAX_BYTES=" + std::to_string(r.max_bytes) +
          " allows: they are all saved now, but the next kernel published there evicts some. "
          "Raise FKV_CACHE_MAX_BYTES, or unset it for the image's cache");
    return FKV_OK;
  });
}

fkv_status fkv_precompile(const fkv_config* config, const char* arch, const char* act_dtype,
                          const char* kv_dtype, const char* cache_dir, size_t* n_variants,
                          size_t* n_compiled) {
  fkv_precompile_options o;
  fkv_precompile_options_init(&o);
  o.arch = arch;
  o.act_dtype = act_dtype;
  o.kv_dtype = kv_dtype;
  o.cache_dir = cache_dir;
  fkv_precompile_result r{};
  const fkv_status status = fkv_precompile_with_options(config, &o, &r);
  if (n_variants) *n_variants = r.n_variants;
  if (n_compiled) *n_compiled = r.n_compiled;
  return status;
}

// ---- kernels and launches --------------------------------------------------------------------

fkv_status fkv_kernel_prepare(const fkv_kernel_desc* desc, int device, fkv_kernel** out) {
  return guard([&] {
    require(desc, "desc");
    require(out, "out");
    *out = nullptr;
    const fkv::KernelSpec spec = to_spec(*desc);
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(spec, device);
    *out = new fkv_kernel{&k, spec.short_name(), fkv::to_string(k.outcome), k.arch.name()};
    return FKV_OK;
  });
}

void fkv_kernel_free(fkv_kernel* kernel) { delete kernel; }

const char* fkv_kernel_name(const fkv_kernel* kernel) { return kernel ? kernel->name.c_str() : ""; }
const char* fkv_kernel_outcome(const fkv_kernel* kernel) {
  return kernel ? kernel->outcome.c_str() : "";
}
const char* fkv_kernel_arch(const fkv_kernel* kernel) { return kernel ? kernel->arch.c_str() : ""; }

fkv_status fkv_materialize_stacked(const fkv_kernel* kernel, const fkv_inputs* in, void* k_out,
                                   void* v_out, void* stream) {
  return guard([&] {
    require(kernel, "kernel");
    require(in, "inputs");
    fkv::materialize_stacked(*kernel->kernel, to_inputs(*in), fkv::StackedOutput{k_out, v_out},
                             static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

fkv_status fkv_materialize_pool(const fkv_kernel* kernel, const fkv_inputs* in,
                                const void* cache_loc, void* const* k_ptrs, void* const* v_ptrs,
                                int64_t num_slots, int64_t slot_stride, const float* k_scales,
                                const float* v_scales, void* stream) {
  return guard([&] {
    require(kernel, "kernel");
    require(in, "inputs");
    require(k_ptrs, "k_ptrs");
    require(v_ptrs, "v_ptrs");
    const auto L = static_cast<std::size_t>(std::max<int64_t>(in->num_layers, 0));
    fkv::PoolOutput out;
    out.cache_loc = cache_loc;
    out.k_buffers = std::span<void* const>(k_ptrs, L);
    out.v_buffers = std::span<void* const>(v_ptrs, L);
    out.num_slots = num_slots;
    out.slot_stride = slot_stride;
    if (k_scales) out.k_scales = std::span<const float>(k_scales, L);
    if (v_scales) out.v_scales = std::span<const float>(v_scales, L);
    fkv::materialize_pool(*kernel->kernel, to_inputs(*in), out, static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

// ---- entry points of programs built before struct_size -------------------------------------
// fkv.h maps these names to the *_v2 functions with macros; programs compiled against the
// first fkv.h call the symbols themselves, with the first layout (no struct_size, no
// decode_gpu). They read and write exactly that layout. (The materializer's: in
// c_api_materializer.cpp.)

#undef fkv_precompile_options_init
#undef fkv_precompile_with_options

struct fkv_precompile_options_v1 {
  const char* arch;
  const char* act_dtype;
  const char* kv_dtype;
  const char* cos_sin_dtype;
  const char* index_dtype;
  const char* modes;
  const char* cache_dir;
  int strict;
  int jobs;
};

FKV_API void fkv_precompile_options_init(fkv_precompile_options_v1* options);
FKV_API fkv_status fkv_precompile_with_options(const fkv_config* config,
                                               const fkv_precompile_options_v1* options,
                                               fkv_precompile_result* result);

void fkv_precompile_options_init(fkv_precompile_options_v1* options) {
  if (options) *options = fkv_precompile_options_v1{};
}

fkv_status fkv_precompile_with_options(const fkv_config* config,
                                       const fkv_precompile_options_v1* v1,
                                       fkv_precompile_result* result) {
  if (v1 == nullptr) return fkv_precompile_with_options_v2(config, nullptr, result);
  fkv_precompile_options o = precompile_defaults();
  o.arch = v1->arch;
  o.act_dtype = v1->act_dtype;
  o.kv_dtype = v1->kv_dtype;
  o.cos_sin_dtype = v1->cos_sin_dtype;
  o.index_dtype = v1->index_dtype;
  o.modes = v1->modes;
  o.cache_dir = v1->cache_dir;
  o.strict = v1->strict;
  o.jobs = v1->jobs;
  return fkv_precompile_with_options_v2(config, &o, result);
}

}  // extern "C"
