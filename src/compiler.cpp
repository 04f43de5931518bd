// compiler: NVRTC -> CUBIN/PTX for one arch.
#include "fkv/compiler.hpp"

#include <cuda.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "nvrtc_loader.hpp"

namespace fkv {
namespace {

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    throw CompileError(std::string(call) + " failed: " + nvrtc().nvrtcGetErrorString(r));
}

std::string arch_list() {
  std::ostringstream o;
  bool first = true;
  for (const Arch& a : supported_archs()) {
    o << (first ? "" : ", ") << a.name();
    first = false;
  }
  return o.str();
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// NVRTC diagnostics that mean an integer constant expression overflowed (EDG's #61).
constexpr const char* kOverflowDiagnostics[] = {"#61-D",
                                                "integer operation result is out of range"};

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtc().nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

}  // namespace

std::string Arch::name() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

namespace {
bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

[[noreturn]] void not_an_arch(const std::string& text, const std::string& why) {
  throw ArgumentError("'" + text + "' is not a GPU arch" + (why.empty() ? "" : " (" + why + ")") +
                      ": name the device as sm_<major><minor>, e.g. sm_80, sm_90, sm_100, sm_120 "
                      "(or 9.0; an 'a' or 'f' suffix for arch-specific or family targets: sm_90a)");
}
}  // namespace

ArchName parse_arch_name(const std::string& text) {
  if (text.rfind("compute_", 0) == 0)
    not_an_arch(text, "a virtual arch, the PTX target; name the real arch, sm_" + text.substr(8) +
                          ", and fkv-jit chooses CUBIN or PTX for the device");
  const bool prefixed = text.rfind("sm_", 0) == 0;
  std::string s = prefixed ? text.substr(3) : text;
  ArchName a;
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    a.suffix = s.back();
    s.pop_back();
  }
  if (const auto dot = s.find('.'); dot != std::string::npos) {
    // "9.0": a compute capability, never with "sm_" or a suffix.
    const std::string maj = s.substr(0, dot), min = s.substr(dot + 1);
    if (a.suffix || prefixed || !all_digits(maj) || maj.size() > 2 || maj[0] == '0' ||
        !all_digits(min) || min.size() != 1)
      not_an_arch(text, "");
    a.major = std::stoi(maj);
    a.minor = min[0] - '0';
    return a;
  }
  // Two or three digits, the last one the minor version: sm_80, sm_90, sm_100, sm_120.
  if (!all_digits(s) || s.size() < 2 || s.size() > 3 || s[0] == '0')
    not_an_arch(text, s.size() == 1 && all_digits(s)
                          ? "one digit: major and minor version are both needed"
                          : "");
  a.major = std::stoi(s.substr(0, s.size() - 1));
  a.minor = s.back() - '0';
  return a;
}

Arch Arch::parse(const std::string& text) {
  const ArchName n = parse_arch_name(text);
  if (n.suffix == 'f')
    throw ArgumentError("'" + text +
                        "' is an arch-family target, not one arch to build: name the arch, sm_" +
                        std::to_string(n.major * 10 + n.minor) + " (or sm_" +
                        std::to_string(n.major * 10 + n.minor) + "a for an arch-specific one)");
  Arch a{n.major, n.minor, n.suffix == 'a'};
  const auto archs = supported_archs();
  const bool known = std::any_of(archs.begin(), archs.end(),
                                 [&](const Arch& b) { return b.number() == a.number(); });
  if (!known || (a.arch_specific && a.major < 9))
    throw CompileError("arch " + a.name() + " is not supported by this NVRTC (" + nvrtc_version() +
                       "); supported: " + arch_list() +
                       (a.arch_specific ? " (an 'a' target needs sm_90 or newer)" : ""));
  return a;
}

std::vector<std::string> nvrtc_options(const CompileOptions& options) {
  return nvrtc_options(options, JitOptions::global());
}

std::vector<std::string> nvrtc_options(const CompileOptions& options, const JitOptions& jit) {
  const std::string arch = options.arch.name();
  std::vector<std::string> out = {
      (options.ptx ? "--gpu-architecture=compute_" : "--gpu-architecture=sm_") +
          arch.substr(arch.find('_') + 1),
      "-std=c++17",
      "-default-device",
      "--fmad=true",
  };
  // FKV_NVRTC_OPTIONS: extra options for kernel tuning (e.g. -lineinfo; --maxrregcount has no
  // effect: the kernels declare __launch_bounds__, which ptxas follows instead). They are part
  // of the cache key, since they come back from this function; options that read or write
  // files or change the target were refused when the environment was read. Checked again here
  // for a JitOptions a caller filled in by hand.
  check_nvrtc_options(jit.nvrtc_options, "NVRTC options");
  out.insert(out.end(), jit.nvrtc_options.begin(), jit.nvrtc_options.end());
  return out;
}

// Without NVRTC (a machine that only reads a cache), the version and archs are those of the
// CUDA Toolkit fkv-jit was built with, so that cache keys name the NVRTC of `fkv-jit
// precompile` run from the same build (docs/integration.md).
std::string nvrtc_version() {
  int major = CUDA_VERSION / 1000, minor = CUDA_VERSION % 1000 / 10;
  if (const Nvrtc* api = nvrtc_if_available())
    check_nvrtc(api->nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<Arch> supported_archs() {
  if (nvrtc_if_available() == nullptr) {
    std::vector<Arch> out;
    for (int v : CUDA_VERSION >= 13000
                     ? std::vector<int>{80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121}
                     : std::vector<int>{80, 86, 87, 89, 90})
      out.push_back(Arch{v / 10, v % 10, false});
    return out;
  }
  int n = 0;
  check_nvrtc(nvrtc().nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> nums(static_cast<std::size_t>(n));
  check_nvrtc(nvrtc().nvrtcGetSupportedArchs(nums.data()), "nvrtcGetSupportedArchs");
  std::vector<Arch> out;
  for (int v : nums)
    if (v >= 80) out.push_back(Arch{v / 10, v % 10, false});
  return out;
}

namespace {
// FKV_DUMP_SOURCE=<dir>: keep each specialized source for kernel developers. The file is
// created with O_EXCL|O_NOFOLLOW, so a symlink planted at its name is never written through;
// an earlier dump of the same kernel (a regular file of ours) is replaced. A dump that cannot
// be written is a warning, never a failed compile.
void dump_source(const KernelSource& src, const CompileOptions& options,
                 const std::filesystem::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path path = dir / (src.short_name + "-" + options.arch.name() + ".cu");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) {
      ::unlink(path.c_str());
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    } else {
      errno = EEXIST;
    }
  }
  if (fd < 0) {
    spdlog::warn(
        "fkv-jit: FKV_DUMP_SOURCE: not writing {}: {} (an existing symlink or another user's file "
        "is "
        "never written through or replaced)",
        path.string(), std::error_code(errno, std::generic_category()).message());
    return;
  }
  std::size_t done = 0;
  while (done < src.source.size()) {
    const ssize_t n = ::write(fd, src.source.data() + done, src.source.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (done != src.source.size())
    spdlog::warn("fkv-jit: FKV_DUMP_SOURCE: {} is incomplete", path.string());
}
}  // namespace

CompiledKernel compile(const KernelSource& src, const CompileOptions& options) {
  return compile(src, options, JitOptions::global());
}

CompiledKernel compile(const KernelSource& src, const CompileOptions& options,
                       const JitOptions& jit) {
  dump_source(src, options, jit.dump_source);
  std::vector<const char*> header_text, header_names;
  for (const auto& [name, text] : src.headers) {
    header_names.push_back(name.c_str());
    header_text.push_back(text.c_str());
  }
  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtc().nvrtcCreateProgram(&raw, src.source.c_str(), src.template_name.c_str(),
                                         static_cast<int>(header_text.size()), header_text.data(),
                                         header_names.data()),
              "nvrtcCreateProgram");
  Program prog(raw);
  check_nvrtc(nvrtc().nvrtcAddNameExpression(raw, src.name_expression.c_str()),
              "nvrtcAddNameExpression");

  const auto opts = nvrtc_options(options, jit);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc =
      nvrtc().nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());

  CompiledKernel out;
  std::size_t log_size = 0;
  nvrtc().nvrtcGetProgramLogSize(raw, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtc().nvrtcGetProgramLog(raw, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (rc != NVRTC_SUCCESS)
    throw CompileError("NVRTC failed to compile " + src.name_expression + " for " +
                           options.arch.name() + ": " + nvrtc().nvrtcGetErrorString(rc) + "\n" +
                           out.log,
                       out.log, src.source);

  // A constant expression that overflows (constexpr int KV = H * D for a huge head count) is only
  // a warning to NVRTC, and the kernel would index with the wrapped value: an error here.
  // KernelSpec::check refuses such specs first; this catches what it does not know about.
  for (const char* diag : kOverflowDiagnostics)
    if (out.log.find(diag) != std::string::npos)
      throw CompileError("NVRTC compiled " + src.name_expression + " for " + options.arch.name() +
                             " with an integer overflow in a constant expression ('" + diag +
                             "'), so the kernel would index with a wrapped value; refused:\n" +
                             out.log,
                         out.log, src.source);

  const char* lowered = nullptr;
  check_nvrtc(nvrtc().nvrtcGetLoweredName(raw, src.name_expression.c_str(), &lowered),
              "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  out.is_ptx = options.ptx;
  std::size_t size = 0;
  if (options.ptx) {
    check_nvrtc(nvrtc().nvrtcGetPTXSize(raw, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check_nvrtc(nvrtc().nvrtcGetPTX(raw, out.image.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(nvrtc().nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check_nvrtc(nvrtc().nvrtcGetCUBIN(raw, out.image.data()), "nvrtcGetCUBIN");
  }
  if (!image_has_kernel(out.image, out.lowered_name, out.is_ptx))
    throw CompileError("NVRTC returned " + std::string(options.ptx ? "PTX" : "a CUBIN") + " of " +
                           std::to_string(out.image.size()) + " bytes for " + options.arch.name() +
                           " without the kernel " + out.lowered_name + " (" + src.name_expression +
                           "); it is neither returned nor cached. NVRTC options: " +
                           join(nvrtc_options(options, jit)),
                       out.log, src.source);
  return out;
}

bool image_has_kernel(const std::string& image, const std::string& lowered_name, bool is_ptx) {
  if (lowered_name.empty()) return false;
  // PTX declares a kernel as ".entry <name>(" (or a newline before the parameters); a CUBIN holds
  // its code in the ELF section ".text.<name>", which an image without the kernel lacks.
  const std::string needle = (is_ptx ? ".entry " : ".text.") + lowered_name;
  for (std::size_t at = image.find(needle); at != std::string::npos;
       at = image.find(needle, at + 1)) {
    const std::size_t end = at + needle.size();
    const char next = end < image.size() ? image[end] : '\0';
    if (is_ptx ? (next == '(' || next == ' ' || next == '\n' || next == '\r' || next == '\t')
               : next == '\0')
      return true;
  }
  return false;
}

}  // namespace fkv
