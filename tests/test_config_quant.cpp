// Tests of the config module's quantization_config reader (src/config/quantization.cpp,
// docs/config-rules.md "quantization_config"): one case per rule, each with a
// quantization_config block shaped like the one a real checkpoint ships (named in the case), set
// into the DFlash Qwen3-4B draft of tests/data (5 attention layers, model.layers.0-4), and the
// module-pattern matching it relies on (src/config/module_match.hpp).
#include <chrono>
#include <nlohmann/json.hpp>

#include "config/module_match.hpp"
#include "config_test_util.hpp"

using fkv::DeclaredWeights;
using fkv::WeightFormat;
using nlohmann::json;

namespace {

json draft_doc() {
  std::ifstream in(std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json");
  return json::parse(in);
}

// The draft with `block` (JSON text) under `key`.
ModelConfig draft_with(const std::string& block, const char* key = "quantization_config") {
  json doc = draft_doc();
  doc[key] = json::parse(block);
  return ModelConfig::from_json(doc, "draft.json");
}

void check_declared(const ModelConfig& c, WeightFormat f, const std::string& source_part) {
  INFO(c.weights.source << c.weights.error);
  REQUIRE(c.weights.declared());
  CHECK(c.weights.format == f);
  CHECK_THAT(c.weights.source, Contains(source_part));
  CHECK(fkv::declared_weight_format(c) == f);
}

// A refusal: its kind, and the parts its message must hold (the file name first, the key, ...).
void check_refused(const ModelConfig& c, bool bad_input, const std::string& key,
                   const std::vector<std::string>& parts) {
  INFO(c.weights.error);
  REQUIRE(c.weights.refused());
  CHECK(c.weights.bad_input == bad_input);
  CHECK(c.weights.error.rfind("draft.json: key '" + key + "': ", 0) == 0);
  for (const std::string& p : parts) CHECK_THAT(c.weights.error, Contains(p));
  if (bad_input) {
    CHECK_THROWS_AS(fkv::declared_weight_format(c), fkv::ConfigError);
    try {
      fkv::declared_weight_format(c);
    } catch (const fkv::UnsupportedError&) {
      FAIL("bad input must not be an UnsupportedError");
    } catch (const fkv::ConfigError&) {
    }
  } else {
    CHECK_THROWS_AS(fkv::declared_weight_format(c), fkv::UnsupportedError);
    CHECK_THAT(c.weights.error, Contains("--weights FORMAT"));
    CHECK_THAT(c.weights.error, Contains("See docs/config-rules.md (\"quantization_config\")."));
  }
}

}  // namespace

TEST_CASE("no quantization_config: nothing declared, dense", "[config][quant]") {
  const ModelConfig c = config_test::load("dflash-qwen3-4b-draft.json");
  CHECK(c.weights.status == DeclaredWeights::Status::Absent);
  CHECK(c.weights.source.empty());
  CHECK(fkv::declared_weight_format(c) == WeightFormat::Dense);
  // null counts as absent (HF writes null for unset optionals; gpt-oss-20b.json in tests/data).
  CHECK(draft_with("null").weights.status == DeclaredWeights::Status::Absent);
  CHECK(config_test::load("gpt-oss-20b.json").weights.status == DeclaredWeights::Status::Absent);
}

TEST_CASE("fp8 with weight_block_size [128, 128]: fp8_block", "[config][quant]") {
  // deepseek-ai/DeepSeek-V3's config.json (tests/data/deepseek-v3.json, kimi-k2.json;
  // Qwen/Qwen3-8B-FP8 ships the same block): read from the file itself, MLA layers and all.
  for (const char* file : {"deepseek-v3.json", "kimi-k2.json"}) {
    const ModelConfig c = config_test::load(file);
    INFO(file);
    REQUIRE(c.weights.declared());
    CHECK(c.weights.format == WeightFormat::Fp8Block);
    CHECK(c.weights.source ==
          "quantization_config.weight_block_size = [128, 128] (quant_method \"fp8\")");
  }
  check_declared(draft_with(R"({"activation_scheme": "dynamic", "fmt": "e4m3",
                                "quant_method": "fp8", "weight_block_size": [128, 128]})"),
                 WeightFormat::Fp8Block, "weight_block_size = [128, 128]");
}

TEST_CASE("fp8 without weight_block_size: fp8_tensor", "[config][quant]") {
  // AutoFP8 checkpoints (neuralmagic/Meta-Llama-3-8B-Instruct-FP8): per-tensor scales, static
  // activation scales, lm_head left out.
  check_declared(draft_with(R"({"activation_scheme": "static", "ignored_layers": ["lm_head"],
                                "quant_method": "fp8"})"),
                 WeightFormat::Fp8Tensor, "without weight_block_size (per-tensor weight scales");
  // The spelling HF writes (FineGrainedFP8Config keys, quant_method in capitals as some tools do).
  check_declared(draft_with(R"({"quant_method": "FP8", "activation_scheme": "dynamic"})"),
                 WeightFormat::Fp8Tensor, "quant_method");
}

TEST_CASE("fp8 with another block size, or e5m2: refused by name", "[config][quant]") {
  // The hostile probe's 64x64 block (sglang's drop-in refuses it by name too).
  check_refused(draft_with(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                               "weight_block_size": [64, 64]})"),
                false, "quantization_config.weight_block_size",
                {"[64,64]", "blocks of 64x64", "128x128 blocks only"});
  check_refused(draft_with(R"({"quant_method": "fp8", "weight_block_size": [1, 128]})"), false,
                "quantization_config.weight_block_size", {"1x128"});
  check_refused(draft_with(R"({"quant_method": "fp8", "fmt": "e5m2"})"), false,
                "quantization_config.fmt", {"\"e5m2\"", "e4m3 weights only"});
  // A malformed block size is bad input, not a refusal.
  check_refused(draft_with(R"({"quant_method": "fp8", "weight_block_size": 128})"), true,
                "quantization_config.weight_block_size", {"[rows, cols]", "Correct it"});
  check_refused(draft_with(R"({"quant_method": "fp8", "weight_block_size": [128, "128"]})"), true,
                "quantization_config.weight_block_size[1]", {"expected an integer"});
  // sglang reads "mxfp8" in a quant_method as MXFP8: e8m0 scales per 32, not read.
  check_refused(draft_with(R"({"quant_method": "mxfp8"})"), false,
                "quantization_config.quant_method", {"MXFP8", "e8m0"});
}

TEST_CASE("fp8 with the K/V projections excluded: dense", "[config][quant]") {
  // ignored_layers (vLLM/sglang) and modules_to_not_convert (HF) name modules by path runs.
  check_declared(draft_with(R"({"quant_method": "fp8", "weight_block_size": [128, 128],
                                "ignored_layers": ["lm_head", "self_attn"]})"),
                 WeightFormat::Dense, "quantization_config.ignored_layers[1] = \"self_attn\"");
  check_declared(
      draft_with(
          R"({"quant_method": "fp8", "modules_to_not_convert": ["model.layers.*.self_attn"]})"),
      WeightFormat::Dense, "modules_to_not_convert[0]");
  // Whole components only: "layers.1" names layer 1, not layers 10-19; "self" names nothing.
  check_declared(draft_with(R"({"quant_method": "fp8", "ignored_layers": ["self", "attn"]})"),
                 WeightFormat::Fp8Tensor, "quant_method");
  // Some layers excluded, others not: one format for every layer, so refused.
  check_refused(draft_with(R"({"quant_method": "fp8", "weight_block_size": [128, 128],
                               "ignored_layers": ["model.layers.0.self_attn"]})"),
                false, "quantization_config",
                {"different formats", "layer 0 k_proj: dense", "layer 1 k_proj: fp8_block"});
  // k_proj excluded but not v_proj: mixed as well.
  check_refused(draft_with(R"({"quant_method": "fp8", "ignored_layers": ["k_proj"]})"), false,
                "quantization_config", {"layer 0 v_proj: fp8_tensor"});
}

TEST_CASE("compressed-tensors FP8: tensor, channel and 128x128 block strategies",
          "[config][quant]") {
  // llm-compressor's FP8_DYNAMIC preset (RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic).
  const std::string dynamic = R"({"config_groups": {"group_0": {
      "input_activations": {"actorder": null, "block_structure": null, "dynamic": true,
        "group_size": null, "num_bits": 8, "observer": null, "observer_kwargs": {},
        "strategy": "token", "symmetric": true, "type": "float"},
      "output_activations": null, "targets": ["Linear"],
      "weights": {"actorder": null, "block_structure": null, "dynamic": false,
        "group_size": null, "num_bits": 8, "observer": "minmax", "observer_kwargs": {},
        "strategy": "channel", "symmetric": true, "type": "float"}}},
    "format": "float-quantized", "ignore": ["lm_head"], "kv_cache_scheme": null,
    "quant_method": "compressed-tensors", "quantization_status": "compressed"})";
  check_declared(draft_with(dynamic), WeightFormat::Fp8Channel,
                 "quantization_config.config_groups.group_0.weights (float, 8 bits, strategy "
                 "\"channel\")");
  // The FP8 static preset (RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8): per-tensor weights.
  check_declared(draft_with(R"({"config_groups": {"group_0": {
      "input_activations": {"dynamic": false, "num_bits": 8, "strategy": "tensor",
        "symmetric": true, "type": "float"},
      "targets": ["Linear"],
      "weights": {"dynamic": false, "num_bits": 8, "strategy": "tensor", "symmetric": true,
        "type": "float"}}},
    "format": "float-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"})"),
                 WeightFormat::Fp8Tensor, "strategy \"tensor\"");
  // FP8_BLOCK (RedHatAI/*-FP8-block): 128x128 weight blocks, also as the older "128x128".
  for (const char* bs : {"[128, 128]", "\"128x128\""}) {
    INFO(bs);
    check_declared(draft_with(std::string(R"({"config_groups": {"group_0": {
        "input_activations": {"dynamic": true, "num_bits": 8, "strategy": "group",
          "group_size": 128, "symmetric": true, "type": "float"},
        "targets": ["Linear"],
        "weights": {"block_structure": )") +
                              bs + R"(, "dynamic": false, "num_bits": 8,
          "strategy": "block", "symmetric": true, "type": "float"}}},
      "format": "float-quantized", "ignore": ["lm_head"],
      "quant_method": "compressed-tensors"})"),
                   WeightFormat::Fp8Block, "block_structure [128, 128]");
  }
  check_refused(draft_with(R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"block_structure": [64, 64], "num_bits": 8, "strategy": "block",
        "type": "float"}}}, "format": "float-quantized", "quant_method": "compressed-tensors"})"),
                false, "quantization_config.config_groups.group_0.weights.block_structure",
                {"64x64", "128x128 blocks only"});
  // No strategy: compressed-tensors infers tensor (no group_size) or channel (group_size -1).
  check_declared(draft_with(R"({"config_groups": {"g": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "group_size": -1}}},
      "format": "float-quantized", "quant_method": "compressed_tensors"})"),
                 WeightFormat::Fp8Channel, "strategy \"channel\"");
}

TEST_CASE("compressed-tensors INT8: channel -> int8_channel; packed forms refused",
          "[config][quant]") {
  // llm-compressor's W8A8 preset (RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8):
  // int8 bytes with a scale per output channel, activations per token at run time.
  const std::string w8a8 = R"({"config_groups": {"group_0": {
      "input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token",
        "symmetric": true, "type": "int"},
      "targets": ["Linear"],
      "weights": {"dynamic": false, "num_bits": 8, "observer": "minmax", "strategy": "channel",
        "symmetric": true, "type": "int"}}},
    "format": "int-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"})";
  check_declared(draft_with(w8a8), WeightFormat::Int8Channel, "int, 8 bits, strategy \"channel\"");
  // W8A16 (RedHatAI/*-quantized.w8a16) packs the 8-bit weights into int32 words.
  std::string w8a16 = w8a8;
  w8a16.replace(w8a16.find("int-quantized"), 13, "pack-quantized");
  check_refused(draft_with(w8a16), false, "quantization_config.format",
                {"\"pack-quantized\"", "four to an int32 word"});
  // Zero points (asymmetric) are not read.
  std::string asym = w8a8;
  const std::string sym = "\"symmetric\": true, \"type\": \"int\"}}}";
  asym.replace(asym.find(sym), sym.size(), "\"symmetric\": false, \"type\": \"int\"}}}");
  check_refused(draft_with(asym), false,
                "quantization_config.config_groups.group_0.weights.symmetric", {"zero points"});
  // Without a format fkv-jit cannot tell bytes from int32 words.
  check_refused(draft_with(R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "strategy": "channel", "type": "int"}}},
      "quant_method": "compressed-tensors"})"),
                false, "quantization_config.format", {"missing"});
}

TEST_CASE("compressed-tensors 4-bit: refused as packed", "[config][quant]") {
  // W4A16 (RedHatAI/*-quantized.w4a16): int4 groups of 128 in int32 words.
  check_refused(draft_with(R"({"config_groups": {"group_0": {"input_activations": null,
      "output_activations": null, "targets": ["Linear"],
      "weights": {"actorder": null, "block_structure": null, "dynamic": false,
        "group_size": 128, "num_bits": 4, "observer": "minmax", "strategy": "group",
        "symmetric": true, "type": "int"}}},
    "format": "pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors",
    "quantization_status": "compressed"})"),
                false, "quantization_config.config_groups.group_0.weights.num_bits",
                {"packed 4-bit integers", "group_size 128", "\"pack-quantized\""});
  // NVFP4 (RedHatAI/*-NVFP4): e2m1 in groups of 16.
  check_refused(draft_with(R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"dynamic": false, "group_size": 16, "num_bits": 4, "strategy": "tensor_group",
        "symmetric": true, "type": "float"}}},
    "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
    "quant_method": "compressed-tensors"})"),
                false, "quantization_config.config_groups.group_0.weights.num_bits",
                {"e2m1", "\"nvfp4-pack-quantized\""});
}

TEST_CASE("compressed-tensors ignore and targets decide which modules are quantized",
          "[config][quant]") {
  const std::string group = R"("config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 4, "group_size": 128, "strategy": "group", "type": "int"}}},
      "format": "pack-quantized", "quant_method": "compressed-tensors")";
  // "re:" entries are Python regexes matched at the start (re.match).
  check_declared(draft_with("{" + group + R"(, "ignore": ["lm_head", "re:.*self_attn.*"]})"),
                 WeightFormat::Dense, "quantization_config.ignore[1] = \"re:.*self_attn.*\"");
  check_declared(draft_with("{" + group + R"(, "ignore": ["re:.*\\.(k|v)_proj$"]})"),
                 WeightFormat::Dense, "ignore[0]");
  // Exact names: every layer's k_proj and v_proj (as llm-compressor writes them).
  std::string names;
  for (int i = 0; i < 5; ++i)
    for (const char* p : {"k_proj", "v_proj"})
      names += std::string(names.empty() ? "" : ", ") + "\"model.layers." + std::to_string(i) +
               ".self_attn." + p + "\"";
  check_declared(draft_with("{" + group + ", \"ignore\": [" + names + "]}"), WeightFormat::Dense,
                 "ignore[0] = \"model.layers.0.self_attn.k_proj\"");
  // re.match is anchored at the start: "self_attn" without ".*" names no module.
  check_refused(draft_with("{" + group + R"(, "ignore": ["re:self_attn"]})"), false,
                "quantization_config.config_groups.group_0.weights.num_bits", {"packed"});
  // A group that targets only the MLP leaves the K/V projections dense.
  check_declared(draft_with(R"({"config_groups": {"group_0": {"targets": ["re:.*mlp.*"],
      "weights": {"num_bits": 4, "group_size": 128, "strategy": "group", "type": "int"}}},
      "format": "pack-quantized", "quant_method": "compressed-tensors"})"),
                 WeightFormat::Dense, "no group targets it");
  // A group naming the projections wins over a "Linear" group listed before it.
  check_declared(draft_with(R"({"config_groups": {
      "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128,
        "strategy": "group", "type": "int"}, "format": "pack-quantized"},
      "group_1": {"targets": ["re:.*self_attn\\.[kv]_proj"], "weights": {"num_bits": 8,
        "strategy": "channel", "type": "float"}, "format": "float-quantized"}},
      "quant_method": "compressed-tensors"})"),
                 WeightFormat::Fp8Channel, "config_groups.group_1.weights");
  // Only layer 0 ignored: mixed, refused.
  check_refused(draft_with(R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "strategy": "channel", "type": "float"}}},
      "format": "float-quantized", "quant_method": "compressed-tensors",
      "ignore": ["re:model\\.layers\\.0\\..*"]})"),
                false, "quantization_config", {"layer 0 k_proj: dense", "fp8_channel"});
  // A pattern fkv-jit cannot evaluate is refused, naming the entry.
  check_refused(draft_with("{" + group + R"(, "ignore": ["re:(?<=self)_attn"]})"), false,
                "quantization_config.ignore[0]", {"cannot evaluate", "lookaround"});
  // 2:4 sparse storage of the K/V projections.
  check_refused(draft_with(R"({"config_groups": {}, "quant_method": "compressed-tensors",
      "sparsity_config": {"format": "sparse-24-bitmask", "targets": ["Linear"],
        "ignore": ["lm_head"], "sparsity_structure": "2:4"}})"),
                false, "quantization_config.sparsity_config.format", {"sparse-compressed"});
}

TEST_CASE("compression_config: the older key of compressed-tensors checkpoints",
          "[config][quant]") {
  // vLLM's _parse_quant_hf_config reads it when quantization_config is absent.
  const std::string fp8 = R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "strategy": "tensor", "type": "float"}}},
      "format": "float-quantized", "quant_method": "compressed-tensors"})";
  const ModelConfig c = draft_with(fp8, "compression_config");
  check_declared(c, WeightFormat::Fp8Tensor, "compression_config.config_groups.group_0");
  // quantization_config wins when both are present.
  json doc = draft_doc();
  doc["compression_config"] = json::parse(fp8);
  doc["quantization_config"] =
      json::parse(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})");
  check_declared(ModelConfig::from_json(doc, "draft.json"), WeightFormat::Fp8Block,
                 "quantization_config.weight_block_size");
}

TEST_CASE("packed 4-bit methods: refused by name", "[config][quant]") {
  struct Case {
    const char* block;  // as the named checkpoint ships it
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      // Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4
      {R"({"bits": 4, "damp_percent": 0.01, "desc_act": false, "group_size": 128,
           "modules_in_block_to_quantize": null, "quant_method": "gptq", "sym": true,
           "true_sequential": true})",
       {"\"gptq\" (bits 4) packs 4-bit integer weights into int32 words"}},
      // Qwen/Qwen2.5-7B-Instruct-AWQ
      {R"({"bits": 4, "group_size": 128, "modules_to_not_convert": null, "quant_method": "awq",
           "version": "gemm", "zero_point": true})",
       {"\"awq\" (bits 4) packs 4-bit integer weights"}},
      // unsloth *-bnb-4bit checkpoints
      {R"({"_load_in_4bit": true, "_load_in_8bit": false, "bnb_4bit_compute_dtype": "bfloat16",
           "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4",
           "bnb_4bit_use_double_quant": true, "llm_int8_enable_fp32_cpu_offload": false,
           "llm_int8_has_fp16_weight": false, "llm_int8_skip_modules": null,
           "llm_int8_threshold": 6.0, "load_in_4bit": true, "load_in_8bit": false,
           "quant_method": "bitsandbytes"})",
       {"\"bitsandbytes\" (load_in_4bit) packs 4-bit weights (nf4 or fp4)"}},
      {R"({"quant_method": "mxfp4"})", {"\"mxfp4\" packs 4-bit e2m1 weights", "e8m0"}},
      {R"({"quant_method": "nvfp4"})", {"\"nvfp4\" packs 4-bit e2m1 weights"}},
  };
  for (const Case& k : cases) {
    INFO(k.block);
    check_refused(draft_with(k.block), false, "quantization_config.quant_method", k.parts);
  }
}

TEST_CASE("packed methods whose exclusions leave attention unquantized: dense", "[config][quant]") {
  // openai/gpt-oss-20b's config.json: MXFP4 experts, attention in bf16.
  json doc;
  {
    std::ifstream in(std::string(FKV_TEST_DATA_DIR) + "/gpt-oss-20b.json");
    doc = json::parse(in);
  }
  doc["quantization_config"] = json::parse(R"({"modules_to_not_convert": [
      "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
      "lm_head"], "quant_method": "mxfp4"})");
  const ModelConfig c = ModelConfig::from_json(doc, "gpt-oss-20b.json");
  REQUIRE(c.weights.declared());
  CHECK(c.weights.format == WeightFormat::Dense);
  CHECK(c.weights.source ==
        "quantization_config.modules_to_not_convert[0] = \"model.layers.*.self_attn\" (left "
        "unquantized)");
  // Only some layers left out: refused, naming both.
  check_refused(draft_with(R"({"quant_method": "awq", "bits": 4,
                               "modules_to_not_convert": ["layers.0.self_attn"]})"),
                false, "quantization_config.quant_method",
                {"in some K/V projections (layer 1 k_proj)", "modules_to_not_convert[0]",
                 "leaves others unquantized (layer 0 k_proj)"});
}

TEST_CASE("GPTQ: modules_in_block_to_quantize and dynamic's negative rules leave K/V dense",
          "[config][quant]") {
  // A DFlash draft quantized to int4 GPTQ except its fused qkv_proj (the shape of the configs
  // vLLM's DFlash int4 tests build): K/V are read dense.
  check_declared(draft_with(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
      "desc_act": false, "sym": true, "lm_head": false, "checkpoint_format": "gptq",
      "modules_in_block_to_quantize": ["self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"]})"),
                 WeightFormat::Dense,
                 "quantization_config.modules_in_block_to_quantize names no part of "
                 "\"model.layers.0.self_attn.k_proj\" (left unquantized)");
  // optimum's list of lists, flattened; gptq_marlin reads it too.
  check_declared(draft_with(R"({"quant_method": "gptq_marlin", "bits": 4,
      "modules_in_block_to_quantize": [["self_attn.q_proj"], ["mlp.up_proj", "mlp.down_proj"]]})"),
                 WeightFormat::Dense, "modules_in_block_to_quantize names no part of");
  // K and V listed (a substring of the name, as vLLM's is_layer_gptq_quantized checks): packed.
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
      "modules_in_block_to_quantize": [["self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj"],
                                       ["self_attn.o_proj"]]})"),
                false, "quantization_config.quant_method", {"\"gptq\" (bits 4) packs 4-bit"});
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 8,
      "modules_in_block_to_quantize": ["v_proj"]})"),
                false, "quantization_config.quant_method",
                {"(bits 8) packs 8-bit", "in some K/V projections (layer 0 v_proj)",
                 "leaves others unquantized (layer 0 k_proj)"});
  // An empty list says nothing (vLLM then reads the checkpoint's tensors): refused as packed.
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
                               "modules_in_block_to_quantize": []})"),
                false, "quantization_config.quant_method", {"packs 4-bit"});
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
                               "modules_in_block_to_quantize": "self_attn"})"),
                true, "quantization_config.modules_in_block_to_quantize",
                {"expected a list of module names"});
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
                               "modules_in_block_to_quantize": [["mlp.up_proj", 3]]})"),
                true, "quantization_config.modules_in_block_to_quantize[0][1]", {});

  // GPTQModel's dynamic: a negative rule matching the attention leaves it dense (Qwen/Qwen3.5's
  // GPTQ checkpoints exclude attention so).
  check_declared(draft_with(R"({"quant_method": "gptq", "bits": 4,
      "dynamic": {"-:.*attn.*": {}, "+:.*mlp\\.down_proj": {"bits": 8}}})"),
                 WeightFormat::Dense,
                 "quantization_config.dynamic rule \"-:.*attn.*\" (left unquantized)");
  // A rule on one layer only: a mix, refused naming both.
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
      "dynamic": {"-:model\\.layers\\.0\\..*": {}}})"),
                false, "quantization_config.quant_method",
                {"in some K/V projections (layer 1 k_proj)", "leaves others unquantized (layer 0"});
  // Positive rules override bits or group size: still packed.
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
                               "dynamic": {"+:.*self_attn.*": {"bits": 8}}})"),
                false, "quantization_config.quant_method", {"packs 4-bit"});
  // A negative and a positive rule on the same projection: the order decides, and is not kept.
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4,
      "dynamic": {"-:.*k_proj": {}, "+:.*layers\\.2\\..*": {"bits": 8}}})"),
                false, "quantization_config.dynamic",
                {"the negative rule \"-:.*k_proj\" and the rule \"+:.*layers\\.2\\..*\" both "
                 "match layer 2 k_proj"});
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4, "dynamic": ["-:.*attn.*"]})"),
                true, "quantization_config.dynamic", {"expected an object of module-name rules"});
  check_refused(draft_with(R"({"quant_method": "gptq", "bits": 4, "dynamic": {"-:(?<=x)k": {}}})"),
                false, "quantization_config.dynamic", {"cannot evaluate this pattern"});
  // Other packed schemes do not read these keys: AWQ with the same list stays refused.
  check_refused(draft_with(R"({"quant_method": "awq", "bits": 4,
                               "modules_in_block_to_quantize": ["mlp.down_proj"]})"),
                false, "quantization_config.quant_method", {"\"awq\" (bits 4)"});
}

TEST_CASE("families that keep K/V elsewhere are matched under their own module names",
          "[config][quant]") {
  auto with = [](const char* file, const std::string& block) {
    std::ifstream in(std::string(FKV_TEST_DATA_DIR) + "/" + file);
    json doc = json::parse(in);
    doc["quantization_config"] = json::parse(block);
    return ModelConfig::from_json(doc, "draft.json");
  };
  // Falcon: transformer.h.N.self_attention.query_key_value.
  check_declared(with("falcon-7b.json", R"({"quant_method": "fp8",
                                             "ignored_layers": ["self_attention"]})"),
                 WeightFormat::Dense,
                 "quantization_config.ignored_layers[0] = \"self_attention\" (left unquantized)");
  check_declared(with("falcon-7b.json", R"({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8,
        "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false}}},
      "ignore": ["re:.*query_key_value$", "lm_head"]})"),
                 WeightFormat::Dense, "quantization_config.ignore[0]");
  // Llama's names do not name Falcon's attention: its K/V stay quantized.
  check_declared(with("falcon-7b.json", R"({"quant_method": "fp8",
                                             "ignored_layers": ["self_attn"]})"),
                 WeightFormat::Fp8Tensor, "quantization_config.quant_method");
  // GPT-NeoX (pythia): gpt_neox.layers.N.attention.query_key_value; a GPTQ list naming it packs.
  check_declared(with("pythia-14m-gpt-neox.json", R"({"quant_method": "gptq", "bits": 4,
      "modules_in_block_to_quantize": ["mlp.dense_h_to_4h", "mlp.dense_4h_to_h"]})"),
                 WeightFormat::Dense,
                 "names no part of \"gpt_neox.layers.0.attention.query_key_value\"");
  check_refused(with("pythia-14m-gpt-neox.json", R"({"quant_method": "gptq", "bits": 4,
      "modules_in_block_to_quantize": ["attention.query_key_value", "mlp.dense_4h_to_h"]})"),
                false, "quantization_config.quant_method", {"packs 4-bit"});
  // GPT-J (gpt_neo format): transformer.h.N.attn.attention.k_proj, matched (layer 0 k only: a
  // mix, refused naming it), and all of them by glob.
  check_refused(with("gptj-6b-neo-format.json", R"({"quant_method": "fp8",
      "ignored_layers": ["transformer.h.0.attn.attention.k_proj"]})"),
                false, "quantization_config",
                {"layer 0 k_proj: dense, from quantization_config.ignored_layers[0]"});
  check_declared(with("gptj-6b-neo-format.json", R"({"quant_method": "fp8",
      "ignored_layers": ["transformer.h.*.attn.attention"]})"),
                 WeightFormat::Dense, "ignored_layers[0]");
}

TEST_CASE("ModelOpt: FP8 per tensor, per channel, 128x128 blocks; NVFP4 refused",
          "[config][quant]") {
  // nvidia/Llama-3.1-8B-Instruct-FP8 (config.json form: quant_algo and ignore at the top).
  check_declared(draft_with(R"({"quant_method": "modelopt", "quant_algo": "FP8",
      "ignore": ["lm_head"], "kv_cache_scheme": {"dynamic": false, "num_bits": 8,
        "type": "float"}})"),
                 WeightFormat::Fp8Tensor, "quantization_config.quant_algo = \"FP8\"");
  check_declared(draft_with(R"({"quant_method": "modelopt",
                                "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"})"),
                 WeightFormat::Fp8Channel, "FP8_PER_CHANNEL_PER_TOKEN");
  // ModelOpt may write it in lower case (vLLM upper-cases it).
  check_declared(draft_with(R"({"quant_method": "modelopt", "quant_algo": "fp8_pb_wo"})"),
                 WeightFormat::Fp8Block, "\"fp8_pb_wo\"");
  // The legacy hf_quant_config.json form, with a wildcard exclusion of attention.
  check_declared(draft_with(R"({"quant_method": "modelopt", "quantization": {
      "quant_algo": "FP8", "exclude_modules": ["lm_head", "*self_attn*"]}})"),
                 WeightFormat::Dense,
                 "quantization_config.quantization.exclude_modules[1] = \"*self_attn*\"");
  // nvidia/Llama-3.1-8B-Instruct-FP4
  check_refused(draft_with(R"({"quant_method": "modelopt", "quant_algo": "NVFP4",
      "group_size": 16, "ignore": ["lm_head"]})"),
                false, "quantization_config.quant_algo",
                {"quant_algo \"NVFP4\" packs 4-bit e2m1 weights"});
  check_refused(draft_with(R"({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"})"),
                false, "quantization_config.quant_algo", {"not a ModelOpt algorithm"});
  check_refused(draft_with(R"({"quant_method": "modelopt"})"), true,
                "quantization_config.quant_algo", {"missing"});
}

TEST_CASE("fbgemm_fp8 and sglang's w8a8 methods", "[config][quant]") {
  // meta-llama/Llama-3.1-405B-Instruct-FP8's keys: per-channel FP8 weights.
  check_declared(draft_with(R"({"activation_scale_ub": 1200.0,
      "modules_to_not_convert": ["model.layers.0.mlp", "lm_head"], "quant_method": "fbgemm_fp8"})"),
                 WeightFormat::Fp8Channel, "\"fbgemm_fp8\"");
  // ... whose list leaves attention in bf16 where it names every layer's self_attn.
  std::string names;
  for (int i = 0; i < 5; ++i)
    names += std::string(names.empty() ? "" : ", ") + "\"model.layers." + std::to_string(i) +
             ".self_attn\"";
  check_declared(draft_with(R"({"activation_scale_ub": 1200.0, "quant_method": "fbgemm_fp8",
                                "modules_to_not_convert": [)" +
                            names + "]}"),
                 WeightFormat::Dense, "modules_to_not_convert[0]");
  check_declared(draft_with(R"({"quant_method": "w8a8_fp8"})"), WeightFormat::Fp8Channel,
                 "W8A8Fp8LinearMethod");
  check_declared(draft_with(R"({"quant_method": "w8a8_int8"})"), WeightFormat::Int8Channel,
                 "W8A8Int8LinearMethod");
}

TEST_CASE("an unknown quant_method, or a malformed declaration", "[config][quant]") {
  check_refused(draft_with(R"({"quant_method": "zzzquant", "bits": 3})"), false,
                "quantization_config.quant_method",
                {"\"zzzquant\" is not a quantization scheme fkv-jit knows"});
  check_refused(draft_with(R"("fp8")"), true, "quantization_config",
                {"expected an object", "\"fp8\" (a string)"});
  check_refused(draft_with(R"({"bits": 4})"), true, "quantization_config.quant_method",
                {"missing"});
  check_refused(draft_with(R"({"quant_method": 8})"), true, "quantization_config.quant_method",
                {"expected a string"});
  // A refusal never stops the config from being read: its layers are all there.
  const ModelConfig c = draft_with(R"({"quant_method": "zzzquant"})");
  CHECK(c.attention_layers().size() == 5);
}

TEST_CASE("choose_weight_format: the request wins, the declaration is the default",
          "[config][quant]") {
  const ModelConfig block =
      draft_with(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})");
  auto c = fkv::choose_weight_format(block, nullptr, "--weights");
  CHECK(c.format == WeightFormat::Fp8Block);
  CHECK_FALSE(c.warning);
  CHECK_THAT(c.message, Contains("draft.json: the K/V weights are fp8_block"));
  const WeightFormat int8 = WeightFormat::Int8Channel, fp8b = WeightFormat::Fp8Block;
  c = fkv::choose_weight_format(block, &int8, "--weights");
  CHECK(c.format == WeightFormat::Int8Channel);
  CHECK(c.warning);
  CHECK_THAT(c.message, Contains("--weights int8_channel differs from the fp8_block"));
  c = fkv::choose_weight_format(block, &fp8b, "--weights");
  CHECK(c.message.empty());
  const ModelConfig gptq = draft_with(R"({"quant_method": "gptq", "bits": 4})");
  CHECK_THROWS_AS(fkv::choose_weight_format(gptq, nullptr, "--weights"), fkv::UnsupportedError);
  const WeightFormat dense = WeightFormat::Dense;
  c = fkv::choose_weight_format(gptq, &dense, "weights");
  CHECK(c.format == WeightFormat::Dense);
  CHECK(c.warning);
  CHECK_THAT(c.message, Contains("weights dense is taken as given over the declaration at "
                                 "quantization_config.quant_method"));
  const ModelConfig none = config_test::load("dflash-qwen3-4b-draft.json");
  c = fkv::choose_weight_format(none, nullptr, "--weights");
  CHECK(c.format == WeightFormat::Dense);
  CHECK(c.message.empty());
}

TEST_CASE("module patterns: Python re.match subset, globs, dot runs", "[config][quant]") {
  using fkv::config_detail::excludes_module;
  using fkv::config_detail::glob_match;
  using fkv::config_detail::ModuleRegex;
  const std::string k = "model.layers.12.self_attn.k_proj";
  CHECK(ModuleRegex(".*self_attn.*").match(k));
  CHECK(ModuleRegex("model").match(k));  // re.match: a prefix is enough
  CHECK_FALSE(ModuleRegex("self_attn").match(k));
  CHECK(ModuleRegex(R"(.*\.(k|v)_proj$)").match(k));
  CHECK_FALSE(ModuleRegex(R"(.*\.(q|o)_proj$)").match(k));
  CHECK(ModuleRegex(R"(model\.layers\.\d+\.self_attn\.[kv]_proj)").match(k));
  CHECK_FALSE(ModuleRegex(R"(model\.layers\.[0-9]\.)").match(k));
  CHECK(ModuleRegex(R"(model\.layers\.1[0-9]{1,2}\.)").match(k));
  CHECK_FALSE(ModuleRegex(R"(model\.layers\.1[0-9]{2}\.)").match(k));
  CHECK(ModuleRegex(R"((?:model|layers)\.(?P<n>\w+)\.)").match(k));
  CHECK(ModuleRegex("[^x]+_proj$").match(k));
  CHECK(ModuleRegex(".*k_proj\\Z").match(k));
  CHECK_FALSE(ModuleRegex("^$").match(k));
  CHECK(ModuleRegex("").match(k));
  for (const char* bad : {"(?=x)", "(?i)model", "(a)\\1", "\\bself", "a**", "(a", "a)", "[a"}) {
    INFO(bad);
    CHECK_THROWS_AS(ModuleRegex(bad), std::invalid_argument);
  }
  // Linear time: a pattern that takes a backtracking engine exponential time is instant here.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string as(60, 'a');
  CHECK_FALSE(ModuleRegex("(a*)*b").match(as));
  CHECK_FALSE(ModuleRegex("(a|aa)+$b").match(as));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

  CHECK(glob_match("*self_attn*", k));
  CHECK(glob_match("model.layers.1?.self_attn.*", k));
  CHECK_FALSE(glob_match("model.layers.1?.mlp*", k));
  CHECK(excludes_module("self_attn", k));
  CHECK(excludes_module("model.layers.12", k));
  CHECK(excludes_module("layers.12.self_attn", k));
  CHECK_FALSE(excludes_module("layers.1", k));
  CHECK_FALSE(excludes_module("attn", k));
  CHECK(excludes_module("model.layers.*.self_attn", k));
  CHECK_FALSE(excludes_module("model.layers.*.mlp", k));
}

TEST_CASE("long pattern lists: exact names are cheap, a flood of patterns is refused in time",
          "[config][quant]") {
  const std::string group = R"({"config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "strategy": "channel", "type": "float"}}},
      "format": "float-quantized", "quant_method": "compressed-tensors"})";
  // 20000 exact names (a large MoE's ignore list is a few hundred): looked up, not scanned.
  json doc = draft_doc();
  doc["quantization_config"] = json::parse(group);
  json& ignore = doc["quantization_config"]["ignore"] = json::array();
  for (int i = 0; i < 20000; ++i)
    ignore.push_back("model.layers." + std::to_string(i) + ".mlp.experts.0.down_proj");
  auto t0 = std::chrono::steady_clock::now();
  check_declared(ModelConfig::from_json(doc, "draft.json"), WeightFormat::Fp8Channel,
                 "group_0.weights");
  // The time bounds are hang guards, not performance figures: the reader's work budget (about a
  // second in a release build) bounds the time; sanitizer builds on CI's two cores run it about
  // ten times slower (12.5 s measured under ASan).
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  // 6000 regexes that never match, each tried on every module name: beyond the work budget.
  ignore = json::array();
  for (int i = 0; i < 6000; ++i)
    ignore.push_back("re:.*never" + std::to_string(i) + ".*(a|b)*c[0-9]{1,3}");
  t0 = std::chrono::steady_clock::now();
  check_refused(ModelConfig::from_json(doc, "draft.json"), false, "quantization_config.ignore",
                {"6000 patterns, more than fkv-jit checks"});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
}
