// config: refusals on behalf of the registry: an unknown model_type (naming it and showing the
// explicit schema), and a layout key the config's entry does not read (naming the key). Never
// a default.
#include <set>

#include "internal.hpp"

namespace fkv::config_detail {
namespace {

const char* kSchemaExample =
    "{\"fkv\": {\"layers\": [{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, "
    "\"is_neox_style\": true, \"k_norm\": \"rms\", \"eps\": 1e-6, \"rope_theta\": 1000000}, ...]}} "
    "(one entry per model layer; kind \"full_attention\" | \"sliding_attention\" | \"none\"; "
    "k_norm "
    "\"rms\" | \"rms_one_plus\" | \"none\")";

// A value that states nothing: an empty list or object, or false for a key that switches a
// feature on (use_qk_norm: false). null already counts as absent. False is a statement for the
// keys that choose a RoPE style or switch RoPE off.
bool neutral(const std::string& key, const json& v) {
  static const std::set<std::string> style = {"is_neox_style", "rope_is_neox_style",
                                              "rope_interleave", "rotary"};
  if (v.is_boolean()) return !v.get<bool>() && !style.count(key);
  return (v.is_array() && v.empty()) || (v.is_object() && v.empty());
}

std::string supported_list() {
  std::string s;
  for (const Architecture& a : architectures())
    for (const auto& t : a.model_types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace

[[noreturn]] void refuse_unknown(const Doc& doc, const std::string& what) {
  throw UnsupportedError(
      doc.file() + ": " + what +
      " fkv-jit reads a family's attention layout only from its architecture registry "
      "(docs/config-rules.md) and does not guess. Supported model_types: " +
      supported_list() +
      ". Otherwise describe the layers with the explicit schema: " + kSchemaExample);
}

void refuse_unread_layout_keys(const Doc& doc, const Family& fam) {
  auto scan = [&](const json& obj, const std::string& prefix) {
    for (const LayoutKey& k : layout_keys()) {
      if (!present(obj, k.key) || neutral(k.key, obj[k.key]) || fam.reads(k.key)) continue;
      doc.fail(prefix + k.key, "changes the attention layout (" + k.meaning +
                                   "), but the modeling code of \"" + fam.arch->name +
                                   "\" that fkv-jit was checked against (" + fam.arch->citation +
                                   ") does not read it, so fkv-jit cannot tell what it means for "
                                   "this model. Remove it if it "
                                   "is stale, or describe the layers with the explicit schema: " +
                                   kSchemaExample);
    }
  };
  if (doc.nested()) scan(*doc.nested(), doc.nested_name() + ".");
  scan(doc.root(), "");
  // partial_rotary_factor may also sit inside rope_parameters / rope_scaling (per type too).
  if (!fam.reads("partial_rotary_factor")) {
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
      Hit h = doc.find({key});
      if (!h || !h.v->is_object()) continue;
      auto check = [&](const json& p, const std::string& path) {
        if (present(p, "partial_rotary_factor"))
          doc.fail(path + ".partial_rotary_factor",
                   "a partial rotary factor, but the modeling code of \"" + fam.arch->name +
                       "\" (" + fam.arch->citation +
                       ") rotates the whole head; describe the layers with the explicit "
                       "schema if this model differs");
      };
      check(*h.v, h.path);
      for (auto it = h.v->begin(); it != h.v->end(); ++it)
        if (it->is_object()) check(*it, h.path + "." + it.key());
    }
  }
}

}  // namespace fkv::config_detail
