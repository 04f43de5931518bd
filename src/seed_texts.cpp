// seed_texts: the seed helper's error texts (include/fkv/seed_texts.hpp).
#include "fkv/seed_texts.hpp"

#include <stdexcept>
#include <utility>
#include <vector>

namespace fkv::seed {

const std::map<std::string, std::string>& templates() {
  // Immortal: engines call the library from atexit handlers, after static destructors ran.
  static const auto& t = *new std::map<std::string, std::string>{
      {"mismatch",
       "{what} mismatch across layers for fused KV path: expected {expected}, got {got} at layer "
       "{layer}."},
      {"rope_config", "(rotary_dim={rotary_dim}, neox={neox})"},
      {"rotary_head_pair",
       "Invalid fused KV rotary/head dim pair: rotary_dim={rotary_dim}, head_dim={head_dim}."},
      {"bias_presence", "qkv bias presence mismatch across layers for fused KV path."},
      {"k_norm_presence", "k_norm presence mismatch across layers for fused KV path."},
      {"refresh_layout", "fused KV refresh cannot change weight layout"},
      {"refresh_layer_count", "fused KV refresh cannot change layer count"},
      {"no_layers", "fused KV materialization needs at least one layer"},
  };
  return t;
}

namespace {

// templates()[name] with each {field} replaced by its value (every field given, none left).
std::string fill(const char* name, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string s = templates().at(name);
  for (const auto& [field, value] : fields) {
    const std::string mark = "{" + field + "}";
    const auto at = s.find(mark);
    if (at == std::string::npos)
      throw std::logic_error(std::string("seed text ") + name + ": " + mark);
    s.replace(at, mark.size(), value);
  }
  return s;
}

}  // namespace

std::string mismatch(const std::string& what, const std::string& expected, const std::string& got,
                     int layer) {
  return fill(
      "mismatch",
      {{"what", what}, {"expected", expected}, {"got", got}, {"layer", std::to_string(layer)}});
}

std::string rope_config(int rotary_dim, bool neox) {
  return fill("rope_config",
              {{"rotary_dim", std::to_string(rotary_dim)}, {"neox", neox ? "True" : "False"}});
}

std::string rotary_head_pair(int rotary_dim, int head_dim) {
  return fill("rotary_head_pair",
              {{"rotary_dim", std::to_string(rotary_dim)}, {"head_dim", std::to_string(head_dim)}});
}

}  // namespace fkv::seed
