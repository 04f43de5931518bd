// quant_reading: what the readers of a quantization_config share (quant_reading.hpp).
//
// Module names are matched as the engines match them; checked against (paths in those
// repositories):
//   vLLM: vllm/model_executor/layers/quantization/compressed_tensors/utils.py
//     (should_ignore_layer: a layer name equal to an entry or re.match-ing a "re:" one;
//     _match_fused_layer: the fused qkv_proj named for its k_proj and v_proj);
//   transformers: src/transformers/quantizers/quantizers_utils.py (should_convert_module:
//     exclusion lists).
#include "quant_reading.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace fkv::config_detail::quant {

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Refusal{path, what, false};
}
[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Refusal{path, what, true};
}

const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string in_quotes(const std::string& s) {
  return "\"" + (s.size() > 60 ? s.substr(0, 57) + "..." : s) + "\"";
}

std::string string_at(const json& v, const std::string& path) {
  if (!v.is_string()) bad(path, "expected a string, got " + show(v));
  return v.get<std::string>();
}

long long integer_at(const json& v, const std::string& path) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e9) return (long long)d;
  }
  bad(path, "expected an integer, got " + show(v));
}

bool bool_at(const json& v, const std::string& path) {
  if (!v.is_boolean()) bad(path, "expected true or false, got " + show(v));
  return v.get<bool>();
}

namespace {

// Where a family's checkpoints keep the K/V projections, when not under
// <layer>.self_attn.{k,v,qkv}_proj: the attention module of layer {i}, and either separate k_proj /
// v_proj modules or one fused module (`fused`). The engines' module names are the same (vLLM's
// falcon.py, gpt_neox.py, chatglm.py, internlm2.py, gpt_j.py, nemotron_h.py).
struct AttentionModules {
  const char* family;  // the registry entry's name
  const char* attention;
  const char* fused;  // nullptr: separate k_proj / v_proj
};
constexpr AttentionModules kAttentionModules[] = {
    // transformers falcon/modeling_falcon.py: FalconForCausalLM.transformer.h[i].self_attention
    // (FalconAttention.query_key_value).
    {"Falcon", "transformer.h.{i}.self_attention", "query_key_value"},
    // gpt_neox/modeling_gpt_neox.py: GPTNeoXForCausalLM.gpt_neox.layers[i].attention
    // (GPTNeoXAttention.query_key_value); gpt_neox_japanese likewise.
    {"GPT-NeoX", "gpt_neox.layers.{i}.attention", "query_key_value"},
    {"GPT-NeoX Japanese", "gpt_neox_japanese.layers.{i}.attention", "query_key_value"},
    // THUDM's modeling_chatglm.py (hub remote code): ChatGLMForConditionalGeneration.transformer
    // .encoder.layers[i].self_attention (SelfAttention.query_key_value).
    {"ChatGLM", "transformer.encoder.layers.{i}.self_attention", "query_key_value"},
    // internlm's modeling_internlm2.py: InternLM2ForCausalLM.model.layers[i].attention.wqkv.
    {"InternLM2", "model.layers.{i}.attention", "wqkv"},
    // gptj/modeling_gptj.py: GPTJForCausalLM.transformer.h[i].attn.{k,v}_proj (codegen's
    // CodeGenAttention packs them into attn.qkv_proj, one of the names each projection gets);
    // gpt_neo/modeling_gpt_neo.py: GPTNeoForCausalLM.transformer.h[i].attn.attention.{k,v}_proj.
    {"GPT-J", "transformer.h.{i}.attn", nullptr},
    {"GPT-J (gpt_neo format)", "transformer.h.{i}.attn.attention", nullptr},
    // nemotron_h/modular_nemotron_h.py: NemotronHForCausalLM.backbone.layers[i].mixer
    // (NemotronHAttention.{k,v}_proj).
    {"Nemotron-H", "backbone.layers.{i}.mixer", nullptr},
};

}  // namespace

std::vector<Projection> kv_projections(const ModelConfig& cfg) {
  const AttentionModules* own = nullptr;
  for (const AttentionModules& m : kAttentionModules)
    if (cfg.family == m.family) own = &m;
  std::vector<Projection> out;
  const bool one_layer = cfg.layers.size() == 1;
  for (const LayerAttention& l : cfg.layers) {
    if (!l.is_attention()) continue;
    const std::string i = std::to_string(l.index);
    // HF causal LMs (LlamaForCausalLM: model.layers.N.self_attn), speculators' drafts
    // (layers.N), transformers' multimodal wrappers (model.language_model.layers.N; older
    // checkpoints language_model.model.layers.N), and sglang's one-layer EAGLE-3 drafts
    // (LlamaForCausalLMEagle3: midlayer); or the family's own module (kAttentionModules).
    std::vector<std::string> prefixes;
    if (own) {
      std::string a = own->attention;
      a.replace(a.find("{i}"), 3, i);
      prefixes.push_back(a);
    } else {
      prefixes = {"model.layers." + i + ".self_attn", "layers." + i + ".self_attn",
                  "model.language_model.layers." + i + ".self_attn",
                  "language_model.model.layers." + i + ".self_attn"};
      if (one_layer) prefixes.push_back("midlayer.self_attn");
    }
    for (const char* proj : {"k_proj", "v_proj"}) {
      Projection p{l.index, proj, {}, {}};
      for (const std::string& pre : prefixes) {
        if (own && own->fused) {
          p.names.push_back(pre + "." + own->fused);
          p.stored.push_back(pre + "." + own->fused);
          continue;
        }
        p.names.push_back(pre + "." + proj);
        p.names.push_back(pre + ".qkv_proj");
        p.stored.push_back(pre + "." + proj);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

PatternList::PatternList(const json& list, std::string path, Syntax syntax)
    : path_(std::move(path)), syntax_(syntax) {
  if (!list.is_array()) bad(path_, "expected a list of module names, got " + show(list));
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = path_ + "[" + std::to_string(i) + "]";
    const std::string e = string_at(list[i], at);
    entries_.push_back(e);
    if (syntax_ == Syntax::CompressedTensors && e.rfind("re:", 0) == 0) {
      try {
        patterns_.push_back({i, ModuleRegex(e.substr(3))});
      } catch (const std::invalid_argument& x) {
        refuse(at, in_quotes(e) + ": fkv-jit cannot evaluate this pattern (" + x.what() +
                       "), so it cannot tell whether it names the K/V projections");
      }
    } else if (syntax_ == Syntax::Exclusion && e.find_first_of("*?") != std::string::npos) {
      patterns_.push_back({i, std::nullopt});
    } else {
      plain_.emplace(e, i);  // keeps the first index of a repeated entry
    }
  }
}

int PatternList::first_naming(const Projection& p) const {
  std::size_t best = entries_.size();
  for (const std::string& name : p.names) {
    // The strings an entry is compared with: the whole name, or (exclusion lists) each run
    // of whole components of it.
    std::vector<std::string_view> runs;
    if (syntax_ == Syntax::Exclusion)
      runs = component_runs(name);
    else
      runs.push_back(name);
    for (std::string_view r : runs) {
      spend(1);
      if (auto it = plain_.find(std::string(r)); it != plain_.end())
        best = std::min(best, it->second);
    }
    for (const Pattern& pat : patterns_) {
      if (pat.index >= best) break;
      bool hit = false;
      if (pat.regex) {
        spend(pat.regex->size() * (name.size() + 1));
        hit = pat.regex->match(name);
      } else {
        for (std::string_view r : runs) {
          spend(entries_[pat.index].size() * (r.size() + 1));
          if ((hit = glob_match(entries_[pat.index], r))) break;
        }
      }
      if (hit) best = pat.index;
    }
  }
  return best == entries_.size() ? -1 : static_cast<int>(best);
}

void PatternList::spend(std::size_t steps) const {
  work_ += steps;
  if (work_ > kMaxWork)
    refuse(path_, "holds " + std::to_string(patterns_.size()) +
                      " patterns, more than fkv-jit checks against the module names of the "
                      "K/V projections of " +
                      "every layer in reasonable time");
}

Declared uniform(const std::vector<Projection>& kv, const std::vector<Outcome>& outcomes,
                 const std::string& path) {
  if (kv.empty()) return {WeightFormat::Dense, path + ": no attention layer"};
  for (std::size_t i = 1; i < outcomes.size(); ++i)
    if (outcomes[i].format != outcomes[0].format)
      refuse(path, "stores the K/V projections of the attention layers in different formats (" +
                       kv[0].label() + ": " + to_string(outcomes[0].format) + ", from " +
                       outcomes[0].source + "; " + kv[i].label() + ": " +
                       to_string(outcomes[i].format) + ", from " + outcomes[i].source +
                       "), and fkv-jit takes one format for the K/V weights of every layer");
  return {outcomes[0].format, outcomes[0].source};
}

std::vector<std::string> unquantized_by(const std::vector<Projection>& kv,
                                        const PatternList& excluded) {
  std::vector<std::string> out;
  for (const Projection& p : kv) {
    const int e = excluded.first_naming(p);
    out.push_back(e < 0 ? std::string()
                        : excluded.entry_path(e) + " = " + in_quotes(excluded.entry(e)) +
                              " (left unquantized)");
  }
  return out;
}

Declared all_but_excluded(const std::vector<Projection>& kv, const PatternList& excluded,
                          WeightFormat format, const std::string& source, const std::string& path) {
  const std::vector<std::string> why = unquantized_by(kv, excluded);
  std::vector<Outcome> outcomes;
  for (const std::string& w : why)
    outcomes.push_back(w.empty() ? Outcome{format, source} : Outcome{WeightFormat::Dense, w});
  return uniform(kv, outcomes, path);
}

PatternList exclusions(const json& qc, const std::string& base,
                       std::initializer_list<const char*> keys, PatternList::Syntax syntax) {
  for (const char* k : keys)
    if (const json* v = field(qc, k)) return PatternList(*v, base + "." + k, syntax);
  return {};
}

}  // namespace fkv::config_detail::quant
