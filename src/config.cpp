// config: a model's config JSON -> per-layer attention facts (SPEC §2).
//
// Reading order for every model value: the nested `text_config` (when present), then the top
// level, then the class defaults of the model's config class (only where a real config omits a
// field and transformers fills it in, e.g. Gemma3TextConfig). Each architecture rule cites the
// reference implementation it was checked against; docs/config-rules.md has the full table.
#include "fkv/config.hpp"

#include <fcntl.h>
#include <unistd.h>

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

namespace fkv {
namespace {

using json = nlohmann::json;

std::string fmt(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A short rendering of a JSON value for error messages.
std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  if (v.is_string()) return s + " (a string)";
  if (v.is_boolean()) return s + " (a boolean)";
  if (v.is_array()) return s + " (a list)";
  if (v.is_object()) return s + " (an object)";
  return s;
}

// Where a value was found: the JSON node and its dotted path as the user wrote it.
struct Hit {
  const json* v = nullptr;
  std::string path;
  explicit operator bool() const { return v != nullptr; }
};

bool present(const json& obj, const std::string& key) {
  if (!obj.is_object()) return false;
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

// Class defaults that transformers fills in when a shipped config.json omits a field.
struct ClassDefaults {
  std::string name;  // e.g. "Gemma3TextConfig"
  json values = json::object();
};

ClassDefaults class_defaults_for(const std::string& model_type) {
  // transformers models/gemma3/configuration_gemma3.py, Gemma3TextConfig.__init__ defaults.
  if (model_type == "gemma3" || model_type == "gemma3_text")
    return {"Gemma3TextConfig",
            json{{"num_attention_heads", 8},
                 {"num_key_value_heads", 4},
                 {"head_dim", 256},
                 {"rms_norm_eps", 1e-6},
                 {"rope_theta", 1000000.0},
                 {"rope_local_base_freq", 10000.0},
                 {"sliding_window", 4096},
                 {"sliding_window_pattern", 6},
                 {"max_position_embeddings", 131072}}};
  // transformers models/cohere2/configuration_cohere2.py: sliding_window_pattern=4.
  if (model_type == "cohere2") return {"Cohere2Config", json{{"sliding_window_pattern", 4}}};
  return {};
}

// The document being read, with the lookup order and typed, validating accessors.
class Doc {
 public:
  Doc(const json& root, std::string file) : root_(root), file_(std::move(file)) {
    if (!root_.is_object())
      throw ConfigError(file_ + ": the top level must be a JSON object (a HuggingFace config.json or "
                        "{\"layers\": [...]}), got " + std::string(root_.type_name()));
    if (root_.contains("text_config") && !root_["text_config"].is_null()) {
      if (!root_["text_config"].is_object())
        fail("text_config", "expected an object, got " + show(root_["text_config"]));
      text_ = &root_["text_config"];
    }
  }

  const std::string& file() const { return file_; }
  const json& root() const { return root_; }
  const json* text() const { return text_; }
  void set_defaults(ClassDefaults d) { defaults_ = std::move(d); }

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw ConfigError(file_ + ": key '" + path + "': " + what);
  }

  // text_config first (for fields it holds), then the top level, then class defaults.
  Hit find(std::initializer_list<const char*> keys) const {
    if (text_)
      for (const char* k : keys)
        if (present(*text_, k)) return {&(*text_)[k], std::string("text_config.") + k};
    for (const char* k : keys)
      if (present(root_, k)) return {&root_[k], k};
    for (const char* k : keys)
      if (present(defaults_.values, k))
        return {&defaults_.values[k], "class default (" + defaults_.name + ")." + k};
    return {};
  }

  // Reads an integer; a float is accepted only when it is integral (128.0), never 128.5 or "128".
  long long integer(const Hit& h) const {
    const json& v = *h.v;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<unsigned long long>() > (unsigned long long)std::numeric_limits<int>::max())
        fail(h.path, "value " + v.dump() + " is too large");
      return v.get<long long>();
    }
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 2147483648.0) return (long long)d;
      fail(h.path, "expected an integer, got " + show(v));
    }
    fail(h.path, "expected an integer, got " + show(v));
  }

  int positive_int(const Hit& h) const {
    long long x = integer(h);
    if (x <= 0) fail(h.path, "must be a positive integer, got " + h.v->dump());
    if (x > std::numeric_limits<int>::max()) fail(h.path, "value " + h.v->dump() + " is too large");
    return (int)x;
  }

  int nonneg_int(const Hit& h) const {
    long long x = integer(h);
    if (x < 0) fail(h.path, "must not be negative, got " + h.v->dump());
    if (x > std::numeric_limits<int>::max()) fail(h.path, "value " + h.v->dump() + " is too large");
    return (int)x;
  }

  double number(const Hit& h) const {
    if (!h.v->is_number()) fail(h.path, "expected a number, got " + show(*h.v));
    double d = h.v->get<double>();
    if (!std::isfinite(d)) fail(h.path, "expected a finite number, got " + h.v->dump());
    return d;
  }

  double positive_number(const Hit& h) const {
    double d = number(h);
    if (d <= 0) fail(h.path, "must be positive, got " + h.v->dump());
    return d;
  }

  bool boolean(const Hit& h) const {
    if (!h.v->is_boolean()) fail(h.path, "expected true or false, got " + show(*h.v));
    return h.v->get<bool>();
  }

  std::string string(const Hit& h) const {
    if (!h.v->is_string()) fail(h.path, "expected a string, got " + show(*h.v));
    return h.v->get<std::string>();
  }

  // A per-layer list: must be a non-empty array of length n.
  const json& layer_list(const Hit& h, int n) const {
    if (!h.v->is_array()) fail(h.path, "expected a list with one entry per layer, got " + show(*h.v));
    if (h.v->empty())
      fail(h.path, "the list is empty; it must have one entry per layer (" + std::to_string(n) +
                       "), or be removed");
    if ((int)h.v->size() != n)
      fail(h.path, "has " + std::to_string(h.v->size()) + " entries but the model has " + std::to_string(n) +
                       " layers");
    return *h.v;
  }

 private:
  const json& root_;
  std::string file_;
  const json* text_ = nullptr;
  ClassDefaults defaults_;
};

// ---------------------------------------------------------------------------------------------
// Architecture facts. Every rule names the reference it was checked against (see
// docs/config-rules.md for what the code there does).

struct Family {
  std::string model_type;  // text_config.model_type, else model_type (lower case)
  std::string arch;        // text_config.architectures[0], else architectures[0]

  bool is(std::initializer_list<const char*> types) const {
    for (const char* t : types)
      if (model_type == t) return true;
    return false;
  }
  bool gemma3() const { return is({"gemma3", "gemma3_text"}); }
  bool qwen3_next_like() const {
    return is({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"});
  }
};

std::string arch_of(const json& obj) {
  if (!obj.is_object() || !obj.contains("architectures")) return "";
  const json& a = obj["architectures"];
  if (a.is_array() && !a.empty() && a[0].is_string()) return a[0].get<std::string>();
  return "";
}

const char* kRefGptj = "transformers models/gptj/modeling_gptj.py rotate_every_two (pairs 2i, 2i+1)";
const char* kRefCohere = "transformers models/cohere/modeling_cohere.py rotate_half (x[..., ::2], x[..., 1::2]) "
                         "with repeat_interleave'd cos/sin";
const char* kRefGlm = "transformers models/glm/modeling_glm.py and glm4/modeling_glm4.py rotate_half "
                      "(x[..., 0::2], x[..., 1::2]) with repeat_interleave'd cos/sin";
const char* kRefChatglm = "THUDM modeling_chatglm.py apply_rotary_pos_emb (reshape(..., rot_dim // 2, 2))";

// ---------------------------------------------------------------------------------------------
// Layer kinds.

std::optional<LayerKind> kind_from_name(const std::string& raw) {
  std::string s = lower(raw);
  static const std::set<std::string> full = {"full_attention", "attention", "global", "full", "self_attention"};
  static const std::set<std::string> sliding = {"sliding_attention", "local", "sliding", "chunked_attention"};
  static const std::set<std::string> none = {"linear_attention", "conv", "mamba", "mamba2", "ssm", "mlp", "moe",
                                             "recurrent", "rwkv", "no_op", "none", "deltanet", "gated_deltanet"};
  if (full.count(s)) return LayerKind::FullAttention;
  if (sliding.count(s)) return LayerKind::SlidingAttention;
  if (none.count(s)) return LayerKind::NoAttention;
  return std::nullopt;
}

const char* kKnownKinds =
    "full_attention, attention, global, sliding_attention, local, chunked_attention (attention) or "
    "linear_attention, conv, mamba, mamba2, ssm, mlp, moe, recurrent, no_op, none (no KV)";

// The resolved kind of each layer, its source, and (for DeciLM) block_configs entries.
struct KindPlan {
  std::vector<Sourced<LayerKind>> kinds;
  std::vector<std::string> type_names;  // "full_attention" / "sliding_attention" / "" (no KV)
};

std::string type_name(LayerKind k) {
  return k == LayerKind::FullAttention ? "full_attention" : k == LayerKind::SlidingAttention ? "sliding_attention" : "";
}

KindPlan resolve_kinds(const Doc& doc, const Family& fam, int n) {
  KindPlan plan;
  plan.kinds.resize(n);
  auto set_all = [&](auto fn) {
    for (int i = 0; i < n; ++i) plan.kinds[i] = fn(i);
  };

  if (Hit h = doc.find({"layer_types"})) {
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string()) doc.fail(p, "expected a layer type name, got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k) doc.fail(p, "unknown layer type \"" + list[i].get<std::string>() + "\"; known: " + kKnownKinds);
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
  } else if (Hit h = doc.find({"layers_block_type"})) {
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string()) doc.fail(p, "expected a block type name, got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k) doc.fail(p, "unknown block type \"" + list[i].get<std::string>() + "\"; known: " + kKnownKinds);
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
  } else if (Hit h = doc.find({"hybrid_override_pattern"})) {
    // Nemotron-H: 'M' mamba, '*' attention, '-' mlp, 'E' moe.
    std::string pat = doc.string(h);
    if (pat.empty()) doc.fail(h.path, "the pattern is empty; it must have one character per layer");
    if ((int)pat.size() != n)
      doc.fail(h.path, "has " + std::to_string(pat.size()) + " characters but the model has " + std::to_string(n) +
                           " layers");
    set_all([&](int i) {
      char c = pat[i];
      const std::string src = h.path + "[" + std::to_string(i) + "] = '" + std::string(1, c) + "'";
      if (c == '*') return Sourced<LayerKind>{LayerKind::FullAttention, src + " (attention)"};
      if (c == 'M' || c == '-' || c == 'E') return Sourced<LayerKind>{LayerKind::NoAttention, src + " (no attention)"};
      doc.fail(h.path, std::string("unknown character '") + c + "' at position " + std::to_string(i) +
                           "; expected 'M' (mamba), '*' (attention), '-' (mlp) or 'E' (moe)");
    });
  } else if (Hit hp = doc.find({"attn_layer_period"})) {
    // Jamba: attention iff i % period == offset (transformers JambaConfig.layers_block_type).
    int period = doc.positive_int(hp);
    Hit ho = doc.find({"attn_layer_offset"});
    int offset = ho ? doc.nonneg_int(ho) : 0;
    if (offset >= period)
      doc.fail(ho ? ho.path : "attn_layer_offset", "must be smaller than attn_layer_period (" + std::to_string(period) + ")");
    const std::string rule = hp.path + "=" + std::to_string(period) + ", " + (ho ? ho.path : "attn_layer_offset (default)") +
                             "=" + std::to_string(offset);
    set_all([&](int i) {
      bool attn = i % period == offset;
      return Sourced<LayerKind>{attn ? LayerKind::FullAttention : LayerKind::NoAttention,
                                rule + ": layer % period " + (attn ? "==" : "!=") + " offset"};
    });
  } else if (Hit h = doc.find({"block_configs"})) {
    // DeciLM / Nemotron-NAS: attention.no_op or attention.replace_with_linear -> no KV.
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_object()) doc.fail(p, "expected an object, got " + show(list[i]));
      if (!present(list[i], "attention")) return Sourced<LayerKind>{LayerKind::FullAttention, p + " (no attention entry: attention)"};
      const json& a = list[i]["attention"];
      if (!a.is_object()) doc.fail(p + ".attention", "expected an object, got " + show(a));
      for (const char* k : {"no_op", "replace_with_linear"}) {
        if (present(a, k)) {
          Hit b{&a[k], p + ".attention." + k};
          if (doc.boolean(b)) return Sourced<LayerKind>{LayerKind::NoAttention, b.path + " = true"};
        }
      }
      return Sourced<LayerKind>{LayerKind::FullAttention, p + ".attention (no_op/replace_with_linear false)"};
    });
  } else if (Hit h = doc.find({"attention_layers"})) {
    // gpt_neo format: "global" / "local" per layer.
    const json& list = doc.layer_list(h, n);
    set_all([&](int i) {
      const std::string p = h.path + "[" + std::to_string(i) + "]";
      if (!list[i].is_string()) doc.fail(p, "expected \"global\" or \"local\", got " + show(list[i]));
      auto k = kind_from_name(list[i].get<std::string>());
      if (!k || *k == LayerKind::NoAttention)
        doc.fail(p, "expected \"global\" or \"local\", got \"" + list[i].get<std::string>() + "\"");
      return Sourced<LayerKind>{*k, p + " = " + list[i].get<std::string>()};
    });
  } else if (Hit h = doc.find({"attention_types"})) {
    // gpt_neo format: [[["global", "local"], repeat], ...] expands to one entry per layer.
    if (!h.v->is_array() || h.v->empty()) doc.fail(h.path, "expected a non-empty list of [[types...], repeat]");
    std::vector<std::string> names;
    for (size_t j = 0; j < h.v->size(); ++j) {
      const json& item = (*h.v)[j];
      const std::string p = h.path + "[" + std::to_string(j) + "]";
      if (!item.is_array() || item.size() != 2 || !item[0].is_array() || item[0].empty())
        doc.fail(p, "expected [[\"global\", \"local\"], repeat], got " + show(item));
      int rep = doc.positive_int(Hit{&item[1], p + "[1]"});
      for (int r = 0; r < rep; ++r)
        for (const json& t : item[0]) {
          if (!t.is_string()) doc.fail(p + "[0]", "expected layer type names, got " + show(t));
          names.push_back(t.get<std::string>());
        }
    }
    if ((int)names.size() != n)
      doc.fail(h.path, "expands to " + std::to_string(names.size()) + " layers but the model has " + std::to_string(n));
    set_all([&](int i) {
      auto k = kind_from_name(names[i]);
      if (!k || *k == LayerKind::NoAttention) doc.fail(h.path, "unknown attention type \"" + names[i] + "\"");
      return Sourced<LayerKind>{*k, h.path + " (expanded)[" + std::to_string(i) + "] = " + names[i]};
    });
  } else if (fam.is({"gemma2"})) {
    // transformers gemma2: is_sliding = not bool(layer_idx % 2) -> even layers sliding.
    set_all([&](int i) {
      bool sliding = i % 2 == 0;
      return Sourced<LayerKind>{sliding ? LayerKind::SlidingAttention : LayerKind::FullAttention,
                                std::string("architecture rule: gemma2 alternates, even layers sliding "
                                            "(transformers gemma2 is_sliding = not bool(layer_idx % 2))")};
    });
  } else if (Hit h = fam.gemma3() || fam.is({"cohere2"}) || present(doc.root(), "sliding_window_pattern") ||
                         (doc.text() && present(*doc.text(), "sliding_window_pattern"))
                     ? doc.find({"sliding_window_pattern"})
                     : Hit{}) {
    // Gemma3 / Cohere2: sliding iff (i + 1) % pattern != 0.
    int p = doc.positive_int(h);
    set_all([&](int i) {
      bool sliding = (i + 1) % p != 0;
      return Sourced<LayerKind>{sliding ? LayerKind::SlidingAttention : LayerKind::FullAttention,
                                h.path + "=" + std::to_string(p) + ": sliding iff (layer + 1) % " + std::to_string(p) +
                                    " != 0 (transformers gemma3/cohere2 configuration layer_types default)"};
    });
  } else if (Hit h = doc.find({"full_attention_interval"})) {
    // Qwen3-Next: full attention every `interval` layers, linear attention otherwise.
    int p = doc.positive_int(h);
    set_all([&](int i) {
      bool full = (i + 1) % p == 0;
      return Sourced<LayerKind>{full ? LayerKind::FullAttention : LayerKind::NoAttention,
                                h.path + "=" + std::to_string(p) + ": full attention iff (layer + 1) % " +
                                    std::to_string(p) + " == 0, else linear_attention"};
    });
  } else {
    // Qwen2/Qwen3 style: use_sliding_window -> layers >= max_window_layers slide.
    Hit use = doc.find({"use_sliding_window"});
    Hit win = doc.find({"sliding_window"});
    if (use && doc.boolean(use) && win) {
      Hit mw = doc.find({"max_window_layers"});
      int from = mw ? doc.nonneg_int(mw) : 0;
      set_all([&](int i) {
        bool sliding = i >= from;
        return Sourced<LayerKind>{sliding ? LayerKind::SlidingAttention : LayerKind::FullAttention,
                                  use.path + " = true, " + (mw ? mw.path : std::string("max_window_layers (absent)")) +
                                      "=" + std::to_string(from) + ": sliding iff layer >= " + std::to_string(from)};
      });
    } else {
      set_all([&](int) {
        return Sourced<LayerKind>{LayerKind::FullAttention, std::string("default: full_attention (no layer pattern key)")};
      });
    }
  }
  for (auto& k : plan.kinds) plan.type_names.push_back(type_name(k.value));
  return plan;
}

// ---------------------------------------------------------------------------------------------
// RoPE frequencies.

// rope_parameters may be keyed by layer type: {"full_attention": {...}, "sliding_attention": {...}}.
bool keyed_by_layer_type(const json& params) {
  if (!params.is_object() || params.empty()) return false;
  for (auto it = params.begin(); it != params.end(); ++it)
    if (kind_from_name(it.key()) && it.value().is_object()) return true;
  return false;
}

// The rope parameters object that applies to a layer of `type_name`, or nullptr.
Hit rope_params_for(const Doc& doc, const std::string& tname) {
  Hit h = doc.find({"rope_parameters"});
  if (!h) h = doc.find({"rope_scaling"});
  if (!h) return {};
  if (!h.v->is_object()) doc.fail(h.path, "expected an object (or null), got " + show(*h.v));
  if (keyed_by_layer_type(*h.v)) {
    if (!present(*h.v, tname))
      doc.fail(h.path, "is keyed by layer type but has no entry for \"" + tname + "\"");
    return {&(*h.v)[tname], h.path + "." + tname};
  }
  return h;
}

Sourced<RopeFrequencies> resolve_rope(const Doc& doc, const Family& fam, LayerKind kind, const std::string& tname) {
  Sourced<RopeFrequencies> out;
  RopeFrequencies& r = out.value;
  Hit params = rope_params_for(doc, tname);
  const bool per_type = params && params.path.find("." + tname) != std::string::npos;
  const bool local_rule = kind == LayerKind::SlidingAttention && !per_type && doc.find({"rope_local_base_freq"});

  std::string theta_src;
  if (params && present(*params.v, "rope_theta") && !local_rule) {
    Hit t{&(*params.v)["rope_theta"], params.path + ".rope_theta"};
    r.theta = doc.positive_number(t);
    theta_src = t.path;
  } else if (local_rule) {
    Hit t = doc.find({"rope_local_base_freq"});
    r.theta = doc.positive_number(t);
    theta_src = t.path + " (sliding layer)";
  } else if (Hit t = doc.find({"rope_theta", "rotary_emb_base", "rope_freq_constant"})) {
    r.theta = doc.positive_number(t);
    theta_src = t.path;
  } else if (fam.is({"chatglm"})) {
    Hit ratio = doc.find({"rope_ratio"});
    double q = ratio ? doc.positive_number(ratio) : 1.0;
    r.theta = 10000.0 * q;
    theta_src = "architecture rule: chatglm base 10000 * " + (ratio ? ratio.path : std::string("rope_ratio (absent: 1)")) +
                " (" + kRefChatglm + ")";
  } else {
    r.theta = 10000.0;
    theta_src = "default: 10000";
  }

  // Gemma3: rope_scaling applies to global layers only; sliding layers use default RoPE
  // with rope_local_base_freq (transformers gemma3 modeling: rotary_emb_local is built from a
  // config copy with rope_theta = rope_local_base_freq and rope_scaling = default).
  std::string scale_src;
  if (params && !local_rule) {
    const json& p = *params.v;
    Hit type;
    if (present(p, "rope_type")) type = {&p["rope_type"], params.path + ".rope_type"};
    else if (present(p, "type")) type = {&p["type"], params.path + ".type"};
    r.scaling_type = type ? doc.string(type) : "default";
    if (r.scaling_type.empty()) doc.fail(type.path, "must not be empty");
    for (auto it = p.begin(); it != p.end(); ++it) {
      const std::string& k = it.key();
      if (k == "rope_type" || k == "type" || k == "rope_theta" || k == "partial_rotary_factor" || it->is_null()) continue;
      if (k == "factor") doc.positive_number(Hit{&*it, params.path + ".factor"});
      r.scaling[k] = *it;
    }
    if (r.scaling_type != "default") {
      // transformers' rope init functions fall back to these config fields.
      if (!r.scaling.contains("original_max_position_embeddings"))
        if (Hit o = doc.find({"original_max_position_embeddings"}))
          r.scaling["original_max_position_embeddings"] = doc.positive_int(o);
      if (r.scaling_type == "longrope" && !r.scaling.contains("max_position_embeddings"))
        if (Hit m = doc.find({"max_position_embeddings"})) r.scaling["max_position_embeddings"] = doc.positive_int(m);
    }
    scale_src = "; scaling: " + (type ? type.path + " = " + r.scaling_type : params.path + " (default)");
  } else if (local_rule && params) {
    scale_src = fam.gemma3() ? "; scaling: default (architecture rule: gemma3 rope_scaling applies to global layers "
                               "only; transformers gemma3/modeling_gemma3.py rotary_emb_local)"
                             : "; scaling: default (sliding layer with rope_local_base_freq)";
  } else {
    scale_src = "; scaling: default (no rope_scaling)";
  }
  out.source = "theta: " + theta_src + scale_src;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Explicit per-layer schema: {"layers": [...]} at the top level or under "fkv".

Hit explicit_layers(const Doc& doc) {
  const json& root = doc.root();
  if (present(root, "fkv")) {
    const json& f = root["fkv"];
    if (!f.is_object()) doc.fail("fkv", "expected an object {\"layers\": [...]}, got " + show(f));
    if (!present(f, "layers")) doc.fail("fkv", "has no \"layers\" list");
    return {&f["layers"], "fkv.layers"};
  }
  if (present(root, "layers")) return {&root["layers"], "layers"};
  return {};
}

KNormKind parse_k_norm(const Doc& doc, const Hit& h) {
  std::string s = doc.string(h);
  if (s == "rms") return KNormKind::Rms;
  if (s == "rms_one_plus") return KNormKind::RmsOnePlus;
  if (s == "none") return KNormKind::None;
  doc.fail(h.path, "unknown K norm \"" + s + "\"; expected \"rms\", \"rms_one_plus\" or \"none\"");
}

void check_rotary(const Doc& doc, const std::string& path, int rotary, int head_dim) {
  if (rotary % 2 != 0) doc.fail(path, "rotary_dim " + std::to_string(rotary) + " is odd; RoPE rotates pairs");
  if (rotary > head_dim)
    doc.fail(path, "rotary_dim " + std::to_string(rotary) + " is larger than head_dim " + std::to_string(head_dim));
}

// Applies the explicit entries onto `layers` (inferred ones, or defaults when no HF config).
void apply_explicit(const Doc& doc, const Hit& h, std::vector<LayerAttention>& layers, bool inferred) {
  if (!h.v->is_array()) doc.fail(h.path, "expected a list of per-layer objects, got " + show(*h.v));
  if (h.v->empty()) doc.fail(h.path, "the list is empty; give one object per model layer");
  if (inferred && h.v->size() != layers.size())
    doc.fail(h.path, "has " + std::to_string(h.v->size()) + " entries but the model has " + std::to_string(layers.size()) +
                         " layers; give one entry per layer");
  if (!inferred) layers.assign(h.v->size(), LayerAttention{});
  static const std::set<std::string> known = {"kind", "num_kv_heads", "head_dim", "rotary_dim", "is_neox_style",
                                              "k_norm", "eps", "rope_theta", "rope_scaling", "sliding_window"};
  for (size_t i = 0; i < h.v->size(); ++i) {
    const json& e = (*h.v)[i];
    const std::string p = h.path + "[" + std::to_string(i) + "]";
    if (!e.is_object()) doc.fail(p, "expected an object, got " + show(e));
    for (auto it = e.begin(); it != e.end(); ++it)
      if (!known.count(it.key()))
        doc.fail(p + "." + it.key(), "unknown key; known keys: kind, num_kv_heads, head_dim, rotary_dim, "
                                     "is_neox_style, k_norm, eps, rope_theta, rope_scaling, sliding_window");
    LayerAttention& L = layers[i];
    L.index = (int)i;
    // Entries that turn a non-attention layer into an attention layer must state its facts.
    const bool need = !inferred || !L.is_attention();
    auto at = [&](const char* k) { return Hit{present(e, k) ? &e[k] : nullptr, p + "." + k}; };
    if (Hit k = at("kind")) {
      std::string s = doc.string(k);
      if (s == "full_attention") L.kind = {LayerKind::FullAttention, k.path};
      else if (s == "sliding_attention") L.kind = {LayerKind::SlidingAttention, k.path};
      else if (s == "none") L.kind = {LayerKind::NoAttention, k.path};
      else doc.fail(k.path, "unknown kind \"" + s + "\"; expected full_attention, sliding_attention or none");
    } else if (!inferred) {
      L.kind = {LayerKind::FullAttention, "default: full_attention (explicit schema)"};
    }
    if (!L.is_attention()) {
      L.unsupported.clear();
      continue;
    }
    if (Hit k = at("num_kv_heads")) L.num_kv_heads = {doc.positive_int(k), k.path};
    else if (need) doc.fail(p, "missing \"num_kv_heads\" (required in the explicit schema)");
    if (Hit k = at("head_dim")) L.head_dim = {doc.positive_int(k), k.path};
    else if (need) doc.fail(p, "missing \"head_dim\" (required in the explicit schema)");
    if (Hit k = at("rotary_dim")) {
      int r = doc.nonneg_int(k);  // 0 = NoPE is allowed explicitly
      check_rotary(doc, k.path, r, L.head_dim.value);
      L.rotary_dim = {r, k.path};
    } else if (need) {
      L.rotary_dim = {L.head_dim.value, "default: head_dim (explicit schema)"};
    } else {
      check_rotary(doc, p, L.rotary_dim.value, L.head_dim.value);
    }
    if (Hit k = at("is_neox_style")) L.is_neox_style = {doc.boolean(k), k.path};
    else if (need) L.is_neox_style = {true, "default: neox (explicit schema)"};
    if (Hit k = at("k_norm")) L.k_norm = {parse_k_norm(doc, k), k.path};
    else if (need) L.k_norm = {KNormKind::None, "default: none (explicit schema)"};
    if (Hit k = at("eps")) L.eps = {doc.positive_number(k), k.path};
    else if (need) L.eps = {1e-6, "default: 1e-6 (explicit schema)"};
    if (Hit k = at("rope_theta")) {
      L.rope.value.theta = doc.positive_number(k);
      L.rope.source = k.path;
    } else if (need) {
      L.rope = {RopeFrequencies{}, "default: 10000 (explicit schema)"};
    }
    if (Hit k = at("rope_scaling")) {
      if (!k.v->is_object()) doc.fail(k.path, "expected an object, got " + show(*k.v));
      const json& s = *k.v;
      Hit type = present(s, "rope_type") ? Hit{&s["rope_type"], k.path + ".rope_type"}
                 : present(s, "type")    ? Hit{&s["type"], k.path + ".type"}
                                         : Hit{};
      L.rope.value.scaling_type = type ? doc.string(type) : "default";
      L.rope.value.scaling = json::object();
      for (auto it = s.begin(); it != s.end(); ++it)
        if (it.key() != "rope_type" && it.key() != "type" && !it->is_null()) L.rope.value.scaling[it.key()] = *it;
      L.rope.source += "; scaling: " + k.path;
    }
    if (Hit k = at("sliding_window")) L.sliding_window = doc.nonneg_int(k);
    // An explicit entry states the facts; it clears an inference-based verdict only when it gives
    // the norm kind (the only unsupported verdict the schema can express a supported value for).
    if (present(e, "k_norm") && L.unsupported.find("K norm") != std::string::npos) L.unsupported.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// Inference from a HuggingFace config.

ModelConfig infer(const Doc& doc, ModelConfig cfg, const Family& fam) {
  const int n = cfg.num_hidden_layers.value;
  KindPlan kinds = resolve_kinds(doc, fam, n);

  Hit hidden = doc.find({"hidden_size", "n_embd", "d_model", "model_dim"});
  Hit heads = doc.find({"num_attention_heads", "n_head", "num_heads"});
  const int hidden_size = hidden ? doc.positive_int(hidden) : 0;
  const int num_heads = heads ? doc.positive_int(heads) : 0;

  // MLA (DeepSeek-V2/V3, Kimi-K2): the cache holds a compressed latent, not per-head K/V.
  Hit kv_lora = doc.find({"kv_lora_rank"});
  Hit qk_rope = doc.find({"qk_rope_head_dim"});
  const bool mla = kv_lora || qk_rope;

  // Per-layer lists (OpenELM) and DeciLM block_configs.
  Hit kv_list;
  if (Hit h = doc.find({"num_kv_heads", "num_key_value_heads"}); h && h.v->is_array()) kv_list = h;
  Hit q_list;
  if (Hit h = doc.find({"num_query_heads"}); h && h.v->is_array()) q_list = h;
  Hit blocks = doc.find({"block_configs"});
  if (kv_list) doc.layer_list(kv_list, n);
  if (q_list) doc.layer_list(q_list, n);

  // Model-wide head_dim facts.
  Hit hd_key = doc.find({"head_dim", "kv_channels"});
  if (hd_key && hd_key.v->is_array()) doc.fail(hd_key.path, "per-layer head_dim lists are not supported; use the explicit schema");

  // NoPE facts.
  Hit no_rope = doc.find({"no_rope_layers"});
  Hit nope_interval = doc.find({"nope_layer_interval", "no_rope_layer_interval"});
  if (no_rope && !(no_rope.v->is_array() && no_rope.v->empty() && nope_interval)) doc.layer_list(no_rope, n);
  else no_rope = {};

  // Model-wide rotary facts.
  Hit rotary_key = doc.find({"rotary_dim"});
  Hit prf = doc.find({"partial_rotary_factor"});
  Hit rpct = doc.find({"rotary_pct"});
  Hit rotary_flag = doc.find({"rotary"});  // gpt_neo format

  // Neox facts.
  Hit neox_key = doc.find({"rope_is_neox_style", "is_neox_style"});
  std::optional<Sourced<bool>> neox_rule;
  if (neox_key) {
    neox_rule = Sourced<bool>{doc.boolean(neox_key), neox_key.path};
  } else if (fam.is({"gptj"})) {
    neox_rule = Sourced<bool>{false, std::string("architecture rule: gptj -> GPT-J interleaved (") + kRefGptj + ")"};
  } else if (fam.is({"gpt_neo"}) && rotary_flag && doc.boolean(rotary_flag)) {
    neox_rule = Sourced<bool>{false, std::string("architecture rule: gpt_neo-format GPT-J (") + rotary_flag.path +
                                         " = true) -> GPT-J interleaved (" + kRefGptj + ")"};
  } else if (fam.is({"cohere", "cohere2"})) {
    neox_rule = Sourced<bool>{false, "architecture rule: " + fam.model_type + " -> GPT-J interleaved (" + kRefCohere + ")"};
  } else if (fam.is({"glm", "glm4"})) {
    neox_rule = Sourced<bool>{false, "architecture rule: " + fam.model_type + " -> GPT-J interleaved (" + kRefGlm + ")"};
  } else if (fam.is({"chatglm"})) {
    neox_rule = Sourced<bool>{false, std::string("architecture rule: chatglm -> GPT-J interleaved (") + kRefChatglm + ")"};
  } else if (fam.is({"glm4_moe"})) {
    neox_rule = Sourced<bool>{true, std::string("architecture rule: glm4_moe -> neox (transformers "
                                                "models/glm4_moe/modeling_glm4_moe.py rotate_half splits halves)")};
  } else {
    neox_rule = Sourced<bool>{true, "architecture rule: " + (fam.model_type.empty() ? std::string("(no model_type)") : fam.model_type) +
                                        " -> neox (rotate_half on halves; the default)"};
  }

  // Model-wide K-norm facts and unsupported verdicts (per layer below).
  Hit qk_norm = doc.find({"use_qk_norm", "qk_layernorm", "normalize_qk_projections", "qk_norm"});
  const bool qk_on = qk_norm && qk_norm.v->is_boolean() && qk_norm.v->get<bool>();
  if (qk_norm && !qk_norm.v->is_boolean()) doc.boolean(qk_norm);  // throws with the key named

  const Sourced<double> eps = cfg.eps;

  for (int i = 0; i < n; ++i) {
    LayerAttention L;
    L.index = i;
    L.kind = kinds.kinds[i];
    const std::string tname = kinds.type_names[i];
    const std::string li = "layer " + std::to_string(i);
    if (!L.is_attention()) {
      const std::string na = "n/a: " + li + " has no KV (" + L.kind.source + ")";
      L.num_kv_heads.source = L.head_dim.source = L.rotary_dim.source = L.is_neox_style.source = na;
      L.k_norm.source = L.eps.source = L.rope.source = na;
      cfg.layers.push_back(std::move(L));
      continue;
    }

    // Heads of this layer.
    int layer_heads = num_heads;
    std::string heads_src = heads ? heads.path : "";
    if (q_list) {
      Hit e{&(*q_list.v)[i], q_list.path + "[" + std::to_string(i) + "]"};
      layer_heads = doc.positive_int(e);
      heads_src = e.path;
    }

    // head_dim.
    if (mla) {
      Hit nope = doc.find({"qk_nope_head_dim"});
      int r = qk_rope ? doc.positive_int(qk_rope) : 0;
      int d = (nope ? doc.positive_int(nope) : 0) + r;
      L.head_dim = {d, "MLA: qk_nope_head_dim + qk_rope_head_dim"};
      L.rotary_dim = {r, qk_rope ? qk_rope.path : "MLA: no qk_rope_head_dim"};
    } else if (hd_key) {
      L.head_dim = {doc.positive_int(hd_key), hd_key.path};
    } else {
      if (!hidden) doc.fail("hidden_size", "missing: head_dim is not given, so it must be derived from hidden_size / "
                                           "num_attention_heads; add \"head_dim\"");
      if (!layer_heads) doc.fail("num_attention_heads", "missing: head_dim is not given, so it must be derived from "
                                                        "hidden_size / num_attention_heads; add \"head_dim\"");
      if (hidden_size % layer_heads != 0)
        doc.fail(hidden.path, "hidden_size " + std::to_string(hidden_size) + " is not divisible by " + heads_src + " " +
                                  std::to_string(layer_heads) + ", so head_dim cannot be derived; add \"head_dim\"");
      L.head_dim = {hidden_size / layer_heads, "derived: " + hidden.path + " / " + heads_src + " = " +
                                                   std::to_string(hidden_size) + "/" + std::to_string(layer_heads)};
    }
    const int D = L.head_dim.value;

    // num_kv_heads.
    if (kv_list) {
      Hit e{&(*kv_list.v)[i], kv_list.path + "[" + std::to_string(i) + "]"};
      L.num_kv_heads = {doc.positive_int(e), e.path};
    } else if (blocks && present((*blocks.v)[i], "attention") &&
               present((*blocks.v)[i]["attention"], "n_heads_in_group")) {
      const std::string p = blocks.path + "[" + std::to_string(i) + "].attention.n_heads_in_group";
      int g = doc.positive_int(Hit{&(*blocks.v)[i]["attention"]["n_heads_in_group"], p});
      if (!layer_heads) doc.fail("num_attention_heads", "missing: needed with " + p);
      if (layer_heads % g != 0)
        doc.fail(p, std::to_string(g) + " does not divide num_attention_heads " + std::to_string(layer_heads));
      L.num_kv_heads = {layer_heads / g, "derived: " + heads_src + " / " + p + " = " + std::to_string(layer_heads) + "/" +
                                             std::to_string(g)};
    } else if (Hit mq = doc.find({"multi_query_attention"}); mq && doc.boolean(mq)) {
      Hit g = doc.find({"multi_query_group_num"});
      if (!g) doc.fail(mq.path, "is true but multi_query_group_num is missing");
      L.num_kv_heads = {doc.positive_int(g), g.path + " (" + mq.path + " = true)"};
    } else if (Hit kv = doc.find({"num_key_value_heads", "num_kv_heads"})) {
      L.num_kv_heads = {doc.positive_int(kv), kv.path};
    } else if (layer_heads) {
      L.num_kv_heads = {layer_heads, "default: " + heads_src + " (no num_key_value_heads: MHA)"};
    } else {
      doc.fail("num_key_value_heads", "missing, and num_attention_heads is missing too");
    }

    // rotary_dim (before NoPE).
    if (!mla) {
      std::string prf_path;
      double factor = 0;
      Hit params = rope_params_for(doc, tname.empty() ? "full_attention" : tname);
      if (prf) {
        factor = doc.number(prf);
        prf_path = prf.path;
      } else if (params && present(*params.v, "partial_rotary_factor")) {
        Hit h{&(*params.v)["partial_rotary_factor"], params.path + ".partial_rotary_factor"};
        factor = doc.number(h);
        prf_path = h.path;
      } else if (rpct) {
        factor = doc.number(rpct);
        prf_path = rpct.path;
      }
      if (rotary_key) {
        int r = doc.positive_int(rotary_key);
        check_rotary(doc, rotary_key.path, r, D);
        L.rotary_dim = {r, rotary_key.path};
      } else if (!prf_path.empty()) {
        if (!(factor > 0 && factor <= 1)) doc.fail(prf_path, "must be in (0, 1], got " + fmt(factor));
        double rd = D * factor;
        long long r = std::llround(rd);
        if (std::fabs(rd - (double)r) > 1e-6)
          doc.fail(prf_path, "head_dim " + std::to_string(D) + " * " + fmt(factor) + " = " + fmt(rd) +
                                 " is not a whole number of dimensions");
        check_rotary(doc, prf_path, (int)r, D);
        L.rotary_dim = {(int)r, "derived: head_dim * " + prf_path + " = " + std::to_string(D) + "*" + fmt(factor)};
      } else if (fam.is({"glm", "glm4"})) {
        L.rotary_dim = {D / 2, "class default: " + fam.model_type +
                                   " partial_rotary_factor=0.5 (transformers models/glm/configuration_glm.py "
                                   "__post_init__) -> head_dim/2"};
      } else if (fam.is({"chatglm"})) {
        L.rotary_dim = {D / 2, std::string("architecture rule: chatglm rotates head_dim/2 (RotaryEmbedding(rotary_dim // 2); ") +
                                   kRefChatglm + ")"};
      } else {
        L.rotary_dim = {D, "default: head_dim (full rotary)"};
      }
    }

    // NoPE layers.
    if (no_rope) {
      Hit e{&(*no_rope.v)[i], no_rope.path + "[" + std::to_string(i) + "]"};
      bool use = e.v->is_boolean() ? e.v->get<bool>() : false;
      if (!e.v->is_boolean()) {
        long long v = doc.integer(e);
        if (v != 0 && v != 1) doc.fail(e.path, "expected 1 (RoPE) or 0 (NoPE), got " + e.v->dump());
        use = v == 1;
      }
      if (!use) L.rotary_dim = {0, e.path + " = 0 (NoPE; 1 = RoPE, 0 = NoPE as transformers smollm3/llama4 "
                                            "use_rope = no_rope_layers[layer_idx])"};
    } else if (nope_interval) {
      int p = doc.positive_int(nope_interval);
      if ((i + 1) % p == 0)
        L.rotary_dim = {0, nope_interval.path + "=" + std::to_string(p) + ": NoPE iff (layer + 1) % " + std::to_string(p) +
                               " == 0 (transformers smollm3/llama4 configuration default)"};
    } else if (fam.is({"cohere2"}) && L.kind.value == LayerKind::FullAttention) {
      L.rotary_dim = {0, "architecture rule: cohere2 global layers are NoPE (transformers "
                         "models/cohere2/modeling_cohere2.py applies RoPE only when sliding_window is set)"};
    } else if (fam.is({"nemotron_h", "jamba"})) {
      L.rotary_dim = {0, "architecture rule: " + fam.model_type + " attention has no positional embedding (transformers "
                         "models/nemotron_h NemotronHAttention(JambaAttention), models/jamba JambaAttention: no RoPE)"};
    } else if (fam.is({"gpt_neo"}) && !(rotary_flag && doc.boolean(rotary_flag))) {
      L.rotary_dim = {0, "architecture rule: gpt_neo without rotary uses learned absolute positions (no RoPE)"};
    }

    // Neox style.
    L.is_neox_style = *neox_rule;

    // K norm.
    L.eps = eps;
    if (fam.is({"qwen3", "qwen3_moe"}) || fam.arch.rfind("DFlash", 0) == 0) {
      L.k_norm = {KNormKind::Rms, "architecture rule: " + (fam.is({"qwen3", "qwen3_moe"}) ? fam.model_type : fam.arch) +
                                      " -> per-head RMSNorm k_norm(head_dim), weight w (transformers "
                                      "models/qwen3/modeling_qwen3.py Qwen3Attention.k_norm)"};
    } else if (fam.qwen3_next_like()) {
      L.k_norm = {KNormKind::RmsOnePlus, "architecture rule: " + fam.model_type +
                                             " -> per-head RMSNorm with (1 + w) (transformers models/qwen3_next/"
                                             "modeling_qwen3_next.py Qwen3NextRMSNorm; Qwen3_5Attention = Qwen3NextAttention)"};
    } else if (fam.gemma3()) {
      L.k_norm = {KNormKind::RmsOnePlus, std::string("architecture rule: gemma3 -> per-head Gemma3RMSNorm(head_dim) with "
                                                     "(1 + w) (transformers models/gemma3/modeling_gemma3.py)")};
    } else if (fam.is({"olmo2", "olmo3"})) {
      L.k_norm = {KNormKind::None, "architecture rule: " + fam.model_type + " k_norm is RMSNorm over num_key_value_heads * "
                                       "head_dim (all heads together)"};
      L.unsupported = li + ": K norm across all heads (" + fam.model_type +
                      ": k_norm = RMSNorm(num_key_value_heads * head_dim) before the head split, transformers models/" +
                      fam.model_type + "/modeling_" + fam.model_type + ".py) is not a per-head norm; the fused path "
                      "supports only per-head RMS K norm";
    } else if (fam.is({"cohere", "cohere2"}) && qk_on) {
      L.k_norm = {KNormKind::None, qk_norm.path + " = true: CohereLayerNorm (mean-subtracting LayerNorm)"};
      L.unsupported = li + ": " + qk_norm.path + " = true uses CohereLayerNorm, a LayerNorm with mean subtraction "
                      "(transformers models/cohere/modeling_cohere.py), not RMS; the fused path supports only per-head RMS K norm";
    } else if (fam.is({"phi"}) && qk_on) {
      L.k_norm = {KNormKind::None, qk_norm.path + " = true: nn.LayerNorm per head"};
      L.unsupported = li + ": " + qk_norm.path + " = true uses nn.LayerNorm (transformers models/phi/modeling_phi.py "
                      "k_layernorm), not RMS; the fused path supports only per-head RMS K norm";
    } else if (fam.is({"llama4", "llama4_text"}) && qk_on) {
      L.k_norm = {KNormKind::None, qk_norm.path + " = true: L2 norm without weight"};
      if (L.rotary_dim.value > 0)
        L.unsupported = li + ": " + qk_norm.path + " = true applies an L2 norm without weight on RoPE layers "
                        "(transformers models/llama4/modeling_llama4.py Llama4TextL2Norm); not supported by the fused path";
    } else if (fam.is({"glm4_moe"})) {
      if (qk_on) L.k_norm = {KNormKind::Rms, qk_norm.path + " = true: per-head Glm4MoeRMSNorm(head_dim), weight w "
                                                            "(transformers models/glm4_moe/modeling_glm4_moe.py)"};
      else L.k_norm = {KNormKind::None, "architecture rule: glm4_moe without use_qk_norm has no K norm"};
    } else if (fam.is({"lfm2"})) {
      L.k_norm = {KNormKind::Rms, std::string("architecture rule: lfm2 -> per-head k_layernorm = Lfm2RMSNorm(head_dim) "
                                              "(LlamaRMSNorm, weight w; transformers models/lfm2/modular_lfm2.py)")};
    } else if (fam.is({"openelm"}) && qk_on) {
      L.k_norm = {KNormKind::Rms, qk_norm.path + " = true: per-head OpenELMRMSNorm(head_dim)"};
    } else if (qk_on) {
      L.k_norm = {KNormKind::None, qk_norm.path + " = true"};
      L.unsupported = li + ": " + qk_norm.path + " = true but the K norm kind of model_type \"" + fam.model_type +
                      "\" is not known to fkv-jit; describe the layers with the explicit schema (\"fkv\": {\"layers\": "
                      "[{..., \"k_norm\": \"rms\"}]})";
    } else {
      L.k_norm = {KNormKind::None, "architecture rule: " + (fam.model_type.empty() ? std::string("(no model_type)") : fam.model_type) +
                                       " has no K norm"};
    }

    if (mla)
      L.unsupported = li + ": multi-head latent attention (MLA: " + (kv_lora ? kv_lora.path + "=" + kv_lora.v->dump() : "") +
                      (kv_lora && qk_rope ? ", " : "") + (qk_rope ? qk_rope.path + "=" + qk_rope.v->dump() : "") +
                      ") caches a compressed latent, not per-head K/V; not supported by the fused KV path";

    // RoPE frequencies and window.
    L.rope = resolve_rope(doc, fam, L.kind.value, tname);
    if (L.kind.value == LayerKind::SlidingAttention)
      if (Hit w = doc.find({"sliding_window", "window_size", "attention_chunk_size"})) L.sliding_window = doc.nonneg_int(w);

    cfg.layers.push_back(std::move(L));
  }
  return cfg;
}

// Line and column (1-based) of byte offset `byte` (1-based, as nlohmann reports it).
std::pair<size_t, size_t> line_col(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

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
    case LayerKind::FullAttention: return "full_attention";
    case LayerKind::SlidingAttention: return "sliding_attention";
    case LayerKind::NoAttention: return "none";
  }
  return "?";
}

std::string to_string(KNormKind k) {
  switch (k) {
    case KNormKind::None: return "none";
    case KNormKind::Rms: return "rms";
    case KNormKind::RmsOnePlus: return "rms_one_plus";
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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(p + ": cannot read the config: it is a directory (give the path of config.json)");
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ConfigError(p + ": cannot read the config: " + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw ConfigError(p + ": cannot read the config: " + std::strerror(err));
    }
    if (r == 0) break;
    text.append(buf, (size_t)r);
  }
  ::close(fd);
  return from_json(std::string_view(text), p);
}

ModelConfig ModelConfig::from_json(std::string_view text, std::string name) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte);
    std::string what = e.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line L, column C: ".
    auto colon = what.find(": ");
    std::string detail = colon != std::string::npos ? what.substr(colon + 2) : what;
    throw ConfigError(name + ": malformed JSON at byte " + std::to_string(e.byte) + " (line " + std::to_string(line) +
                      ", column " + std::to_string(col) + "): " + detail);
  } catch (const json::exception& e) {
    // out_of_range.406: a number that does not fit a double ("1e999"); found by fuzz/fuzz_config.
    std::string what = e.what();
    auto bracket = what.find("] ");
    throw ConfigError(name + ": malformed JSON: " + (bracket != std::string::npos ? what.substr(bracket + 2) : what));
  }
  return from_json(doc, std::move(name));
}

ModelConfig ModelConfig::from_json(const nlohmann::json& root, std::string name) {
  Doc doc(root, name);
  ModelConfig cfg;
  cfg.path = name;
  cfg.architecture = arch_of(root);

  Family fam;
  if (doc.text() && present(*doc.text(), "model_type")) fam.model_type = doc.string(Hit{&(*doc.text())["model_type"], "text_config.model_type"});
  else if (present(root, "model_type")) fam.model_type = doc.string(Hit{&root["model_type"], "model_type"});
  fam.model_type = lower(fam.model_type);
  fam.arch = doc.text() ? arch_of(*doc.text()) : "";
  if (fam.arch.empty()) fam.arch = cfg.architecture;
  cfg.model_type = fam.model_type;
  doc.set_defaults(class_defaults_for(fam.model_type));

  Hit explicit_list = explicit_layers(doc);

  // Per-model values.
  Hit layers = doc.find({"num_hidden_layers", "n_layer", "num_layers", "num_transformer_layers"});
  if (layers) cfg.num_hidden_layers = {doc.positive_int(layers), layers.path};
  if (Hit h = doc.find({"hidden_size", "n_embd", "d_model", "model_dim"})) cfg.hidden_size = {doc.positive_int(h), h.path};
  else cfg.hidden_size.source = "absent";
  if (Hit h = doc.find({"num_attention_heads", "n_head", "num_heads"})) cfg.num_attention_heads = {doc.positive_int(h), h.path};
  else cfg.num_attention_heads.source = "absent";
  if (Hit h = doc.find({"max_position_embeddings", "n_positions"})) cfg.max_position_embeddings = {doc.positive_int(h), h.path};
  else cfg.max_position_embeddings.source = "absent";
  if (Hit h = doc.find({"torch_dtype", "dtype"})) cfg.dtype = {doc.string(h), h.path};
  else cfg.dtype.source = "absent";
  if (Hit h = doc.find({"rms_norm_eps", "layer_norm_epsilon", "norm_eps", "layer_norm_eps", "layernorm_epsilon"}))
    cfg.eps = {doc.positive_number(h), h.path};
  else cfg.eps = {1e-6, "default: 1e-6 (no eps key)"};

  if (!layers) {
    if (!explicit_list)
      doc.fail("num_hidden_layers", "missing: no num_hidden_layers, n_layer or num_layers key (and no explicit "
                                    "\"layers\" schema); is this a model config.json?");
    apply_explicit(doc, explicit_list, cfg.layers, false);
    cfg.num_hidden_layers = {(int)cfg.layers.size(), explicit_list.path + " (explicit schema, one entry per layer)"};
    return cfg;
  }
  cfg = infer(doc, std::move(cfg), fam);
  if (explicit_list) apply_explicit(doc, explicit_list, cfg.layers, true);
  return cfg;
}

}  // namespace fkv
