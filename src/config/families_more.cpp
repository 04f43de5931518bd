// config: the registry's supported families, part 2: the families added when every model type
// the engines serve got a verdict (Qwen3-VL ... RNJ-1), each read in its modeling file. Part 1:
// families.cpp.
#include "internal.hpp"

namespace fkv::config_detail {

void add_more_families(std::vector<Architecture>& v) {
  using RS = RopeStyle;
  using KN = KNormRule;
  using NR = NopeRule;
  using KD = KindDefault;
  auto add = [&](Architecture a) { v.push_back(std::move(a)); };

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
}

}  // namespace fkv::config_detail
