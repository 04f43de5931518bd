// Internal to the config module: matching a module name ("model.layers.0.self_attn.k_proj")
// against the patterns quantization configs list (src/config/quant_reading.hpp). Not installed.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fkv::config_detail {

// A Python regular expression as compressed-tensors' "re:" entries hold them, matched as
// `re.match(pattern, name)` does (anchored at the start, not at the end; vLLM's
// compressed_tensors/utils.py _is_equal_or_regex_match). The syntax read is the part of Python's
// that such patterns use: literals and escapes (\. \d \w \s \D \W \S \A \Z \n \t \xhh), `.`,
// classes [a-z_] [^...], groups (...) (?:...) (?P<name>...), `|`, `^`, `$`, and the quantifiers
// * + ? {m} {m,} {m,n} (lazy and possessive forms match the same names). Matching runs a
// Thompson automaton, in time linear in the name for any pattern, so a pattern in a config
// cannot make reading it slow. Lookarounds, backreferences, inline flags and word boundaries
// throw std::invalid_argument naming them.
class ModuleRegex {
 public:
  explicit ModuleRegex(const std::string& pattern);
  bool match(std::string_view name) const;
  std::size_t size() const { return states_.size(); }  // a match costs O(size() * name length)

  struct State {
    enum Kind { Char, Split, Begin, End, Match } kind = Match;
    bool set[256] = {};  // Char: the bytes it takes
    int out = -1;
    int out1 = -1;  // Split: the second branch
  };

 private:
  std::vector<State> states_;
  int start_ = -1;
};

// The runs of whole dot-separated components of `module`, views into it: for "a.b.c", "a",
// "a.b", "a.b.c", "b", "b.c", "c".
std::vector<std::string_view> component_runs(std::string_view module);

// fnmatch(name, pattern) for ModelOpt's exclude patterns: `*` any run of characters, `?` one,
// everything else literal (vLLM's modelopt.py is_layer_excluded).
bool glob_match(std::string_view pattern, std::string_view name);

// An exclusion-list entry (HF `modules_to_not_convert`, vLLM/sglang `ignored_layers`, ModelOpt
// `exclude_modules`) names `module` when it equals a run of whole dot-separated components of it
// ("self_attn", "layers.3", "model.layers.3.self_attn.k_proj"), or, holding `*` or `?`, glob-
// matches such a run ("model.layers.*.self_attn" names model.layers.0.self_attn.k_proj, as
// transformers' quantizers_utils.should_convert_module's prefix match and ModelOpt's wildcards
// do). Whole components: "layers.1" does not name "model.layers.10" (sglang's dot-boundary
// is_layer_skipped).
bool excludes_module(std::string_view entry, std::string_view module);

}  // namespace fkv::config_detail
