// seed_texts: the error texts of sglang's FusedKVMaterializeHelper, which engines match and
// fkv-jit keeps exactly, defined once: the C++ checks (validate, spec) build them here, and the
// Python sglang drop-in formats the same templates (seed_text_templates(), through the binding).
#pragma once

#include <map>
#include <string>

namespace fkv::seed {

// "{what} mismatch across layers for fused KV path: expected {expected}, got {got} at layer
// {layer}."
std::string mismatch(const std::string& what, const std::string& expected, const std::string& got,
                     int layer);
// "(rotary_dim={rotary_dim}, neox={neox})", neox as Python prints a bool (True / False).
std::string rope_config(int rotary_dim, bool neox);
// "Invalid fused KV rotary/head dim pair: rotary_dim={rotary_dim}, head_dim={head_dim}."
std::string rotary_head_pair(int rotary_dim, int head_dim);

// Every text by name, with {field} placeholders for its values (Python's str.format syntax):
// mismatch, rope_config, rotary_head_pair, and the fixed texts bias_presence, k_norm_presence,
// refresh_layout, refresh_layer_count, no_layers.
const std::map<std::string, std::string>& templates();

}  // namespace fkv::seed
