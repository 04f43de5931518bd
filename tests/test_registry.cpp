// Tests of the architecture registry (docs/config-rules.md): citations, refusals, layout keys
// a family does not read, nesting, and the families used as draft or target models against
// their real-shaped configs in tests/data.
#include "config_test_util.hpp"

// ------------------------------------------------------------------------------------------------
// The architecture registry: never guess.

TEST_CASE("every registry entry cites the modeling code it was checked against",
          "[config][registry]") {
  std::set<std::string> types;
  for (const fkv::Architecture& a : fkv::architectures()) {
    INFO(a.name);
    CHECK_FALSE(a.name.empty());
    CHECK((!a.model_types.empty() || !a.architecture_prefix.empty()));
    // A supported entry's citation names a file (…modeling_x.py / model_definitions.py) and a
    // class in it; a refusal names its reason and the file it was read from (or that there is
    // none in the engines).
    if (a.refused()) {
      CHECK_FALSE(a.citation.empty());
    } else {
      CHECK_THAT(a.citation, Contains(".py"));
      CHECK(a.citation.find("Attention") != std::string::npos);
    }
    for (const auto& t : a.model_types) CHECK(types.insert(t).second);  // one entry per model_type
    for (const auto& k : a.reads) {
      INFO(k);
      bool listed = false;
      for (const auto& lk : fkv::layout_keys()) listed = listed || lk.key == k;
      CHECK(listed);  // an entry reads only keys the layout-key list knows
    }
  }
}

TEST_CASE("docs/config-rules.md lists every registry entry with its citation",
          "[config][registry][docs]") {
  const std::string path = std::string(FKV_TEST_DATA_DIR) + "/../../docs/config-rules.md";
  std::ifstream in(path);
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string table = fkv::architectures_markdown();
  if (doc.find(table) == std::string::npos) {
    const std::string out = tmp_path("architectures.md");
    std::ofstream(out) << table;
    FAIL("docs/config-rules.md does not hold the registry table; the current one is in " + out +
         " (paste it between the architecture-table markers)");
  }
  for (const fkv::Architecture& a : fkv::architectures())
    CHECK(doc.find(a.citation) != std::string::npos);
  // Section 4's table lists every layout key with its meaning.
  for (const fkv::LayoutKey& k : fkv::layout_keys()) {
    INFO(k.key);
    CHECK(doc.find("| `" + k.key + "` | " + k.meaning + " |") != std::string::npos);
  }
}

TEST_CASE("an unknown model_type is refused in three lines, naming it and its neighbours",
          "[config][registry]") {
  try {
    parse(
        R"({"model_type": "qwen3_mystery", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4})");
    FAIL("expected an UnsupportedError");
  } catch (const fkv::UnsupportedError& e) {
    const std::string w = e.what();
    INFO(w);
    CHECK_THAT(w, Contains("test.json") && Contains("'model_type'") &&
                      Contains("\"qwen3_mystery\"") && Contains("does not guess") &&
                      Contains("Nearest supported model_types: qwen3") &&
                      Contains("docs/config-rules.md"));
    CHECK(std::count(w.begin(), w.end(), '\n') <= 2);
    CHECK(w.size() < 600);
    CHECK_THAT(w, !Contains("llama, mistral, mixtral"));  // no full family list
  }
  // Nested: the name as written, with its path.
  CHECK_THROWS_WITH(parse(R"({"model_type": "llava", "text_config": {"model_type": "mystery_text",
                              "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4}})"),
                    Contains("'text_config.model_type'") && Contains("\"mystery_text\""));
  // No model_type at all is no better.
  CHECK_THROWS_WITH(
      parse(R"({"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4})"),
      Contains("no model_type") && Contains("explicit schema"));
  // The explicit schema needs no entry: it states every fact itself.
  auto c = parse(R"({"model_type": "mystery_lm", "num_hidden_layers": 2, "fkv": {"layers": [
      {"num_kv_heads": 4, "head_dim": 64, "k_norm": "rms"}, {"num_kv_heads": 4, "head_dim": 64, "k_norm": "rms"}]}})");
  CHECK(c.family == "explicit schema");
  CHECK(c.layers[1].k_norm.value == KNormKind::Rms);
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "mystery_lm", "num_hidden_layers": 3, "fkv": {"layers": [
      {"num_kv_heads": 4, "head_dim": 64}]}})"),
      Contains("fkv.layers") && Contains("1 entries") && Contains("3 layers"));
}

TEST_CASE("a layout key the family does not read is refused, naming it", "[config][registry]") {
  const std::string base =
      R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4, )";
  // Keys whose meaning the entry cannot check.
  for (const char* key : {R"("global_head_dim": 256)", R"("v_head_dim": 64)",
                          R"("attention_k_eq_v": true)", R"("cross_attention_layers": [1])",
                          R"("linear_attn_config": {"kda_layers": [1]})", R"("kv_lora_rank": 512)",
                          R"("swa_num_key_value_heads": 2)", R"("num_kv_shared_layers": 1)"}) {
    const std::string text = base + key + "}";
    const std::string name = std::string(key).substr(1, std::string(key).find('"', 1) - 1);
    INFO(text);
    CHECK_THROWS_AS(parse(text), fkv::UnsupportedError);
    CHECK_THROWS_WITH(parse(text), Contains("'" + name + "'") &&
                                       Contains("changes the attention layout") &&
                                       Contains("modeling_qwen3.py"));
  }
  // Checkable keys that contradict the resolved layout: refused, naming both.
  CHECK_THROWS_WITH(parse(base + R"("no_rope_layers": [1, 0]})"),
                    Contains("'no_rope_layers'") && Contains("contradicts") &&
                        Contains("layer 1 rotary_dim 128"));
  // In a nested config, with its path; false / empty values state nothing and pass.
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "x", "text_config": {"model_type": "llama", "num_hidden_layers": 1,
                              "hidden_size": 512, "num_attention_heads": 4, "use_sliding_window": true}})"),
      Contains("'text_config.use_sliding_window'"));
  CHECK_NOTHROW(parse(base + R"("attention_k_eq_v": false, "cross_attention_layers": []})"));
  // Every listed key is refused or checked by an entry that reads none of them (GPT-J reads only
  // rotary_dim): never silently ignored.
  for (const fkv::LayoutKey& k : fkv::layout_keys()) {
    if (k.key == "rotary_dim") continue;
    INFO(k.key);
    try {
      auto c = parse(R"({"model_type": "gptj", "n_layer": 1, "n_embd": 512, "n_head": 4, ")" +
                     k.key + R"(": 1})");
      // Accepted only as a key that agrees, and then --explain says so.
      const auto& L = c.layers[0];
      const std::string all = L.kind.source + L.head_dim.source + L.num_kv_heads.source +
                              L.rotary_dim.source + L.is_neox_style.source + L.rope.source +
                              L.k_norm.source;
      CHECK_THAT(all, Contains("agrees: " + k.key + " = 1"));
    } catch (const fkv::ConfigError& e) {
      CHECK_THAT(std::string(e.what()), Contains("'" + k.key + "'"));
    }
  }
}

TEST_CASE("speculators format: the layer config under transformer_layer_config",
          "[config][registry][nested]") {
  auto c = load("speculators-dflash-qwen3-8b.json");
  CHECK(c.family == "DFlash draft");
  CHECK(c.model_type == "qwen3");
  CHECK(c.num_hidden_layers.value == 5);
  CHECK(c.num_hidden_layers.source == "transformer_layer_config.num_hidden_layers");
  check_uniform(c, {8, 128, true, KNormKind::Rms});
  CHECK(c.layers[0].head_dim.source == "transformer_layer_config.head_dim");
  CHECK_THAT(c.layers[0].k_norm.source, Contains("Qwen3DFlashAttention"));
  CHECK(c.layers[0].rope.value.theta == 1e6);
  CHECK(c.dtype.value == "bfloat16");
  // Without model_type the speculators class default (Qwen3Config for dflash, LlamaConfig for
  // eagle3) names the layers.
  auto e = parse(
      R"({"speculators_model_type": "eagle3", "transformer_layer_config": {"num_hidden_layers": 1,
                     "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}})");
  CHECK(e.family == "Llama");
  CHECK(e.model_type == "llama");
  check_uniform(e, {8, 128, true, KNormKind::None});
  CHECK_THROWS_WITH(
      parse(
          R"({"speculators_model_type": "eagle3", "transformer_layer_config": {"model_type": "qwen3",
                              "num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32}})"),
      Contains("eagle3") && Contains("\"qwen3\""));
  CHECK_THROWS_WITH(
      parse(R"({"speculators_model_type": "medusa", "transformer_layer_config": {}})"),
      Contains("'speculators_model_type'") && Contains("medusa"));
  CHECK_THROWS_WITH(parse(R"({"speculators_model_type": "dflash"})"),
                    Contains("'transformer_layer_config'"));
}

TEST_CASE("llm_config nesting (InternVL-style)", "[config][registry][nested]") {
  auto c = parse(
      R"({"model_type": "internvl_chat", "llm_config": {"model_type": "qwen2", "num_hidden_layers": 2,
                     "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2, "rope_theta": 1000000}})");
  CHECK(c.family == "Qwen2 / Qwen2.5");
  CHECK(c.layers[0].num_kv_heads.source == "llm_config.num_key_value_heads");
  check_uniform(c, {2, 64, true, KNormKind::None});
}

// ------------------------------------------------------------------------------------------------
// Families used as draft or target models, each against its real-shaped config in tests/data.

TEST_CASE(
    "ernie 4.5: GPT-J interleaved over the whole head, class defaults only where transformers has "
    "them",
    "[config][data][registry]") {
  auto dense = load("ernie4.5-0.3b.json");
  CHECK(dense.family == "ERNIE 4.5");
  CHECK(dense.attention_layers().size() == 18);
  check_uniform(dense, {2, 128, false, KNormKind::None});
  for (const auto* l : dense.attention_layers()) {
    CHECK(l->rotary_dim.value == 128);
    CHECK(l->head_dim.source == "head_dim");  // 128, not 1024 / 16 = 64
    CHECK_THAT(l->is_neox_style.source, Contains("modular_ernie4_5.py"));
    CHECK(l->rope.value.theta == 500000.0);
    CHECK(l->unsupported.empty());
  }
  auto moe = load("ernie4.5-21b-a3b.json");
  CHECK(moe.family == "ERNIE 4.5 MoE");
  check_uniform(moe, {4, 128, false, KNormKind::None});
  // "head_dim": null keeps transformers' None: derived, never a class default.
  CHECK(moe.layers[0].head_dim.source == "derived: hidden_size / num_attention_heads = 2560/20");

  auto minimal = [](const std::string& type, const std::string& extra) {
    return parse(R"({"model_type": ")" + type + R"(", "num_hidden_layers": 1, "hidden_size": 1024,
                    "num_attention_heads": 16, "num_key_value_heads": 2)" +
                 extra + "}")
        .layers[0];
  };
  // Ernie4_5Config defaults head_dim to 128 and rope_theta to 500000 when the keys are absent.
  auto absent = minimal("ernie4_5", "");
  CHECK(absent.head_dim.value == 128);
  CHECK(absent.head_dim.source == "class default (Ernie4_5Config).head_dim");
  CHECK(absent.rope.value.theta == 500000.0);
  CHECK_THAT(absent.rope.source, Contains("class default (Ernie4_5Config).rope_theta"));
  auto null_hd = minimal("ernie4_5", R"(, "head_dim": null)");
  CHECK(null_hd.head_dim.value == 64);
  CHECK_THAT(null_hd.head_dim.source, Contains("derived"));
  // Ernie4_5_MoeConfig has no head_dim default.
  CHECK(minimal("ernie4_5_moe", "").head_dim.value == 64);
  CHECK(minimal("ernie4_5_moe", "").rope.value.theta == 500000.0);
  CHECK_THROWS_WITH(minimal("ernie4_5", R"(, "partial_rotary_factor": 0.5)"),
                    Contains("'partial_rotary_factor'"));
}

TEST_CASE("hunyuan: the K norm follows RoPE, so every attention layer is unsupported",
          "[config][data][registry]") {
  for (const char* file : {"hunyuan-a13b-instruct.json", "hunyuan-7b-v1-dense.json"}) {
    INFO(file);
    auto c = load(file);
    CHECK(c.family == "Hunyuan (dense / MoE)");
    REQUIRE(c.attention_layers().size() == 32);
    check_uniform(c, {8, 128, true, KNormKind::None});
    for (const auto* l : c.attention_layers()) {
      CHECK_THAT(l->unsupported,
                 Contains("layer " + std::to_string(l->index) + ": K norm after RoPE") &&
                     Contains("HunYuanDenseV1Attention") && Contains("before RoPE only"));
      CHECK_THAT(l->k_norm.source, Contains("after RoPE"));
    }
  }
  CHECK(load("hunyuan-a13b-instruct.json").model_type == "hunyuan");  // the hub remote-code name
  // Cross-layer KV sharing is not read by the transformers port: refused when switched on.
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "hunyuan_v1_dense", "num_hidden_layers": 2, "hidden_size": 4096,
                              "num_attention_heads": 32, "num_key_value_heads": 8, "use_cla": true})"),
      Contains("'use_cla'") && Contains("changes the attention layout"));
}

TEST_CASE("RoPE scaling with alpha (NTK-alpha) is no type the table builder knows",
          "[config][rope]") {
  auto l =
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32,
                     "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 1000.0}})")
          .layers[0];
  CHECK_THAT(l.unsupported, Contains("layer 0") && Contains("\"alpha\"") &&
                                Contains("rope_scaling.type = dynamic"));
  CHECK(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32,
                  "rope_scaling": {"type": "dynamic", "factor": 2.0}})")
          .layers[0]
          .unsupported.empty());
}

TEST_CASE("minimax-text-01: attn_type_list 1 = softmax, 0 = linear; partial rotary from rotary_dim",
          "[config][data][registry]") {
  auto c = load("minimax-text-01.json");
  CHECK(c.family == "MiniMax-Text-01 / M1");
  CHECK(indices_where(c, LayerKind::FullAttention) ==
        std::vector<int>{7, 15, 23, 31, 39, 47, 55, 63, 71, 79});
  CHECK(indices_where(c, LayerKind::NoAttention).size() == 70);
  CHECK(c.layers[0].kind.source == "attn_type_list[0] = 0 (linear attention: no KV)");
  check_uniform(c, {8, 128, true, KNormKind::None});
  for (const auto* l : c.attention_layers()) {
    CHECK(l->rotary_dim.value == 64);
    CHECK(l->rotary_dim.source == "rotary_dim");
    CHECK(l->rope.value.theta == 1e7);
    CHECK(l->unsupported.empty());
  }
  const std::string base = R"({"model_type": "minimax", "num_hidden_layers": 4, "hidden_size": 6144,
                               "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128)";
  // transformers' form: layer_types and partial_rotary_factor.
  auto hf =
      parse(base +
            R"(, "partial_rotary_factor": 0.5, "layer_types": ["linear_attention", "full_attention",
                             "linear_attention", "full_attention"]})");
  CHECK(indices_where(hf, LayerKind::FullAttention) == std::vector<int>{1, 3});
  CHECK(hf.layers[1].rotary_dim.value == 64);
  // vLLM's older key name.
  auto old = parse(base + R"(, "decoder_attention_types": [0, 0, 0, 1]})");
  CHECK(indices_where(old, LayerKind::FullAttention) == std::vector<int>{3});
  // Without a layer-kind key transformers alternates and vLLM uses softmax everywhere: refused.
  CHECK_THROWS_WITH(parse(base + "}"), Contains("'layer_types'") && Contains("attn_type_list") &&
                                           Contains("engines disagree"));
  CHECK_THROWS_WITH(
      parse(base + R"(, "attn_type_list": [0, 2, 0, 1]})"),
      Contains("'attn_type_list[1]'") && Contains("expected 1 (softmax attention) or 0"));
  CHECK_THROWS_WITH(parse(base + R"(, "attn_type_list": [0, 1]})"),
                    Contains("'attn_type_list'") && Contains("4 layers"));
  // A family that does not read attn_type_list refuses it.
  CHECK_THROWS_WITH(parse(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512,
                              "num_attention_heads": 4, "attn_type_list": [1, 0]})"),
                    Contains("'attn_type_list'"));
}

TEST_CASE("minimax-m2: K norm over all heads is unsupported; rotary_dim 64 of 128",
          "[config][data][registry]") {
  auto c = load("minimax-m2.json");
  CHECK(c.family == "MiniMax-M2");
  CHECK(c.attention_layers().size() == 62);
  check_uniform(c, {8, 128, true, KNormKind::None});
  for (const auto* l : c.attention_layers()) {
    CHECK(l->rotary_dim.value == 64);
    CHECK_THAT(l->unsupported,
               Contains("K norm across all heads") && Contains("modular_minimax_m2.py"));
  }
}

TEST_CASE("exaone 3, internlm3, starcoder2: llama-like neox attention without K norm",
          "[config][data][registry]") {
  auto ex = load("exaone3.0-7.8b-instruct.json");
  CHECK(ex.family == "EXAONE 3 / 3.5");
  CHECK(ex.num_hidden_layers.value == 32);
  CHECK(ex.num_hidden_layers.source == "num_layers");
  check_uniform(ex, {8, 128, true, KNormKind::None});
  CHECK(ex.layers[0].head_dim.source == "derived: hidden_size / num_attention_heads = 4096/32");
  CHECK(ex.layers[0].rotary_dim.value == 128);
  CHECK(ex.layers[0].rope.value.theta == 500000.0);
  CHECK(ex.layers[0].rope.value.scaling_type == "default");  // "rope_scaling": null

  auto il = load("internlm3-8b-instruct.json");
  CHECK(il.family == "InternLM3");
  CHECK(il.attention_layers().size() == 48);
  check_uniform(il, {2, 128, true, KNormKind::None});
  CHECK(il.layers[0].rope.value.scaling_type == "dynamic");
  CHECK(il.layers[0].rope.value.theta == 5e7);

  auto sc = load("starcoder2-3b.json");
  CHECK(sc.family == "Starcoder2");
  check_uniform(sc, {2, 128, true, KNormKind::None});
  CHECK(indices_where(sc, LayerKind::SlidingAttention).size() == 30);
  for (const auto* l : sc.attention_layers()) {
    CHECK(l->sliding_window == 4096);
    CHECK(l->rotary_dim.value == 128);
    CHECK(l->eps.source == "norm_epsilon");
  }
  // Mistral slides every layer by the same rule; a null window means full attention.
  auto mi = [](const std::string& window) {
    return parse(
        R"({"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "sliding_window": )" +
        window + "}");
  };
  CHECK(indices_where(mi("4096"), LayerKind::SlidingAttention) == std::vector<int>{0, 1});
  CHECK(mi("4096").layers[1].sliding_window == 4096);
  CHECK(indices_where(mi("null"), LayerKind::FullAttention) == std::vector<int>{0, 1});
}

TEST_CASE(
    "qwen2-vl / qwen2.5-vl text: mrope is plain RoPE at text positions; head_dim always derived",
    "[config][data][registry][nested]") {
  auto flat = load("qwen2-vl-7b-instruct.json");
  CHECK(flat.family == "Qwen2-VL / Qwen2.5-VL (text)");
  CHECK(flat.attention_layers().size() == 28);
  check_uniform(flat, {4, 128, true, KNormKind::None});
  for (const auto* l : flat.attention_layers()) {
    CHECK(l->rotary_dim.value == 128);
    CHECK(l->kind.value == LayerKind::FullAttention);  // use_sliding_window: false
    CHECK(l->rope.value.scaling_type == "mrope");
    CHECK_THAT(l->rope.source,
               Contains("mrope: exact for text tokens") && Contains("3-D positions"));
  }
  auto nested = load("qwen2.5-vl-3b-instruct.json");
  CHECK(nested.family == "Qwen2-VL / Qwen2.5-VL (text)");
  CHECK(nested.model_type == "qwen2_5_vl_text");
  CHECK(nested.attention_layers().size() == 36);
  check_uniform(nested, {2, 128, true, KNormKind::None});
  CHECK(nested.layers[0].num_kv_heads.source == "text_config.num_key_value_heads");
  CHECK_THAT(nested.layers[0].rope.source, Contains("mrope: exact for text tokens"));
  // Qwen2VLAttention computes hidden_size // num_heads and never reads head_dim: a head_dim that
  // contradicts it is refused (one that agrees is accepted).
  CHECK_THROWS_WITH(parse(R"({"model_type": "qwen2_vl", "num_hidden_layers": 1, "hidden_size": 3584,
                              "num_attention_heads": 28, "num_key_value_heads": 4, "head_dim": 256})"),
                    Contains("'head_dim'") && Contains("modeling_qwen2_5_vl.py"));
}

TEST_CASE(
    "a per-layer-type partial rotary factor is refused by a family that rotates the whole head",
    "[config][registry]") {
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 2880, "num_attention_heads": 64,
                "num_key_value_heads": 8, "head_dim": 64, "layer_types": ["sliding_attention", "full_attention"],
                "rope_parameters": {"full_attention": {"rope_theta": 1e6, "partial_rotary_factor": 0.5},
                                    "sliding_attention": {"rope_theta": 1e4}}})"),
      Contains("'rope_parameters.full_attention.partial_rotary_factor'") &&
          Contains("contradicts") && Contains("layer 1 rotary_dim 64"));
}
