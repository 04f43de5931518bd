// codegen: template + spec -> specialized source and NVRTC name expression.
//
// The specialization is done by C++ template arguments, not by pasting strings into the
// kernel: the generated translation unit is the template file itself plus one explicit
// instantiation, and the name expression lets NVRTC tell us the lowered (mangled) name.
#include "fkv/codegen.hpp"

#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/version.hpp"

namespace fkv::detail {
struct EmbeddedFile {
  const char* name;
  const char* data;
  std::size_t size;
};
extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;
}  // namespace fkv::detail

namespace fkv {
namespace {

constexpr const char* kTemplate = "fused_kv.cu";
// Headers the template includes, by include name.
constexpr const char* kHeaders[] = {"fkv_types.cuh", "fkv/kernel_params.h"};

std::string hex128(const XXH128_hash_t& h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

bool is_embedded_header(const std::string& include_name) {
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i) {
    const std::string embedded = detail::kEmbeddedFiles[i].name;
    if (embedded == include_name && std::filesystem::path(embedded).extension() != ".cu")
      return true;
  }
  return false;
}

}  // namespace

std::string device_type(DType d) {
  switch (d) {
    case DType::BF16:
      return "fkv_kernels::bf16";
    case DType::FP16:
      return "fkv_kernels::fp16";
    case DType::FP32:
      return "float";
    case DType::FP8_E4M3:
      return "fkv_kernels::fp8_e4m3";
    case DType::FP8_E5M2:
      return "fkv_kernels::fp8_e5m2";
  }
  return "?";
}

std::string device_type(IndexType t) { return t == IndexType::I32 ? "int" : "long long"; }

void check_template_includes(const std::string& file, const std::string& text) {
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::size_t hash = line.find_first_not_of(" \t");
    if (hash == std::string::npos || line[hash] != '#') continue;
    const std::size_t word = line.find_first_not_of(" \t", hash + 1);
    if (word == std::string::npos || line.compare(word, 7, "include") != 0) continue;
    const std::size_t open = line.find_first_of("\"<", word + 7);
    const std::size_t close =
        open == std::string::npos ? open : line.find_first_of("\">", open + 1);
    const std::string target =
        close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
    if (!is_embedded_header(target))
      throw CompileError(
          file + ":" + std::to_string(number) + ": #include '" + (target.empty() ? line : target) +
          "' is not one of the kernel headers fkv-jit hands NVRTC in memory, so the cache key "
          "cannot see it. FKV_TEMPLATE_DIR templates may include only the embedded headers "
          "(fkv_types.cuh, fkv/kernel_params.h, ...); paste anything else into the template");
  }
}

std::string template_text(const std::string& name) {
  return template_text(name, JitOptions::global());
}

std::string template_text(const std::string& name, const JitOptions& options) {
  if (!options.template_dir.empty()) {
    // Kernel development: read the file from disk ("fkv/kernel_params.h" -> kernel_params.h).
    const auto path = options.template_dir / std::filesystem::path(name).filename();
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      check_template_includes(path.string(), s.str());
      return s.str();
    }
  }
  for (std::size_t i = 0; i < detail::kEmbeddedFileCount; ++i)
    if (name == detail::kEmbeddedFiles[i].name)
      return std::string(detail::kEmbeddedFiles[i].data, detail::kEmbeddedFiles[i].size);
  throw CompileError("no kernel template named '" + name + "' is embedded in this build");
}

std::string read_template(KernelSource& out, const std::string& template_name,
                          std::span<const char* const> headers, const JitOptions& options) {
  const std::string body = template_text(template_name, options);
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto add = [&](const std::string& name, const std::string& text) {
    const std::uint64_t n = name.size(), m = text.size();
    XXH3_128bits_update(st, &n, sizeof n);
    XXH3_128bits_update(st, name.data(), n);
    XXH3_128bits_update(st, &m, sizeof m);
    XXH3_128bits_update(st, text.data(), m);
  };
  add(template_name, body);
  out.template_name = template_name;
  out.headers.clear();
  for (const char* h : headers) {
    out.headers.emplace_back(h, template_text(h, options));
    add(h, out.headers.back().second);
  }
  out.template_hash = hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return body;
}

KernelSource generate(const KernelSpec& spec) { return generate(spec, JitOptions::global()); }

KernelSource generate(const KernelSpec& spec, const JitOptions& options) {
  spec.check();
  const Tiling t = spec.tiling(options);  // FKV_BLOCK_WARPS from these options, like the templates
  KernelSource out;
  out.short_name = spec.short_name();
  out.specialization = spec.canonical();

  std::ostringstream expr;
  expr << "fkv_kernels::fused_kv_materialize<" << spec.num_kv_heads << ", " << spec.head_dim << ", "
       << spec.rotary_dim << ", " << (spec.neox ? "true" : "false") << ", "
       << (spec.k_norm ? "true" : "false") << ", " << device_type(spec.act) << ", "
       << device_type(spec.cache) << ", " << device_type(spec.cos_sin) << ", "
       << device_type(spec.positions) << ", " << device_type(spec.slots) << ", "
       << (spec.mode == OutputMode::Pool ? "true" : "false") << ", "
       << (spec.paged ? "true" : "false") << ", " << (spec.kv_bias ? "true" : "false") << ", "
       << t.vec << ", " << t.loads << ", " << t.warps_per_block << ">";
  out.name_expression = expr.str();

  const std::string body = read_template(out, kTemplate, kHeaders, options);

  std::ostringstream src;
  src << "// fkv spec: " << spec.canonical() << "\n"
      << "// Generated by fkv-jit " << kVersion << " from templates/" << kTemplate
      << " (tiling: " << t.loads << " x " << t.vec << " elements per lane, " << t.lanes_per_head
      << " lanes per head, " << t.heads_per_warp << " heads per warp, " << t.block_threads
      << " threads per block)\n"
      << "#line 1 \"" << kTemplate << "\"\n"
      << body << "\n"
      << "template __global__ void " << out.name_expression << "(const FkvKernelParams);\n";
  out.source = src.str();
  return out;
}

}  // namespace fkv
