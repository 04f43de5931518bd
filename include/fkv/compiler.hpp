// compiler: NVRTC -> CUBIN (or PTX on request) for one target arch.
#pragma once

#include <string>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"

namespace fkv {

// An arch name as a user writes it, read by the one syntax fkv-jit accepts everywhere
// (Arch::parse, resolve_arch in arch.hpp, the CLI's and the C API's --arch / arch):
//   sm_<major><minor>[a|f]   sm_80, sm_90, sm_90a, sm_100, sm_100f, sm_120
//   <major><minor>[a|f]      80, 90, 90a, 100
//   <major>.<minor>          8.0, 9.0, 12.0
// where major has 1 or 2 digits and no leading zero and minor is one digit; "a" marks an
// arch-specific target, "f" an arch-family one.
struct ArchName {
  int major = 0;
  int minor = 0;
  char suffix = 0;  // 0, 'a' or 'f'
};
// Throws ArgumentError for any other text, saying what is accepted: "compute_90" (a virtual
// arch: name the real one, sm_90), "sm_1" (one digit), "sm_90x", "sm_090", "sm_9.0", "hopper".
ArchName parse_arch_name(const std::string& text);

struct Arch {
  int major = 0;
  int minor = 0;
  bool arch_specific = false;  // the "a" suffix (sm_90a): Hopper-only instructions
  std::string name() const;    // "sm_90", "sm_90a"
  int number() const { return major * 10 + minor; }
  // The arch to compile for, written as parse_arch_name reads it ("sm_90", "sm_90a", "90",
  // "9.0"). Throws ArgumentError for text that is not an arch name, or that names an
  // arch-family target ("sm_100f": a family is not one arch to build); CompileError listing the
  // supported archs when this NVRTC cannot build it (an "a" target needs sm_90 or newer).
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
  std::string log;  // NVRTC log (warnings), may be empty
};

// Compiles with NVRTC; throws CompileError carrying the log and the specialized source. Also a
// CompileError: a log reporting an integer overflow in a constant expression (NVRTC's warning
// #61, "integer operation result is out of range"), and an image without the kernel's code
// (image_has_kernel; e.g. -fdevice-syntax-only makes one), which is never returned or cached.
// Thread-safe (NVRTC programs are independent).
CompiledKernel compile(const KernelSource& src, const CompileOptions& options,
                       const JitOptions& jit);
CompiledKernel compile(const KernelSource& src,
                       const CompileOptions& options);  // JitOptions::global()

// Whether `image` (a CUBIN, or PTX text when is_ptx) holds the code of the kernel `lowered_name`:
// a ".text.<name>" ELF section, or a ".entry <name>" PTX directive.
bool image_has_kernel(const std::string& image, const std::string& lowered_name, bool is_ptx);

// The exact NVRTC options used for these CompileOptions (part of cache keys): fkv-jit's own,
// then jit.nvrtc_options (FKV_NVRTC_OPTIONS), which must pass check_nvrtc_options.
std::vector<std::string> nvrtc_options(const CompileOptions& options, const JitOptions& jit);
std::vector<std::string> nvrtc_options(const CompileOptions& options);  // with JitOptions::global()

std::string nvrtc_version();          // "13.0"
std::vector<Arch> supported_archs();  // real archs this NVRTC can build CUBIN for, >= sm_80

}  // namespace fkv
