// validate: per-layer attention facts -> one kernel specialization (strict mode, the seed's
// semantics and error texts, SPEC §3) or a grouped plan.
#pragma once

#include <string>
#include <vector>

#include "fkv/config.hpp"

namespace fkv {

// What the layers of one launch share: everything that goes into the kernel specialization
// plus the cos/sin table. Per-layer eps and weights are not part of it.
struct AttentionSpec {
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;
  bool is_neox_style = true;
  KNormKind k_norm = KNormKind::None;
  RopeFrequencies rope;
  bool operator==(const AttentionSpec& o) const;
};

// Layers (model numbering) served by one kernel specialization, one cos/sin table, one launch.
struct LayerGroup {
  AttentionSpec attn;
  std::vector<int> layers;
};

struct Plan {
  std::vector<LayerGroup> groups;
  std::vector<int> skipped_layers;  // non-attention layers, numbering kept
};

enum class ValidationMode { Strict, Grouped };

// Strict mode: the reference is the first attention layer; each attention layer is checked in
// order for num_kv_heads, head_dim, (rotary_dim, neox), RoPE frequencies. Throws ConfigError
// with exactly the SPEC §3 texts. Also throws for unsupported layers and for a model with no
// attention layer.
AttentionSpec validate(const ModelConfig& config);

// Strict: one group (validate() must pass). Grouped: attention layers partitioned into uniform
// groups in order of first appearance. Unsupported layers still throw.
// Both modes check the rotary/head dim pair ("Invalid fused KV rotary/head dim pair: ...") and
// that num_kv_heads and head_dim are positive: strict mode on the reference layer (the others
// must equal it), grouped mode on every attention layer.
Plan make_plan(const ModelConfig& config, ValidationMode mode = ValidationMode::Strict);

// The spec of one attention layer as validation compares it. On NoPE layers (rotary_dim 0)
// the frequencies are irrelevant and reset to RopeFrequencies{}, so NoPE layers share a group.
AttentionSpec attention_spec(const LayerAttention& layer);

// Texts used in messages and by the CLI, Python-style: "True"/"False", floats as Python's
// repr ("1000000.0", "1e-06").
std::string format_bool(bool value);
std::string format_float(double value);
// "theta=1000000.0, scaling=default" or "theta=150000.0, scaling=yarn(factor=32.0, ...)".
std::string format_rope(const RopeFrequencies& rope);
// {"num_kv_heads", "head_dim", "rotary_dim", "is_neox_style", "k_norm",
//  "rope": {"theta", "scaling_type", "scaling"}}; "rope" is null when rotary_dim is 0.
nlohmann::json to_json(const AttentionSpec& spec);

}  // namespace fkv
