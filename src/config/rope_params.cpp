// config: RoPE parameters (theta, scaling) of a layer, by layer type.
#include "internal.hpp"

namespace fkv::config_detail {

// ---------------------------------------------------------------------------------------------
// RoPE frequencies.

// rope_parameters may be keyed by layer type: {"full_attention": {...}, "sliding_attention":
// {...}}.
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
    if (present(*h.v, tname)) return {&(*h.v)[tname], h.path + "." + tname};
    // A name of its own (Rnj1's "chunked_attention") may be keyed by its canonical kind.
    const auto kind = kind_from_name(tname);
    const std::string canonical = kind ? type_name(*kind) : "";
    if (!canonical.empty() && present(*h.v, canonical))
      return {&(*h.v)[canonical], h.path + "." + canonical};
    doc.fail(h.path, "is keyed by layer type but has no entry for \"" + tname + "\"");
  }
  return h;
}

Sourced<RopeFrequencies> resolve_rope(const Doc& doc, const Family& fam, LayerKind kind,
                                      const std::string& tname) {
  Sourced<RopeFrequencies> out;
  RopeFrequencies& r = out.value;
  Hit params = rope_params_for(doc, tname);
  Hit top = doc.find({"rope_parameters"});
  if (!top) top = doc.find({"rope_scaling"});
  const bool per_type = params && top && keyed_by_layer_type(*top.v);
  const bool local_rule =
      kind == LayerKind::SlidingAttention && !per_type && doc.find({"rope_local_base_freq"});

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
  } else if (fam.arch->style == RopeStyle::GptJ && fam.arch->rotary == RotaryDefault::Half &&
             fam.reads("kv_channels")) {
    // ChatGLM: base 10000 * rope_ratio.
    Hit ratio = doc.find({"rope_ratio"});
    double q = ratio ? doc.positive_number(ratio) : 1.0;
    r.theta = 10000.0 * q;
    theta_src =
        fam.rule("base 10000 * " + (ratio ? ratio.path : std::string("rope_ratio (absent: 1)")));
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
    if (present(p, "rope_type"))
      type = {&p["rope_type"], params.path + ".rope_type"};
    else if (present(p, "type"))
      type = {&p["type"], params.path + ".type"};
    r.scaling_type = type ? doc.string(type) : "default";
    if (r.scaling_type.empty()) doc.fail(type.path, "must not be empty");
    // transformers 5 standardizes with setdefault("rope_type", get("type", "default")): a
    // rope_type written as null stays None and no RoPE can be built (ROPE_INIT_FUNCTIONS[None]),
    // so beside scaling keys it is refused: which type a factor was meant for cannot be told.
    if (p.contains("rope_type") && p["rope_type"].is_null())
      for (auto it = p.begin(); it != p.end(); ++it)
        if (it.key() != "rope_type" && it.key() != "rope_theta" &&
            it.key() != "partial_rotary_factor" && !it->is_null())
          doc.fail(params.path + ".rope_type",
                   "is null beside \"" + it.key() +
                       "\": transformers keeps a null rope_type and cannot build the RoPE, and "
                       "which RoPE type the scaling keys are for cannot be told. Write the type "
                       "(\"linear\", \"dynamic\", \"yarn\", \"llama3\", \"longrope\", ...), "
                       "or remove the scaling keys for unscaled RoPE");
    for (auto it = p.begin(); it != p.end(); ++it) {
      const std::string& k = it.key();
      if (k == "rope_type" || k == "type" || k == "rope_theta" || k == "partial_rotary_factor" ||
          it->is_null())
        continue;
      if (k == "factor") doc.positive_number(Hit{&*it, params.path + ".factor"});
      r.scaling[k] = *it;
    }
    if (r.scaling_type != "default") {
      // transformers' rope init functions fall back to these config fields.
      if (!r.scaling.contains("original_max_position_embeddings"))
        if (Hit o = doc.find({"original_max_position_embeddings"}))
          r.scaling["original_max_position_embeddings"] = doc.positive_int(o);
      if (r.scaling_type == "longrope" && !r.scaling.contains("max_position_embeddings"))
        if (Hit m = doc.find({"max_position_embeddings"}))
          r.scaling["max_position_embeddings"] = doc.positive_int(m);
    }
    scale_src =
        "; scaling: " + (type ? type.path + " = " + r.scaling_type : params.path + " (default)");
    // No type at all: transformers takes "default" and does not read the other keys (a factor
    // included); they are kept in the canonical text but change no frequency.
    if (!type && !r.scaling.empty())
      scale_src += " (no rope_type or type: default RoPE, as transformers reads it; " +
                   params.path + "'s other keys are not used)";
    // Qwen2-VL / Qwen2.5-VL / Qwen3.5 multimodal RoPE: each frequency band takes the temporal,
    // height or width position; for text tokens the three are equal, so it is plain RoPE there.
    if (r.scaling_type == "mrope" || r.scaling.contains("mrope_section"))
      scale_src +=
          " (mrope: exact for text tokens, whose temporal, height and width positions are equal; "
          "image and video tokens carry 3-D positions, which the fused path does not take)";
  } else if (local_rule && params) {
    scale_src =
        fam.arch->k_norm == KNormRule::RmsOnePlus
            ? "; scaling: default (architecture rule: gemma3 rope_scaling applies to global layers "
              "only; transformers gemma3/modeling_gemma3.py rotary_emb_local)"
            : "; scaling: default (sliding layer with rope_local_base_freq)";
  } else {
    scale_src = "; scaling: default (no rope_scaling)";
  }
  out.source = "theta: " + theta_src + scale_src;
  return out;
}

// Multimodal RoPE (Qwen2-VL and its kin) splits the rotary_dim / 2 frequency pairs among the
// temporal, height and width positions by mrope_section. Sections that do not cover the pairs
// exactly make the engines refuse the model (vLLM rotary_embedding/mrope.py MRotaryEmbedding
// asserts sum(mrope_section) == rotary_dim // 2; transformers qwen2_vl
// apply_multimodal_rotary_pos_emb splits cos/sin by mrope_section * 2), so the file contradicts
// itself: say which keys, instead of building a layout no engine loads.
void check_mrope_section(const Doc& doc, const LayerAttention& L, const std::string& tname) {
  if (!L.is_attention() || L.rotary_dim.value == 0) return;
  Hit params = rope_params_for(doc, tname.empty() ? "full_attention" : tname);
  if (!params || !present(*params.v, "mrope_section")) return;
  const Hit h{&(*params.v)["mrope_section"], params.path + ".mrope_section"};
  if (!h.v->is_array() || h.v->empty())
    doc.fail(h.path, "expected a list of section sizes (frequency pairs per position axis), got " +
                         show(*h.v));
  long long pairs = 0;
  for (size_t j = 0; j < h.v->size(); ++j)
    pairs += doc.nonneg_int(Hit{&(*h.v)[j], h.path + "[" + std::to_string(j) + "]"});
  const int r = L.rotary_dim.value;
  if (pairs * 2 == r) return;
  doc.fail(h.path, "= " + h.v->dump() + " covers " + std::to_string(pairs) +
                       " frequency pairs, but layer " + std::to_string(L.index) +
                       " rotates rotary_dim " + std::to_string(r) + " (" + L.rotary_dim.source +
                       "), which has " + std::to_string(r / 2) +
                       ": the sections must cover rotary_dim / 2 pairs exactly (vLLM "
                       "MRotaryEmbedding asserts sum(mrope_section) == rotary_dim // 2, and "
                       "transformers splits cos/sin by mrope_section * 2), so no engine loads "
                       "this model. Fix mrope_section or the key that sets rotary_dim");
}

}  // namespace fkv::config_detail
