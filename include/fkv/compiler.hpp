// compiler: NVRTC -> CUBIN (or PTX on request) for one target arch.
#pragma once

#include <string>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"

namespace fkv {

struct Arch {
  int major = 0;
  int minor = 0;
  bool arch_specific = false;  // the "a" suffix (sm_90a): Hopper-only instructions
  std::string name() const;    // "sm_90", "sm_90a"
  int number() const { return major * 10 + minor; }
  // Parses "sm_90", "sm_90a", "90", "9.0". Throws CompileError listing the supported archs when
  // NVRTC does not support it.
  static Arch parse(const std::string& text);
  bool operator==(const Arch& o) const { return name() == o.name(); }
};

struct CompileOptions {
  Arch arch;
  bool ptx = false;  // PTX instead of CUBIN
};

struct CompiledKernel {
  std::string image;         // CUBIN (or PTX text) bytes
  std::string lowered_name;  // mangled name to pass to cuModuleGetFunction
  bool is_ptx = false;
  std::string log;           // NVRTC log (warnings), may be empty
};

// Compiles with NVRTC; throws CompileError carrying the log and the specialized source.
// Thread-safe (NVRTC programs are independent).
CompiledKernel compile(const KernelSource& src, const CompileOptions& options, const JitOptions& jit);
CompiledKernel compile(const KernelSource& src, const CompileOptions& options);  // JitOptions::global()

// The exact NVRTC options used for these CompileOptions (part of cache keys): fkv-jit's own,
// then jit.nvrtc_options (FKV_NVRTC_OPTIONS), which must pass check_nvrtc_options.
std::vector<std::string> nvrtc_options(const CompileOptions& options, const JitOptions& jit);
std::vector<std::string> nvrtc_options(const CompileOptions& options);  // with JitOptions::global()

std::string nvrtc_version();         // "13.0"
std::vector<Arch> supported_archs();  // real archs this NVRTC can build CUBIN for, >= sm_80

}  // namespace fkv
