// Tests of the architecture registry's coverage: redundant keys that agree, the config
// classes' defaults, no bypass through the explicit schema, and a verdict for every
// model_type the engines serve (data/model_types.json).
#include "config_test_util.hpp"

// ------------------------------------------------------------------------------------------------
// Issue 24: redundant keys, class defaults, no bypass, coverage of the engines' model types.

TEST_CASE("redundant layout keys: accepted when they agree, refused naming both when not",
          "[config][registry][redundant]") {
  // rotary_dim 32 beside partial_rotary_factor 0.5 on head_dim 64 (Phi reads only the factor).
  const std::string phi =
      R"({"model_type": "phi", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 32,
          "partial_rotary_factor": 0.5, )";
  auto ok = parse(phi + R"("rotary_dim": 32})");
  CHECK(ok.layers[0].rotary_dim.value == 32);
  CHECK_THAT(ok.layers[0].rotary_dim.source, Contains("agrees: rotary_dim = 32"));
  CHECK_THROWS_AS(parse(phi + R"("rotary_dim": 48})"), fkv::UnsupportedError);
  CHECK_THROWS_WITH(parse(phi + R"("rotary_dim": 48})"),
                    Contains("'rotary_dim'") && Contains("48") && Contains("contradicts") &&
                        Contains("rotary_dim 32") && Contains("partial_rotary_factor"));
  // sliding_window_pattern "LLLG" beside layer_types that say the same (Gemma 2 reads layer_types).
  const std::string g2 =
      R"({"model_type": "gemma2", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 4,
          "head_dim": 128, "sliding_window": 64,
          "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], )";
  auto g = parse(g2 + R"("sliding_window_pattern": "LLLG"})");
  CHECK(g.layers[3].kind.value == LayerKind::FullAttention);
  CHECK_THAT(g.layers[0].kind.source, Contains("agrees: sliding_window_pattern = \"LLLG\""));
  CHECK_NOTHROW(parse(g2 + R"("sliding_window_pattern": 4})"));
  CHECK_THROWS_WITH(parse(g2 + R"("sliding_window_pattern": "LG"})"),
                    Contains("'sliding_window_pattern'") && Contains("contradicts") &&
                        Contains("layer 1 is sliding_attention"));
  // rotary_pct 1.0 on a family that rotates the whole head.
  const std::string llama =
      R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4, )";
  auto l = parse(llama + R"("rotary_pct": 1.0})");
  CHECK_THAT(l.layers[0].rotary_dim.source, Contains("agrees: rotary_pct = 1.0"));
  CHECK_THROWS_WITH(parse(llama + R"("rotary_pct": 0.5})"),
                    Contains("'rotary_pct'") && Contains("0.5") && Contains("rotary_dim 128"));
  // A head_dim that restates hidden_size / heads, on a family that derives it.
  auto vl = parse(R"({"model_type": "qwen2_vl", "num_hidden_layers": 1, "hidden_size": 3584,
                      "num_attention_heads": 28, "num_key_value_heads": 4, "head_dim": 128})");
  CHECK_THAT(vl.layers[0].head_dim.source, Contains("agrees: head_dim = 128"));
  // A key whose meaning the entry cannot check still refuses, naming it.
  CHECK_THROWS_WITH(parse(llama + R"("global_head_dim": 256})"),
                    Contains("'global_head_dim'") && Contains("cannot tell what it means"));
}

TEST_CASE("omitted fields take the config class's defaults (generated from transformers)",
          "[config][class-defaults]") {
  // A gpt-oss EAGLE-3-style layer config without RoPE keys: GptOssConfig's yarn, not 10000.
  auto c = parse(R"({"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64})");
  for (const auto* L : c.attention_layers()) {
    CHECK(L->rope.value.theta == 150000.0);
    CHECK(L->rope.value.scaling_type == "yarn");
    CHECK(L->rope.value.scaling["factor"].get<double>() == 32.0);
    CHECK(L->rope.value.scaling["original_max_position_embeddings"].get<int>() == 4096);
    CHECK_THAT(L->rope.source, Contains("class default (GptOssConfig)"));
  }
  // GptOssConfig computes alternating layer_types (sliding first) with its sliding_window 128.
  CHECK(c.layers[0].kind.value == LayerKind::SlidingAttention);
  CHECK(c.layers[1].kind.value == LayerKind::FullAttention);
  CHECK(c.layers[0].sliding_window == 128);
  CHECK_THAT(c.layers[0].kind.source, Contains("class default (GptOssConfig)"));
  CHECK(c.eps.value == 1e-5);
  CHECK_THAT(c.eps.source, Contains("class default (GptOssConfig).rms_norm_eps"));
  CHECK(c.max_position_embeddings.value == 131072);
  // The same from a file shaped like a gpt-oss EAGLE-3 draft (no RoPE keys at all).
  auto d = load("gpt-oss-eagle3-draft-no-rope.json");
  REQUIRE(d.attention_layers().size() == 1);
  CHECK(d.layers[0].rope.value.theta == 150000.0);
  CHECK(d.layers[0].rope.value.scaling_type == "yarn");
  CHECK(d.layers[0].rope.value.scaling["factor"].get<double>() == 32.0);
  CHECK(d.layers[0].rope.value.scaling["original_max_position_embeddings"].get<int>() == 4096);
  CHECK_THAT(d.layers[0].rope.source,
             Contains("theta: class default (GptOssConfig).rope_parameters.rope_theta"));
  // A file that states any RoPE key keeps its own (no mix with the class's yarn dict).
  auto t = parse(R"({"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                     "rope_theta": 10000})");
  CHECK(t.layers[0].rope.value.theta == 10000.0);
  CHECK(t.layers[0].rope.value.scaling_type == "default");
  // Qwen3Config's head_dim default (128), not hidden_size / heads.
  auto q = parse(R"({"model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 2560,
                     "num_attention_heads": 32, "num_key_value_heads": 8})");
  CHECK(q.layers[0].head_dim.value == 128);
  CHECK(q.layers[0].head_dim.source == "class default (Qwen3Config).head_dim");
  // null is written: the class keeps the None and the reader derives.
  auto n = parse(R"({"model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 2560,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": null})");
  CHECK(n.layers[0].head_dim.value == 80);
}

TEST_CASE("the explicit schema cannot bypass MLA, linear attention, cross-attention, K=V keys",
          "[config][explicit][registry]") {
  const std::string layers =
      R"("fkv": {"layers": [{"num_kv_heads": 4, "head_dim": 64}, {"num_kv_heads": 4, "head_dim": 64}]})";
  for (const char* key : {R"("kv_lora_rank": 512)", R"("qk_rope_head_dim": 64)",
                          R"("linear_attn_config": {"kda_layers": [1]})",
                          R"("linear_num_key_heads": 16)", R"("cross_attention_layers": [1])",
                          R"("attention_k_eq_v": true)", R"("num_kv_shared_layers": 1)"}) {
    const std::string text = R"({"model_type": "mystery_lm", "num_hidden_layers": 2, )" +
                             std::string(key) + ", " + layers + "}";
    const std::string name = std::string(key).substr(1, std::string(key).find('"', 1) - 1);
    INFO(text);
    CHECK_THROWS_AS(parse(text), fkv::UnsupportedError);
    CHECK_THROWS_WITH(parse(text), Contains("'" + name + "'") && Contains("explicit schema"));
  }
  // A refused model_type stays refused beside the explicit schema.
  CHECK_THROWS_AS(parse(R"({"model_type": "mamba", "num_hidden_layers": 2, )" + layers + "}"),
                  fkv::UnsupportedError);
  // Plain per-head layers of an unknown model_type are what the schema is for.
  CHECK_NOTHROW(parse(R"({"model_type": "mystery_lm", "num_hidden_layers": 2, )" + layers + "}"));
}

TEST_CASE("a refused model_type names its reason in at most three lines", "[config][registry]") {
  try {
    parse(R"({"model_type": "mamba", "num_hidden_layers": 2, "hidden_size": 512})");
    FAIL("expected an UnsupportedError");
  } catch (const fkv::UnsupportedError& e) {
    const std::string w = e.what();
    INFO(w);
    CHECK_THAT(w, Contains("\"mamba\"") && Contains("not supported") &&
                      Contains("Nearest supported model_types") &&
                      Contains("docs/config-rules.md"));
    CHECK(std::count(w.begin(), w.end(), '\n') <= 2);
    CHECK_THAT(w, !Contains("explicit schema"));
  }
}

TEST_CASE("real configs of model types added in issue 24", "[config][data]") {
  auto vl = load("qwen3-vl-8b-instruct.json");
  CHECK(vl.family == "Qwen3-VL / Qwen3-Omni (text)");
  CHECK(vl.attention_layers().size() == 36);
  check_uniform(vl, {8, 128, true, KNormKind::Rms});
  CHECK(vl.layers[0].rope.value.theta == 5000000.0);
  auto neox = load("pythia-14m-gpt-neox.json");
  CHECK(neox.family == "GPT-NeoX");
  check_uniform(neox, {4, 32, true, KNormKind::None});
  CHECK(neox.layers[0].rotary_dim.value == 8);
  CHECK_THAT(neox.layers[0].rotary_dim.source, Contains("rotary_pct"));
  // Falcon: multi_query without new_decoder_architecture is one KV head, whatever num_kv_heads
  // says; alibi means no RoPE.
  auto f7 = load("falcon-7b.json");
  CHECK(f7.family == "Falcon");
  check_uniform(f7, {1, 64, true, KNormKind::None});
  CHECK(f7.layers[0].rotary_dim.value == 64);
  CHECK_THAT(f7.layers[0].num_kv_heads.source, Contains("multi_query = true"));
  auto rw = load("falcon-rw-1b.json");
  check_uniform(rw, {32, 64, true, KNormKind::None});
  CHECK(rw.layers[0].rotary_dim.value == 0);
  CHECK_THAT(rw.layers[0].rotary_dim.source, Contains("alibi = true"));
  auto dots = load("dots-ocr.json");
  CHECK(dots.family == "Qwen2 / Qwen2.5");
  check_uniform(dots, {2, 128, true, KNormKind::None});
  auto molmo2 = load("molmo2-er-4b.json");
  CHECK(molmo2.family == "Molmo 2 (text)");
  check_uniform(molmo2, {8, 128, true, KNormKind::Rms});
  CHECK(molmo2.attention_layers().size() == 36);
  auto paddle = load("paddleocr-vl-1.5.json");
  CHECK(paddle.family == "PaddleOCR-VL (text)");
  check_uniform(paddle, {2, 128, true, KNormKind::None});
  CHECK(paddle.layers[0].rope.value.theta == 500000.0);
}

TEST_CASE("multimodal wrappers: the text config decides, the wrapper's default when unnamed",
          "[config][registry][nested]") {
  // llava's text_config without model_type: LlavaConfig defaults it to llama.
  auto c = parse(R"({"model_type": "llava", "text_config": {"num_hidden_layers": 2,
                     "hidden_size": 512, "num_attention_heads": 4}})");
  CHECK(c.family == "Llama");
  CHECK(c.model_type == "llama");
  auto m = parse(R"({"model_type": "mistral3", "text_config": {"model_type": "mistral",
                     "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
                     "sliding_window": null}})");
  CHECK(m.family == "Mistral");
  CHECK_THROWS_AS(parse(R"({"model_type": "llava", "num_hidden_layers": 2})"),
                  fkv::UnsupportedError);
}

TEST_CASE("every model_type the engines serve has a verdict", "[config][registry][coverage]") {
  std::ifstream in(std::string(FKV_TEST_DATA_DIR) + "/../../data/model_types.json");
  REQUIRE(in.good());
  const auto doc = nlohmann::json::parse(in);
  CHECK(doc["versions"].contains("transformers"));
  CHECK(doc["versions"].contains("vllm"));
  CHECK(doc["versions"].contains("sglang"));
  std::map<std::string, const fkv::Architecture*> verdict;
  for (const auto& a : fkv::architectures())
    for (const auto& t : a.model_types) verdict[t] = &a;
  std::map<std::string, std::string> wrapper;
  for (const auto& e : doc["model_types"])
    if (e.contains("text_model_type")) wrapper[e["model_type"]] = e["text_model_type"];
  int supported = 0, refused = 0, wrappers = 0;
  for (const auto& e : doc["model_types"]) {
    const std::string t = e["model_type"];
    INFO(t);
    if (verdict.count(t)) {
      (verdict[t]->refused() ? refused : supported)++;
      CHECK_FALSE(verdict[t]->citation.empty());
      continue;
    }
    // A wrapper: its text config's model_type decides, and that one has a verdict.
    REQUIRE(wrapper.count(t));
    CHECK(verdict.count(wrapper[t]));
    ++wrappers;
  }
  WARN("engine model types: " << doc["model_types"].size() << "; supported " << supported
                              << ", refused " << refused << ", wrappers " << wrappers);
  CHECK(supported + refused + wrappers == (int)doc["model_types"].size());
}

TEST_CASE("model types read from their modeling files: supported ones and the real refusals",
          "[config][registry]") {
  // Formerly "not yet checked": now a supported family each.
  auto cg = parse(R"({"model_type": "codegen", "n_layer": 2, "n_embd": 4096, "n_head": 16,
                      "rotary_dim": 64, "n_positions": 2048})");
  CHECK(cg.family == "GPT-J");
  check_uniform(cg, {16, 256, false, KNormKind::None});
  CHECK(cg.layers[0].rotary_dim.value == 64);
  auto nj = parse(R"({"model_type": "gpt_neox_japanese", "num_hidden_layers": 2,
                      "hidden_size": 2560, "num_attention_heads": 32, "rotary_pct": 1.0})");
  CHECK(nj.family == "GPT-NeoX Japanese");
  check_uniform(nj, {32, 80, true, KNormKind::None});
  auto dg = parse(R"({"model_type": "doge", "num_hidden_layers": 2, "hidden_size": 1024,
                      "num_attention_heads": 8, "num_key_value_heads": 4, "sliding_window": 2048})");
  CHECK(dg.family == "Doge");
  check_uniform(dg, {4, 128, true, KNormKind::Rms});
  CHECK(indices_where(dg, LayerKind::SlidingAttention) == std::vector<int>{0, 1});
  auto gv = parse(R"({"model_type": "glm4v_text", "num_hidden_layers": 2, "hidden_size": 4096,
                      "num_attention_heads": 32, "num_key_value_heads": 2,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                          "partial_rotary_factor": 0.5, "mrope_section": [8, 12, 12]}})");
  CHECK(gv.family == "GLM-4V / GLM-4.1V (text)");
  check_uniform(gv, {2, 128, false, KNormKind::None});
  CHECK(gv.layers[0].rotary_dim.value == 64);
  auto gm = parse(R"({"model_type": "glm4v_moe_text", "num_hidden_layers": 2, "hidden_size": 4096,
                      "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128})");
  CHECK(gm.family == "GLM-4.5V (text)");
  check_uniform(gm, {8, 128, true, KNormKind::None});
  CHECK(gm.layers[0].rotary_dim.value == 64);  // Glm4vMoeTextConfig partial_rotary_factor 0.5
  for (const char* t : {"orion", "minicpm", "deepseek", "xverse_moe", "xverse", "solar"}) {
    INFO(t);
    auto c = parse(std::string(R"({"model_type": ")") + t +
                   R"(", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8})");
    const std::string type = t;
    CHECK(c.family == (type == "xverse" ? "XVERSE"
                       : type == "solar"
                           ? "Llama-like"
                           : "Llama-like, head_dim derived (Orion, MiniCPM, DeepSeek MoE)"));
    check_uniform(c, {8, 128, true, KNormKind::None});
  }
  auto go = parse(R"({"model_type": "glm_ocr_text", "num_hidden_layers": 2, "hidden_size": 1536,
                      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128})");
  CHECK(go.family == "GLM-OCR (text)");
  check_uniform(go, {8, 128, false, KNormKind::None});
  CHECK(go.layers[0].rotary_dim.value == 128);  // GlmOcrTextConfig: no partial_rotary_factor
  // Flint / Lara Mini: RMS K norm; RoPE on sliding layers only; layer_types required.
  auto fl = parse(R"({"model_type": "flint", "num_hidden_layers": 3, "hidden_size": 2048,
                      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                      "sliding_window": 513,
                      "layer_types": ["full_attention", "sliding_attention", "full_attention"]})");
  CHECK(fl.family == "RoPE on sliding layers only (Flint, Lara Mini)");
  check_uniform(fl, {4, 128, true, KNormKind::Rms});
  CHECK(fl.layers[0].rotary_dim.value == 0);
  CHECK(fl.layers[1].rotary_dim.value == 128);
  auto lm = parse(R"({"model_type": "lara_mini", "num_hidden_layers": 3, "hidden_size": 1024,
                      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
                      "sliding_window": 512, "linear_num_key_heads": 8, "linear_num_value_heads": 16,
                      "layer_types": ["linear_attention", "sliding_attention", "full_attention"]})");
  CHECK(lm.attention_layers().size() == 2);
  CHECK(lm.layers[1].rotary_dim.value == 128);
  CHECK(lm.layers[2].rotary_dim.value == 0);
  CHECK_THROWS_WITH(parse(R"({"model_type": "flint", "num_hidden_layers": 2, "hidden_size": 2048,
                              "num_attention_heads": 32, "num_key_value_heads": 4})"),
                    Contains("layer_types"));
  auto bl = parse(R"({"model_type": "bailing_moe", "num_hidden_layers": 2, "hidden_size": 2048,
                      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128})");
  CHECK(bl.family == "Llama-like");
  check_uniform(bl, {4, 128, true, KNormKind::None});
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "bailing_moe", "num_hidden_layers": 2, "hidden_size": 2048,
                              "num_attention_heads": 16, "num_key_value_heads": 4, "use_qk_norm": true})"),
      Contains("use_qk_norm"));
  auto ml = parse(R"({"model_type": "mellum", "num_hidden_layers": 2, "hidden_size": 2304,
                      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128})");
  CHECK(ml.family == "Mellum");
  check_uniform(ml, {4, 128, true, KNormKind::Rms});
  auto gd = parse(R"({"model_type": "granite_docling_text", "num_hidden_layers": 2,
                      "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4})");
  CHECK(gd.family == "Granite");
  check_uniform(gd, {4, 64, true, KNormKind::None});
  auto sv = parse(R"({"model_type": "sarvam_moe", "num_hidden_layers": 2, "hidden_size": 4096,
                      "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 64})");
  CHECK(sv.family == "GLM-4.5 (MoE)");
  check_uniform(sv, {4, 64, true, KNormKind::Rms});  // SarvamMoEConfig: use_qk_norm True
  CHECK(sv.layers[0].rotary_dim.value == 64);        // partial_rotary_factor 1.0
  auto cs =
      parse(R"({"model_type": "cosmos3_edge_text", "num_hidden_layers": 2, "hidden_size": 2048,
                      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 100000000.0,
                                          "mrope_section": [24, 20, 20]}})");
  CHECK(cs.family == "Llama-like");
  check_uniform(cs, {8, 128, true, KNormKind::None});
  CHECK(cs.layers[0].rotary_dim.value == 128);
  // glmasr: the nested text_config decides when it names its model_type.
  auto ga = parse(R"({"model_type": "glmasr", "text_config": {"model_type": "llama",
                      "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 16,
                      "num_key_value_heads": 4}})");
  CHECK(ga.family == "Llama");
  check_uniform(ga, {4, 128, true, KNormKind::None});
  auto mg = parse(R"({"model_type": "muse_glimmer_assistant", "num_hidden_layers": 2,
                      "hidden_size": 6656, "num_attention_heads": 32, "num_key_value_heads": 8,
                      "head_dim": 128})");
  CHECK(mg.family == "Muse Glimmer assistant (draft)");
  check_uniform(mg, {8, 128, true, KNormKind::Rms});
  CHECK(indices_where(mg, LayerKind::SlidingAttention) == std::vector<int>{0, 1});  // class default
  // Formerly "not yet checked": refused, with the reason read in the modeling file.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"chameleon", "per-head LayerNorm"},
      {"nanochat", "K norm after RoPE"},
      {"falcon_h1", "key_multiplier"},
      {"cohere2_moe", "force_rope"},
      {"granitemoehybrid", "position_embedding_type"},
      {"granitemoe_swa", "layer_rope_theta"},
      {"bamba", "attn_layer_indices"},
      {"dbrx", "attn_config"},
      {"hunyuan_vl_text", "K norm after RoPE"},
      {"dory", "L2 norm without weight"},
      {"nanbeige", "num_loops"},
      {"torch_native_llama", "engine module name"},
      {"mixtral_quant", "engine module name"},
      {"llama_embedding", "engine module name"},
      {"gemma3_causal", "engine module name"},
      {"pixtral", "vision encoder"},
      {"mimo_v2_flash", "attention_value_scale"},
      {"qwen", "use_dynamic_ntk"},
      {"qwen2_5_omni", "thinker_config.text_config"},
      {"qwen3_omni_moe", "thinker_config.text_config"},
      {"step3p5", "partial_rotary_factors"},
      {"zaya", "per KV head"},
      {"muse_glimmer_text", "without weight"},
      {"muse_spark_text", "without weight"},
      {"embedding_gemma2", "bidirectional"},
      {"deepseek_v4", "K and V are one tensor"},
      {"cohere_compass_text", "rope_parameters entry is null"},
      {"beam", "rope_parameters entry is null"},
      {"moshi", "depth_decoder_config"},
      {"modernbert-decoder", "global_rope_theta"},
      {"qwen4_exp_text", "indexer"},
      {"minimax_m3_vl_text", "index-key cache"},
      {"hrm_text", "cycle_offset"},
      {"step3_text", "one KV head"},
      {"iquest_loopcoder", "loop_num"},
      {"zamba2", "hybrid_layer_ids"},
      {"glmasr", "audio wrapper"},
      {"unlimited_ocr_text", "prefill token"},
      {"interns1_pro", "FoPE"},
      {"k2_horizon", "MoVA"},
      {"inkling", "short convolution"},
      {"gemma4_assistant", "KV-shared"},
      {"moss_vl", "cross-attention"},
      {"moondream3", "tau"},
      {"diffusion_gemma_text", "v_norm"},
      {"domyn_edge", "head_sizes"},
      {"iquest_q1", "swa_rope_theta"},
      {"plamo3", "rope_local_theta"},
      {"lfm3", "could not be read"},
      {"grok", "engine module name"},
      {"llava_onevision2", "engine module name"},
  };
  for (const auto& [t, why] : refused) {
    INFO(t);
    const std::string text = R"({"model_type": ")" + t + R"(", "num_hidden_layers": 2})";
    CHECK_THROWS_AS(parse(text), fkv::UnsupportedError);
    CHECK_THROWS_WITH(parse(text), Contains(why) && !Contains("not yet checked"));
  }
}

TEST_CASE("rotary fraction and RoPE per layer type: Laguna and RNJ-1", "[config][registry]") {
  // Laguna without RoPE keys: LagunaConfig's per-type defaults (full 500000 / 0.5, sliding
  // 10000 / 1.0), layer_types as written.
  const std::string layers = R"("num_hidden_layers": 3, "hidden_size": 2048,
      "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 512,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention"])";
  auto lg = parse(R"({"model_type": "laguna", )" + layers + "}");
  CHECK(lg.family == "Laguna");
  check_uniform(lg, {8, 128, true, KNormKind::Rms});
  CHECK(lg.layers[0].rotary_dim.value == 64);
  CHECK(lg.layers[1].rotary_dim.value == 128);
  CHECK(lg.layers[0].rope.value.theta == 500000.0);
  CHECK(lg.layers[1].rope.value.theta == 10000.0);
  CHECK_THAT(lg.layers[0].rotary_dim.source, Contains("LagunaConfig"));
  CHECK(lg.layers[1].sliding_window == 512);
  // The file's own per-type factors; a type without one rotates the whole head.
  auto lf = parse(R"({"model_type": "laguna", )" + layers + R"(, "rope_parameters": {
      "full_attention": {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
      "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}})");
  CHECK(lf.layers[0].rotary_dim.value == 32);
  CHECK(lf.layers[2].rotary_dim.value == 128);
  CHECK(lf.layers[0].rope.value.theta == 1000000.0);
  // A top-level partial_rotary_factor is not read by LagunaRotaryEmbedding: kept when it agrees
  // with every rotating layer, refused when it contradicts one.
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "laguna", )" + layers + R"(, "partial_rotary_factor": 0.5})"),
      Contains("partial_rotary_factor") && Contains("contradicts") && Contains("layer 1"));
  // RNJ-1: chunked_attention layers take rope_parameters["chunked_attention"].
  const std::string rnj = R"({"model_type": "rnj1", "num_hidden_layers": 2, "hidden_size": 2560,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 512,
      "layer_types": ["chunked_attention", "full_attention"],
      "rope_parameters": {"chunked_attention": {"rope_type": "default", "rope_theta": 10000.0},
                          "full_attention": {"rope_type": "yarn", "rope_theta": 1000000.0,
                                             "factor": 8.0, "original_max_position_embeddings": 8192}}})";
  auto rj = parse(rnj);
  CHECK(rj.family == "RNJ-1");
  check_uniform(rj, {4, 256, true, KNormKind::RmsOnePlus});
  CHECK(indices_where(rj, LayerKind::SlidingAttention) == std::vector<int>{0});
  CHECK(rj.layers[0].rope.value.theta == 10000.0);
  CHECK(rj.layers[0].rope.value.scaling_type == "default");
  CHECK_THAT(rj.layers[0].rope.source, Contains("rope_parameters.chunked_attention"));
  CHECK(rj.layers[1].rope.value.scaling_type == "yarn");
  CHECK(rj.layers[1].rotary_dim.value == 256);
  // vLLM indexes config.layer_types: without it the engines would not run the model.
  CHECK_THROWS_WITH(parse(R"({"model_type": "rnj1", "num_hidden_layers": 2, "hidden_size": 2560,
                              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256})"),
                    Contains("layer_types"));
}

TEST_CASE("issue 24's last model types: aliases and rules read in their modeling files",
          "[config][registry]") {
  const std::string body = R"("num_hidden_layers": 2, "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128)";
  const std::vector<std::pair<std::string, std::string>> aliases = {
      {"aria_text", "Llama-like"},
      {"openpangu_vl", "Llama-like"},
      {"granite4_vision_text", "Granite"},
      {"dots_ocr", "Qwen2 / Qwen2.5"},
      {"keye", "Qwen3"},
      {"sdar", "Qwen3"},
      {"sdar_moe", "Qwen3"},
      {"param2moe", "Qwen3"},
      {"phi4_multimodal", "Phi-3"},
      {"ernie4_5_vl_moe_text", "ERNIE 4.5 MoE"},
  };
  for (const auto& [t, family] : aliases) {
    INFO(t);
    auto c = parse(R"({"model_type": ")" + t + R"(", )" + body + "}");
    CHECK(c.family == family);
  }
  // ERNIE 4.5-VL text: interleaved pairs, class default theta 500000.
  auto ev = parse(R"({"model_type": "ernie4_5_vl_moe_text", )" + body + "}");
  CHECK_FALSE(ev.layers[0].is_neox_style.value);
  CHECK(ev.layers[0].rope.value.theta == 500000.0);
  // Phi-3 slides every layer when sliding_window is set (Phi3Attention).
  auto p3 = parse(R"({"model_type": "phi3", "sliding_window": 2047, )" + body + "}");
  CHECK(indices_where(p3, LayerKind::SlidingAttention) == std::vector<int>{0, 1});
  // Param2: a partial rotary factor other than 1 is refused (vLLM passes it as the head size).
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "param2moe", "partial_rotary_factor": 0.5, )" + body + "}"),
      Contains("partial_rotary_factor") && Contains("contradicts"));
  // Falcon: new_decoder_architecture reads num_kv_heads; without multi_query, all heads.
  auto f40 = parse(R"({"model_type": "falcon", "num_hidden_layers": 2, "hidden_size": 8192,
      "num_attention_heads": 128, "num_kv_heads": 8, "new_decoder_architecture": true})");
  check_uniform(f40, {8, 64, true, KNormKind::None});
  auto fd = parse(R"({"model_type": "falcon", "num_hidden_layers": 2, "hidden_size": 4544,
      "num_attention_heads": 71})");
  CHECK(fd.layers[0].num_kv_heads.value == 1);  // FalconConfig: multi_query defaults to true
  CHECK_THAT(fd.layers[0].num_kv_heads.source, Contains("FalconConfig"));
  // Molmo: attention_layer_norm normalizes K across heads.
  const std::string molmo = R"({"model_type": "molmo", "num_hidden_layers": 2, "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4)";
  auto m1 = parse(molmo + "}");
  check_uniform(m1, {4, 128, true, KNormKind::None});
  auto m1n = parse(molmo + R"(, "attention_layer_norm": true})");
  CHECK_THAT(m1n.layers[0].unsupported, Contains("across all KV heads"));
  CHECK_THROWS_WITH(parse(molmo + R"(, "clip_qkv": 8.0})"), Contains("clip_qkv"));
  // Molmo 2: qk_norm_type decides; "olmo" is across heads; the key is required.
  const std::string molmo2 = R"({"model_type": "molmo2_text", "num_hidden_layers": 2,
      "hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128)";
  auto m2o = parse(molmo2 + R"(, "qk_norm_type": "olmo"})");
  CHECK_THAT(m2o.layers[0].unsupported, Contains("one RMSNorm over all KV heads"));
  CHECK_THROWS_WITH(parse(molmo2 + "}"), Contains("qk_norm_type") && Contains("missing"));
  // Nemotron-NAS: no_op layers have no KV; KV heads from n_heads_in_group.
  auto nas = parse(R"({"model_type": "nemotron-nas", "num_hidden_layers": 3, "hidden_size": 8192,
      "num_attention_heads": 64, "num_key_value_heads": null,
      "block_configs": [{"attention": {"n_heads_in_group": 8, "no_op": false}},
                        {"attention": {"n_heads_in_group": null, "no_op": true}},
                        {"attention": {"n_heads_in_group": 4, "no_op": false}}]})");
  CHECK(nas.family == "Nemotron-NAS (DeciLM)");
  CHECK(nas.attention_layers().size() == 2);
  CHECK(nas.layers[0].num_kv_heads.value == 8);
  CHECK(nas.layers[2].num_kv_heads.value == 16);
  // Spark 2.5: per-type rotary fraction and theta; layer_types required.
  auto sp = parse(R"({"model_type": "spark2_5", "num_hidden_layers": 2, "hidden_size": 2048,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512,
      "layer_types": ["sliding_attention", "full_attention"],
      "rope_parameters": {"sliding_attention": {"rope_theta": 10000.0, "partial_rotary_factor": 1.0},
                          "full_attention": {"rope_theta": 5000000.0, "partial_rotary_factor": 0.25}}})");
  CHECK(sp.layers[0].rotary_dim.value == 256);
  CHECK(sp.layers[1].rotary_dim.value == 64);
  CHECK(sp.layers[1].rope.value.theta == 5000000.0);
  CHECK_THROWS_WITH(parse(R"({"model_type": "spark2_5", )" + body + "}"), Contains("layer_types"));
  // openPangu: the sink and sliding variants select other attentions.
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "openpangu_vl", "param_sink_number": 128, )" + body + "}"),
      Contains("param_sink_number"));
}
