// Tests of the config module (docs/config-rules.md): every shared config in tests/data with its
// expected facts written down, and the architecture rules on synthetic configs. Bad input:
// test_config_errors.cpp; the registry: test_registry.cpp and test_registry_coverage.cpp.
#include "config_test_util.hpp"

// ------------------------------------------------------------------------------------------------
// Shared configs: expected facts per file.

TEST_CASE("every shared config loads or is reported, never crashes", "[config][data]") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(FKV_TEST_DATA_DIR)) {
    if (e.path().extension() != ".json") continue;
    INFO(e.path());
    ModelConfig c;
    REQUIRE_NOTHROW(c = ModelConfig::from_file(e.path()));
    CHECK(c.path == e.path().string());
    CHECK((int)c.layers.size() == c.num_hidden_layers.value);
    CHECK_FALSE(c.attention_layers().empty());
    for (size_t i = 0; i < c.layers.size(); ++i) CHECK(c.layers[i].index == (int)i);
    ++n;
  }
  CHECK(n >= 32);
}

TEST_CASE("cohere-command-r: GPT-J interleaved by architecture, MHA", "[config][data]") {
  auto c = load("cohere-command-r-v01.json");
  CHECK(c.model_type == "cohere");
  CHECK(c.architecture == "CohereForCausalLM");
  CHECK(c.num_hidden_layers.value == 40);
  CHECK(c.attention_layers().size() == 40);
  check_uniform(c, {64, 128, false, KNormKind::None});
  const auto& l = c.layers[0];
  CHECK(l.rotary_dim.value == 128);
  CHECK_THAT(l.is_neox_style.source,
             Contains("architecture rule: cohere") && Contains("modeling_cohere.py"));
  CHECK(l.head_dim.source == "derived: hidden_size / num_attention_heads = 8192/64");
  CHECK(l.rope.value.theta == 8000000.0);
  CHECK(l.rope.value.scaling_type == "default");
  CHECK(c.eps.value == 1e-5);
  CHECK(c.eps.source == "layer_norm_eps");
  CHECK(c.dtype.value == "float16");
  CHECK(l.unsupported.empty());
}

TEST_CASE("deepseek-v3 and kimi-k2: MLA is unsupported, naming each layer", "[config][data]") {
  for (const char* f : {"deepseek-v3.json", "kimi-k2.json"}) {
    INFO(f);
    auto c = load(f);
    CHECK(c.num_hidden_layers.value == 61);
    REQUIRE(c.attention_layers().size() == 61);
    for (const auto* l : c.attention_layers()) {
      CHECK_THAT(l->unsupported, Contains("layer " + std::to_string(l->index) + ":") &&
                                     Contains("MLA") && Contains("kv_lora_rank=512") &&
                                     Contains("qk_rope_head_dim=64"));
      CHECK(l->head_dim.value == 192);  // qk_nope_head_dim 128 + qk_rope_head_dim 64
      CHECK(l->rotary_dim.value == 64);
    }
    CHECK(c.layers[0].rope.value.scaling_type == "yarn");
  }
  CHECK(load("deepseek-v3.json").layers[0].rope.value.scaling["factor"] == 40);
  CHECK(load("kimi-k2.json").layers[0].rope.value.theta == 50000.0);
}

TEST_CASE("dflash qwen3-4b draft: per-head RMS K norm, explicit head_dim", "[config][data]") {
  auto c = load("dflash-qwen3-4b-draft.json");
  CHECK(c.architecture == "DFlashDraftModel");
  CHECK(c.num_hidden_layers.value == 5);
  CHECK(c.attention_layers().size() == 5);
  check_uniform(c, {8, 128, true, KNormKind::Rms});
  const auto& l = c.layers[4];
  CHECK(l.head_dim.source == "head_dim");  // 2560/32 = 80 would be wrong
  CHECK(l.rotary_dim.value == 128);
  CHECK(l.rope.value.theta == 1e6);
  CHECK(l.rope.value.scaling_type == "default");
  CHECK(l.rope.source == "theta: rope_theta; scaling: default (no rope_scaling)");
  CHECK(l.eps.value == 1e-6);
  // architectures[0] DFlash* selects the DFlash draft entry before model_type "qwen3".
  CHECK_THAT(l.k_norm.source, Contains("DFlash draft") && Contains("Qwen3DFlashAttention"));
  CHECK(c.dtype.source == "dtype");
}

TEST_CASE("dflash2 fixture: sliding layers, rope_parameters form", "[config][data]") {
  auto c = load("dflash2-zlab-fixture-draft.json");
  CHECK(indices_where(c, LayerKind::SlidingAttention) == std::vector<int>{0, 1, 2, 3, 4});
  check_uniform(c, {8, 128, true, KNormKind::Rms});
  for (const auto* l : c.attention_layers()) {
    CHECK(l->sliding_window == 2048);
    CHECK(l->rotary_dim.value == 128);
    CHECK(l->rope.value.theta == 500000.0);
    CHECK_THAT(l->rope.source, Contains("rope_parameters.rope_theta"));
    CHECK(l->eps.value == 1e-5);
  }
}

TEST_CASE("eagle3 drafts: llama family, no K norm", "[config][data]") {
  auto a = load("eagle3-llama3.1-8b-draft.json");
  CHECK(a.num_hidden_layers.value == 1);
  check_uniform(a, {8, 128, true, KNormKind::None});
  CHECK(a.layers[0].head_dim.source == "derived: hidden_size / num_attention_heads = 4096/32");
  CHECK(a.layers[0].rope.value.theta == 10000.0);
  CHECK_THAT(a.layers[0].rope.source, Contains("class default (LlamaConfig).rope_theta"));
  CHECK(a.dtype.value == "float16");

  auto b = load("eagle3-qwen3-8b-draft.json");
  CHECK(b.architecture == "LlamaForCausalLMEagle3");
  check_uniform(b, {8, 128, true, KNormKind::None});
  CHECK(b.layers[0].rope.value.theta == 1e6);
}

TEST_CASE("gemma2: implicit alternation, even layers sliding", "[config][data]") {
  auto c = load("gemma2-9b-it.json");
  CHECK(c.num_hidden_layers.value == 42);
  auto sliding = indices_where(c, LayerKind::SlidingAttention);
  REQUIRE(sliding.size() == 21);
  for (int i : sliding) CHECK(i % 2 == 0);
  check_uniform(c, {8, 256, true, KNormKind::None});
  CHECK(c.layers[0].sliding_window == 4096);
  CHECK(c.layers[1].sliding_window == 0);
  CHECK_THAT(c.layers[0].kind.source, Contains("gemma2"));
  CHECK(c.layers[0].head_dim.source == "head_dim");  // 3584/16 = 224 would be wrong
  CHECK(c.layers[0].rope.value == c.layers[1].rope.value);
}

TEST_CASE("gemma3: text_config with class defaults, 5 local : 1 global, scaling on global only",
          "[config][data]") {
  auto c = load("gemma3-4b-it.json");
  CHECK(c.model_type == "gemma3_text");
  CHECK(c.num_hidden_layers.value == 34);
  CHECK(c.num_hidden_layers.source == "text_config.num_hidden_layers");
  CHECK(indices_where(c, LayerKind::FullAttention) == std::vector<int>{5, 11, 17, 23, 29});
  check_uniform(c, {4, 256, true, KNormKind::RmsOnePlus});
  const auto& local = c.layers[0];
  const auto& global = c.layers[5];
  CHECK_THAT(local.head_dim.source, Contains("class default (Gemma3TextConfig)"));
  CHECK(local.sliding_window == 1024);
  CHECK(local.rope.value.theta == 10000.0);
  CHECK(local.rope.value.scaling_type == "default");
  CHECK_THAT(local.rope.source, Contains("rope_local_base_freq") && Contains("global layers only"));
  CHECK(global.rope.value.theta == 1e6);
  CHECK(global.rope.value.scaling_type == "linear");
  CHECK(global.rope.value.scaling["factor"] == 8.0);
  CHECK(global.sliding_window == 0);
  CHECK_FALSE(local.rope.value == global.rope.value);
  CHECK(c.eps.value == 1e-6);
  CHECK(c.dtype.value == "bfloat16");
}

TEST_CASE("glm4-moe (GLM-4.5): neox, partial rotary 0.5, RMS K norm", "[config][data]") {
  auto c = load("glm4-moe-glm-4.5.json");
  CHECK(c.num_hidden_layers.value == 92);
  check_uniform(c, {8, 128, true, KNormKind::Rms});
  CHECK(c.layers[0].rotary_dim.value == 64);
  CHECK(c.layers[0].rotary_dim.source ==
        "derived: int(head_dim * partial_rotary_factor) = int(128*0.5) = 64 (truncated, as "
        "transformers, vLLM and sglang compute it)");
  CHECK_THAT(c.layers[0].is_neox_style.source,
             Contains("glm4_moe") && Contains("modeling_glm4_moe.py"));
  CHECK_THAT(c.layers[0].k_norm.source, Contains("use_qk_norm = true"));
}

TEST_CASE("gpt-oss: layer_types alternation, yarn", "[config][data]") {
  auto c = load("gpt-oss-20b.json");
  CHECK(c.num_hidden_layers.value == 24);
  auto sliding = indices_where(c, LayerKind::SlidingAttention);
  CHECK(sliding.size() == 12);
  CHECK(sliding[0] == 0);
  CHECK(c.layers[1].kind.value == LayerKind::FullAttention);
  check_uniform(c, {8, 64, true, KNormKind::None});
  CHECK(c.layers[0].sliding_window == 128);
  CHECK(c.layers[0].rope.value.scaling_type == "yarn");
  CHECK(c.layers[0].rope.value.theta == 150000.0);
  CHECK(c.layers[0].rope.value.scaling["factor"] == 32.0);
  CHECK(c.dtype.source == "absent");
}

TEST_CASE("gpt-j in gpt_neo format: interleaved, rotary_dim 64 of 256", "[config][data]") {
  auto c = load("gptj-6b-neo-format.json");
  CHECK(c.num_hidden_layers.value == 28);
  CHECK(c.num_hidden_layers.source == "num_layers");
  CHECK(c.num_attention_heads.source == "num_heads");
  check_uniform(c, {16, 256, false, KNormKind::None});
  CHECK(c.layers[0].rotary_dim.value == 64);
  CHECK(c.layers[0].rotary_dim.source == "rotary_dim");
  CHECK_THAT(c.layers[0].is_neox_style.source,
             Contains("architecture rule: gpt_neo -> GPT-J") && Contains("modeling_gptj.py"));
  CHECK(c.layers[0].kind.source == "attention_layers[0] = global");
  CHECK(c.eps.source == "layer_norm_epsilon");
}

TEST_CASE("lfm2.5-vl: nested text_config, conv layers skipped", "[config][data]") {
  auto c = load("lfm2.5-vl-1.6b.json");
  CHECK(c.model_type == "lfm2");
  CHECK(c.num_hidden_layers.value == 16);
  std::vector<int> attn;
  for (const auto* l : c.attention_layers()) attn.push_back(l->index);
  CHECK(attn == std::vector<int>{2, 5, 8, 10, 12, 14});
  check_uniform(c, {8, 64, true, KNormKind::Rms});
  CHECK(c.layers[2].head_dim.source ==
        "derived: text_config.hidden_size / text_config.num_attention_heads = 2048/32");
  CHECK(c.layers[2].num_kv_heads.source == "text_config.num_key_value_heads");
  CHECK(c.layers[2].rope.value.theta == 1e6);
  CHECK(c.layers[2].eps.source == "text_config.norm_eps");
  CHECK(c.layers[0].kind.source == "text_config.layer_types[0] = conv");
  CHECK_FALSE(c.layers[0].is_attention());
}

TEST_CASE("llama3.1-8b: llama3 rope scaling", "[config][data]") {
  auto c = load("llama3.1-8b-instruct.json");
  CHECK(c.num_hidden_layers.value == 32);
  check_uniform(c, {8, 128, true, KNormKind::None});
  const auto& r = c.layers[0].rope.value;
  CHECK(r.theta == 500000.0);
  CHECK(r.scaling_type == "llama3");
  CHECK(r.scaling["factor"] == 8.0);
  CHECK(r.scaling["low_freq_factor"] == 1.0);
  CHECK(r.scaling["high_freq_factor"] == 4.0);
  CHECK(r.scaling["original_max_position_embeddings"] == 8192);
  CHECK_FALSE(r.scaling.contains("rope_type"));
  CHECK(c.max_position_embeddings.value == 131072);
}

TEST_CASE("olmo3.1: K norm across all heads is unsupported on every layer", "[config][data]") {
  auto c = load("olmo3.1-32b-instruct.json");
  CHECK(c.num_hidden_layers.value == 64);
  CHECK(indices_where(c, LayerKind::SlidingAttention).size() == 48);
  CHECK(indices_where(c, LayerKind::FullAttention).size() == 16);
  for (const auto* l : c.attention_layers()) {
    CHECK_THAT(l->unsupported, Contains("layer " + std::to_string(l->index) + ":") &&
                                   Contains("across all heads") && Contains("modeling_olmo3.py"));
    CHECK(l->head_dim.value == 128);
  }
  CHECK(c.layers[0].rope.value.scaling_type == "yarn");
  CHECK(c.layers[0].sliding_window == 4096);
}

TEST_CASE("phi-2: partial_rotary_factor 0.4 of head_dim 80", "[config][data]") {
  auto c = load("phi-phi-2.json");
  check_uniform(c, {32, 80, true, KNormKind::None});
  CHECK(c.layers[0].rotary_dim.value == 32);
  CHECK(c.layers[0].rotary_dim.source ==
        "derived: int(head_dim * partial_rotary_factor) = int(80*0.4) = 32 (truncated, as "
        "transformers, vLLM and sglang compute it)");
  CHECK(c.layers[0].unsupported.empty());  // qk_layernorm false
}

TEST_CASE("phi-3.5: longrope with factor lists of head_dim/2", "[config][data]") {
  auto c = load("phi3-phi-3.5-vision-text.json");
  check_uniform(c, {32, 96, true, KNormKind::None});
  const auto& r = c.layers[0].rope.value;
  CHECK(r.scaling_type == "longrope");
  CHECK(r.scaling["long_factor"].size() == 48);
  CHECK(r.scaling["short_factor"].size() == 48);
  CHECK(r.scaling["original_max_position_embeddings"] == 4096);  // from the top level
  CHECK(r.scaling["max_position_embeddings"] == 131072);
  CHECK(c.layers[0].rotary_dim.value == 96);
}

TEST_CASE("qwen3 32b and 8b: explicit head_dim, RMS K norm", "[config][data]") {
  auto a = load("qwen3-32b.json");
  CHECK(a.num_hidden_layers.value == 64);
  check_uniform(a, {8, 128, true, KNormKind::Rms});
  CHECK(a.layers[0].rope.value.theta == 1e6);
  auto b = load("qwen3-8b.json");
  CHECK(b.num_hidden_layers.value == 36);
  check_uniform(b, {8, 128, true, KNormKind::Rms});
  CHECK(a.layers[0].rope.value == b.layers[0].rope.value);
}

TEST_CASE("qwen3.5: linear attention skipped, partial rotary in rope_parameters, (1+w) K norm",
          "[config][data]") {
  auto c = load("qwen3.5-9b.json");
  CHECK(c.num_hidden_layers.value == 32);
  std::vector<int> attn;
  for (const auto* l : c.attention_layers()) attn.push_back(l->index);
  CHECK(attn == std::vector<int>{3, 7, 11, 15, 19, 23, 27, 31});
  check_uniform(c, {4, 256, true, KNormKind::RmsOnePlus});
  CHECK(c.layers[3].rotary_dim.value == 64);
  CHECK(c.layers[3].rotary_dim.source ==
        "derived: int(head_dim * text_config.rope_parameters.partial_rotary_factor) = "
        "int(256*0.25) = 64 (truncated, as transformers, vLLM and sglang compute it)");
  CHECK(c.layers[3].rope.value.theta == 1e7);
  CHECK(c.layers[3].rope.value.scaling_type == "default");
  CHECK_THAT(c.layers[3].k_norm.source, Contains("(1 + w)"));
  CHECK_THAT(c.layers[0].num_kv_heads.source, Contains("n/a"));
}

TEST_CASE("smollm3: no_rope_layers marks every 4th layer NoPE", "[config][data]") {
  auto c = load("smollm3-3b.json");
  CHECK(c.attention_layers().size() == 36);
  check_uniform(c, {4, 128, true, KNormKind::None});
  for (const auto& l : c.layers) {
    INFO("layer " << l.index);
    if ((l.index + 1) % 4 == 0) {
      CHECK(l.rotary_dim.value == 0);
      CHECK_THAT(l.rotary_dim.source,
                 Contains("no_rope_layers[" + std::to_string(l.index) + "] = 0"));
    } else {
      CHECK(l.rotary_dim.value == 128);
    }
  }
  CHECK(c.layers[0].rope.value.theta == 5e6);
}

// ------------------------------------------------------------------------------------------------
// Architecture rules on synthetic configs.

TEST_CASE("neox rules by architecture and explicit keys", "[config][rules]") {
  auto neox = [](const std::string& extra) {
    return parse(R"({"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4)" +
                 extra + "}")
        .layers[0]
        .is_neox_style;
  };
  CHECK(neox(R"(, "model_type": "llama")").value);
  CHECK_FALSE(neox(R"(, "model_type": "gptj", "rotary_dim": 64)").value);
  CHECK_FALSE(neox(R"(, "model_type": "cohere2")").value);
  CHECK_FALSE(neox(R"(, "model_type": "glm")").value);
  CHECK_FALSE(neox(R"(, "model_type": "glm4")").value);
  CHECK_FALSE(neox(R"(, "model_type": "chatglm")").value);
  CHECK(neox(R"(, "model_type": "glm4_moe")").value);
  // sglang's llama reads rope_is_neox_style; it wins over the rule there.
  auto e = neox(R"(, "model_type": "llama", "rope_is_neox_style": false)");
  CHECK_FALSE(e.value);
  CHECK(e.source == "rope_is_neox_style");
  CHECK_THROWS_WITH(neox(R"(, "model_type": "llama", "rope_is_neox_style": "yes")"),
                    Contains("rope_is_neox_style") && Contains("true or false"));
  // A family whose modeling code does not read the key: checked against the resolved layout,
  // refused when it contradicts it (UnsupportedError), accepted when it agrees.
  CHECK_THROWS_AS(neox(R"(, "model_type": "cohere", "rope_is_neox_style": true)"),
                  fkv::UnsupportedError);
  CHECK_THROWS_WITH(neox(R"(, "model_type": "cohere", "rope_is_neox_style": true)"),
                    Contains("'rope_is_neox_style'") && Contains("contradicts") &&
                        Contains("modeling_cohere.py") && Contains("neox false"));
  CHECK_THAT(neox(R"(, "model_type": "cohere", "rope_is_neox_style": false)").source,
             Contains("agrees: rope_is_neox_style = false"));
  CHECK_THROWS_WITH(neox(R"(, "model_type": "llama", "is_neox_style": false)"),
                    Contains("'is_neox_style'"));
}

TEST_CASE("glm / chatglm rotate half the head by default", "[config][rules]") {
  auto g = parse(
      R"({"model_type": "glm", "num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_key_value_heads": 2, "head_dim": 128})");
  CHECK(g.layers[0].rotary_dim.value == 64);
  CHECK_THAT(g.layers[0].rotary_dim.source,
             Contains("class default (GlmConfig).partial_rotary_factor"));
  auto c = parse(
      R"({"model_type": "chatglm", "num_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                     "kv_channels": 128, "multi_query_attention": true, "multi_query_group_num": 2,
                     "rope_ratio": 500, "layernorm_epsilon": 1e-5})");
  CHECK(c.layers[0].num_kv_heads.value == 2);
  CHECK(c.layers[0].num_kv_heads.source == "multi_query_group_num (multi_query_attention = true)");
  CHECK(c.layers[0].head_dim.source == "kv_channels");
  CHECK(c.layers[0].rotary_dim.value == 64);
  CHECK_FALSE(c.layers[0].is_neox_style.value);
  CHECK(c.layers[0].rope.value.theta == 5e6);
  CHECK(c.eps.source == "layernorm_epsilon");
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "chatglm", "num_layers": 1, "hidden_size": 64, "num_attention_heads": 2,
                              "multi_query_attention": true})"),
      Contains("multi_query_group_num is missing"));
}

TEST_CASE("K norm kinds and unsupported norms", "[config][rules]") {
  auto knorm = [](const std::string& extra) {
    return parse(R"({"num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 4)" +
                 extra + "}")
        .layers[0];
  };
  CHECK(knorm(R"(, "model_type": "qwen3_moe")").k_norm.value == KNormKind::Rms);
  CHECK(knorm(R"(, "model_type": "qwen3_next")").k_norm.value == KNormKind::RmsOnePlus);
  CHECK(knorm(R"(, "model_type": "gemma2")").k_norm.value == KNormKind::None);
  CHECK(knorm(R"(, "model_type": "llama")").k_norm.value == KNormKind::None);
  CHECK(knorm(R"(, "model_type": "cohere")").unsupported.empty());
  auto co = knorm(R"(, "model_type": "cohere", "use_qk_norm": true)");
  CHECK_THAT(co.unsupported,
             Contains("layer 0") && Contains("use_qk_norm") && Contains("LayerNorm"));
  auto o2 = knorm(R"(, "model_type": "olmo2")");
  CHECK_THAT(o2.unsupported, Contains("across all heads") && Contains("modeling_olmo2.py"));
  auto ph = knorm(R"(, "model_type": "phi", "qk_layernorm": true)");
  CHECK_THAT(ph.unsupported, Contains("qk_layernorm"));
  CHECK_THROWS_WITH(knorm(R"(, "model_type": "mystery", "use_qk_norm": true)"),
                    Contains("\"mystery\"") && Contains("not in the architecture registry") &&
                        Contains("explicit schema"));
  // A qk-norm key a family does not read is refused, not taken as "no K norm".
  CHECK_THROWS_WITH(knorm(R"(, "model_type": "llama", "use_qk_norm": true)"),
                    Contains("'use_qk_norm'"));
  CHECK(knorm(R"(, "model_type": "llama", "use_qk_norm": false)").k_norm.value == KNormKind::None);
  CHECK(knorm(R"(, "model_type": "glm4_moe", "use_qk_norm": false)").k_norm.value ==
        KNormKind::None);
}

TEST_CASE("hybrid layer patterns: Nemotron-H, Jamba, DeciLM, layers_block_type",
          "[config][rules]") {
  auto nh = parse(
      R"({"model_type": "nemotron_h", "num_hidden_layers": 6, "hidden_size": 1024, "num_attention_heads": 8,
                      "num_key_value_heads": 2, "head_dim": 128, "hybrid_override_pattern": "M-M*-*"})");
  CHECK(indices_where(nh, LayerKind::FullAttention) == std::vector<int>{3, 5});
  CHECK(nh.layers[3].rotary_dim.value == 0);  // Nemotron-H attention has no RoPE
  CHECK_THAT(nh.layers[3].kind.source, Contains("hybrid_override_pattern[3] = '*'"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "nemotron_h", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 2,
                              "hybrid_override_pattern": "M*"})"),
      Contains("hybrid_override_pattern") && Contains("2 characters") && Contains("3 layers"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "nemotron_h", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                              "hybrid_override_pattern": "MX"})"),
      Contains("unknown character 'X'"));

  auto jb = parse(
      R"({"model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 4,
                      "num_key_value_heads": 2, "attn_layer_period": 4, "attn_layer_offset": 2})");
  CHECK(indices_where(jb, LayerKind::FullAttention) == std::vector<int>{2, 6});
  CHECK(jb.layers[2].num_kv_heads.value == 2);

  // Nemotron-NAS (DeciLM) reads block_configs: KV heads from n_heads_in_group, no_op layers have
  // no KV. layers_block_type families have no registry entry.
  auto nas = parse(R"({"model_type": "nemotron-nas", "num_hidden_layers": 2, "hidden_size": 4096,
                       "num_attention_heads": 32, "block_configs": [{"attention": {"n_heads_in_group": 8}},
                                                                    {"attention": {"no_op": true}}]})");
  CHECK(nas.layers[0].num_kv_heads.value == 4);
  CHECK(indices_where(nas, LayerKind::NoAttention) == std::vector<int>{1});
  CHECK_THROWS_WITH(parse(R"({"model_type": "deci", "num_hidden_layers": 1, "hidden_size": 4096,
                              "num_attention_heads": 32})"),
                    Contains("\"deci\"") && Contains("not in the architecture registry"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 3, "hidden_size": 512, "num_attention_heads": 4,
                              "layers_block_type": ["mamba", "attention", "mamba"]})"),
      Contains("'layers_block_type'") && Contains("does not read it"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
                              "layer_types": ["full_attention", "telepathy"]})"),
      Contains("layer_types[1]") && Contains("telepathy"));
}

TEST_CASE("cohere2: global layers are NoPE, pattern from class default", "[config][rules]") {
  auto c = parse(
      R"({"model_type": "cohere2", "num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 8,
                     "sliding_window": 4096})");
  CHECK(indices_where(c, LayerKind::FullAttention) == std::vector<int>{3, 7});
  CHECK(c.layers[3].rotary_dim.value == 0);
  CHECK_THAT(c.layers[3].rotary_dim.source,
             Contains("architecture rule: cohere2") && Contains("NoPE"));
  CHECK(c.layers[0].rotary_dim.value == 128);
  CHECK(c.layers[0].sliding_window == 4096);
  CHECK_FALSE(c.layers[0].is_neox_style.value);
}

TEST_CASE("per-layer head lists (OpenELM) are refused: no registry entry reads them",
          "[config][rules]") {
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "openelm", "num_transformer_layers": 3, "model_dim": 1280, "head_dim": 64,
                              "num_query_heads": [12, 16, 20], "num_kv_heads": [3, 4, 5]})"),
      Contains("\"openelm\"") && Contains("explicit schema"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                              "num_kv_heads": [1, 1]})"),
      Contains("'num_kv_heads'") && Contains("contradicts") && Contains("num_kv_heads 2"));
}

TEST_CASE("per-layer KV-head lists are refused for families that read one number",
          "[config][rules]") {
  // Qwen3 and Llama read num_key_value_heads, but their modeling code takes one number; the list
  // was read per layer, so [8, 8] validated and [8, 4] was a uniformity mismatch.
  for (const char* type : {"qwen3", "llama"}) {
    INFO(type);
    for (const char* list : {"[2, 2]", "[2, 1]"}) {
      const std::string text =
          R"({"model_type": ")" + std::string(type) +
          R"(", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4, )"
          R"("num_key_value_heads": )" +
          list + "}";
      CHECK_THROWS_AS(parse(text), fkv::UnsupportedError);
      CHECK_THROWS_WITH(parse(text), Contains("'num_key_value_heads'") &&
                                         Contains("per-layer list") &&
                                         Contains(type[0] == 'q' ? "\"Qwen3\"" : "\"Llama\"") &&
                                         Contains("explicit schema"));
    }
  }
}

TEST_CASE("KV heads must divide the query heads", "[config][rules]") {
  auto with = [](const std::string& extra) {
    return parse(
        R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32)" +
        extra + "}");
  };
  for (const char* kv : {"64", "33", "7", "5"}) {
    INFO(kv);
    CHECK_THROWS_WITH(
        with(std::string(R"(, "num_key_value_heads": )") + kv),
        Contains("test.json: key 'num_key_value_heads': " + std::string(kv) + " KV heads") &&
            Contains("32 query heads (num_attention_heads)") && Contains("must divide"));
  }
  CHECK_THROWS_AS(with(R"(, "num_key_value_heads": 64)"), fkv::ConfigError);
  for (const char* kv : {"32", "8", "1"})
    CHECK(with(std::string(R"(, "num_key_value_heads": )") + kv).layers[0].num_kv_heads.value ==
          std::stoi(kv));
  // ChatGLM's multi_query_group_num is named when it is the source.
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "chatglm", "num_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                "multi_query_attention": true, "multi_query_group_num": 3})"),
      Contains("'multi_query_group_num'") && Contains("do not divide"));
}

TEST_CASE("an odd head_dim that rotary_dim defaults to is bad input while reading",
          "[config][rules]") {
  // It used to reach validate and exit 1 with the seed's "Invalid ... pair" text.
  auto hd = [](int d) {
    return parse(
        R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32, "head_dim": )" +
        std::to_string(d) + "}");
  };
  try {
    hd(127);
    FAIL("head_dim 127 read");
  } catch (const fkv::MismatchError&) {
    FAIL("a MismatchError (exit 1) for a value in the file");
  } catch (const fkv::ConfigError& e) {
    CHECK(fkv::error_kind_of(e) == fkv::ErrorKind::BadInput);
    CHECK_THAT(e.what(), Contains("test.json: key 'head_dim': head_dim 127 gives rotary_dim 127") &&
                             Contains("even"));
  }
  CHECK(hd(126).layers[0].rotary_dim.value == 126);
  CHECK_THROWS_WITH(parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 127}]})"),
                    Contains("'layers[0].head_dim'") && Contains("odd"));
  CHECK(parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 127, "rotary_dim": 64}]})")
            .layers[0]
            .rotary_dim.value == 64);
}

TEST_CASE("an MLA family stays refused beside the explicit schema", "[config][rules]") {
  // Without a layer count the list alone was read, and the model validated.
  const std::string list = R"("layers": [{"num_kv_heads": 8, "head_dim": 128}])";
  for (const char* type : {"deepseek_v3", "kimi_k2"}) {
    INFO(type);
    const std::string text = R"({"model_type": ")" + std::string(type) + R"(", )" + list + "}";
    CHECK_THROWS_AS(parse(text), fkv::UnsupportedError);
    CHECK_THROWS_WITH(parse(text), Contains("'model_type'") &&
                                       Contains("multi-head latent attention") &&
                                       Contains("explicit schema"));
  }
  // With a layer count but no MLA keys, the verdict names the family rule, not "MLA: )".
  auto c = parse(R"({"model_type": "deepseek_v3", "num_hidden_layers": 1, )" + list + "}");
  CHECK_THAT(c.layers[0].unsupported,
             Contains("MLA: architecture rule: deepseek_v3 is MLA") && !Contains("MLA: )"));
}

TEST_CASE("a null rope_type beside scaling keys is refused; no type reads as default",
          "[config][rules]") {
  auto with = [](const std::string& scaling) {
    return parse(
        R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
            "rope_scaling": )" +
        scaling + "}");
  };
  // transformers keeps the None (setdefault) and cannot build the RoPE.
  CHECK_THROWS_WITH(with(R"({"rope_type": null, "factor": 2.0})"),
                    Contains("'rope_scaling.rope_type'") && Contains("null beside \"factor\""));
  CHECK_THROWS_WITH(with(R"({"rope_type": null, "type": "linear", "factor": 2.0})"),
                    Contains("'rope_scaling.rope_type'"));
  CHECK_THROWS_AS(with(R"({"rope_type": null, "factor": 2.0})"), fkv::ConfigError);
  CHECK(with(R"({"rope_type": null})").layers[0].rope.value.scaling_type == "default");
  // No type at all: transformers standardizes to "default" and reads no factor; the source says so.
  auto d = with(R"({"factor": 2.0})");
  CHECK(d.layers[0].rope.value.scaling_type == "default");
  CHECK_THAT(d.layers[0].rope.source,
             Contains("no rope_type or type: default RoPE") && Contains("not used"));
}

TEST_CASE("NoPE by interval, Llama4 style", "[config][rules]") {
  auto c = parse(
      R"({"model_type": "llama4_text", "num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 4,
                     "no_rope_layers": [], "nope_layer_interval": 4})");
  CHECK(c.layers[3].rotary_dim.value == 0);
  CHECK(c.layers[7].rotary_dim.value == 0);
  CHECK(c.layers[2].rotary_dim.value == 128);
  CHECK_THAT(c.layers[3].rotary_dim.source, Contains("nope_layer_interval=4"));
  auto q = parse(
      R"({"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 4,
                     "no_rope_layers": [1, 1, 1, 0], "use_qk_norm": true})");
  CHECK_THAT(q.layers[0].unsupported, Contains("L2"));
  CHECK(q.layers[3].unsupported.empty());  // the L2 norm is applied on RoPE layers only
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "smollm3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                              "no_rope_layers": [1, 2]})"),
      Contains("no_rope_layers[1]") && Contains("1 (RoPE) or 0 (NoPE)"));
}

TEST_CASE("rope_parameters keyed by layer type", "[config][rules]") {
  auto c = parse(
      R"({"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
                     "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 512,
                     "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000},
                                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000}}})");
  CHECK(c.layers[0].rope.value.theta == 10000.0);
  CHECK(c.layers[0].rope.value.scaling_type == "default");
  CHECK_THAT(c.layers[0].rope.source, Contains("rope_parameters.sliding_attention.rope_theta"));
  CHECK(c.layers[1].rope.value.theta == 1e6);
  CHECK(c.layers[1].rope.value.scaling_type == "linear");
  CHECK(c.layers[1].rope.value.scaling["factor"] == 8.0);
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "gpt_oss", "num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 4,
                              "layer_types": ["full_attention"],
                              "rope_parameters": {"sliding_attention": {"rope_theta": 10000}}})"),
      Contains("no entry for \"full_attention\""));
}

TEST_CASE("qwen2-style use_sliding_window slides layers from max_window_layers",
          "[config][rules]") {
  auto c = parse(
      R"({"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 4,
                     "use_sliding_window": true, "sliding_window": 256, "max_window_layers": 2})");
  CHECK(indices_where(c, LayerKind::SlidingAttention) == std::vector<int>{2, 3});
  CHECK(c.layers[2].sliding_window == 256);
}

TEST_CASE("RopeFrequencies::canonical is stable and normalizes numbers", "[config][rope]") {
  fkv::RopeFrequencies a, b;
  a.theta = 1e6;
  b.theta = 1000000;
  a.scaling_type = b.scaling_type = "yarn";
  a.scaling = nlohmann::json::parse(
      R"({"factor": 32, "beta_fast": 32.0, "original_max_position_embeddings": 4096})");
  b.scaling = nlohmann::json::parse(
      R"({"original_max_position_embeddings": 4096.0, "beta_fast": 32, "factor": 3.2e1})");
  CHECK(a.canonical() == b.canonical());
  CHECK(a == b);
  CHECK(
      a.canonical() ==
      R"({"scaling":{"beta_fast":32.0,"factor":32.0,"original_max_position_embeddings":4096.0},"theta":1000000.0,"type":"yarn"})");
  b.scaling["factor"] = 40;
  CHECK_FALSE(a == b);
  fkv::RopeFrequencies d;
  CHECK(d.canonical() == R"({"scaling":{},"theta":10000.0,"type":"default"})");
  // The same table read from 1e6 and 1000000 in two configs.
  auto x = parse(
      R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 4, "rope_theta": 1e6})");
  auto y = parse(
      R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 4, "rope_theta": 1000000})");
  CHECK(x.layers[0].rope.value == y.layers[0].rope.value);
}
