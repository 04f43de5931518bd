// The fkv-jit command line: shared pieces of the command groups (docs/cli.md).
//
// Each command group lives in its own file and registers its subcommands with one function
// declared here; main.cpp calls them in order. Adding a group = one declaration here, one
// source file in src/cli/ (picked up by the CMake glob), one call in main.cpp.
//
// A command reports failure by throwing. main() maps the exception to an exit code and prints
// `fkv-jit: error: <what>` on stderr:
//   CommandFailure  -> its code (use it whenever the code is not obvious from the type),
//   fkv::ConfigError -> ConfigMismatch, fkv::ArgumentError -> BadInput,
//   fkv::CompileError -> CompileFailed, fkv::CudaError -> CudaFailure,
//   fkv::CacheError -> CacheFailure, CLI::ParseError -> Usage, anything else -> BadInput.
// Logs (spdlog) go to stderr; stdout holds only a command's result (text, table or JSON).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/codegen.hpp"
#include "fkv/config.hpp"
#include "fkv/precompile.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fkv::cli {

// Process exit codes; stable, documented in docs/cli.md. An error of the library exits with its
// kind's code from fkv/errors.hpp's table (error_kinds()); the codes below name them for the
// CLI's own use, and add the CLI's own outcomes (usage, GPU check, incomplete).
enum ExitCode : int {
  Ok = 0,              // valid / done
  ConfigMismatch = 1,  // the config was read but its layers cannot share the fused path
  BadInput = 2,        // file missing or unreadable, malformed JSON, bad values
  Usage = 3,           // bad command line
  CompileFailed = 4,   // NVRTC rejected a kernel or the arch is unsupported
  CudaFailure = 5,     // CUDA driver missing or a driver call failed
  CacheFailure = 6,    // the kernel cache cannot be used as asked
  GpuCheckFailed = 7,  // selftest/bench found wrong results
  Incomplete = 8,      // precompile could not save every kernel to disk, or `cache verify
                       // --config` found a kernel missing or invalid
  Unsupported = 9,     // the architecture or a layer cannot take the fused path, or is unknown
  OutOfMemory = 10,    // a host allocation failed
  InternalError = 11,  // a bug: please report it with the text
};

// Ends the command with `code`. An empty message means it was already reported (e.g. as JSON
// on stdout plus its own stderr line) and main() prints nothing more.
struct CommandFailure : std::runtime_error {
  CommandFailure(ExitCode code_, const std::string& message)
      : std::runtime_error(message), code(code_) {}
  ExitCode code;
};

// Reads a model config; every failure to read it (missing file, bad JSON, bad values) becomes
// CommandFailure(BadInput), so that it is not confused with a validation mismatch.
ModelConfig load_config(const std::string& path);

// Writes `fkv-jit: error: <message>` to stderr (through printable()).
void print_error(std::string_view message);

// `text` with control characters (ESC, CR, BEL, ...; not newline and tab) written as \xHH, so
// that strings from a config cannot drive the terminal. Every text (non-JSON) output that may
// hold such strings goes through it.
std::string printable(std::string_view text);

// The JSON text of `j`, indented by 2; invalid UTF-8 (a config's bytes in an error message) is
// replaced by U+FFFD instead of throwing, so --json output is always valid JSON.
std::string json_text(const nlohmann::json& j);

// True when the command line asked for --json: errors are then also printed on stdout as
// {"ok": false, "error": ..., "exit_code": N} (main.cpp).
bool json_requested();

// The options that choose kernel variants, shared by precompile, source and cache verify
// (variants.cpp). A tensor-parallel degree would be one more field here, applied in
// variants_of() where the plan is made.
struct VariantArgs {
  std::string config;
  std::string dtype;     // empty: the config's dtype
  std::string kv_dtype;  // empty: the activation dtype
  std::string cos_sin = "fp32";
  std::string index = "int64";
  std::string mode = "both";
  bool strict = false;
  int tp = 1;              // --tp: tensor-parallel degree (each rank's share of the KV heads)
  std::string decode_gpu;  // --decode: also the decode-size kernels for this measured GPU
  std::string weights;     // --weights: how the K/V weights are stored (empty: what the
                           // config's quantization_config declares, else dense)
};
void add_variant_options(CLI::App* cmd, VariantArgs& args, bool config_positional = true);

struct Variants {
  Plan plan;
  VariantOptions options;
  DecodePrecompile decode;         // --decode: the GPU's SM count and crossover; zero: none
  int hidden = 0;                  // the config's hidden_size (0: absent)
  std::vector<std::string> notes;  // what was printed on stderr as notes and warnings
};
// Reads the config and makes the plan the variants come from. With --decode, a note on stderr
// when the plan takes no decode-size kernel. The weight format is --weights, else the one the
// config's quantization_config declares (a note on stderr; a declaration fkv-jit does not read
// throws its UnsupportedError / ConfigError unless --weights is given, which then wins with a
// warning, as it does over a declaration it differs from).
Variants variants_of(const VariantArgs& args);

// --weights NAME as a format: a packed 4-bit scheme exits 9 (Unsupported), a name that is no
// format 3 (Usage), both naming the option.
WeightFormat weights_option(const std::string& name);

// Every kernel the variants need, by short name, with its generated source: the epilogue
// kernels (kernel_specs_for), then the decode-size kernels of --decode (decode_specs_for), then
// the kernels of quantized --weights (weight_kernels_for).
struct NeededKernel {
  std::string name;
  KernelSource source;
};
std::vector<NeededKernel> needed_kernels(const Variants& v);

// Resolves each --arch (fkv::resolve_arch: what the runtime loads on that device), printing
// the resolution notes on stderr; --ptx forces PTX. A name that is not an arch is a usage
// error (exit 3), an arch this NVRTC cannot serve exits 4.
std::vector<ArchTarget> targets_of(const std::vector<std::string>& archs, bool ptx,
                                   std::vector<std::string>* notes = nullptr);

// Checks that an option's value is a whole number from `min` to INT_MAX; otherwise a usage
// error (exit 3) saying "must be a positive integer, got '0'" (min 1) or the like.
CLI::Validator integer_at_least(int min);

// Adds --cache-dir (an empty value is refused) bound to `dir`.
CLI::Option* add_cache_dir_option(CLI::App* cmd, std::string& dir, const std::string& what);

// The exit code for the exception being handled (call inside a catch block).
ExitCode exit_code_of_current_exception();

// Command groups. Declared here by their owners; main.cpp calls those that are defined.
void add_validate_commands(CLI::App& app);  // validate, plan (validate_cmd.cpp)
void add_compile_commands(CLI::App& app);   // precompile, source
void add_cache_commands(CLI::App& app);     // cache ls|verify|prune|clear
void add_gpu_commands(CLI::App& app);       // bench, selftest

}  // namespace fkv::cli
