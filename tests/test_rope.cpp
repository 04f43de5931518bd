// rope: cos/sin tables against independently computed references
// (tests/data/rope/gen_rope_refs.py, pure-Python float64 from transformers' formulas), plus
// layout, dtype conversion and error cases.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/rope.hpp"

using fkv::DType;
using fkv::RopeFrequencies;
using fkv::RopeOptions;
using fkv::RopeTable;
using nlohmann::json;

namespace {

json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

const json& refs() {
  static const json j = load_json(std::string(FKV_TEST_DATA_DIR) + "/rope/rope_refs.json");
  return j;
}

const json& ref_case(const std::string& name) {
  for (const json& c : refs().at("cases"))
    if (c.at("name") == name) return c;
  FAIL("no reference case " << name);
  throw std::logic_error("unreachable");
}

RopeFrequencies freq_of(const json& rope) {
  RopeFrequencies f;
  f.theta = rope.at("theta").get<double>();
  f.scaling_type = rope.at("type").get<std::string>();
  f.scaling = rope.at("scaling");
  return f;
}

RopeTable table_of(const json& c) {
  RopeOptions o;
  o.max_position_embeddings = c.at("max_position_embeddings").get<std::int64_t>();
  o.seq_len = c.at("seq_len").get<std::int64_t>();
  return RopeTable(freq_of(c.at("rope")), c.at("rotary_dim").get<int>(),
                   c.at("max_position").get<std::int64_t>(), o);
}

// 1e-12 relative, with an absolute floor of 1e-12 for entries near zero (sin(0), cos(pi/2)).
bool close(double got, double want, double rel = 1e-12) {
  return std::fabs(got - want) <= rel * std::max(std::fabs(want), 1.0);
}

// Compares a table with a reference case: every inv_freq, the attention factor, and the sampled
// cos/sin entries.
void check_against(const RopeTable& t, const json& c) {
  INFO("case " << c.at("name").get<std::string>());
  const auto& want = c.at("inv_freq");
  REQUIRE(t.inv_freq().size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("inv_freq[" << i << "] got " << t.inv_freq()[i] << " want " << want[i].get<double>());
    CHECK(std::fabs(t.inv_freq()[i] - want[i].get<double>()) <= 1e-12 * want[i].get<double>());
  }
  CHECK(close(t.attention_factor(), c.at("attention_factor").get<double>()));
  for (const json& s : c.at("samples")) {
    const auto pos = s[0].get<std::int64_t>();
    const int i = s[1].get<int>();
    INFO("pos " << pos << " i " << i);
    CHECK(close(t.cos(pos, i), s[2].get<double>()));
    CHECK(close(t.sin(pos, i), s[3].get<double>()));
  }
}

// The RoPE inputs of a HuggingFace config, read by hand with transformers' key rules (used
// until config -> RopeTable runs through ModelConfig). Top-level
// original_max_position_embeddings (Phi-3) is moved into the scaling dict, like
// transformers' standardize_rope_params.
RopeFrequencies freq_from_hf(const json& cfg, double theta_default = 10000.0) {
  RopeFrequencies f;
  f.theta = cfg.value("rope_theta", theta_default);
  json sc = cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() ? cfg["rope_scaling"]
                                                                            : json::object();
  f.scaling_type = sc.value("rope_type", sc.value("type", std::string("default")));
  sc.erase("rope_type");
  sc.erase("type");
  if (cfg.contains("original_max_position_embeddings"))
    sc["original_max_position_embeddings"] = cfg["original_max_position_embeddings"];
  f.scaling = sc;
  return f;
}

}  // namespace

TEST_CASE("rope: every reference case matches the independent float64 computation", "[rope]") {
  const json& cases = refs().at("cases");
  REQUIRE(cases.size() >= 20);
  for (const json& c : cases) check_against(table_of(c), c);
}

TEST_CASE("rope: real configs read by hand give the reference tables", "[rope]") {
  const std::string dir = FKV_TEST_DATA_DIR;
  SECTION("llama3.1-8b-instruct: llama3 scaling") {
    const json cfg = load_json(dir + "/llama3.1-8b-instruct.json");
    const auto f = freq_from_hf(cfg);
    CHECK(f.scaling_type == "llama3");
    RopeTable t(f, 4096 / 32, 131072, {cfg["max_position_embeddings"].get<std::int64_t>(), 0});
    check_against(t, ref_case("llama3.1-8b-instruct"));
    // Highest frequency untouched, lowest divided by the factor 8.
    CHECK(t.inv_freq().front() == 1.0);
    CHECK(t.inv_freq().back() == Approx(1.0 / std::pow(500000.0, 126.0 / 128) / 8).epsilon(1e-14));
  }
  SECTION("gpt-oss-20b: yarn, truncate false, attention factor 0.1 ln 32 + 1") {
    const json cfg = load_json(dir + "/gpt-oss-20b.json");
    RopeTable t(freq_from_hf(cfg), cfg["head_dim"].get<int>(), 131072, {131072, 0});
    check_against(t, ref_case("gpt-oss-20b"));
    CHECK(t.attention_factor() == Approx(0.1 * std::log(32.0) + 1.0).epsilon(1e-15));
  }
  SECTION("phi-3.5: longrope, top-level original_max_position_embeddings") {
    const json cfg = load_json(dir + "/phi3-phi-3.5-vision-text.json");
    const auto f = freq_from_hf(cfg);
    RopeTable t(f, 3072 / 32, 131072, {131072, 0});
    check_against(t, ref_case("phi3.5-longrope-long"));
    CHECK(t.attention_factor() ==
          Approx(std::sqrt(1 + std::log(32.0) / std::log(4096.0))).epsilon(1e-15));
    // A table no longer than the original context uses the short factors.
    RopeTable s(f, 96, 4096, {131072, 0});
    check_against(s, ref_case("phi3.5-longrope-short"));
    CHECK(s.inv_freq()[1] != t.inv_freq()[1]);
  }
  SECTION("olmo3.1-32b: yarn with an explicit attention_factor") {
    const json cfg = load_json(dir + "/olmo3.1-32b-instruct.json");
    RopeTable t(freq_from_hf(cfg), 5120 / 40, 65536, {65536, 0});
    check_against(t, ref_case("olmo3.1-32b"));
    CHECK(t.attention_factor() == cfg["rope_scaling"]["attention_factor"].get<double>());
  }
  SECTION("gemma3-4b: linear factor 8 on global layers, default on sliding layers") {
    const json cfg = load_json(dir + "/gemma3-4b-it.json").at("text_config");
    // text_config omits theta and head_dim: Gemma3TextConfig defaults (rope_theta 1e6, head_dim
    // 256).
    RopeTable global(freq_from_hf(cfg, 1000000.0), 256, 131072, {131072, 0});
    check_against(global, ref_case("gemma3-4b-global"));
    RopeTable local(RopeFrequencies{10000.0, "default", json::object()}, 256, 131072);
    check_against(local, ref_case("gemma3-4b-local"));
  }
}

TEST_CASE("rope: config -> RopeTable through ModelConfig gives the reference tables",
          "[rope][config]") {
  // (config file, model layer, reference case): the refs that name a config, plus default-rope
  // models whose tables equal a synthetic case (partial rotary, mrope sections).
  std::vector<std::tuple<std::string, int, std::string>> uses;
  for (const json& c : refs().at("cases"))
    if (c.contains("config")) uses.emplace_back(c["config"], c["layer"].get<int>(), c["name"]);
  uses.emplace_back("phi-phi-2.json", 0, "default-phi2-r32");
  uses.emplace_back("glm4-moe-glm-4.5.json", 0, "default-partial-glm4");
  uses.emplace_back("qwen3.5-9b.json", 3, "mrope-alias");  // first full_attention layer
  for (const auto& [file, layer, name] : uses) {
    INFO(file << " layer " << layer << " vs " << name);
    const auto cfg = fkv::ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/" + file);
    REQUIRE(layer < static_cast<int>(cfg.layers.size()));
    const fkv::LayerAttention& l = cfg.layers[layer];
    REQUIRE(l.is_attention());
    const json c = ref_case(name);
    CHECK(l.rotary_dim.value == c.at("rotary_dim").get<int>());
    const RopeTable t(l.rope.value, l.rotary_dim.value, c.at("max_position").get<std::int64_t>(),
                      {cfg.max_position_embeddings.value, c.at("seq_len").get<std::int64_t>()});
    check_against(t, c);
  }
}

TEST_CASE("rope: layout is [max_position, R], cos in the first R/2 columns, sin in the last",
          "[rope]") {
  const RopeFrequencies f{
      150000.0, "yarn",
      json{{"factor", 32.0}, {"original_max_position_embeddings", 4096}, {"truncate", false}}};
  const RopeTable t(f, 16, 37, {131072, 0});
  const auto v = t.values();
  REQUIRE(v.size() == 37u * 16u);
  for (std::int64_t p = 0; p < 37; ++p) {
    for (int i = 0; i < 8; ++i) {
      const double a = static_cast<double>(p) * t.inv_freq()[i];
      CHECK(v[p * 16 + i] == std::cos(a) * t.attention_factor());
      CHECK(v[p * 16 + 8 + i] == std::sin(a) * t.attention_factor());
    }
  }
  // fp32 bytes are the float64 entries rounded once, in the same order.
  const auto b = t.bytes(DType::FP32);
  REQUIRE(b.size() == v.size() * 4);
  REQUIRE(t.size_bytes(DType::FP32) == b.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    float got = 0;
    std::memcpy(&got, b.data() + 4 * k, 4);
    CHECK(got == static_cast<float>(v[k]));
  }
}

TEST_CASE("rope: position 0 is cos = attention factor, sin = 0", "[rope]") {
  for (const char* name :
       {"default-128", "gpt-oss-20b", "phi3.5-longrope-long", "yarn-deepseek-mscale"}) {
    INFO(name);
    const RopeTable t = table_of(ref_case(name));
    const auto v = t.values();
    const int R = t.rotary_dim();
    REQUIRE(t.max_position() > 0);
    for (int i = 0; i < R / 2; ++i) {
      CHECK(v[i] == t.attention_factor());
      CHECK(v[R / 2 + i] == 0.0);
    }
  }
  const RopeTable d(RopeFrequencies{}, 128, 4);
  const auto bf = d.bytes(DType::BF16);
  const auto hf = d.bytes(DType::FP16);
  std::uint16_t x = 0;
  std::memcpy(&x, bf.data(), 2);
  CHECK(x == 0x3f80);  // bf16(1.0)
  std::memcpy(&x, bf.data() + 2 * 64, 2);
  CHECK(x == 0x0000);  // bf16(sin 0)
  std::memcpy(&x, hf.data(), 2);
  CHECK(x == 0x3c00);  // fp16(1.0)
  CHECK(bf.size() == 4u * 128u * 2u);
}

TEST_CASE("rope: sequence-length dependent types are evaluated once, at seq_len", "[rope]") {
  const RopeFrequencies dyn{10000.0, "dynamic", json{{"factor", 2.0}}};
  const RopeTable plain(RopeFrequencies{}, 128, 16384);
  // At or below max_position_embeddings dynamic NTK is the default table.
  const RopeTable below(dyn, 128, 2048, {4096, 0});
  CHECK(below.inv_freq() == RopeTable(RopeFrequencies{}, 128, 2048).inv_freq());
  // Above it the base grows: lower frequencies, except the first (theta^0).
  const RopeTable above(dyn, 128, 16384, {4096, 0});
  CHECK(above.inv_freq()[0] == 1.0);
  CHECK(above.inv_freq()[10] < plain.inv_freq()[10]);
  // seq_len overrides the table length.
  const RopeTable forced(dyn, 128, 2048, {4096, 16384});
  CHECK(forced.inv_freq() == above.inv_freq());
  CHECK_THROWS_AS(RopeTable(dyn, 128, 2048), fkv::ConfigError);  // needs max_position_embeddings

  const json phi = ref_case("phi3.5-longrope-long");
  const RopeTable long_table = table_of(phi);
  const RopeTable short_by_option(freq_of(phi.at("rope")), 96, 131072, {131072, 4096});
  CHECK(short_by_option.inv_freq() == table_of(ref_case("phi3.5-longrope-short")).inv_freq());
  CHECK(short_by_option.inv_freq() != long_table.inv_freq());
}

TEST_CASE("rope: linear divides the default frequencies; mrope is default", "[rope]") {
  const RopeTable d(RopeFrequencies{}, 64, 8);
  const RopeTable l(RopeFrequencies{10000.0, "linear", json{{"factor", 4}}}, 64, 8);
  for (int i = 0; i < 32; ++i) CHECK(l.inv_freq()[i] == d.inv_freq()[i] / 4.0);
  const RopeTable m(RopeFrequencies{10000.0, "mrope", json{{"mrope_section", {16, 8, 8}}}}, 64, 8);
  CHECK(m.type() == "default");
  CHECK(m.inv_freq() == d.inv_freq());
  CHECK(RopeTable(RopeFrequencies{10000.0, "", json::object()}, 64, 8).type() == "default");
}

TEST_CASE("rope: dtype conversion rounds once to nearest even", "[rope]") {
  CHECK(fkv::bf16_bits(1.0) == 0x3f80);
  CHECK(fkv::bf16_bits(-2.0) == 0xc000);
  CHECK(fkv::bf16_bits(0.0) == 0x0000);
  CHECK(fkv::bf16_bits(-0.0) == 0x8000);
  CHECK(fkv::bf16_bits(1.0 + 0x1p-8) == 0x3f80);      // tie -> even
  CHECK(fkv::bf16_bits(1.0 + 3 * 0x1p-8) == 0x3f82);  // tie -> even (up)
  CHECK(fkv::bf16_bits(1.0 + 0x1p-8 + 0x1p-40) ==
        0x3f81);  // above the tie: no double rounding via float
  CHECK(fkv::bf16_bits(std::nan("")) == 0x7fc0);
  CHECK(fkv::bf16_bits(1e300) == 0x7f80);

  CHECK(fkv::fp16_bits(1.0) == 0x3c00);
  CHECK(fkv::fp16_bits(-2.0) == 0xc000);
  CHECK(fkv::fp16_bits(65504.0) == 0x7bff);
  CHECK(fkv::fp16_bits(65520.0) == 0x7c00);  // rounds past the largest finite value
  CHECK(fkv::fp16_bits(0x1p-24) == 0x0001);  // smallest subnormal
  CHECK(fkv::fp16_bits(0x1p-25) == 0x0000);  // tie -> even (zero)
  CHECK(fkv::fp16_bits(0x1.8p-25) == 0x0001);
  CHECK(fkv::fp16_bits(0x1p-14) == 0x0400);                  // smallest normal
  CHECK(fkv::fp16_bits(1.0 + 0x1p-11) == 0x3c00);            // tie -> even
  CHECK(fkv::fp16_bits(1.0 + 0x1p-11 + 0x1p-40) == 0x3c01);  // above the tie
  CHECK(fkv::fp16_bits(0.333333333333) == 0x3555);

  CHECK(fkv::fp32_bits(1.0) == 0x3f800000u);
  CHECK(fkv::fp32_bits(1.0 + 0x1p-24) == 0x3f800000u);  // tie -> even
  CHECK(fkv::fp32_bits(1.0 + 0x1p-24 + 0x1p-50) == 0x3f800001u);
  CHECK(fkv::fp32_bits(0x1p-149) == 0x00000001u);
  CHECK(fkv::fp32_bits(1e40) == 0x7f800000u);

  // A whole table: every bf16 entry is the float64 entry rounded once.
  const RopeTable t(RopeFrequencies{500000.0, "default", json::object()}, 128, 300);
  const auto v = t.values();
  const auto b = t.bytes(DType::BF16);
  for (std::size_t k = 0; k < v.size(); k += 7) {
    std::uint16_t x = 0;
    std::memcpy(&x, b.data() + 2 * k, 2);
    CHECK(x == fkv::bf16_bits(v[k]));
    std::uint32_t f32 = static_cast<std::uint32_t>(x) << 16;
    float back = 0;
    std::memcpy(&back, &f32, 4);
    CHECK(std::fabs(back - v[k]) <= std::ldexp(std::fabs(v[k]), -8));  // half an ulp of bf16
  }
  CHECK_THROWS_AS(t.bytes(DType::FP8_E4M3), fkv::ArgumentError);
}

TEST_CASE("rope: bad input is a ConfigError that names the problem", "[rope]") {
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const fkv::ConfigError& e) {
      return e.what();
    }
    return "<no ConfigError>";
  };
  const std::string unknown = message([] {
    RopeTable(RopeFrequencies{10000.0, "su", json::object()}, 64, 8);
  });
  CHECK_THAT(unknown, Catch::Contains("'su'") && Catch::Contains("not supported"));
  for (const auto& t : RopeTable::supported_types()) CHECK_THAT(unknown, Catch::Contains(t));

  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "linear", json::object()}, 64, 8);
             }),
             Catch::Contains("'factor'") && Catch::Contains("linear"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "linear", json{{"factor", "8"}}}, 64, 8);
             }),
             Catch::Contains("'factor'") && Catch::Contains("number"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "linear", json{{"factor", -1}}}, 64, 8);
             }),
             Catch::Contains("> 0"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "llama3",
                                         json{{"factor", 8.0}, {"high_freq_factor", 4.0}}},
                         64, 8);
             }),
             Catch::Contains("low_freq_factor"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "longrope",
                                         json{{"short_factor", {1.0, 1.0}},
                                              {"long_factor", {1.0, 1.0}},
                                              {"original_max_position_embeddings", 4096}}},
                         64, 8, {8192, 0});
             }),
             Catch::Contains("short_factor") && Catch::Contains("32"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{10000.0, "yarn", json{{"factor", 4.0}}}, 64, 8);
             }),
             Catch::Contains("original_max_position_embeddings"));
  CHECK_THAT(message([] { RopeTable(RopeFrequencies{}, 63, 8); }), Catch::Contains("rotary_dim"));
  CHECK_THAT(message([] { RopeTable(RopeFrequencies{}, 64, 0); }), Catch::Contains("max_position"));
  CHECK_THAT(message([] {
               RopeTable(RopeFrequencies{-1.0, "default", json::object()}, 64, 8);
             }),
             Catch::Contains("rope_theta"));
}

TEST_CASE("rope: parameters whose table would not be finite are refused", "[rope][finite]") {
  auto make = [](double theta, const std::string& type, json scaling) {
    RopeFrequencies f;
    f.theta = theta;
    f.scaling_type = type;
    f.scaling = std::move(scaling);
    return f;
  };
  // A tiny theta or linear factor: frequencies near 1e300, position * inv_freq overflows.
  CHECK_THROWS_WITH(RopeTable(make(1e-300, "default", json::object()), 128, 16),
                    Catch::Contains("frequency") && Catch::Contains("rope_theta"));
  CHECK_THROWS_WITH(RopeTable(make(1e6, "linear", {{"factor", 1e-300}}), 128, 16),
                    Catch::Contains("frequency"));
  // yarn: mscale_all_dim chosen so that 0.1 * m * ln(4) + 1 == 0 -> attention factor inf or huge.
  const double cancel = -10.0 / std::log(4.0);
  CHECK_THROWS_WITH(RopeTable(make(1e6, "yarn",
                                   {{"factor", 4.0},
                                    {"original_max_position_embeddings", 4096},
                                    {"mscale", 1.0},
                                    {"mscale_all_dim", cancel}}),
                              128, 16),
                    Catch::Contains("attention factor"));
  // An explicit attention factor beyond fp16's range, and a negative one.
  CHECK_THROWS_WITH(RopeTable(make(1e6, "yarn",
                                   {{"factor", 4.0},
                                    {"original_max_position_embeddings", 4096},
                                    {"attention_factor", 1e5}}),
                              128, 16),
                    Catch::Contains("65504"));
  // A huge factor is fine: the frequencies only get smaller.
  const RopeTable ok(make(1e6, "linear", {{"factor", 1e300}}), 128, 16);
  for (double x : ok.values()) CHECK(std::isfinite(x));
  // The limits themselves build (65504 exactly).
  CHECK_NOTHROW(RopeTable(make(1e6, "yarn",
                               {{"factor", 4.0},
                                {"original_max_position_embeddings", 4096},
                                {"attention_factor", 65504.0}}),
                          128, 16));
}

// Issue 23 item 1: max_position * R * 4 used to overflow size_t for 2^57 positions, so
// size_bytes() said 0 and the C API returned an empty table. The constructor now takes at most
// kMaxRopePositions (2^31) rows; size_bytes() and values() check their arithmetic.
TEST_CASE("rope: max_position is bounded and sizes never overflow", "[rope]") {
  RopeFrequencies f;
  f.theta = 10000.0;
  const std::int64_t huge = std::int64_t{1} << 57;
  CHECK_THROWS_WITH(RopeTable(f, 128, huge),
                    Catch::Contains("[1, 2^31]") && Catch::Contains(std::to_string(huge)));
  CHECK_THROWS_AS(RopeTable(f, 128, fkv::kMaxRopePositions + 1), fkv::ConfigError);
  CHECK_THROWS_AS(RopeTable(f, 128, -5), fkv::ConfigError);
  const RopeTable max(f, 128, fkv::kMaxRopePositions);
  CHECK(max.size_bytes(DType::FP32) == (std::size_t{1} << 31) * 128 * 4);
  CHECK(max.size_bytes(DType::BF16) == (std::size_t{1} << 31) * 128 * 2);
}
