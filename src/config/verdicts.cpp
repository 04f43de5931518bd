// config: the registry's refusals. Every model_type the engines serve (data/model_types.json) that
// no supported entry covers gets a verdict here: refused, with the reason, and the modeling file
// it was read from (transformers src/transformers/models/..., vLLM vllm/model_executor/models/...
// or sglang python/sglang/srt/models/...). Multimodal wrappers whose text config names its own
// model_type are not listed: the text config's verdict applies (config.cpp).
//
// The reasons were first drafted (scripts/gen-refusal-draft.py) from what the modeling file holds
// (MLA keys, cross-attention, RoPE, K-norm shapes) and then corrected by hand where the file was
// read closer (OLMo norms, Gemma 3n/4 KV sharing, ...). "not yet checked" means what it says: the
// attention uses RoPE, but no one has yet stated its K norm, RoPE pairing and layer kinds as a
// registry entry; a config of it is refused rather than guessed. Moving one to a supported entry is
// adding its rule to architectures.cpp and deleting its row here.
#include "internal.hpp"

namespace fkv::config_detail {

void add_refused_model_types(std::vector<Architecture>& table) {
  struct Row {
    const char* model_type;
    const char* reason;
    const char* citation;
  };
  // Immortal, like every table of this module.
  static const auto& rows = *new std::vector<Row>{
      {"alice_ai",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/alice_ai.py"},
      {"alpamayo2_super",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/alpamayo2_super.py"},
      {"apertus1p5_text", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/apertus1p5/modular_apertus1p5.py"},
      {"aria_text",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/aria/modular_aria.py"},
      {"audioflamingo3", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/audioflamingo3/modular_audioflamingo3.py"},
      {"axk1", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/axk1/modular_axk1.py"},
      {"axk2", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/axk2/modular_axk2.py"},
      {"bagel",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bagel.py"},
      {"baichuan",
       "ALiBi positions (13B) or RoPE (7B) chosen by size in the hub remote code: not one rule",
       "sglang python/sglang/srt/models/baichuan.py"},
      {"bailing_hybrid",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/bailing_hybrid/modular_bailing_hybrid.py"},
      {"bailing_mm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/bailing_mm.py"},
      {"bailing_mm_v3",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/bailing_mm_v3.py"},
      {"bailing_moe_linear",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/bailing_moe_linear.py"},
      {"bailing_moe_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/bailing_moe_mtp.py"},
      {"bailing_moe_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/bailing_moe_nextn.py"},
      {"bailing_moe_v3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/bailing_moe_v3.py"},
      {"bailing_moe_v3_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/bailing_moe_v3_mtp.py"},
      {"bailing_moe_v3_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bailing_moe_v3_vl.py"},
      {"bamba",
       "attention layers are given by attn_layer_indices (the rest Mamba-2), a key no registry "
       "rule reads",
       "transformers src/transformers/models/bamba/modular_bamba.py BambaAttention(LlamaAttention) "
       "(partial rotate_half, partial_rotary_factor forced to 0.5) and configuration_bamba.py "
       "layers_block_type (from attn_layer_indices)"},
      {"bart",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/bart/modeling_bart.py"},
      {"beam",
       "a layer type is NoPE when its rope_parameters entry is null, a per-config rule no registry "
       "entry states (K itself: RMSNorm weight w before RoPE)",
       "transformers src/transformers/models/beam/modular_beam.py BeamAttention(Qwen3MoeAttention) "
       "and BeamModel (position_embeddings None where rope_parameters[layer_type] is None)"},
      {"bee",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bee.py"},
      {"bert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/bert/modeling_bert.py"},
      {"bert-generation",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/bert_generation/modeling_bert_generation.py"},
      {"big_bird",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/big_bird/modeling_big_bird.py"},
      {"bigbird_pegasus",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/bigbird_pegasus/modeling_bigbird_pegasus.py"},
      {"biogpt", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/biogpt/modular_biogpt.py"},
      {"blenderbot",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/blenderbot/modeling_blenderbot.py"},
      {"blenderbot-small",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/blenderbot_small/modeling_blenderbot_small.py"},
      {"blip_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/blip/modeling_blip.py"},
      {"bloom", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/bloom/modeling_bloom.py"},
      {"blt",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/blt/modular_blt.py"},
      {"camembert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/camembert/modular_camembert.py"},
      {"chameleon",
       "K norm is a per-head LayerNorm (mean-subtracting, with bias; weight per head and dim), not "
       "an RMSNorm",
       "transformers src/transformers/models/chameleon/modeling_chameleon.py ChameleonAttention "
       "(k_norm = ChameleonLayerNorm((num_key_value_heads, head_dim)), before RoPE)"},
      {"clip", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/clip/modeling_clip.py"},
      {"cohere2_moe",
       "whether a full-attention layer gets RoPE depends on mlp_layer_types and "
       "prefix_dense_sliding_window_pattern (force_rope), which no registry rule reads",
       "transformers src/transformers/models/cohere2_moe/modular_cohere2_moe.py "
       "Cohere2MoeAttention (RoPE iff sliding_window or force_rope)"},
      {"cohere_asr",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/cohere_asr/modular_cohere_asr.py"},
      {"cohere_compass_text",
       "a layer type is NoPE when its rope_parameters entry is null, a per-config rule no registry "
       "entry states (K itself: no norm, interleaved RoPE)",
       "transformers src/transformers/models/cohere_compass/modular_cohere_compass.py "
       "CohereCompassAttention(Cohere2Attention) and CohereCompassTextModel (position_embeddings "
       "None where rope_parameters[layer_type] is None)"},
      {"cohere_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/cohere_eagle.py"},
      {"cosmos3", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "vLLM vllm/model_executor/models/cosmos3.py"},
      {"cpmant", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/cpmant/modeling_cpmant.py"},
      {"ctrl", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/ctrl/modeling_ctrl.py"},
      {"data2vec-text", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "no modeling file in the engines read (transformers:causal-lm)"},
      {"dbrx",
       "KV heads, RoPE theta and clip_qkv live in the nested attn_config (kv_n_heads, rope_theta, "
       "clip_qkv), which the reader does not read; K is clamped to clip_qkv before RoPE",
       "transformers src/transformers/models/dbrx/modular_dbrx.py DbrxAttention (Wqkv clamped to "
       "+-clip_qkv, rotate_half RoPE, no q/k norm)"},
      {"deepseek_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/deepseek_eagle.py"},
      {"deepseek_eagle3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/deepseek_eagle3.py"},
      {"deepseek_janus_pro",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/deepseek_janus_pro.py"},
      {"deepseek_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/deepseek_mtp.py"},
      {"deepseek_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_nextn.py"},
      {"deepseek_ocr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/deepseek_ocr.py"},
      {"deepseek_v32", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/deepseek_v32/modular_deepseek_v32.py"},
      {"deepseek_v4",
       "K and V are one tensor (shared-KV MQA: kv_proj is read as both key and value, RoPE applied "
       "to it), and CSA/HCA layers add a compressed KV cache",
       "transformers src/transformers/models/deepseek_v4/modular_deepseek_v4.py "
       "DeepseekV4Attention (kv = apply_rotary_pos_emb(kv_norm(kv_proj(x))); cache.update(kv, "
       "kv))"},
      {"deepseek_v41",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:DeepseekV41ForCausalLM "
       "vllm:DSparkV41DraftModel)"},
      {"deepseek_v4_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_v4_dspark.py"},
      {"deepseek_v4_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_v4_nextn.py"},
      {"deepseek_vl2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/deepseek_vl2.py"},
      {"dflash",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dflash.py"},
      {"diffllama", "differential attention: two softmax maps per head over split Q/K",
       "transformers src/transformers/models/diffllama/modular_diffllama.py"},
      {"diffusion_gemma_text",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/diffusion_gemma/modular_diffusion_gemma.py"},
      {"domyn_edge",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/domyn_edge.py"},
      {"dory", "K norm is an L2 norm without weight (nGPT unit-norm keys), not an RMSNorm",
       "transformers src/transformers/models/dory/modular_dory.py DoryAttention(AfmoeAttention) "
       "(k_norm = DoryL2Norm() before RoPE)"},
      {"dots3_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dots3_nextn.py"},
      {"dots3_note_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/dots3_note/modular_dots3_note.py"},
      {"dots_ocr",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/dots_ocr.py"},
      {"dots_vlm", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "sglang python/sglang/srt/models/dots_vlm.py"},
      {"dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dspark.py"},
      {"dspark_minimax",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dspark_minimax.py"},
      {"dspark_mla",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "no modeling file in the engines read (vllm:K3DSparkModel)"},
      {"eagle2_5_vl",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/eagle2_5_vl.py"},
      {"electra",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/electra/modeling_electra.py"},
      {"embedding_gemma2",
       "an embedding model: bidirectional attention (is_causal = False), no decoding KV cache",
       "transformers src/transformers/models/embedding_gemma2/modular_embedding_gemma2.py "
       "EmbeddingGemma2Attention"},
      {"ernie",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/ernie/modular_ernie.py"},
      {"ernie4",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/ernie4.py"},
      {"ernie4_5_vl_moe_text",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/ernie4_5_vl_moe/modular_ernie4_5_vl_moe.py"},
      {"ernie4_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/ernie4_eagle.py"},
      {"ernie_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/ernie_mtp.py"},
      {"evolla",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/evolla/modular_evolla.py"},
      {"exaone4_5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/exaone4_5_mtp.py"},
      {"exaone_moe_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/exaone_moe_mtp.py"},
      {"extract_hidden_states",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/extract_hidden_states.py"},
      {"falcon",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/falcon/modeling_falcon.py"},
      {"falcon_h1",
       "K is scaled by key_multiplier before RoPE and the cache write, a factor the fused path "
       "does not apply",
       "transformers src/transformers/models/falcon_h1/modular_falcon_h1.py FalconH1Attention "
       "(k_proj(x) * key_multiplier, then rotate_half RoPE)"},
      {"falcon_mamba", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/falcon_mamba/modular_falcon_mamba.py"},
      {"fireredasr2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/fireredasr2.py"},
      {"flex_olmo",
       "K norm across all heads (FlexOlmoAttention(Olmo2Attention): k_norm over all KV heads)",
       "transformers src/transformers/models/flex_olmo/modular_flex_olmo.py"},
      {"funasr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/funasr.py"},
      {"funaudiochat",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/funaudiochat.py"},
      {"gemma3_causal",
       "an engine module name, not a config.json model_type: it serves gemma3_text configs "
       "(EmbeddingGemma, an embedding model), whose verdict applies",
       "sglang python/sglang/srt/models/gemma3_causal.py EmbeddingGemmaModel"},
      {"gemma3n_text", "KV sharing across layers (num_kv_shared_layers) and per-layer inputs",
       "transformers src/transformers/models/gemma3n/modular_gemma3n.py"},
      {"gemma4_assistant",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/gemma4_assistant/modeling_gemma4_assistant.py"},
      {"gemma4_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/gemma4_dspark.py"},
      {"gemma4_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/gemma4_mtp.py"},
      {"gemma4_text",
       "per-layer-kind head sizes (global_head_dim), K=V sharing (attention_k_eq_v) and KV sharing "
       "across layers",
       "transformers src/transformers/models/gemma4/modular_gemma4.py"},
      {"gemma4_unified_text",
       "per-layer-kind head sizes and KV sharing across layers (Gemma4TextAttention)",
       "transformers src/transformers/models/gemma4_unified/modular_gemma4_unified.py"},
      {"gigachat35", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/gigachat35.py"},
      {"gigachat35_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/gigachat35_mtp.py"},
      {"git", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/git/modeling_git.py"},
      {"glm4_moe_lite", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm4_moe_lite/modular_glm4_moe_lite.py"},
      {"glm4_moe_lite_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/glm4_moe_lite_mtp.py"},
      {"glm4_moe_lite_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/glm4_moe_lite_nextn.py"},
      {"glm4_moe_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/glm4_moe_mtp.py"},
      {"glm4_moe_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/glm4_moe_nextn.py"},
      {"glm5_next_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/glm5_next_nextn.py"},
      {"glm5_next_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm5_next/modular_glm5_next.py"},
      {"glm5next",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:Glm5NextForCausalLM vllm:Glm5NextMTPModel)"},
      {"glm_image_vl",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/glm_image_vl.py"},
      {"glm_moe_dsa", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/glm_moe_dsa/modular_glm_moe_dsa.py"},
      {"glm_ocr_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/glm_ocr_mtp.py"},
      {"glm_ocr_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/glm_ocr_nextn.py"},
      {"glmasr",
       "an audio wrapper: its language model is text_config (GlmAsrConfig defaults it to "
       "model_type llama), read with the model_type it names; a glmasr config whose text_config "
       "names none is refused",
       "transformers src/transformers/models/glmasr/configuration_glmasr.py GlmAsrConfig "
       "(text_config SubConfigSpec model_type=\"llama\", audio_config glmasr_encoder) and "
       "modular_glmasr.py GlmAsrAttention (the audio encoder)"},
      {"gpt-sw3", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt2/modeling_gpt2.py"},
      {"gpt2", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt2/modeling_gpt2.py"},
      {"gpt_bigcode", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt_bigcode/modeling_gpt_bigcode.py"},
      {"granite4_vision_text",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/granite4_vision/modular_granite4_vision.py"},
      {"granite_speech",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/granite_speech/modeling_granite_speech.py"},
      {"granite_speech_plus",
       "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/granite_speech_plus/modular_granite_speech_plus.py"},
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
      {"granitemoeshared", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/granitemoeshared/modular_granitemoeshared.py"},
      {"grok",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/grok.py"},
      {"h2ovl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/h2ovl.py"},
      {"hrm_text",
       "recurrent stacks: each layer runs once per cycle (H_cycles * (L_cycles + 1)) into its own "
       "cache slot (layer_idx + cycle_offset), a layer-to-cache mapping no registry rule states; K "
       "projects all num_attention_heads (MHA) whatever num_key_value_heads says",
       "transformers src/transformers/models/hrm_text/modular_hrm_text.py "
       "HrmTextAttention(LlamaAttention) (cache.update(..., layer_idx + cycle_offset)) and "
       "HrmTextConfig"},
      {"hunyuan_v3_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/hunyuan_v3_nextn.py"},
      {"hunyuan_v4_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/hunyuan_v4_nextn.py"},
      {"hunyuan_vl_text", "K norm after RoPE (key_layernorm = RMSNorm(head_dim) on the rotated K)",
       "transformers src/transformers/models/hunyuan_vl/modular_hunyuan_vl.py "
       "HunYuanVLDenseV1Attention (apply_rotary_pos_emb, then key_layernorm)"},
      {"hy_v3_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/hy_v3_mtp.py"},
      {"hy_v4", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/hy_v4/modular_hy_v4.py"},
      {"hy_v4_vl_text", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/hy_v4_vl/modular_hy_v4_vl.py"},
      {"idefics",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/idefics/modeling_idefics.py"},
      {"inkling",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/inkling.py"},
      {"inkling2_loop_text", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/inkling2_loop/modular_inkling2_loop.py"},
      {"inkling2_text",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/inkling2/modular_inkling2.py"},
      {"inkling_text", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/inkling/modular_inkling.py"},
      {"internlm2_reward",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/internlm2_reward.py"},
      {"interns1",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/interns1.py"},
      {"interns1_pro",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/interns1_pro.py"},
      {"interns1pro",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/interns1pro.py"},
      {"interns2_mobius",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/interns2_mobius.py"},
      {"interns2_preview",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/interns2_preview.py"},
      {"interns2preview",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/interns2preview.py"},
      {"iquest_loopcoder",
       "looped layers: loop_num passes over the layers, each later pass writing its own "
       "sliding-window (loop_window_size) KV cache under layer id + loop * num_hidden_layers, "
       "which the reader does not count",
       "vLLM vllm/model_executor/models/iquest_loopcoder.py LoopCoderAttention (one Attention per "
       "loop; neox RoPE, no q/k norm)"},
      {"iquest_q1",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/iquest_q1.py"},
      {"iquest_q1_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/iquest_q1_mtp.py"},
      {"isaac",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/isaac.py"},
      {"jet_nemotron",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/jet_nemotron.py"},
      {"jet_vlm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/jet_vlm.py"},
      {"jetmoe", "mixture-of-attention heads (MoA): K/V projected per expert",
       "transformers src/transformers/models/jetmoe/modular_jetmoe.py"},
      {"k2_horizon",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/k2_horizon.py"},
      {"kanana_v",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/kanana_v.py"},
      {"keye",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/keye.py"},
      {"keye_vl1_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/keye_vl1_5.py"},
      {"kimi_audio",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/kimi_audio.py"},
      {"kimi_k25_eagle3",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/kimi_k25_eagle3.py"},
      {"kimi_k3", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/kimi_k3.py"},
      {"kimi_linear", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/kimi_linear/modular_kimi_linear.py"},
      {"kimi_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/kimi_vl.py"},
      {"kolibri1", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/kolibri1/modular_kolibri1.py"},
      {"kosmos_2_5_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/kosmos2_5/modeling_kosmos2_5.py"},
      {"kosmos_2_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/kosmos2/modeling_kosmos2.py"},
      {"laguna",
       "partial_rotary_factor differs per layer type (rope_parameters: full 0.5, sliding 1.0 by "
       "default) while the config class also carries a top-level partial_rotary_factor that the "
       "reader would apply to every layer; K itself: RMSNorm weight w before neox RoPE",
       "transformers src/transformers/models/laguna/modular_laguna.py "
       "LagunaAttention(AfmoeAttention) and LagunaRotaryEmbedding (partial rotary per layer type)"},
      {"laguna_dflash",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/laguna_dflash.py"},
      {"lfm2_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/lfm2_dspark.py"},
      {"lfm3",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/lfm3/modular_lfm3.py"},
      {"lightonocr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/lightonocr.py"},
      {"lilicorr",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/lilicorr.py"},
      {"llada2",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/llada2.py"},
      {"llama4_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama4_eagle.py"},
      {"llama_classification",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llama_classification.py"},
      {"llama_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama_eagle.py"},
      {"llama_eagle3",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama_eagle3.py"},
      {"llama_embedding",
       "an engine module name, not a config.json model_type: it serves configs of model_type "
       "\"llama\" (as an embedding model), whose verdict applies",
       "sglang python/sglang/srt/models/llama_embedding.py LlamaEmbeddingModel"},
      {"llama_reward",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llama_reward.py"},
      {"llava_onevision2",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/llava_onevision2.py"},
      {"llavavid",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llavavid.py"},
      {"locate_anything",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/locate_anything.py"},
      {"longcat_flash", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/longcat_flash/modular_longcat_flash.py"},
      {"longcat_flash_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/longcat_flash_mtp.py"},
      {"longcat_flash_nextn",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "sglang python/sglang/srt/models/longcat_flash_nextn.py"},
      {"longcat_flash_ngram",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/longcat_flash_ngram.py"},
      {"mamba", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/mamba/modeling_mamba.py"},
      {"mamba2", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/mamba2/modeling_mamba2.py"},
      {"marian",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/marian/modeling_marian.py"},
      {"mbart",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/mbart/modeling_mbart.py"},
      {"megatron-bert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/megatron_bert/modeling_megatron_bert.py"},
      {"midashenglm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/midashenglm.py"},
      {"mimo",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/mimo.py"},
      {"mimo_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mimo_mtp.py"},
      {"mimo_v2",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/mimo_v2.py"},
      {"mimo_v2_asr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/mimo_v2_asr.py"},
      {"mimo_v2_flash",
       "sliding layers have twice num_key_value_heads (no config key says so) and V is scaled by "
       "attention_value_scale before the cache write",
       "transformers src/transformers/models/mimo_v2_flash/modular_mimo_v2_flash.py "
       "MiMoV2FlashAttention(Qwen2Attention)"},
      {"mimo_v2_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mimo_v2_mtp.py"},
      {"mimo_v2_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/mimo_v2_nextn.py"},
      {"mimo_v2_omni",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/mimo_v2_omni.py"},
      {"mindspore",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/mindspore.py"},
      {"minicpm3", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/minicpm3/modular_minicpm3.py"},
      {"minicpm_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/minicpm_eagle.py"},
      {"minicpmo",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/minicpmo.py"},
      {"minicpmv",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/minicpmv.py"},
      {"minimax_m3",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/minimax_m3.py"},
      {"minimax_m3_vl_text",
       "minimax_m3_sparse layers add an indexer with its own RoPE'd index-key cache "
       "(cache.update_index) beside K, a layer kind no registry rule reads (K itself: (1 + w) "
       "RMSNorm before RoPE)",
       "transformers src/transformers/models/minimax_m3_vl/modular_minimax_m3_vl.py "
       "MiniMaxM3VLAttention(MiniMaxM2Attention) and MiniMaxM3VLIndexer"},
      {"mistral4", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/mistral4/modular_mistral4.py"},
      {"mistral_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mistral_eagle.py"},
      {"mistral_large4_text",
       "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/mistral_large4/modular_mistral_large4.py"},
      {"mistral_large_3",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/mistral_large_3.py"},
      {"mistral_large_3_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mistral_large_3_eagle.py"},
      {"mixtral_quant",
       "an engine module name, not a config.json model_type: it serves configs of model_type "
       "\"mixtral\", whose verdict applies",
       "sglang python/sglang/srt/models/mixtral_quant.py QuantMixtralForCausalLM"},
      {"mllama_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/mllama/modeling_mllama.py"},
      {"modernbert-decoder",
       "the released configs give RoPE theta per layer kind in global_rope_theta / "
       "local_rope_theta and the layer pattern in global_attn_every_n_layers, keys no registry "
       "rule reads (K itself: no norm, neox RoPE)",
       "transformers src/transformers/models/modernbert_decoder/modular_modernbert_decoder.py "
       "ModernBertDecoderAttention and ModernBertDecoderConfig.convert_rope_params_to_dict"},
      {"molmo",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/molmo.py"},
      {"molmo2_text",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/molmo2/modular_molmo2.py"},
      {"moondream3",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/moondream3.py"},
      {"moshi",
       "two decoders with their own KV caches: the temporal transformer (RoPE) and a depth decoder "
       "in depth_decoder_config (use_rope=False, per-codebook K projections), a pair no registry "
       "entry reads",
       "transformers src/transformers/models/moshi/modeling_moshi.py MoshiAttention (use_rope, "
       "use_flexible_linear) and MoshiDepthDecoder"},
      {"moss_audio",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/moss_audio.py"},
      {"moss_vl",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "sglang python/sglang/srt/models/moss_vl.py"},
      {"mpt", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/mpt/modeling_mpt.py"},
      {"muse_glimmer_text",
       "K norm is an RMSNorm without weight (with_scale=False), not one with a weight",
       "transformers src/transformers/models/muse_glimmer/modular_muse_glimmer.py "
       "MuseGlimmerTextAttention(AfmoeAttention) (qk_norm = MuseGlimmerRMSNorm(with_scale=False) "
       "before RoPE; NoPE layers get no position_embeddings)"},
      {"muse_spark_text",
       "K norm is an RMSNorm without weight (with_scale=False), not one with a weight",
       "transformers src/transformers/models/muse_spark/modular_muse_spark.py "
       "MuseSparkTextAttention(MuseGlimmerTextAttention) (qk_norm without weight before RoPE)"},
      {"musicgen",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/musicgen/modeling_musicgen.py"},
      {"musicgen_melody",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/musicgen_melody/modeling_musicgen_melody.py"},
      {"mvp",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/mvp/modeling_mvp.py"},
      {"nanbeige",
       "looped layers: num_loops passes over the layers, each pass with its own KV cache (layer id "
       "+ loop * num_hidden_layers), which the reader does not count",
       "sglang python/sglang/srt/models/nanbeige.py NanbeigeAttention (one RadixAttention per "
       "loop; llama-style neox RoPE, no q/k norm)"},
      {"nano_nemotron_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nano_nemotron_vl.py"},
      {"nanochat", "K norm after RoPE (a weightless RMSNorm of the rotated K)",
       "transformers src/transformers/models/nanochat/modular_nanochat.py NanoChatAttention "
       "(apply_rotary_pos_emb, then k_norm = NanoChatRMSNorm(eps) without weight)"},
      {"nemotron_h_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/nemotron_h_mtp.py"},
      {"nemotron_nas",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/nemotron_nas.py"},
      {"nemotron_parse",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "vLLM vllm/model_executor/models/nemotron_parse.py"},
      {"nemotron_parse3_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nemotron_parse3_5.py"},
      {"nemotron_parse3_5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/nemotron_parse3_5_mtp.py"},
      {"nemotron_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nemotron_vl.py"},
      {"nvila",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/nvila.py"},
      {"nvila_lite",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/nvila_lite.py"},
      {"nvlm_d",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nvlm_d.py"},
      {"olmo_hybrid", "K norm across all heads (Olmo3Attention) beside linear-attention layers",
       "transformers src/transformers/models/olmo_hybrid/modular_olmo_hybrid.py"},
      {"olmoe",
       "K norm across all heads (OlmoeAttention: k_norm = RMSNorm(num_key_value_heads * head_dim))",
       "transformers src/transformers/models/olmoe/modular_olmoe.py"},
      {"openai-gpt", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/openai/modeling_openai.py"},
      {"opencua",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/opencua.py"},
      {"openpangu", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/openpangu.py"},
      {"openpangu_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/openpangu_mtp.py"},
      {"openpangu_vl",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/openpangu_vl.py"},
      {"openvla",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/openvla.py"},
      {"opt", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/opt/modeling_opt.py"},
      {"ovis",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ovis.py"},
      {"ovis2_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ovis2_5.py"},
      {"paddleocr_vl_text",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/paddleocr_vl/modular_paddleocr_vl.py"},
      {"param2moe",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/param2moe.py"},
      {"pegasus",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pegasus/modeling_pegasus.py"},
      {"persimmon", "K norm is a LayerNorm (mean-subtracting) when qk_layernorm is set",
       "transformers src/transformers/models/persimmon/modeling_persimmon.py"},
      {"phi3_small",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/phi3_small.py"},
      {"phi3v",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi3v.py"},
      {"phi4_multimodal",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/phi4_multimodal/modular_phi4_multimodal.py"},
      {"phi4mm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi4mm.py"},
      {"phi4siglip",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi4siglip.py"},
      {"pi0", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/pi0/modular_pi0.py"},
      {"pix2struct_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pix2struct/modeling_pix2struct.py"},
      {"pixtral",
       "a vision encoder: axial 2-D RoPE over patch rows and columns, no causal KV cache",
       "transformers src/transformers/models/pixtral/modeling_pixtral.py PixtralAttention, "
       "PixtralVisionRotaryEmbedding (rope_type axial)"},
      {"plamo3",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/plamo3.py"},
      {"plbart",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/plbart/modular_plbart.py"},
      {"points_v15_chat",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/points_v15_chat.py"},
      {"pp_formulanet_text",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pp_formulanet/modular_pp_formulanet.py"},
      {"prophetnet",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/prophetnet/modeling_prophetnet.py"},
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
      {"qwen2_audio", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/qwen2_audio/modeling_qwen2_audio.py"},
      {"qwen2_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/qwen2_eagle.py"},
      {"qwen2_rm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/qwen2_rm.py"},
      {"qwen3_5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_5_mtp.py"},
      {"qwen3_asr", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/qwen3_asr/modular_qwen3_asr.py"},
      {"qwen3_asr_realtime",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/qwen3_asr_realtime.py"},
      {"qwen3_dflash",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_dflash.py"},
      {"qwen3_dflash2",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_dflash2.py"},
      {"qwen3_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_dspark.py"},
      {"qwen3_eagle3",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_eagle3.py"},
      {"qwen3_moe_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/qwen3_moe_mtp.py"},
      {"qwen3_next_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_next_mtp.py"},
      {"qwen3_omni_moe",
       "an omni wrapper: the language model is thinker_config.text_config (qwen3_omni_moe_text, "
       "supported) beside a talker in talker_config; the reader does not follow that nesting, so "
       "pass the thinker's text_config",
       "transformers src/transformers/models/qwen3_omni_moe/configuration_qwen3_omni_moe.py "
       "Qwen3OmniMoeConfig (thinker_config, talker_config, code2wav_config) and "
       "Qwen3OmniMoeThinkerConfig (text_config)"},
      {"qwen3_rm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/qwen3_rm.py"},
      {"qwen3_xpress",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_xpress.py"},
      {"qwen4_exp_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/qwen4_exp_mtp.py"},
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
      {"reformer", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/reformer/modeling_reformer.py"},
      {"rembert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/rembert/modeling_rembert.py"},
      {"rnj1",
       "its rope_parameters are keyed by the chunked_attention layer type, which the reader reads "
       "as sliding_attention and cannot look up; K itself: (1 + w) RMSNorm per head before neox "
       "RoPE",
       "vLLM vllm/model_executor/models/rnj1.py Rnj1Attention (k_norm = GemmaRMSNorm(head_dim); "
       "rope_parameters[layer_type]; chunked_attention block-local layers)"},
      {"roberta",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/roberta/modular_roberta.py"},
      {"roberta-prelayernorm",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers "
       "src/transformers/models/roberta_prelayernorm/modeling_roberta_prelayernorm.py"},
      {"roc_bert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/roc_bert/modeling_roc_bert.py"},
      {"roformer",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/roformer/modeling_roformer.py"},
      {"rvl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/rvl.py"},
      {"rwkv", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/rwkv/modeling_rwkv.py"},
      {"sarashina2_vision",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/sarashina2_vision.py"},
      {"sarvam", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "vLLM vllm/model_executor/models/sarvam.py"},
      {"sarvam_mla", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/sarvam_mla/modular_sarvam_mla.py"},
      {"sdar",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/sdar.py"},
      {"sdar_moe",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/sdar_moe.py"},
      {"skyworkr1v",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/skyworkr1v.py"},
      {"solar_open", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/solar_open/modular_solar_open.py"},
      {"spark2_5",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/spark2_5.py"},
      {"step1",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/step1.py"},
      {"step3_text",
       "one KV head on every layer, fixed in the modeling code (num_kv_heads=1, no config key), "
       "where the reader would take num_attention_heads; K itself: no norm, neox RoPE over "
       "head_dim",
       "vLLM vllm/model_executor/models/step3_text.py Step3TextAttention (Step3TextDecoderLayer "
       "passes num_kv_heads=1; q via share_q_dim, inter_norm and wq)"},
      {"step3_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/step3_vl.py"},
      {"step3_vl_10b",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/step3_vl_10b.py"},
      {"step3p5",
       "RoPE theta and partial_rotary_factors are per-layer lists in config.json, which no "
       "registry rule reads",
       "transformers src/transformers/models/step3p7/modular_step3p7.py "
       "Step3p7Attention(LagunaAttention) (k_norm = Step3p7RMSNorm(head_dim), (1 + w), before "
       "RoPE) and configuration_step3p7.py (rope_theta / partial_rotary_factors per layer)"},
      {"step3p5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/step3p5_mtp.py"},
      {"step5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:Step5ForCausalLM "
       "vllm:Step5ForConditionalGeneration vllm:Step5MTP)"},
      {"step_vl",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "vLLM vllm/model_executor/models/step_vl.py"},
      {"t5gemma2_decoder",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/t5gemma2/modular_t5gemma2.py"},
      {"telechat2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/telechat2.py"},
      {"teleflm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/teleflm.py"},
      {"torch_native_llama",
       "an engine module name, not a config.json model_type: it serves configs of model_type "
       "\"llama\" or \"phi3\", whose verdict applies",
       "sglang python/sglang/srt/models/torch_native_llama.py TorchNativeLlamaForCausalLM, "
       "TorchNativePhi3ForCausalLM"},
      {"transformers",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "sglang python/sglang/srt/models/transformers.py"},
      {"trocr",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/trocr/modeling_trocr.py"},
      {"udop",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/udop/modeling_udop.py"},
      {"ultravox",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ultravox.py"},
      {"unlimited_ocr_text",
       "reference sliding-window attention: the cache keeps every prefill token plus a sliding "
       "window of decode tokens, a layer kind neither full nor sliding (K itself: no norm, "
       "rotate_half RoPE)",
       "transformers src/transformers/models/unlimited_ocr/modeling_unlimited_ocr.py "
       "UnlimitedOcrTextAttention and UnlimitedOcrDynamicReferenceSlidingWindowLayer"},
      {"vaultgemma", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/vaultgemma/modular_vaultgemma.py"},
      {"voxtral", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/voxtral/modular_voxtral.py"},
      {"voxtral_realtime",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "transformers src/transformers/models/voxtral_realtime/modular_voxtral_realtime.py"},
      {"whisper",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/whisper/modeling_whisper.py"},
      {"xglm", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/xglm/modeling_xglm.py"},
      {"xllm",
       "not yet checked against its modeling code (RoPE attention whose K norm, RoPE pairing and "
       "layer kinds no registry entry states)",
       "sglang python/sglang/srt/models/xllm.py"},
      {"xlm",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/xlm/modeling_xlm.py"},
      {"xlm-roberta",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/xlm_roberta/modular_xlm_roberta.py"},
      {"xlm-roberta-xl",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/xlm_roberta_xl/modular_xlm_roberta_xl.py"},
      {"xlnet", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/xlnet/modeling_xlnet.py"},
      {"xlstm", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/xlstm/modeling_xlstm.py"},
      {"xmod",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/xmod/modeling_xmod.py"},
      {"yivl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/yivl.py"},
      {"youtu", "MLA (kv_lora_rank): the cache holds a compressed latent, not per-head K/V",
       "transformers src/transformers/models/youtu/modular_youtu.py"},
      {"zamba", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/zamba/modeling_zamba.py"},
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
  for (const Row& r : rows)
    table.push_back({.name = r.model_type,
                     .model_types = {r.model_type},
                     .citation = r.citation,
                     .refusal = r.reason});
}

}  // namespace fkv::config_detail
