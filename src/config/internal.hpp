// Internal to the config module (src/config/*.cpp): the JSON document with its lookup order
// and typed accessors, and the steps infer() is made of. Not installed.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"

namespace fkv::config_detail {

using json = nlohmann::json;

inline std::string fmt(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A short rendering of a JSON value for error messages.
inline std::string show(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();
    return std::isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity";
  }
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

inline bool present(const json& obj, const std::string& key) {
  if (!obj.is_object()) return false;
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

// Class defaults that transformers fills in when a shipped config.json omits a field (from the
// registry entry, e.g. Gemma3TextConfig).
struct ClassDefaults {
  std::string name;  // e.g. "Gemma3TextConfig"
  json values = json::object();
};

// The document being read, with the lookup order and typed, validating accessors.
class Doc {
 public:
  // `nested` is the object holding the layer config (text_config, llm_config or speculators'
  // transformer_layer_config), or nullptr; `nested_name` its key.
  Doc(const json& root, std::string file, const json* nested = nullptr,
      std::string nested_name = "")
      : root_(root),
        file_(std::move(file)),
        nested_(nested),
        nested_name_(std::move(nested_name)) {}

  const std::string& file() const { return file_; }
  const json& root() const { return root_; }
  const json* nested() const { return nested_; }
  const std::string& nested_name() const { return nested_name_; }
  void set_defaults(ClassDefaults d) { defaults_ = std::move(d); }
  void ignore(const std::string& key) { ignored_.push_back(key); }
  // A class default the reader uses by itself (layer_types_period: the period of the
  // layer_types list the class's __init__ computes), with its source.
  Hit class_default(const char* key) const {
    if (!present(defaults_.values, key)) return {};
    return {&defaults_.values[key], "class default (" + defaults_.name + ")." + key};
  }

  // Bad input (a malformed or wrong value): ConfigError, exit 2.
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw ConfigError(file_ + ": key '" + path + "': " + what);
  }
  // The file is fine but its attention is not something fkv-jit serves (or can check):
  // UnsupportedError, exit 9.
  [[noreturn]] void refuse(const std::string& path, const std::string& what) const {
    throw UnsupportedError(file_ + ": key '" + path + "': " + what);
  }

  // The nested layer config first (for fields it holds), then the top level, then class defaults.
  // A key written as null is absent, but it is not replaced by the class default: transformers
  // keeps the None (Ernie4_5Config: head_dim None -> hidden_size / num_attention_heads, not 128).
  // Keys in ignore() are not found: layout keys the entry does not read, checked separately.
  Hit find(std::initializer_list<const char*> keys) const {
    if (nested_)
      for (const char* k : keys)
        if (present(*nested_, k) && !ignored(k)) return {&(*nested_)[k], nested_name_ + "." + k};
    for (const char* k : keys)
      if (present(root_, k) && !ignored(k)) return {&root_[k], k};
    for (const char* k : keys)
      if (present(defaults_.values, k) && !written(k) && !ignored(k))
        return {&defaults_.values[k], "class default (" + defaults_.name + ")." + k};
    return {};
  }

  // Reads an integer; a float is accepted only when it is integral (128.0), never 128.5 or "128".
  long long integer(const Hit& h) const {
    const json& v = *h.v;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() &&
          v.get<unsigned long long>() > (unsigned long long)std::numeric_limits<int>::max())
        fail(h.path, "value " + v.dump() + " is too large");
      return v.get<long long>();
    }
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 2147483648.0)
        return (long long)d;
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
    if (h.v->is_string())
      for (const char* s : {"Infinity", "-Infinity", "NaN", "inf", "-inf", "nan"})
        if (h.v->get_ref<const std::string&>() == s)
          fail(h.path, std::string("expected a finite number, got ") + s);
    if (!h.v->is_number()) fail(h.path, "expected a number, got " + show(*h.v));
    double d = h.v->get<double>();
    if (!std::isfinite(d)) fail(h.path, "expected a finite number, got " + show(*h.v));
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
    if (!h.v->is_array())
      fail(h.path, "expected a list with one entry per layer, got " + show(*h.v));
    if (h.v->empty())
      fail(h.path, "the list is empty; it must have one entry per layer (" + std::to_string(n) +
                       "), or be removed");
    if ((int)h.v->size() != n)
      fail(h.path, "has " + std::to_string(h.v->size()) + " entries but the model has " +
                       std::to_string(n) + " layers");
    return *h.v;
  }

 private:
  bool written(const char* k) const {
    return (nested_ && nested_->is_object() && nested_->contains(k)) ||
           (root_.is_object() && root_.contains(k));
  }

  bool ignored(const char* k) const {
    return std::find(ignored_.begin(), ignored_.end(), k) != ignored_.end();
  }

  const json& root_;
  std::string file_;
  std::vector<std::string> ignored_;
  const json* nested_ = nullptr;
  std::string nested_name_;
  ClassDefaults defaults_;
};

inline std::string arch_of(const json& obj) {
  if (!obj.is_object() || !obj.contains("architectures")) return "";
  const json& a = obj["architectures"];
  if (a.is_array() && !a.empty() && a[0].is_string()) return a[0].get<std::string>();
  return "";
}

// The family a config belongs to: its registry entry and the model_type as written.
struct Family {
  const Architecture* arch = nullptr;
  std::string model_type;  // lower case, "" when matched by architectures[0]
  // "architecture rule: <model_type> ... (<citation>)": how rules name their source.
  std::string rule(const std::string& what) const {
    const std::string who = model_type.empty() ? arch->name : model_type;
    return "architecture rule: " + who + " " + what + " (registry \"" + arch->name +
           "\": " + arch->citation + ")";
  }
  bool reads(const std::string& key) const {
    return std::find(arch->reads.begin(), arch->reads.end(), key) != arch->reads.end();
  }
};

// The refused model_types (verdicts.cpp, merging the tables below), appended to the registry
// after the supported entries. The registry's entries, in the order architectures() lists them:
// families.cpp, families_more.cpp, then verdicts.cpp.
void add_families(std::vector<Architecture>& table);
void add_more_families(std::vector<Architecture>& table);
void add_refused_model_types(std::vector<Architecture>& table);
// A refused model_type: why, and the modeling file it was read from.
struct RefusalRow {
  const char* model_type;
  const char* reason;
  const char* citation;
};
const std::vector<RefusalRow>& no_rope_refusals();       // verdicts_no_rope.cpp
const std::vector<RefusalRow>& engine_name_refusals();   // verdicts_names.cpp
const std::vector<RefusalRow>& draft_module_refusals();  // verdicts_draft_names.cpp
// Reads shared by families whose attention is LlamaAttention-like: `head_dim =
// getattr(config, "head_dim", hidden_size // num_attention_heads)` and num_key_value_heads.
inline std::vector<std::string> with_basics(std::vector<std::string> extra) {
  std::vector<std::string> r = {"head_dim", "num_key_value_heads"};
  r.insert(r.end(), extra.begin(), extra.end());
  return r;
}

// JSON access (json_access.cpp): parsing with the size and depth limits.
json parse_text(std::string_view text, const std::string& name);
std::string read_file_capped(const std::string& path);
void check_depth(const json& root, const std::string& name);
// Python-JSON spellings of non-finite floats ({"__float__": "Infinity"}, and the markers
// parse_text writes for bare NaN / Infinity) -> doubles, anywhere in the document.
void restore_non_finite(json& root);
bool has_non_finite_spelling(const json& root);

// Refusals (registry.cpp): layout keys the entry does not read, unknown model_types.
// A layout key present in the file that the entry does not read.
struct UnreadKey {
  std::string key;   // "rotary_dim"
  std::string path;  // "text_config.rotary_dim"
  const json* value = nullptr;
  std::string layer_type;  // set when the key sits in per-layer-type RoPE parameters
};
// Refuses (UnsupportedError) an unread layout key whose meaning fkv-jit cannot check; returns
// the others, to be checked against the resolved layout by check_unread_keys.
std::vector<UnreadKey> unread_layout_keys(const Doc& doc, const Family& fam);
// An unread key that agrees with every layer is noted in the source of the fact it restates
// ("; agrees: rotary_dim = 32"); one that contradicts is refused, naming both.
void check_unread_keys(const Doc& doc, const Family& fam, const std::vector<UnreadKey>& keys,
                       std::vector<LayerAttention>& layers);
// `type` (may be "") is the model_type to suggest neighbours for.
[[noreturn]] void refuse_unknown(const Doc& doc, const std::string& what, const std::string& type);
// A model_type whose registry verdict is a refusal (Architecture::refusal).
[[noreturn]] void refuse_family(const Doc& doc, const std::string& path, const Family& fam);
// Keys meaning MLA, linear attention, cross-attention or K/V sharing, refused beside the
// explicit schema too.
void refuse_schema_bypass(const Doc& doc);
// The `count` supported model_types nearest to `type` (edit distance less shared prefix).
std::string nearest_supported(const std::string& type, size_t count);

// Layer kinds (layer_kinds.cpp).
std::optional<LayerKind> kind_from_name(const std::string& raw);
// "full_attention" / "sliding_attention"; "" for a layer without KV.
std::string type_name(LayerKind k);
// The resolved kind of every layer, with the layer_types name each came from (not a plan:
// "Plan" is the validated layer grouping of validate.hpp).
struct LayerKinds {
  std::vector<Sourced<LayerKind>> kinds;
  // Per layer: its layer_types name as written (lower case), or "full_attention" /
  // "sliding_attention" from another pattern key; "" for a layer without KV.
  std::vector<std::string> type_names;
};
LayerKinds resolve_kinds(const Doc& doc, const Family& fam, int n);

// RoPE parameters (rope_params.cpp).
Hit rope_params_for(const Doc& doc, const std::string& tname);
Sourced<RopeFrequencies> resolve_rope(const Doc& doc, const Family& fam, LayerKind kind,
                                      const std::string& tname);
void check_mrope_section(const Doc& doc, const LayerAttention& L, const std::string& tname);

// Explicit schema (explicit_schema.cpp).
Hit explicit_layers(const Doc& doc);
void check_rotary(const Doc& doc, const std::string& path, int rotary, int head_dim);
void apply_explicit(const Doc& doc, const Hit& h, std::vector<LayerAttention>& layers,
                    bool inferred);

// The declared storage of the K/V projection weights (quantization.cpp): quantization_config
// or compression_config, read once the layers are resolved (its patterns name modules by
// layer). Never throws: a refusal is kept in the result (DeclaredWeights::raise).
DeclaredWeights read_declared_weights(const Doc& doc, const ModelConfig& cfg);

// Inference from a HuggingFace config (infer.cpp).
ModelConfig infer(const Doc& doc, ModelConfig cfg, const Family& fam);

}  // namespace fkv::config_detail
