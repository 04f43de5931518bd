// options: every environment variable and tuning knob of the library, read in one place.
//
// JitOptions::from_env() reads the process environment and checks every value: a value that
// is present but malformed (FKV_BLOCK_WARPS=abc, FKV_CACHE_MAX_BYTES=lots) is a ConfigError
// naming the variable and what it accepts, never silently ignored. JitOptions::global() is
// the first successful read, kept for the life of the process; the modules take their knobs
// from it (or from a JitOptions a caller passes), never from getenv: this file is the only
// reader of the environment in the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fkv {

struct JitOptions {
  // ---- tuning (spec, materialize, compiler) ----
  int block_warps = 0;       // FKV_BLOCK_WARPS: warps per block, 1..32; 0 = the default (2)
  int layers_per_block = 0;  // FKV_LAYERS_PER_BLOCK: layers per block, >= 1; 0 = chosen per call
  // FKV_LOADS_PER_LANE: loads per lane and row, 1..8 (KernelSpec::tiling takes the widest load
  // that tiles the head with it; a head it cannot tile keeps the default rule); 0 = the rule.
  int loads_per_lane = 0;
  // FKV_NVRTC_OPTIONS: extra NVRTC options (whitespace-separated), appended after fkv-jit's own
  // and part of every cache key. Only options on an allow-list pass (check_nvrtc_options).
  std::vector<std::string> nvrtc_options;
  // FKV_DECODE_CROSSOVER: the largest token count sent to the decode-size kernel, >= 0 (0 = never);
  // -1 = unset: decode_crossover() uses the value measured for the device.
  std::int64_t decode_crossover = -1;

  // ---- kernel development (codegen, compiler) ----
  std::filesystem::path template_dir;  // FKV_TEMPLATE_DIR: read templates from here
  std::filesystem::path dump_source;   // FKV_DUMP_SOURCE: write each specialized source here
  // FKV_NVRTC_LIBRARY: the NVRTC library file to dlopen instead of searching (nvrtc_loader.hpp).
  std::filesystem::path nvrtc_library;

  // ---- cache ----
  // FKV_CACHE_DIR, else $XDG_CACHE_HOME/fkv-jit, else $HOME/.cache/fkv-jit (XDG_CACHE_HOME and
  // HOME count only when absolute); empty when none of them is set (memory-only cache).
  std::filesystem::path cache_dir;
  std::vector<std::filesystem::path> cache_readonly_dirs;  // FKV_CACHE_READONLY_DIRS, ':'-separated
  // FKV_CACHE_MAX_BYTES: the most bytes the writable root may hold ("500000000", "512K",
  // "500M", "2G"), LRU-pruned after each publish. Unset = no cap. 0 is refused: a cap of 0
  // would delete every entry right after writing it (use FKV_DISABLE_CACHE=1 to keep nothing
  // on disk); `fkv-jit cache prune --max-bytes N` uses the same meaning of N.
  std::uint64_t cache_max_bytes = 0;
  bool disable_cache = false;  // FKV_DISABLE_CACHE: 1/true/yes/on or 0/false/no/off

  // ---- logging ----
  // FKV_LOG_LEVEL: trace, debug, info, warn (the default), error, critical or off, in any case
  // (stored in lower case).
  std::string log_level = "warn";

  // Reads and checks the environment now. Throws ConfigError on a malformed value.
  static JitOptions from_env();
  // The environment as first read by this process (thread-safe; a failed read throws and is
  // tried again on the next call). The first successful read also applies log_level to the
  // library's logger, which writes to stderr.
  static const JitOptions& global();
};

// Refuses (ConfigError, naming the option and listing the allowed ones) every NVRTC option but
// an allow-list of options that change how the kernel is generated and read or write no file:
// -lineinfo, --use_fast_math, --extra-device-vectorization, -G, --maxrregcount=N,
// --ftz= / --prec-div= / --prec-sqrt= / --fmad= (true or false), -DNAME[=value] and
// --ptxas-options=-v, in their long and short spellings. Anything else (-I, -include, --time,
// -arch, -w, --diag-suppress, -fdevice-syntax-only, ...) could read or write files outside the
// cache key, change the target, hide diagnostics or build no kernel. `source` names where the
// options came from, for the message.
void check_nvrtc_options(const std::vector<std::string>& options, const std::string& source);
// The allowed options, as the message above lists them.
std::string allowed_nvrtc_options();

// Points the library's logs (spdlog's default logger) at stderr and sets their level. Called by
// JitOptions::global(); a host program that installs its own default logger before the first
// fkv-jit call keeps it, only the level is applied.
void configure_logging(const std::string& level);

}  // namespace fkv
