// validate: per-layer attention facts -> one kernel specialization (strict) or a grouped plan.
//
// Strict mode keeps the seed's semantics and error texts exactly; bindings and users
// match on them, so they must not change. Frequency and K-norm mismatches, which the seed did
// not detect, get messages of the same form.
#include "fkv/validate.hpp"

#include <charconv>
#include <cmath>
#include <unordered_map>

#include "fkv/errors.hpp"
#include "fkv/rope.hpp"
#include "fkv/seed_texts.hpp"
#include "fkv/spec.hpp"

namespace fkv {

bool AttentionSpec::operator==(const AttentionSpec& o) const {
  return num_kv_heads == o.num_kv_heads && head_dim == o.head_dim && rotary_dim == o.rotary_dim &&
         is_neox_style == o.is_neox_style && k_norm == o.k_norm && rope == o.rope;
}

std::string format_bool(bool value) { return value ? "True" : "False"; }

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, laid out the way Python's repr does: positional notation for
  // decimal exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  if (ec != std::errc{}) return std::to_string(value);
  std::string sci(buf, end);
  const auto e_pos = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent < -4 || exponent >= 16) return sci;
  std::string mantissa = sci.substr(0, e_pos);
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return negative ? "-" + out : out;
}

namespace {

std::string format_json_value(const nlohmann::json& v) {
  if (v.is_number_float()) return format_float(v.get<double>());
  if (v.is_boolean()) return format_bool(v.get<bool>());
  return v.dump();
}

}  // namespace

std::string format_rope(const RopeFrequencies& rope) {
  std::string out = "theta=" + format_float(rope.theta) + ", scaling=" + rope.scaling_type;
  if (rope.scaling.is_object() && !rope.scaling.empty()) {
    out += "(";
    bool first = true;
    for (const auto& [key, value] : rope.scaling.items()) {
      if (!first) out += ", ";
      first = false;
      out += key + "=" + format_json_value(value);
    }
    out += ")";
  } else if (!rope.scaling.is_null() && !rope.scaling.is_object()) {
    out += "(" + rope.scaling.dump() + ")";
  }
  return out;
}

nlohmann::json to_json(const AttentionSpec& spec) {
  nlohmann::json rope = nullptr;
  if (spec.rotary_dim > 0) {
    rope = {{"theta", spec.rope.theta},
            {"scaling_type", spec.rope.scaling_type},
            {"scaling", spec.rope.scaling}};
  }
  return {{"num_kv_heads", spec.num_kv_heads}, {"head_dim", spec.head_dim},
          {"rotary_dim", spec.rotary_dim},     {"is_neox_style", spec.is_neox_style},
          {"k_norm", to_string(spec.k_norm)},  {"rope", rope}};
}

AttentionSpec attention_spec(const LayerAttention& layer) {
  AttentionSpec spec;
  spec.num_kv_heads = layer.num_kv_heads.value;
  spec.head_dim = layer.head_dim.value;
  spec.rotary_dim = layer.rotary_dim.value;
  spec.is_neox_style = layer.is_neox_style.value;
  spec.k_norm = layer.k_norm.value;
  // NoPE layers use no cos/sin table: their frequencies must not split groups.
  if (spec.rotary_dim != 0) spec.rope = layer.rope.value;
  return spec;
}

namespace {

std::string config_name(const ModelConfig& config) {
  return config.path.empty() ? std::string("<config>") : config.path;
}

void check_supported(const ModelConfig& config, const LayerAttention& layer) {
  if (layer.unsupported.empty()) return;
  // config usually names the layer already ("layer 3: ..."); do not say it twice.
  const std::string prefix = "layer " + std::to_string(layer.index) + ":";
  const bool named = layer.unsupported.rfind(prefix, 0) == 0;
  throw UnsupportedError(config_name(config) + ": " + (named ? "" : prefix + " ") +
                         layer.unsupported);
}

// The checks every reference layer (strict) or every layer (grouped) must pass on its own.
void check_dims(const ModelConfig& config, const AttentionSpec& spec, int layer) {
  if (spec.num_kv_heads <= 0 || spec.head_dim <= 0) {
    throw ConfigError(
        "Invalid fused KV head config: num_kv_heads=" + std::to_string(spec.num_kv_heads) +
        ", head_dim=" + std::to_string(spec.head_dim) + " at layer " + std::to_string(layer) +
        "; both must be positive.");
  }
  // A layer too large for the kernels' 32-bit indexes is bad input (no real model comes near),
  // refused here rather than as a kernel that cannot be built.
  if (static_cast<std::int64_t>(spec.num_kv_heads) * spec.head_dim > kMaxHeadElements)
    throw ConfigError(config_name(config) + ": layer " + std::to_string(layer) + ": " +
                      head_elements_error(spec.num_kv_heads, spec.head_dim));
  // The seed's text, kept exactly; RoPE rotates pairs, so rotary_dim must be even.
  if (spec.rotary_dim < 0 || spec.rotary_dim % 2 != 0 || spec.rotary_dim > spec.head_dim)
    throw MismatchError(seed::rotary_head_pair(spec.rotary_dim, spec.head_dim));
}

// What codegen and the RoPE table builder will refuse, refused here first, so that a valid
// verdict means every variant compiles (every activation dtype: KernelSpec::check, which holds
// the head_dim tiling rule) and every cos/sin table is finite (RopeTable's constructor).
void check_buildable(const ModelConfig& config, const AttentionSpec& spec, int layer) {
  const std::string where = config_name(config) + ": layer " + std::to_string(layer) + ": ";
  for (DType act : {DType::BF16, DType::FP16, DType::FP32}) {
    KernelSpec k;
    k.num_kv_heads = spec.num_kv_heads;
    k.head_dim = spec.head_dim;
    k.rotary_dim = spec.rotary_dim;
    k.neox = spec.is_neox_style;
    k.act = k.cache = act;
    try {
      k.check();
    } catch (const MismatchError& e) {
      throw MismatchError(where + e.what());
    } catch (const std::invalid_argument& e) {  // a layout the kernel cannot tile or index
      throw UnsupportedError(where + e.what());
    }
  }
  if (spec.rotary_dim == 0) return;
  RopeOptions options;
  options.max_position_embeddings = config.max_position_embeddings.value;
  try {
    RopeTable(spec.rope, spec.rotary_dim,
              std::max<std::int64_t>(1, config.max_position_embeddings.value), options);
  } catch (const ConfigError& e) {
    throw ConfigError(where + e.what());
  }
}

std::string rope_config(const AttentionSpec& s) {
  return seed::rope_config(s.rotary_dim, s.is_neox_style);
}

std::vector<const LayerAttention*> checked_attention_layers(const ModelConfig& config) {
  auto layers = config.attention_layers();
  if (layers.empty()) {
    throw UnsupportedError(config_name(config) + " has no attention layer (" +
                           std::to_string(config.layers.size()) +
                           " layers, none with KV): there is nothing for the fused KV path to "
                           "materialize. Check the layer types, or give them explicitly under "
                           "\"fkv\": {\"layers\": [...]}.");
  }
  return layers;
}

std::vector<int> skipped_layers(const ModelConfig& config) {
  std::vector<int> skipped;
  for (const auto& layer : config.layers)
    if (!layer.is_attention()) skipped.push_back(layer.index);
  return skipped;
}

}  // namespace

AttentionSpec validate(const ModelConfig& config) {
  const auto layers = checked_attention_layers(config);
  const LayerAttention& ref_layer = *layers.front();
  check_supported(config, ref_layer);
  const AttentionSpec ref = attention_spec(ref_layer);
  check_dims(config, ref, ref_layer.index);
  check_buildable(config, ref, ref_layer.index);
  const std::string ref_rope = ref.rope.canonical();  // once, not once per layer

  for (size_t n = 1; n < layers.size(); ++n) {
    const LayerAttention& layer = *layers[n];
    const int i = layer.index;
    check_supported(config, layer);
    const AttentionSpec got = attention_spec(layer);
    if (got.num_kv_heads != ref.num_kv_heads) {
      throw MismatchError(seed::mismatch("num_kv_heads", std::to_string(ref.num_kv_heads),
                                         std::to_string(got.num_kv_heads), i));
    }
    if (got.head_dim != ref.head_dim) {
      throw MismatchError(seed::mismatch("head_dim", std::to_string(ref.head_dim),
                                         std::to_string(got.head_dim), i));
    }
    if (got.rotary_dim != ref.rotary_dim || got.is_neox_style != ref.is_neox_style) {
      throw MismatchError(seed::mismatch("RoPE config", rope_config(ref), rope_config(got), i));
    }
    if (got.rope.canonical() != ref_rope) {
      throw MismatchError(seed::mismatch("RoPE frequency", "(" + format_rope(ref.rope) + ")",
                                         "(" + format_rope(got.rope) + ")", i));
    }
    if (got.k_norm != ref.k_norm) {
      throw MismatchError(
          seed::mismatch("K norm", to_string(ref.k_norm), to_string(got.k_norm), i));
    }
  }
  return ref;
}

Plan make_plan(const ModelConfig& config, ValidationMode mode) {
  Plan plan;
  plan.skipped_layers = skipped_layers(config);
  if (mode == ValidationMode::Strict) {
    LayerGroup group;
    group.attn = validate(config);
    for (const LayerAttention* layer : config.attention_layers())
      group.layers.push_back(layer->index);
    group.heads = {0, group.attn.num_kv_heads, group.attn.num_kv_heads, false};
    plan.groups.push_back(std::move(group));
    return plan;
  }
  // Layers are grouped through a hash map keyed on the spec's fields and the canonical text of
  // its frequencies, computed once per layer: comparing each layer with every group (and
  // rebuilding both canonical texts per comparison) made 4096 layers of distinct frequencies take
  // a minute. check_buildable runs once per distinct spec, not per layer.
  std::unordered_map<std::string, std::size_t> group_of;  // group key -> index in plan.groups
  for (const LayerAttention* layer : checked_attention_layers(config)) {
    check_supported(config, *layer);
    AttentionSpec spec = attention_spec(*layer);
    check_dims(config, spec, layer->index);
    std::string key = std::to_string(spec.num_kv_heads) + ";" + std::to_string(spec.head_dim) +
                      ";" + std::to_string(spec.rotary_dim) + ";" +
                      (spec.is_neox_style ? "1;" : "0;") + to_string(spec.k_norm) + ";" +
                      spec.rope.canonical();
    auto [it, fresh] = group_of.try_emplace(std::move(key), plan.groups.size());
    if (fresh) {
      check_buildable(config, spec, layer->index);
      const int heads = spec.num_kv_heads;
      plan.groups.push_back(LayerGroup{std::move(spec), {}, {0, heads, heads, false}});
    }
    plan.groups[it->second].layers.push_back(layer->index);
  }
  return plan;
}

// ---- tensor parallelism ------------------------------------------------------------------

KVHeadShard kv_head_shard(int num_kv_heads, const TensorParallel& tp) {
  if (tp.size < 1) throw ArgumentError("tp_size must be >= 1, got " + std::to_string(tp.size));
  if (tp.rank < 0 || tp.rank >= tp.size)
    throw ArgumentError("tp_rank " + std::to_string(tp.rank) +
                        " is outside [0, tp_size=" + std::to_string(tp.size) + ")");
  if (num_kv_heads <= 0)
    throw ConfigError("num_kv_heads must be positive to shard it, got " +
                      std::to_string(num_kv_heads));
  KVHeadShard shard;
  shard.total_heads = num_kv_heads;
  if (num_kv_heads % tp.size == 0) {
    shard.num_heads = num_kv_heads / tp.size;
    shard.first_head = tp.rank * shard.num_heads;
  } else if (num_kv_heads < tp.size && tp.size % num_kv_heads == 0) {
    // sglang/vLLM: each rank holds one KV head, shared by tp_size / num_kv_heads ranks.
    shard.num_heads = 1;
    shard.first_head = tp.rank * num_kv_heads / tp.size;
    shard.replicated = true;
  } else {
    throw MismatchError(
        "num_kv_heads=" + std::to_string(num_kv_heads) +
        " cannot be split across tp_size=" + std::to_string(tp.size) +
        " ranks: tensor parallelism needs num_kv_heads divisible by "
        "tp_size (an even split) or tp_size divisible by num_kv_heads (one replicated head "
        "per rank). Choose another tp_size.");
  }
  return shard;
}

Plan shard_plan(const Plan& plan, const TensorParallel& tp) {
  if (plan.tp_size != 1)
    throw ArgumentError("shard_plan takes an unsharded plan; this one is rank " +
                        std::to_string(plan.tp_rank) +
                        " of tp_size=" + std::to_string(plan.tp_size));
  Plan out = plan;
  out.tp_size = tp.size;
  out.tp_rank = tp.rank;
  for (LayerGroup& g : out.groups) {
    g.heads = kv_head_shard(g.attn.num_kv_heads, tp);
    g.attn.num_kv_heads = g.heads.num_heads;
  }
  return out;
}

}  // namespace fkv
