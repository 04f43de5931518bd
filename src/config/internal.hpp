// Internal to the config module (src/config/*.cpp): the JSON document with its lookup order
// and typed accessors, and the steps infer() is made of. Not installed.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

// Class defaults that transformers fills in when a shipped config.json omits a field.
struct ClassDefaults {
  std::string name;  // e.g. "Gemma3TextConfig"
  json values = json::object();
};

inline ClassDefaults class_defaults_for(const std::string& model_type) {
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

inline std::string arch_of(const json& obj) {
  if (!obj.is_object() || !obj.contains("architectures")) return "";
  const json& a = obj["architectures"];
  if (a.is_array() && !a.empty() && a[0].is_string()) return a[0].get<std::string>();
  return "";
}

inline const char* const kRefGptj = "transformers models/gptj/modeling_gptj.py rotate_every_two (pairs 2i, 2i+1)";
inline const char* const kRefCohere = "transformers models/cohere/modeling_cohere.py rotate_half (x[..., ::2], x[..., 1::2]) "
                         "with repeat_interleave'd cos/sin";
inline const char* const kRefGlm = "transformers models/glm/modeling_glm.py and glm4/modeling_glm4.py rotate_half "
                      "(x[..., 0::2], x[..., 1::2]) with repeat_interleave'd cos/sin";
inline const char* const kRefChatglm = "THUDM modeling_chatglm.py apply_rotary_pos_emb (reshape(..., rot_dim // 2, 2))";


// Layer kinds (layer_kinds.cpp).
std::optional<LayerKind> kind_from_name(const std::string& raw);
struct KindPlan {
  std::vector<Sourced<LayerKind>> kinds;
  std::vector<std::string> type_names;  // "full_attention" / "sliding_attention" / "" (no KV)
};
KindPlan resolve_kinds(const Doc& doc, const Family& fam, int n);

// RoPE parameters (rope_params.cpp).
Hit rope_params_for(const Doc& doc, const std::string& tname);
Sourced<RopeFrequencies> resolve_rope(const Doc& doc, const Family& fam, LayerKind kind, const std::string& tname);

// Explicit schema (explicit_schema.cpp).
Hit explicit_layers(const Doc& doc);
void check_rotary(const Doc& doc, const std::string& path, int rotary, int head_dim);
void apply_explicit(const Doc& doc, const Hit& h, std::vector<LayerAttention>& layers, bool inferred);

// Inference from a HuggingFace config (infer.cpp).
ModelConfig infer(const Doc& doc, ModelConfig cfg, const Family& fam);

}  // namespace fkv::config_detail
