// config: the explicit per-layer schema {"layers": [...]}, top level or under "fkv".
#include <set>

#include "internal.hpp"

namespace fkv::config_detail {

// ---------------------------------------------------------------------------------------------
// Explicit per-layer schema: {"layers": [...]} at the top level or under "fkv".

Hit explicit_layers(const Doc& doc) {
  const json& root = doc.root();
  if (present(root, "fkv")) {
    const json& f = root["fkv"];
    if (!f.is_object()) doc.fail("fkv", "expected an object {\"layers\": [...]}, got " + show(f));
    if (!present(f, "layers")) doc.fail("fkv", "has no \"layers\" list");
    // One schema per file, even when both lists are equal: two copies drift apart at the next
    // edit, and which one was read would then be a rule to remember.
    if (present(root, "layers"))
      doc.fail("layers",
               "the file gives the explicit schema twice, as the top-level \"layers\" and as "
               "\"fkv.layers\"; keep one: \"fkv.layers\" beside an HF config (delete the "
               "top-level \"layers\"), or the top-level \"layers\" alone (delete \"fkv\")");
    return {&f["layers"], "fkv.layers"};
  }
  if (present(root, "layers")) return {&root["layers"], "layers"};
  return {};
}

KNormKind k_norm_at(const Doc& doc, const Hit& h) {
  const std::string s = doc.string(h);
  if (const auto k = find_k_norm(s)) return *k;
  doc.fail(h.path, "unknown K norm \"" + s + "\"; expected " + k_norm_names());
}

void check_rotary(const Doc& doc, const std::string& path, int rotary, int head_dim) {
  if (rotary % 2 != 0)
    doc.fail(path, "rotary_dim " + std::to_string(rotary) + " is odd; RoPE rotates pairs");
  if (rotary > head_dim)
    doc.fail(path, "rotary_dim " + std::to_string(rotary) + " is larger than head_dim " +
                       std::to_string(head_dim));
}

// Applies the explicit entries onto `layers` (inferred ones, or defaults when no HF config).
void apply_explicit(const Doc& doc, const Hit& h, std::vector<LayerAttention>& layers,
                    bool inferred) {
  if (!h.v->is_array()) doc.fail(h.path, "expected a list of per-layer objects, got " + show(*h.v));
  if (h.v->empty()) doc.fail(h.path, "the list is empty; give one object per model layer");
  if (inferred && h.v->size() != layers.size())
    doc.fail(h.path, "has " + std::to_string(h.v->size()) + " entries but the model has " +
                         std::to_string(layers.size()) + " layers; give one entry per layer");
  if (!inferred) layers.assign(h.v->size(), LayerAttention{});
  static const auto& known = *new std::set<std::string>{
      "kind",   "num_kv_heads", "head_dim",   "rotary_dim",   "is_neox_style",
      "k_norm", "eps",          "rope_theta", "rope_scaling", "sliding_window"};
  for (size_t i = 0; i < h.v->size(); ++i) {
    const json& e = (*h.v)[i];
    const std::string p = h.path + "[" + std::to_string(i) + "]";
    if (!e.is_object()) doc.fail(p, "expected an object, got " + show(e));
    for (auto it = e.begin(); it != e.end(); ++it)
      if (!known.count(it.key()))
        doc.fail(p + "." + it.key(),
                 "unknown key; known keys: kind, num_kv_heads, head_dim, rotary_dim, "
                 "is_neox_style, k_norm, eps, rope_theta, rope_scaling, sliding_window");
    LayerAttention& L = layers[i];
    L.index = (int)i;
    // Entries that turn a non-attention layer into an attention layer must state its facts.
    const bool need = !inferred || !L.is_attention();
    auto at = [&](const char* k) { return Hit{present(e, k) ? &e[k] : nullptr, p + "." + k}; };
    if (Hit k = at("kind")) {
      std::string s = doc.string(k);
      if (s == "full_attention")
        L.kind = {LayerKind::FullAttention, k.path};
      else if (s == "sliding_attention")
        L.kind = {LayerKind::SlidingAttention, k.path};
      else if (s == "none")
        L.kind = {LayerKind::NoAttention, k.path};
      else
        doc.fail(k.path,
                 "unknown kind \"" + s + "\"; expected full_attention, sliding_attention or none");
    } else if (!inferred) {
      L.kind = {LayerKind::FullAttention, "default: full_attention (explicit schema)"};
    }
    if (!L.is_attention()) {
      L.unsupported.clear();
      continue;
    }
    if (Hit k = at("num_kv_heads"))
      L.num_kv_heads = {doc.positive_int(k), k.path};
    else if (need)
      doc.fail(p, "missing \"num_kv_heads\" (required in the explicit schema)");
    const Sourced<int> read_head_dim = L.head_dim;  // from the HF config, when inferred
    if (Hit k = at("head_dim"))
      L.head_dim = {doc.positive_int(k), k.path};
    else if (need)
      doc.fail(p, "missing \"head_dim\" (required in the explicit schema)");
    // A new head_dim without a rotary_dim, over a layer of the HF config: a layer that rotated
    // its whole head rotates the whole new one; a partial rotary_dim was read for the old size,
    // and which part of the new head it should be is the user's to say.
    if (!need && !present(e, "rotary_dim") && L.head_dim.value != read_head_dim.value &&
        L.rotary_dim.value != 0) {
      const std::string hd = std::to_string(L.head_dim.value);
      if (L.rotary_dim.value != read_head_dim.value)
        doc.fail(p + ".head_dim",
                 "head_dim " + hd + " replaces the HF config's head_dim " +
                     std::to_string(read_head_dim.value) + " (" + read_head_dim.source +
                     "), whose rotary_dim " + std::to_string(L.rotary_dim.value) + " (" +
                     L.rotary_dim.source +
                     ") rotates part of it; give \"rotary_dim\" in this entry too (0 for NoPE)");
      if (L.head_dim.value % 2 != 0)
        doc.fail(p + ".head_dim",
                 "head_dim " + hd +
                     " is odd, and rotary_dim follows it (the HF config rotates the whole head); "
                     "RoPE rotates pairs, so give an even \"rotary_dim\" (0 for NoPE)");
      L.rotary_dim = {L.head_dim.value, "= head_dim " + hd + " (" + p +
                                            ".head_dim): the HF config rotates the whole head (" +
                                            L.rotary_dim.source + ")"};
    }
    if (Hit k = at("rotary_dim")) {
      int r = doc.nonneg_int(k);  // 0 = NoPE is allowed explicitly
      // Larger than a head_dim the user did not write here: say where that one came from.
      if (r > L.head_dim.value && !present(e, "head_dim"))
        doc.fail(k.path,
                 "rotary_dim " + std::to_string(r) + " is larger than head_dim " +
                     std::to_string(L.head_dim.value) + " (" + L.head_dim.source +
                     "); give \"head_dim\" in this entry too if the layer's head is larger");
      check_rotary(doc, k.path, r, L.head_dim.value);
      L.rotary_dim = {r, k.path};
    } else if (need) {
      L.rotary_dim = {L.head_dim.value, "default: head_dim (explicit schema)"};
      if (L.head_dim.value % 2 != 0)
        doc.fail(p + ".head_dim", "head_dim " + std::to_string(L.head_dim.value) +
                                      " is odd, and rotary_dim defaults to it; RoPE rotates "
                                      "pairs, so give an even \"rotary_dim\" (0 for NoPE)");
    } else {
      check_rotary(doc, p, L.rotary_dim.value, L.head_dim.value);
    }
    if (Hit k = at("is_neox_style"))
      L.is_neox_style = {doc.boolean(k), k.path};
    else if (need)
      L.is_neox_style = {true, "default: neox (explicit schema)"};
    if (Hit k = at("k_norm"))
      L.k_norm = {k_norm_at(doc, k), k.path};
    else if (need)
      L.k_norm = {KNormKind::None, "default: none (explicit schema)"};
    if (Hit k = at("eps"))
      L.eps = {doc.positive_number(k), k.path};
    else if (need)
      L.eps = {1e-6, "default: 1e-6 (explicit schema)"};
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
        if (it.key() != "rope_type" && it.key() != "type" && !it->is_null())
          L.rope.value.scaling[it.key()] = *it;
      L.rope.source += "; scaling: " + k.path;
    }
    if (Hit k = at("sliding_window")) L.sliding_window = doc.nonneg_int(k);
    // An explicit entry states the facts; it clears an inference-based verdict only when it gives
    // the norm kind (the only unsupported verdict the schema can express a supported value for).
    if (present(e, "k_norm") && L.unsupported.find("K norm") != std::string::npos)
      L.unsupported.clear();
  }
}

}  // namespace fkv::config_detail
