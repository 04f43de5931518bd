// Options shared by the commands that choose kernel variants: precompile, source and
// cache verify --config (declared in commands.hpp).
#include <charconv>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "fkv/errors.hpp"

namespace fkv::cli {

void add_variant_options(CLI::App* cmd, VariantArgs& a, bool config_positional) {
  if (config_positional)
    cmd->add_option("CONFIG", a.config, "model config.json")->required();
  else
    cmd->add_option("--config", a.config, "model config.json whose kernels to check")->required();
  cmd->add_option("--dtype", a.dtype, "activation dtype: bf16, fp16, fp32 (default: the config's)");
  cmd->add_option("--kv-dtype", a.kv_dtype,
                  "cache dtype: same as --dtype (default), fp8_e4m3 or fp8_e5m2");
  cmd->add_option("--cos-sin-dtype", a.cos_sin, "cos/sin cache dtype: fp32 or the activation dtype")
      ->capture_default_str();
  cmd->add_option("--index-dtype", a.index, "positions and cache_loc dtype")
      ->check(CLI::IsMember({"int32", "int64"}))
      ->capture_default_str();
  cmd->add_option("--mode", a.mode, "output modes to build")
      ->check(CLI::IsMember({"stacked", "pool", "both"}))
      ->capture_default_str();
  cmd->add_flag("--strict", a.strict, "require one uniform group (the seed's semantics)");
  cmd->add_option("--tp", a.tp,
                  "tensor-parallel degree: build the kernels of a rank's share of the KV heads")
      ->check(integer_at_least(1))  // --tp 0 is a usage error (exit 3), as -j 0 is
      ->capture_default_str();
  cmd->add_option("--decode", a.decode_gpu,
                  "also the decode-size kernels that calls of a few tokens take on this GPU (a "
                  "name from the measured table, e.g. H200; docs/decode.md)");
  cmd->add_option("--weights", a.weights,
                  "how the draft's K/V weights are stored: dense, fp8_tensor, fp8_channel, "
                  "fp8_block, int8_channel (default: what the config's quantization_config "
                  "declares, else dense): also the kernels a materializer builds for them "
                  "(docs/quantized.md)");
}

namespace {

// --decode NAME: the decode-size kernels FusedKVMaterializer loads on that GPU (an entry of the
// measured table, matched case-insensitively as a substring of its name).
DecodePrecompile decode_of(const std::string& name, int hidden) {
  MeasuredDecodeGpu g;
  try {
    g = measured_decode_gpu(name);
  } catch (const ArgumentError& e) {
    throw CommandFailure(Usage, std::string("--decode: ") + e.what());
  }
  if (hidden <= 0)
    throw CommandFailure(Usage, "--decode " + name +
                                    ": the config has no hidden_size, which the decode kernels "
                                    "are specialized on");
  return DecodePrecompile{g.sm_count, g.crossover, hidden};
}

}  // namespace

Variants variants_of(const VariantArgs& a) {
  const ModelConfig cfg = load_config(a.config);
  Variants v;
  v.plan = make_plan(cfg, a.strict ? ValidationMode::Strict : ValidationMode::Grouped);
  // Every rank holds the same number of heads (shard_plan), so rank 0's kernels serve all ranks.
  if (a.tp != 1) v.plan = shard_plan(v.plan, TensorParallel{a.tp, 0});
  VariantOptions& o = v.options;
  o.act = a.dtype.empty() ? act_dtype_of(cfg) : parse_dtype(a.dtype);
  o.cache = a.kv_dtype.empty() ? o.act : parse_dtype(a.kv_dtype);
  o.cos_sin = parse_dtype(a.cos_sin);
  o.index = a.index == "int32" ? IndexType::I32 : IndexType::I64;
  o.stacked = a.mode != "pool";
  o.pool = a.mode != "stacked";
  v.hidden = cfg.hidden_size.value;
  std::optional<WeightFormat> requested;
  if (!a.weights.empty()) requested = weights_option(a.weights);
  // Throws the declaration's refusal when nothing is requested (its kind's exit code).
  const WeightChoice choice =
      choose_weight_format(cfg, requested ? &*requested : nullptr, "--weights");
  o.weights = choice.format;
  if (!choice.message.empty()) {
    std::cerr << "fkv-jit: " << (choice.warning ? "warning: " : "note: ")
              << printable(choice.message) << "\n";
    v.notes.push_back(choice.message);
  }
  if (is_quantized(o.weights) && v.hidden <= 0) {
    if (requested)
      throw CommandFailure(Usage, "--weights " + a.weights +
                                      ": the config has no hidden_size, which the kernels of "
                                      "quantized weights are specialized on");
    throw CommandFailure(BadInput, cfg.path + ": the K/V weights are " + to_string(o.weights) +
                                       ", as " + cfg.weights.source +
                                       " declares, and the config has no hidden_size, which the "
                                       "kernels of quantized weights are specialized on; give "
                                       "--weights dense for the dense kernels only");
  }
  if (!a.decode_gpu.empty()) {
    v.decode = decode_of(a.decode_gpu, cfg.hidden_size.value);
    if (decode_specs_for(v.plan, v.options, v.decode).empty())
      std::fprintf(stderr,
                   "note: --decode %s: this plan takes no decode-size kernel (more than one "
                   "group, or a shape the decode kernel does not cover: docs/decode.md)\n",
                   printable(a.decode_gpu).c_str());
  }
  return v;
}

WeightFormat weights_option(const std::string& name) {
  try {
    return parse_weight_format(name);
  } catch (const UnsupportedError& e) {  // a packed 4-bit scheme, named
    throw CommandFailure(Unsupported, std::string("--weights: ") + e.what());
  } catch (const ArgumentError& e) {  // not a format name: the list
    throw CommandFailure(Usage, std::string("--weights: ") + e.what());
  }
}

std::vector<NeededKernel> needed_kernels(const Variants& v) {
  std::vector<NeededKernel> out;
  for (const KernelSpec& s : kernel_specs_for(v.plan, v.options))
    out.push_back({s.short_name(), generate(s)});
  for (const DecodeSpec& d : decode_specs_for(v.plan, v.options, v.decode))
    out.push_back({d.short_name(), generate_decode(d)});
  for (KernelSource& k : weight_kernels_for(v.options, v.hidden))
    out.push_back({k.short_name, std::move(k)});
  return out;
}

std::vector<ArchTarget> targets_of(const std::vector<std::string>& archs, bool ptx,
                                   std::vector<std::string>* notes) {
  std::vector<ArchTarget> out;
  for (const std::string& text : archs) {
    ArchRequest r;
    try {
      r = resolve_arch(text);
    } catch (const ArgumentError& e) {
      throw CommandFailure(Usage, std::string("--arch: ") + e.what());
    }
    if (ptx) r.target.ptx = true;
    if (!r.note.empty()) {
      std::cerr << "fkv-jit: note: --arch " << printable(text) << ": " << r.note << "\n";
      if (notes) notes->push_back("--arch " + text + ": " + r.note);
    }
    bool seen = false;
    for (const ArchTarget& t : out) seen |= t == r.target;
    if (!seen) out.push_back(r.target);  // sm_90 and sm_90a name the same target
  }
  return out;
}

CLI::Validator integer_at_least(int min) {
  const std::string what = min == 1   ? "a positive integer"
                           : min == 0 ? "0 or a positive integer"
                                      : "an integer of at least " + std::to_string(min);
  return CLI::Validator(
      [min, what](const std::string& v) {
        long long n = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && end == v.data() + v.size() && n >= min && n <= INT_MAX)
          return std::string();
        return "must be " + what + ", got '" + v + "'";
      },
      min == 1 ? "N>=1" : "N>=" + std::to_string(min));
}

CLI::Option* add_cache_dir_option(CLI::App* cmd, std::string& dir, const std::string& what) {
  return cmd->add_option("--cache-dir", dir, what)
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty() ? std::string(
                                   "an empty path names no directory: give a directory, or "
                                   "leave the option out for the default")
                             : std::string();
          },
          "DIR", "non-empty"));
}

}  // namespace fkv::cli
