// config: per-layer attention facts inferred from a HuggingFace config.json, by the rules of
// the config's registry entry. Layout keys the entry does not read were refused before this
// runs (registry.cpp), so every key looked up here is one the family's modeling code reads.
#include "internal.hpp"

namespace fkv::config_detail {
namespace {

// The qk-norm key the entry reads (use_qk_norm, qk_layernorm, ...), and whether it is true.
struct QkNorm {
  Hit key;
  bool on = false;
};

QkNorm qk_norm_of(const Doc& doc, const Family& fam) {
  QkNorm q;
  for (const char* k : {"use_qk_norm", "qk_layernorm", "qk_norm", "normalize_qk_projections",
                        "attention_layer_norm"}) {
    if (!fam.reads(k)) continue;
    if (Hit h = doc.find({k})) {
      q.key = h;
      q.on = doc.boolean(h);
      break;
    }
  }
  return q;
}

// rotary_dim before NoPE rules: rotary_dim | int(head_dim * partial_rotary_factor) | family
// default.
Sourced<int> rotary_of(const Doc& doc, const Family& fam, int D, const std::string& tname) {
  if (fam.arch->rotary == RotaryDefault::None)
    return {0, fam.rule("-> no RoPE (no rotary embedding)")};
  if (fam.reads("rotary_dim"))
    if (Hit h = doc.find({"rotary_dim"})) {
      int r = doc.positive_int(h);
      check_rotary(doc, h.path, r, D);
      return {r, h.path};
    }
  Hit factor;
  if (fam.arch->rotary_per_layer_type) {
    // Laguna: rope_parameters[layer_type].get("partial_rotary_factor", 1.0).
    Hit params = rope_params_for(doc, tname.empty() ? "full_attention" : tname);
    if (!params || !present(*params.v, "partial_rotary_factor"))
      return {D, (params ? params.path : std::string("rope_parameters")) +
                     " has no partial_rotary_factor: " +
                     fam.rule("-> rotates head_dim (the factor defaults to 1.0)")};
    factor = {&(*params.v)["partial_rotary_factor"], params.path + ".partial_rotary_factor"};
  }
  if (!factor && fam.reads("rotary_pct")) factor = doc.find({"rotary_pct"});  // GPT-NeoX
  if (!factor && fam.reads("partial_rotary_factor")) {
    factor = doc.find({"partial_rotary_factor"});
    if (!factor)
      if (Hit params = rope_params_for(doc, tname.empty() ? "full_attention" : tname);
          params && present(*params.v, "partial_rotary_factor"))
        factor = {&(*params.v)["partial_rotary_factor"], params.path + ".partial_rotary_factor"};
  }
  if (factor) {
    const double f = doc.number(factor);
    if (!(f > 0 && f <= 1)) doc.fail(factor.path, "must be in (0, 1], got " + fmt(f));
    // The engines' arithmetic: transformers, vLLM and sglang all take int(head_dim * factor).
    const int r = static_cast<int>(D * f);
    check_rotary(doc, factor.path, r, D);
    return {r, "derived: int(head_dim * " + factor.path + ") = int(" + std::to_string(D) + "*" +
                   fmt(f) + ") = " + std::to_string(r) +
                   " (truncated, as transformers, vLLM and sglang compute it)"};
  }
  if (fam.arch->rotary == RotaryDefault::Half)
    return {D / 2, fam.rule("-> rotates head_dim/2 (class default factor 0.5)")};
  return {D, "default: head_dim (full rotary; " + fam.arch->name +
                 " reads no partial-rotary key here)"};
}

Sourced<bool> neox_of(const Doc& doc, const Family& fam) {
  for (const char* k : {"rope_is_neox_style", "is_neox_style"})
    if (fam.reads(k))
      if (Hit h = doc.find({k})) return {doc.boolean(h), h.path};
  if (fam.arch->style == RopeStyle::GptJ)
    return {false, fam.rule("-> GPT-J interleaved pairs (2i, 2i+1)")};
  return {true, fam.rule("-> neox (rotate_half on halves)")};
}

// K norm of one attention layer; sets L.unsupported for kinds the fused path cannot do.
void k_norm_of(LayerAttention& L, const Family& fam, const QkNorm& qk, const std::string& li,
               const std::string& qk_type, const std::string& qk_type_src) {
  const std::string key = qk.key ? qk.key.path + " = true" : std::string();
  switch (fam.arch->k_norm) {
    case KNormRule::None:
      L.k_norm = {KNormKind::None, fam.rule("has no K norm")};
      return;
    case KNormRule::Rms:
      L.k_norm = {KNormKind::Rms, fam.rule("-> per-head RMSNorm k_norm(head_dim), weight w")};
      return;
    case KNormRule::RmsOnePlus:
      L.k_norm = {KNormKind::RmsOnePlus, fam.rule("-> per-head RMSNorm with (1 + w)")};
      return;
    case KNormRule::RmsIfQkNorm:
      if (qk.on)
        L.k_norm = {KNormKind::Rms,
                    key + ": " + fam.rule("-> per-head RMSNorm(head_dim), weight w")};
      else
        L.k_norm = {KNormKind::None, fam.rule("without a true qk-norm key has no K norm")};
      return;
    case KNormRule::AcrossHeads:
      L.k_norm = {
          KNormKind::None,
          fam.rule("k_norm is RMSNorm over num_key_value_heads * head_dim (all heads together)")};
      L.unsupported = li + ": K norm across all heads (" + fam.arch->citation +
                      ": one RMSNorm over all KV heads before the head split) is not a per-head "
                      "norm; the fused path "
                      "supports only per-head RMS K norm";
      return;
    case KNormRule::LayerNormIfQkNorm:
      if (!qk.on) {
        L.k_norm = {KNormKind::None, fam.rule("without a true qk-norm key has no K norm")};
        return;
      }
      L.k_norm = {KNormKind::None, key + ": LayerNorm (mean-subtracting)"};
      L.unsupported = li + ": " + key + " uses a LayerNorm with mean subtraction (" +
                      fam.arch->citation +
                      "), not RMS; the fused path supports only per-head RMS K norm";
      return;
    case KNormRule::RmsAfterRope:
      L.k_norm = {KNormKind::None,
                  fam.rule("-> key_layernorm RMSNorm(head_dim) applied after RoPE")};
      L.unsupported = li + ": K norm after RoPE (" + fam.arch->citation +
                      "); the fused path normalizes K before RoPE only";
      return;
    case KNormRule::AcrossHeadsIfQkNorm:
      if (!qk.on) {
        L.k_norm = {KNormKind::None, fam.rule("without a true qk-norm key has no K norm")};
        return;
      }
      L.k_norm = {KNormKind::None, key + ": RMSNorm over num_key_value_heads * head_dim"};
      L.unsupported = li + ": " + key + " normalizes K across all KV heads together (" +
                      fam.arch->citation + "); the fused path supports only per-head RMS K norm";
      return;
    case KNormRule::ByQkNormType:
      if (qk_type == "qwen3") {
        L.k_norm = {KNormKind::Rms, qk_type_src + " = \"qwen3\": " +
                                        fam.rule("-> per-head RMSNorm(head_dim), weight w")};
        return;
      }
      L.k_norm = {KNormKind::None, qk_type_src + " = \"" + qk_type + "\""};
      L.unsupported =
          li + ": " + qk_type_src + " = \"" + qk_type + "\" (" + fam.arch->citation +
          (qk_type == "olmo" ? "): one RMSNorm over all KV heads; the fused path supports only "
                               "per-head RMS K norm"
                             : "): a kind this family's modeling code does not define");
      return;
    case KNormRule::L2IfQkNorm:
      if (!qk.on) {
        L.k_norm = {KNormKind::None, fam.rule("without use_qk_norm has no K norm")};
        return;
      }
      L.k_norm = {KNormKind::None, key + ": L2 norm without weight"};
      if (L.rotary_dim.value > 0)
        L.unsupported = li + ": " + key + " applies an L2 norm without weight on RoPE layers (" +
                        fam.arch->citation + "); not supported by the fused path";
      return;
  }
}

// Falcon's KV heads (FalconAttention: num_kv_heads if new_decoder_architecture or not
// multi_query, else 1; FalconConfig: multi_query defaults to true, num_kv_heads to the heads).
Sourced<int> falcon_kv_heads(const Doc& doc, const Family& fam, int heads,
                             const std::string& heads_src) {
  Hit nda = doc.find({"new_decoder_architecture"});
  Hit mq = doc.find({"multi_query"});
  const bool new_arch = nda && doc.boolean(nda);
  const bool multi = mq ? doc.boolean(mq) : true;
  if (!new_arch && multi)
    return {1, (mq ? mq.path + " = true"
                   : fam.rule("class default (FalconConfig) multi_query = "
                              "true")) +
                   ": one KV head (num_kv_heads is not read without new_decoder_architecture)"};
  const std::string why =
      new_arch ? nda.path + " = true" : mq.path + " = false (without new_decoder_architecture)";
  if (Hit kv = doc.find({"num_kv_heads"}))
    return {doc.positive_int(kv), kv.path + " (" + why + ")"};
  if (!heads) doc.fail("num_attention_heads", "missing: Falcon's KV heads default to it");
  return {heads, "default: " + heads_src + " (FalconConfig num_kv_heads None; " + why + ")"};
}

}  // namespace

ModelConfig infer(const Doc& doc, ModelConfig cfg, const Family& fam) {
  const int n = cfg.num_hidden_layers.value;
  LayerKinds kinds = resolve_kinds(doc, fam, n);

  Hit hidden = doc.find({"hidden_size", "n_embd", "d_model", "model_dim"});
  Hit heads = doc.find({"num_attention_heads", "n_head", "num_heads"});
  const int hidden_size = hidden ? doc.positive_int(hidden) : 0;
  const int num_heads = heads ? doc.positive_int(heads) : 0;

  // MLA (DeepSeek-V2/V3, Kimi-K2): the cache holds a compressed latent, not per-head K/V.
  Hit kv_lora = doc.find({"kv_lora_rank"});
  Hit qk_rope = doc.find({"qk_rope_head_dim"});

  // Per-layer KV-head lists (OpenELM's num_kv_heads): no registry entry reads them yet, and the
  // modeling code of every entry that reads the key takes one number (a list would crash
  // transformers' Qwen3 or Llama), so a list is refused rather than read per layer.
  if (Hit h = doc.find({"num_key_value_heads", "num_kv_heads"}); h && h.v->is_array())
    doc.refuse(h.path, "is a per-layer list, but the modeling code of \"" + fam.arch->name +
                           "\" that fkv-jit was checked against takes one number for every "
                           "layer (" +
                           fam.arch->citation +
                           "), and no registry entry reads per-layer KV-head lists yet.\nGive "
                           "one number, or describe the layers with the explicit schema "
                           "(\"fkv\": {\"layers\": [...]}). See docs/config-rules.md (section 2).");
  // DeciLM block_configs (only present when the entry reads them).
  Hit blocks = doc.find({"block_configs"});

  // Model-wide head_dim facts.
  Hit hd_key = doc.find({"head_dim", "kv_channels"});
  if (hd_key && hd_key.v->is_array())
    doc.refuse(hd_key.path, "per-layer head_dim lists are not supported; use the explicit schema");

  // NoPE facts.
  Hit no_rope = doc.find({"no_rope_layers"});
  Hit nope_interval = doc.find({"nope_layer_interval", "no_rope_layer_interval"});
  if (no_rope && !(no_rope.v->is_array() && no_rope.v->empty() && nope_interval))
    doc.layer_list(no_rope, n);
  else
    no_rope = {};
  Hit rotary_flag = fam.arch->nope == NopeRule::WithoutRotaryFlag ? doc.find({"rotary"}) : Hit{};
  const bool rotary_on = rotary_flag && doc.boolean(rotary_flag);
  Hit window = doc.find({"sliding_window", "window_size", "attention_chunk_size"});

  const Sourced<bool> neox = neox_of(doc, fam);
  const QkNorm qk = qk_norm_of(doc, fam);
  // Molmo 2: qk_norm_type names the kind; the class defaults disagree across versions.
  std::string qk_type, qk_type_src;
  if (fam.arch->k_norm == KNormRule::ByQkNormType) {
    Hit t = doc.find({"qk_norm_type"});
    if (!t)
      doc.refuse("qk_norm_type",
                 "is missing: " + fam.arch->name +
                     " normalizes K per head (\"qwen3\") or across "
                     "all heads (\"olmo\") by it, and versions of its config class default to "
                     "either; add the key as the checkpoint was trained");
    qk_type = doc.string(t);
    qk_type_src = t.path;
  }
  // Falcon: "alibi": true means no RoPE.
  Hit alibi = fam.arch->nope == NopeRule::IfAlibi ? doc.find({"alibi"}) : Hit{};
  const bool alibi_on = alibi && doc.boolean(alibi);
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
    const int layer_heads = num_heads;
    const std::string heads_src = heads ? heads.path : "";

    // head_dim.
    if (fam.arch->mla) {
      Hit nope = doc.find({"qk_nope_head_dim"});
      int r = qk_rope ? doc.positive_int(qk_rope) : 0;
      int d = (nope ? doc.positive_int(nope) : 0) + r;
      L.head_dim = {d, "MLA: qk_nope_head_dim + qk_rope_head_dim"};
      L.rotary_dim = {r, qk_rope ? qk_rope.path : "MLA: no qk_rope_head_dim"};
    } else if (hd_key) {
      L.head_dim = {doc.positive_int(hd_key), hd_key.path};
    } else {
      if (!hidden)
        doc.fail("hidden_size",
                 "missing: head_dim is not given, so it must be derived from hidden_size / "
                 "num_attention_heads; add \"head_dim\"");
      if (!layer_heads)
        doc.fail("num_attention_heads",
                 "missing: head_dim is not given, so it must be derived from "
                 "hidden_size / num_attention_heads; add \"head_dim\"");
      if (hidden_size % layer_heads != 0)
        doc.fail(hidden.path, "hidden_size " + std::to_string(hidden_size) +
                                  " is not divisible by " + heads_src + " " +
                                  std::to_string(layer_heads) +
                                  ", so head_dim cannot be derived; add \"head_dim\"");
      L.head_dim = {hidden_size / layer_heads, "derived: " + hidden.path + " / " + heads_src +
                                                   " = " + std::to_string(hidden_size) + "/" +
                                                   std::to_string(layer_heads)};
    }
    const int D = L.head_dim.value;

    // num_kv_heads.
    std::string kv_path = "num_key_value_heads";  // the key named if the heads do not group
    if (blocks && present((*blocks.v)[i], "attention") &&
        present((*blocks.v)[i]["attention"], "n_heads_in_group")) {
      const std::string p = blocks.path + "[" + std::to_string(i) + "].attention.n_heads_in_group";
      int g = doc.positive_int(Hit{&(*blocks.v)[i]["attention"]["n_heads_in_group"], p});
      if (!layer_heads) doc.fail("num_attention_heads", "missing: needed with " + p);
      if (layer_heads % g != 0)
        doc.fail(p, std::to_string(g) + " does not divide num_attention_heads " +
                        std::to_string(layer_heads));
      L.num_kv_heads = {layer_heads / g, "derived: " + heads_src + " / " + p + " = " +
                                             std::to_string(layer_heads) + "/" + std::to_string(g)};
    } else if (fam.arch->kv_heads == KvHeadsRule::Falcon) {
      L.num_kv_heads = falcon_kv_heads(doc, fam, layer_heads, heads_src);
      kv_path = "num_kv_heads";
    } else if (Hit mq = doc.find({"multi_query_attention"}); mq && doc.boolean(mq)) {
      Hit g = doc.find({"multi_query_group_num"});
      if (!g) doc.fail(mq.path, "is true but multi_query_group_num is missing");
      L.num_kv_heads = {doc.positive_int(g), g.path + " (" + mq.path + " = true)"};
      kv_path = g.path;
    } else if (Hit kv = doc.find({"num_key_value_heads", "num_kv_heads"})) {
      L.num_kv_heads = {doc.positive_int(kv), kv.path};
      kv_path = kv.path;
    } else if (layer_heads) {
      L.num_kv_heads = {layer_heads, "default: " + heads_src + " (no num_key_value_heads: MHA)"};
    } else {
      doc.fail("num_key_value_heads", "missing, and num_attention_heads is missing too");
    }
    // Grouped-query attention gives every KV head heads / kv query heads (transformers'
    // num_key_value_groups = heads // kv; vLLM and sglang require heads % kv == 0). Checked when
    // the file states the KV heads: a class default beside a file's heads is not the file's
    // claim (minimal configs shaped like the class defaults mix them).
    if (const int kv = L.num_kv_heads.value; layer_heads && !fam.arch->mla &&
                                             kv_path.rfind("class default", 0) != 0 &&
                                             (kv > layer_heads || layer_heads % kv != 0))
      doc.fail(kv_path, std::to_string(kv) + " KV heads " +
                            (kv > layer_heads ? "are more than" : "do not divide") + " the " +
                            std::to_string(layer_heads) + " query heads (" + heads_src +
                            "): grouped-query attention shares each KV head among heads / "
                            "kv_heads query heads, so the KV heads must divide the query heads "
                            "(transformers' num_key_value_groups, vLLM and sglang). Fix one of "
                            "the two keys");

    // rotary_dim, then NoPE layers.
    if (!fam.arch->mla) L.rotary_dim = rotary_of(doc, fam, D, tname);
    if (no_rope) {
      Hit e{&(*no_rope.v)[i], no_rope.path + "[" + std::to_string(i) + "]"};
      bool use = e.v->is_boolean() ? e.v->get<bool>() : false;
      if (!e.v->is_boolean()) {
        long long v = doc.integer(e);
        if (v != 0 && v != 1) doc.fail(e.path, "expected 1 (RoPE) or 0 (NoPE), got " + e.v->dump());
        use = v == 1;
      }
      if (!use)
        L.rotary_dim = {0, e.path +
                               " = 0 (NoPE; 1 = RoPE, 0 = NoPE as transformers smollm3/llama4 "
                               "use_rope = no_rope_layers[layer_idx])"};
    } else if (nope_interval) {
      int p = doc.positive_int(nope_interval);
      if ((i + 1) % p == 0)
        L.rotary_dim = {0, nope_interval.path + "=" + std::to_string(p) +
                               ": NoPE iff (layer + 1) % " + std::to_string(p) +
                               " == 0 (transformers smollm3/llama4 configuration default)"};
    } else if (fam.arch->nope == NopeRule::FullLayers && L.kind.value == LayerKind::FullAttention) {
      L.rotary_dim = {0,
                      fam.rule("-> full-attention layers are NoPE (RoPE only on sliding layers)")};
    } else if (fam.arch->nope == NopeRule::FullLayersIfSliding &&
               L.kind.value == LayerKind::FullAttention && window) {
      L.rotary_dim = {
          0, fam.rule("-> full-attention layers are NoPE when " + window.path + " is set")};
    } else if (fam.arch->nope == NopeRule::IfAlibi && alibi_on) {
      L.rotary_dim = {0, alibi.path +
                             " = true: no RoPE (ALiBi biases the attention scores; K is "
                             "not rotated): " +
                             fam.rule("-> RoPE unless alibi")};
    } else if (fam.arch->nope == NopeRule::WithoutRotaryFlag && !rotary_on) {
      L.rotary_dim = {
          0, fam.rule("without \"rotary\": true uses learned absolute positions (no RoPE)")};
    }

    // RoPE rotates pairs: an odd rotary_dim here came from an odd head_dim (the default) or a
    // family rule on it; one the file states was checked where it was read.
    if (L.rotary_dim.value % 2 != 0)
      doc.fail(hd_key ? hd_key.path : "head_dim",
               "head_dim " + std::to_string(D) + " gives rotary_dim " +
                   std::to_string(L.rotary_dim.value) + " (" + L.rotary_dim.source +
                   "), which is odd; RoPE rotates pairs, so rotary_dim must be even");

    L.is_neox_style = neox;
    L.eps = eps;
    k_norm_of(L, fam, qk, li, qk_type, qk_type_src);

    if (fam.arch->mla) {
      // The MLA keys the file holds; without them the family rule alone says MLA.
      std::string keys = (kv_lora ? kv_lora.path + "=" + kv_lora.v->dump() : "") +
                         (kv_lora && qk_rope ? ", " : "") +
                         (qk_rope ? qk_rope.path + "=" + qk_rope.v->dump() : "");
      if (keys.empty()) keys = fam.rule("is MLA");
      L.unsupported =
          li + ": multi-head latent attention (MLA: " + keys +
          ") caches a compressed latent, not per-head K/V; not supported by the fused KV path";
    }

    // RoPE frequencies and window.
    L.rope = resolve_rope(doc, fam, L.kind.value, tname);
    check_mrope_section(doc, L, tname);
    // Hunyuan's DynamicNTKAlphaRotary (base = theta * alpha^(D/(D-2))) is no type the cos/sin
    // table builder knows, and it would ignore the key: the layer cannot be materialized.
    if (L.rope.value.scaling.is_object() && L.rope.value.scaling.contains("alpha") &&
        L.unsupported.empty())
      L.unsupported = li + ": RoPE scaling with \"alpha\" (" + L.rope.source +
                      "; NTK-alpha: base = theta * alpha^(head_dim / (head_dim - 2))) is not a "
                      "RoPE type fkv-jit builds";
    if (L.kind.value == LayerKind::SlidingAttention && window)
      L.sliding_window = doc.nonneg_int(window);

    cfg.layers.push_back(std::move(L));
  }
  return cfg;
}

}  // namespace fkv::config_detail
