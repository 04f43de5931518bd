// compiler: NVRTC -> CUBIN/PTX for one arch.
#include "fkv/compiler.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    throw CompileError(std::string(call) + " failed: " + nvrtcGetErrorString(r));
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

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

}  // namespace

std::string Arch::name() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + (arch_specific ? "a" : "");
}

Arch Arch::parse(const std::string& text) {
  std::string s = text;
  if (s.rfind("sm_", 0) == 0 || s.rfind("compute_", 0) == 0) s = s.substr(s.find('_') + 1);
  Arch a;
  if (!s.empty() && s.back() == 'a') {
    a.arch_specific = true;
    s.pop_back();
  }
  s.erase(std::remove(s.begin(), s.end(), '.'), s.end());
  const bool digits = !s.empty() && s.size() <= 3 &&
                      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw CompileError("cannot parse arch '" + text + "': write it as sm_90, sm_90a or 9.0; supported: " +
                       arch_list());
  const int n = std::stoi(s);
  a.major = n / 10;
  a.minor = n % 10;
  const auto archs = supported_archs();
  const bool known = std::any_of(archs.begin(), archs.end(),
                                 [&](const Arch& b) { return b.number() == a.number(); });
  if (!known || (a.arch_specific && a.major < 9))
    throw CompileError("arch " + a.name() + " is not supported by this NVRTC (" + nvrtc_version() +
                       "); supported: " + arch_list());
  return a;
}

std::vector<std::string> nvrtc_options(const CompileOptions& options) {
  const std::string arch = options.arch.name();
  std::vector<std::string> out = {
      (options.ptx ? "--gpu-architecture=compute_" : "--gpu-architecture=sm_") +
          arch.substr(arch.find('_') + 1),
      "-std=c++17",
      "-default-device",
      "--fmad=true",
  };
  // FKV_NVRTC_OPTIONS: extra options for kernel tuning (e.g. --maxrregcount=64). They are part
  // of the cache key, since they come back from this function.
  if (const char* extra = std::getenv("FKV_NVRTC_OPTIONS")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) out.push_back(w);
  }
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<Arch> supported_archs() {
  int n = 0;
  check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> nums(static_cast<std::size_t>(n));
  check_nvrtc(nvrtcGetSupportedArchs(nums.data()), "nvrtcGetSupportedArchs");
  std::vector<Arch> out;
  for (int v : nums)
    if (v >= 80) out.push_back(Arch{v / 10, v % 10, false});
  return out;
}

namespace {
// FKV_DUMP_SOURCE=<dir>: keep each specialized source for kernel developers.
void dump_source(const KernelSource& src, const CompileOptions& options) {
  const char* dir = std::getenv("FKV_DUMP_SOURCE");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream(std::filesystem::path(dir) / (src.short_name + "-" + options.arch.name() + ".cu"))
      << src.source;
}
}  // namespace

CompiledKernel compile(const KernelSource& src, const CompileOptions& options) {
  dump_source(src, options);
  std::vector<const char*> header_text, header_names;
  for (const auto& [name, text] : src.headers) {
    header_names.push_back(name.c_str());
    header_text.push_back(text.c_str());
  }
  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, src.source.c_str(), src.template_name.c_str(),
                                 static_cast<int>(header_text.size()), header_text.data(),
                                 header_names.data()),
              "nvrtcCreateProgram");
  Program prog(raw);
  check_nvrtc(nvrtcAddNameExpression(raw, src.name_expression.c_str()), "nvrtcAddNameExpression");

  const auto opts = nvrtc_options(options);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());

  CompiledKernel out;
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(raw, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(raw, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (rc != NVRTC_SUCCESS)
    throw CompileError("NVRTC failed to compile " + src.name_expression + " for " +
                           options.arch.name() + ": " + nvrtcGetErrorString(rc) + "\n" + out.log,
                       out.log, src.source);

  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(raw, src.name_expression.c_str(), &lowered), "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  out.is_ptx = options.ptx;
  std::size_t size = 0;
  if (options.ptx) {
    check_nvrtc(nvrtcGetPTXSize(raw, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check_nvrtc(nvrtcGetPTX(raw, out.image.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check_nvrtc(nvrtcGetCUBIN(raw, out.image.data()), "nvrtcGetCUBIN");
  }
  return out;
}

}  // namespace fkv
