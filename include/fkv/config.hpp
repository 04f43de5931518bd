// config: a model's config JSON -> per-layer attention facts (docs/config-rules.md).
//
// Every resolved value records where it came from (`Sourced::source`), so that
// `fkv-jit validate --explain` can show it. Reading never silently defaults a value that is
// present but wrong: such input raises ConfigError naming the file and the key.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fkv/k_norm.hpp"   // KNormKind
#include "fkv/weights.hpp"  // WeightFormat

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

// How the checkpoint says the K/V projection weights of its attention layers (k_proj and
// v_proj, or a fused qkv_proj) are stored: its `quantization_config` (or the older
// `compression_config` of compressed-tensors checkpoints), read by src/config/quantization.cpp
// (docs/config-rules.md, "quantization_config"). Reading never throws for it: a declaration
// fkv-jit does not read is kept as a refusal, raised where the declared format is used
// (declared_weight_format, choose_weight_format), so that a user who states the stored format
// explicitly (--weights) can go on.
struct DeclaredWeights {
  enum class Status {
    Absent,    // no quantization_config: nothing declared (dense, as without the key)
    Declared,  // `format` (Dense where the K/V projections are left unquantized)
    Refused,   // a scheme fkv-jit does not read, or a malformed declaration: `error`
  };
  Status status = Status::Absent;
  WeightFormat format = WeightFormat::Dense;
  // The keys that decided it, as --explain shows them ("quantization_config.weight_block_size =
  // [128, 128] (quant_method "fp8")"); empty when absent.
  std::string source;
  // Refused: the message (the file name first, then the key and its value, then how to go on),
  // and whether it is bad input (a malformed value: ConfigError) rather than UnsupportedError.
  std::string error;
  bool bad_input = false;

  bool declared() const { return status == Status::Declared; }
  bool refused() const { return status == Status::Refused; }
  // Throws `error` as its kind (UnsupportedError, or ConfigError when bad_input).
  [[noreturn]] void raise() const;
};

struct ModelConfig {
  std::string path;          // the file it came from, or the name given to from_json
  std::string architecture;  // architectures[0], or "" when absent
  std::string model_type;
  std::string family;  // the registry entry's name ("Qwen3"), or "explicit schema"
  Sourced<int> num_hidden_layers;
  Sourced<int> hidden_size;
  Sourced<int> num_attention_heads;
  Sourced<int> max_position_embeddings;
  Sourced<std::string> dtype;  // "bfloat16", "float16", "float32", or "" when absent
  Sourced<double> eps;
  std::vector<LayerAttention> layers;  // one per model layer, in model order
  DeclaredWeights weights;             // what quantization_config says of the K/V weights

  // Reads and resolves a HuggingFace config.json (the nested layer config used when present:
  // speculators' transformer_layer_config, text_config, llm_config) or the explicit per-layer
  // schema. Throws ConfigError (file, key, byte offset/line for malformed JSON), also for an
  // unknown model_type, a layout key its registry entry does not read, and input beyond the
  // limits below (kMaxConfigBytes, kMaxJsonDepth, kMaxLayers; from_file refuses anything but a
  // regular file before reading it).
  static ModelConfig from_file(const std::filesystem::path& path);
  static ModelConfig from_json(std::string_view text, std::string name = "<string>");
  static ModelConfig from_json(const nlohmann::json& doc, std::string name = "<json>");

  // The attention layers, in order (pointers into `layers`).
  std::vector<const LayerAttention*> attention_layers() const;
};

std::string to_string(LayerKind);

// The format the config's quantization_config declares for the K/V weights: Dense when it
// declares nothing or leaves them unquantized. Throws the declaration's refusal
// (UnsupportedError, or ConfigError for a malformed one) when it declares a scheme fkv-jit does
// not read.
WeightFormat declared_weight_format(const ModelConfig& config);

// The weight format a front-end takes for `config`: `requested` when given (the user's word
// wins, also over a refused declaration), else the declared one. `option` names the front-end's
// option in messages ("--weights", "weights"). `message` is empty when nothing needs saying (no
// declaration, or a request equal to it); else an info line (the declared format is taken) or,
// with `warning` set, a warning (a request that differs from the declaration or overrides a
// refused one). Throws like declared_weight_format when nothing is requested.
struct WeightChoice {
  WeightFormat format = WeightFormat::Dense;
  std::string message;
  bool warning = false;
};
WeightChoice choose_weight_format(const ModelConfig& config, const WeightFormat* requested,
                                  const std::string& option);

// ---------------------------------------------------------------------------------------------
// The architecture registry (src/config/architectures.cpp): everything fkv-jit knows about a
// model family, as data. A config whose model_type has no entry is refused; a config holding a
// layout key (layout_keys()) that its entry does not read is refused, naming the key.

enum class RopeStyle { Neox, GptJ };  // rotate halves (i, i + R/2) or pairs (2i, 2i + 1)

enum class KNormRule {
  None,                 // no K norm module
  Rms,                  // per-head RMSNorm(head_dim), weight w
  RmsOnePlus,           // per-head RMSNorm(head_dim), weight (1 + w)
  RmsIfQkNorm,          // per-head RMS when the qk-norm key is true, else none
  AcrossHeads,          // RMSNorm over all KV heads together: unsupported
  LayerNormIfQkNorm,    // mean-subtracting LayerNorm when the qk-norm key is true: unsupported
  L2IfQkNorm,           // L2 norm without weight on RoPE layers when the key is true: unsupported
  RmsAfterRope,         // per-head RMSNorm applied to K after RoPE (Hunyuan): unsupported
  AcrossHeadsIfQkNorm,  // RMSNorm over all KV heads when the qk-norm key is true (Molmo's
                        // attention_layer_norm): unsupported; none otherwise
  ByQkNormType,  // qk_norm_type "qwen3": per-head RMS; "olmo": across all heads (unsupported);
                 // the key is required (Molmo 2)
};

enum class RotaryDefault {
  Full,  // no rotary key: rotary_dim = head_dim
  Half,  // no rotary key: head_dim / 2 (the config class default factor 0.5)
  None,  // the attention has no RoPE at all (rotary_dim 0)
};

enum class NopeRule {
  None,                 // NoPE only where a consumed key (no_rope_layers, ...) says so
  FullLayers,           // full-attention layers never rotate (Cohere2)
  FullLayersIfSliding,  // full-attention layers skip RoPE when a sliding window is set (EXAONE 4)
  WithoutRotaryFlag,    // no RoPE unless "rotary": true (gpt_neo format)
  IfAlibi,              // no RoPE when "alibi": true (Falcon: ALiBi biases the scores)
};

enum class KvHeadsRule {
  Key,     // num_key_value_heads (or the other KV keys the reader knows); absent: all heads
  Falcon,  // num_kv_heads if new_decoder_architecture, else 1 if multi_query (default true),
           // else num_kv_heads or all heads
};

enum class KindDefault {
  AllFull,               // every layer full attention unless a consumed key says otherwise
  AlternateEvenSliding,  // even layers sliding (Gemma 2)
  SlidingWindowPattern,  // sliding iff (i + 1) % sliding_window_pattern != 0 (Gemma 3, Cohere2)
  AllSlidingIfWindow,    // every layer slides when sliding_window is set (Mistral, Starcoder2)
  KeyRequired,  // the engines' defaults disagree: a layer-kind key must be present (MiniMax)
};

struct Architecture {
  std::string name{};                      // "Qwen3"
  std::vector<std::string> model_types{};  // matched against the (nested) model_type
  // When non-empty, matched against architectures[0] as a prefix instead, before model_type
  // (DFlash drafts ship model_type "qwen3" but their attention always has a K norm).
  std::string architecture_prefix{};
  RopeStyle style = RopeStyle::Neox;
  KNormRule k_norm = KNormRule::None;
  RotaryDefault rotary = RotaryDefault::Full;
  NopeRule nope = NopeRule::None;
  KindDefault kinds = KindDefault::AllFull;
  KvHeadsRule kv_heads = KvHeadsRule::Key;
  bool mla = false;  // multi-head latent attention: every attention layer unsupported
  // The rotated fraction of a layer is its layer type's rope_parameters[type]
  // .partial_rotary_factor (default 1.0), and a top-level partial_rotary_factor is not read
  // (Laguna's rotary embedding).
  bool rotary_per_layer_type = false;
  // The layout keys (layout_keys()) this family's modeling code reads. Any other layout key in
  // a config is refused.
  std::vector<std::string> reads{};
  // The modeling code every rule above was checked against: repository, file and class.
  std::string citation{};
  // Non-empty: the verdict is a refusal, with this reason ("MLA: the cache holds a latent",
  // "no attention", "cross-attention", ...); a config of these model_types is refused with an
  // UnsupportedError before any layer is read.
  std::string refusal{};

  bool refused() const { return !refusal.empty(); }
};

// Every entry, in the order docs/config-rules.md lists them.
const std::vector<Architecture>& architectures();

// A key that changes a layer's attention layout, with what it changes.
struct LayoutKey {
  std::string key;
  std::string meaning;
};
// Every layout key seen across the ecosystem (transformers, vLLM, sglang configs).
const std::vector<LayoutKey>& layout_keys();

// The Markdown table of architectures that docs/config-rules.md holds (a test compares them).
std::string architectures_markdown();

// Limits on what from_file / from_json read; beyond them a ConfigError says which.
inline constexpr std::size_t kMaxConfigBytes = 1u << 20;  // 1 MiB: real config.json files are KBs
inline constexpr int kMaxJsonDepth = 64;                  // nested arrays/objects
inline constexpr int kMaxLayers = 4096;                   // num_hidden_layers and lists

}  // namespace fkv
