// native_config: configs, plans and kernels for fkv_jit (Config, Plan, validate, precompile,
// Kernel) over the C++ API. A config is parsed once, into a Config object (native_config.hpp);
// plans, kernel descriptions, cos/sin tables and precompilation read that object. Structured
// facts cross as JSON text, which fkv_jit turns into its dataclasses.
#include "native_config.hpp"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/precompile.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "native.hpp"

namespace fkv_native {
namespace {

using json = nlohmann::json;

// ---- configs ---------------------------------------------------------------------------------

ConfigRef config_load(ffi::String path) {
  return guarded(
      [&] { return ConfigRef(fkv::ModelConfig::from_file(c_str(path, "the config path"))); });
}

ConfigRef config_from_json(ffi::String text, ffi::String name) {
  return guarded([&] {
    c_str(text, "the config JSON text");
    return ConfigRef(fkv::ModelConfig::from_json(std::string_view(text.data(), text.size()),
                                                 c_str(name, "the config name")));
  });
}

// What fkv_jit.Config shows: {"num_layers", "hidden_size", "max_position_embeddings", "dtype",
// "architecture", "layers": [LayerInfo's fields], "weights": the K/V weight format
// quantization_config declares (null when none, else {"format", "source"}, or
// {"error", "python_class"} for a declaration fkv-jit does not read)}.
ffi::String config_info(ConfigRef c) {
  return guarded([&] {
    const fkv::ModelConfig& m = c->config;
    json layers = json::array();
    for (const fkv::LayerAttention& l : m.layers)
      layers.push_back({{"index", l.index},
                        {"is_attention", l.is_attention()},
                        {"is_sliding", l.kind.value == fkv::LayerKind::SlidingAttention},
                        {"num_kv_heads", l.num_kv_heads.value},
                        {"head_dim", l.head_dim.value},
                        {"rotary_dim", l.rotary_dim.value},
                        {"is_neox_style", l.is_neox_style.value},
                        {"k_norm", fkv::to_string(l.k_norm.value)},
                        {"eps", l.eps.value},
                        {"rope_theta", l.rope.value.theta},
                        {"sliding_window", l.sliding_window},
                        {"unsupported", !l.unsupported.empty()}});
    json weights = nullptr;
    if (m.weights.declared())
      weights = {{"format", fkv::to_string(m.weights.format)}, {"source", m.weights.source}};
    else if (m.weights.refused())
      weights = {
          {"error", m.weights.error},
          {"python_class", fkv::error_kind_info(m.weights.bad_input ? fkv::ErrorKind::BadInput
                                                                    : fkv::ErrorKind::Unsupported)
                               .python_class}};
    return ffi::String(json{
        {"num_layers", m.layers.size()},
        {"hidden_size", m.hidden_size.value},
        {"max_position_embeddings", m.max_position_embeddings.value},
        {"dtype", m.dtype.value},
        {"architecture", m.architecture},
        {"layers", layers},
        {"weights",
         weights}}.dump());
  });
}

// fkv_jit.AttentionSpec's fields.
json attention_json(const fkv::AttentionSpec& a) {
  return {{"num_kv_heads", a.num_kv_heads},
          {"head_dim", a.head_dim},
          {"rotary_dim", a.rotary_dim},
          {"is_neox_style", a.is_neox_style},
          {"k_norm", fkv::to_string(a.k_norm)},
          {"rope_theta", a.rope.theta},
          {"rope_scaling_type", a.rope.scaling_type}};
}

ffi::String validate(ConfigRef c) {
  return guarded([&] { return ffi::String(attention_json(fkv::validate(c->config)).dump()); });
}

// ---- plans -----------------------------------------------------------------------------------

// The plan of rank tp_rank of tp_size (1: the whole model): fkv::make_plan, then
// fkv::shard_plan, so that a mismatch is reported before any split, an uneven split is a
// ConfigError naming both numbers (ConfigMismatchError) and a bad tp_size or tp_rank an
// ArgumentError.
PlanRef plan_create(ConfigRef c, bool grouped, std::int64_t tp_size, std::int64_t tp_rank) {
  return guarded([&] {
    const fkv::TensorParallel tp{to_int(tp_size, "tp_size"), to_int(tp_rank, "tp_rank")};
    const fkv::Plan whole = fkv::make_plan(
        c->config, grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict);
    return PlanRef(c, fkv::shard_plan(whole, tp), grouped);
  });
}

// {"mode", "groups": [{"layers", "spec" (fkv::to_json), "info" (AttentionSpec's fields),
// "heads" {"first_head", "num_heads", "total_heads", "replicated"}}], "skipped", "tp_size",
// "tp_rank"}: the rank's plan as `fkv-jit plan --tp` prints it.
ffi::String plan_info(PlanRef p) {
  return guarded([&] {
    const fkv::Plan& plan = p->plan;
    json groups = json::array();
    for (const fkv::LayerGroup& g : plan.groups)
      groups.push_back({{"layers", g.layers},
                        {"spec", fkv::to_json(g.attn)},
                        {"info", attention_json(g.attn)},
                        {"heads",
                         {{"first_head", g.heads.first_head},
                          {"num_heads", g.heads.num_heads},
                          {"total_heads", g.heads.total_heads},
                          {"replicated", g.heads.replicated}}}});
    return ffi::String(json{
        {"mode", p->grouped ? "grouped" : "strict"},
        {"groups", groups},
        {"skipped", plan.skipped_layers},
        {"tp_size", plan.tp_size},
        {"tp_rank",
         plan.tp_rank}}.dump());
  });
}

fkv::DType dtype_arg(const ffi::String& name) {
  return fkv::parse_dtype(c_str(name, "the dtype name"));
}

// fkv_jit.KernelDesc's fields of a kernel spec.
json kernel_json(const fkv::KernelSpec& s) {
  return {{"num_kv_heads", s.num_kv_heads},
          {"head_dim", s.head_dim},
          {"rotary_dim", s.rotary_dim},
          {"neox", s.neox},
          {"k_norm", fkv::to_string(s.k_norm)},
          {"act", fkv::dtype_name(s.act)},
          {"cache", fkv::dtype_name(s.cache)},
          {"cos_sin", fkv::dtype_name(s.cos_sin)},
          {"positions_i64", s.positions == fkv::IndexType::I64},
          {"slots_i64", s.slots == fkv::IndexType::I64},
          {"pool", s.mode == fkv::OutputMode::Pool},
          {"debug", s.debug_checks}};
}

// The kernel of `group` in the rank's plan: num_kv_heads is the rank's share.
ffi::String plan_kernel_desc(PlanRef p, std::int64_t group, ffi::String act, ffi::String cache,
                             bool pool) {
  return guarded([&] {
    const fkv::LayerGroup& g = fkv::plan_group(p->plan, to_int(group, "group"));
    const fkv::KernelSpec s =
        fkv::make_kernel_spec(g.attn, dtype_arg(act), dtype_arg(cache),
                              pool ? fkv::OutputMode::Pool : fkv::OutputMode::Stacked);
    return ffi::String(kernel_json(s).dump());
  });
}

ffi::Bytes plan_cos_sin(PlanRef p, std::int64_t group, std::int64_t max_position,
                        ffi::String dtype) {
  return guarded([&] {
    const fkv::RopeTable table =
        fkv::plan_cos_sin_table(p->plan, to_int(group, "group"), max_position,
                                p->config->config.max_position_embeddings.value);
    const std::vector<std::uint8_t> bytes = table.bytes(dtype_arg(dtype));
    return ffi::Bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  });
}

// ---- precompilation and kernels --------------------------------------------------------------

// [kernels, compiled now]; empty strings take the defaults (fkv::ConfigPrecompile).
ffi::Array<int64_t> precompile(ConfigRef c, ffi::String arch, ffi::String dtype,
                               ffi::String kv_dtype, ffi::String cache_dir, ffi::String decode_gpu,
                               ffi::String weights) {
  return guarded([&] {
    fkv::ConfigPrecompile request;
    request.arch = c_str(arch, "arch");
    request.act_dtype = c_str(dtype, "dtype");
    request.kv_dtype = c_str(kv_dtype, "kv_dtype");
    request.cache_dir = c_str(cache_dir, "cache_dir");
    request.decode_gpu = c_str(decode_gpu, "decode_gpu");
    request.weights = c_str(weights, "weights");
    const fkv::PrecompileResult r = fkv::precompile_config(c->config, request);
    return ffi::Array<int64_t>{static_cast<int64_t>(r.kernels.size()),
                               static_cast<int64_t>(r.compiled())};
  });
}

// desc: the JSON of fkv_jit.KernelDesc (kernel_json's fields). Returns [name, outcome, arch].
ffi::Array<ffi::String> kernel_prepare(ffi::String desc_json, std::int64_t device) {
  return guarded([&] {
    const json j = json::parse(c_str(desc_json, "the kernel description"));
    auto dtype = [&](const char* key) { return fkv::parse_dtype(j.at(key).get<std::string>()); };
    auto index = [&](const char* key) {
      return j.at(key).get<bool>() ? fkv::IndexType::I64 : fkv::IndexType::I32;
    };
    fkv::KernelSpec s;
    s.num_kv_heads = json_int<int>(j, "num_kv_heads", 0, true);
    s.head_dim = json_int<int>(j, "head_dim", 0, true);
    s.rotary_dim = json_int<int>(j, "rotary_dim", 0, true);
    s.neox = j.at("neox").get<bool>();
    // A kind's name ("none", "rms"; "rms_one_plus" is rms over a folded weight); a bool as
    // before the kinds (true: rms).
    const json& kn = j.at("k_norm");
    s.k_norm = kn.is_boolean() ? (kn.get<bool>() ? fkv::KNormKind::Rms : fkv::KNormKind::None)
                               : fkv::kernel_k_norm(fkv::parse_k_norm(kn.get<std::string>()));
    s.act = dtype("act");
    s.cache = dtype("cache");
    s.cos_sin = dtype("cos_sin");
    s.positions = index("positions_i64");
    s.slots = index("slots_i64");
    s.mode = j.at("pool").get<bool>() ? fkv::OutputMode::Pool : fkv::OutputMode::Stacked;
    s.debug_checks = j.at("debug").get<bool>();
    s.check();
    const int dev = to_int(device, "device");
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(s, dev);
    return ffi::Array<ffi::String>{s.short_name(), fkv::to_string(k.outcome), k.arch.name()};
  });
}

}  // namespace
}  // namespace fkv_native

TVM_FFI_DLL_EXPORT_TYPED_FUNC(config_load, fkv_native::config_load)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(config_from_json, fkv_native::config_from_json)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(config_info, fkv_native::config_info)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(validate, fkv_native::validate)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_create, fkv_native::plan_create)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_info, fkv_native::plan_info)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_kernel_desc, fkv_native::plan_kernel_desc)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan_cos_sin, fkv_native::plan_cos_sin)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(precompile, fkv_native::precompile)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(kernel_prepare, fkv_native::kernel_prepare)
