// Tests of the explicit per-layer schema beside an HF config (src/config/explicit_schema.cpp,
// docs/config-rules.md section 5): which list is read, and how an entry's head_dim carries
// rotary_dim with it.
#include "config_test_util.hpp"

using config_test::parse;

namespace {

const std::string kQwen3 =
    R"("model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32, )"
    R"("num_key_value_heads": 8, "num_hidden_layers": 2)";

}  // namespace

TEST_CASE("the explicit schema is given once: top-level layers and fkv.layers together are refused",
          "[config][explicit]") {
  // Before: the top-level list was ignored silently (probe B, B8: ex/both_diff.json).
  const std::string both = R"({"layers": [{"num_kv_heads": 2, "head_dim": 64}],)"
                           R"( "fkv": {"layers": [{"num_kv_heads": 8, "head_dim": 128}]}})";
  CHECK_THROWS_AS(parse(both), fkv::ConfigError);
  CHECK_THROWS_WITH(parse(both), Contains("test.json") && Contains("key 'layers'") &&
                                     Contains("the top-level \"layers\" and as \"fkv.layers\"") &&
                                     Contains("keep one"));
  // Equal lists too: which copy was read would be a rule to remember.
  const std::string same = R"({"layers": [{"num_kv_heads": 8, "head_dim": 128}],)"
                           R"( "fkv": {"layers": [{"num_kv_heads": 8, "head_dim": 128}]}})";
  CHECK_THROWS_WITH(parse(same), Contains("keep one"));
  // Beside an HF config as well.
  CHECK_THROWS_WITH(parse("{" + kQwen3 +
                          R"(, "layers": [{"k_norm": "none"}, {"k_norm": "none"}],)"
                          R"( "fkv": {"layers": [{"k_norm": "none"}, {"k_norm": "none"}]}})"),
                    Contains("keep one"));
  // Either one alone is read.
  CHECK(parse(R"({"layers": [{"num_kv_heads": 2, "head_dim": 64}]})").layers[0].head_dim.value ==
        64);
  CHECK(parse(R"({"fkv": {"layers": [{"num_kv_heads": 2, "head_dim": 64}]}})")
            .layers[0]
            .num_kv_heads.source == "fkv.layers[0].num_kv_heads");
}

TEST_CASE("an entry's head_dim carries a whole-head rotary_dim with it", "[config][explicit]") {
  // Before: ex/hf_top_diff.json failed with "rotary_dim 128 is larger than head_dim 64", a
  // rotary_dim the user never wrote (the HF config's, derived from its head_dim 128).
  for (const char* where : {"layers", "fkv"}) {
    INFO(where);
    const std::string list =
        R"([{"num_kv_heads": 2, "head_dim": 64}, {"num_kv_heads": 2, "head_dim": 256}])";
    const std::string text = std::string(where) == "layers"
                                 ? "{" + kQwen3 + R"(, "layers": )" + list + "}"
                                 : "{" + kQwen3 + R"(, "fkv": {"layers": )" + list + "}}";
    const ModelConfig c = parse(text);
    const std::string at = std::string(where) == "layers" ? "layers" : "fkv.layers";
    CHECK(c.layers[0].head_dim.value == 64);
    CHECK(c.layers[0].rotary_dim.value == 64);
    CHECK_THAT(c.layers[0].rotary_dim.source,
               Contains("= head_dim 64 (" + at +
                        "[0].head_dim): the HF config rotates the whole "
                        "head") &&
                   Contains("default: head_dim (full rotary"));
    CHECK(c.layers[1].rotary_dim.value == 256);         // larger: the whole new head, not 128 of it
    CHECK(c.layers[1].k_norm.value == KNormKind::Rms);  // the rest stays the HF config's
  }
  // The same head_dim changes nothing.
  const ModelConfig same = parse("{" + kQwen3 + R"(, "layers": [{"head_dim": 128}, {}]})");
  CHECK_THAT(same.layers[0].rotary_dim.source, Contains("default: head_dim (full rotary"));
  // An explicit rotary_dim wins.
  const ModelConfig given =
      parse("{" + kQwen3 + R"(, "layers": [{"head_dim": 64, "rotary_dim": 32}, {}]})");
  CHECK(given.layers[0].rotary_dim.value == 32);
  CHECK(given.layers[1].rotary_dim.value == 128);
  // An odd head_dim that rotary_dim would follow.
  CHECK_THROWS_WITH(parse("{" + kQwen3 + R"(, "layers": [{"head_dim": 65}, {}]})"),
                    Contains("key 'layers[0].head_dim'") && Contains("head_dim 65 is odd") &&
                        Contains("give an even \"rotary_dim\""));
}

TEST_CASE("an entry's head_dim over a partial rotary_dim needs a rotary_dim",
          "[config][explicit]") {
  // GPT-NeoX: rotary_pct 0.25 of head_dim 32 = 8. Which part of a new head to rotate is not
  // derivable, so the entry must say it.
  const std::string neox =
      R"("model_type": "gpt_neox", "hidden_size": 128, "num_attention_heads": 4, )"
      R"("num_hidden_layers": 1, "rotary_pct": 0.25)";
  REQUIRE(parse("{" + neox + "}").layers[0].rotary_dim.value == 8);
  CHECK_THROWS_WITH(parse("{" + neox + R"(, "fkv": {"layers": [{"head_dim": 64}]}})"),
                    Contains("key 'fkv.layers[0].head_dim'") &&
                        Contains("head_dim 64 replaces the HF config's head_dim 32") &&
                        Contains("whose rotary_dim 8 (derived: int(head_dim * rotary_pct)") &&
                        Contains("rotates part of it; give \"rotary_dim\" in this entry"));
  CHECK(parse("{" + neox + R"(, "fkv": {"layers": [{"head_dim": 64, "rotary_dim": 16}]}})")
            .layers[0]
            .rotary_dim.value == 16);
}

TEST_CASE("an entry's head_dim keeps a NoPE layer without RoPE", "[config][explicit]") {
  // SmolLM3: no_rope_layers[i] == 0 is a layer without RoPE (rotary_dim 0).
  const ModelConfig c =
      parse(R"({"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16,)"
            R"( "num_key_value_heads": 4, "num_hidden_layers": 2, "no_rope_layers": [1, 0],)"
            R"( "fkv": {"layers": [{"head_dim": 64}, {"head_dim": 64}]}})");
  CHECK(c.layers[0].rotary_dim.value == 64);
  CHECK(c.layers[1].rotary_dim.value == 0);
}

TEST_CASE("a rotary_dim larger than the HF config's head_dim names where that came from",
          "[config][explicit]") {
  CHECK_THROWS_WITH(parse("{" + kQwen3 + R"(, "layers": [{"rotary_dim": 256}, {}]})"),
                    Contains("key 'layers[0].rotary_dim'") &&
                        Contains("rotary_dim 256 is larger than head_dim 128 (") &&
                        Contains("give \"head_dim\" in this entry too"));
}
