// config: the architecture registry. Everything fkv-jit knows about a model family is one entry
// (families.cpp, families_more.cpp; refusals in verdicts.cpp, which merges verdicts_no_rope.cpp,
// verdicts_names.cpp and verdicts_draft_names.cpp): the layout keys its modeling code reads, its
// RoPE style, K-norm rule, rotary default, NoPE rule and layer-kind default, and the modeling
// code all of it was checked against. This file holds the layout keys, the table's assembly and
// its Markdown. A model_type without an entry is refused (never a default); a layout key an
// entry does not read is refused, naming the key.
// docs/config-rules.md holds architectures_markdown() (a test compares them).
#include <string>
#include <vector>

#include "fkv/config.hpp"
#include "internal.hpp"

namespace fkv {

const std::vector<LayoutKey>& layout_keys() {
  static const auto& keys = *new std::vector<LayoutKey>{
      // Head size and KV heads.
      {"head_dim", "head size of every layer"},
      {"kv_channels", "head size (ChatGLM)"},
      {"num_key_value_heads", "KV heads (a number, or one per layer)"},
      {"num_kv_heads", "KV heads per layer (OpenELM-style list)"},
      {"num_query_heads", "query heads per layer (OpenELM-style list)"},
      {"multi_query_attention", "KV heads come from multi_query_group_num (ChatGLM)"},
      {"multi_query_group_num", "KV heads (ChatGLM)"},
      {"global_head_dim", "head size of global layers differs from head_dim"},
      {"swa_head_dim", "head size of sliding-window layers differs from head_dim"},
      {"num_global_key_value_heads", "KV heads of global layers differ"},
      {"swa_num_key_value_heads", "KV heads of sliding-window layers differ"},
      {"v_head_dim", "V head size differs from K's"},
      {"swa_v_head_dim", "V head size of sliding-window layers differs"},
      {"attention_k_eq_v", "K and V share one projection"},
      {"num_kv_shared_layers", "layers reuse another layer's KV cache"},
      {"use_cla", "cross-layer attention: layers share another layer's KV"},
      {"multi_query", "one KV head unless new_decoder_architecture (Falcon)"},
      {"new_decoder_architecture", "KV heads from num_kv_heads (Falcon)"},
      // Multi-head latent attention.
      {"kv_lora_rank", "MLA: the cache holds a compressed latent"},
      {"q_lora_rank", "MLA query compression"},
      {"qk_rope_head_dim", "MLA: rotary part of the head"},
      {"qk_nope_head_dim", "MLA: non-rotary part of the head"},
      // Layer kinds.
      {"layer_types", "kind of every layer"},
      {"layers_block_type", "kind of every layer (hybrid models)"},
      {"hybrid_override_pattern", "kind of every layer as a pattern string (Nemotron-H)"},
      {"attn_layer_period", "attention every n layers, the rest SSM (Jamba)"},
      {"attn_layer_offset", "first attention layer (Jamba)"},
      {"block_configs", "per-layer attention configuration (DeciLM / Nemotron-NAS)"},
      {"attention_layers", "global/local per layer (gpt_neo format)"},
      {"attention_types", "global/local pattern (gpt_neo format)"},
      {"sliding_window_pattern", "every n-th layer global, the rest sliding"},
      {"full_attention_interval", "every n-th layer full attention, the rest linear attention"},
      {"use_sliding_window", "layers from max_window_layers on slide (Qwen2 family)"},
      {"cross_attention_layers", "cross-attention layers (KV from another sequence)"},
      {"linear_attn_config", "linear-attention layer lists (some counted from 1)"},
      {"attn_type_list", "linear (0) or softmax (1) attention per layer"},
      {"decoder_attention_types",
       "linear (0) or softmax (1) attention per layer (MiniMax, older name)"},
      {"full_attn_idxs", "indices of full-attention layers in a hybrid model"},
      {"interleaved_sliding_window", "sliding window per layer (openPangu)"},
      {"param_sink_number", "sink attention with its own K norm and partial rotary (openPangu)"},
      {"linear_num_key_heads", "linear-attention layers exist (hybrid model)"},
      {"linear_key_head_dim", "linear-attention layers exist (hybrid model)"},
      {"linear_num_value_heads", "linear-attention layers exist (hybrid model)"},
      {"linear_value_head_dim", "linear-attention layers exist (hybrid model)"},
      // RoPE dims, style and per-type parameters.
      {"rotary_dim", "rotated dims"},
      {"partial_rotary_factor", "rotated fraction of head_dim"},
      {"rotary_pct", "rotated fraction of head_dim (GPT-NeoX)"},
      {"rotary", "RoPE on/off (gpt_neo format)"},
      {"rope_is_neox_style", "RoPE pairing (sglang llama)"},
      {"is_neox_style", "RoPE pairing"},
      {"rope_interleave", "RoPE pairing (DeepSeek)"},
      {"rope_local_base_freq", "theta of sliding layers"},
      {"no_rope_layers", "NoPE layers (1 = RoPE, 0 = NoPE)"},
      {"nope_layer_interval", "every n-th layer NoPE"},
      {"no_rope_layer_interval", "every n-th layer NoPE"},
      {"alibi", "ALiBi instead of RoPE (Falcon)"},
      {"rope_scaling_layers", "layers whose RoPE is scaled; the others unscaled (Molmo 2)"},
      // K norm.
      {"use_qk_norm", "a Q/K norm (kind depends on the family)"},
      {"qk_layernorm", "a Q/K LayerNorm (kind depends on the family)"},
      {"qk_norm", "a Q/K norm (kind depends on the family)"},
      {"normalize_qk_projections", "a Q/K norm (OpenELM)"},
      {"attention_layer_norm", "a Q/K norm across all heads (Molmo)"},
      {"qk_norm_type", "the Q/K norm kind (per head or across heads)"},
      {"clip_qkv", "Q, K and V are clamped before RoPE"},
  };
  return keys;
}

namespace {

std::vector<Architecture> build() {
  // The registry is a data table: one entry per family, with designated initializers; a field
  // left out takes Architecture's default (neox, no K norm, full rotary, all layers full).
  // Drafts first: they match architectures[0] before model_type. Then the refused model types.
  std::vector<Architecture> v;
  config_detail::add_families(v);
  config_detail::add_more_families(v);
  config_detail::add_refused_model_types(v);
  return v;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

const char* style_name(RopeStyle s) { return s == RopeStyle::Neox ? "neox" : "GPT-J"; }

const char* k_norm_name(KNormRule k) {
  switch (k) {
    case KNormRule::None:
      return "none";
    case KNormRule::Rms:
      return "rms";
    case KNormRule::RmsOnePlus:
      return "rms (1 + w)";
    case KNormRule::RmsIfQkNorm:
      return "rms if use_qk_norm";
    case KNormRule::AcrossHeads:
      return "across all heads (unsupported)";
    case KNormRule::LayerNormIfQkNorm:
      return "LayerNorm if the qk-norm key is true (unsupported)";
    case KNormRule::L2IfQkNorm:
      return "L2 without weight if use_qk_norm (unsupported on RoPE layers)";
    case KNormRule::RmsAfterRope:
      return "rms after RoPE (unsupported)";
    case KNormRule::AcrossHeadsIfQkNorm:
      return "across all heads if the qk-norm key is true (unsupported)";
    case KNormRule::ByQkNormType:
      return "rms if qk_norm_type is qwen3; across heads (unsupported) if olmo";
  }
  return "?";
}

const char* rotary_name(RotaryDefault r, NopeRule n) {
  if (r == RotaryDefault::None) return "none (no RoPE)";
  switch (n) {
    case NopeRule::FullLayers:
      return r == RotaryDefault::Half ? "head_dim/2; full layers NoPE"
                                      : "head_dim; full layers NoPE";
    case NopeRule::FullLayersIfSliding:
      return "head_dim; full layers NoPE when sliding_window is set";
    case NopeRule::WithoutRotaryFlag:
      return "rotary_dim if \"rotary\": true, else none";
    case NopeRule::IfAlibi:
      return "head_dim; none if \"alibi\": true";
    case NopeRule::None:
      break;
  }
  return r == RotaryDefault::Half ? "head_dim/2" : "head_dim";
}

}  // namespace

const std::vector<Architecture>& architectures() {
  // Immortal: engines call the library from atexit handlers, after static destructors ran.
  static const auto& table = *new std::vector<Architecture>(build());
  return table;
}

std::string architectures_markdown() {
  std::string out =
      "| family | model_type (or architectures[0]) | RoPE | rotary default | K norm | layout keys "
      "read | "
      "checked against |\n|---|---|---|---|---|---|---|\n";
  for (const Architecture& a : architectures()) {
    if (a.refused()) continue;
    std::vector<std::string> types;
    for (const auto& t : a.model_types) types.push_back("`" + t + "`");
    if (!a.architecture_prefix.empty()) types.push_back("`" + a.architecture_prefix + "*`");
    std::vector<std::string> reads;
    for (const auto& k : a.reads) reads.push_back("`" + k + "`");
    out += "| " + a.name + " | " + join(types, ", ") + " | " +
           (a.mla ? "MLA (unsupported)" : style_name(a.style)) + " | " +
           rotary_name(a.rotary, a.nope) + " | " + k_norm_name(a.k_norm) + " | " +
           join(reads, ", ") + " | " + a.citation + " |\n";
  }
  out +=
      "\nRefused model_types (each with the reason and the modeling file it was read from):\n\n"
      "| model_type | refused because | read in |\n|---|---|---|\n";
  for (const Architecture& a : architectures())
    if (a.refused())
      out += "| `" + a.model_types.front() + "` | " + a.refusal + " | " + a.citation + " |\n";
  return out;
}

}  // namespace fkv
