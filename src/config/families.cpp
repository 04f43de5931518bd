// config: the registry's supported families, part 1: the drafts and the families of the first
// registry (Llama ... GPT-J). One entry per family: the layout keys its modeling code reads, its
// RoPE style, K-norm kind, rotary default, NoPE rule and layer-kind default, and the modeling code
// all of it was checked against (architectures.cpp explains the fields; part 2:
// families_more.cpp).
#include "internal.hpp"

namespace fkv::config_detail {

void add_families(std::vector<Architecture>& v) {
  using RS = RopeStyle;
  using KN = KNormRule;
  using RD = RotaryDefault;
  using NR = NopeRule;
  using KD = KindDefault;
  auto add = [&](Architecture a) { v.push_back(std::move(a)); };

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
}

}  // namespace fkv::config_detail
