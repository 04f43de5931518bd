// quantization: GPTQ's own ways to leave modules unquantized, read as vLLM reads them
// (vllm/model_executor/layers/quantization/utils/gptq_utils.py: get_linear_quant_method takes
// UnquantizedLinearMethod when is_layer_gptq_quantized is false or get_dynamic_override returns
// False):
// - modules_in_block_to_quantize: a list of module names, or of lists of them (flattened, as
//   GPTQConfig.maybe_update_config does); a projection is quantized when an entry is a substring
//   of its name. For a fused qkv_proj vLLM checks the shard names (k_proj, v_proj), which are the
//   names the checkpoint stores (Projection::stored), so those are the names checked here. An empty
//   list says nothing (vLLM then looks at the checkpoint's tensors, which config.json does not
//   show).
// - dynamic: {"-:regex": {}, "+:regex": {...}, "regex": {...}}: a "-:" rule re.match-ing the
//   module name leaves it unquantized; the others override bits or group size, which still packs
//   the weights. JSON objects are read here with their keys sorted, so which rule comes first
//   cannot be told: a projection that a negative and a positive rule both match is refused.
#include <string>
#include <vector>

#include "quant_reading.hpp"

namespace fkv::config_detail::quant {
namespace {

// About a second of matching; a config asking for more is refused rather than read slowly.
constexpr std::size_t kMaxWork = 200'000'000;

std::string too_much_work(std::size_t work) {
  return "asks for " + std::to_string(work) +
         " matching steps against the K/V projections' module names, more than fkv-jit spends "
         "reading a config";
}

void modules_in_block(const json& qc, const std::string& base, const std::vector<Projection>& kv,
                      std::vector<std::string>& unquantized) {
  const json* list = field(qc, "modules_in_block_to_quantize");
  if (!list) return;
  const std::string path = base + ".modules_in_block_to_quantize";
  if (!list->is_array())
    bad(path, "expected a list of module names (or of lists of them), got " + show(*list));
  std::vector<std::string> entries;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (e.is_array()) {
      for (std::size_t j = 0; j < e.size(); ++j)
        entries.push_back(string_at(e[j], at + "[" + std::to_string(j) + "]"));
    } else {
      entries.push_back(string_at(e, at));
    }
  }
  if (entries.empty()) return;
  std::size_t work = 0;
  for (const Projection& p : kv)
    for (const std::string& n : p.stored)
      for (const std::string& e : entries) work += n.size() * (e.size() + 1);
  if (work > kMaxWork) refuse(path, too_much_work(work));
  for (std::size_t i = 0; i < kv.size(); ++i) {
    bool listed = false;
    for (const std::string& n : kv[i].stored)
      for (const std::string& e : entries) listed |= !e.empty() && n.find(e) != std::string::npos;
    if (!listed && unquantized[i].empty())
      unquantized[i] =
          path + " names no part of " + in_quotes(kv[i].names.front()) + " (left unquantized)";
  }
}

void dynamic_rules(const json& qc, const std::string& base, const std::vector<Projection>& kv,
                   std::vector<std::string>& unquantized) {
  const json* rules = field(qc, "dynamic");
  if (!rules) return;
  const std::string path = base + ".dynamic";
  if (!rules->is_object())
    bad(path,
        "expected an object of module-name rules (\"-:regex\": {} leaves the modules it "
        "matches unquantized), got " +
            show(*rules));
  struct Rule {
    std::string key;
    bool negative;
    ModuleRegex regex;
  };
  std::vector<Rule> compiled;
  std::size_t states = 0;
  for (auto it = rules->begin(); it != rules->end(); ++it) {
    const std::string& key = it.key();
    if (!it->is_object())
      bad(path + "." + key,
          "expected an object of overrides (bits, group_size, ...), got " + show(*it));
    const bool negative = key.rfind("-:", 0) == 0;
    const std::string pattern = negative || key.rfind("+:", 0) == 0 ? key.substr(2) : key;
    try {
      compiled.push_back({key, negative, ModuleRegex(pattern)});
    } catch (const std::invalid_argument& x) {
      refuse(path, "key " + in_quotes(key) + ": fkv-jit cannot evaluate this pattern (" + x.what() +
                       "), so it cannot tell whether it names the K/V projections");
    }
    states += compiled.back().regex.size();
  }
  std::size_t work = 0;
  for (const Projection& p : kv)
    for (const std::string& n : p.names) work += states * (n.size() + 1);
  if (work > kMaxWork) refuse(path, too_much_work(work));
  for (std::size_t i = 0; i < kv.size(); ++i) {
    const Rule* negative = nullptr;
    const Rule* positive = nullptr;
    for (const Rule& r : compiled)
      for (const std::string& n : kv[i].names)
        if (r.regex.match(n)) (r.negative ? negative : positive) = &r;
    if (negative && positive)
      refuse(path, "the negative rule " + in_quotes(negative->key) + " and the rule " +
                       in_quotes(positive->key) + " both match " + kv[i].label() +
                       "'s module name; the engines take the first in the file, and fkv-jit "
                       "reads an object's keys without their order, so it cannot tell whether "
                       "the projection is quantized");
    if (negative && unquantized[i].empty())
      unquantized[i] = path + " rule " + in_quotes(negative->key) + " (left unquantized)";
  }
}

}  // namespace

void gptq_unquantized(const json& qc, const std::string& base, const std::vector<Projection>& kv,
                      std::vector<std::string>& unquantized) {
  modules_in_block(qc, base, kv, unquantized);
  dynamic_rules(qc, base, kv, unquantized);
}

}  // namespace fkv::config_detail::quant
