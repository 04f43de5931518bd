// `fkv-jit validate` and `fkv-jit plan`: read a config, check it, print the result.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fkv/errors.hpp"
#include "fkv/validate.hpp"

namespace fkv::cli {
namespace {

struct Options {
  std::string path;
  bool json = false;
  bool explain = false;
  bool grouped = false;  // validate --grouped; plan without --strict
  int tp = 1;            // plan --tp: tensor-parallel degree
  std::string weights;   // validate / plan --weights: how the K/V weights are stored
};

// "0-2, 4, 6-9"; "none" when empty.
std::string format_layers(const std::vector<int>& layers) {
  if (layers.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return out;
}

std::string format_rope_of(const AttentionSpec& spec) {
  return spec.rotary_dim == 0 ? std::string("none (NoPE)") : format_rope(spec.rope);
}

template <class T>
nlohmann::json sourced(const T& value, const std::string& source) {
  return {{"value", value}, {"source", source}};
}

nlohmann::json layer_json(const LayerAttention& l) {
  nlohmann::json j = {{"index", l.index},
                      {"kind", sourced(to_string(l.kind.value), l.kind.source)}};
  if (!l.is_attention()) return j;
  const RopeFrequencies& rope = l.rope.value;
  j["num_kv_heads"] = sourced(l.num_kv_heads.value, l.num_kv_heads.source);
  j["head_dim"] = sourced(l.head_dim.value, l.head_dim.source);
  j["rotary_dim"] = sourced(l.rotary_dim.value, l.rotary_dim.source);
  j["is_neox_style"] = sourced(l.is_neox_style.value, l.is_neox_style.source);
  j["k_norm"] = sourced(to_string(l.k_norm.value), l.k_norm.source);
  j["eps"] = sourced(l.eps.value, l.eps.source);
  j["rope"] = sourced(
      nlohmann::json{
          {"theta", rope.theta}, {"scaling_type", rope.scaling_type}, {"scaling", rope.scaling}},
      l.rope.source);
  j["sliding_window"] = l.sliding_window;
  j["unsupported"] = l.unsupported;
  return j;
}

nlohmann::json groups_json(const Plan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    groups.push_back(
        {{"group", g}, {"layers", plan.groups[g].layers}, {"spec", to_json(plan.groups[g].attn)}});
  }
  return groups;
}

void print_explain(std::ostream& os, const ModelConfig& config) {
  auto row = [&os](const std::string& name, const std::string& value, const std::string& source) {
    std::string line = "  " + name;
    line.resize(16, ' ');
    line += value;
    if (line.size() < 56)
      line.resize(56, ' ');
    else
      line += "  ";
    os << line << "[" << source << "]\n";
  };
  os << "per-layer values (" << config.path << "):\n";
  for (const LayerAttention& l : config.layers) {
    os << "layer " << l.index << ": " << to_string(l.kind.value) << "  [" << l.kind.source << "]\n";
    if (!l.is_attention()) continue;
    row("num_kv_heads", std::to_string(l.num_kv_heads.value), l.num_kv_heads.source);
    row("head_dim", std::to_string(l.head_dim.value), l.head_dim.source);
    row("rotary_dim", std::to_string(l.rotary_dim.value), l.rotary_dim.source);
    row("neox", format_bool(l.is_neox_style.value), l.is_neox_style.source);
    row("k_norm", to_string(l.k_norm.value), l.k_norm.source);
    row("eps", format_float(l.eps.value), l.eps.source);
    row("rope", format_rope(l.rope.value), l.rope.source);
    if (l.sliding_window > 0) os << "  sliding_window  " << l.sliding_window << "\n";
    if (!l.unsupported.empty()) os << "  unsupported: " << l.unsupported << "\n";
  }
  // The K/V weights' storage, when quantization_config says anything of it.
  const DeclaredWeights& w = config.weights;
  if (w.declared())
    os << "weights (K/V projections): " << to_string(w.format) << "  [" << w.source << "]\n";
  else if (w.refused())
    os << "weights (K/V projections): not read  [" << w.source << "]\n";
  os << "\n";
}

void print_groups(std::ostream& os, const Plan& plan) {
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const LayerGroup& group = plan.groups[g];
    const AttentionSpec& a = group.attn;
    os << "group " << g << ": " << group.layers.size() << " layer"
       << (group.layers.size() == 1 ? "" : "s") << ": " << format_layers(group.layers) << "\n"
       << "  num_kv_heads=" << a.num_kv_heads << "  head_dim=" << a.head_dim
       << "  rotary_dim=" << a.rotary_dim << "  neox=" << format_bool(a.is_neox_style)
       << "  k_norm=" << to_string(a.k_norm) << "\n"
       << "  rope: " << format_rope_of(a) << "\n";
  }
}

size_t attention_layer_count(const Plan& plan) {
  size_t n = 0;
  for (const auto& g : plan.groups) n += g.layers.size();
  return n;
}

// Reports a failure of `kind` (JSON object on stdout when asked, message on stderr) and ends
// the command with the kind's exit code.
[[noreturn]] void fail(const Options& opts, const ErrorKindInfo& kind, const std::string& message) {
  if (opts.json) {
    nlohmann::json out = {{"ok", false},         {"valid", false},
                          {"config", opts.path}, {"error_kind", kind.name},
                          {"error", message},    {"exit_code", kind.exit_code}};
    std::cout << json_text(out) << std::endl;
  }
  print_error(message);
  throw CommandFailure(static_cast<ExitCode>(kind.exit_code), "");
}

// Reads the config and makes the plan, turning every failure into fail().
Plan checked_plan(const Options& opts, ModelConfig& config) {
  try {
    config = load_config(opts.path);
  } catch (const CommandFailure& e) {
    fail(opts, error_kind_info(ErrorKind::BadInput), e.what());
  } catch (const std::exception& e) {
    fail(opts, error_kind_info(error_kind_of(e)), e.what());
  }
  if (opts.explain && !opts.json) {
    std::ostringstream os;
    print_explain(os, config);
    std::cout << printable(os.str());
  }
  try {
    return make_plan(config, opts.grouped ? ValidationMode::Grouped : ValidationMode::Strict);
  } catch (const std::exception& e) {
    fail(opts, error_kind_info(error_kind_of(e)), e.what());
  }
}

// The K/V weight format validate reports: --weights, else what quantization_config declares
// (its refusal fails the command unless --weights is given). Empty when neither says anything,
// so that the output of a config without the key is what it always was.
struct WeightsReport {
  std::string value;
  std::string source;
};
std::optional<WeightsReport> checked_weights(const Options& opts, const ModelConfig& config) {
  std::optional<WeightFormat> requested;
  if (!opts.weights.empty()) requested = weights_option(opts.weights);
  WeightChoice choice;
  try {
    choice = choose_weight_format(config, requested ? &*requested : nullptr, "--weights");
  } catch (const std::exception& e) {
    fail(opts, error_kind_info(error_kind_of(e)), e.what());
  }
  if (choice.warning) std::cerr << "fkv-jit: warning: " << printable(choice.message) << "\n";
  const DeclaredWeights& d = config.weights;
  if (!requested) {
    if (!d.declared()) return std::nullopt;
    return WeightsReport{to_string(choice.format), d.source};
  }
  std::string source = "--weights";
  if (d.declared() && d.format == *requested)
    source += " (as " + d.source + " declares)";
  else if (d.declared())
    source += " (" + d.source + " declares " + to_string(d.format) + ")";
  else if (d.refused())
    source += " (over " + d.source + ", which fkv-jit does not read)";
  return WeightsReport{to_string(choice.format), source};
}

void run_validate(const Options& opts) {
  ModelConfig config;
  const Plan plan = checked_plan(opts, config);
  const std::optional<WeightsReport> weights = checked_weights(opts, config);

  if (opts.json) {
    nlohmann::json out = {{"ok", true},
                          {"valid", true},
                          {"config", opts.path},
                          {"architecture", config.architecture},
                          {"mode", opts.grouped ? "grouped" : "strict"}};
    if (opts.grouped)
      out["groups"] = groups_json(plan);
    else
      out["spec"] = to_json(plan.groups.front().attn);
    std::vector<int> attention;
    for (const auto* l : config.attention_layers()) attention.push_back(l->index);
    out["attention_layers"] = attention;
    out["skipped_layers"] = plan.skipped_layers;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : config.layers) layers.push_back(layer_json(l));
    out["layers"] = layers;
    if (weights) out["weights"] = sourced(weights->value, weights->source);
    std::cout << json_text(out) << std::endl;
    return;
  }

  std::ostringstream os;
  std::vector<int> attention;
  for (const auto* l : config.attention_layers()) attention.push_back(l->index);
  if (opts.grouped) {
    os << config.path << ": valid for the fused KV path in grouped mode (" << plan.groups.size()
       << " group" << (plan.groups.size() == 1 ? "" : "s") << ")\n";
    print_groups(os, plan);
  } else {
    const AttentionSpec& a = plan.groups.front().attn;
    os << config.path << ": valid for the fused KV path (one kernel specialization)\n"
       << "  architecture      " << (config.architecture.empty() ? "-" : config.architecture)
       << "\n"
       << "  num_kv_heads      " << a.num_kv_heads << "\n"
       << "  head_dim          " << a.head_dim << "\n"
       << "  rotary_dim        " << a.rotary_dim << "\n"
       << "  neox              " << format_bool(a.is_neox_style) << "\n"
       << "  k_norm            " << to_string(a.k_norm) << "\n"
       << "  rope              " << format_rope_of(a) << "\n";
  }
  if (weights) os << "  weights           " << weights->value << "  [" << weights->source << "]\n";
  os << "  attention layers  " << attention.size() << " (" << format_layers(attention) << ")\n"
     << "  skipped layers    " << format_layers(plan.skipped_layers) << "\n";
  std::cout << printable(os.str());
}

// plan --tp N: each rank's plan (shard_plan); every rank has the same kernels (H / N heads, or
// one replicated head), only the heads it holds differ.
std::vector<Plan> rank_plans(const Plan& plan, int tp) {
  std::vector<Plan> out;
  if (tp != 1)
    for (int r = 0; r < std::max(tp, 1); ++r)
      out.push_back(shard_plan(plan, TensorParallel{tp, r}));
  return out;
}

void run_plan(const Options& opts) {
  ModelConfig config;
  const Plan full = checked_plan(opts, config);
  const std::optional<WeightsReport> weights = checked_weights(opts, config);
  const std::vector<Plan> ranks = rank_plans(full, opts.tp);
  const Plan& plan = ranks.empty() ? full : ranks.front();
  if (opts.json) {
    nlohmann::json out = {{"ok", true},
                          {"valid", true},
                          {"config", opts.path},
                          {"mode", opts.grouped ? "grouped" : "strict"},
                          {"groups", groups_json(plan)},
                          {"skipped_layers", plan.skipped_layers}};
    if (!ranks.empty()) {
      nlohmann::json rj = nlohmann::json::array();
      for (const Plan& r : ranks) {
        nlohmann::json heads = nlohmann::json::array();
        for (const LayerGroup& g : r.groups)
          heads.push_back({{"first_head", g.heads.first_head},
                           {"num_heads", g.heads.num_heads},
                           {"total_heads", g.heads.total_heads},
                           {"replicated", g.heads.replicated}});
        rj.push_back({{"rank", r.tp_rank}, {"groups", heads}});
      }
      out["tp_size"] = opts.tp;
      out["ranks"] = rj;
    }
    if (weights) out["weights"] = sourced(weights->value, weights->source);
    std::cout << json_text(out) << std::endl;
    return;
  }
  std::ostringstream os;
  os << config.path << ": " << plan.groups.size() << " group"
     << (plan.groups.size() == 1 ? "" : "s") << " (" << (opts.grouped ? "grouped" : "strict")
     << " mode), " << attention_layer_count(plan) << " attention layers, "
     << plan.skipped_layers.size() << " skipped\n";
  print_groups(os, plan);
  os << "skipped layers: " << format_layers(plan.skipped_layers) << "\n";
  if (weights) os << "weights: " << weights->value << "  [" << weights->source << "]\n";
  for (const Plan& r : ranks) {
    os << "tp rank " << r.tp_rank << "/" << r.tp_size << ":";
    for (size_t g = 0; g < r.groups.size(); ++g) {
      const KVHeadShard& h = r.groups[g].heads;
      os << (g ? ";" : "") << " group " << g << " KV heads [" << h.first_head << ", "
         << h.first_head + h.num_heads << ") of " << h.total_heads
         << (h.replicated ? " (replicated)" : "");
    }
    os << "\n";
  }
  std::cout << printable(os.str());
}
}  // namespace

void add_validate_commands(CLI::App& app) {
  // The path is not checked by CLI11 (ExistingFile): a missing file is bad input (exit 2),
  // not a usage error (exit 3).
  auto validate_opts = std::make_shared<Options>();
  CLI::App* validate = app.add_subcommand(
      "validate", "Check that a model config's attention layers can share one fused KV kernel");
  validate->add_option("CONFIG", validate_opts->path, "HuggingFace config.json or explicit schema")
      ->required();
  validate->add_flag("--json", validate_opts->json, "Print a JSON object instead of text");
  validate->add_flag("--explain", validate_opts->explain,
                     "Print each layer's resolved values and where they came from");
  validate->add_flag(
      "--grouped", validate_opts->grouped,
      "Accept non-uniform layers that grouped mode can serve (one launch per group)");
  validate->add_option("--weights", validate_opts->weights,
                       "How the K/V weights are stored (dense, fp8_tensor, fp8_channel, "
                       "fp8_block, int8_channel), over what quantization_config declares");
  validate->callback([validate_opts] { run_validate(*validate_opts); });

  auto plan_opts = std::make_shared<Options>();
  plan_opts->grouped = true;
  CLI::App* plan = app.add_subcommand(
      "plan", "Print the layer groups (one kernel specialization and cos/sin table each)");
  plan->add_option("CONFIG", plan_opts->path, "HuggingFace config.json or explicit schema")
      ->required();
  plan->add_flag("--json", plan_opts->json, "Print a JSON object instead of text");
  plan->add_option("--tp", plan_opts->tp,
                   "Tensor-parallel degree: groups as one rank sees them, and each rank's KV heads")
      ->check(integer_at_least(1));  // --tp 0 is a usage error (exit 3), as for precompile
  plan->add_flag_callback(
      "--strict", [plan_opts] { plan_opts->grouped = false; },
      "Require one group, failing like `validate`");
  plan->add_option("--weights", plan_opts->weights,
                   "How the K/V weights are stored (dense, fp8_tensor, fp8_channel, "
                   "fp8_block, int8_channel), over what quantization_config declares");
  plan->callback([plan_opts] { run_plan(*plan_opts); });
}

}  // namespace fkv::cli
