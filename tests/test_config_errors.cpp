// Tests of the config module: the explicit per-layer schema, bad input (malformed and hostile
// files, wrong types, limits) and files written by Python's json.
#include "config_test_util.hpp"

// ------------------------------------------------------------------------------------------------
// Explicit schema.

TEST_CASE("explicit per-layer schema", "[config][explicit]") {
  auto c = parse(R"({"layers": [
      {"num_kv_heads": 8, "head_dim": 128, "rotary_dim": 64, "is_neox_style": false, "k_norm": "rms", "eps": 1e-5,
       "rope_theta": 1000000, "rope_scaling": {"rope_type": "linear", "factor": 4}},
      {"kind": "none"},
      {"num_kv_heads": 8, "head_dim": 128, "kind": "sliding_attention", "sliding_window": 1024, "k_norm": "rms_one_plus"}]})");
  CHECK(c.num_hidden_layers.value == 3);
  CHECK_THAT(c.num_hidden_layers.source, Contains("explicit schema"));
  REQUIRE(c.attention_layers().size() == 2);
  const auto& a = c.layers[0];
  CHECK(a.num_kv_heads.value == 8);
  CHECK(a.num_kv_heads.source == "layers[0].num_kv_heads");
  CHECK(a.rotary_dim.value == 64);
  CHECK_FALSE(a.is_neox_style.value);
  CHECK(a.k_norm.value == KNormKind::Rms);
  CHECK(a.eps.value == 1e-5);
  CHECK(a.rope.value.theta == 1e6);
  CHECK(a.rope.value.scaling_type == "linear");
  CHECK(a.rope.value.scaling["factor"] == 4);
  const auto& s = c.layers[2];
  CHECK(s.kind.value == LayerKind::SlidingAttention);
  CHECK(s.sliding_window == 1024);
  CHECK(s.rotary_dim.value == 128);
  CHECK(s.rotary_dim.source == "default: head_dim (explicit schema)");
  CHECK(s.k_norm.value == KNormKind::RmsOnePlus);
  CHECK(s.is_neox_style.value);
}

TEST_CASE("explicit schema under fkv overrides inference", "[config][explicit]") {
  auto c = parse(
      R"({"model_type": "olmo3", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
                     "fkv": {"layers": [{"k_norm": "rms", "rope_theta": 500000}, {"kind": "none"}]}})");
  CHECK(c.layers[0].k_norm.value == KNormKind::Rms);
  CHECK(c.layers[0].k_norm.source == "fkv.layers[0].k_norm");
  CHECK(c.layers[0].unsupported.empty());
  CHECK(c.layers[0].head_dim.value == 128);  // inferred, not overridden
  CHECK(c.layers[0].rope.value.theta == 500000.0);
  CHECK_FALSE(c.layers[1].is_attention());
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4,
                              "fkv": {"layers": [{"k_norm": "rms"}]}})"),
      Contains("fkv.layers") && Contains("1 entries") && Contains("2 layers"));
}

TEST_CASE("explicit schema errors", "[config][explicit][errors]") {
  CHECK_THROWS_WITH(parse(R"({"layers": []})"), Contains("layers") && Contains("empty"));
  CHECK_THROWS_WITH(parse(R"({"layers": [{"head_dim": 128}]})"),
                    Contains("layers[0]") && Contains("num_kv_heads"));
  CHECK_THROWS_WITH(
      parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 128, "k_norm": "layernorm"}]})"),
      Contains("layers[0].k_norm") && Contains("layernorm"));
  CHECK_THROWS_WITH(parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 128, "rotary": 64}]})"),
                    Contains("layers[0].rotary") && Contains("unknown key"));
  CHECK_THROWS_WITH(
      parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 128, "rotary_dim": 63}]})"),
      Contains("layers[0].rotary_dim") && Contains("odd"));
  CHECK_THROWS_WITH(
      parse(R"({"layers": [{"num_kv_heads": 8, "head_dim": 128, "rotary_dim": 256}]})"),
      Contains("larger than head_dim 128"));
  CHECK_THROWS_WITH(parse(R"({"layers": [{"num_kv_heads": 0, "head_dim": 128}]})"),
                    Contains("layers[0].num_kv_heads") && Contains("positive"));
  CHECK_THROWS_WITH(parse(R"({"fkv": {"layer": []}})"),
                    Contains("fkv") && Contains("no \"layers\""));
}

// ------------------------------------------------------------------------------------------------
// Bad input.

TEST_CASE("malformed JSON reports byte offset, line and column", "[config][errors]") {
  const std::string text = "{\n  \"num_hidden_layers\": 2,\n  \"hidden_size\": ,\n}";
  try {
    ModelConfig::from_json(std::string_view(text), "bad.json");
    FAIL("expected a ConfigError");
  } catch (const fkv::ConfigError& e) {
    std::string w = e.what();
    INFO(w);
    CHECK_THAT(w, Contains("bad.json") && Contains("malformed JSON") && Contains("byte"));
    CHECK_THAT(w, Contains("line 3") && Contains("column 18"));
  }
  CHECK_THROWS_WITH(parse(""), Contains("malformed JSON") && Contains("line 1"));
  CHECK_THROWS_AS(parse("{\"a\": [1, 2"), fkv::ConfigError);
  CHECK_THROWS_AS(parse("{\"a\": [1, 2"), std::invalid_argument);
}

TEST_CASE("non-object top level and bad text_config", "[config][errors]") {
  CHECK_THROWS_WITH(parse("[1, 2, 3]"),
                    Contains("test.json") && Contains("top level must be a JSON object"));
  CHECK_THROWS_WITH(parse("42"), Contains("top level"));
  CHECK_THROWS_WITH(parse(R"({"text_config": [1]})"),
                    Contains("'text_config'") && Contains("object"));
  CHECK_THROWS_WITH(parse(R"({"hidden_size": 512})"),
                    Contains("num_hidden_layers") && Contains("missing"));
}

TEST_CASE("wrong types, negative and zero values are errors naming file and key",
          "[config][errors]") {
  auto with = [](const std::string& extra) {
    return parse(
        R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4)" +
        extra + "}");
  };
  CHECK_THROWS_WITH(with(R"(, "head_dim": 128.5)"), Contains("test.json") &&
                                                        Contains("'head_dim'") &&
                                                        Contains("integer") && Contains("128.5"));
  CHECK_THROWS_WITH(with(R"(, "head_dim": "128")"), Contains("'head_dim'") && Contains("a string"));
  CHECK_THROWS_WITH(with(R"(, "head_dim": -128)"), Contains("'head_dim'") && Contains("positive"));
  CHECK_THROWS_WITH(with(R"(, "head_dim": 0)"), Contains("'head_dim'") && Contains("positive"));
  CHECK_THROWS_WITH(with(R"(, "num_key_value_heads": -2)"),
                    Contains("'num_key_value_heads'") && Contains("positive"));
  CHECK_THROWS_WITH(with(R"(, "num_key_value_heads": true)"),
                    Contains("'num_key_value_heads'") && Contains("boolean"));
  CHECK_THROWS_WITH(with(R"(, "rope_theta": 0)"), Contains("'rope_theta'") && Contains("positive"));
  CHECK_THROWS_WITH(with(R"(, "rope_theta": "1e6")"),
                    Contains("'rope_theta'") && Contains("number"));
  CHECK_THROWS_WITH(with(R"(, "rms_norm_eps": -1e-6)"), Contains("'rms_norm_eps'"));
  CHECK_THROWS_WITH(with(R"(, "rope_scaling": "yarn")"),
                    Contains("'rope_scaling'") && Contains("object"));
  CHECK_THROWS_WITH(with(R"(, "rope_scaling": {"rope_type": "linear", "factor": 0})"),
                    Contains("rope_scaling.factor"));
  CHECK_THROWS_WITH(with(R"(, "torch_dtype": 16)"),
                    Contains("'torch_dtype'") && Contains("string"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 0, "hidden_size": 512, "num_attention_heads": 4})"),
      Contains("'num_hidden_layers'") && Contains("positive"));
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 2.5, "hidden_size": 512, "num_attention_heads": 4})"),
      Contains("'num_hidden_layers'") && Contains("integer"));
  CHECK_THROWS_WITH(
      parse(
          R"({"text_config": {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": -4}})"),
      Contains("'text_config.num_attention_heads'"));
  // Integral floats are integers; null means "not set".
  CHECK(with(R"(, "head_dim": 64.0)").layers[0].head_dim.value == 64);
  CHECK(with(R"(, "head_dim": null)").layers[0].head_dim.value == 128);
}

TEST_CASE("rotary_dim and partial_rotary_factor validation", "[config][errors]") {
  auto with = [](const std::string& type, const std::string& extra) {
    return parse(R"({"model_type": ")" + type +
                 R"(", "num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 4)" +
                 extra + "}");
  };
  CHECK_THROWS_WITH(with("gptj", R"(, "rotary_dim": 63)"),
                    Contains("'rotary_dim'") && Contains("odd"));
  CHECK_THROWS_WITH(with("gptj", R"(, "rotary_dim": 256)"),
                    Contains("'rotary_dim'") && Contains("larger than head_dim 128"));
  CHECK_THROWS_WITH(with("gptj", R"(, "rotary_dim": 0)"),
                    Contains("'rotary_dim'") && Contains("positive"));
  CHECK_THROWS_WITH(with("phi", R"(, "partial_rotary_factor": 1.5)"),
                    Contains("'partial_rotary_factor'") && Contains("(0, 1]"));
  CHECK_THROWS_WITH(with("phi", R"(, "partial_rotary_factor": 0)"),
                    Contains("'partial_rotary_factor'") && Contains("(0, 1]"));
  CHECK_THROWS_WITH(with("phi", R"(, "partial_rotary_factor": -0.5)"), Contains("(0, 1]"));
  CHECK_THROWS_WITH(with("phi", R"(, "partial_rotary_factor": 0.0390625)"), Contains("odd"));  // 5
  // Engine arithmetic: int(head_dim * factor), truncated, as transformers, vLLM and sglang do.
  const auto inexact =
      with("phi", R"(, "partial_rotary_factor": 0.334)").layers[0].rotary_dim;  // 42.752
  CHECK(inexact.value == 42);
  CHECK(inexact.source ==
        "derived: int(head_dim * partial_rotary_factor) = int(128*0.334) = 42 (truncated, as "
        "transformers, vLLM and "
        "sglang compute it)");
  CHECK(with("phi", R"(, "partial_rotary_factor": 0.3)").layers[0].rotary_dim.value == 38);  // 38.4
  CHECK(with("nemotron", R"(, "partial_rotary_factor": 0.29, "head_dim": 100)")
            .layers[0]
            .rotary_dim.value == 28);  // 28.999...
  CHECK(with("phi", R"(, "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5})")
            .layers[0]
            .rotary_dim.value == 64);
  // Families whose modeling code rotates the whole head refuse a partial factor, also nested.
  CHECK_THROWS_WITH(with("llama", R"(, "partial_rotary_factor": 0.5)"),
                    Contains("'partial_rotary_factor'"));
  CHECK_THROWS_WITH(
      with("llama", R"(, "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5})"),
      Contains("'rope_parameters.partial_rotary_factor'"));
  CHECK_THROWS_WITH(with("llama", R"(, "rotary_pct": 0.25)"), Contains("'rotary_pct'"));
}

TEST_CASE("mrope_section must cover rotary_dim / 2 frequency pairs", "[config][errors]") {
  auto vl = [](const std::string& rope) {
    return parse(R"({"model_type": "qwen2_vl", "num_hidden_layers": 2, "hidden_size": 3584,
                     "num_attention_heads": 28, "num_key_value_heads": 4, "rope_scaling": )" +
                 rope + "}");
  };
  // Qwen2-VL-7B: head_dim 128, sections 16 + 24 + 24 = 64 pairs.
  CHECK(vl(R"({"type": "mrope", "mrope_section": [16, 24, 24]})").layers[1].rotary_dim.value ==
        128);
  CHECK_THROWS_AS(vl(R"({"type": "mrope", "mrope_section": [16, 24, 16]})"), fkv::ConfigError);
  CHECK_THROWS_WITH(vl(R"({"type": "mrope", "mrope_section": [16, 24, 16]})"),
                    Contains("key 'rope_scaling.mrope_section': = [16,24,16] covers 56 frequency "
                             "pairs, but layer 0 rotates rotary_dim 128 (") &&
                        Contains("which has 64") && Contains("sum(mrope_section) == rotary_dim"));
  CHECK_THROWS_WITH(vl(R"({"type": "mrope", "mrope_section": []})"),
                    Contains("'rope_scaling.mrope_section'") && Contains("list of section sizes"));
  CHECK_THROWS_WITH(vl(R"({"type": "mrope", "mrope_section": 64})"),
                    Contains("list of section sizes"));
  CHECK_THROWS_WITH(vl(R"({"type": "mrope", "mrope_section": [16, -24, 72]})"),
                    Contains("'rope_scaling.mrope_section[1]'") && Contains("negative"));
  // A partial rotary halves the pairs the sections must cover (GLM-4V: 0.5 of 128 -> 32 pairs).
  auto glm = [](const std::string& sections) {
    return parse(R"({"model_type": "glm4v_text", "num_hidden_layers": 2, "hidden_size": 4096,
                     "num_attention_heads": 32, "num_key_value_heads": 2,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                     "partial_rotary_factor": 0.5, "mrope_section": )" +
                 sections + "}}");
  };
  CHECK(glm("[8, 12, 12]").layers[0].rotary_dim.value == 64);
  CHECK_THROWS_WITH(glm("[16, 24, 24]"), Contains("covers 64 frequency pairs") &&
                                             Contains("rotates rotary_dim 64") &&
                                             Contains("partial_rotary_factor"));
  // Sections keyed by layer type are read for that type only; NoPE layers rotate nothing.
  auto q35 = parse(R"({"model_type": "qwen3_5_text", "num_hidden_layers": 4, "hidden_size": 1024,
                       "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
                       "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                                       "full_attention"],
                       "rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
                       "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                       "mrope_interleaved": true}})");
  CHECK(q35.layers[3].rotary_dim.value == 64);
}

TEST_CASE("head_dim must divide exactly", "[config][errors]") {
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 5120, "num_attention_heads": 96})"),
      Contains("test.json") && Contains("'hidden_size'") && Contains("not divisible") &&
          Contains("num_attention_heads 96") && Contains("head_dim"));
  // Without hidden_size, LlamaConfig's own default (4096) applies, as in transformers.
  CHECK(parse(R"({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 8})")
            .layers[0]
            .head_dim.source ==
        "derived: class default (LlamaConfig).hidden_size / num_attention_heads = 4096/8");
  CHECK_THROWS_WITH(
      parse(
          R"({"model_type": "olmo", "num_hidden_layers": 1, "num_attention_heads": 8, "hidden_size": null})"),
      Contains("'hidden_size'") && Contains("missing"));
}

TEST_CASE("empty layer lists are clear errors", "[config][errors]") {
  auto base = [](const std::string& type) {
    return R"({"model_type": ")" + type +
           R"(", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4, )";
  };
  CHECK_THROWS_WITH(parse(base("qwen3") + R"("layer_types": []})"),
                    Contains("'layer_types'") && Contains("empty"));
  // SmolLM3Config's no_rope_layer_interval (4) stands in for the empty list, as in transformers.
  CHECK(parse(base("smollm3") + R"("no_rope_layers": []})").layers[1].rotary_dim.value > 0);
  CHECK_THROWS_WITH(
      parse(base("smollm3") + R"("no_rope_layers": [], "no_rope_layer_interval": null})"),
      Contains("'no_rope_layers'") && Contains("empty"));
  CHECK_THROWS_WITH(parse(base("nemotron_h") + R"("hybrid_override_pattern": ""})"),
                    Contains("hybrid_override_pattern") && Contains("empty"));
  CHECK_THROWS_WITH(parse(base("qwen3") + R"("layer_types": ["full_attention"]})"),
                    Contains("'layer_types'") && Contains("1 entries") && Contains("2 layers"));
}

TEST_CASE("from_file names the path and the OS reason", "[config][errors]") {
  const std::string missing = tmp_path("does_not_exist.json");
  CHECK_THROWS_WITH(ModelConfig::from_file(missing),
                    Contains(missing) && Contains("No such file or directory"));
  CHECK_THROWS_WITH(ModelConfig::from_file(std::filesystem::temp_directory_path()),
                    Contains("directory"));

  const std::string bad = tmp_path("bad.json");
  {
    std::ofstream f(bad);
    f << "{\n\"num_hidden_layers\": 2\n\"x\": 1}\n";
  }
  CHECK_THROWS_WITH(ModelConfig::from_file(bad),
                    Contains(bad) && Contains("line 3") && Contains("column 3"));
  if (::geteuid() != 0) {  // root reads anything
    std::filesystem::permissions(bad, std::filesystem::perms::none);
    CHECK_THROWS_WITH(ModelConfig::from_file(bad), Contains(bad) && Contains("Permission denied"));
  }
  std::filesystem::remove(bad);
}

TEST_CASE("to_string of kinds", "[config]") {
  CHECK(fkv::to_string(LayerKind::FullAttention) == "full_attention");
  CHECK(fkv::to_string(LayerKind::SlidingAttention) == "sliding_attention");
  CHECK(fkv::to_string(LayerKind::NoAttention) == "none");
  CHECK(fkv::to_string(KNormKind::None) == "none");
  CHECK(fkv::to_string(KNormKind::Rms) == "rms");
  CHECK(fkv::to_string(KNormKind::RmsOnePlus) == "rms_one_plus");
}

// ------------------------------------------------------------------------------------------------
// Limits: hostile input gets a ConfigError, fast.

TEST_CASE("JSON nesting beyond the depth limit is a ConfigError, not a crash", "[config][limits]") {
  const auto nest = [](int depth) {
    return std::string(
               R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 1,)"
               R"( "rope_scaling": {"rope_type": "default", "x": )") +
           std::string(depth, '[') + std::string(depth, ']') + "}}";
  };
  CHECK_THROWS_WITH(parse(nest(100000)),
                    Contains("nested more than") && Contains(std::to_string(fkv::kMaxJsonDepth)));
  CHECK_THROWS_WITH(parse(nest(fkv::kMaxJsonDepth)),
                    Contains("nested more than"));     // 2 levels above it
  CHECK_NOTHROW(parse(nest(fkv::kMaxJsonDepth - 2)));  // exactly the limit
  // An already-parsed document is checked too (from_json(json)), without recursion.
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 200; ++i) deep = nlohmann::json::array({deep});
  nlohmann::json doc = {{"model_type", "llama"},
                        {"num_hidden_layers", 1},
                        {"hidden_size", 64},
                        {"num_attention_heads", 1},
                        {"extra", deep}};
  CHECK_THROWS_WITH(ModelConfig::from_json(doc, "deep.json"),
                    Contains("deep.json") && Contains("nested more than"));
}

TEST_CASE("input size, file kind and layer count are capped", "[config][limits]") {
  CHECK_THROWS_WITH(ModelConfig::from_file("/dev/zero"),
                    Contains("/dev/zero") && Contains("not a regular file"));
  const std::string big = tmp_path("big.json");
  {
    std::ofstream f(big);
    f << "{\"model_type\": \"llama\", \"pad\": \"";
    f << std::string(fkv::kMaxConfigBytes, 'x');
    f << "\"}";
  }
  CHECK_THROWS_WITH(ModelConfig::from_file(big),
                    Contains("bytes") && Contains(std::to_string(fkv::kMaxConfigBytes)));
  std::filesystem::remove(big);

  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(
      parse(R"({"model_type": "llama", "num_hidden_layers": 1000000, "hidden_size": 512,
                              "num_attention_heads": 4})"),
      Contains("'num_hidden_layers'") && Contains("at most " + std::to_string(fkv::kMaxLayers)));
  // The largest accepted model reads without pathological (e.g. quadratic) work: a few ms in a
  // release build. The bound is loose on purpose: this is a guard, not a benchmark, and an
  // ASan build on a loaded 2-core machine took 107 ms.
  auto c = parse(
      R"({"model_type": "qwen3", "num_hidden_layers": )" + std::to_string(fkv::kMaxLayers) +
      R"(, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128})");
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(c.layers.size() == (std::size_t)fkv::kMaxLayers);
  CHECK(ms < 1000.0);
}

// ------------------------------------------------------------------------------------------------
// Files written by Python's json (issue 24).

TEST_CASE("Python-JSON literals NaN, Infinity, -Infinity are read anywhere",
          "[config][errors][python-json]") {
  const std::string base =
      R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 4, )";
  // Mamba-2 / Bamba / Falcon-H1 / Nemotron-H / Granite-4 write "time_step_limit": [0.0, Infinity].
  auto c = parse(base + R"("time_step_limit": [0.0, Infinity], "a": -Infinity, "b": NaN,
                           "c": {"__float__": "Infinity"}, "d": "Infinity", "e": [NaN,-Infinity]})");
  CHECK(c.layers.size() == 2);
  // Inside strings the words are left alone.
  CHECK_NOTHROW(parse(base + R"("note": "NaN, Infinity", "x": "[Infinity]"})"));
  // A non-finite value where the layout needs a number stays an error, naming the key.
  // Read as numbers: the message says "not finite", never "a string", and the internal marker
  // that stands for the literal while parsing never shows (it once did: "\x01f" is one char).
  CHECK_THROWS_WITH(parse(base + R"("rope_theta": Infinity})"),
                    Contains("'rope_theta'") && Contains("finite") && Contains("Infinity") &&
                        !Contains("string") && !Contains("fkv-non-finite"));
  CHECK_THROWS_WITH(parse(base + R"("rope_theta": NaN})"),
                    Contains("'rope_theta'") && Contains("NaN") && !Contains("string") &&
                        !Contains("fkv-non-finite"));
  CHECK_THROWS_WITH(parse(base + R"("num_key_value_heads": -Infinity})"),
                    Contains("'num_key_value_heads'") && !Contains("fkv-non-finite"));
  CHECK_THROWS_WITH(parse(base + R"("rms_norm_eps": {"__float__": "-Infinity"}})"),
                    Contains("'rms_norm_eps'") && Contains("finite"));
  CHECK_THROWS_WITH(parse(base + R"("rope_theta": "Infinity"})"),
                    Contains("'rope_theta'") && Contains("finite"));
  CHECK_THROWS_WITH(parse(base + R"("num_key_value_heads": Infinity})"),
                    Contains("'num_key_value_heads'") && Contains("integer"));
  // A parse error after a literal still reports the byte offset of the original text.
  try {
    parse("{\"a\": Infinity,\n \"b\": ,}");
    FAIL("expected a ConfigError");
  } catch (const fkv::ConfigError& e) {
    CHECK_THAT(std::string(e.what()), Contains("line 2") && Contains("column 7"));
  }
  // A bare word that is not one of the three literals is still malformed.
  CHECK_THROWS_WITH(parse(base + R"("x": Inf})"), Contains("malformed JSON"));
  // From an nlohmann::json built by the caller: the transformers 5 spelling.
  nlohmann::json j = nlohmann::json::parse(base + R"("rope_theta": {"__float__": "NaN"}})");
  CHECK_THROWS_WITH(ModelConfig::from_json(j, "j"), Contains("'rope_theta'") && Contains("NaN"));
}
