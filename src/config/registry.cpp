// config: refusals on behalf of the registry: an unknown or refused model_type (naming it, the
// reason and the nearest supported families), and a layout key the config's entry does not read
// (naming the key). Never a default. Every refusal is an UnsupportedError (exit 9), at most three
// lines.
#include <algorithm>
#include <set>

#include "internal.hpp"

namespace fkv::config_detail {
namespace {

// A value that states nothing: an empty list or object, or false for a key that switches a
// feature on (use_qk_norm: false). null already counts as absent. False is a statement for the
// keys that choose a RoPE style or switch RoPE off.
bool neutral(const std::string& key, const json& v) {
  static const auto& style = *new std::set<std::string>{"is_neox_style", "rope_is_neox_style",
                                                        "rope_interleave", "rotary"};
  if (v.is_boolean()) return !v.get<bool>() && !style.count(key);
  return (v.is_array() && v.empty()) || (v.is_object() && v.empty());
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_supported(const std::string& type, size_t count) {
  // Edit distance, less the shared prefix (qwen3_vl is nearer qwen3 than olmo3).
  std::vector<std::pair<long, std::string>> scored;
  for (const Architecture& a : architectures()) {
    if (a.refused() || a.mla) continue;  // MLA entries serve no layer either
    for (const auto& t : a.model_types) {
      if (t == type) continue;
      size_t prefix = 0;
      while (prefix < t.size() && prefix < type.size() && t[prefix] == type[prefix]) ++prefix;
      scored.push_back({(long)edit_distance(type, t) - (long)prefix, t});
    }
  }
  std::sort(scored.begin(), scored.end());
  std::string out;
  for (size_t i = 0; i < scored.size() && i < count; ++i) out += (i ? ", " : "") + scored[i].second;
  return out;
}

[[noreturn]] void refuse_unknown(const Doc& doc, const std::string& what, const std::string& type) {
  throw UnsupportedError(
      doc.file() + ": " + what +
      " fkv-jit reads a family's attention layout only from its "
      "architecture registry and does not guess.\n" +
      (type.empty() ? std::string()
                    : "Nearest supported model_types: " + nearest_supported(type, 4) + ".\n") +
      "See docs/config-rules.md (section 3 lists every model_type with its verdict; section 5 "
      "the explicit schema for a model whose attention is plain per-head K/V).");
}

[[noreturn]] void refuse_family(const Doc& doc, const std::string& path, const Family& fam) {
  throw UnsupportedError(
      doc.file() + ": key '" + path + "': model_type \"" + fam.model_type +
      "\" is not supported: " + fam.arch->refusal + " (" + fam.arch->citation +
      ").\nNearest supported model_types: " + nearest_supported(fam.model_type, 4) +
      ".\nSee docs/config-rules.md (section 3).");
}

void refuse_schema_bypass(const Doc& doc) {
  // Keys whose attention no per-layer {num_kv_heads, head_dim, rotary_dim} entry can describe: the
  // explicit schema would turn them into plain GQA layers.
  static const auto& bypass = *new std::vector<std::pair<std::string, std::string>>{
      {"kv_lora_rank", "MLA: the cache holds a compressed latent, not per-head K/V"},
      {"q_lora_rank", "MLA query compression"},
      {"qk_rope_head_dim", "MLA: rotary part of the head"},
      {"qk_nope_head_dim", "MLA: non-rotary part of the head"},
      {"linear_attn_config", "linear-attention layers"},
      {"linear_num_key_heads", "linear-attention layers"},
      {"linear_key_head_dim", "linear-attention layers"},
      {"linear_num_value_heads", "linear-attention layers"},
      {"linear_value_head_dim", "linear-attention layers"},
      {"full_attn_idxs", "linear-attention layers beside the full-attention ones"},
      {"attn_type_list", "linear-attention layers"},
      {"decoder_attention_types", "linear-attention layers"},
      {"cross_attention_layers", "cross-attention: K/V from another sequence"},
      {"attention_k_eq_v", "K and V share one projection"},
      {"num_kv_shared_layers", "layers reuse another layer's KV cache"},
      {"use_cla", "cross-layer attention: layers share another layer's KV"},
  };
  auto scan = [&](const json& obj, const std::string& prefix) {
    for (const auto& [key, meaning] : bypass)
      if (present(obj, key) && !neutral(key, obj[key]))
        doc.refuse(prefix + key,
                   meaning +
                       ": the explicit schema describes per-head K/V layers only, so it "
                       "cannot describe this model.\nSee docs/config-rules.md (section 5).");
  };
  if (doc.nested()) scan(*doc.nested(), doc.nested_name() + ".");
  scan(doc.root(), "");
}

namespace {

// Layout keys whose meaning fkv-jit can check against a resolved layout when the entry does not
// read them (a redundant key that agrees is harmless).
bool checkable(const std::string& key) {
  static const auto& keys = *new std::set<std::string>{
      "head_dim",
      "kv_channels",
      "num_key_value_heads",
      "num_kv_heads",
      "rotary_dim",
      "partial_rotary_factor",
      "rotary_pct",
      "layer_types",
      "sliding_window_pattern",
      "is_neox_style",
      "rope_is_neox_style",
      "rope_interleave",
      "rope_local_base_freq",
      "no_rope_layers",
      "nope_layer_interval",
      "no_rope_layer_interval",
      "full_attention_interval",
      "use_qk_norm",
      "qk_norm",
      "qk_layernorm",
  };
  return keys.count(key) > 0;
}

}  // namespace

std::vector<UnreadKey> unread_layout_keys(const Doc& doc, const Family& fam) {
  std::vector<UnreadKey> out;
  auto take = [&](const std::string& key, const json& v, const std::string& path,
                  const std::string& meaning, const std::string& layer_type = "") {
    if (!checkable(key))
      doc.refuse(path, "changes the attention layout (" + meaning +
                           "), but the modeling code of \"" + fam.arch->name +
                           "\" that fkv-jit was checked against does not read it (" +
                           fam.arch->citation +
                           "), so fkv-jit cannot tell what it means here.\nRemove the key if it "
                           "is stale. See docs/config-rules.md (section 4).");
    out.push_back({key, path, &v, layer_type});
  };
  auto scan = [&](const json& obj, const std::string& prefix) {
    for (const LayoutKey& k : layout_keys()) {
      if (!present(obj, k.key) || neutral(k.key, obj[k.key]) || fam.reads(k.key)) continue;
      take(k.key, obj[k.key], prefix + k.key, k.meaning);
    }
  };
  if (doc.nested()) scan(*doc.nested(), doc.nested_name() + ".");
  scan(doc.root(), "");
  // partial_rotary_factor may also sit inside rope_parameters / rope_scaling (per type too).
  if (!fam.reads("partial_rotary_factor") && !fam.arch->rotary_per_layer_type) {
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
      Hit h = doc.find({key});
      if (!h || !h.v->is_object()) continue;
      auto check = [&](const json& p, const std::string& path, const std::string& type) {
        if (present(p, "partial_rotary_factor"))
          take("partial_rotary_factor", p["partial_rotary_factor"], path + ".partial_rotary_factor",
               "rotated fraction of head_dim", type);
      };
      check(*h.v, h.path, "");
      for (auto it = h.v->begin(); it != h.v->end(); ++it)
        if (it->is_object()) check(*it, h.path + "." + it.key(), it.key());
    }
  }
  return out;
}

void check_unread_keys(const Doc& doc, const Family& fam, const std::vector<UnreadKey>& keys,
                       std::vector<LayerAttention>& layers) {
  for (const UnreadKey& k : keys) {
    const Hit h{k.value, k.path};
    const std::string shown = k.path + " = " + show(*k.value);
    // What the key says about layer i, compared with what was resolved; "" when they agree.
    auto contradiction = [&](const LayerAttention& L) -> std::string {
      const int i = L.index;
      if (!k.layer_type.empty() && kind_from_name(k.layer_type) != L.kind.value) return "";
      const std::string li = "layer " + std::to_string(i) + " ";
      auto differ = [&](const std::string& what, const std::string& resolved,
                        const std::string& source) {
        return li + what + " " + resolved + " (" + source + ")";
      };
      const std::string& key = k.key;
      if (key == "head_dim" || key == "kv_channels") {
        if (!L.is_attention() || doc.positive_int(h) == L.head_dim.value) return "";
        return differ("head_dim", std::to_string(L.head_dim.value), L.head_dim.source);
      }
      if (key == "num_key_value_heads" || key == "num_kv_heads") {
        if (!L.is_attention()) return "";
        const json& v = k.value->is_array() ? doc.layer_list(h, (int)layers.size())[i] : *k.value;
        if (doc.positive_int(Hit{&v, k.path}) == L.num_kv_heads.value) return "";
        return differ("num_kv_heads", std::to_string(L.num_kv_heads.value), L.num_kv_heads.source);
      }
      if (key == "rotary_dim" || key == "partial_rotary_factor" || key == "rotary_pct") {
        if (!L.is_attention() || L.rotary_dim.value == 0) return "";  // NoPE layers
        int r = 0;
        if (key == "rotary_dim") {
          r = doc.positive_int(h);
        } else {
          const double f = doc.number(h);
          if (!(f > 0 && f <= 1)) doc.fail(k.path, "must be in (0, 1], got " + fmt(f));
          r = static_cast<int>(L.head_dim.value * f);
        }
        if (r == L.rotary_dim.value) return "";
        return differ("rotary_dim", std::to_string(L.rotary_dim.value), L.rotary_dim.source);
      }
      if (key == "layer_types") {
        const json& e = doc.layer_list(h, (int)layers.size())[i];
        auto kind = e.is_string() ? kind_from_name(e.get<std::string>()) : std::nullopt;
        if (!kind)
          doc.fail(k.path + "[" + std::to_string(i) + "]", "unknown layer type " + show(e));
        if (*kind == L.kind.value) return "";
        return differ("is", to_string(L.kind.value), L.kind.source);
      }
      if (key == "sliding_window_pattern" || key == "full_attention_interval") {
        LayerKind want;
        if (k.value->is_string()) {  // "LLLG": L local (sliding), G global, repeated
          const std::string pat = k.value->get<std::string>();
          if (pat.empty() || pat.find_first_not_of("LG") != std::string::npos)
            doc.fail(k.path,
                     "expected a pattern of L (local) and G (global), got " + show(*k.value));
          want =
              pat[i % pat.size()] == 'L' ? LayerKind::SlidingAttention : LayerKind::FullAttention;
        } else {
          const int p = doc.positive_int(h);
          const bool full = (i + 1) % p == 0;
          want = full                               ? LayerKind::FullAttention
                 : key == "full_attention_interval" ? LayerKind::NoAttention
                                                    : LayerKind::SlidingAttention;
        }
        if (want == L.kind.value) return "";
        return differ("is", to_string(L.kind.value), L.kind.source);
      }
      if (key == "is_neox_style" || key == "rope_is_neox_style" || key == "rope_interleave") {
        if (!L.is_attention()) return "";
        const bool neox = doc.boolean(h) != (key == "rope_interleave");
        if (neox == L.is_neox_style.value) return "";
        return differ("neox", L.is_neox_style.value ? "true" : "false", L.is_neox_style.source);
      }
      if (key == "rope_local_base_freq") {
        if (L.kind.value != LayerKind::SlidingAttention || L.rotary_dim.value == 0) return "";
        if (doc.positive_number(h) == L.rope.value.theta) return "";
        return differ("theta", fmt(L.rope.value.theta), L.rope.source);
      }
      if (key == "no_rope_layers" || key == "nope_layer_interval" ||
          key == "no_rope_layer_interval") {
        if (!L.is_attention()) return "";
        bool rope;
        if (key == "no_rope_layers") {
          const json& e = doc.layer_list(h, (int)layers.size())[i];
          rope = e.is_boolean() ? e.get<bool>() : doc.integer(Hit{&e, k.path}) != 0;
        } else {
          rope = (i + 1) % doc.positive_int(h) != 0;
        }
        if (rope == (L.rotary_dim.value > 0)) return "";
        return differ("rotary_dim", std::to_string(L.rotary_dim.value), L.rotary_dim.source);
      }
      if (key == "use_qk_norm" || key == "qk_norm" || key == "qk_layernorm") {
        if (!L.is_attention()) return "";
        if (!doc.boolean(h) || L.k_norm.value != KNormKind::None) return "";
        return differ("has K norm", "none", L.k_norm.source);
      }
      return "cannot be checked";
    };
    for (LayerAttention& L : layers) {
      const std::string why = contradiction(L);
      if (!why.empty())
        doc.refuse(k.path, "= " + show(*k.value) + " contradicts the layout resolved for \"" +
                               fam.arch->name + "\" (whose modeling code does not read the key: " +
                               fam.arch->citation + "): " + why +
                               ".\nRemove the key if it is stale. See docs/config-rules.md "
                               "(section 4).");
    }
    // It agrees: say so where --explain shows the fact it restates.
    for (LayerAttention& L : layers) {
      const std::string note = "; agrees: " + shown;
      if (k.key == "layer_types" || k.key == "sliding_window_pattern" ||
          k.key == "full_attention_interval")
        L.kind.source += note;
      else if (!L.is_attention())
        continue;
      else if (k.key == "head_dim" || k.key == "kv_channels")
        L.head_dim.source += note;
      else if (k.key == "num_key_value_heads" || k.key == "num_kv_heads")
        L.num_kv_heads.source += note;
      else if (k.key == "is_neox_style" || k.key == "rope_is_neox_style" ||
               k.key == "rope_interleave")
        L.is_neox_style.source += note;
      else if (k.key == "rope_local_base_freq")
        L.rope.source += note;
      else if (k.key == "use_qk_norm" || k.key == "qk_norm" || k.key == "qk_layernorm")
        L.k_norm.source += note;
      else
        L.rotary_dim.source += note;
    }
  }
}

}  // namespace fkv::config_detail
