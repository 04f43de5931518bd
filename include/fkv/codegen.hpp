// codegen: kernel template + KernelSpec -> specialized source and kernel name expression.
//
// Templates are real .cu files under templates/, embedded into the library at build time.
// FKV_TEMPLATE_DIR=<dir> (JitOptions::template_dir) reads them from <dir> instead (kernel
// development).
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fkv/options.hpp"
#include "fkv/spec.hpp"

namespace fkv {

struct KernelSource {
  std::string template_name;    // e.g. "fused_kv.cu"
  std::string short_name;       // KernelSpec::short_name(), file-system safe
  std::string specialization;   // KernelSpec::canonical(): part of the cache key
  std::string template_hash;    // XXH3-128 hex of the template and every header it includes
  std::string name_expression;  // "fkv_kernels::fused_kv_materialize<...>", for NVRTC
  std::string source;           // the specialized translation unit (explicit instantiation)
  // In-memory headers handed to NVRTC: (include name, content).
  std::vector<std::pair<std::string, std::string>> headers;
};

// Templates come from options.template_dir when set (FKV_TEMPLATE_DIR), else the embedded ones;
// the tiling (warps per block) is spec.tiling(options).
KernelSource generate(const KernelSpec& spec, const JitOptions& options);
KernelSource generate(const KernelSpec& spec);  // with JitOptions::global()

// The text of an embedded template or header ("fused_kv.cu", "fkv_types.cuh",
// "fkv/kernel_params.h"), or of the copy in options.template_dir (FKV_TEMPLATE_DIR) when that
// is set; a copy whose #includes name anything but an embedded header is refused
// (check_template_includes), since NVRTC would read that from disk, outside the cache key.
std::string template_text(const std::string& name, const JitOptions& options);
std::string template_text(const std::string& name);  // with JitOptions::global()

// The C++ type the kernel templates use for a dtype or an index type, as written in a name
// expression's template arguments: "fkv_kernels::bf16", "float", "fkv_kernels::fp8_e4m3";
// "int", "long long". Used by this module and by decode's kernel, so the names agree.
std::string device_type(DType dtype);
std::string device_type(IndexType index);

// Reads the template `template_name` and the `headers` it includes (include names) as
// template_text does, and fills out.template_name, out.headers and out.template_hash (XXH3-128
// over each file's name and text, length-prefixed, template first). Returns the template's text.
// The one reader of kernel templates for every kernel (this module's and decode's).
std::string read_template(KernelSource& out, const std::string& template_name,
                          std::span<const char* const> headers, const JitOptions& options);

// Throws CompileError when `text` (the file `file`) has an #include of anything but an
// embedded header.
void check_template_includes(const std::string& file, const std::string& text);

}  // namespace fkv
