// config: the registry's refusals. Every model_type the engines serve (data/model_types.json) that
// no supported entry covers gets a verdict here or in a table this file merges
// (verdicts_no_rope.cpp, verdicts_names.cpp, verdicts_draft_names.cpp): refused, with the reason,
// and the modeling file it was read from (transformers src/transformers/models/..., vLLM
// vllm/model_executor/models/... or sglang python/sglang/srt/models/...). Multimodal wrappers whose
// text config names its own model_type are not listed: the text config's verdict applies
// (config.cpp).
//
// The reasons were first drafted (scripts/gen-refusal-draft.py) from what the modeling file holds
// (MLA keys, cross-attention, RoPE, K-norm shapes) and then corrected by hand, each from a read of
// its modeling file (OLMo norms, Gemma 3n/4 KV sharing, FoPE, MoVA, ...). Two files could not be
// read (lfm3, inkling2): they are refused and say so, rather than guessed. Moving a row to a
// supported entry is adding its rule to families_more.cpp and deleting its row here.
#include <algorithm>

#include "internal.hpp"

namespace fkv::config_detail {

void add_refused_model_types(std::vector<Architecture>& table) {
  // Immortal, like every table of this module. The mechanisms of RoPE attention that the fused
  // path cannot produce; attention without RoPE is in verdicts_no_rope.cpp, engine module names
  // in verdicts_names.cpp and verdicts_draft_names.cpp.
  static const auto& rows = *new std::vector<RefusalRow>{
      {"axk1", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/axk1/modular_axk1.py"},
      {"axk2", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/axk2/modular_axk2.py"},
      {"baichuan",
       "ALiBi positions (13B) or RoPE (7B) chosen by size in the hub remote code: not one rule",
       "sglang python/sglang/srt/models/baichuan.py"},
      {"bailing_hybrid",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/bailing_hybrid/modular_bailing_hybrid.py"},
      {"bailing_moe_linear",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/bailing_moe_linear.py"},
      {"bailing_moe_v3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/bailing_moe_v3.py"},
      {"bamba",
       "attention layers are given by attn_layer_indices (the rest Mamba-2), a key no registry "
       "rule reads",
       "transformers src/transformers/models/bamba/modular_bamba.py BambaAttention(LlamaAttention) "
       "(partial rotate_half, partial_rotary_factor forced to 0.5) and configuration_bamba.py "
       "layers_block_type (from attn_layer_indices)"},
      {"beam",
       "a layer type is NoPE when its rope_parameters entry is null, a per-config rule no registry "
       "entry states (K itself: RMSNorm weight w before RoPE)",
       "transformers src/transformers/models/beam/modular_beam.py BeamAttention(Qwen3MoeAttention) "
       "and BeamModel (position_embeddings None where rope_parameters[layer_type] is None)"},
      {"chameleon",
       "K norm is a per-head LayerNorm (mean-subtracting, with bias; weight per head and dim), not "
       "an RMSNorm",
       "transformers src/transformers/models/chameleon/modeling_chameleon.py ChameleonAttention "
       "(k_norm = ChameleonLayerNorm((num_key_value_heads, head_dim)), before RoPE)"},
      {"cohere2_moe",
       "whether a full-attention layer gets RoPE depends on mlp_layer_types and "
       "prefix_dense_sliding_window_pattern (force_rope), which no registry rule reads",
       "transformers src/transformers/models/cohere2_moe/modular_cohere2_moe.py "
       "Cohere2MoeAttention (RoPE iff sliding_window or force_rope)"},
      {"cohere_compass_text",
       "a layer type is NoPE when its rope_parameters entry is null, a per-config rule no registry "
       "entry states (K itself: no norm, interleaved RoPE)",
       "transformers src/transformers/models/cohere_compass/modular_cohere_compass.py "
       "CohereCompassAttention(Cohere2Attention) and CohereCompassTextModel (position_embeddings "
       "None where rope_parameters[layer_type] is None)"},
      {"dbrx",
       "KV heads, RoPE theta and clip_qkv live in the nested attn_config (kv_n_heads, rope_theta, "
       "clip_qkv), which the reader does not read; K is clamped to clip_qkv before RoPE",
       "transformers src/transformers/models/dbrx/modular_dbrx.py DbrxAttention (Wqkv clamped to "
       "+-clip_qkv, rotate_half RoPE, no q/k norm)"},
      {"deepseek_eagle3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/deepseek_eagle3.py"},
      {"deepseek_v32", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/deepseek_v32/modular_deepseek_v32.py"},
      {"deepseek_v4",
       "K and V are one tensor (shared-KV MQA: kv_proj is read as both key and value, RoPE applied "
       "to it), and CSA/HCA layers add a compressed KV cache",
       "transformers src/transformers/models/deepseek_v4/modular_deepseek_v4.py "
       "DeepseekV4Attention (kv = apply_rotary_pos_emb(kv_norm(kv_proj(x))); cache.update(kv, "
       "kv))"},
      {"diffllama", "differential attention: two softmax maps per head over split Q/K",
       "transformers src/transformers/models/diffllama/modular_diffllama.py"},
      {"diffusion_gemma_text",
       "V is normalized (v_norm) on every layer and full-attention layers have no v_proj (V "
       "is built from the K projection); head_dim and KV heads differ per layer kind; a "
       "bidirectional block-diffusion model",
       "transformers src/transformers/models/diffusion_gemma/modular_diffusion_gemma.py "
       "DiffusionGemmaEncoderTextAttention"},
      {"domyn_edge",
       "head size differs per layer (head_sizes), with per-layer NoPE (position_layers) and "
       "windows (window_sizes); the config's model_type is domynedge",
       "vLLM vllm/model_executor/models/domyn_edge.py DomynEdgeAttention (a vendored copy of "
       "an unmerged branch)"},
      {"dory", "K norm is an L2 norm without weight (nGPT unit-norm keys), not an RMSNorm",
       "transformers src/transformers/models/dory/modular_dory.py DoryAttention(AfmoeAttention) "
       "(k_norm = DoryL2Norm() before RoPE)"},
      {"dots3_note_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/dots3_note/modular_dots3_note.py"},
      {"embedding_gemma2",
       "an embedding model: bidirectional attention (is_causal = False), no decoding KV cache",
       "transformers src/transformers/models/embedding_gemma2/modular_embedding_gemma2.py "
       "EmbeddingGemma2Attention"},
      {"falcon_h1",
       "K is scaled by key_multiplier before RoPE and the cache write, a factor the fused path "
       "does not apply",
       "transformers src/transformers/models/falcon_h1/modular_falcon_h1.py FalconH1Attention "
       "(k_proj(x) * key_multiplier, then rotate_half RoPE)"},
      {"flex_olmo",
       "K norm across all heads (FlexOlmoAttention(Olmo2Attention): k_norm over all KV heads)",
       "transformers src/transformers/models/flex_olmo/modular_flex_olmo.py"},
      {"gemma3n_text", "KV sharing across layers (num_kv_shared_layers) and per-layer inputs",
       "transformers src/transformers/models/gemma3n/modular_gemma3n.py"},
      {"gemma4_assistant",
       "no K/V of its own: every layer is KV-shared and reads the target Gemma 4's cached "
       "K/V (num_kv_shared_layers = num_hidden_layers is enforced)",
       "transformers src/transformers/models/gemma4_assistant/modeling_gemma4_assistant.py "
       "Gemma4AssistantForCausalLM and configuration_gemma4_assistant.py"},
      {"gemma4_text",
       "per-layer-kind head sizes (global_head_dim), K=V sharing (attention_k_eq_v) and KV sharing "
       "across layers",
       "transformers src/transformers/models/gemma4/modular_gemma4.py"},
      {"gemma4_unified_text",
       "per-layer-kind head sizes and KV sharing across layers (Gemma4TextAttention)",
       "transformers src/transformers/models/gemma4_unified/modular_gemma4_unified.py"},
      {"gigachat35", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/gigachat35.py"},
      {"glm4_moe_lite", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm4_moe_lite/modular_glm4_moe_lite.py"},
      {"glm5_next_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm5_next/modular_glm5_next.py"},
      {"glm_moe_dsa", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm_moe_dsa/modular_glm_moe_dsa.py"},
      {"glmasr",
       "an audio wrapper: its language model is text_config (GlmAsrConfig defaults it to "
       "model_type llama), read with the model_type it names; a glmasr config whose text_config "
       "names none is refused",
       "transformers src/transformers/models/glmasr/configuration_glmasr.py GlmAsrConfig "
       "(text_config SubConfigSpec model_type=\"llama\", audio_config glmasr_encoder) and "
       "modular_glmasr.py GlmAsrAttention (the audio encoder)"},
      {"granite_swa",
       "a learnable per-head attention sink beside sliding layers (GraniteSWAAttention): not "
       "checked against the fused path",
       "transformers src/transformers/models/granite_swa/modular_granite_swa.py"},
      {"granitemoe_swa",
       "per-layer RoPE theta from layer_rope_theta (0 = NoPE), a key no registry rule reads",
       "transformers src/transformers/models/granitemoe_swa/modular_granitemoe_swa.py "
       "GraniteMoeSWAModel (one rotary embedding per layer_rope_theta value)"},
      {"granitemoehybrid",
       "RoPE is on or off by position_embedding_type (\"rope\", else NoPE), a key no registry rule "
       "reads",
       "transformers src/transformers/models/granitemoehybrid/modular_granitemoehybrid.py "
       "GraniteMoeHybridAttention (RoPE only when position_embeddings is passed) and "
       "modeling_granitemoehybrid.py GraniteMoeHybridModel (rotary_emb iff position_embedding_type "
       "== \"rope\")"},
      {"hrm_text",
       "recurrent stacks: each layer runs once per cycle (H_cycles * (L_cycles + 1)) into its own "
       "cache slot (layer_idx + cycle_offset), a layer-to-cache mapping no registry rule states; K "
       "projects all num_attention_heads (MHA) whatever num_key_value_heads says",
       "transformers src/transformers/models/hrm_text/modular_hrm_text.py "
       "HrmTextAttention(LlamaAttention) (cache.update(..., layer_idx + cycle_offset)) and "
       "HrmTextConfig"},
      {"hunyuan_vl_text", "K norm after RoPE (key_layernorm = RMSNorm(head_dim) on the rotated K)",
       "transformers src/transformers/models/hunyuan_vl/modular_hunyuan_vl.py "
       "HunYuanVLDenseV1Attention (apply_rotary_pos_emb, then key_layernorm)"},
      {"hy_v4", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/hy_v4/modular_hy_v4.py"},
      {"hy_v4_vl_text", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/hy_v4_vl/modular_hy_v4_vl.py"},
      {"inkling",
       "K and V pass through a causal short convolution over tokens (k_sconv, v_sconv) "
       "before the K norm, and position enters only as a learned relative-logit bias (no "
       "RoPE)",
       "sglang python/sglang/srt/models/inkling_common/attn.py InklingAttention"},
      {"inkling2_text",
       "its modeling file could not be read (not in the references fkv-jit was checked "
       "against); refused rather than guessed (Inkling's attention convolves K and V over "
       "tokens)",
       "transformers src/transformers/models/inkling2/modular_inkling2.py (not available to "
       "read)"},
      {"interns1_pro",
       "FoPE: each KV head mixes the RoPE frequencies through learned cos_coef/sin_coef "
       "weights, not a RoPE table",
       "vLLM vllm/model_executor/models/interns1_pro.py InternS1ProMoeAttention "
       "(apply_rotary_pos_emb_sep with FourierRotaryEmbedding)"},
      {"iquest_loopcoder",
       "looped layers: loop_num passes over the layers, each later pass writing its own "
       "sliding-window (loop_window_size) KV cache under layer id + loop * num_hidden_layers, "
       "which the reader does not count",
       "vLLM vllm/model_executor/models/iquest_loopcoder.py LoopCoderAttention (one Attention per "
       "loop; neox RoPE, no q/k norm)"},
      {"iquest_q1",
       "its layer kinds are derived from first/hybrid-block/last layer keys while "
       "config.json's layer_types is discarded, and sliding layers rotate with "
       "swa_rope_theta: keys no rule reads",
       "sglang python/sglang/srt/models/iquest_q1.py IQuestQ1Attention and "
       "python/sglang/srt/configs/iquest_q1.py IQuestQ1Config"},
      {"jet_nemotron",
       "its layer_types names (attn, swa, jet) and the window in "
       "efficient_attention_config.swa.window_size are read by no rule; K itself: "
       "Qwen2-style (bias, no K norm, neox RoPE) on attn/swa layers, jet layers have no KV",
       "sglang python/sglang/srt/models/jet_nemotron.py JetNemotronAttention"},
      {"jetmoe", "mixture-of-attention heads (MoA): K/V projected per expert",
       "transformers src/transformers/models/jetmoe/modular_jetmoe.py"},
      {"k2_horizon",
       "V is a routed mixture of value-expert projections (MoVA), the K-norm weight differs "
       "per KV head, and partial RoPE pairs dims (i, i + head_dim/2)",
       "vLLM vllm/model_executor/models/k2_horizon.py K2HorizonMoVAAttention, "
       "K2HorizonAttention"},
      {"kimi_k25_eagle3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/kimi_k25_eagle3.py"},
      {"kimi_k3", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/kimi_k3.py"},
      {"kimi_linear", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/kimi_linear/modular_kimi_linear.py"},
      {"lfm3",
       "its modeling file could not be read (not in the references fkv-jit was checked "
       "against); refused rather than guessed",
       "transformers src/transformers/models/lfm3/modular_lfm3.py (not available to read)"},
      {"longcat_flash", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/longcat_flash/modular_longcat_flash.py"},
      {"longcat_flash_nextn",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/longcat_flash_nextn.py"},
      {"mimo_v2",
       "heads, head_dim, v_head_dim and rope_theta differ between the layer kinds of "
       "hybrid_layer_pattern (swa_* keys), and V is scaled by attention_value_scale before "
       "the cache write",
       "vLLM vllm/model_executor/models/mimo_v2.py MiMoV2Attention"},
      {"mimo_v2_flash",
       "sliding layers have twice num_key_value_heads (no config key says so) and V is scaled by "
       "attention_value_scale before the cache write",
       "transformers src/transformers/models/mimo_v2_flash/modular_mimo_v2_flash.py "
       "MiMoV2FlashAttention(Qwen2Attention)"},
      {"minicpm3", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/minicpm3/modular_minicpm3.py"},
      {"minimax_m3",
       "sparse layers keep a second, normed and rotated index-key cache, and qk_norm_type "
       "per_layer normalizes K across all heads",
       "sglang python/sglang/srt/models/minimax_m3.py MiniMaxM3Attention"},
      {"minimax_m3_vl_text",
       "minimax_m3_sparse layers add an indexer with its own RoPE'd index-key cache "
       "(cache.update_index) beside K, a layer kind no registry rule reads (K itself: (1 + w) "
       "RMSNorm before RoPE)",
       "transformers src/transformers/models/minimax_m3_vl/modular_minimax_m3_vl.py "
       "MiniMaxM3VLAttention(MiniMaxM2Attention) and MiniMaxM3VLIndexer"},
      {"mistral4", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/mistral4/modular_mistral4.py"},
      {"mistral_large4_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/mistral_large4/modular_mistral_large4.py"},
      {"modernbert-decoder",
       "the released configs give RoPE theta per layer kind in global_rope_theta / "
       "local_rope_theta and the layer pattern in global_attn_every_n_layers, keys no registry "
       "rule reads (K itself: no norm, neox RoPE)",
       "transformers src/transformers/models/modernbert_decoder/modular_modernbert_decoder.py "
       "ModernBertDecoderAttention and ModernBertDecoderConfig.convert_rope_params_to_dict"},
      {"moondream3",
       "V is multiplied by a learned token- and position-dependent factor (tau) before the "
       "cache write",
       "vLLM vllm/model_executor/models/moondream3.py Moondream3Attention"},
      {"moshi",
       "two decoders with their own KV caches: the temporal transformer (RoPE) and a depth decoder "
       "in depth_decoder_config (use_rope=False, per-codebook K projections), a pair no registry "
       "entry reads",
       "transformers src/transformers/models/moshi/modeling_moshi.py MoshiAttention (use_rope, "
       "use_flexible_linear) and MoshiDepthDecoder"},
      {"moss_vl",
       "cross-attention: the layers in cross_attention_layers take K/V from the vision "
       "features",
       "sglang python/sglang/srt/models/moss_vl.py MossVLTextCrossAttention "
       "(is_cross_attention=True)"},
      {"muse_glimmer_text",
       "K norm is an RMSNorm without weight (with_scale=False), not one with a weight",
       "transformers src/transformers/models/muse_glimmer/modular_muse_glimmer.py "
       "MuseGlimmerTextAttention(AfmoeAttention) (qk_norm = MuseGlimmerRMSNorm(with_scale=False) "
       "before RoPE; NoPE layers get no position_embeddings)"},
      {"muse_spark_text",
       "K norm is an RMSNorm without weight (with_scale=False), not one with a weight",
       "transformers src/transformers/models/muse_spark/modular_muse_spark.py "
       "MuseSparkTextAttention(MuseGlimmerTextAttention) (qk_norm without weight before RoPE)"},
      {"nanbeige",
       "looped layers: num_loops passes over the layers, each pass with its own KV cache (layer id "
       "+ loop * num_hidden_layers), which the reader does not count",
       "sglang python/sglang/srt/models/nanbeige.py NanbeigeAttention (one RadixAttention per "
       "loop; llama-style neox RoPE, no q/k norm)"},
      {"nanochat", "K norm after RoPE (a weightless RMSNorm of the rotated K)",
       "transformers src/transformers/models/nanochat/modular_nanochat.py NanoChatAttention "
       "(apply_rotary_pos_emb, then k_norm = NanoChatRMSNorm(eps) without weight)"},
      {"olmo_hybrid", "K norm across all heads (Olmo3Attention) beside linear-attention layers",
       "transformers src/transformers/models/olmo_hybrid/modular_olmo_hybrid.py"},
      {"olmoe",
       "K norm across all heads (OlmoeAttention: k_norm = RMSNorm(num_key_value_heads * head_dim))",
       "transformers src/transformers/models/olmoe/modular_olmoe.py"},
      {"openpangu", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/openpangu.py"},
      {"persimmon", "K norm is a LayerNorm (mean-subtracting) when qk_layernorm is set",
       "transformers src/transformers/models/persimmon/modeling_persimmon.py"},
      {"pixtral",
       "a vision encoder: axial 2-D RoPE over patch rows and columns, no causal KV cache",
       "transformers src/transformers/models/pixtral/modeling_pixtral.py PixtralAttention, "
       "PixtralVisionRotaryEmbedding (rope_type axial)"},
      {"plamo3",
       "sliding layers rotate with rope_local_theta and full layers with YaRN from "
       "rope_scaling_factor and initial_context_length: keys no rule reads (K itself: (1 + "
       "w) RMSNorm per head before neox RoPE)",
       "vLLM vllm/model_executor/models/plamo3.py Plamo3AttentionMixer and the hub "
       "configuration_plamo3.py"},
      {"qwen",
       "with use_dynamic_ntk (set in the released configs) the hub code picks the RoPE base from "
       "the prompt length at prefill (ntk_alpha), which the engines ignore: not one rule",
       "Qwen modeling_qwen.py QWenAttention (hub remote code: ntk_alpha = 2 ** "
       "ceil(log2(kv_seq_len / seq_length) + 1) - 1); sglang python/sglang/srt/models/qwen.py "
       "QWenAttention"},
      {"qwen2_5_omni",
       "an omni wrapper: the language model is thinker_config.text_config (qwen2_5_omni_text, "
       "supported) beside a talker LM in talker_config; the reader does not follow that nesting, "
       "so pass the thinker's text_config",
       "transformers src/transformers/models/qwen2_5_omni/configuration_qwen2_5_omni.py "
       "Qwen2_5OmniConfig (thinker_config, talker_config, token2wav_config) and "
       "Qwen2_5OmniThinkerConfig (text_config)"},
      {"qwen3_omni_moe",
       "an omni wrapper: the language model is thinker_config.text_config (qwen3_omni_moe_text, "
       "supported) beside a talker in talker_config; the reader does not follow that nesting, so "
       "pass the thinker's text_config",
       "transformers src/transformers/models/qwen3_omni_moe/configuration_qwen3_omni_moe.py "
       "Qwen3OmniMoeConfig (thinker_config, talker_config, code2wav_config) and "
       "Qwen3OmniMoeThinkerConfig (text_config)"},
      {"qwen4_exp_text",
       "every attention layer is indexed (QSA sparse attention): an indexer keeps its own "
       "compressed, RoPE'd key cache beside K",
       "transformers src/transformers/models/qwen4_exp/modular_qwen4_exp.py "
       "Qwen4ExpTextAttention(Qwen3_5Attention) and Qwen4ExpTextQSAIndexer (layer_types "
       "indexed_attention / linear_attention)"},
      {"recurrent_gemma",
       "recurrent (RG-LRU) layers beside local attention with a partial rotary the registry has no "
       "rule for",
       "transformers src/transformers/models/recurrent_gemma/modeling_recurrent_gemma.py"},
      {"sarvam", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/sarvam.py"},
      {"sarvam_mla", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/sarvam_mla/modular_sarvam_mla.py"},
      {"step3_text",
       "one KV head on every layer, fixed in the modeling code (num_kv_heads=1, no config key), "
       "where the reader would take num_attention_heads; K itself: no norm, neox RoPE over "
       "head_dim",
       "vLLM vllm/model_executor/models/step3_text.py Step3TextAttention (Step3TextDecoderLayer "
       "passes num_kv_heads=1; q via share_q_dim, inter_norm and wq)"},
      {"step3p5",
       "RoPE theta and partial_rotary_factors are per-layer lists in config.json, which no "
       "registry rule reads",
       "transformers src/transformers/models/step3p7/modular_step3p7.py "
       "Step3p7Attention(LagunaAttention) (k_norm = Step3p7RMSNorm(head_dim), (1 + w), before "
       "RoPE) and configuration_step3p7.py (rope_theta / partial_rotary_factors per layer)"},
      {"unlimited_ocr_text",
       "reference sliding-window attention: the cache keeps every prefill token plus a sliding "
       "window of decode tokens, a layer kind neither full nor sliding (K itself: no norm, "
       "rotate_half RoPE)",
       "transformers src/transformers/models/unlimited_ocr/modeling_unlimited_ocr.py "
       "UnlimitedOcrTextAttention and UnlimitedOcrDynamicReferenceSlidingWindowLayer"},
      {"xllm",
       "MoVA checkpoints compute V from routed value experts, and with rope_head_dim < "
       "head_dim the RoPE pairs dims (i, i + head_dim/2)",
       "sglang python/sglang/srt/models/xllm.py"},
      {"youtu", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/youtu/modular_youtu.py"},
      {"zamba2",
       "shared attention blocks (num_mem_blocks) serve the layers listed in hybrid_layer_ids, the "
       "rest Mamba-2, with head_dim = 2 * hidden_size / num_attention_heads and RoPE only when "
       "use_mem_rope: keys no registry rule reads",
       "transformers src/transformers/models/zamba2/modular_zamba2.py "
       "Zamba2Attention(ZambaAttention) (attention_hidden_size = 2 * hidden_size; use_mem_rope; "
       "layer_block_map = hybrid_layer_ids)"},
      {"zaya",
       "K norm is an L2 normalisation to sqrt(head_dim) times a learned scale per KV head "
       "(ZayaQKNorm), not an RMSNorm with one weight per dim",
       "transformers src/transformers/models/zaya/modular_zaya.py ZayaAttention(Phi3Attention) and "
       "ZayaQKNorm (before RoPE)"},
  };
  std::vector<const RefusalRow*> all;
  for (const RefusalRow& r : rows) all.push_back(&r);
  for (const auto* more : {&no_rope_refusals(), &engine_name_refusals(), &draft_module_refusals()})
    for (const RefusalRow& r : *more) all.push_back(&r);
  std::sort(all.begin(), all.end(), [](const RefusalRow* a, const RefusalRow* b) {
    return std::string_view(a->model_type) < std::string_view(b->model_type);
  });
  for (const RefusalRow* r : all)
    table.push_back({.name = r->model_type,
                     .model_types = {r->model_type},
                     .citation = r->citation,
                     .refusal = r->reason});
}

}  // namespace fkv::config_detail
