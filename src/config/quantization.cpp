// quantization: a config's quantization_config -> how the K/V projection weights of its
// attention layers are stored (ModelConfig::weights; docs/config-rules.md, "quantization_config").
// This file holds the public functions, the dispatch on quant_method and the schemes read here
// (fp8, fbgemm_fp8, sglang's w8a8, ModelOpt, the packed ones); compressed-tensors is read in
// quant_compressed_tensors.cpp, and what the readers share (refusals, key access, the K/V
// projections' module names, pattern lists) is in quant_reading.cpp.
//
// The declaration is read as the engines read it; checked against (paths in those repositories):
//   vLLM: vllm/config/model.py (_parse_quant_hf_config: quantization_config, else
//     compression_config; _verify_quantization: quant_method lower-cased, "compressed_tensors"
//     spelled "compressed-tensors"); vllm/model_executor/layers/quantization/fp8.py
//     (Fp8Config.from_config); fbgemm_fp8.py (FBGEMMFp8Config: modules_to_not_convert, a
//     weight_scale per output channel); modelopt.py (quant_algo FP8 / FP8_PER_CHANNEL_PER_TOKEN /
//     FP8_PB_WO / NVFP4 ..., exclude_modules or ignore with wildcards);
//   sglang: python/sglang/srt/layers/quantization/fp8.py (Fp8Config.from_config:
//     ignored_layers | modules_to_not_convert, weight_block_size, "mxfp8" in quant_method),
//     w8a8_fp8.py (W8A8Fp8Config: a weight_scale per output channel), w8a8_int8.py;
//   transformers: src/transformers/utils/quantization_config.py (FineGrainedFP8Config,
//     GPTQConfig, AwqConfig, BitsAndBytesConfig, Mxfp4Config).
// GPTQ's modules_in_block_to_quantize and dynamic are read in quant_gptq.cpp.
// Nothing here throws out of read_declared_weights: a refusal is kept in the config and raised
// where the declared format is used, so that an explicit --weights can still go on.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "internal.hpp"
#include "quant_reading.hpp"

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
namespace quant {
namespace {

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

// A packed scheme: dense when `unquantized` gives a reason for every K/V projection (its
// exclusion list names it, or GPTQ's own keys leave it out), else refused at `path`, the message
// starting with `label` (the quant_method or quant_algo as written).
Declared packed(const std::string& path, const std::string& label, const std::string& stores,
                const std::vector<Projection>& kv, const std::vector<std::string>& unquantized) {
  std::vector<Outcome> outcomes;
  const Projection* quantized = nullptr;
  const Projection* dense = nullptr;
  for (std::size_t i = 0; i < kv.size(); ++i) {
    if (unquantized[i].empty() && !quantized) quantized = &kv[i];
    if (unquantized[i].empty()) continue;
    if (!dense) dense = &kv[i];
    outcomes.push_back({WeightFormat::Dense, unquantized[i]});
  }
  if (!quantized && !kv.empty()) return uniform(kv, outcomes, path);
  if (quantized && dense)
    refuse(path, label + " " + stores + " in some K/V projections (" + quantized->label() +
                     "), and " + outcomes.front().source + " leaves others unquantized (" +
                     dense->label() +
                     "); fkv-jit reads neither the packed weights nor a mix of formats");
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
    return packed(base + ".quant_method", in_quotes(method), nvfp4, kv,
                  unquantized_by(kv, excluded));
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
    return packed(apath, "quant_algo " + in_quotes(written), stores, kv,
                  unquantized_by(kv, excluded));
  refuse(apath, in_quotes(written) +
                    " is not a ModelOpt algorithm whose weights fkv-jit reads (it reads FP8, "
                    "FP8_PER_CHANNEL_PER_TOKEN and FP8_PB_WO)");
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
    return packed(
        mpath, in_quotes(written), stores, kv,
        unquantized_by(kv, exclusions(qc, base, {"llm_int8_skip_modules", "modules_to_not_convert"},
                                      PatternList::Syntax::Exclusion)));
  }
  if (const Packed* p = packed_scheme(method)) {
    std::string stores = p->stores;
    const std::size_t at = stores.find("{bits}");
    if (at != std::string::npos) stores.replace(at, 6, bits_text(qc, base));
    std::string bits_note;
    if (const json* b = field(qc, "bits")) bits_note = " (bits " + b->dump() + ")";
    std::vector<std::string> unquantized = unquantized_by(
        kv, exclusions(qc, base, {"modules_to_not_convert"}, PatternList::Syntax::Exclusion));
    if (method == "gptq" || method == "gptq_marlin") gptq_unquantized(qc, base, kv, unquantized);
    return packed(mpath, in_quotes(written) + bits_note, stores, kv, unquantized);
  }
  refuse(mpath, in_quotes(written) +
                    " is not a quantization scheme fkv-jit knows, so it cannot tell how the K/V "
                    "projection weights are stored");
}

}  // namespace
}  // namespace quant

namespace {

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
    const quant::Declared d = quant::read(*h.v, h.path, quant::kv_projections(cfg));
    w.status = DeclaredWeights::Status::Declared;
    w.format = d.format;
    w.source = d.source;
  } catch (const quant::Refusal& r) {
    w.status = DeclaredWeights::Status::Refused;
    w.bad_input = r.bad_input;
    w.source = r.path;
    w.error = doc.file() + ": key '" + r.path + "': " + r.what + (r.bad_input ? kCorrect : kReads);
  }
  return w;
}

}  // namespace config_detail
}  // namespace fkv
