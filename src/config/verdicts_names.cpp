// config: refusals of names that engines register but no config.json carries as its model_type:
// an engine's module for a multimodal wrapper, a reward or classification head, or a model whose
// checkpoints carry another model_type. Each says which model_type decides instead, and where the
// name was found. Draft / MTP module names: verdicts_draft_names.cpp; the mechanism refusals:
// verdicts.cpp.
#include "internal.hpp"

namespace fkv::config_detail {

const std::vector<RefusalRow>& engine_name_refusals() {
  // Immortal, like every table of this module.
  static const auto& rows = *new std::vector<RefusalRow>{
      {"alice_ai",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/alice_ai.py"},
      {"alpamayo2_super",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/alpamayo2_super.py"},
      {"bagel",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bagel.py"},
      {"bailing_mm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/bailing_mm.py"},
      {"bailing_mm_v3",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/bailing_mm_v3.py"},
      {"bailing_moe_v3_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bailing_moe_v3_vl.py"},
      {"bee",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/bee.py"},
      {"deepseek_janus_pro",
       "an engine module name, not a config.json model_type: the checkpoint's model_type is "
       "multi_modality, whose language_config (a LlamaConfig) runs as LlamaForCausalLM; "
       "neither key is read",
       "sglang python/sglang/srt/models/deepseek_janus_pro.py MultiModalityCausalLM"},
      {"deepseek_ocr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/deepseek_ocr.py"},
      {"deepseek_v41",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:DeepseekV41ForCausalLM "
       "vllm:DSparkV41DraftModel)"},
      {"deepseek_vl2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/deepseek_vl2.py"},
      {"ernie4",
       "an engine module name, not a config.json model_type: the checkpoints say ernie4_5 or "
       "ernie4_5_moe, whose entries apply",
       "sglang python/sglang/srt/models/ernie4.py Ernie4_5_ForCausalLM, "
       "Ernie4_5_MoeForCausalLM"},
      {"fireredasr2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/fireredasr2.py"},
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
      {"glm5next",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:Glm5NextForCausalLM vllm:Glm5NextMTPModel)"},
      {"glm_image_vl",
       "an engine module name, not a config.json model_type: the checkpoint's model_type is "
       "glm_image, whose text_config names glm_image_text",
       "sglang python/sglang/srt/models/glm_image_vl.py GlmImageForConditionalGeneration"},
      {"grok",
       "an engine module name, not a config.json model_type (Grok-2 configs say \"git\", which "
       "is another model's type); its RoPE is a YaRN-like scaling set by top-level keys no "
       "rule reads",
       "sglang python/sglang/srt/models/grok.py Grok1Attention (ScalingRotaryEmbedding from "
       "get_rope_scaling(config))"},
      {"h2ovl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/h2ovl.py"},
      {"internlm2_reward",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/internlm2_reward.py"},
      {"interns1",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/interns1.py"},
      {"interns1pro",
       "an engine module name, not a config.json model_type (the checkpoint says "
       "interns1_pro); its text attention adds FoPE (learned per-KV-head cos_coef/sin_coef) "
       "to Qwen3-MoE's",
       "sglang python/sglang/srt/models/interns1pro.py InternS1ProTextAttention"},
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
      {"isaac",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/isaac.py"},
      {"jet_vlm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/jet_vlm.py"},
      {"kanana_v",
       "an engine module name, not a config.json model_type: the checkpoint's model_type is "
       "kanana-1.5-v (hub remote code), whose text_config names kanana-1.5-3b-instruct (a "
       "LlamaConfig run as LlamaForCausalLM)",
       "vLLM vllm/model_executor/models/kanana_v.py KananaVForConditionalGeneration"},
      {"keye_vl1_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/keye_vl1_5.py"},
      {"kimi_audio",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/kimi_audio.py"},
      {"kimi_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/kimi_vl.py"},
      {"lightonocr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/lightonocr.py"},
      {"llada2",
       "an engine module name, not a config.json model_type (the checkpoint says "
       "llada2_moe), and its attention is bidirectional (a diffusion language model)",
       "sglang python/sglang/srt/models/llada2.py LLaDA2MoeAttention "
       "(AttentionType.ENCODER_ONLY)"},
      {"llama_classification",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llama_classification.py"},
      {"llama_embedding",
       "an engine module name, not a config.json model_type: it serves configs of model_type "
       "\"llama\" (as an embedding model), whose verdict applies",
       "sglang python/sglang/srt/models/llama_embedding.py LlamaEmbeddingModel"},
      {"llama_reward",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llama_reward.py"},
      {"llava_onevision2",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides (qwen3 in "
       "its configs)",
       "vLLM vllm/model_executor/models/llava_onevision2.py "
       "LlavaOnevision2ForConditionalGeneration"},
      {"llavavid",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/llavavid.py"},
      {"locate_anything",
       "an engine module name, not a config.json model_type: the checkpoint's model_type is "
       "locateanything, whose text_config (qwen2) decides",
       "sglang python/sglang/srt/models/locate_anything.py "
       "LocateAnythingForConditionalGeneration"},
      {"longcat_flash_ngram",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/longcat_flash_ngram.py"},
      {"midashenglm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/midashenglm.py"},
      {"mimo",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/mimo.py"},
      {"mimo_v2_asr",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/mimo_v2_asr.py"},
      {"mimo_v2_omni",
       "an engine module name, not a config.json model_type: its language model is "
       "MiMoV2FlashForCausalLM on the mimo_v2 config, refused for per-kind heads and V "
       "scaling",
       "vLLM vllm/model_executor/models/mimo_v2_omni.py MiMoV2OmniForCausalLM"},
      {"mindspore",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/mindspore.py"},
      {"minicpmo",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/minicpmo.py"},
      {"minicpmv",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/minicpmv.py"},
      {"mistral_large_3",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/mistral_large_3.py"},
      {"mixtral_quant",
       "an engine module name, not a config.json model_type: it serves configs of model_type "
       "\"mixtral\", whose verdict applies",
       "sglang python/sglang/srt/models/mixtral_quant.py QuantMixtralForCausalLM"},
      {"moss_audio",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/moss_audio.py"},
      {"nano_nemotron_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nano_nemotron_vl.py"},
      {"nemotron_parse3_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/nemotron_parse3_5.py"},
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
      {"opencua",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/opencua.py"},
      {"openvla",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/openvla.py"},
      {"ovis",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ovis.py"},
      {"ovis2_5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ovis2_5.py"},
      {"phi3_small",
       "an engine module name, not a config.json model_type (the checkpoint says phi3small): "
       "its RoPE is set by rope_embedding_base and rope_position_scale, and its attention is "
       "blocksparse on most layers",
       "sglang python/sglang/srt/models/phi3_small.py Phi3SmallSelfAttention"},
      {"phi3v",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi3v.py"},
      {"phi4mm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi4mm.py"},
      {"phi4siglip",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/phi4siglip.py"},
      {"points_v15_chat",
       "an engine module name, not a config.json model_type: the checkpoint's model_type is "
       "pointsv1.5_chat, whose llm_config is a Qwen2Config",
       "sglang python/sglang/srt/models/points_v15_chat.py"},
      {"qwen2_rm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/qwen2_rm.py"},
      {"qwen3_asr_realtime",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/qwen3_asr_realtime.py"},
      {"qwen3_rm",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/qwen3_rm.py"},
      {"rvl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/rvl.py"},
      {"sarashina2_vision",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/sarashina2_vision.py"},
      {"skyworkr1v",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/skyworkr1v.py"},
      {"step1",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/step1.py"},
      {"step3_vl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/step3_vl.py"},
      {"step3_vl_10b",
       "an engine module name, not a config.json model_type: StepVLForConditionalGeneration "
       "is a wrapper whose text_config (Qwen3) decides",
       "sglang python/sglang/srt/models/step3_vl_10b.py"},
      {"step5",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "no modeling file in the engines read (vllm:Step5ForCausalLM "
       "vllm:Step5ForConditionalGeneration vllm:Step5MTP)"},
      {"step_vl",
       "an engine module name, not a config.json model_type: the StepVL wrapper, whose "
       "text_config (Qwen3) decides",
       "vLLM vllm/model_executor/models/step_vl.py"},
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
      {"ultravox",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "vLLM vllm/model_executor/models/ultravox.py"},
      {"voxtral_realtime",
       "an engine module name, not a config.json model_type: an audio wrapper whose "
       "text_config is voxtral_realtime_text (MistralAttention), filled with the wrapper's "
       "own defaults; the text config is not read apart from it",
       "transformers src/transformers/models/voxtral_realtime/modular_voxtral_realtime.py "
       "and configuration_voxtral_realtime.py"},
      {"yivl",
       "an engine module name, not a config.json model_type (a multimodal wrapper or "
       "reward/classification head): the nested text config's model_type decides",
       "sglang python/sglang/srt/models/yivl.py"},
  };
  return rows;
}

}  // namespace fkv::config_detail
