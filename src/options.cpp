// options: the environment, read and checked once. See include/fkv/options.hpp.
#include "fkv/options.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>

#include "fkv/cache.hpp"
#include "fkv/errors.hpp"

namespace fkv {
namespace fs = std::filesystem;

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

[[noreturn]] void bad(const char* name, const std::string& value, const std::string& expected) {
  throw ConfigError(std::string(name) + "='" + value + "' is not valid: expected " + expected +
                    " (or unset " + name + ")");
}

// An integer in [lo, hi], all of the text (no "12abc", no "+3", no spaces).
int int_in_range(const char* name, const std::string& v, int lo, int hi,
                 const std::string& expected) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
    bad(name, v, expected);
  const int n = std::stoi(v);
  if (n < lo || n > hi) bad(name, v, expected);
  return n;
}

bool boolean(const char* name, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  bad(name, v, "1, true, yes, on or 0, false, no, off");
}

// FKV_NVRTC_OPTIONS is an allow-list: NVRTC has dozens of options, documented and not, that read
// or write files (-include, -I, --time, --pch-dir, ...), change the target (-arch, -dlto), hide
// the diagnostics fkv-jit reads (-w, --diag-suppress) or build no kernel at all
// (-fdevice-syntax-only published a 1.7 KB image with no kernel). Only options that change how
// the kernel is generated, and read or write nothing, pass.
enum class Value { None, Bool, Int, Macro, Exact };
struct Allowed {
  const char* name;  // as written, up to '=' for options with a value
  Value value;
  const char* exact = nullptr;  // Value::Exact: the only value accepted
};
constexpr Allowed kAllowed[] = {
    {"-lineinfo", Value::None},
    {"--generate-line-info", Value::None},
    {"-use_fast_math", Value::None},
    {"--use_fast_math", Value::None},
    {"-extra-device-vectorization", Value::None},
    {"--extra-device-vectorization", Value::None},
    {"-G", Value::None},  // device debug code: slow, but a correct kernel (cuda-gdb)
    {"--device-debug", Value::None},
    {"-maxrregcount", Value::Int},
    {"--maxrregcount", Value::Int},
    {"-ftz", Value::Bool},
    {"--ftz", Value::Bool},
    {"-prec-div", Value::Bool},
    {"--prec-div", Value::Bool},
    {"-prec-sqrt", Value::Bool},
    {"--prec-sqrt", Value::Bool},
    {"-fmad", Value::Bool},
    {"--fmad", Value::Bool},
    {"-D", Value::Macro},  // -DNAME or -DNAME=value, glued
    {"--define-macro", Value::Macro},
    // ptxas statistics (registers, spills) in the NVRTC log; no file, the same image.
    {"-Xptxas", Value::Exact, "-v"},
    {"--ptxas-options", Value::Exact, "-v"},
};

bool identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool allowed(const std::string& w) {
  for (const Allowed& a : kAllowed) {
    const std::string name = a.name;
    if (a.value == Value::None) {
      if (w == name) return true;
      continue;
    }
    if (a.value == Value::Macro && name == "-D") {
      if (w.size() > 2 && w.compare(0, 2, "-D") == 0) {
        const std::string m =
            w.substr(2, w.find('=') == std::string::npos ? std::string::npos : w.find('=') - 2);
        return identifier(m);
      }
      continue;
    }
    if (w.size() <= name.size() + 1 || w.compare(0, name.size(), name) != 0 ||
        w[name.size()] != '=')
      continue;
    const std::string v = w.substr(name.size() + 1);
    switch (a.value) {
      case Value::Bool:
        return v == "true" || v == "false";
      case Value::Int:
        return v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos &&
               std::stoi(v) >= 1 && std::stoi(v) <= 255;
      case Value::Macro:
        return identifier(v.substr(0, v.find('=')));
      case Value::Exact:
        return v == a.exact;
      case Value::None:
        break;
    }
  }
  return false;
}

std::once_flag g_logging_once;

}  // namespace

std::string allowed_nvrtc_options() {
  return "-lineinfo, --use_fast_math, --extra-device-vectorization, -G, "
         "--maxrregcount=N (1-255), --ftz=true|false, --prec-div=true|false, "
         "--prec-sqrt=true|false, --fmad=true|false, -DNAME[=value] (glued), "
         "--ptxas-options=-v (the long and short spellings of each)";
}

void check_nvrtc_options(const std::vector<std::string>& options, const std::string& source) {
  for (const std::string& w : options)
    if (!allowed(w))
      throw ConfigError(source + ": NVRTC option '" + w +
                        "' is not allowed: fkv-jit passes only options that change how the "
                        "kernel is generated and read or write no file (the cache key cannot see "
                        "files, and the target arch is fkv-jit's choice). Allowed: " +
                        allowed_nvrtc_options());
}

JitOptions JitOptions::from_env() {
  JitOptions o;
  if (auto v = env("FKV_BLOCK_WARPS"); v && !v->empty())
    o.block_warps =
        int_in_range("FKV_BLOCK_WARPS", *v, 1, 32, "warps per block, an integer from 1 to 32");
  if (auto v = env("FKV_LAYERS_PER_BLOCK"); v && !v->empty())
    o.layers_per_block = int_in_range("FKV_LAYERS_PER_BLOCK", *v, 1, 1 << 20,
                                      "layers per block, a positive integer");
  if (auto v = env("FKV_LOADS_PER_LANE"); v && !v->empty())
    o.loads_per_lane =
        int_in_range("FKV_LOADS_PER_LANE", *v, 1, 8, "loads per lane, an integer from 1 to 8");
  if (auto v = env("FKV_NVRTC_OPTIONS")) {
    std::istringstream words(*v);
    for (std::string w; words >> w;) o.nvrtc_options.push_back(w);
    check_nvrtc_options(o.nvrtc_options, "FKV_NVRTC_OPTIONS");
  }
  if (auto v = env("FKV_DECODE_CROSSOVER"); v && !v->empty())
    o.decode_crossover = int_in_range("FKV_DECODE_CROSSOVER", *v, 0, 999999999,
                                      "a token count from 0 (never) to 999999999");
  if (auto v = env("FKV_TEMPLATE_DIR"); v && !v->empty()) o.template_dir = *v;
  if (auto v = env("FKV_DUMP_SOURCE"); v && !v->empty()) o.dump_source = *v;
  if (auto v = env("FKV_NVRTC_LIBRARY"); v && !v->empty()) o.nvrtc_library = *v;

  // XDG_CACHE_HOME and HOME count only when absolute (the XDG rule, applied to both): a relative
  // one would put the cache wherever the process happens to run. Neither usable: memory only,
  // and the cache's warning says why.
  if (auto dir = env("FKV_CACHE_DIR"); dir && !dir->empty())
    o.cache_dir = *dir;
  else if (auto xdg = env("XDG_CACHE_HOME"); xdg && !xdg->empty() && (*xdg)[0] == '/')
    o.cache_dir = fs::path(*xdg) / "fkv-jit";
  else if (auto home = env("HOME"); home && !home->empty() && (*home)[0] == '/')
    o.cache_dir = fs::path(*home) / ".cache" / "fkv-jit";
  if (auto ro = env("FKV_CACHE_READONLY_DIRS")) {
    std::stringstream parts(*ro);
    for (std::string part; std::getline(parts, part, ':');)
      if (!part.empty()) o.cache_readonly_dirs.emplace_back(part);
  }
  if (auto cap = env("FKV_CACHE_MAX_BYTES"); cap && !cap->empty()) {
    auto n = parse_byte_count(*cap);
    if (!n) bad("FKV_CACHE_MAX_BYTES", *cap, "a byte count such as 500000000, 512K, 500M or 2G");
    if (*n == 0)
      bad("FKV_CACHE_MAX_BYTES", *cap,
          "a cap above 0; unset it for no cap, or set FKV_DISABLE_CACHE=1 to keep nothing on disk");
    o.cache_max_bytes = *n;
  }
  if (auto v = env("FKV_DISABLE_CACHE")) o.disable_cache = boolean("FKV_DISABLE_CACHE", *v);
  if (auto v = env("FKV_LOG_LEVEL"); v && !v->empty()) {
    std::string level = *v;  // any case: DEBUG, Debug and debug are one level
    for (char& c : level) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (spdlog::level::from_str(level) == spdlog::level::off && level != "off")
      bad("FKV_LOG_LEVEL", *v, "trace, debug, info, warn, error, critical or off (any case)");
    o.log_level = level;
  }
  return o;
}

const JitOptions& JitOptions::global() {
  // A throwing initializer leaves the static uninitialized: the next call reads again.
  // Never destroyed: atexit handlers and static destructors may still call the library.
  static const JitOptions& options = *new JitOptions([] {
    JitOptions o = from_env();
    configure_logging(o.log_level);
    return o;
  }());
  return options;
}

void configure_logging(const std::string& level) {
  std::call_once(g_logging_once, [&] {
    // spdlog's built-in default logger has an empty name and writes to stdout; a host program
    // (the fkv-jit CLI, an engine) that installed its own keeps it and its level.
    auto current = spdlog::default_logger();
    if (current && !current->name().empty()) return;
    auto logger = spdlog::get("fkv");
    if (!logger) logger = spdlog::stderr_color_mt("fkv");
    logger->set_level(current ? current->level() : spdlog::level::info);
    if (!level.empty()) logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
  });
}

}  // namespace fkv
