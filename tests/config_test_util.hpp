// Helpers shared by the config module's test files (test_config*.cpp, test_registry*.cpp):
// loading tests/data configs, parsing inline JSON, and checking the facts of every layer.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"

using Catch::Matchers::Contains;
using fkv::KNormKind;
using fkv::LayerKind;
using fkv::ModelConfig;

namespace config_test {

inline ModelConfig load(const std::string& name) {
  return ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/" + name);
}
inline ModelConfig parse(const std::string& text) {
  return ModelConfig::from_json(std::string_view(text), "test.json");
}

inline std::vector<int> indices_where(const ModelConfig& c, LayerKind k) {
  std::vector<int> out;
  for (const auto& l : c.layers)
    if (l.kind.value == k) out.push_back(l.index);
  return out;
}

// The facts that decide a kernel specialization, checked on every attention layer.
struct Uniform {
  int kv, head_dim;
  bool neox;
  KNormKind k_norm;
};

inline void check_uniform(const ModelConfig& c, const Uniform& u) {
  for (const auto* l : c.attention_layers()) {
    INFO("layer " << l->index);
    CHECK(l->num_kv_heads.value == u.kv);
    CHECK(l->head_dim.value == u.head_dim);
    CHECK(l->is_neox_style.value == u.neox);
    CHECK(l->k_norm.value == u.k_norm);
    CHECK_FALSE(l->num_kv_heads.source.empty());
    CHECK_FALSE(l->head_dim.source.empty());
    CHECK_FALSE(l->rotary_dim.source.empty());
    CHECK_FALSE(l->is_neox_style.source.empty());
    CHECK_FALSE(l->k_norm.source.empty());
    CHECK_FALSE(l->rope.source.empty());
    CHECK_FALSE(l->eps.source.empty());
  }
}

inline std::string tmp_path(const std::string& leaf) {
  return (std::filesystem::temp_directory_path() /
          ("fkv_test_config_" + std::to_string(::getpid()) + "_" + leaf))
      .string();
}

}  // namespace config_test

using namespace config_test;
