// config: per-layer attention facts inferred from a HuggingFace config.json.
#include "internal.hpp"

namespace fkv::config_detail {

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

}  // namespace fkv::config_detail
