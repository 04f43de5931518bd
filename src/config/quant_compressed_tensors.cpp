// quant_compressed_tensors: quant_method "compressed-tensors" -> the format of the K/V
// projection weights (docs/config-rules.md, "quantization_config"): the config groups in file
// order, each naming the modules it quantizes (targets) and how (weights: quantization args), the
// ignore list, and the sparsity config.
//
// Read as the engines read it; checked against (paths in those repositories):
//   vLLM: vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
//     (CompressedTensorsConfig: config_groups with targets and weights, ignore, format) and
//     compressed_tensors/utils.py (should_ignore_layer, find_matched_target: a layer name equal
//     to a target or re.match-ing a "re:" one first, then a module class name such as "Linear");
//   transformers: src/transformers/utils/quantization_config.py (CompressedTensorsConfig);
//   compressed-tensors: src/compressed_tensors/quantization/quant_args.py (QuantizationArgs:
//     num_bits 8, type int, symmetric and static by default; no strategy = tensor, or group /
//     channel from group_size; block_structure [rows, cols] or "RxC").
#include <cstddef>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "quant_reading.hpp"

namespace fkv::config_detail::quant {
namespace {

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

}  // namespace

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

}  // namespace fkv::config_detail::quant
