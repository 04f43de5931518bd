// Runs the fkv-jit binary of this build (FKV_CLI_PATH) through the shell and captures its exit
// code, stdout and stderr: the CLI tests' one way of calling it.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fkv_test {

struct CliResult {
  int code = -1;  // the exit status; -1 when killed by a signal
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `fkv-jit ARGS` (shell text), ENV (shell assignments) before it; stdout and stderr go through
// files in DIR.
inline CliResult run_cli(const std::filesystem::path& dir, const std::string& args,
                         const std::string& env = "") {
  const std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  const std::string cmd = env + " '" + std::string(FKV_CLI_PATH) + "' " + args + " >'" +
                          out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace fkv_test
