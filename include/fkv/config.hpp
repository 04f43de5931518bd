// config: a model's config JSON -> per-layer attention facts (SPEC §2).
//
// Every resolved value records where it came from (`Sourced::source`), so that
// `fkv-jit validate --explain` can show it. Reading never silently defaults a value that is
// present but wrong: such input raises ConfigError naming the file and the key.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fkv {

// A resolved value and where it came from, e.g. "text_config.head_dim" or
// "derived: hidden_size / num_attention_heads" or "architecture rule: GPT-J (interleaved)".
template <class T>
struct Sourced {
  T value{};
  std::string source;
};

enum class LayerKind {
  FullAttention,
  SlidingAttention,
  NoAttention,  // linear attention, mamba/SSM, no-op: no KV, skipped, numbering kept
};

enum class KNormKind {
  None,
  Rms,         // k * rsqrt(mean(k^2) + eps) * w, per head, weight of head_dim
  RmsOnePlus,  // same with (1 + w): Gemma, Qwen3-Next/Qwen3.5; the materializer folds it into w
};

// Everything that decides a layer's cos/sin table. Two layers may share one table iff their
// canonical() strings are equal.
struct RopeFrequencies {
  double theta = 10000.0;
  std::string scaling_type = "default";  // default, linear, dynamic, llama3, yarn, longrope, ...
  nlohmann::json scaling = nlohmann::json::object();  // remaining scaling parameters
  std::string canonical() const;
  bool operator==(const RopeFrequencies& o) const { return canonical() == o.canonical(); }
};

struct LayerAttention {
  int index = 0;  // model numbering, 0-based
  Sourced<LayerKind> kind;
  Sourced<int> num_kv_heads;
  Sourced<int> head_dim;
  Sourced<int> rotary_dim;  // 0 on NoPE layers
  Sourced<bool> is_neox_style;
  Sourced<KNormKind> k_norm;
  Sourced<double> eps;
  Sourced<RopeFrequencies> rope;
  int sliding_window = 0;  // 0 = none
  // Non-empty when this attention layer cannot use the fused path (MLA, a norm kind that is
  // not per-head RMS, ...): says why, naming the keys.
  std::string unsupported;

  bool is_attention() const { return kind.value != LayerKind::NoAttention; }
};

struct ModelConfig {
  std::string path;  // the file it came from, or the name given to from_json
  std::string architecture;  // architectures[0], or "" when absent
  std::string model_type;
  Sourced<int> num_hidden_layers;
  Sourced<int> hidden_size;
  Sourced<int> num_attention_heads;
  Sourced<int> max_position_embeddings;
  Sourced<std::string> dtype;  // "bfloat16", "float16", "float32", or "" when absent
  Sourced<double> eps;
  std::vector<LayerAttention> layers;  // one per model layer, in model order

  // Reads and resolves a HuggingFace config.json (nested text_config used when present) or
  // the explicit per-layer schema. Throws ConfigError (file, key, byte offset/line for
  // malformed JSON).
  static ModelConfig from_file(const std::filesystem::path& path);
  static ModelConfig from_json(std::string_view text, std::string name = "<string>");
  static ModelConfig from_json(const nlohmann::json& doc, std::string name = "<json>");

  // The attention layers, in order (pointers into `layers`).
  std::vector<const LayerAttention*> attention_layers() const;
};

std::string to_string(LayerKind);
std::string to_string(KNormKind);

}  // namespace fkv
