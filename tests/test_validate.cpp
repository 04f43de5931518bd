// validate: strict mode (the seed's texts, kept exactly) and grouped plans.
//
// Synthetic configs use the explicit per-layer schema and put each kind of mismatch at a random
// layer of a random-length model, with random non-attention layers mixed in so that model
// numbering differs from attention order. The seed is printed; set FKV_TEST_SEED to replay.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/rope.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

using fkv::ConfigError;
using fkv::ModelConfig;
using fkv::ValidationMode;
using nlohmann::json;

namespace {

std::mt19937& rng() {
  static std::mt19937 gen = [] {
    unsigned seed = std::random_device{}();
    if (const char* s = std::getenv("FKV_TEST_SEED")) seed = static_cast<unsigned>(std::stoul(s));
    std::cerr << "test_validate: random seed " << seed << " (FKV_TEST_SEED=" << seed
              << " replays it)\n";
    return std::mt19937(seed);
  }();
  return gen;
}

int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }

// One entry of the explicit schema.
struct Layer {
  std::string kind = "full_attention";
  int kv = 8;
  int hd = 128;
  int rd = 128;
  bool neox = true;
  std::string k_norm = "rms";
  double theta = 1000000.0;
  json scaling = nullptr;  // null: no rope_scaling key

  json to_json() const {
    if (kind == "none") return {{"kind", "none"}};
    json j = {{"kind", kind},     {"num_kv_heads", kv},    {"head_dim", hd},
              {"rotary_dim", rd}, {"is_neox_style", neox}, {"k_norm", k_norm},
              {"eps", 1e-6},      {"rope_theta", theta}};
    if (!scaling.is_null()) j["rope_scaling"] = scaling;
    return j;
  }
};

ModelConfig load(const std::vector<Layer>& layers) {
  json doc = {{"layers", json::array()}};
  for (const auto& l : layers) doc["layers"].push_back(l.to_json());
  return ModelConfig::from_json(doc, "synthetic");
}

// A random model: first attention layer at `first`, layers before it are not attention, later
// layers are attention with probability 3/4, and `target` (> first) is attention.
struct Shape {
  int n, first, target;
};

Shape random_shape() {
  const int n = uniform(2, 48);
  const int first = uniform(0, std::min(n - 2, 4));
  const int target = uniform(first + 1, n - 1);
  return {n, first, target};
}

std::vector<Layer> uniform_layers(const Shape& s) {
  std::vector<Layer> layers(static_cast<size_t>(s.n));
  for (int i = 0; i < s.n; ++i) {
    if (i < s.first || (i > s.first && i != s.target && uniform(0, 3) == 0))
      layers[i].kind = "none";
    else if (uniform(0, 1) == 0)
      layers[i].kind = "sliding_attention";
  }
  return layers;
}

std::string message_of(const ModelConfig& config) {
  try {
    fkv::validate(config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

// A message matched literally and with the sibling regex of its kind.
void check_message(const std::string& got, const std::string& kind, const std::string& expected,
                   const std::string& found, int layer) {
  const std::string literal = kind + " mismatch across layers for fused KV path: expected " +
                              expected + ", got " + found + " at layer " + std::to_string(layer) +
                              ".";
  CHECK(got == literal);
  const std::regex re(
      kind +
      " mismatch across layers for fused KV path: expected (.+?), got (.+?) at layer (.+?)\\.");
  std::smatch m;
  REQUIRE(std::regex_match(got, m, re));
  CHECK(m[1] == expected);
  CHECK(m[2] == found);
  CHECK(m[3] == std::to_string(layer));
}

ModelConfig real(const std::string& name) {
  return ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/" + name + ".json");
}

std::vector<int> range(int lo, int hi, int step = 1) {
  std::vector<int> v;
  for (int i = lo; i < hi; i += step) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("a uniform synthetic model validates to its reference spec", "[validate]") {
  for (int rep = 0; rep < 20; ++rep) {
    const Shape s = random_shape();
    INFO("n=" << s.n << " first=" << s.first);
    auto layers = uniform_layers(s);
    const ModelConfig config = load(layers);
    const fkv::AttentionSpec spec = fkv::validate(config);
    CHECK(spec.num_kv_heads == 8);
    CHECK(spec.head_dim == 128);
    CHECK(spec.rotary_dim == 128);
    CHECK(spec.is_neox_style);
    CHECK(spec.k_norm == fkv::KNormKind::Rms);
    CHECK(spec.rope.theta == 1000000.0);

    std::vector<int> attention, skipped;
    for (int i = 0; i < s.n; ++i) (layers[i].kind == "none" ? skipped : attention).push_back(i);
    for (auto mode : {ValidationMode::Strict, ValidationMode::Grouped}) {
      const fkv::Plan plan = fkv::make_plan(config, mode);
      REQUIRE(plan.groups.size() == 1);
      CHECK(plan.groups[0].attn == spec);
      CHECK(plan.groups[0].layers == attention);
      CHECK(plan.skipped_layers == skipped);
    }
  }
}

TEST_CASE("each strict mismatch is reported at its random layer with the seed's text",
          "[validate]") {
  for (int rep = 0; rep < 10; ++rep) {
    const Shape s = random_shape();
    INFO("n=" << s.n << " first=" << s.first << " target=" << s.target);
    auto base = uniform_layers(s);
    // A second, different mismatch after the target must not be the one reported.
    auto with_later_noise = [&](std::vector<Layer> layers) {
      for (int i = s.target + 1; i < s.n; ++i)
        if (layers[i].kind != "none") {
          layers[i].kv = 2;
          layers[i].hd = 64;
          layers[i].rd = 64;
          break;
        }
      return layers;
    };

    struct Case {
      const char* kind;
      void (*mutate)(Layer&);
      const char* expected;
      const char* found;
    };
    const Case cases[] = {
        {"num_kv_heads", [](Layer& l) { l.kv = 4; }, "8", "4"},
        {"head_dim", [](Layer& l) { l.hd = 256; }, "128", "256"},
        {"RoPE config", [](Layer& l) { l.rd = 64; }, "(rotary_dim=128, neox=True)",
         "(rotary_dim=64, neox=True)"},
        {"RoPE config", [](Layer& l) { l.neox = false; }, "(rotary_dim=128, neox=True)",
         "(rotary_dim=128, neox=False)"},
        {"RoPE config", [](Layer& l) { l.rd = 0; }, "(rotary_dim=128, neox=True)",
         "(rotary_dim=0, neox=True)"},
        {"RoPE frequency", [](Layer& l) { l.theta = 10000.0; },
         "(theta=1000000.0, scaling=default)", "(theta=10000.0, scaling=default)"},
        {"RoPE frequency",
         [](Layer& l) {
           l.scaling = {{"rope_type", "linear"}, {"factor", 8.0}};
         },
         "(theta=1000000.0, scaling=default)", "(theta=1000000.0, scaling=linear(factor=8.0))"},
        {"K norm", [](Layer& l) { l.k_norm = "none"; }, "rms", "none"},
    };
    for (const Case& c : cases) {
      INFO("case: " << c.kind << " -> " << c.found);
      auto layers = base;
      c.mutate(layers[s.target]);
      check_message(message_of(load(with_later_noise(layers))), c.kind, c.expected, c.found,
                    s.target);
    }
  }
}

TEST_CASE("strict checks run in the seed's order within a layer", "[validate]") {
  const Shape s = random_shape();
  INFO("n=" << s.n << " target=" << s.target);
  auto layers = uniform_layers(s);
  Layer& t = layers[s.target];

  t.kv = 2;
  t.hd = 64;
  t.rd = 32;
  t.theta = 500.0;
  t.k_norm = "none";
  check_message(message_of(load(layers)), "num_kv_heads", "8", "2", s.target);
  t.kv = 8;
  check_message(message_of(load(layers)), "head_dim", "128", "64", s.target);
  t.hd = 128;
  check_message(message_of(load(layers)), "RoPE config", "(rotary_dim=128, neox=True)",
                "(rotary_dim=32, neox=True)", s.target);
  t.rd = 128;
  check_message(message_of(load(layers)), "RoPE frequency", "(theta=1000000.0, scaling=default)",
                "(theta=500.0, scaling=default)", s.target);
  t.theta = 1000000.0;
  check_message(message_of(load(layers)), "K norm", "rms", "none", s.target);
  t.k_norm = "rms";
  CHECK_NOTHROW(fkv::validate(load(layers)));
}

TEST_CASE("the first mismatching layer wins, whatever its kind", "[validate]") {
  // kv heads differ at a later layer than a head_dim mismatch: the earlier layer is reported.
  std::vector<Layer> layers(6);
  layers[2].hd = 64;
  layers[2].rd = 64;
  layers[4].kv = 1;
  check_message(message_of(load(layers)), "head_dim", "128", "64", 2);
}

TEST_CASE("ConfigError is an invalid_argument", "[validate]") {
  std::vector<Layer> layers(3);
  layers[1].kv = 1;
  CHECK_THROWS_AS(fkv::validate(load(layers)), std::invalid_argument);
  CHECK_THROWS_AS(fkv::make_plan(load(layers), ValidationMode::Strict), ConfigError);
  CHECK(fkv::make_plan(load(layers), ValidationMode::Grouped).groups.size() == 2);
}

TEST_CASE("an invalid rotary/head dim pair on the reference layer", "[validate]") {
  // config rejects these when reading a file; validate() must hold on configs built in code too.
  for (auto [rd, hd] :
       std::vector<std::pair<int, int>>{{63, 128}, {-2, 128}, {256, 128}, {130, 128}}) {
    ModelConfig config = load(std::vector<Layer>(3));
    config.layers[0].rotary_dim.value = rd;
    config.layers[0].head_dim.value = hd;
    const std::string expected =
        "Invalid fused KV rotary/head dim pair: rotary_dim=" + std::to_string(rd) +
        ", head_dim=" + std::to_string(hd) + ".";
    CHECK(message_of(config) == expected);
    CHECK_THROWS_WITH(fkv::make_plan(config, ValidationMode::Grouped), expected);
  }
  // Grouped mode checks every layer; strict mode reports the difference from the reference.
  ModelConfig config = load(std::vector<Layer>(4));
  config.layers[2].rotary_dim.value = 7;
  CHECK_THROWS_WITH(fkv::make_plan(config, ValidationMode::Grouped),
                    "Invalid fused KV rotary/head dim pair: rotary_dim=7, head_dim=128.");
  check_message(message_of(config), "RoPE config", "(rotary_dim=128, neox=True)",
                "(rotary_dim=7, neox=True)", 2);
  // Valid edge cases: rotary_dim 0 (NoPE) and rotary_dim == head_dim.
  std::vector<Layer> nope(2);
  nope[0].rd = nope[1].rd = 0;
  CHECK(fkv::validate(load(nope)).rotary_dim == 0);
}

TEST_CASE("reading rejects an odd rotary_dim before validation", "[validate]") {
  std::vector<Layer> layers(2);
  layers[1].rd = 63;
  CHECK_THROWS_AS(load(layers), ConfigError);
}

TEST_CASE("unsupported layers name the layer in both modes", "[validate]") {
  const Shape s = random_shape();
  INFO("n=" << s.n << " target=" << s.target);
  ModelConfig config = load(uniform_layers(s));
  config.layers[s.target].unsupported = "K norm across all heads (test) is not a per-head norm";
  for (auto mode : {ValidationMode::Strict, ValidationMode::Grouped}) {
    try {
      fkv::make_plan(config, mode);
      FAIL("no error");
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CHECK(what.find("layer " + std::to_string(s.target) + ": ") != std::string::npos);
      CHECK(what.find("K norm across all heads (test)") != std::string::npos);
      CHECK(what.find("synthetic") != std::string::npos);
    }
  }
  // MLA in a real config.
  CHECK_THROWS_WITH(fkv::validate(real("deepseek-v3")),
                    Catch::Contains("layer 0:") && Catch::Contains("MLA"));
}

TEST_CASE("a model without attention layers is a clear error", "[validate]") {
  std::vector<Layer> layers(static_cast<size_t>(uniform(1, 8)));
  for (auto& l : layers) l.kind = "none";
  const ModelConfig config = load(layers);
  CHECK_THROWS_WITH(fkv::validate(config), Catch::Contains("no attention layer"));
  CHECK_THROWS_WITH(fkv::make_plan(config, ValidationMode::Grouped),
                    Catch::Contains("no attention layer"));
  CHECK_THROWS_AS(fkv::validate(ModelConfig{}), ConfigError);
}

TEST_CASE("grouped mode partitions random layers by spec in order of first appearance",
          "[validate]") {
  for (int rep = 0; rep < 20; ++rep) {
    // Distinct specs; each differs from the first in one field.
    std::vector<Layer> kinds(7);
    kinds[1].kv = 4;
    kinds[2].hd = 64, kinds[2].rd = 64;
    kinds[3].neox = false;
    kinds[4].theta = 10000.0;
    kinds[5].k_norm = "rms_one_plus";
    kinds[6].rd = 0;
    const int n = uniform(1, 40);
    std::vector<Layer> layers;
    std::vector<int> order;  // kind index of each group, in order of first appearance
    std::vector<std::vector<int>> expected;
    std::vector<int> skipped;
    for (int i = 0; i < n; ++i) {
      const int k = uniform(-1, 6);
      if (k < 0) {
        layers.push_back(Layer{});
        layers.back().kind = "none";
        skipped.push_back(i);
        continue;
      }
      Layer l = kinds[k];
      // NoPE layers share a group whatever their (unused) frequencies.
      if (k == 6) l.theta = uniform(1, 5) * 1000.0;
      layers.push_back(l);
      auto it = std::find(order.begin(), order.end(), k);
      if (it == order.end()) {
        order.push_back(k);
        expected.push_back({});
        it = order.end() - 1;
      }
      expected[it - order.begin()].push_back(i);
    }
    if (order.empty()) continue;
    INFO("n=" << n << " groups=" << order.size());
    const fkv::Plan plan = fkv::make_plan(load(layers), ValidationMode::Grouped);
    REQUIRE(plan.groups.size() == order.size());
    for (size_t g = 0; g < order.size(); ++g) {
      CHECK(plan.groups[g].layers == expected[g]);
      CHECK(plan.groups[g].attn.num_kv_heads == kinds[order[g]].kv);
      CHECK(plan.groups[g].attn.head_dim == kinds[order[g]].hd);
      CHECK(plan.groups[g].attn.rotary_dim == kinds[order[g]].rd);
      CHECK(plan.groups[g].attn.is_neox_style == kinds[order[g]].neox);
    }
    CHECK(plan.skipped_layers == skipped);
    if (order.size() > 1) CHECK_THROWS_AS(fkv::validate(load(layers)), ConfigError);
  }
}

TEST_CASE("AttentionSpec equality covers every field", "[validate]") {
  fkv::AttentionSpec a;
  a.num_kv_heads = 8, a.head_dim = 128, a.rotary_dim = 64, a.k_norm = fkv::KNormKind::Rms;
  a.rope.theta = 1e6;
  CHECK(a == a);
  auto b = a;
  b.num_kv_heads = 4;
  CHECK_FALSE(a == b);
  b = a, b.head_dim = 64;
  CHECK_FALSE(a == b);
  b = a, b.rotary_dim = 128;
  CHECK_FALSE(a == b);
  b = a, b.is_neox_style = false;
  CHECK_FALSE(a == b);
  b = a, b.k_norm = fkv::KNormKind::RmsOnePlus;
  CHECK_FALSE(a == b);
  b = a, b.rope.theta = 1e4;
  CHECK_FALSE(a == b);
  b = a, b.rope.scaling_type = "yarn";
  CHECK_FALSE(a == b);
  b = a, b.rope.scaling = {{"factor", 4.0}};
  CHECK_FALSE(a == b);
}

TEST_CASE("Python-style formatting of values in messages", "[validate]") {
  CHECK(fkv::format_float(1000000.0) == "1000000.0");
  CHECK(fkv::format_float(150000.0) == "150000.0");
  CHECK(fkv::format_float(0.5) == "0.5");
  CHECK(fkv::format_float(1e-6) == "1e-06");
  CHECK(fkv::format_float(1.5e-5) == "1.5e-05");
  CHECK(fkv::format_float(0.0001) == "0.0001");
  CHECK(fkv::format_float(1e16) == "1e+16");
  CHECK(fkv::format_float(123.25) == "123.25");
  CHECK(fkv::format_float(-2.0) == "-2.0");
  CHECK(fkv::format_bool(true) == "True");
  CHECK(fkv::format_bool(false) == "False");
  fkv::RopeFrequencies rope;
  rope.theta = 150000;
  rope.scaling_type = "yarn";
  rope.scaling = {{"factor", 32.0}, {"beta_fast", 32.0}, {"truncate", false}};
  CHECK(fkv::format_rope(rope) ==
        "theta=150000.0, scaling=yarn(beta_fast=32.0, factor=32.0, truncate=False)");
}

TEST_CASE("real configs: strict verdicts and grouped plans", "[validate][real]") {
  SECTION("qwen3-8b is uniform") {
    const auto spec = fkv::validate(real("qwen3-8b"));
    CHECK(spec.num_kv_heads == 8);
    CHECK(spec.head_dim == 128);
    CHECK(spec.k_norm == fkv::KNormKind::Rms);
  }
  SECTION("gpt-oss-20b alternates sliding/full with one rope: one group") {
    const auto config = real("gpt-oss-20b");
    CHECK(config.layers[0].kind.value == fkv::LayerKind::SlidingAttention);
    CHECK(config.layers[1].kind.value == fkv::LayerKind::FullAttention);
    CHECK_NOTHROW(fkv::validate(config));
    const auto plan = fkv::make_plan(config, ValidationMode::Grouped);
    REQUIRE(plan.groups.size() == 1);
    CHECK(plan.groups[0].layers == range(0, 24));
    CHECK(plan.groups[0].attn.rope.scaling_type == "yarn");
  }
  SECTION("smollm3-3b: NoPE every 4th layer -> 2 groups, strict fails at layer 3") {
    const auto config = real("smollm3-3b");
    check_message(message_of(config), "RoPE config", "(rotary_dim=128, neox=True)",
                  "(rotary_dim=0, neox=True)", 3);
    const auto plan = fkv::make_plan(config, ValidationMode::Grouped);
    REQUIRE(plan.groups.size() == 2);
    CHECK(plan.groups[1].layers == range(3, 36, 4));
    CHECK(plan.groups[0].layers.size() == 27);
    CHECK(plan.groups[1].attn.rotary_dim == 0);
    CHECK(plan.groups[0].attn.rotary_dim == 128);
  }
  SECTION("gemma3-4b: local/global frequencies -> 2 groups, strict fails at layer 5") {
    const auto config = real("gemma3-4b-it");
    CHECK(message_of(config) ==
          "RoPE frequency mismatch across layers for fused KV path: expected (theta=10000.0, "
          "scaling=default), got (theta=1000000.0, scaling=linear(factor=8.0)) at layer 5.");
    const auto plan = fkv::make_plan(config, ValidationMode::Grouped);
    REQUIRE(plan.groups.size() == 2);
    CHECK(plan.groups[1].layers == range(5, 34, 6));
    CHECK(plan.groups[0].layers.size() == 29);
    CHECK(plan.groups[0].attn.rope.theta == 10000.0);
    CHECK(plan.groups[1].attn.rope.theta == 1000000.0);
  }
  SECTION("qwen3.5-9b: linear-attention layers are skipped, numbering kept") {
    const auto config = real("qwen3.5-9b");
    const auto plan = fkv::make_plan(config, ValidationMode::Strict);
    REQUIRE(plan.groups.size() == 1);
    CHECK(plan.groups[0].layers == range(3, 32, 4));
    CHECK(plan.skipped_layers.size() == 24);
    CHECK(plan.skipped_layers.front() == 0);
    CHECK(plan.groups[0].attn.k_norm == fkv::KNormKind::RmsOnePlus);
    CHECK(plan.groups[0].attn.rotary_dim == 64);
    CHECK(fkv::make_plan(config, ValidationMode::Grouped).groups.size() == 1);
  }
}

// ------------------------------------------------------------------------------------------------
// Every registry entry has a config with its expected verdict.

namespace {

// The strict verdict of a config: a spec, or an error containing `error`.
struct Verdict {
  std::string config;  // a tests/data file name ("x.json") or the JSON text itself
  int kv = 0, hd = 0, rd = 0;
  bool neox = true;
  fkv::KNormKind k_norm = fkv::KNormKind::None;
  std::string error;  // non-empty: strict validation fails with this in the message
};

ModelConfig read_verdict_config(const Verdict& v) {
  if (v.config.size() > 5 && v.config.substr(v.config.size() - 5) == ".json")
    return ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/" + v.config);
  return ModelConfig::from_json(std::string_view(v.config), "minimal.json");
}

// Strict validation of `config` gives verdict `v`: its error text, or its attention spec.
void check_verdict(const ModelConfig& config, const Verdict& v) {
  if (!v.error.empty()) {
    CHECK_THROWS_WITH(fkv::validate(config), Catch::Contains(v.error));
    return;
  }
  const fkv::AttentionSpec spec = fkv::validate(config);
  CHECK(spec.num_kv_heads == v.kv);
  CHECK(spec.head_dim == v.hd);
  CHECK(spec.rotary_dim == v.rd);
  CHECK(spec.is_neox_style == v.neox);
  CHECK(spec.k_norm == v.k_norm);
}

using K = fkv::KNormKind;

// Real configs where tests/data has one; otherwise a minimal config shaped like the config
// class's __init__ defaults (fewer layers), naming every key the entry needs.
const std::map<std::string, Verdict>& verdicts() {
  static const std::map<std::string, Verdict> v = {
      {"DFlash draft", {"dflash-qwen3-4b-draft.json", 8, 128, 128, true, K::Rms, ""}},
      {"Llama", {"llama3.1-8b-instruct.json", 8, 128, 128, true, K::None, ""}},
      {"Mistral",
       {R"({"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "head_dim": null, "sliding_window": 4096, "rope_theta": 10000.0,
                      "max_position_embeddings": 32768})",
        8, 128, 128, true, K::None, ""}},
      {"Mixtral",
       {R"({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "rope_theta": 1000000.0, "max_position_embeddings": 32768})",
        8, 128, 128, true, K::None, ""}},
      {"Qwen2 / Qwen2.5",
       {R"({"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                              "num_key_value_heads": 32, "use_sliding_window": false, "max_window_layers": 28,
                              "rope_theta": 10000.0, "max_position_embeddings": 32768})",
        32, 128, 128, true, K::None, ""}},
      {"Qwen3", {"qwen3-8b.json", 8, 128, 128, true, K::Rms, ""}},
      {"Qwen3-Next / Qwen3.5", {"qwen3.5-9b.json", 4, 256, 64, true, K::RmsOnePlus, ""}},
      {"Gemma",
       {R"({"model_type": "gemma", "num_hidden_layers": 2, "hidden_size": 3072, "num_attention_heads": 16,
                    "num_key_value_heads": 16, "head_dim": 256, "rope_theta": 10000.0, "max_position_embeddings": 8192})",
        16, 256, 256, true, K::None, ""}},
      {"Gemma 2", {"gemma2-9b-it.json", 8, 256, 256, true, K::None, ""}},
      {"Gemma 3", {"gemma3-4b-it.json", 0, 0, 0, true, K::None, "RoPE frequency mismatch"}},
      {"Phi", {"phi-phi-2.json", 32, 80, 32, true, K::None, ""}},
      {"Phi-3", {"phi3-phi-3.5-vision-text.json", 32, 96, 96, true, K::None, ""}},
      {"StableLM",
       {R"({"model_type": "stablelm", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 32,
                       "num_key_value_heads": 32, "partial_rotary_factor": 0.25, "qk_layernorm": false,
                       "rope_theta": 10000, "max_position_embeddings": 4096})",
        32, 80, 20, true, K::None, ""}},
      {"GLM / GLM-4",
       {R"({"model_type": "glm", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                          "num_key_value_heads": 2, "head_dim": 128, "rope_theta": 10000.0, "max_position_embeddings": 131072})",
        2, 128, 64, false, K::None, ""}},
      {"GLM-4.5 (MoE)", {"glm4-moe-glm-4.5.json", 8, 128, 64, true, K::Rms, ""}},
      {"ChatGLM",
       {R"({"model_type": "chatglm", "num_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "kv_channels": 128, "multi_query_attention": true, "multi_query_group_num": 2, "seq_length": 32768})",
        2, 128, 64, false, K::None, ""}},
      {"Cohere (Command R)", {"cohere-command-r-v01.json", 64, 128, 128, false, K::None, ""}},
      {"Cohere2 (Command R7B / A)",
       {R"({"model_type": "cohere2", "num_hidden_layers": 4, "hidden_size": 4096,
                                        "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096,
                                        "rope_theta": 50000, "max_position_embeddings": 8192})",
        0, 0, 0, true, K::None, "RoPE config mismatch"}},
      {"DeepSeek-V2/V3, Kimi-K2 (MLA)", {"kimi-k2.json", 0, 0, 0, true, K::None, "MLA"}},
      {"OLMo",
       {R"({"model_type": "olmo", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                   "rope_theta": 10000.0, "max_position_embeddings": 2048})",
        32, 128, 128, true, K::None, ""}},
      {"OLMo 2 / OLMo 3",
       {"olmo3.1-32b-instruct.json", 0, 0, 0, true, K::None, "across all heads"}},
      {"Granite",
       {R"({"model_type": "granite", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "rope_theta": 10000.0, "max_position_embeddings": 2048})",
        8, 128, 128, true, K::None, ""}},
      {"Nemotron",
       {R"({"model_type": "nemotron", "num_hidden_layers": 2, "hidden_size": 6144, "num_attention_heads": 48,
                       "num_key_value_heads": 8, "head_dim": 128, "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
                       "max_position_embeddings": 4096})",
        8, 128, 64, true, K::None, ""}},
      {"Nemotron-H",
       {R"({"model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 4096, "num_attention_heads": 32,
                         "num_key_value_heads": 8, "head_dim": 128, "hybrid_override_pattern": "M*M*"})",
        8, 128, 0, true, K::None, ""}},
      {"Jamba",
       {R"({"model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 4096, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "attn_layer_period": 8, "attn_layer_offset": 4})",
        8, 128, 0, true, K::None, ""}},
      {"InternLM2",
       {R"({"model_type": "internlm2", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "rope_theta": 1000000, "max_position_embeddings": 32768})",
        8, 128, 128, true, K::None, ""}},
      {"gpt-oss", {"gpt-oss-20b.json", 8, 64, 64, true, K::None, ""}},
      {"SmolLM3", {"smollm3-3b.json", 0, 0, 0, true, K::None, "RoPE config mismatch"}},
      {"Llama 4",
       {R"({"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 5120, "num_attention_heads": 40,
                      "num_key_value_heads": 8, "head_dim": 128, "no_rope_layers": [1, 1, 1, 0], "use_qk_norm": true,
                      "rope_theta": 500000.0, "max_position_embeddings": 131072})",
        0, 0, 0, true, K::None, "L2 norm"}},
      {"EXAONE 4",
       {R"({"model_type": "exaone4", "num_hidden_layers": 4, "hidden_size": 5120, "num_attention_heads": 40,
                       "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 4096,
                       "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                       "rope_theta": 1000000.0, "max_position_embeddings": 131072})",
        0, 0, 0, true, K::None, "RoPE config mismatch"}},
      {"LFM2", {"lfm2.5-vl-1.6b.json", 8, 64, 64, true, K::Rms, ""}},
      {"GPT-J",
       {R"({"model_type": "gptj", "n_layer": 2, "n_embd": 4096, "n_head": 16, "rotary_dim": 64,
                    "n_positions": 2048})",
        16, 256, 64, false, K::None, ""}},
      {"GPT-J (gpt_neo format)", {"gptj-6b-neo-format.json", 16, 256, 64, false, K::None, ""}},
      {"Qwen2-VL / Qwen2.5-VL (text)",
       {"qwen2-vl-7b-instruct.json", 4, 128, 128, true, K::None, ""}},
      {"ERNIE 4.5", {"ernie4.5-0.3b.json", 2, 128, 128, false, K::None, ""}},
      {"ERNIE 4.5 MoE", {"ernie4.5-21b-a3b.json", 4, 128, 128, false, K::None, ""}},
      {"Hunyuan (dense / MoE)",
       {"hunyuan-a13b-instruct.json", 0, 0, 0, true, K::None, "K norm after RoPE"}},
      {"MiniMax-Text-01 / M1", {"minimax-text-01.json", 8, 128, 64, true, K::None, ""}},
      {"MiniMax-M2", {"minimax-m2.json", 0, 0, 0, true, K::None, "K norm across all heads"}},
      {"EXAONE 3 / 3.5", {"exaone3.0-7.8b-instruct.json", 8, 128, 128, true, K::None, ""}},
      {"InternLM3", {"internlm3-8b-instruct.json", 2, 128, 128, true, K::None, ""}},
      {"Starcoder2", {"starcoder2-3b.json", 2, 128, 128, true, K::None, ""}},
      // Issue 24 variants.
      {"Qwen3-VL / Qwen3-Omni (text)",
       {"qwen3-vl-8b-instruct.json", 8, 128, 128, true, K::Rms, ""}},
      {"Qwen3-like",
       {R"({"model_type": "dots1", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                    "num_key_value_heads": 32, "head_dim": 128, "rope_theta": 10000.0})",
        32, 128, 128, true, K::Rms, ""}},
      {"Ministral",
       {R"({"model_type": "ministral", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 32768,
                        "layer_types": ["full_attention", "sliding_attention"], "rope_theta": 100000000.0})",
        8, 128, 128, true, K::None, ""}},
      {"Qwen2-like",
       {R"({"model_type": "cwm", "num_hidden_layers": 4, "hidden_size": 6144, "num_attention_heads": 48,
                  "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 8192,
                  "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"],
                  "rope_theta": 1000000.0})",
        8, 128, 128, true, K::None, ""}},
      {"Apertus",
       {R"({"model_type": "apertus", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "rope_theta": 12000000.0})",
        8, 128, 128, true, K::Rms, ""}},
      {"Llama-like",
       {R"({"model_type": "phimoe", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "rope_theta": 1000000.0, "sliding_window": null})",
        8, 128, 128, true, K::None, ""}},
      {"Helium",
       {R"({"model_type": "helium", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 20,
                     "num_key_value_heads": 20, "head_dim": 128, "rope_theta": 100000.0})",
        20, 128, 128, false, K::None, ""}},
      {"GPT-NeoX", {"pythia-14m-gpt-neox.json", 4, 32, 8, true, K::None, ""}},
      {"AFMoE (Trinity)",
       {R"({"model_type": "afmoe", "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 32,
                    "num_key_value_heads": 4, "head_dim": 128, "sliding_window": 2048,
                    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                    "rope_theta": 10000.0})",
        0, 0, 0, true, K::None, "RoPE config mismatch"}},
      // Checked from the "not yet checked" refusals.
      {"GPT-NeoX Japanese",
       {R"({"model_type": "gpt_neox_japanese", "num_hidden_layers": 2, "hidden_size": 2560,
                                "num_attention_heads": 32, "rope_parameters": {"rope_type": "default",
                                "rope_theta": 10000.0, "partial_rotary_factor": 0.5}})",
        32, 80, 40, true, K::None, ""}},
      {"Doge",
       {R"({"model_type": "doge", "num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 8,
                   "num_key_value_heads": 4, "rope_theta": 10000.0, "sliding_window": null})",
        4, 128, 128, true, K::Rms, ""}},
      {"GLM-4V / GLM-4.1V (text)",
       {R"({"model_type": "glm4v_text", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                         "num_key_value_heads": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.5, "mrope_section": [8, 12, 12]}})",
        2, 128, 64, false, K::None, ""}},
      {"GLM-4.5V (text)",
       {R"({"model_type": "glm4v_moe_text", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 96,
                             "num_key_value_heads": 8, "head_dim": 128, "rope_theta": 10000.0})",
        8, 128, 64, true, K::None, ""}},
      {"Llama-like, head_dim derived (Orion, MiniCPM, DeepSeek MoE)",
       {R"({"model_type": "orion", "num_hidden_layers": 2, "hidden_size": 5120, "num_attention_heads": 40,
                    "num_key_value_heads": 40, "rope_theta": 10000.0})",
        40, 128, 128, true, K::None, ""}},
      {"XVERSE",
       {R"({"model_type": "xverse", "num_hidden_layers": 2, "hidden_size": 5120, "num_attention_heads": 40,
                     "num_key_value_heads": 40, "rope_theta": 10000.0})",
        40, 128, 128, true, K::None, ""}},
      {"GLM-OCR (text)",
       {R"({"model_type": "glm_ocr_text", "num_hidden_layers": 2, "hidden_size": 1536, "num_attention_heads": 16,
                           "num_key_value_heads": 8, "head_dim": 128, "rope_parameters": {"rope_type": "default",
                           "rope_theta": 10000.0, "partial_rotary_factor": 1.0, "mrope_section": [16, 24, 24]}})",
        8, 128, 128, false, K::None, ""}},
      {"RoPE on sliding layers only (Flint, Lara Mini)",
       {R"({"model_type": "flint", "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 32,
                    "num_key_value_heads": 4, "head_dim": 128, "sliding_window": 513,
                    "layer_types": ["full_attention", "full_attention", "sliding_attention", "full_attention"],
                    "rope_theta": 10000.0})",
        0, 0, 0, true, K::None, "RoPE config mismatch"}},
      {"Mellum",
       {R"({"model_type": "mellum", "num_hidden_layers": 2, "hidden_size": 2304, "num_attention_heads": 32,
                     "num_key_value_heads": 4, "head_dim": 128, "rope_theta": 500000.0})",
        4, 128, 128, true, K::Rms, ""}},
      {"Muse Glimmer assistant (draft)",
       {R"({"model_type": "muse_glimmer_assistant", "num_hidden_layers": 2, "hidden_size": 6656,
                                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                                     "rope_theta": 500000.0})",
        8, 128, 128, true, K::Rms, ""}},
      // Read in their modeling files for issue 24's last unchecked model types.
      {"Falcon",
       {R"({"model_type": "falcon", "num_hidden_layers": 2, "hidden_size": 8192, "num_attention_heads": 128,
                     "num_kv_heads": 8, "multi_query": true, "new_decoder_architecture": true})",
        8, 64, 64, true, K::None, ""}},
      {"PaddleOCR-VL (text)",
       {R"({"model_type": "paddleocr_vl_text", "num_hidden_layers": 2, "hidden_size": 1024,
                                "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128,
                                "rope_theta": 500000.0})",
        2, 128, 128, true, K::None, ""}},
      {"Molmo",
       {R"({"model_type": "molmo", "num_hidden_layers": 2, "hidden_size": 3584, "num_attention_heads": 28,
                    "num_key_value_heads": 4, "attention_layer_norm": false, "rope_theta": 1000000.0})",
        4, 128, 128, true, K::None, ""}},
      {"Molmo 2 (text)",
       {R"({"model_type": "molmo2_text", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 32,
                          "num_key_value_heads": 8, "head_dim": 128, "use_qk_norm": true,
                          "qk_norm_type": "qwen3", "rope_theta": 5000000.0})",
        8, 128, 128, true, K::Rms, ""}},
      {"Nemotron-NAS (DeciLM)",
       {R"({"model_type": "nemotron-nas", "num_hidden_layers": 2, "hidden_size": 8192, "num_attention_heads": 64,
                           "num_key_value_heads": null, "rope_theta": 500000.0,
                           "block_configs": [{"attention": {"n_heads_in_group": 8, "no_op": false}},
                                             {"attention": {"n_heads_in_group": null, "no_op": true}}]})",
        8, 128, 128, true, K::None, ""}},
      {"Spark 2.5",
       {R"({"model_type": "spark2_5", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 8,
                       "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512,
                       "layer_types": ["sliding_attention", "sliding_attention"],
                       "rope_parameters": {"sliding_attention": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25}}})",
        2, 256, 64, true, K::None, ""}},
      {"Laguna",
       {R"({"model_type": "laguna", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 48,
                     "num_key_value_heads": 8, "head_dim": 128,
                     "layer_types": ["full_attention", "full_attention"]})",
        8, 128, 64, true, K::Rms, ""}},
      {"RNJ-1",
       {R"({"model_type": "rnj1", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 8,
                   "num_key_value_heads": 4, "head_dim": 256, "layer_types": ["full_attention", "full_attention"],
                   "rope_theta": 1000000.0})",
        4, 256, 256, true, K::RmsOnePlus, ""}},
  };
  return v;
}

}  // namespace

TEST_CASE("every registry entry has a config with its expected verdict", "[validate][registry]") {
  for (const fkv::Architecture& a : fkv::architectures()) {
    INFO("registry entry " << a.name);
    if (a.refused()) {
      // A refused model_type: the reader refuses it (exit 9), naming the reason.
      const std::string text =
          R"({"model_type": ")" + a.model_types.front() + R"(", "num_hidden_layers": 2})";
      CHECK_THROWS_AS(ModelConfig::from_json(std::string_view(text), "minimal.json"),
                      fkv::UnsupportedError);
      CHECK_THROWS_WITH(ModelConfig::from_json(std::string_view(text), "minimal.json"),
                        Catch::Contains(a.refusal));
      continue;
    }
    const auto it = verdicts().find(a.name);
    REQUIRE(it != verdicts().end());  // add a config for the new entry above
    const Verdict& v = it->second;
    const ModelConfig config = read_verdict_config(v);
    CHECK(config.family == a.name);
    check_verdict(config, v);
  }
  // No stale rows: every row names an entry.
  for (const auto& [name, v] : verdicts()) {
    bool found = false;
    for (const fkv::Architecture& a : fkv::architectures()) found = found || a.name == name;
    CHECK(found);
  }
}

// Every config in tests/data, not only one per registry entry, keeps its strict verdict: a file
// added without a row here fails, so a new config cannot slip in unexamined.
TEST_CASE("every config in tests/data has its expected strict verdict",
          "[validate][registry][data]") {
  // file -> {kv, head_dim, rotary_dim, neox, k_norm, error}
  static const std::map<std::string, Verdict> expected = {
      {"cohere-command-r-v01.json", {"", 64, 128, 128, false, K::None, ""}},
      {"deepseek-v3.json", {"", 0, 0, 0, true, K::None, "multi-head latent attention"}},
      {"dflash-qwen3-4b-draft.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"dflash2-zlab-fixture-draft.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"eagle3-llama3.1-8b-draft.json", {"", 8, 128, 128, true, K::None, ""}},
      {"eagle3-qwen3-8b-draft.json", {"", 8, 128, 128, true, K::None, ""}},
      {"ernie4.5-0.3b.json", {"", 2, 128, 128, false, K::None, ""}},
      {"ernie4.5-21b-a3b.json", {"", 4, 128, 128, false, K::None, ""}},
      {"exaone3.0-7.8b-instruct.json", {"", 8, 128, 128, true, K::None, ""}},
      {"falcon-7b.json", {"", 1, 64, 64, true, K::None, ""}},
      {"falcon-rw-1b.json", {"", 32, 64, 0, true, K::None, ""}},
      {"dots-ocr.json", {"", 2, 128, 128, true, K::None, ""}},
      {"molmo2-er-4b.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"paddleocr-vl-1.5.json", {"", 2, 128, 128, true, K::None, ""}},
      {"gemma2-9b-it.json", {"", 8, 256, 256, true, K::None, ""}},
      {"gemma3-4b-it.json", {"", 0, 0, 0, true, K::None, "RoPE frequency mismatch"}},
      {"glm4-moe-glm-4.5.json", {"", 8, 128, 64, true, K::Rms, ""}},
      {"gpt-oss-20b.json", {"", 8, 64, 64, true, K::None, ""}},
      {"gptj-6b-neo-format.json", {"", 16, 256, 64, false, K::None, ""}},
      {"hunyuan-7b-v1-dense.json", {"", 0, 0, 0, true, K::None, "K norm after RoPE"}},
      {"hunyuan-a13b-instruct.json", {"", 0, 0, 0, true, K::None, "K norm after RoPE"}},
      {"internlm3-8b-instruct.json", {"", 2, 128, 128, true, K::None, ""}},
      {"kimi-k2.json", {"", 0, 0, 0, true, K::None, "multi-head latent attention"}},
      {"lfm2.5-vl-1.6b.json", {"", 8, 64, 64, true, K::Rms, ""}},
      {"llama3.1-8b-instruct.json", {"", 8, 128, 128, true, K::None, ""}},
      {"minimax-m2.json", {"", 0, 0, 0, true, K::None, "K norm across all heads"}},
      {"minimax-text-01.json", {"", 8, 128, 64, true, K::None, ""}},
      {"olmo3.1-32b-instruct.json", {"", 0, 0, 0, true, K::None, "K norm across all heads"}},
      {"phi-phi-2.json", {"", 32, 80, 32, true, K::None, ""}},
      {"phi3-phi-3.5-vision-text.json", {"", 32, 96, 96, true, K::None, ""}},
      {"qwen2-vl-7b-instruct.json", {"", 4, 128, 128, true, K::None, ""}},
      {"qwen2.5-vl-3b-instruct.json", {"", 2, 128, 128, true, K::None, ""}},
      {"qwen3-32b.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"qwen3-8b.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"qwen3.5-9b.json", {"", 4, 256, 64, true, K::RmsOnePlus, ""}},
      {"smollm3-3b.json", {"", 0, 0, 0, true, K::None, "RoPE config mismatch"}},
      {"speculators-dflash-qwen3-8b.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"starcoder2-3b.json", {"", 2, 128, 128, true, K::None, ""}},
      {"qwen3-vl-8b-instruct.json", {"", 8, 128, 128, true, K::Rms, ""}},
      {"pythia-14m-gpt-neox.json", {"", 4, 32, 8, true, K::None, ""}},
      {"gpt-oss-eagle3-draft-no-rope.json", {"", 8, 64, 64, true, K::None, ""}},
  };
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(FKV_TEST_DATA_DIR)) {
    if (e.path().extension() != ".json") continue;
    const std::string file = e.path().filename().string();
    INFO(file);
    const auto it = expected.find(file);
    REQUIRE(it != expected.end());  // add the new config's verdict above
    const Verdict& v = it->second;
    ++n;
    check_verdict(ModelConfig::from_file(e.path()), v);
  }
  CHECK(n == (int)expected.size());  // no stale rows
}

// ------------------------------------------------------------------------------------------------
// validate says yes => every variant compiles and every table is finite.

TEST_CASE("validate refuses what codegen refuses: head_dim tiling", "[validate][buildable]") {
  std::vector<Layer> layers(2);
  for (auto& l : layers) l.hd = 74, l.rd = 74;  // 2 * 37: no lane split of <= 32 lanes exists
  try {
    fkv::validate(load(layers));
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    CHECK_THAT(w, Catch::Contains("synthetic: layer 0: head_dim 74 cannot be tiled") &&
                      Catch::Contains("32 lanes") && !Catch::Contains("too large"));
  }
  CHECK_THROWS_WITH(fkv::make_plan(load(layers), ValidationMode::Grouped),
                    Catch::Contains("head_dim 74"));
  // 96 tiles (3 loads of 8 bf16, or 3 x 4 fp32), 264 = 8 * 33 tiles (e = 12), 296 = 8 * 37 does
  // not.
  for (int hd : {96, 264}) {
    for (auto& l : layers) l.hd = hd, l.rd = hd;
    CHECK_NOTHROW(fkv::validate(load(layers)));
  }
  for (auto& l : layers) l.hd = 296, l.rd = 296;
  CHECK_THROWS_WITH(fkv::validate(load(layers)), Catch::Contains("head_dim 296"));
}

TEST_CASE("validate refuses RoPE parameters the table builder refuses", "[validate][buildable]") {
  struct Case {
    json scaling;
    double theta;
    std::string what;
  };
  const std::vector<Case> cases = {
      {{{"rope_type", "linear"}, {"factor", -2.0}}, 1e6, "factor"},
      {{{"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 4.0},
        {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 8192}},
       5e5,
       "high_freq_factor"},
      {{{"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 0.0},
        {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 8192}},
       5e5,
       "low_freq_factor"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 0}},
       1e6,
       "original_max_position_embeddings"},
      {{{"rope_type", "longrope"},
        {"short_factor", {1.0, 1.0}},
        {"long_factor", "x"},
        {"original_max_position_embeddings", 4096}},
       1e4,
       "long_factor"},
      {{{"rope_type", "ntk-by-parts"}}, 1e4, "ntk-by-parts"},
      {{{"rope_type", "yarn"},
        {"factor", 4.0},
        {"original_max_position_embeddings", 4096},
        {"mscale", 1.0},
        {"mscale_all_dim", -1e6}},
       1e6,
       "attention factor"},
      {{{"rope_type", "linear"}, {"factor", 1e-300}}, 1e6, "frequency"},
      {nullptr, 1e-300, "frequency"},  // a tiny theta: inv_freq ~ 1e300
  };
  for (const Case& c : cases) {
    INFO(c.scaling.dump() << " theta " << c.theta);
    std::vector<Layer> layers(2);
    for (auto& l : layers) l.scaling = c.scaling, l.theta = c.theta;
    json doc = {{"max_position_embeddings", 8192}, {"layers", json::array()}};
    for (const auto& l : layers) doc["layers"].push_back(l.to_json());
    ModelConfig config;
    try {
      config = ModelConfig::from_json(doc, "synthetic");
    } catch (const ConfigError& e) {
      CHECK_THAT(e.what(), Catch::Contains(c.what));  // refused while reading: as good
      continue;
    }
    CHECK_THROWS_WITH(fkv::validate(config),
                      Catch::Contains("synthetic: layer 0: ") && Catch::Contains(c.what));
    CHECK_THROWS_WITH(fkv::make_plan(config, ValidationMode::Grouped), Catch::Contains(c.what));
  }
}

namespace {

// The property: a config that validates (grouped) yields kernel specs for every activation dtype
// and output mode, specialized sources, and finite cos/sin tables in every table dtype.
void check_buildable_property(const std::filesystem::path& file) {
  ModelConfig config;
  fkv::Plan plan;
  try {
    config = ModelConfig::from_file(file);
    plan = fkv::make_plan(config, ValidationMode::Grouped);
  } catch (const ConfigError&) {
    return;  // refused: fine, as long as it was a ConfigError
  }
  for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16, fkv::DType::FP32}) {
    fkv::VariantOptions o;
    o.act = o.cache = act;
    for (const fkv::KernelSpec& k : fkv::kernel_specs_for(plan, o))
      CHECK_FALSE(fkv::generate(k).source.empty());
  }
  fkv::RopeOptions ro;
  ro.max_position_embeddings = config.max_position_embeddings.value;
  for (const fkv::LayerGroup& g : plan.groups) {
    if (g.attn.rotary_dim == 0) continue;
    const std::int64_t rows =
        std::min<std::int64_t>(std::max(1, config.max_position_embeddings.value), 2048);
    const fkv::RopeTable table(g.attn.rope, g.attn.rotary_dim, rows, ro);
    for (double x : table.values()) REQUIRE(std::isfinite(x));
    for (fkv::DType d : {fkv::DType::BF16, fkv::DType::FP16}) {
      const auto bytes = table.bytes(d);
      for (std::size_t i = 0; i + 1 < bytes.size(); i += 2) {
        const unsigned bits = bytes[i] | (bytes[i + 1] << 8);
        const unsigned exp_mask = d == fkv::DType::BF16 ? 0x7f80u : 0x7c00u;
        REQUIRE((bits & exp_mask) != exp_mask);  // not inf or NaN
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "property over the fuzz corpus: valid means every variant builds and every table is finite",
    "[validate][buildable][fuzz]") {
  const std::filesystem::path root =
      std::filesystem::path(FKV_TEST_DATA_DIR) / "../../fuzz/regressions/fuzz_config";
  std::vector<std::filesystem::path> files;
  for (const auto& dir : {root, std::filesystem::path(FKV_TEST_DATA_DIR)})
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  REQUIRE(files.size() > 30);
  for (const auto& f : files) {
    INFO(f.string());
    check_buildable_property(f);
  }
}

TEST_CASE("4096 layers of distinct RoPE frequencies plan in linear time", "[validate][limits]") {
  // Issue 23 item 5: grouping compared each layer with every group, rebuilding the canonical JSON
  // of both frequencies per comparison: 61 s for this config (under every limit, < 1 MiB).
  json doc = {{"layers", json::array()}};
  for (int i = 0; i < fkv::kMaxLayers; ++i) {
    Layer l;
    l.theta = 10000.0 + i;
    doc["layers"].push_back(l.to_json());
  }
  REQUIRE(doc.dump().size() < (std::size_t{1} << 20));
  const ModelConfig config = ModelConfig::from_json(doc, "synthetic-4096");
  const auto t0 = std::chrono::steady_clock::now();
  const fkv::Plan plan = fkv::make_plan(config, ValidationMode::Grouped);
  const auto specs = fkv::kernel_specs_for(plan, fkv::VariantOptions{});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(plan.groups.size() == static_cast<std::size_t>(fkv::kMaxLayers));
  CHECK(plan.groups[4095].layers == std::vector<int>{4095});
  CHECK(plan.groups[7].attn.rope.theta == 10007.0);
  CHECK(specs.size() == 2);  // the frequencies are not part of the kernel: stacked and pool
  CHECK(seconds < 5.0);      // about 0.1 s (docs/reliability.md); generous for ASan and a busy CI
  // Strict mode stops at the first mismatch, with the seed's text.
  CHECK_THROWS_WITH(fkv::validate(config),
                    Catch::Contains("RoPE frequency mismatch") && Catch::Contains("at layer 1."));
  // Layers that agree still share one group, in order of first appearance.
  for (int i = 0; i < fkv::kMaxLayers; ++i) doc["layers"][i]["rope_theta"] = 10000.0 + i % 3;
  const fkv::Plan three =
      fkv::make_plan(ModelConfig::from_json(doc, "synthetic-3"), ValidationMode::Grouped);
  REQUIRE(three.groups.size() == 3);
  CHECK(three.groups[1].layers.size() == 1365);
  CHECK(three.groups[1].layers.front() == 1);
  CHECK(three.groups[2].layers.back() == 4094);
}

TEST_CASE("a layer too large for the kernels' 32-bit indexes is bad input", "[validate][limits]") {
  // Issue 23 item 12: 16777216 KV heads x 128 passed validate and precompile; the kernel's
  // constexpr int KV = H * D wrapped to 0 (NVRTC only warned).
  Layer big;
  big.kv = 16777216;
  for (ValidationMode mode : {ValidationMode::Strict, ValidationMode::Grouped}) {
    const ModelConfig config = load({big});
    try {
      fkv::make_plan(config, mode);
      FAIL("a plan for 16777216 KV heads x 128");
    } catch (const fkv::ConfigError& e) {
      CHECK(fkv::error_kind_of(e) == fkv::ErrorKind::BadInput);
      CHECK_THAT(e.what(), Catch::StartsWith("synthetic: layer 0: ") &&
                               Catch::Contains("num_kv_heads * head_dim = 16777216 * 128"));
    }
  }
  // The bound: 2 * kMaxLayers * H * D fits an int. At it, the layer validates and builds.
  Layer edge;
  edge.kv = static_cast<int>(fkv::kMaxHeadElements / 128);
  CHECK(2 * fkv::kMaxLayers * fkv::kMaxHeadElements <= 2147483647);
  CHECK_NOTHROW(fkv::make_plan(load({edge}), ValidationMode::Grouped));
  edge.kv += 1;
  CHECK_THROWS_AS(fkv::make_plan(load({edge}), ValidationMode::Grouped), ConfigError);
}

TEST_CASE("the activation dtype a config names: its dtype, or an error naming the key and --dtype",
          "[validate][dtype]") {
  auto with_dtype = [](const std::string& dtype) {
    return ModelConfig::from_json(
        std::string_view(R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 512, )"
                         R"("num_attention_heads": 4, "num_key_value_heads": 2, "torch_dtype": ")" +
                         dtype + R"("})"),
        "d.json");
  };
  CHECK(fkv::act_dtype_of(with_dtype("bfloat16")) == fkv::DType::BF16);
  CHECK(fkv::act_dtype_of(with_dtype("torch.float16")) == fkv::DType::FP16);
  CHECK(fkv::act_dtype_of(with_dtype("float32")) == fkv::DType::FP32);
  // An 8-bit torch_dtype is how the checkpoint stores its weights: activations default to bf16
  // (with an info line), as the engines run such models.
  const ModelConfig fp8 = with_dtype("float8_e4m3fn");
  CHECK_NOTHROW(fkv::make_plan(fp8, ValidationMode::Strict));
  CHECK(fkv::act_dtype_of(fp8) == fkv::DType::BF16);
  CHECK(fkv::act_dtype_of("fp8_e4m3") == fkv::DType::BF16);
  // A name that is no dtype reads (the layout does not depend on it, and --dtype can override
  // it); as the default activation dtype it is a ConfigError naming the file, key and override.
  for (const char* bad : {"auto", "int4", "float8", "BFLOAT16"}) {
    INFO(bad);
    const ModelConfig c = with_dtype(bad);
    CHECK_NOTHROW(fkv::make_plan(c, ValidationMode::Strict));
    CHECK_THROWS_WITH(fkv::act_dtype_of(c), Catch::StartsWith("d.json: key 'torch_dtype': \"" +
                                                              std::string(bad) + "\"") &&
                                                Catch::Contains("--dtype"));
    CHECK_THROWS_WITH(fkv::act_dtype_of(bad), Catch::Contains("--dtype"));
  }
}
