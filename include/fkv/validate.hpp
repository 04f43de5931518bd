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
Plan make_plan(const ModelConfig& config, ValidationMode mode = ValidationMode::Strict);

}  // namespace fkv
