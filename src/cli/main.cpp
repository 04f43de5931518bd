// fkv-jit: validate model configs, plan and precompile fused KV kernels (docs/cli.md).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "../cache_fs.hpp"
#include "commands.hpp"
#include "fkv/compiler.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/version.hpp"

namespace fkv::cli {

namespace {
bool g_json = false;  // --json on the command line (set before parsing)
}  // namespace

bool json_requested() { return g_json; }

// The library's escaping (src/cache_fs.hpp), keeping newlines and tabs of multi-line messages.
std::string printable(std::string_view text) { return cache_fs::printable(text, true); }

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_error(std::string_view message) {
  std::cerr << "fkv-jit: error: " << printable(message) << "\n";
}

ModelConfig load_config(const std::string& path) {
  try {
    return ModelConfig::from_file(path);
  } catch (const ConfigError&) {
    throw;  // bad input or unsupported: its kind decides the exit code
  } catch (const std::bad_alloc&) {
    throw;
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
  } catch (...) {
    return static_cast<ExitCode>(error_kind_info(current_error_kind()).exit_code);
  }
}

}  // namespace fkv::cli

namespace {

// Ends with `code`: the message on stderr and, when --json was asked for, as JSON on stdout.
int fail(fkv::cli::ExitCode code, const std::string& message) {
  using namespace fkv::cli;
  if (!message.empty()) print_error(message);
  if (json_requested() && !message.empty())
    std::cout << json_text({{"ok", false}, {"error", message}, {"exit_code", code}}) << std::endl;
  return code;
}

// The names of `app`'s subcommands, "a, b, c".
std::string subcommand_names(const CLI::App& app) {
  std::string out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    out += (out.empty() ? "" : ", ") + sub->get_name();
  return out;
}

// The deepest subcommand that was parsed (the one a stray positional was given to).
const CLI::App* innermost(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return innermost(*sub);
  return &app;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fkv::cli;
  // Logs go to stderr: stdout carries only results (tables, JSON), so that scripts can parse
  // it. The library logs through spdlog's default logger.
  spdlog::set_default_logger(spdlog::stderr_color_mt("fkv-jit"));
  for (int i = 1; i < argc; ++i) g_json |= std::strcmp(argv[i], "--json") == 0;

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
  CLI::Option* log_level_option =
      app.add_option("--log-level", log_level,
                     "spdlog level for library messages (default: $FKV_LOG_LEVEL, else warn)")
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"},
                                CLI::ignore_case));
  // Runs after parsing and before any command's callback.
  // The library's environment (FKV_CACHE_MAX_BYTES, FKV_LOG_LEVEL, ...) is checked here, once:
  // a bad value is bad input (exit 2) naming the variable, not a config mismatch or a usage
  // error, whatever the command.
  app.parse_complete_callback([&] {
    spdlog::set_level(spdlog::level::from_str(log_level));  // while the environment is read
    try {
      const fkv::JitOptions& env = fkv::JitOptions::global();
      if (log_level_option->count() == 0 && !env.log_level.empty()) log_level = env.log_level;
    } catch (const fkv::ConfigError& e) {  // bad input: the environment
      throw CommandFailure(BadInput, e.what());
    }
    spdlog::set_level(spdlog::level::from_str(log_level));
  });

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
    // A word where a command was expected is reported as such, with the list of commands.
    const CLI::App* at = innermost(app);
    std::string message = e.what();
    if (at->get_require_subcommand_min() > 0 && !at->remaining(true).empty() &&
        at->get_subcommands().empty())
      message = "unknown subcommand '" + at->remaining(true).front() + "'" +
                (at == &app ? "" : " for '" + at->get_name() + "'") +
                " (commands: " + subcommand_names(*at) + ")";
    fail(Usage, message);
    std::cerr << "Run 'fkv-jit --help' for usage.\n";
    return Usage;
  } catch (const std::exception& e) {
    return fail(exit_code_of_current_exception(), e.what());
  }
  return Ok;
}
