// codegen: kernel template + KernelSpec -> specialized source and kernel name expression.
//
// Templates are real .cu files under templates/, embedded into the library at build time.
// FKV_TEMPLATE_DIR=<dir> reads them from <dir> instead (kernel development).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fkv/spec.hpp"

namespace fkv {

struct KernelSource {
  std::string template_name;     // e.g. "fused_kv.cu"
  std::string short_name;        // KernelSpec::short_name(), file-system safe
  std::string specialization;    // KernelSpec::canonical(): part of the cache key
  std::string template_hash;     // XXH3-128 hex of the template and every header it includes
  std::string name_expression;   // "fkv_kernels::fused_kv_materialize<...>", for NVRTC
  std::string source;            // the specialized translation unit (explicit instantiation)
  // In-memory headers handed to NVRTC: (include name, content).
  std::vector<std::pair<std::string, std::string>> headers;
};

KernelSource generate(const KernelSpec& spec);

// The text of an embedded template or header ("fused_kv.cu", "fkv_types.cuh",
// "fkv/kernel_params.h"), or of FKV_TEMPLATE_DIR's copy when that is set.
std::string template_text(const std::string& name);

}  // namespace fkv
