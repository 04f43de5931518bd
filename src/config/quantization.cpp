// quantization: a config's quantization_config -> how the K/V projection weights of its
// attention layers are stored (ModelConfig::weights; docs/config-rules.md, "quantization_config").
//
// The declaration is read as the engines read it; checked against (paths in those repositories):
//   vLLM: vllm/config/model.py (_parse_quant_hf_config: quantization_config, else
//     compression_config; _verify_quantization: quant_method lower-cased, "compressed_tensors"
//     spelled "compressed-tensors"); vllm/model_executor/layers/quantization/fp8.py
//     (Fp8Config.from_config); compressed_tensors/compressed_tensors.py
//     (CompressedTensorsConfig: config_groups with targets and weights, ignore, format) and
//     compressed_tensors/utils.py (should_ignore_layer, find_matched_target: a layer name equal
//     to a target or re.match-ing a "re:" one first, then a module class name such as "Linear");
//     fbgemm_fp8.py (FBGEMMFp8Config: modules_to_not_convert, a weight_scale per output
//     channel); modelopt.py (quant_algo FP8 / FP8_PER_CHANNEL_PER_TOKEN / FP8_PB_WO / NVFP4 ...,
//     exclude_modules or ignore with wildcards);
//   sglang: python/sglang/srt/layers/quantization/fp8.py (Fp8Config.from_config:
//     ignored_layers | modules_to_not_convert, weight_block_size, "mxfp8" in quant_method),
//     w8a8_fp8.py (W8A8Fp8Config: a weight_scale per output channel), w8a8_int8.py;
//   transformers: src/transformers/utils/quantization_config.py (FineGrainedFP8Config,
//     CompressedTensorsConfig, GPTQConfig, AwqConfig, BitsAndBytesConfig, Mxfp4Config),
//     src/transformers/quantizers/quantizers_utils.py (should_convert_module);
//   compressed-tensors: src/compressed_tensors/quantization/quant_args.py (QuantizationArgs:
//     num_bits 8, type int, symmetric and static by default; no strategy = tensor, or group /
//     channel from group_size; block_structure [rows, cols] or "RxC").
// Nothing here throws out of read_declared_weights: a refusal is kept in the config and raised
// where the declared format is used, so that an explicit --weights can still go on.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "internal.hpp"
#include "module_match.hpp"

namespace fkv {

void DeclaredWeights::raise() const {
  if (bad_input) throw ConfigError(error);
  throw UnsupportedError(error);
}

WeightFormat declared_weight_format(const ModelConfig& config) {
  if (config.weights.refused()) config.weights.raise();
  return config.weights.format;
}

WeightChoice choose_weight_format(const ModelConfig& config, const WeightFormat* requested,
                                  const std::string& option) {
  const DeclaredWeights& d = config.weights;
  const std::string file = config.path.empty() ? std::string("<config>") : config.path;
  WeightChoice c;
  if (!requested) {
    c.format = declared_weight_format(config);  // throws a refusal
    if (d.declared())
      c.message = file + ": the K/V weights are " + to_string(d.format) + ", as " + d.source +
                  " declares: the default of " + option + " (give " + option + " to override)";
    return c;
  }
  c.format = *requested;
  if (d.declared() && d.format != *requested) {
    c.message = file + ": " + option + " " + to_string(*requested) + " differs from the " +
                to_string(d.format) + " that " + d.source + " declares; taking " +
                to_string(*requested) + " as given";
    c.warning = true;
  } else if (d.refused()) {
    c.message = file + ": " + option + " " + to_string(*requested) +
                " is taken as given over the declaration at " + d.source +
                ", which fkv-jit does not read";
    c.warning = true;
  }
  return c;
}

namespace config_detail {
namespace {

// A refusal found while reading; read_declared_weights keeps it in DeclaredWeights.
struct Refusal {
  std::string path;
  std::string what;
  bool bad_input = false;
};

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Refusal{path, what, false};
}
[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Refusal{path, what, true};
}

// The second and third lines of a refusal (docs/config-rules.md: what and why; what is read and
// how to go on; where to read more).
const char* const kReads =
    ".\nfkv-jit reads K/V weights stored dense, as FP8 e4m3 (per-tensor, per-channel or 128x128 "
    "block scales) or as INT8 per-channel (W8A16): use a dequantized bf16 copy of the draft (or "
    "one quantized to those formats), or state how the K/V weights you load are stored: "
    "--weights FORMAT (fkv_precompile_options.weights in C, weights= in Python).\n"
    "See docs/config-rules.md (\"quantization_config\").";
const char* const kCorrect =
    ". Correct it, or state how the K/V weights you load are stored: --weights FORMAT "
    "(fkv_precompile_options.weights in C, weights= in Python).";

// A key's value, or nullptr when absent or null (HF writes null for unset optionals).
const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A string from the config in a message: quoted, and cut to 60 characters like show().
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

// One K/V projection of one attention layer, with the module names checkpoints give it: the
// decoder layer's attention module path under each prefix the engines' checkpoints use, then
// ".k_proj" / ".v_proj", and the fused ".qkv_proj" (which ignores and targets may name instead;
// vLLM's should_ignore_layer and _match_fused_layer).
struct Projection {
  int layer = 0;
  std::string proj;  // "k_proj" or "v_proj"
  std::vector<std::string> names;
  std::string label() const { return "layer " + std::to_string(layer) + " " + proj; }
};

std::vector<Projection> kv_projections(const ModelConfig& cfg) {
  std::vector<Projection> out;
  const bool one_layer = cfg.layers.size() == 1;
  for (const LayerAttention& l : cfg.layers) {
    if (!l.is_attention()) continue;
    const std::string i = std::to_string(l.index);
    // HF causal LMs (LlamaForCausalLM: model.layers.N.self_attn), speculators' drafts
    // (layers.N), transformers' multimodal wrappers (model.language_model.layers.N; older
    // checkpoints language_model.model.layers.N), and sglang's one-layer EAGLE-3 drafts
    // (LlamaForCausalLMEagle3: midlayer).
    std::vector<std::string> prefixes = {"model.layers." + i + ".self_attn",
                                         "layers." + i + ".self_attn",
                                         "model.language_model.layers." + i + ".self_attn",
                                         "language_model.model.layers." + i + ".self_attn"};
    if (one_layer) prefixes.push_back("midlayer.self_attn");
    for (const char* proj : {"k_proj", "v_proj"}) {
      Projection p{l.index, proj, {}};
      for (const std::string& pre : prefixes) {
        p.names.push_back(pre + "." + proj);
        p.names.push_back(pre + ".qkv_proj");
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

// A list of module patterns at `path`: exclusion-list entries (modules_to_not_convert,
// ignored_layers, exclude_modules: excludes_module), or compressed-tensors entries (equal to a
// module name, or "re:" and a Python regex re.match-ing it). Plain entries are looked up in a
// hash table; patterns are tried one by one, within a work budget, so that a config holding
// thousands of patterns and layers cannot make reading it slow (beyond it: a refusal).
class PatternList {
 public:
  enum class Syntax { Exclusion, CompressedTensors };

  PatternList() = default;
  PatternList(const json& list, std::string path, Syntax syntax)
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

  std::size_t size() const { return entries_.size(); }
  const std::string& entry(std::size_t i) const { return entries_[i]; }
  std::string entry_path(std::size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

  // The first entry (in list order) naming one of the projection's module names, or -1.
  int first_naming(const Projection& p) const {
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

 private:
  struct Pattern {
    std::size_t index;
    std::optional<ModuleRegex> regex;  // compressed-tensors "re:"; else a glob
  };

  void spend(std::size_t steps) const {
    work_ += steps;
    if (work_ > kMaxWork)
      refuse(path_, "holds " + std::to_string(patterns_.size()) +
                        " patterns, more than fkv-jit checks against the module names of the "
                        "K/V projections of " +
                        "every layer in reasonable time");
  }

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

struct Declared {
  WeightFormat format = WeightFormat::Dense;
  std::string source;
};

// One format for every K/V projection, or a refusal naming two that differ (`path`: the key the
// difference comes from).
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

// A scheme that quantizes every linear layer alike except those an exclusion list names:
// `format` (from `source`) for the projections no entry names, dense for the others.
Declared all_but_excluded(const std::vector<Projection>& kv, const PatternList& excluded,
                          WeightFormat format, const std::string& source, const std::string& path) {
  std::vector<Outcome> outcomes;
  for (const Projection& p : kv) {
    const int e = excluded.first_naming(p);
    if (e < 0)
      outcomes.push_back({format, source});
    else
      outcomes.push_back(
          {WeightFormat::Dense,
           excluded.entry_path(e) + " = " + in_quotes(excluded.entry(e)) + " (left unquantized)"});
  }
  return uniform(kv, outcomes, path);
}

// The exclusion list of a scheme: the first of `keys` present, or an empty list.
PatternList exclusions(const json& qc, const std::string& base,
                       std::initializer_list<const char*> keys, PatternList::Syntax syntax) {
  for (const char* k : keys)
    if (const json* v = field(qc, k)) return PatternList(*v, base + "." + k, syntax);
  return {};
}

// ---- packed schemes ----------------------------------------------------------------------------

// quant_method values whose weights are packed below a byte or into codebooks (the names
// transformers' QuantizationMethod, vLLM's QUANTIZATION_METHODS and sglang's registry give them),
// with what they store.
struct Packed {
  const char* method;
  const char* stores;  // "{bits}" is replaced by "4-bit" (from "bits") or "sub-byte"
};
constexpr Packed kPacked[] = {
    {"gptq",
     "packs {bits} integer weights into int32 words with group-wise scales and zero points"},
    {"gptq_marlin", "packs {bits} integer weights into int32 words (GPTQ, Marlin layout)"},
    {"gptq_marlin_24", "packs {bits} integer weights 2:4-sparse into int32 words (Marlin 2:4)"},
    {"gptq_bitblas", "packs {bits} integer weights into int32 words (GPTQ, BitBLAS layout)"},
    {"marlin", "packs {bits} integer weights into int32 words (Marlin layout)"},
    {"bitblas", "packs {bits} integer weights (BitBLAS layout)"},
    {"awq", "packs {bits} integer weights into int32 words with group-wise scales and zero points"},
    {"awq_marlin", "packs {bits} integer weights into int32 words (AWQ, Marlin layout)"},
    {"auto-round", "packs {bits} integer weights into int32 words with group-wise scales"},
    {"autoround", "packs {bits} integer weights into int32 words with group-wise scales"},
    {"moe_wna16", "packs {bits} integer weights into int32 words with group-wise scales"},
    {"hqq", "packs {bits} weights with group-wise scales and zero points"},
    {"exl2", "packs weights of mixed bit widths (EXL2)"},
    {"mxfp4", "packs 4-bit e2m1 weights two per byte with a power-of-two (e8m0) scale per 32"},
    {"nvfp4", "packs 4-bit e2m1 weights two per byte with an FP8 scale per 16 and a global scale"},
    {"modelopt_fp4",
     "packs 4-bit e2m1 weights two per byte with an FP8 scale per 16 and a global scale"},
    {"petit_nvfp4",
     "packs 4-bit e2m1 weights two per byte with an FP8 scale per 16 and a global scale"},
    {"w4afp8", "packs 4-bit integer weights with group-wise scales (W4A8)"},
    {"fp_quant", "packs 4-bit floating-point weights with group-wise scales"},
    {"aqlm", "stores weights as additive vector-quantization codes"},
    {"vptq", "stores weights as vector-quantization codebook indices"},
    {"higgs", "stores weights as Hadamard-rotated codebook codes"},
    {"spqr", "stores sparse-quantized weights with outliers"},
    {"bitnet", "packs ternary weights four per byte"},
    {"gguf", "stores GGUF block-quantized weights"},
};

const Packed* packed_scheme(const std::string& method) {
  for (const Packed& p : kPacked)
    if (method == p.method) return &p;
  return nullptr;
}

std::string bits_text(const json& qc, const std::string& base) {
  if (const json* b = field(qc, "bits"))
    return std::to_string(integer_at(*b, base + ".bits")) + "-bit";
  return "sub-byte";
}

// A packed scheme: dense when its exclusion list names every K/V projection, else refused at
// `path`, the message starting with `label` (the quant_method or quant_algo as written).
Declared packed(const std::string& path, const std::string& label, const std::string& stores,
                const std::vector<Projection>& kv, const PatternList& excluded) {
  std::vector<Outcome> outcomes;
  bool any_quantized = kv.empty();
  for (const Projection& p : kv) {
    const int e = excluded.first_naming(p);
    any_quantized |= e < 0;
    if (e >= 0)
      outcomes.push_back(
          {WeightFormat::Dense,
           excluded.entry_path(e) + " = " + in_quotes(excluded.entry(e)) + " (left unquantized)"});
  }
  if (!any_quantized) return uniform(kv, outcomes, path);
  if (!outcomes.empty())
    refuse(path, label + " " + stores + " in the K/V projections of some attention layers, and " +
                     outcomes.front().source +
                     " leaves others unquantized; fkv-jit reads neither the packed weights nor "
                     "a mix of formats");
  refuse(path, label + " " + stores + ", which fkv-jit does not read");
}

// ---- fp8 -------------------------------------------------------------------------------------

Declared fp8(const json& qc, const std::string& base, const std::vector<Projection>& kv) {
  if (const json* f = field(qc, "fmt")) {
    const std::string fmt = string_at(*f, base + ".fmt");
    if (lower(fmt) != "e4m3")
      refuse(base + ".fmt", in_quotes(fmt) + ": fkv-jit reads FP8 e4m3 weights only");
  }
  const PatternList excluded = exclusions(qc, base, {"ignored_layers", "modules_to_not_convert"},
                                          PatternList::Syntax::Exclusion);
  const json* block = field(qc, "weight_block_size");
  if (!block)
    return all_but_excluded(kv, excluded, WeightFormat::Fp8Tensor,
                            base +
                                ".quant_method = \"fp8\" without weight_block_size (per-tensor "
                                "weight scales, as vLLM's and sglang's Fp8LinearMethod keep them)",
                            base);
  const std::string bpath = base + ".weight_block_size";
  if (!block->is_array() || block->size() != 2)
    bad(bpath, "expected a list of two block sizes [rows, cols], got " + show(*block));
  const long long rows = integer_at((*block)[0], bpath + "[0]");
  const long long cols = integer_at((*block)[1], bpath + "[1]");
  if (rows <= 0 || cols <= 0) bad(bpath, "block sizes must be positive, got " + block->dump());
  if (rows != kWeightBlock || cols != kWeightBlock)
    refuse(bpath, block->dump() + ": FP8 scales over blocks of " + std::to_string(rows) + "x" +
                      std::to_string(cols) +
                      " weights; fkv-jit reads block scales over 128x128 blocks only (its "
                      "fp8_block format, DeepSeek's weight_scale_inv layout)");
  return all_but_excluded(kv, excluded, WeightFormat::Fp8Block,
                          bpath + " = [128, 128] (quant_method \"fp8\")", base);
}

// ---- ModelOpt --------------------------------------------------------------------------------

Declared modelopt(const json& qc, const std::string& base, const std::string& method,
                  const std::vector<Projection>& kv) {
  // The legacy hf_quant_config.json form keeps {"quant_algo", "exclude_modules"} under
  // "quantization"; the config.json form has quant_algo and "ignore" at the top.
  const json* legacy = field(qc, "quantization");
  if (legacy && !legacy->is_object())
    bad(base + ".quantization", "expected an object, got " + show(*legacy));
  const json& holder = legacy ? *legacy : qc;
  const std::string hbase = legacy ? base + ".quantization" : base;
  const PatternList excluded =
      legacy ? exclusions(*legacy, hbase, {"exclude_modules"}, PatternList::Syntax::Exclusion)
             : exclusions(qc, base, {"ignore"}, PatternList::Syntax::Exclusion);
  const std::string nvfp4 =
      "packs 4-bit e2m1 weights two per byte with an FP8 scale per 16 and a global scale";
  if (method == "modelopt_fp4")
    return packed(base + ".quant_method", in_quotes(method), nvfp4, kv, excluded);
  const json* a = field(holder, "quant_algo");
  const std::string apath = hbase + ".quant_algo";
  if (!a) bad(apath, "missing: a ModelOpt config names its quant_algo (FP8, NVFP4, ...)");
  const std::string written = string_at(*a, apath);
  std::string algo = written;
  std::transform(algo.begin(), algo.end(), algo.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const std::string src = apath + " = " + in_quotes(written);
  if (algo == "FP8")
    return all_but_excluded(kv, excluded, WeightFormat::Fp8Tensor,
                            src + " (per-tensor weight scales: vLLM's ModelOptFp8LinearMethod)",
                            hbase);
  if (algo == "FP8_PER_CHANNEL_PER_TOKEN")
    return all_but_excluded(
        kv, excluded, WeightFormat::Fp8Channel,
        src + " (a weight scale per output channel: vLLM's ModelOptFp8PcPtLinearMethod)", hbase);
  if (algo == "FP8_PB_WO")
    return all_but_excluded(kv, excluded, WeightFormat::Fp8Block,
                            src +
                                " (128x128 block scales, [rows/128, 1, cols/128, 1]: vLLM's "
                                "ModelOptFp8PbWoLinearMethod)",
                            hbase);
  std::string stores;
  if (algo.find("NVFP4") != std::string::npos)
    stores = nvfp4;
  else if (algo.find("MXFP4") != std::string::npos)
    stores = "packs 4-bit e2m1 weights two per byte with a power-of-two (e8m0) scale per 32";
  else if (algo.find("INT4") != std::string::npos || algo.find("W4A") != std::string::npos)
    stores = "packs 4-bit integer weights with group-wise scales";
  if (!stores.empty())
    return packed(apath, "quant_algo " + in_quotes(written), stores, kv, excluded);
  refuse(apath, in_quotes(written) +
                    " is not a ModelOpt algorithm whose weights fkv-jit reads (it reads FP8, "
                    "FP8_PER_CHANNEL_PER_TOKEN and FP8_PB_WO)");
}

// ---- compressed-tensors ----------------------------------------------------------------------

const char* const kCtByteFormats[] = {"float-quantized", "int-quantized", "naive-quantized"};

bool stores_bytes(const std::string& format) {
  for (const char* f : kCtByteFormats)
    if (format == f) return true;
  return false;
}

// A config group's weights -> the format they are stored in (or a refusal). `format` is the
// group's "format", else the top-level one ("" when neither says).
WeightFormat ct_weights(const json& w, const std::string& wpath, const std::string& format,
                        const std::string& format_path, std::string& desc) {
  if (!w.is_object()) bad(wpath, "expected an object (quantization args), got " + show(w));
  long long bits = 8;
  if (const json* v = field(w, "num_bits")) bits = integer_at(*v, wpath + ".num_bits");
  std::string type = "int";
  if (const json* v = field(w, "type")) type = lower(string_at(*v, wpath + ".type"));
  bool symmetric = true;
  if (const json* v = field(w, "symmetric")) symmetric = bool_at(*v, wpath + ".symmetric");
  std::optional<long long> group_size;
  if (const json* v = field(w, "group_size")) group_size = integer_at(*v, wpath + ".group_size");
  std::string strategy;
  if (const json* v = field(w, "strategy")) {
    strategy = lower(string_at(*v, wpath + ".strategy"));
  } else if (!group_size) {
    strategy = "tensor";
  } else if (*group_size > 0) {
    strategy = "group";
  } else if (*group_size == -1) {
    strategy = "channel";
  } else {
    bad(wpath + ".group_size", "a group_size of " + std::to_string(*group_size) +
                                   " names no strategy (> 0: group, -1: channel)");
  }
  desc = type + ", " + std::to_string(bits) + " bits, strategy " + in_quotes(strategy);
  if (group_size && *group_size > 0) desc += ", group_size " + std::to_string(*group_size);
  if (const json* v = field(w, "dynamic")) {
    if (!(v->is_boolean() && !v->get<bool>()))
      refuse(wpath + ".dynamic", v->dump() +
                                     ": weights quantized while the model runs are not stored "
                                     "in a format fkv-jit reads");
  }
  const std::string fmt_shown = format.empty() ? "none" : in_quotes(format);
  if (type == "float" && bits == 8) {
    if (!symmetric)
      refuse(wpath + ".symmetric", "false: FP8 weights with zero points are not read");
    if (!format.empty() && !stores_bytes(format))
      refuse(format_path, in_quotes(format) +
                              ": FP8 weights in this compressed-tensors format are "
                              "not stored as e4m3 bytes fkv-jit reads");
    if (strategy == "tensor") return WeightFormat::Fp8Tensor;
    if (strategy == "channel") return WeightFormat::Fp8Channel;
    if (strategy == "block") {
      const json* bs = field(w, "block_structure");
      if (!bs) bad(wpath + ".block_structure", "missing: the block strategy needs it");
      long long r = 0, c = 0;
      if (bs->is_string()) {
        const std::string s = bs->get<std::string>();
        const std::size_t x = s.find('x');
        try {
          if (x == std::string::npos) throw std::invalid_argument(s);
          r = std::stoll(s.substr(0, x));
          c = std::stoll(s.substr(x + 1));
        } catch (const std::exception&) {
          bad(wpath + ".block_structure", "expected [rows, cols] or \"RxC\", got " + show(*bs));
        }
      } else if (bs->is_array() && bs->size() == 2) {
        r = integer_at((*bs)[0], wpath + ".block_structure[0]");
        c = integer_at((*bs)[1], wpath + ".block_structure[1]");
      } else {
        bad(wpath + ".block_structure", "expected [rows, cols] or \"RxC\", got " + show(*bs));
      }
      desc += ", block_structure [" + std::to_string(r) + ", " + std::to_string(c) + "]";
      if (r == kWeightBlock && c == kWeightBlock) return WeightFormat::Fp8Block;
      refuse(wpath + ".block_structure",
             bs->dump() + ": FP8 scales over blocks of " + std::to_string(r) + "x" +
                 std::to_string(c) +
                 " weights; fkv-jit reads block scales over 128x128 blocks only (its fp8_block "
                 "format)");
    }
    refuse(wpath + ".strategy", in_quotes(strategy) + " (" + desc +
                                    "): FP8 weights with scales per " + strategy + " are not read");
  }
  if (type == "float" && bits == 4)
    refuse(wpath + ".num_bits",
           "4 (" + desc + ", format " + fmt_shown +
               "): the weights are packed 4-bit e2m1, two per byte, with a scale per group, "
               "which fkv-jit does not read");
  if (type == "int" && bits == 8) {
    if (format.empty())
      refuse(format_path, "missing: fkv-jit cannot tell whether the int8 weights (" + desc +
                              ") are stored as bytes (int-quantized) or packed into int32 words "
                              "(pack-quantized)");
    if (format == "pack-quantized")
      refuse(format_path, in_quotes(format) + " (" + desc +
                              "): the 8-bit weights are packed four to an int32 word, offset to "
                              "unsigned, which fkv-jit does not read (it reads signed int8 bytes: "
                              "int-quantized)");
    if (!stores_bytes(format))
      refuse(format_path, in_quotes(format) +
                              ": int8 weights in this compressed-tensors format are "
                              "not stored as bytes fkv-jit reads");
    if (!symmetric)
      refuse(wpath + ".symmetric", "false: INT8 weights with zero points are not read");
    // A per-tensor scale is a per-row scale repeated (vLLM's CompressedTensorsW8A8Int8 expands
    // it so, convert_to_channelwise).
    if (strategy == "channel" || strategy == "tensor") return WeightFormat::Int8Channel;
    refuse(wpath + ".strategy", in_quotes(strategy) + " (" + desc +
                                    "): INT8 weights with scales per " + strategy +
                                    " are not read (fkv-jit reads one scale per output channel)");
  }
  if (type == "int" && bits >= 1 && bits < 8)
    refuse(wpath + ".num_bits", std::to_string(bits) + " (" + desc + ", format " + fmt_shown +
                                    "): the weights are packed " + std::to_string(bits) +
                                    "-bit integers in int32 words, which fkv-jit does not read");
  refuse(wpath, desc + ": weights of this type are not a format fkv-jit reads");
}

Declared compressed_tensors(const json& qc, const std::string& base,
                            const std::vector<Projection>& kv) {
  std::string top_format;
  if (const json* f = field(qc, "format")) top_format = string_at(*f, base + ".format");
  const PatternList ignore =
      exclusions(qc, base, {"ignore"}, PatternList::Syntax::CompressedTensors);

  // The config groups in file order, each with its targets.
  struct Group {
    std::string name;
    const json* obj;
    PatternList names;               // targets naming modules (exact or "re:")
    std::vector<std::string> kinds;  // targets naming a module class ("Linear")
  };
  std::vector<Group> groups;
  if (const json* cg = field(qc, "config_groups")) {
    if (!cg->is_object()) bad(base + ".config_groups", "expected an object, got " + show(*cg));
    for (auto it = cg->begin(); it != cg->end(); ++it) {
      const std::string gpath = base + ".config_groups." + it.key();
      if (!it->is_object()) bad(gpath, "expected an object, got " + show(*it));
      const json* t = field(*it, "targets");
      if (!t) bad(gpath + ".targets", "missing: a config group names the modules it quantizes");
      if (!t->is_array()) bad(gpath + ".targets", "expected a list, got " + show(*t));
      json named = json::array();
      Group g{it.key(), &*it, {}, {}};
      for (std::size_t i = 0; i < t->size(); ++i) {
        const std::string target =
            string_at((*t)[i], gpath + ".targets[" + std::to_string(i) + "]");
        // A module class: compressed-tensors matches nn.Linear's class name, vLLM the target as
        // a substring of its layer's class name (QKVParallelLinear).
        if (lower(target) == "linear")
          g.kinds.push_back(target);
        else
          named.push_back(target);
      }
      g.names = PatternList(named, gpath + ".targets", PatternList::Syntax::CompressedTensors);
      groups.push_back(std::move(g));
    }
  }

  std::map<std::size_t, std::pair<WeightFormat, std::string>> evaluated;
  auto group_outcome = [&](std::size_t gi) {
    auto found = evaluated.find(gi);
    if (found != evaluated.end()) return found->second;
    const Group& g = groups[gi];
    const std::string gpath = base + ".config_groups." + g.name;
    std::pair<WeightFormat, std::string> r;
    const json* w = field(*g.obj, "weights");
    if (!w) {
      r = {WeightFormat::Dense, gpath + ".weights = null (only activations quantized)"};
    } else {
      std::string format = top_format, format_path = base + ".format";
      if (const json* f = field(*g.obj, "format")) {
        format = string_at(*f, gpath + ".format");
        format_path = gpath + ".format";
      }
      std::string desc;
      const WeightFormat wf = ct_weights(*w, gpath + ".weights", format, format_path, desc);
      r = {wf, gpath + ".weights (" + desc + ")"};
    }
    evaluated[gi] = r;
    return r;
  };

  std::vector<Outcome> outcomes;
  for (const Projection& p : kv) {
    const int e = ignore.first_naming(p);
    if (e >= 0) {
      outcomes.push_back({WeightFormat::Dense, ignore.entry_path(e) + " = " +
                                                   in_quotes(ignore.entry(e)) + " (ignored)"});
      continue;
    }
    // A target naming the module first, then one naming its class (find_matched_target).
    std::optional<std::size_t> group;
    for (std::size_t gi = 0; gi < groups.size() && !group; ++gi)
      if (groups[gi].names.first_naming(p) >= 0) group = gi;
    for (std::size_t gi = 0; gi < groups.size() && !group; ++gi)
      if (!groups[gi].kinds.empty()) group = gi;
    if (!group) {
      outcomes.push_back({WeightFormat::Dense, base + ".config_groups: no group targets it"});
      continue;
    }
    const auto [format, source] = group_outcome(*group);
    outcomes.push_back({format, source});
  }

  // Sparse storage (2:4) of the same modules is another layout fkv-jit does not read.
  if (const json* sc = field(qc, "sparsity_config")) {
    const std::string spath = base + ".sparsity_config";
    if (!sc->is_object()) bad(spath, "expected an object, got " + show(*sc));
    std::string sformat;
    if (const json* f = field(*sc, "format")) sformat = string_at(*f, spath + ".format");
    if (!sformat.empty() && sformat != "dense") {
      PatternList targets, sparse_ignore;
      if (const json* t = field(*sc, "targets"))
        targets = PatternList(*t, spath + ".targets", PatternList::Syntax::CompressedTensors);
      if (const json* ig = field(*sc, "ignore"))
        sparse_ignore = PatternList(*ig, spath + ".ignore", PatternList::Syntax::CompressedTensors);
      for (const Projection& p : kv) {
        if (sparse_ignore.first_naming(p) >= 0) continue;
        bool targeted = targets.first_naming(p) >= 0;
        for (std::size_t i = 0; i < targets.size() && !targeted; ++i)
          targeted = lower(targets.entry(i)) == "linear";
        if (targeted)
          refuse(spath + ".format", in_quotes(sformat) + ": " + p.label() +
                                        " is stored sparse-compressed, which fkv-jit does not "
                                        "read");
      }
    }
  }
  return uniform(kv, outcomes, base);
}

// ---- the declaration -------------------------------------------------------------------------

Declared read(const json& qc, const std::string& base, const std::vector<Projection>& kv) {
  if (!qc.is_object())
    bad(base, "expected an object (a quantization config with a quant_method), got " + show(qc));
  const json* m = field(qc, "quant_method");
  const std::string mpath = base + ".quant_method";
  if (!m) bad(mpath, "missing: the quantization config names no scheme");
  const std::string written = string_at(*m, mpath);
  std::string method = lower(written);
  if (method == "compressed_tensors") method = "compressed-tensors";  // vLLM accepts both

  if (method == "fp8") return fp8(qc, base, kv);
  if (method.find("mxfp8") != std::string::npos)
    refuse(mpath, in_quotes(written) +
                      " (MXFP8) stores e4m3 weights with a power-of-two (e8m0) scale per 32 "
                      "along a row, which fkv-jit does not read");
  if (method == "fbgemm_fp8")
    return all_but_excluded(
        kv, exclusions(qc, base, {"modules_to_not_convert"}, PatternList::Syntax::Exclusion),
        WeightFormat::Fp8Channel,
        mpath +
            " = \"fbgemm_fp8\" (a weight scale per output channel: vLLM's "
            "FBGEMMFp8LinearMethod)",
        base);
  if (method == "w8a8_fp8")  // sglang's W8A8Fp8Config: no exclusion list
    return all_but_excluded(kv, {}, WeightFormat::Fp8Channel,
                            mpath +
                                " = \"w8a8_fp8\" (a weight scale per output channel: "
                                "sglang's W8A8Fp8LinearMethod)",
                            base);
  if (method == "w8a8_int8")
    return all_but_excluded(
        kv, exclusions(qc, base, {"ignore"}, PatternList::Syntax::CompressedTensors),
        WeightFormat::Int8Channel,
        mpath +
            " = \"w8a8_int8\" (int8 weights with a scale per output channel: sglang's "
            "W8A8Int8LinearMethod)",
        base);
  if (method.rfind("modelopt", 0) == 0) return modelopt(qc, base, method, kv);
  if (method == "compressed-tensors") return compressed_tensors(qc, base, kv);
  if (method == "bitsandbytes") {
    bool four = false, eight = false;
    if (const json* v = field(qc, "load_in_4bit")) four = bool_at(*v, base + ".load_in_4bit");
    if (const json* v = field(qc, "load_in_8bit")) eight = bool_at(*v, base + ".load_in_8bit");
    const std::string stores =
        four    ? "(load_in_4bit) packs 4-bit weights (nf4 or fp4) two per byte with block-wise "
                  "absmax scales"
        : eight ? "(load_in_8bit) stores LLM.int8() weights: int8 rows with absmax statistics "
                  "(SCB) and fp16 outlier columns at run time"
                : "quantizes the weights when the model loads";
    return packed(mpath, in_quotes(written), stores, kv,
                  exclusions(qc, base, {"llm_int8_skip_modules", "modules_to_not_convert"},
                             PatternList::Syntax::Exclusion));
  }
  if (const Packed* p = packed_scheme(method)) {
    std::string stores = p->stores;
    const std::size_t at = stores.find("{bits}");
    if (at != std::string::npos) stores.replace(at, 6, bits_text(qc, base));
    std::string bits_note;
    if (const json* b = field(qc, "bits")) bits_note = " (bits " + b->dump() + ")";
    return packed(mpath, in_quotes(written) + bits_note, stores, kv,
                  exclusions(qc, base, {"modules_to_not_convert"}, PatternList::Syntax::Exclusion));
  }
  refuse(mpath, in_quotes(written) +
                    " is not a quantization scheme fkv-jit knows, so it cannot tell how the K/V "
                    "projection weights are stored");
}

}  // namespace

DeclaredWeights read_declared_weights(const Doc& doc, const ModelConfig& cfg) {
  // quantization_config, else compression_config (vLLM's _parse_quant_hf_config), at the top
  // level, else in the nested layer config.
  Hit h;
  for (const char* k : {"quantization_config", "compression_config"})
    if (!h && present(doc.root(), k)) h = {&doc.root()[k], k};
  if (!h && doc.nested())
    for (const char* k : {"quantization_config", "compression_config"})
      if (!h && present(*doc.nested(), k)) h = {&(*doc.nested())[k], doc.nested_name() + "." + k};
  DeclaredWeights w;
  if (!h) return w;
  try {
    const Declared d = read(*h.v, h.path, kv_projections(cfg));
    w.status = DeclaredWeights::Status::Declared;
    w.format = d.format;
    w.source = d.source;
  } catch (const Refusal& r) {
    w.status = DeclaredWeights::Status::Refused;
    w.bad_input = r.bad_input;
    w.source = r.path;
    w.error = doc.file() + ": key '" + r.path + "': " + r.what + (r.bad_input ? kCorrect : kReads);
  }
  return w;
}

}  // namespace config_detail
}  // namespace fkv
