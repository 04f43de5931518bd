// config: a model's config JSON -> per-layer attention facts.
//
// Reading order for every model value: the nested layer config (speculators'
// transformer_layer_config, text_config or llm_config, when present), then the top level, then
// the class defaults of the model's config class (only where a real config omits a field and
// transformers fills it in, e.g. Gemma3TextConfig). What a family's attention looks like comes
// only from its registry entry (architectures.cpp), each citing the modeling code it was
// checked against; docs/config-rules.md has the full table.
#include "fkv/config.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "fkv/errors.hpp"
#include "generated/model_data.hpp"
#include "internal.hpp"

namespace fkv {

using namespace config_detail;

// ---------------------------------------------------------------------------------------------

std::string RopeFrequencies::canonical() const {
  // Numbers are normalized to doubles so that 1e6, 1000000 and 1000000.0 compare equal; object
  // keys are sorted (nlohmann::json objects are ordered maps).
  struct Norm {
    static json run(const json& v) {
      if (v.is_number()) return json(v.get<double>());
      if (v.is_array()) {
        json a = json::array();
        for (const auto& x : v) a.push_back(run(x));
        return a;
      }
      if (v.is_object()) {
        json o = json::object();
        for (auto it = v.begin(); it != v.end(); ++it) o[it.key()] = run(*it);
        return o;
      }
      return v;
    }
  };
  json c = json::object();
  c["theta"] = theta;
  c["type"] = scaling_type;
  c["scaling"] = Norm::run(scaling.is_null() ? json::object() : scaling);
  return c.dump();
}

std::string to_string(LayerKind k) {
  switch (k) {
    case LayerKind::FullAttention:
      return "full_attention";
    case LayerKind::SlidingAttention:
      return "sliding_attention";
    case LayerKind::NoAttention:
      return "none";
  }
  return "?";
}

std::vector<const LayerAttention*> ModelConfig::attention_layers() const {
  std::vector<const LayerAttention*> out;
  for (const auto& l : layers)
    if (l.is_attention()) out.push_back(&l);
  return out;
}

ModelConfig ModelConfig::from_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  return from_json(std::string_view(read_file_capped(p)), p);
}

ModelConfig ModelConfig::from_json(std::string_view text, std::string name) {
  const json doc = parse_text(text, name);
  return from_json(doc, std::move(name));
}

namespace {

// The object holding the layer config, its key, and (speculators) the model_type its class
// defaults to when the object names none.
struct Nested {
  const json* obj = nullptr;
  std::string name;
  std::string speculators_type;  // "dflash" / "eagle3" / ""
};

Nested nested_of(const json& root, const std::string& file) {
  const Doc top(root, file);
  if (present(root, "speculators_model_type")) {
    const Hit t{&root["speculators_model_type"], "speculators_model_type"};
    const std::string type = top.string(t);
    if (type != "dflash" && type != "eagle3")
      top.refuse(t.path,
                 "\"" + type +
                     "\" is not a speculators model type fkv-jit reads; supported: \"dflash\" "
                     "(Qwen3DFlashAttention layers) and \"eagle3\" (Llama layers)");
    if (!present(root, "transformer_layer_config") || !root["transformer_layer_config"].is_object())
      top.fail("transformer_layer_config",
               "missing or not an object: the speculators format keeps the draft's layer "
               "config there");
    return {&root["transformer_layer_config"], "transformer_layer_config", type};
  }
  for (const char* k : {"text_config", "llm_config"}) {
    if (!present(root, k)) continue;
    if (!root[k].is_object()) top.fail(k, "expected an object, got " + show(root[k]));
    return {&root[k], k, ""};
  }
  return {};
}

const EngineModelType* engine_model_type(const std::string& type) {
  const auto& table = engine_model_types();
  auto it = std::lower_bound(table.begin(), table.end(), type,
                             [](const EngineModelType& e, const std::string& t) {
                               return std::string_view(e.model_type) < t;
                             });
  return it != table.end() && it->model_type == type ? &*it : nullptr;
}

// transformers' config-class defaults for `type` (generated table), reduced to what the reader
// may take from them: layout keys only where the entry reads them, and the RoPE dicts only when
// the file states no RoPE key at all (a file's rope_theta with the class's yarn dict would be a
// mix no engine runs).
ClassDefaults class_defaults_for(const Doc& doc, const Family& fam, const std::string& type) {
  const EngineModelType* it = engine_model_type(type);
  if (!it || !*it->class_defaults) return {};
  ClassDefaults d{it->config_class, json::parse(it->class_defaults)};
  const bool rope_written = [&] {
    for (const char* k : {"rope_theta", "rope_scaling", "rope_parameters", "rope_local_base_freq",
                          "rotary_emb_base"})
      if ((doc.nested() && doc.nested()->contains(k)) || doc.root().contains(k)) return true;
    return false;
  }();
  for (const LayoutKey& k : layout_keys())
    if (!fam.reads(k.key)) d.values.erase(k.key);
  // A partial rotary factor inside the file's RoPE dicts (Qwen3.5 keeps it in rope_parameters)
  // is the file's, not replaced by the class's top-level one.
  for (const json* obj : {doc.nested(), &doc.root()})
    for (const char* k : {"rope_parameters", "rope_scaling"})
      if (obj && present(*obj, k) && (*obj)[k].is_object()) {
        const json& p = (*obj)[k];
        bool has = p.contains("partial_rotary_factor");
        for (auto it = p.begin(); it != p.end(); ++it)
          has = has || (it->is_object() && it->contains("partial_rotary_factor"));
        if (has) d.values.erase("partial_rotary_factor");
      }
  if (rope_written) {
    d.values.erase("rope_parameters");
    d.values.erase("rope_scaling");
  }
  return d;
}

// The registry entry of a config, or arch == nullptr when there is none.
Family family_of(const Doc& doc, const Nested& nested, std::string& model_type_src,
                 std::string& type) {
  if (nested.obj && present(*nested.obj, "model_type")) {
    model_type_src = nested.name + ".model_type";
    type = doc.string(Hit{&(*nested.obj)["model_type"], model_type_src});
  } else if (!nested.speculators_type.empty()) {
    type = nested.speculators_type == "dflash" ? "qwen3" : "llama";
    model_type_src =
        "speculators default (transformer_layer_config has no model_type: " +
        std::string(nested.speculators_type == "dflash" ? "Qwen3Config" : "LlamaConfig") + ")";
  } else if (present(doc.root(), "model_type")) {
    model_type_src = "model_type";
    type = doc.string(Hit{&doc.root()["model_type"], "model_type"});
  }
  type = lower(type);
  const auto by_name = [](const std::string& name) -> const Architecture* {
    for (const Architecture& a : architectures())
      if (a.name == name) return &a;
    return nullptr;
  };
  // speculators DFlash: Qwen3DFlashAttention whatever class the layer config names; EAGLE-3:
  // vLLM maps it to Eagle3LlamaForCausalLM, so only Llama layers are known.
  if (nested.speculators_type == "dflash") return {by_name("DFlash draft"), ""};
  if (nested.speculators_type == "eagle3") {
    if (type != "llama")
      refuse_unknown(doc,
                     "key '" + model_type_src + "': a speculators eagle3 draft with \"" + type +
                         "\" layers is not in the registry (only Llama layers, which vLLM's "
                         "Eagle3LlamaForCausalLM builds, are).",
                     "");
    return {by_name("Llama"), type};
  }
  std::string arch0 = nested.obj ? arch_of(*nested.obj) : "";
  if (arch0.empty()) arch0 = arch_of(doc.root());
  for (const Architecture& a : architectures())
    if (!a.architecture_prefix.empty() && arch0.rfind(a.architecture_prefix, 0) == 0)
      return {&a, ""};
  auto by_type = [](const std::string& t) -> const Architecture* {
    for (const Architecture& a : architectures())
      for (const auto& x : a.model_types)
        if (x == t) return &a;
    return nullptr;
  };
  if (const Architecture* a = by_type(type)) return {a, type};
  // A multimodal wrapper (llava, mistral3, ...) whose text config names no model_type: the text
  // config class the wrapper defaults to (transformers' config class, generated table).
  if (const EngineModelType* e = engine_model_type(type); e && *e->text_model_type) {
    if (!nested.obj)
      refuse_unknown(doc,
                     "key '" + model_type_src + "': \"" + type +
                         "\" is a multimodal wrapper, and this config has no text_config (or "
                         "llm_config) holding its language model.",
                     "");
    if (const Architecture* a = by_type(e->text_model_type)) {
      model_type_src +=
          " (a wrapper; text_config has no model_type: " + std::string(e->config_class) +
          " defaults it to \"" + e->text_model_type + "\")";
      type = e->text_model_type;
      return {a, type};
    }
  }
  return {nullptr, type};
}

}  // namespace

ModelConfig ModelConfig::from_json(const nlohmann::json& root, std::string name) {
  if (!root.is_object())
    throw ConfigError(name +
                      ": the top level must be a JSON object (a HuggingFace config.json or "
                      "{\"layers\": [...]}), got " +
                      std::string(root.type_name()));
  check_depth(root, name);
  if (has_non_finite_spelling(root)) {
    json copy = root;
    restore_non_finite(copy);
    return from_json(copy, std::move(name));
  }
  const Nested nested = nested_of(root, name);
  Doc doc(root, name, nested.obj, nested.name);
  ModelConfig cfg;
  cfg.path = name;
  cfg.architecture = arch_of(root);

  std::string model_type_src;
  const Family fam = family_of(doc, nested, model_type_src, cfg.model_type);
  if (fam.arch && !fam.arch->refused())
    doc.set_defaults(class_defaults_for(doc, fam, cfg.model_type));

  if (fam.arch && fam.arch->refused()) refuse_family(doc, model_type_src, fam);
  const Hit explicit_list = explicit_layers(doc);
  if (explicit_list && explicit_list.v->is_array() && explicit_list.v->size() > (size_t)kMaxLayers)
    doc.fail(explicit_list.path, "has " + std::to_string(explicit_list.v->size()) +
                                     " entries; at most " + std::to_string(kMaxLayers) +
                                     " layers are supported");

  // Per-model values.
  Hit layers = doc.find({"num_hidden_layers", "n_layer", "num_layers", "num_transformer_layers"});
  if (layers) {
    cfg.num_hidden_layers = {doc.positive_int(layers), layers.path};
    if (cfg.num_hidden_layers.value > kMaxLayers)
      doc.fail(layers.path, std::to_string(cfg.num_hidden_layers.value) + " layers; at most " +
                                std::to_string(kMaxLayers) +
                                " are supported (the largest models have a few hundred)");
  }
  if (Hit h = doc.find({"hidden_size", "n_embd", "d_model", "model_dim"}))
    cfg.hidden_size = {doc.positive_int(h), h.path};
  else
    cfg.hidden_size.source = "absent";
  if (Hit h = doc.find({"num_attention_heads", "n_head", "num_heads"}))
    cfg.num_attention_heads = {doc.positive_int(h), h.path};
  else
    cfg.num_attention_heads.source = "absent";
  if (Hit h = doc.find({"max_position_embeddings", "n_positions"}))
    cfg.max_position_embeddings = {doc.positive_int(h), h.path};
  else
    cfg.max_position_embeddings.source = "absent";
  if (Hit h = doc.find({"torch_dtype", "dtype"}))
    cfg.dtype = {doc.string(h), h.path};  // a name, checked where it is used (act_dtype_of)
  else
    cfg.dtype.source = "absent";
  if (Hit h = doc.find({"rms_norm_eps", "layer_norm_epsilon", "norm_eps", "layer_norm_eps",
                        "layernorm_epsilon", "norm_epsilon"}))
    cfg.eps = {doc.positive_number(h), h.path};
  else
    cfg.eps = {1e-6, "default: 1e-6 (no eps key)"};

  // The explicit schema alone needs no registry entry: it states every fact itself.
  if (!layers || (!fam.arch && explicit_list)) {
    if (!explicit_list) {
      if (!fam.arch && !model_type_src.empty())
        refuse_unknown(doc,
                       "key '" + model_type_src + "': model_type \"" + cfg.model_type +
                           "\" is not in the architecture registry.",
                       cfg.model_type);
      doc.fail("num_hidden_layers",
               "missing: no num_hidden_layers, n_layer or num_layers key (and no explicit "
               "\"layers\" schema); is this a model config.json?");
    }
    refuse_schema_bypass(doc);
    // An MLA family's verdict stays beside the schema, with or without a layer count.
    if (fam.arch && fam.arch->mla)
      doc.refuse(model_type_src,
                 "model_type \"" + cfg.model_type +
                     "\" is multi-head latent attention (registry \"" + fam.arch->name +
                     "\": " + fam.arch->citation +
                     "): the cache holds a compressed latent, not per-head K/V, and the explicit "
                     "schema describes per-head K/V layers only, so it cannot describe this "
                     "model.\nSee docs/config-rules.md (section 5).");
    apply_explicit(doc, explicit_list, cfg.layers, false);
    if (layers && cfg.num_hidden_layers.value != (int)cfg.layers.size())
      doc.fail(explicit_list.path, "has " + std::to_string(cfg.layers.size()) +
                                       " entries but the model has " +
                                       std::to_string(cfg.num_hidden_layers.value) + " layers (" +
                                       layers.path + "); give one entry per layer");
    cfg.num_hidden_layers = {(int)cfg.layers.size(),
                             explicit_list.path + " (explicit schema, one entry per layer)"};
    cfg.family = "explicit schema";
    cfg.weights = read_declared_weights(doc, cfg);
    return cfg;
  }
  if (!fam.arch) {
    if (model_type_src.empty())
      refuse_unknown(doc,
                     "no model_type (looked for " +
                         (nested.obj ? nested.name + ".model_type and " : std::string()) +
                         "model_type), so the architecture is unknown.",
                     "");
    refuse_unknown(doc,
                   "key '" + model_type_src + "': model_type \"" + cfg.model_type +
                       "\" is not in the architecture registry.",
                   cfg.model_type);
  }
  const std::vector<UnreadKey> unread = unread_layout_keys(doc, fam);
  for (const UnreadKey& k : unread) doc.ignore(k.key);
  cfg.family = fam.arch->name;
  cfg = infer(doc, std::move(cfg), fam);
  check_unread_keys(doc, fam, unread, cfg.layers);
  if (explicit_list) apply_explicit(doc, explicit_list, cfg.layers, true);
  cfg.weights = read_declared_weights(doc, cfg);
  return cfg;
}

}  // namespace fkv
