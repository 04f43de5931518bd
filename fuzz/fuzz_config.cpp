// Fuzz target: the config reader and the validator on arbitrary bytes (docs/reliability.md).
//
// ModelConfig::from_json, make_plan (grouped and strict) and validate may throw ConfigError
// and nothing else. Beyond "no crash, hang or leak" the target checks invariants the headers
// promise, trapping when one breaks:
//   - a grouped plan puts every attention layer in exactly one group and every other layer
//     in skipped_layers;
//   - validate() succeeds exactly when the strict plan does, and then the strict plan is one
//     group whose spec is validate()'s;
//   - a valid grouped plan builds: kernel specs for every activation dtype (KernelSpec::check
//     passes) and a RoPE table per group whose entries are finite.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/rope.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise_plan(const fkv::ModelConfig& cfg) {
  fkv::Plan grouped;
  try {
    grouped = fkv::make_plan(cfg, fkv::ValidationMode::Grouped);
  } catch (const fkv::ConfigError&) {
    return;
  }
  std::set<int> seen;
  for (const auto& g : grouped.groups) {
    check(!g.layers.empty());
    (void)fkv::to_json(g.attn).dump();
    (void)fkv::format_rope(g.attn.rope);
    for (int l : g.layers) check(seen.insert(l).second);
  }
  for (int l : grouped.skipped_layers) check(seen.insert(l).second);
  // Valid means buildable: codegen's checks and the table builder must not refuse it.
  for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16, fkv::DType::FP32}) {
    fkv::VariantOptions o;
    o.act = o.cache = act;
    try {
      (void)fkv::kernel_specs_for(grouped, o);
    } catch (...) {
      check(false);
    }
  }
  fkv::RopeOptions ro;
  ro.max_position_embeddings = cfg.max_position_embeddings.value;
  for (const auto& g : grouped.groups) {
    if (g.attn.rotary_dim == 0) continue;
    try {
      const fkv::RopeTable t(g.attn.rope, g.attn.rotary_dim, 64, ro);
      for (double x : t.values()) check(std::isfinite(x));
    } catch (...) {
      check(false);
    }
  }
  check(seen.size() == cfg.layers.size());
  for (const auto& layer : cfg.layers) {
    check(seen.count(layer.index) == 1);
    (void)fkv::to_string(layer.kind.value);
    (void)fkv::to_string(layer.k_norm.value);
  }
}

void exercise_strict(const fkv::ModelConfig& cfg) {
  bool validated = false, planned = false;
  fkv::AttentionSpec spec;
  fkv::Plan strict;
  try {
    spec = fkv::validate(cfg);
    validated = true;
  } catch (const fkv::ConfigError&) {
  }
  try {
    strict = fkv::make_plan(cfg, fkv::ValidationMode::Strict);
    planned = true;
  } catch (const fkv::ConfigError&) {
  }
  check(validated == planned);
  if (planned) {
    check(strict.groups.size() == 1);
    check(strict.groups[0].attn == spec);
    (void)fkv::to_json(spec).dump();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fkv::ModelConfig cfg;
  try {
    cfg = fkv::ModelConfig::from_json(text, "fuzz.json");
  } catch (const fkv::ConfigError&) {
    return 0;
  }
  (void)cfg.attention_layers();
  // The quantization_config reader never throws while reading; its refusal names the file first.
  if (cfg.weights.refused()) {
    check(cfg.weights.error.rfind("fuzz.json: ", 0) == 0);
    try {
      (void)fkv::declared_weight_format(cfg);
      check(false);
    } catch (const fkv::ConfigError&) {
    }
  } else {
    (void)fkv::to_string(fkv::declared_weight_format(cfg));
  }
  exercise_plan(cfg);
  exercise_strict(cfg);
  return 0;
}
