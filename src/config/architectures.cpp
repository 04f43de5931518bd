// config: the architecture registry. Everything fkv-jit knows about a model family is one entry
// here: the layout keys its modeling code reads, its RoPE style, K-norm kind, rotary default,
// NoPE rule and layer-kind default, and the modeling code all of it was checked against. A
// model_type without an entry is refused (never a default); a layout key an entry does not
// read is refused, naming the key. docs/config-rules.md holds architectures_markdown() (a test
// compares them).
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

// Reads shared by families whose attention is LlamaAttention-like: `head_dim =
// getattr(config, "head_dim", hidden_size // num_attention_heads)` and num_key_value_heads.
std::vector<std::string> with_basics(std::vector<std::string> extra) {
  std::vector<std::string> r = {"head_dim", "num_key_value_heads"};
  r.insert(r.end(), extra.begin(), extra.end());
  return r;
}

std::vector<Architecture> build() {
  std::vector<Architecture> v;
  auto add = [&](Architecture a) { v.push_back(std::move(a)); };
  using RS = RopeStyle;
  using KN = KNormRule;
  using RD = RotaryDefault;
  using NR = NopeRule;
  using KD = KindDefault;

  // The registry is a data table: one entry per family, with designated initializers; a field
  // left out takes Architecture's default (neox, no K norm, full rotary, all layers full).
  // Drafts first: they match architectures[0] before model_type.
  add({
      .name = "DFlash draft",
      .model_types = {},
      .architecture_prefix = "DFlash",
      .k_norm = KN::Rms,
      .reads = with_basics({"layer_types", "use_sliding_window"}),
      .citation =
          "speculators src/speculators/models/dflash/model_definitions.py Qwen3DFlashAttention "
          "(k_norm = Qwen3RMSNorm(head_dim), rotate_half); sglang "
          "python/sglang/srt/models/dflash.py",
  });
  add({
      .name = "Llama",
      .model_types = {"llama"},
      .reads = with_basics({"rope_is_neox_style"}),
      .citation =
          "transformers src/transformers/models/llama/modeling_llama.py LlamaAttention "
          "(rotate_half, no q/k norm); sglang python/sglang/srt/models/llama.py LlamaAttention "
          "(rope_is_neox_style), llama_eagle3.py LlamaForCausalLMEagle3 (EAGLE-3 drafts)",
  });
  add({
      .name = "Mistral",
      .model_types = {"mistral", "ministral3"},
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/mistral/modeling_mistral.py MistralAttention "
          "(rotate_half, no q/k norm; sliding_window=config.sliding_window on every layer)",
  });
  add({
      .name = "Mixtral",
      .model_types = {"mixtral"},
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/mixtral/modeling_mixtral.py MixtralAttention "
          "(rotate_half, no q/k norm; sliding_window=config.sliding_window on every layer)",
  });
  add({
      .name = "Qwen2 / Qwen2.5",
      .model_types = {"qwen2", "qwen2_moe", "dots_ocr"},
      .reads = with_basics({"layer_types", "use_sliding_window"}),
      .citation =
          "transformers src/transformers/models/qwen2/modeling_qwen2.py Qwen2Attention (no q/k "
          "norm; sliding iff layer >= max_window_layers with use_sliding_window); vLLM "
          "vllm/model_executor/models/dots_ocr.py DotsOCRForCausalLM (language_model = "
          "Qwen2ForCausalLM on the flat DotsOCRConfig(Qwen2Config))",
  });
  add({
      .name = "Qwen2-VL / Qwen2.5-VL (text)",
      .model_types = {"qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text",
                      "qwen2_5_omni_text"},
      .reads = {"num_key_value_heads", "layer_types", "use_sliding_window"},
      .citation =
          "transformers src/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py "
          "Qwen2_5_VLAttention and qwen2_vl/modeling_qwen2_vl.py Qwen2VLAttention (head_dim = "
          "hidden_size // num_heads; apply_multimodal_rotary_pos_emb: rotate_half with cos/sin "
          "taken per mrope_section from the temporal, height and width positions, which are "
          "equal for text tokens, so plain RoPE at that position; no q/k norm)",
  });
  add({
      .name = "Qwen3",
      .model_types = {"qwen3", "qwen3_moe", "keye", "sdar", "sdar_moe", "param2moe"},
      .k_norm = KN::Rms,
      .reads = with_basics({"layer_types", "use_sliding_window"}),
      .citation = "transformers src/transformers/models/qwen3/modeling_qwen3.py Qwen3Attention "
                  "(q_norm/k_norm = Qwen3RMSNorm(head_dim) on the per-head view, before RoPE); "
                  "vLLM vllm/model_executor/models/keye.py BaseKeyeModule (language_model = "
                  "Qwen3ForCausalLM on the flat config; mrope positions equal for text tokens); "
                  "sglang python/sglang/srt/models/sdar.py SDARAttention and sdar_moe.py (Qwen3's "
                  "attention; block-diffusion masks do not change K/V); transformers "
                  "param2moe/modular_param2moe.py Param2MoeAttention(Qwen3MoeAttention): pass "
                  "(a partial_rotary_factor other than 1.0 is refused: vLLM's param2moe.py passes "
                  "it as the head size)",
  });
  add({
      .name = "Qwen3-Next / Qwen3.5",
      .model_types = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"},
      .k_norm = KN::RmsOnePlus,
      .reads = with_basics({"layer_types", "full_attention_interval", "partial_rotary_factor",
                            "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads",
                            "linear_value_head_dim"}),
      .citation =
          "transformers src/transformers/models/qwen3_next/modeling_qwen3_next.py "
          "Qwen3NextAttention (k_norm = Qwen3NextRMSNorm(head_dim): norm(x) * (1 + weight)); "
          "qwen3_5/modular_qwen3_5.py Qwen3_5Attention(Qwen3NextAttention)",
  });
  add({
      .name = "Gemma",
      .model_types = {"gemma"},
      .reads = with_basics({}),
      .citation = "transformers src/transformers/models/gemma/modeling_gemma.py GemmaAttention",
  });
  add({
      .name = "Gemma 2",
      .model_types = {"gemma2"},
      .kinds = KD::AlternateEvenSliding,
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/gemma2/modeling_gemma2.py Gemma2Attention "
                  "(is_sliding = not bool(layer_idx % 2); no q/k norm)",
  });
  add({
      .name = "Gemma 3",
      .model_types = {"gemma3", "gemma3_text"},
      .k_norm = KN::RmsOnePlus,
      .kinds = KD::SlidingWindowPattern,
      .reads = with_basics({"layer_types", "sliding_window_pattern", "rope_local_base_freq"}),
      .citation = "transformers src/transformers/models/gemma3/modeling_gemma3.py Gemma3Attention "
                  "(k_norm = Gemma3RMSNorm(head_dim): norm(x) * (1 + weight); sliding layers use "
                  "rotary_emb_local)",
  });
  add({
      .name = "Phi",
      .model_types = {"phi"},
      .k_norm = KN::LayerNormIfQkNorm,
      .reads = with_basics({"partial_rotary_factor", "qk_layernorm"}),
      .citation =
          "transformers src/transformers/models/phi/modeling_phi.py PhiAttention (rotary_ndims "
          "= int(head_dim * partial_rotary_factor); qk_layernorm: k_layernorm = nn.LayerNorm)",
  });
  add({
      .name = "Phi-3",
      .model_types = {"phi3", "phi4_multimodal"},
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({"partial_rotary_factor"}),
      .citation =
          "transformers src/transformers/models/phi3/modeling_phi3.py Phi3Attention "
          "(rotary_ndims = int(head_dim * partial_rotary_factor), no q/k norm; "
          "sliding_window=config.sliding_window on every layer); "
          "phi4_multimodal/modular_phi4_multimodal.py Phi4MultimodalAttention(Phi3Attention) "
          "(images and audio enter as input embeddings; no cross-attention)",
  });
  add({
      .name = "StableLM",
      .model_types = {"stablelm"},
      .k_norm = KN::LayerNormIfQkNorm,
      .reads = with_basics({"partial_rotary_factor", "qk_layernorm"}),
      .citation = "transformers src/transformers/models/stablelm/modeling_stablelm.py "
                  "StableLmAttention (rotary_ndims = int(partial_rotary_factor * head_dim); "
                  "qk_layernorm: StableLmLayerNormPerHead = nn.LayerNorm)",
  });
  add({
      .name = "GLM / GLM-4",
      .model_types = {"glm", "glm4"},
      .style = RS::GptJ,
      .rotary = RD::Half,
      .reads = with_basics({"partial_rotary_factor"}),
      .citation =
          "transformers src/transformers/models/glm/modeling_glm.py GlmAttention and "
          "glm4/modeling_glm4.py Glm4Attention (rotate_half on x[..., 0::2], x[..., 1::2] with "
          "repeat_interleave'd cos/sin; configuration_glm.py partial_rotary_factor default 0.5)",
  });
  add({
      .name = "GLM-4.5 (MoE)",
      .model_types = {"glm4_moe", "sarvam_moe"},
      .k_norm = KN::RmsIfQkNorm,
      .reads = with_basics({"partial_rotary_factor", "use_qk_norm"}),
      .citation =
          "transformers src/transformers/models/glm4_moe/modeling_glm4_moe.py Glm4MoeAttention "
          "(rotate_half on halves; use_qk_norm: k_norm = Glm4MoeRMSNorm(head_dim)); model_type "
          "sarvam_moe: auto/modeling_auto.py maps it to Glm4MoeForCausalLM, "
          "sarvam_moe/modular_sarvam_moe.py SarvamMoEConfig (use_qk_norm True, "
          "partial_rotary_factor 1.0)",
  });
  add({
      .name = "ChatGLM",
      .model_types = {"chatglm"},
      .style = RS::GptJ,
      .rotary = RD::Half,
      .reads = {"kv_channels", "multi_query_attention", "multi_query_group_num"},
      .citation =
          "THUDM modeling_chatglm.py SelfAttention (hub remote code; "
          "RotaryEmbedding(rotary_dim // 2), apply_rotary_pos_emb on (rot_dim // 2, 2) pairs); "
          "sglang python/sglang/srt/models/chatglm.py",
  });
  add({
      .name = "Cohere (Command R)",
      .model_types = {"cohere"},
      .style = RS::GptJ,
      .k_norm = KN::LayerNormIfQkNorm,
      .reads = with_basics({"use_qk_norm"}),
      .citation = "transformers src/transformers/models/cohere/modeling_cohere.py CohereAttention "
                  "(rotate_half on x[..., ::2], x[..., 1::2]; use_qk_norm: CohereLayerNorm, "
                  "mean-subtracting)",
  });
  add({
      .name = "Cohere2 (Command R7B / A)",
      .model_types = {"cohere2"},
      .style = RS::GptJ,
      .nope = NR::FullLayers,
      .kinds = KD::SlidingWindowPattern,
      .reads = with_basics({"layer_types", "sliding_window_pattern"}),
      .citation =
          "transformers src/transformers/models/cohere2/modeling_cohere2.py Cohere2Attention "
          "(interleaved rotate_half; RoPE only when sliding_window is set, so global layers "
          "are NoPE)",
  });
  add({
      .name = "DeepSeek-V2/V3, Kimi-K2 (MLA)",
      .model_types = {"deepseek_v2", "deepseek_v3", "kimi_k2"},
      .mla = true,
      .reads = {"num_key_value_heads", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                "qk_nope_head_dim", "v_head_dim", "rope_interleave", "head_dim"},
      .citation = "transformers src/transformers/models/deepseek_v3/modeling_deepseek_v3.py "
                  "DeepseekV3Attention (kv_a_proj_with_mqa to kv_lora_rank + qk_rope_head_dim: the "
                  "cache holds a latent, not per-head K)",
  });
  add({
      .name = "OLMo",
      .model_types = {"olmo"},
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/olmo/modeling_olmo.py OlmoAttention (no q/k "
          "norm)",
  });
  add({
      .name = "OLMo 2 / OLMo 3",
      .model_types = {"olmo2", "olmo3"},
      .k_norm = KN::AcrossHeads,
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/olmo3/modeling_olmo3.py Olmo3Attention and "
                  "olmo2/modeling_olmo2.py Olmo2Attention (k_norm = RMSNorm(num_key_value_heads * "
                  "head_dim) before the head split)",
  });
  add({
      .name = "Granite",
      .model_types = {"granite", "granitemoe", "granite_docling_text", "granite4_vision_text"},
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/granite/modeling_granite.py GraniteAttention "
          "(LlamaAttention with attention_multiplier; no q/k norm); "
          "granite_docling/modular_granite_docling.py GraniteDoclingTextModel(GraniteModel) "
          "with GraniteDoclingTextConfig(GraniteConfig); "
          "granite4_vision/modular_granite4_vision.py "
          "Granite4VisionTextAttention(GraniteAttention) (the Q-Former cross-attention is in the "
          "vision projector only)",
  });
  add({
      .name = "Nemotron",
      .model_types = {"nemotron"},
      .reads = with_basics({"partial_rotary_factor"}),
      .citation = "transformers src/transformers/models/nemotron/modeling_nemotron.py "
                  "NemotronAttention (partial rotary by partial_rotary_factor, rotate_half, no q/k "
                  "norm)",
  });
  add({
      .name = "Nemotron-H",
      .model_types = {"nemotron_h"},
      .rotary = RD::None,
      .reads = with_basics({"hybrid_override_pattern"}),
      .citation =
          "transformers src/transformers/models/nemotron_h/modular_nemotron_h.py "
          "NemotronHAttention (JambaAttention: no rotary embedding); '*' attention, 'M' mamba, "
          "'-' MLP, 'E' MoE",
  });
  add({
      .name = "Jamba",
      .model_types = {"jamba"},
      .rotary = RD::None,
      .reads = {"num_key_value_heads", "attn_layer_period", "attn_layer_offset"},
      .citation = "transformers src/transformers/models/jamba/modeling_jamba.py JambaAttention (no "
                  "rotary embedding; attention iff layer % attn_layer_period == attn_layer_offset)",
  });
  add({
      .name = "InternLM2",
      .model_types = {"internlm2"},
      .reads = {"num_key_value_heads"},
      .citation =
          "internlm modeling_internlm2.py InternLM2Attention (hub remote code; packed wqkv, "
          "rotate_half); sglang python/sglang/srt/models/internlm2.py InternLM2Attention",
  });
  add({
      .name = "gpt-oss",
      .model_types = {"gpt_oss"},
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/gpt_oss/modeling_gpt_oss.py GptOssAttention "
          "(_apply_rotary_emb on the two halves, no q/k norm)",
  });
  add({
      .name = "SmolLM3",
      .model_types = {"smollm3"},
      .reads = with_basics(
          {"layer_types", "use_sliding_window", "no_rope_layers", "no_rope_layer_interval"}),
      .citation =
          "transformers src/transformers/models/smollm3/modeling_smollm3.py SmolLM3Attention "
          "(use_rope = no_rope_layers[layer_idx]; no q/k norm)",
  });
  add({
      .name = "Llama 4",
      .model_types = {"llama4", "llama4_text"},
      .k_norm = KN::L2IfQkNorm,
      .reads = with_basics({"no_rope_layers", "nope_layer_interval", "use_qk_norm", "layer_types"}),
      .citation =
          "transformers src/transformers/models/llama4/modeling_llama4.py Llama4TextAttention "
          "(use_rope = no_rope_layers[layer_idx]; Llama4TextL2Norm without weight when "
          "use_qk_norm and use_rope)",
  });
  add({
      .name = "EXAONE 4",
      .model_types = {"exaone4", "exaone_moe"},
      .k_norm = KN::Rms,
      .nope = NR::FullLayersIfSliding,
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/exaone4/modeling_exaone4.py Exaone4Attention "
          "(k_norm = Exaone4RMSNorm(head_dim); RoPE only if sliding_window is None or the "
          "layer slides); exaone_moe/modular_exaone_moe.py ExaoneMoeAttention(Exaone4Attention): "
          "pass",
  });
  add({
      .name = "LFM2",
      .model_types = {"lfm2", "lfm2_moe"},
      .k_norm = KN::Rms,
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/lfm2/modeling_lfm2.py Lfm2Attention "
                  "(k_layernorm = Lfm2RMSNorm(head_dim), weight w; conv layers have no KV); "
                  "lfm2_moe/modular_lfm2_moe.py Lfm2MoeAttention(Lfm2Attention): pass",
  });
  add({
      .name = "ERNIE 4.5",
      .model_types = {"ernie4_5"},
      .style = RS::GptJ,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/ernie4_5/modular_ernie4_5.py Ernie4_5Attention "
          "(LlamaAttention; apply_rotary_pos_emb: glm rotate_half on x[..., 0::2], x[..., "
          "1::2] with repeat_interleave'd cos/sin over the full head; no q/k norm); vLLM "
          "vllm/model_executor/models/ernie45.py (no neox style)",
  });
  add({
      .name = "ERNIE 4.5 MoE",
      .model_types = {"ernie4_5_moe", "ernie4_5_vl_moe_text"},
      .style = RS::GptJ,
      .reads = with_basics({}),
      .citation = "transformers src/transformers/models/ernie4_5_moe/modular_ernie4_5_moe.py "
                  "Ernie4_5_MoeAttention (LlamaAttention with ernie4_5's interleaved "
                  "apply_rotary_pos_emb; no q/k norm); ernie4_5_vl_moe/modular_ernie4_5_vl_moe.py "
                  "Ernie4_5_VLMoeTextAttention(Ernie4_5_MoeAttention): pass (rotate_half_text on "
                  "x[..., 0::2], x[..., 1::2]; the 3-D rope re-interleaves to base^(-2i/head_dim) "
                  "when the three positions are equal, as for text tokens)",
  });
  add({
      .name = "Hunyuan (dense / MoE)",
      .model_types = {"hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan"},
      .k_norm = KN::RmsAfterRope,
      .reads = with_basics({"use_qk_norm"}),
      .citation =
          "transformers src/transformers/models/hunyuan_v1_dense/modular_hunyuan_v1_dense.py "
          "HunYuanDenseV1Attention and hunyuan_v1_moe/modular_hunyuan_v1_moe.py "
          "HunYuanMoEV1Attention (key_layernorm = RMSNorm(head_dim) applied after "
          "apply_rotary_pos_emb; model_type hunyuan: the hub remote code these classes were "
          "ported from)",
  });
  add({
      .name = "MiniMax-Text-01 / M1",
      .model_types = {"minimax", "minimax_text_01", "minimax_m1"},
      .kinds = KD::KeyRequired,
      .reads = with_basics({"rotary_dim", "partial_rotary_factor", "layer_types", "attn_type_list",
                            "decoder_attention_types"}),
      .citation = "vLLM vllm/model_executor/models/minimax_text_01.py MiniMaxText01Attention "
                  "(rotary_dim = config.rotary_dim else head_dim, is_neox_style=True, no q/k norm; "
                  "attn_type_list: 0 lightning linear attention, 1 softmax; absent: softmax "
                  "everywhere); transformers src/transformers/models/minimax/modular_minimax.py "
                  "MiniMaxAttention (layer_types absent: alternating full / linear_attention)",
  });
  add({
      .name = "MiniMax-M2",
      .model_types = {"minimax_m2"},
      .k_norm = KN::AcrossHeads,
      .reads = with_basics(
          {"rotary_dim", "partial_rotary_factor", "use_qk_norm", "qk_norm_type", "attn_type_list"}),
      .citation = "transformers src/transformers/models/minimax_m2/modular_minimax_m2.py "
                  "MiniMaxM2Attention (FlexOlmoAttention: k_norm = RMSNorm(num_key_value_heads * "
                  "head_dim) before the head split; glm4_moe partial rotate_half); MiniMaxAI "
                  "modeling_minimax_m2.py MiniMaxM2Attention (hub remote code; RoPE on the first "
                  "rotary_dim dims; use_qk_norm with qk_norm_type per_layer: one RMSNorm over all "
                  "heads)",
  });
  add({
      .name = "EXAONE 3 / 3.5",
      .model_types = {"exaone"},
      .reads = with_basics({}),
      .citation =
          "vLLM vllm/model_executor/models/exaone.py ExaoneAttention (head_dim = "
          "config.head_dim else hidden_size // num_heads; get_rope(rotary_dim=head_dim, "
          "is_neox_style=True); no q/k norm); LGAI-EXAONE modeling_exaone.py ExaoneAttention "
          "(hub remote code)",
  });
  add({
      .name = "InternLM3",
      .model_types = {"internlm3"},
      .reads = with_basics({}),
      .citation =
          "internlm modeling_internlm3.py InternLM3Attention (hub remote code; LlamaAttention "
          "with qkv_bias: rotate_half, no q/k norm); vLLM "
          "vllm/model_executor/models/registry.py runs InternLM3ForCausalLM as llama.py "
          "LlamaAttention",
  });
  add({
      .name = "Starcoder2",
      .model_types = {"starcoder2"},
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/starcoder2/modular_starcoder2.py "
          "Starcoder2Attention (LlamaAttention: rotate_half, no q/k norm; sliding_window on "
          "every layer)",
  });
  add({
      .name = "GPT-J",
      .model_types = {"gptj", "codegen"},
      .style = RS::GptJ,
      .reads = {"rotary_dim"},
      .citation = "transformers src/transformers/models/gptj/modeling_gptj.py GPTJAttention "
                  "(rotate_every_two on pairs 2i, 2i+1 over the first rotary_dim dims; head_dim = "
                  "n_embd / n_head); codegen/modular_codegen.py CodeGenAttention(GPTJAttention) "
                  "(gptj apply_rotary_pos_emb on the first rotary_dim dims, the whole head when "
                  "rotary_dim is None; qkv_proj packed in mp_num groups, split into per-head K; no "
                  "q/k norm)",
  });
  add({
      .name = "GPT-J (gpt_neo format)",
      .model_types = {"gpt_neo"},
      .style = RS::GptJ,
      .nope = NR::WithoutRotaryFlag,
      .reads = {"rotary", "rotary_dim", "attention_layers", "attention_types"},
      .citation =
          "mesh-transformer-jax GPT-J export read as transformers "
          "src/transformers/models/gptj/modeling_gptj.py GPTJAttention when \"rotary\": true; "
          "transformers models/gpt_neo/modeling_gpt_neo.py GPTNeoSelfAttention (learned "
          "positions, no RoPE) otherwise",
  });
  // Variants checked for issue 24: the attention class is a registered family's (modular file
  // `class XAttention(ParentAttention)`), with the parent's rule.
  add({
      .name = "Qwen3-VL / Qwen3-Omni (text)",
      .model_types = {"qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_omni_moe_text"},
      .k_norm = KN::Rms,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/qwen3_vl/modular_qwen3_vl.py "
          "Qwen3VLTextAttention(Qwen3Attention) (q_norm/k_norm = RMSNorm(head_dim) on the per-head "
          "view before RoPE; interleaved mrope whose three positions are equal for text tokens); "
          "qwen3_vl_moe/modular_qwen3_vl_moe.py Qwen3VLMoeTextAttention(Qwen3VLTextAttention); "
          "qwen3_omni_moe/modular_qwen3_omni_moe.py "
          "Qwen3OmniMoeThinkerTextAttention(Qwen3MoeAttention)",
  });
  add({
      .name = "Qwen3-like",
      .model_types = {"dots1"},
      .k_norm = KN::Rms,
      .reads = with_basics({}),
      .citation = "transformers src/transformers/models/dots1/modular_dots1.py "
                  "Dots1Attention(Qwen3Attention) (q_norm/k_norm = RMSNorm(head_dim), before RoPE)",
  });
  add({
      .name = "Ministral",
      .model_types = {"ministral"},
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/ministral/modular_ministral.py "
                  "MinistralAttention(Qwen2Attention) (rotate_half, no q/k norm; layer_types "
                  "default: every layer sliding when sliding_window is set)",
  });
  add({
      .name = "Qwen2-like",
      .model_types = {"cwm"},
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/cwm/modular_cwm.py "
                  "CwmAttention(Qwen2Attention) (rotate_half, no q/k norm; layer_types)",
  });
  add({
      .name = "Apertus",
      .model_types = {"apertus", "hy_v3"},
      .k_norm = KN::Rms,
      .reads = with_basics({}),
      .citation = "transformers src/transformers/models/apertus/modular_apertus.py "
                  "ApertusAttention(LlamaAttention) (q_norm/k_norm = ApertusRMSNorm(head_dim) on "
                  "the per-head view, before RoPE); hy_v3/modular_hy_v3.py "
                  "HYV3Attention(ApertusAttention): pass",
  });
  add({
      .name = "Llama-like",
      .model_types = {"bitnet", "phimoe", "hyperclovax", "emu3_text_model", "deepseek_ocr2_text",
                      "seed_oss", "arcee", "jais2", "iquestcoder", "bailing_moe", "solar",
                      "cosmos3_edge_text", "aria_text", "openpangu_vl"},
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/bitnet/modular_bitnet.py "
          "BitNetAttention(LlamaAttention) (attn_sub_norm acts on the attention output, not K); "
          "phimoe/modular_phimoe.py PhimoeAttention(LlamaAttention); "
          "hyperclovax/modular_hyperclovax.py HyperCLOVAXAttention(GraniteAttention) (rotate_half, "
          "no q/k norm); emu3/modular_emu3.py Emu3Attention(LlamaAttention): pass; "
          "deepseek_ocr2/modular_deepseek_ocr2.py DeepseekOcr2TextAttention(LlamaAttention): pass; "
          "seed_oss/modular_seed_oss.py SeedOssAttention (llama apply_rotary_pos_emb, head_dim = "
          "config.head_dim, no q/k norm); arcee/modular_arcee.py, jais2/modular_jais2.py and "
          "iquestcoder/modular_iquestcoder.py (LlamaConfig subclasses built of LlamaDecoderLayer / "
          "LlamaAttention); vLLM vllm/model_executor/models/bailing_moe.py BailingAttention "
          "(head_dim = config.head_dim or hidden_size // num_heads; get_rope(rotary_dim="
          "head_dim, is_neox_style=True); no q/k norm: a use_qk_norm or partial rotary key "
          "of later Ling versions is refused as unread); vllm/model_executor/models/solar.py "
          "SolarAttention (head_dim = config.head_dim else hidden_size // num_heads; get_rope "
          "neox; no q/k norm; the bskcn skip connections mix hidden states, not K); transformers "
          "cosmos3_edge/modular_cosmos3_edge.py Cosmos3EdgeTextAttention(LlamaAttention) "
          "(rotate_half; interleaved mrope cat'd like Qwen3-VL, its three positions equal for "
          "text tokens); aria/modular_aria.py AriaTextAttention(LlamaAttention) "
          "(AriaCrossAttention "
          "is in the vision projector only); vLLM vllm/model_executor/models/openpangu_vl.py "
          "(language_model = PanguEmbeddedForCausalLM on the flat config) and openpangu.py "
          "OpenPanguEmbeddedAttention (head_dim = config.head_dim or hidden_size // heads; no q/k "
          "norm; neox get_rope, interleaved mrope equal for text tokens; MLA keys, "
          "param_sink_number and interleaved_sliding_window select other attentions and are "
          "refused as unread)",
  });
  add({
      .name = "Helium",
      .model_types = {"helium"},
      .style = RS::GptJ,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/helium/modular_helium.py "
          "HeliumAttention(GraniteAttention) with rotate_half on x[..., 0::2], x[..., 1::2] "
          "(interleaved pairs), no q/k norm",
  });
  add({
      .name = "GPT-NeoX",
      .model_types = {"gpt_neox"},
      .reads = {"rotary_pct"},
      .citation = "transformers src/transformers/models/gpt_neox/modeling_gpt_neox.py "
                  "GPTNeoXAttention (rotary_ndims = int(head_size * rotary_pct), rotate_half on "
                  "the first rotary_ndims dims, no q/k norm; head_size = hidden_size / heads, MHA)",
  });
  add({
      .name = "AFMoE (Trinity)",
      .model_types = {"afmoe"},
      .k_norm = KN::Rms,
      .nope = NR::FullLayers,
      .reads = with_basics({"layer_types"}),
      .citation = "transformers src/transformers/models/afmoe/modular_afmoe.py "
                  "AfmoeAttention(LlamaAttention) (q_norm/k_norm = AfmoeRMSNorm(head_dim) on the "
                  "per-head view before RoPE; apply_rotary_pos_emb only if is_local_attention, so "
                  "full-attention layers are NoPE; the output gate does not touch K)",
  });
  // Checked for the "not yet checked" refusals: each read in its modeling file.
  add({
      .name = "GPT-NeoX Japanese",
      .model_types = {"gpt_neox_japanese"},
      .reads = {"rotary_pct", "partial_rotary_factor"},
      .citation =
          "transformers src/transformers/models/gpt_neox_japanese/modeling_gpt_neox_japanese.py "
          "GPTNeoXJapaneseAttention (head_size = hidden_size // num_attention_heads, MHA; "
          "rotary_ndims = int(head_size * partial_rotary_factor), rotate_half on the first "
          "rotary_ndims dims; no q/k norm); configuration_gpt_neox_japanese.py "
          "(partial_rotary_factor defaults to the legacy rotary_pct, else 1.0)",
  });
  add({
      .name = "Doge",
      .model_types = {"doge"},
      .k_norm = KN::Rms,
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({}),
      .citation =
          "transformers src/transformers/models/doge/modular_doge.py DogeAttention (k_norm = "
          "DogeRMSNorm(head_dim) (LlamaRMSNorm, weight w) on the per-head view before llama "
          "apply_rotary_pos_emb; the dynamic mask (A, dt_proj) acts on the scores, not K; "
          "sliding_window, when set, on every layer)",
  });
  add({
      .name = "GLM-4V / GLM-4.1V (text)",
      .model_types = {"glm4v_text"},
      .style = RS::GptJ,
      .reads = {"num_key_value_heads", "partial_rotary_factor"},
      .citation =
          "transformers src/transformers/models/glm4v/modular_glm4v.py Glm4vTextAttention "
          "(head_dim = hidden_size // num_heads; rotate_half_llm on x[..., 0::2], x[..., 1::2] "
          "over the first rotary_dim dims with repeat_interleave'd cos/sin; mrope sections whose "
          "three positions are equal for text tokens; no q/k norm; partial_rotary_factor "
          "default 1.0)",
  });
  add({
      .name = "GLM-4.5V (text)",
      .model_types = {"glm4v_moe_text"},
      .reads = with_basics({"partial_rotary_factor"}),
      .citation =
          "transformers src/transformers/models/glm4v_moe/modular_glm4v_moe.py "
          "Glm4vMoeTextAttention(Glm4Attention) (gpt_neox apply_rotary_pos_emb: rotate_half on "
          "the first rotary_dim dims, cos/sin cat'd; mrope sections equal for text tokens; no q/k "
          "norm, use_qk_norm removed; configuration_glm4v_moe.py partial_rotary_factor default "
          "0.5)",
  });
  add({
      .name = "Llama-like, head_dim derived (Orion, MiniCPM, DeepSeek MoE)",
      .model_types = {"orion", "minicpm", "deepseek", "xverse_moe"},
      .reads = {"num_key_value_heads"},
      .citation =
          "vLLM vllm/model_executor/models/orion.py OrionAttention, "
          "vllm/model_executor/models/minicpm.py MiniCPMAttention and sglang "
          "python/sglang/srt/models/deepseek.py DeepseekAttention, xverse_moe.py XverseAttention "
          "(head_dim = hidden_size // "
          "num_heads; get_rope(rotary_dim=head_dim), neox style; no q/k norm)",
  });
  add({
      .name = "XVERSE",
      .model_types = {"xverse"},
      .reads = with_basics({"rope_is_neox_style"}),
      .citation = "sglang python/sglang/srt/models/xverse.py XverseAttention (head_dim = "
                  "getattr(config, \"head_dim\", hidden_size // num_heads); get_rope(rotary_dim="
                  "head_dim, is_neox_style=rope_is_neox_style, default True); no q/k norm)",
  });
  add({
      .name = "GLM-OCR (text)",
      .model_types = {"glm_ocr_text"},
      .style = RS::GptJ,
      .reads = with_basics({"partial_rotary_factor"}),
      .citation =
          "transformers src/transformers/models/glm_ocr/modular_glm_ocr.py "
          "GlmOcrTextAttention(Glm4vTextAttention) (head_dim = getattr(config, \"head_dim\", "
          "hidden_size // num_attention_heads); glm4v rotate_half_llm on interleaved pairs, "
          "repeat_interleave'd cos/sin; no q/k norm on the text attention)",
  });
  add({
      .name = "RoPE on sliding layers only (Flint, Lara Mini)",
      .model_types = {"flint", "lara_mini"},
      .k_norm = KN::Rms,
      .nope = NR::FullLayers,
      .kinds = KD::KeyRequired,
      .reads = with_basics({"layer_types", "linear_num_key_heads", "linear_key_head_dim",
                            "linear_num_value_heads", "linear_value_head_dim"}),
      .citation =
          "transformers src/transformers/models/flint/modular_flint.py "
          "FlintAttention(Qwen3MoeAttention) (k_norm = FlintRMSNorm(head_dim), weight w, before "
          "RoPE; RoPE only if the layer slides, full layers NoPE; sinks act on the scores) and "
          "lara_mini/modular_lara_mini.py LaraMiniAttention(Qwen3Attention) (k_norm = "
          "LaraMiniRMSNorm(head_dim), weight w; LaraMiniModel passes position_embeddings only "
          "to sliding_attention layers; linear_attention layers have no KV); both config "
          "classes compute layer_types patterns no registry rule states, so layer_types is "
          "required",
  });
  add({
      .name = "Mellum",
      .model_types = {"mellum"},
      .k_norm = KN::Rms,
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/mellum/modular_mellum.py "
          "MellumAttention(Qwen3MoeAttention) (k_norm = MellumRMSNorm(head_dim), weight w, "
          "before rotate_half over the whole head; sliding_window only on sliding_attention "
          "layers; layer_types default all full_attention; rope_parameters per layer type)",
  });
  add({
      .name = "Muse Glimmer assistant (draft)",
      .model_types = {"muse_glimmer_assistant"},
      .k_norm = KN::Rms,
      .kinds = KD::AllSlidingIfWindow,
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/muse_glimmer_assistant/"
          "modular_muse_glimmer_assistant.py MuseGlimmerAssistantAttention(Exaone4Attention) (K "
          "projected from the target's context hidden states and the draft window, k_norm = "
          "RMSNorm(head_dim) with weight w before rotate_half RoPE; "
          "configuration_muse_glimmer_assistant.py layer_types default: every layer "
          "sliding_attention, sliding_window 2048)",
  });
  add({
      .name = "Falcon",
      .model_types = {"falcon"},
      .nope = NR::IfAlibi,
      .kv_heads = KvHeadsRule::Falcon,
      .reads = {"num_kv_heads", "multi_query", "new_decoder_architecture", "alibi"},
      .citation =
          "transformers src/transformers/models/falcon/modeling_falcon.py FalconAttention "
          "(head_dim = hidden_size // num_heads; num_kv_heads = config.num_kv_heads if "
          "new_decoder_architecture or not multi_query else 1; rotate_half RoPE over the head "
          "unless alibi; no q/k norm); configuration_falcon.py (multi_query default True, "
          "num_kv_heads default num_attention_heads)",
  });
  add({
      .name = "PaddleOCR-VL (text)",
      .model_types = {"paddleocr_vl_text", "paddleocr_vl"},
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/paddleocr_vl/modular_paddleocr_vl.py "
          "PaddleOCRAttention(Qwen2_5OmniAttention) (apply_multimodal_rotary_pos_emb: rotate_half "
          "with mrope sections, equal for text tokens; no q/k norm); PaddleOCRTextConfig "
          "(head_dim 128 and num_key_value_heads 2 by default, not derived)",
  });
  add({
      .name = "Molmo",
      .model_types = {"molmo"},
      .k_norm = KN::AcrossHeadsIfQkNorm,
      .reads = {"num_key_value_heads", "attention_layer_norm"},
      .citation = "vLLM vllm/model_executor/models/molmo.py MolmoAttention (head_dim = hidden_size "
                  "// num_heads; k_norm = RMSNorm(num_kv_heads * head_dim) iff "
                  "attention_layer_norm, across heads, before RoPE; get_rope neox over the head; "
                  "clip_qkv is refused as unread: the hub code clamps Q/K/V, vLLM does not)",
  });
  add({
      .name = "Molmo 2 (text)",
      .model_types = {"molmo2_text"},
      .k_norm = KN::ByQkNormType,
      .reads = with_basics({"use_qk_norm", "qk_norm_type", "layer_types"}),
      .citation =
          "transformers src/transformers/models/molmo2/modular_molmo2.py Molmo2Attention"
          "(Olmo2Attention) (qk_norm_type \"qwen3\": k_norm = RMSNorm(head_dim) on the per-head "
          "view before rotate_half RoPE; \"olmo\": RMSNorm over num_key_value_heads * head_dim; "
          "self-attention only, images spliced into the embeddings; rope_scaling_layers that "
          "leave some layers unscaled are refused as unread)",
  });
  add({
      .name = "Nemotron-NAS (DeciLM)",
      .model_types = {"nemotron-nas", "nemotron_nas"},
      .reads = with_basics({"block_configs"}),
      .citation =
          "vLLM vllm/model_executor/models/nemotron_nas.py DeciLMAttention(LlamaAttention) and "
          "DeciLMDecoderLayer (block_configs[i].attention.no_op: no attention, no KV; "
          "num_kv_heads = num_attention_heads // n_heads_in_group; neox get_rope over the head; "
          "no q/k norm); the config.json model_type is nemotron-nas",
  });
  add({
      .name = "Spark 2.5",
      .model_types = {"spark2_5"},
      .kinds = KD::KeyRequired,
      .rotary_per_layer_type = true,
      .reads = with_basics({"layer_types"}),
      .citation =
          "sglang python/sglang/srt/models/spark2_5.py Spark2_5Attention and "
          "Spark2_5DecoderLayer (no q/k norm; get_rope(is_neox_style=True) with rope_theta and "
          "partial_rotary_factor (None: 1.0) from rope_parameters[layer_type]; "
          "config.layer_types[layer_id]; the hub copies' class defaults differ, so layer_types "
          "is required)",
  });
  add({
      .name = "Laguna",
      .model_types = {"laguna"},
      .k_norm = KN::Rms,
      .rotary_per_layer_type = true,
      .reads = with_basics({"layer_types"}),
      .citation =
          "transformers src/transformers/models/laguna/modular_laguna.py "
          "LagunaAttention(AfmoeAttention) (k_norm = LagunaRMSNorm(head_dim) (Qwen2MoeRMSNorm, "
          "weight w) on the per-head view before qwen3_5_moe apply_rotary_pos_emb, which rotates "
          "the first rotary_dim dims with rotate_half, on every layer; the softplus gate and the "
          "per-layer query heads do not touch K) and LagunaRotaryEmbedding "
          "(rope_parameters[layer_type]: rope_theta and partial_rotary_factor, default 1.0; "
          "class default full 500000 / 0.5, sliding 10000 / 1.0; layer_types default all "
          "full_attention)",
  });
  add({
      .name = "RNJ-1",
      .model_types = {"rnj1"},
      .k_norm = KN::RmsOnePlus,
      .kinds = KD::KeyRequired,
      .reads = with_basics({"layer_types"}),
      .citation =
          "vLLM vllm/model_executor/models/rnj1.py Rnj1Attention (k_norm = "
          "GemmaRMSNorm(head_dim), (1 + w), on the per-head view before get_rope(is_neox_style="
          "True) over head_dim; rope_parameters[layer_type] when keyed by layer type; "
          "chunked_attention layers attend within blocks (a mask: K/V are per-head as on every "
          "layer); config.layer_types[layer_idx] is required)",
  });
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
