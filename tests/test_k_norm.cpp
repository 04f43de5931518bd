// The K-norm kinds (fkv/k_norm.hpp): every kind round-trips through its name and C value and
// reaches KernelSpec, the kernel source and the cache's canonical text.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "fkv/codegen.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/k_norm.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

using namespace fkv;

namespace {

// A one-layer explicit-schema config whose K norm is `name`.
ModelConfig one_layer(const std::string& name) {
  const nlohmann::json layer{{"num_kv_heads", 8},     {"head_dim", 128},       {"rotary_dim", 128},
                             {"is_neox_style", true}, {"rope_theta", 10000.0}, {"k_norm", name}};
  return ModelConfig::from_json(nlohmann::json{{"fkv", {{"layers", {layer}}}}});
}

}  // namespace

TEST_CASE("every K-norm kind round-trips through its name and number", "[k_norm]") {
  REQUIRE(k_norm_kinds().size() >= 3);
  std::set<std::string> names;
  int number = 0;
  for (const KNormInfo& r : k_norm_kinds()) {
    INFO(r.name);
    CHECK(static_cast<int>(r.kind) == number++);  // the table is in enum order
    CHECK(names.insert(r.name).second);
    CHECK(to_string(r.kind) == r.name);
    CHECK(parse_k_norm(r.name) == r.kind);
    CHECK(find_k_norm(r.name) == r.kind);
    CHECK(k_norm_from_int(static_cast<int>(r.kind)) == r.kind);
    CHECK(&k_norm_info(r.kind) == &r);
    CHECK(k_norm_names().find(std::string("\"") + r.name + "\"") != std::string::npos);
    // A kind's kernel is a kernel kind: it computes itself, and has a key and a suffix.
    const KNormInfo& kernel = k_norm_info(r.kernel);
    CHECK(kernel.kernel == kernel.kind);
    CHECK(kernel.key != nullptr);
    CHECK(kernel.suffix != nullptr);
    CHECK(fold_k_norm_weight(r.kind, 0.5f) == r.weight_offset + 0.5f);
  }
  CHECK_FALSE(find_k_norm("RMS").has_value());
  CHECK_THROWS_AS(parse_k_norm("l2"), ArgumentError);
  CHECK_THROWS_WITH(parse_k_norm("l2"), Catch::Contains("\"rms_one_plus\""));
  CHECK_THROWS_AS(k_norm_from_int(-1), ArgumentError);
  CHECK_THROWS_AS(k_norm_from_int(static_cast<long long>(k_norm_kinds().size())), ArgumentError);
  CHECK_THROWS_AS(k_norm_info(static_cast<KNormKind>(99)), ArgumentError);
  CHECK(to_string(static_cast<KNormKind>(99)) == "?");
}

TEST_CASE("every K-norm kind reaches KernelSpec from a config", "[k_norm]") {
  std::set<std::string> keys, suffixes;
  for (const KNormInfo& r : k_norm_kinds()) {
    INFO(r.name);
    const ModelConfig c = one_layer(r.name);
    REQUIRE(c.layers.size() == 1);
    CHECK(c.layers[0].k_norm.value == r.kind);
    const Plan plan = make_plan(c);
    REQUIRE(plan.groups.size() == 1);
    CHECK(plan.groups[0].attn.k_norm == r.kind);
    const KernelSpec s = make_kernel_spec(plan.groups[0].attn, DType::BF16, DType::BF16);
    CHECK(s.k_norm == r.kernel);
    CHECK(s.k_norm == kernel_k_norm(r.kind));
    const KNormInfo& kernel = k_norm_info(s.k_norm);
    CHECK(s.canonical().find(std::string(";knorm=") + kernel.key + ";") != std::string::npos);
    CHECK(k_norm_weighted(s.k_norm) == kernel.weighted);
    // The kernel gets the kind's number as its K_NORM template argument.
    const KernelSource src = generate(s);
    CHECK(src.name_expression.rfind("fkv_kernels::fused_kv_materialize<8, 128, 128, true, " +
                                        std::to_string(static_cast<int>(s.k_norm)) + ", ",
                                    0) == 0);
    if (r.kind == r.kernel) {
      CHECK(keys.insert(kernel.key).second);
      CHECK(suffixes.insert(kernel.suffix).second);
    }
  }
}

TEST_CASE("a KernelSpec takes kernel kinds only", "[k_norm]") {
  KernelSpec s;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = 128;
  for (const KNormInfo& r : k_norm_kinds()) {
    INFO(r.name);
    s.k_norm = r.kind;
    if (r.kind == r.kernel)
      CHECK_NOTHROW(s.check());
    else
      CHECK_THROWS_WITH(s.check(), Catch::Contains("folds it into the weight"));
  }
}

TEST_CASE("canonical texts of the kinds that were a bool are unchanged", "[k_norm]") {
  // The cache keys of kernels compiled before the enum: knorm=1 / knorm=0, "_kn" / "".
  KernelSpec s;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.k_norm = KNormKind::Rms;
  CHECK(s.canonical() ==
        "H=8;D=128;R=128;neox=1;knorm=1;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;"
        "mode=stacked;debug=0");
  CHECK(s.short_name() == "fkv_h8_d128_r128_neox_kn_bf16_bf16_stacked");
  s.k_norm = KNormKind::None;
  CHECK(s.canonical() ==
        "H=8;D=128;R=128;neox=1;knorm=0;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;"
        "mode=stacked;debug=0");
  CHECK(s.short_name() == "fkv_h8_d128_r128_neox_bf16_bf16_stacked");
}
