// config: a model's config JSON -> per-layer attention facts (SPEC §2).
//
// Reading order for every model value: the nested `text_config` (when present), then the top
// level, then the class defaults of the model's config class (only where a real config omits a
// field and transformers fills it in, e.g. Gemma3TextConfig). Each architecture rule cites the
// reference implementation it was checked against; docs/config-rules.md has the full table.
#include "fkv/config.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "fkv/errors.hpp"
#include "internal.hpp"

namespace fkv {

using namespace config_detail;

namespace {

// Line and column (1-based) of byte offset `byte` (1-based, as nlohmann reports it).
std::pair<size_t, size_t> line_col(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string RopeFrequencies::canonical() const {
  // Numbers are normalized to doubles so that 1e6, 1000000 and 1000000.0 compare equal; object
  // keys are sorted (nlohmann::json objects are ordered maps).
  struct Norm {
    static json run(const json& v) {
      if (v.is_number()) return json(v.get<double>());
      if (v.is_array()) {
        json a = json::array();
        for (const auto& x : v) a.push_back(run(x));
        return a;
      }
      if (v.is_object()) {
        json o = json::object();
        for (auto it = v.begin(); it != v.end(); ++it) o[it.key()] = run(*it);
        return o;
      }
      return v;
    }
  };
  json c = json::object();
  c["theta"] = theta;
  c["type"] = scaling_type;
  c["scaling"] = Norm::run(scaling.is_null() ? json::object() : scaling);
  return c.dump();
}

std::string to_string(LayerKind k) {
  switch (k) {
    case LayerKind::FullAttention: return "full_attention";
    case LayerKind::SlidingAttention: return "sliding_attention";
    case LayerKind::NoAttention: return "none";
  }
  return "?";
}

std::string to_string(KNormKind k) {
  switch (k) {
    case KNormKind::None: return "none";
    case KNormKind::Rms: return "rms";
    case KNormKind::RmsOnePlus: return "rms_one_plus";
  }
  return "?";
}

std::vector<const LayerAttention*> ModelConfig::attention_layers() const {
  std::vector<const LayerAttention*> out;
  for (const auto& l : layers)
    if (l.is_attention()) out.push_back(&l);
  return out;
}

ModelConfig ModelConfig::from_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(p + ": cannot read the config: it is a directory (give the path of config.json)");
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ConfigError(p + ": cannot read the config: " + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw ConfigError(p + ": cannot read the config: " + std::strerror(err));
    }
    if (r == 0) break;
    text.append(buf, (size_t)r);
  }
  ::close(fd);
  return from_json(std::string_view(text), p);
}

ModelConfig ModelConfig::from_json(std::string_view text, std::string name) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte);
    std::string what = e.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line L, column C: ".
    auto colon = what.find(": ");
    std::string detail = colon != std::string::npos ? what.substr(colon + 2) : what;
    throw ConfigError(name + ": malformed JSON at byte " + std::to_string(e.byte) + " (line " + std::to_string(line) +
                      ", column " + std::to_string(col) + "): " + detail);
  } catch (const json::exception& e) {
    // out_of_range.406: a number that does not fit a double ("1e999"); found by fuzz/fuzz_config.
    std::string what = e.what();
    auto bracket = what.find("] ");
    throw ConfigError(name + ": malformed JSON: " + (bracket != std::string::npos ? what.substr(bracket + 2) : what));
  }
  return from_json(doc, std::move(name));
}

ModelConfig ModelConfig::from_json(const nlohmann::json& root, std::string name) {
  Doc doc(root, name);
  ModelConfig cfg;
  cfg.path = name;
  cfg.architecture = arch_of(root);

  Family fam;
  if (doc.text() && present(*doc.text(), "model_type")) fam.model_type = doc.string(Hit{&(*doc.text())["model_type"], "text_config.model_type"});
  else if (present(root, "model_type")) fam.model_type = doc.string(Hit{&root["model_type"], "model_type"});
  fam.model_type = lower(fam.model_type);
  fam.arch = doc.text() ? arch_of(*doc.text()) : "";
  if (fam.arch.empty()) fam.arch = cfg.architecture;
  cfg.model_type = fam.model_type;
  doc.set_defaults(class_defaults_for(fam.model_type));

  Hit explicit_list = explicit_layers(doc);

  // Per-model values.
  Hit layers = doc.find({"num_hidden_layers", "n_layer", "num_layers", "num_transformer_layers"});
  if (layers) cfg.num_hidden_layers = {doc.positive_int(layers), layers.path};
  if (Hit h = doc.find({"hidden_size", "n_embd", "d_model", "model_dim"})) cfg.hidden_size = {doc.positive_int(h), h.path};
  else cfg.hidden_size.source = "absent";
  if (Hit h = doc.find({"num_attention_heads", "n_head", "num_heads"})) cfg.num_attention_heads = {doc.positive_int(h), h.path};
  else cfg.num_attention_heads.source = "absent";
  if (Hit h = doc.find({"max_position_embeddings", "n_positions"})) cfg.max_position_embeddings = {doc.positive_int(h), h.path};
  else cfg.max_position_embeddings.source = "absent";
  if (Hit h = doc.find({"torch_dtype", "dtype"})) cfg.dtype = {doc.string(h), h.path};
  else cfg.dtype.source = "absent";
  if (Hit h = doc.find({"rms_norm_eps", "layer_norm_epsilon", "norm_eps", "layer_norm_eps", "layernorm_epsilon"}))
    cfg.eps = {doc.positive_number(h), h.path};
  else cfg.eps = {1e-6, "default: 1e-6 (no eps key)"};

  if (!layers) {
    if (!explicit_list)
      doc.fail("num_hidden_layers", "missing: no num_hidden_layers, n_layer or num_layers key (and no explicit "
                                    "\"layers\" schema); is this a model config.json?");
    apply_explicit(doc, explicit_list, cfg.layers, false);
    cfg.num_hidden_layers = {(int)cfg.layers.size(), explicit_list.path + " (explicit schema, one entry per layer)"};
    return cfg;
  }
  cfg = infer(doc, std::move(cfg), fam);
  if (explicit_list) apply_explicit(doc, explicit_list, cfg.layers, true);
  return cfg;
}

}  // namespace fkv
