// config: refusals of the draft / MTP module names that engines register (*_mtp, *_nextn, EAGLE,
// DFlash and DSpark heads, ...) but no config.json carries as its model_type: a draft's config
// carries its target's model_type or a speculators draft format, whose verdict applies.
// Each cites where the name was found. The other engine module names: verdicts_names.cpp.
#include "internal.hpp"

namespace fkv::config_detail {

const std::vector<RefusalRow>& draft_module_refusals() {
  // Immortal, like every table of this module.
  static const auto& rows = *new std::vector<RefusalRow>{
      {"bailing_moe_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/bailing_moe_mtp.py"},
      {"bailing_moe_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/bailing_moe_nextn.py"},
      {"bailing_moe_v3_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/bailing_moe_v3_mtp.py"},
      {"cohere_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/cohere_eagle.py"},
      {"deepseek_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/deepseek_eagle.py"},
      {"deepseek_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/deepseek_mtp.py"},
      {"deepseek_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_nextn.py"},
      {"deepseek_v4_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_v4_dspark.py"},
      {"deepseek_v4_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/deepseek_v4_nextn.py"},
      {"dflash",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dflash.py"},
      {"dots3_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/dots3_nextn.py"},
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
      {"ernie4_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/ernie4_eagle.py"},
      {"ernie_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/ernie_mtp.py"},
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
      {"gemma4_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/gemma4_dspark.py"},
      {"gemma4_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/gemma4_mtp.py"},
      {"gigachat35_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/gigachat35_mtp.py"},
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
      {"glm_ocr_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/glm_ocr_mtp.py"},
      {"glm_ocr_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/glm_ocr_nextn.py"},
      {"hunyuan_v3_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/hunyuan_v3_nextn.py"},
      {"hunyuan_v4_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/hunyuan_v4_nextn.py"},
      {"hy_v3_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/hy_v3_mtp.py"},
      {"iquest_q1_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/iquest_q1_mtp.py"},
      {"laguna_dflash",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/laguna_dflash.py"},
      {"lfm2_dspark",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/lfm2_dspark.py"},
      {"lilicorr",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/lilicorr.py"},
      {"llama4_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama4_eagle.py"},
      {"llama_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama_eagle.py"},
      {"llama_eagle3",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/llama_eagle3.py"},
      {"longcat_flash_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/longcat_flash_mtp.py"},
      {"mimo_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mimo_mtp.py"},
      {"mimo_v2_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mimo_v2_mtp.py"},
      {"mimo_v2_nextn",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/mimo_v2_nextn.py"},
      {"minicpm_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/minicpm_eagle.py"},
      {"mistral_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mistral_eagle.py"},
      {"mistral_large_3_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/mistral_large_3_eagle.py"},
      {"nemotron_h_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/nemotron_h_mtp.py"},
      {"nemotron_parse3_5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/nemotron_parse3_5_mtp.py"},
      {"openpangu_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/openpangu_mtp.py"},
      {"qwen2_eagle",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/qwen2_eagle.py"},
      {"qwen3_5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_5_mtp.py"},
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
      {"qwen3_xpress",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/qwen3_xpress.py"},
      {"qwen4_exp_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "sglang python/sglang/srt/models/qwen4_exp_mtp.py"},
      {"step3p5_mtp",
       "an engine draft/MTP module name, not a config.json model_type: its config carries the "
       "target model_type (or a speculators draft format), whose verdict applies",
       "vLLM vllm/model_executor/models/step3p5_mtp.py"},
  };
  return rows;
}

}  // namespace fkv::config_detail
