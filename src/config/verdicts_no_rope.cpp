// config: refusals of model_types whose attention has no RoPE to fuse: encoder-decoder and
// cross-attention models (K/V come from another sequence), absolute / learned positions or ALiBi,
// encoder, audio and vision models, and SSM / recurrent layers. Each cites the modeling file it
// was read from. The mechanisms of RoPE attention the fused path cannot produce: verdicts.cpp,
// which merges every refusal table into the registry.
#include "internal.hpp"

namespace fkv::config_detail {

const std::vector<RefusalRow>& no_rope_refusals() {
  // Immortal, like every table of this module.
  static const auto& rows = *new std::vector<RefusalRow>{
      {"apertus1p5_text", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/apertus1p5/modular_apertus1p5.py"},
      {"audioflamingo3", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/audioflamingo3/modular_audioflamingo3.py"},
      {"bart",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/bart/modeling_bart.py"},
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
      {"clip", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/clip/modeling_clip.py"},
      {"cohere_asr",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/cohere_asr/modular_cohere_asr.py"},
      {"cosmos3", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "vLLM vllm/model_executor/models/cosmos3.py"},
      {"cpmant", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/cpmant/modeling_cpmant.py"},
      {"ctrl", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/ctrl/modeling_ctrl.py"},
      {"data2vec-text", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "no modeling file in the engines read (transformers:causal-lm)"},
      {"dots_vlm", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "sglang python/sglang/srt/models/dots_vlm.py"},
      {"electra",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/electra/modeling_electra.py"},
      {"ernie",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/ernie/modular_ernie.py"},
      {"evolla",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/evolla/modular_evolla.py"},
      {"falcon_mamba", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/falcon_mamba/modular_falcon_mamba.py"},
      {"git", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/git/modeling_git.py"},
      {"gpt-sw3", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt2/modeling_gpt2.py"},
      {"gpt2", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt2/modeling_gpt2.py"},
      {"gpt_bigcode", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/gpt_bigcode/modeling_gpt_bigcode.py"},
      {"granite_speech",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/granite_speech/modeling_granite_speech.py"},
      {"granite_speech_plus",
       "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/granite_speech_plus/modular_granite_speech_plus.py"},
      {"granitemoeshared", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/granitemoeshared/modular_granitemoeshared.py"},
      {"idefics",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/idefics/modeling_idefics.py"},
      {"inkling2_loop_text", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/inkling2_loop/modular_inkling2_loop.py"},
      {"inkling_text", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/inkling/modular_inkling.py"},
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
      {"mllama_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/mllama/modeling_mllama.py"},
      {"mpt", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/mpt/modeling_mpt.py"},
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
      {"nemotron_parse",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "vLLM vllm/model_executor/models/nemotron_parse.py"},
      {"openai-gpt", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/openai/modeling_openai.py"},
      {"opt", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/opt/modeling_opt.py"},
      {"pegasus",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pegasus/modeling_pegasus.py"},
      {"pi0", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/pi0/modular_pi0.py"},
      {"pix2struct_text_model",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pix2struct/modeling_pix2struct.py"},
      {"plbart",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/plbart/modular_plbart.py"},
      {"pp_formulanet_text",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/pp_formulanet/modular_pp_formulanet.py"},
      {"prophetnet",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/prophetnet/modeling_prophetnet.py"},
      {"qwen2_audio", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/qwen2_audio/modeling_qwen2_audio.py"},
      {"qwen3_asr", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/qwen3_asr/modular_qwen3_asr.py"},
      {"reformer", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/reformer/modeling_reformer.py"},
      {"rembert",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/rembert/modeling_rembert.py"},
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
      {"rwkv", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/rwkv/modeling_rwkv.py"},
      {"solar_open", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/solar_open/modular_solar_open.py"},
      {"t5gemma2_decoder",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/t5gemma2/modular_t5gemma2.py"},
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
      {"vaultgemma", "no RoPE attention in its modeling code (encoder, audio or vision model)",
       "transformers src/transformers/models/vaultgemma/modular_vaultgemma.py"},
      {"voxtral", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/voxtral/modular_voxtral.py"},
      {"whisper",
       "cross-attention (encoder-decoder or cross-attention layers): K/V come from another "
       "sequence",
       "transformers src/transformers/models/whisper/modeling_whisper.py"},
      {"xglm", "no RoPE: absolute / learned positions or ALiBi",
       "transformers src/transformers/models/xglm/modeling_xglm.py"},
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
      {"zamba", "no attention with RoPE (SSM / recurrent layers)",
       "transformers src/transformers/models/zamba/modeling_zamba.py"},
  };
  return rows;
}

}  // namespace fkv::config_detail
