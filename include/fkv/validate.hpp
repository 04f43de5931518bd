// validate: per-layer attention facts -> one kernel specialization (strict mode, the seed's
// semantics and error texts) or a grouped plan.
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

// The KV heads one tensor-parallel rank holds, in the model's head numbering.
struct KVHeadShard {
  int first_head = 0;  // the rank holds heads [first_head, first_head + num_heads)
  int num_heads = 0;
  int total_heads = 0;      // the model's num_kv_heads
  bool replicated = false;  // num_kv_heads < tp_size: this head is also held by other ranks
};

// Layers (model numbering) served by one kernel specialization, one cos/sin table, one launch.
// Under tensor parallelism attn.num_kv_heads is the rank's share (heads.num_heads).
struct LayerGroup {
  AttentionSpec attn;
  std::vector<int> layers;
  KVHeadShard heads = {};  // make_plan: all heads ({0, H, H, false}); shard_plan: the rank's
};

struct Plan {
  std::vector<LayerGroup> groups;
  std::vector<int> skipped_layers;  // non-attention layers, numbering kept
  int tp_size = 1;  // tensor parallelism: the plan of rank tp_rank of tp_size (shard_plan)
  int tp_rank = 0;
};

enum class ValidationMode { Strict, Grouped };

// Strict mode: the reference is the first attention layer; each attention layer is checked in
// order for num_kv_heads, head_dim, (rotary_dim, neox), RoPE frequencies. Throws ConfigError
// with exactly the seed's texts (docs/cli.md lists them). Also throws for unsupported layers and
// for a model with no attention layer.
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

// ---- tensor parallelism ------------------------------------------------------------------
// As sglang and vLLM shard the KV heads: when num_kv_heads % tp_size == 0 the heads split
// evenly, rank r holding [r * H / tp_size, (r + 1) * H / tp_size); when num_kv_heads < tp_size
// and tp_size % num_kv_heads == 0, each rank holds one head, r * num_kv_heads / tp_size
// (replicated on tp_size / num_kv_heads ranks). Anything else throws ConfigError naming both
// numbers; tp_size < 1 or tp_rank outside [0, tp_size) throw ArgumentError.
struct TensorParallel {
  int size = 1;
  int rank = 0;
};
KVHeadShard kv_head_shard(int num_kv_heads, const TensorParallel& tp);

// The plan of one rank: every group's attn.num_kv_heads becomes the rank's share and
// group.heads records which heads those are; tp_size/tp_rank are set. The kernels of a rank
// are those of its plan (kernel_specs_for). `plan` must be unsharded (tp_size 1).
Plan shard_plan(const Plan& plan, const TensorParallel& tp);

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
