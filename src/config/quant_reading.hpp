// Internal to the config module: what the readers of a quantization_config share
// (quantization.cpp, quant_compressed_tensors.cpp): refusals, typed access to the keys, the K/V
// projections of a config's attention layers and the module names checkpoints give them, lists
// of module patterns, and the step from one format per projection to one declaration. Not
// installed.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fkv/config.hpp"
#include "internal.hpp"
#include "module_match.hpp"

namespace fkv::config_detail::quant {

// A refusal found while reading; read_declared_weights keeps it in DeclaredWeights.
struct Refusal {
  std::string path;
  std::string what;
  bool bad_input = false;
};

// Throw a Refusal at `path`: a declaration fkv-jit does not read (refuse), or a malformed one
// (bad).
[[noreturn]] void refuse(const std::string& path, const std::string& what);
[[noreturn]] void bad(const std::string& path, const std::string& what);

// A key's value, or nullptr when absent or null (HF writes null for unset optionals).
const json* field(const json& obj, const char* key);

// A string from the config in a message: quoted, and cut to 60 characters like show().
std::string in_quotes(const std::string& s);

// The value at `path` as a string, an integer (an integral float too) or a bool; else bad().
std::string string_at(const json& v, const std::string& path);
long long integer_at(const json& v, const std::string& path);
bool bool_at(const json& v, const std::string& path);

// One K/V projection of one attention layer, with the module names checkpoints give it: the
// decoder layer's attention module path under each prefix the engines' checkpoints use, then
// ".k_proj" / ".v_proj", and the fused ".qkv_proj" (which ignores and targets may name instead;
// vLLM's should_ignore_layer and _match_fused_layer); or, for the families that keep attention
// elsewhere (Falcon's self_attention.query_key_value, InternLM2's attention.wqkv, ...), theirs.
struct Projection {
  int layer = 0;
  std::string proj;                 // "k_proj" or "v_proj"
  std::vector<std::string> names;   // every name an entry may give it
  std::vector<std::string> stored;  // the names the checkpoint stores its weight under
  std::string label() const { return "layer " + std::to_string(layer) + " " + proj; }
};

// The K and V projections of every attention layer of `cfg`, in layer order.
std::vector<Projection> kv_projections(const ModelConfig& cfg);

// A list of module patterns at `path`: exclusion-list entries (modules_to_not_convert,
// ignored_layers, exclude_modules: excludes_module), or compressed-tensors entries (equal to a
// module name, or "re:" and a Python regex re.match-ing it). Plain entries are looked up in a
// hash table; patterns are tried one by one, within a work budget, so that a config holding
// thousands of patterns and layers cannot make reading it slow (beyond it: a refusal).
class PatternList {
 public:
  enum class Syntax { Exclusion, CompressedTensors };

  PatternList() = default;
  PatternList(const json& list, std::string path, Syntax syntax);

  std::size_t size() const { return entries_.size(); }
  const std::string& entry(std::size_t i) const { return entries_[i]; }
  std::string entry_path(std::size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

  // The first entry (in list order) naming one of the projection's module names, or -1.
  int first_naming(const Projection& p) const;

 private:
  struct Pattern {
    std::size_t index;
    std::optional<ModuleRegex> regex;  // compressed-tensors "re:"; else a glob
  };

  void spend(std::size_t steps) const;

  static constexpr std::size_t kMaxWork = 200'000'000;  // about a second
  std::string path_;
  Syntax syntax_ = Syntax::Exclusion;
  std::vector<std::string> entries_;
  std::unordered_map<std::string, std::size_t> plain_;
  std::vector<Pattern> patterns_;
  mutable std::size_t work_ = 0;
};

// What one projection is stored as, and the key that says so.
struct Outcome {
  WeightFormat format = WeightFormat::Dense;
  std::string source;
};

// What a quantization config declares for the K/V projections, and the key that says so.
struct Declared {
  WeightFormat format = WeightFormat::Dense;
  std::string source;
};

// One format for every K/V projection, or a refusal naming two that differ (`path`: the key the
// difference comes from).
Declared uniform(const std::vector<Projection>& kv, const std::vector<Outcome>& outcomes,
                 const std::string& path);

// Why each projection of `kv` is left unquantized: the first entry of `excluded` naming it, as
// "<path>[i] = \"entry\" (left unquantized)"; "" for a projection no entry names.
std::vector<std::string> unquantized_by(const std::vector<Projection>& kv,
                                        const PatternList& excluded);

// A scheme that quantizes every linear layer alike except those an exclusion list names:
// `format` (from `source`) for the projections no entry names, dense for the others.
Declared all_but_excluded(const std::vector<Projection>& kv, const PatternList& excluded,
                          WeightFormat format, const std::string& source, const std::string& path);

// The exclusion list of a scheme: the first of `keys` present, or an empty list.
PatternList exclusions(const json& qc, const std::string& base,
                       std::initializer_list<const char*> keys, PatternList::Syntax syntax);

// GPTQ's own ways to leave modules unquantized (quant_gptq.cpp): modules_in_block_to_quantize
// and the negative ("-:") rules of dynamic. Gives each projection of `kv` they leave out a reason
// in `unquantized` (one entry per projection; an entry already set is kept).
void gptq_unquantized(const json& qc, const std::string& base, const std::vector<Projection>& kv,
                      std::vector<std::string>& unquantized);

// quant_method "compressed-tensors" (quant_compressed_tensors.cpp): the config at `base`, `qc`,
// read for the projections `kv`.
Declared compressed_tensors(const json& qc, const std::string& base,
                            const std::vector<Projection>& kv);

}  // namespace fkv::config_detail::quant
