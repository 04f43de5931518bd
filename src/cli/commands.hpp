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
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fkv/config.hpp"

namespace fkv::cli {

// Process exit codes; stable, documented in docs/cli.md.
enum ExitCode : int {
  Ok = 0,              // valid / done
  ConfigMismatch = 1,  // the config was read but its layers cannot share the fused path
  BadInput = 2,        // file missing or unreadable, malformed JSON, bad values
  Usage = 3,           // bad command line
  CompileFailed = 4,   // NVRTC rejected a kernel or the arch is unsupported
  CudaFailure = 5,     // CUDA driver missing or a driver call failed
  CacheFailure = 6,    // the kernel cache cannot be used as asked
  GpuCheckFailed = 7,  // selftest/bench found wrong results
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

// Writes `fkv-jit: error: <message>` to stderr.
void print_error(std::string_view message);

// The exit code for the exception being handled (call inside a catch block).
ExitCode exit_code_of_current_exception();

// Command groups. Declared here by their owners; main.cpp calls those that are defined.
void add_validate_commands(CLI::App& app);  // validate, plan (validate_cmd.cpp)
void add_compile_commands(CLI::App& app);   // precompile, source
void add_cache_commands(CLI::App& app);     // cache ls|verify|prune|clear
void add_gpu_commands(CLI::App& app);       // bench, selftest

}  // namespace fkv::cli
