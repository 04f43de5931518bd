// options: the environment, read and checked once. See include/fkv/options.hpp.
#include "fkv/options.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

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

// One option name, and whether it may be glued to its value ("-I/usr/include", "-arch=sm_90").
struct Refused {
  const char* name;
  const char* why;
};
constexpr Refused kRefused[] = {
    {"-include", "reads a header from disk, which the cache key cannot see"},
    {"--pre-include", "reads a header from disk, which the cache key cannot see"},
    {"-I", "adds an include path on disk, which the cache key cannot see"},
    {"--include-path", "adds an include path on disk, which the cache key cannot see"},
    {"--time", "writes a file outside the cache"},
    {"-time", "writes a file outside the cache"},
    {"--fdevice-time-trace", "writes a file outside the cache"},
    {"-fdevice-time-trace", "writes a file outside the cache"},
    {"--gpu-architecture",
     "changes the target arch: fkv-jit chooses it per device (use --arch with precompile)"},
    {"-arch",
     "changes the target arch: fkv-jit chooses it per device (use --arch with precompile)"},
    {"--dlink-time-opt", "makes LTO IR instead of a loadable image"},
    {"-dlto", "makes LTO IR instead of a loadable image"},
    {"--optix-ir", "makes OptiX IR instead of a loadable image"},
    {"-optix-ir", "makes OptiX IR instead of a loadable image"},
    {"--create-pch", "writes a precompiled header file"},
    {"-create-pch", "writes a precompiled header file"},
    {"--use-pch", "reads a precompiled header file"},
    {"-use-pch", "reads a precompiled header file"},
    {"--pch-dir", "reads and writes precompiled headers on disk"},
    {"-pch-dir", "reads and writes precompiled headers on disk"},
    {"--pch", "reads and writes precompiled headers on disk"},
    {"-pch", "reads and writes precompiled headers on disk"},
};

bool names_option(const std::string& word, const std::string& name) {
  if (word == name) return true;
  if (word.size() > name.size() && word.compare(0, name.size(), name) == 0) {
    const char next = word[name.size()];
    if (next == '=') return true;
    if (name == "-I") return true;  // -I/path: the only short option glued to its value here
  }
  return false;
}

std::once_flag g_logging_once;

}  // namespace

void check_nvrtc_options(const std::vector<std::string>& options, const std::string& source) {
  for (const std::string& w : options)
    for (const Refused& r : kRefused)
      if (names_option(w, r.name))
        throw ConfigError(source + ": NVRTC option '" + w + "' is not allowed: it " + r.why +
                          ". Remove it; tuning options such as -lineinfo or "
                          "--extra-device-vectorization are fine");
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
    o.decode_crossover =
        int_in_range("FKV_DECODE_CROSSOVER", *v, 0, 1 << 30, "a token count >= 0 (0 = never)");
  if (auto v = env("FKV_TEMPLATE_DIR"); v && !v->empty()) o.template_dir = *v;
  if (auto v = env("FKV_DUMP_SOURCE"); v && !v->empty()) o.dump_source = *v;
  if (auto v = env("FKV_NVRTC_LIBRARY"); v && !v->empty()) o.nvrtc_library = *v;

  if (auto dir = env("FKV_CACHE_DIR"); dir && !dir->empty())
    o.cache_dir = *dir;
  else if (auto xdg = env("XDG_CACHE_HOME"); xdg && !xdg->empty() && (*xdg)[0] == '/')
    o.cache_dir = fs::path(*xdg) / "fkv-jit";
  else if (auto home = env("HOME"); home && !home->empty())
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
    if (spdlog::level::from_str(*v) == spdlog::level::off && *v != "off")
      bad("FKV_LOG_LEVEL", *v, "trace, debug, info, warn, error, critical or off");
    o.log_level = *v;
  }
  return o;
}

const JitOptions& JitOptions::global() {
  // A throwing initializer leaves the static uninitialized: the next call reads again.
  static const JitOptions options = [] {
    JitOptions o = from_env();
    configure_logging(o.log_level);
    return o;
  }();
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
