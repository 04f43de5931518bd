// One error taxonomy behind every front-end (issue 25): the bad inputs of tests/error_kinds.json
// go through the C API (fkv_config_load, then a strict fkv_plan_create) and the CLI (fkv-jit
// validate --json), and both must report the case's kind: the C status and the exit code that
// fkv/errors.hpp's table gives that kind, and the kind's name in the CLI's JSON.
// tests/test_python.py (test_error_kinds_agree) feeds the same file to Python and to the wheel's
// CLI, so the three front-ends are held to the one expected kind per input.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "cli_runner.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fkv::ErrorKindInfo& kind_named(const std::string& name) {
  for (const fkv::ErrorKindInfo& k : fkv::error_kinds())
    if (name == k.name) return k;
  FAIL("tests/error_kinds.json names kind '" << name << "', which fkv/errors.hpp does not have");
  throw std::logic_error("unreachable");
}

// The case's input as a path: a file of tests/data, a written text, or a missing file.
fs::path input_of(const json& c, const fs::path& dir) {
  if (c.contains("data")) return fs::path(FKV_TEST_DATA_DIR) / c["data"].get<std::string>();
  if (c.contains("missing")) return dir / c["missing"].get<std::string>();
  const fs::path p = dir / "input.json";
  std::ofstream(p) << c["text"].get<std::string>();
  return p;
}

// The C API's status for the input: the load's, else the strict plan's.
fkv_status c_api_status(const fs::path& path) {
  fkv_config* config = nullptr;
  fkv_status s = fkv_config_load(path.c_str(), &config);
  if (s != FKV_OK) return s;
  fkv_plan* plan = nullptr;
  s = fkv_plan_create(config, 0, &plan);
  if (plan) fkv_plan_free(plan);
  fkv_config_free(config);
  return s;
}

}  // namespace

TEST_CASE("the same bad input is the same error kind through the C API and the CLI") {
  const json doc = json::parse(std::ifstream(fs::path(FKV_SOURCE_DIR) / "tests/error_kinds.json"));
  REQUIRE(doc["cases"].size() >= 5);
  std::set<std::string> kinds;
  for (const json& c : doc["cases"]) {
    INFO(c["name"].get<std::string>());
    const std::string kind = c["kind"].get<std::string>();
    const fkv::ErrorKindInfo& want = kind_named(kind);  // a named string: g++ 13 would warn of
                                                        // a dangling reference to a temporary
    kinds.insert(want.name);
    fkv_test::TempDir dir("fkv-error-kinds");
    const fs::path path = input_of(c, dir.path);

    const fkv_status s = c_api_status(path);
    INFO("C API: " << fkv_status_name(s) << ": " << fkv_last_error());
    CHECK(static_cast<int>(s) == want.c_status);
    CHECK(std::string(fkv::error_kind_of_status(s).name) == want.name);

    const fkv_test::CliResult r =
        fkv_test::run_cli(dir.path, "validate --json '" + path.string() + "'");
    INFO("CLI: exit " << r.code << ", " << r.out << r.err);
    CHECK(r.code == want.exit_code);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["valid"] == false);
    CHECK(j["error_kind"] == want.name);
  }
  // Every input kind the configs can produce is covered.
  CHECK(kinds == std::set<std::string>{"bad_input", "config_mismatch", "unsupported"});
}
