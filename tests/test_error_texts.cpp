// Error texts that reach the user intact (issue 23 item 14): a NUL inside a config string used
// to end the message at the NUL, in the CLI's stderr and --json as in the C API. Messages now
// show it as \x00 and keep what follows. (The C API side is in test_c_api.c.)
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

fs::path scratch() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "fkv-test-error-texts-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return fs::path(tmpl);
  }();
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result run(const std::string& args) {
  const fs::path out = scratch() / "stdout", err = scratch() / "stderr";
  const std::string cmd = "'" + std::string(FKV_CLI_PATH) + "' " + args + " >'" + out.string() +
                          "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// model_type "qwen3<NUL>after-the-nul" (a JSON \u0000 escape: the file itself has no NUL byte).
const char* kNulConfig = R"({"model_type": "qwen3\u0000after-the-nul", "num_hidden_layers": 2})";

fs::path nul_config() {
  const fs::path p = scratch() / "nul.json";
  std::ofstream(p) << kNulConfig;
  return p;
}

}  // namespace

TEST_CASE("error texts: a NUL in a config string keeps the text after it (library)", "[errors]") {
  try {
    fkv::ModelConfig::from_json(std::string_view(kNulConfig), "nul.json");
    FAIL("the config was accepted");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("qwen3\\x00after-the-nul") != std::string::npos);
    CHECK(what.find('\0') == std::string::npos);
  }
}

TEST_CASE("error texts: a NUL in a config string keeps the text after it (CLI)", "[errors]") {
  const std::string path = "'" + nul_config().string() + "'";
  const Result text = run("validate " + path);
  INFO(text.err);
  CHECK(text.code != 0);
  CHECK(text.err.find("qwen3\\x00after-the-nul") != std::string::npos);

  const Result j = run("validate --json " + path);
  INFO(j.out << j.err);
  CHECK(j.code == text.code);
  const json doc = json::parse(j.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE(!doc.is_discarded());
  CHECK(doc.dump().find("after-the-nul") != std::string::npos);
}
