// fkv-jit: validate model configs, plan and precompile fused KV kernels (docs/cli.md).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "fkv/compiler.hpp"
#include "fkv/errors.hpp"
#include "fkv/version.hpp"

namespace fkv::cli {

void print_error(std::string_view message) { std::cerr << "fkv-jit: error: " << message << "\n"; }

ModelConfig load_config(const std::string& path) {
  try {
    return ModelConfig::from_file(path);
  } catch (const std::exception& e) {
    throw CommandFailure(BadInput, e.what());
  }
}

ExitCode exit_code_of_current_exception() {
  try {
    throw;
  } catch (const CommandFailure& e) {
    return e.code;
  } catch (const CLI::ParseError&) {
    return Usage;
  } catch (const ConfigError&) {
    return ConfigMismatch;
  } catch (const ArgumentError&) {
    return BadInput;
  } catch (const CompileError&) {
    return CompileFailed;
  } catch (const CudaError&) {
    return CudaFailure;
  } catch (const CacheError&) {
    return CacheFailure;
  } catch (...) {
    return BadInput;
  }
}

}  // namespace fkv::cli

int main(int argc, char** argv) {
  using namespace fkv::cli;
  CLI::App app{
      "fkv-jit: JIT-compiled fused KV materialization kernels (validate, plan, precompile)",
      "fkv-jit"};
  app.set_version_flag("--version", [] {
    std::string version = std::string("fkv-jit ") + fkv::kVersion;
    try {
      version += " (NVRTC " + fkv::nvrtc_version() + ")";
    } catch (const std::exception&) {  // the version line must not fail
    }
    return version;
  });
  app.require_subcommand(1);

  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "spdlog level for library messages")
      ->envname("FKV_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  // Runs after parsing and before any command's callback.
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });

  add_validate_commands(app);
  add_compile_commands(app);
  add_cache_commands(app);
  add_gpu_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    std::cerr << "Run 'fkv-jit --help' for usage.\n";
    return Usage;
  } catch (const std::exception& e) {
    const ExitCode code = exit_code_of_current_exception();
    if (*e.what() != '\0') print_error(e.what());
    return code;
  }
  return Ok;
}
