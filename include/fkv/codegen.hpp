// codegen: kernel template + KernelSpec -> specialized source and kernel name expression.
//
// Templates are real .cu files under templates/, embedded into the library at build time.
// FKV_TEMPLATE_DIR=<dir> (JitOptions::template_dir) reads them from <dir> instead (kernel
// development).
#pragma once

#include <cstddef>
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

// The most bytes a template or header read from FKV_TEMPLATE_DIR may have (4 MiB; the embedded
// ones are under 64 KB).
inline constexpr std::size_t kMaxTemplateBytes = std::size_t{4} << 20;

// The text of an embedded template or header ("fused_kv.cu", "fkv_types.cuh",
// "fkv/kernel_params.h"), or of the copy in options.template_dir (FKV_TEMPLATE_DIR) when that
// has one (no file of that name: the embedded copy). The copy must be a regular file of at most
// kMaxTemplateBytes: anything else (a FIFO, /dev/zero, a directory, an unreadable file) is a
// ConfigError naming it, found without blocking or reading it. A copy with an #include of
// anything but an embedded header is a CompileError (check_template_includes), since NVRTC
// would read that from disk, outside the cache key.
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

// Throws CompileError when `text` (the file `file`) could make NVRTC read a file from disk: an
// #include of anything but an embedded header, in any spelling the preprocessor accepts (line
// splices, comments between '#' and the name, the %: digraph); #include_next, #import, #embed,
// __has_include, a computed #include MACRO. Text whose reading compilers could disagree on (a
// backslash and spaces ending a line, a lone carriage return, raw string literals) is refused
// too.
void check_template_includes(const std::string& file, const std::string& text);

}  // namespace fkv
