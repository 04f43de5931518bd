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

#include "cli_runner.hpp"
#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/seed_texts.hpp"
#include "fkv/validate.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Result = fkv_test::CliResult;
using fkv_test::slurp;

fs::path scratch() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "fkv-test-error-texts-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return fs::path(tmpl);
  }();
  return dir;
}

Result run(const std::string& args) { return fkv_test::run_cli(scratch(), args); }

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

TEST_CASE("the seed helper's texts are defined once, exactly as the seed words them",
          "[errors][seed]") {
  // The words engines match (sglang's FusedKVMaterializeHelper), written out here in full.
  CHECK(fkv::seed::mismatch("num_kv_heads", "8", "4", 3) ==
        "num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 at layer 3.");
  CHECK(fkv::seed::mismatch("RoPE config", fkv::seed::rope_config(128, true),
                            fkv::seed::rope_config(64, false), 1) ==
        "RoPE config mismatch across layers for fused KV path: expected (rotary_dim=128, "
        "neox=True), got (rotary_dim=64, neox=False) at layer 1.");
  CHECK(fkv::seed::rotary_head_pair(130, 128) ==
        "Invalid fused KV rotary/head dim pair: rotary_dim=130, head_dim=128.");
  const auto& t = fkv::seed::templates();
  CHECK(t.at("bias_presence") == "qkv bias presence mismatch across layers for fused KV path.");
  CHECK(t.at("k_norm_presence") == "k_norm presence mismatch across layers for fused KV path.");
  CHECK(t.at("refresh_layout") == "fused KV refresh cannot change weight layout");
  CHECK(t.at("refresh_layer_count") == "fused KV refresh cannot change layer count");
  CHECK(t.at("no_layers") == "fused KV materialization needs at least one layer");
  CHECK(t.size() == 8);
  // The validator raises them: a real mismatch, word for word.
  try {
    fkv::validate(fkv::ModelConfig::from_json(
        std::string_view(R"({"layers": [{"num_kv_heads": 8, "head_dim": 128},
                                        {"num_kv_heads": 4, "head_dim": 128}]})"),
        "t.json"));
    FAIL("expected a MismatchError");
  } catch (const fkv::MismatchError& e) {
    CHECK(std::string(e.what()) == fkv::seed::mismatch("num_kv_heads", "8", "4", 1));
  }
}
