// The fkv-jit binary: output, JSON, and exit codes (docs/cli.md) of validate and plan.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "fkv/cache.hpp"
#include "fkv/version.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Result = fkv_test::CliResult;
using fkv_test::slurp;

const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "fkv-test-cli-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return fs::path(tmpl);
  }();
  return dir;
}

// Runs `fkv-jit ARGS` through the shell (ARGS is shell text), capturing stdout and stderr.
Result run(const std::string& args, const std::string& env = "") {
  return fkv_test::run_cli(scratch(), args, env);
}

std::string data(const std::string& name) {
  return "'" + std::string(FKV_TEST_DATA_DIR) + "/" + name + ".json'";
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return "'" + p.string() + "'";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("validate: a uniform config exits 0 and prints the resolved spec", "[cli]") {
  const Result r = run("validate " + data("qwen3-8b"));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "valid for the fused KV path"));
  CHECK(contains(r.out, "num_kv_heads      8\n"));
  CHECK(contains(r.out, "head_dim          128\n"));
  CHECK(contains(r.out, "rotary_dim        128\n"));
  CHECK(contains(r.out, "neox              True\n"));
  CHECK(contains(r.out, "k_norm            rms\n"));
  CHECK(contains(r.out, "theta=1000000.0"));
  CHECK(contains(r.out, "attention layers  36 (0-35)\n"));
  CHECK(contains(r.out, "skipped layers    none\n"));
}

TEST_CASE("validate: skipped layers keep their numbering", "[cli]") {
  const Result r = run("validate " + data("qwen3.5-9b"));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "attention layers  8 (3, 7, 11, 15, 19, 23, 27, 31)\n"));
  CHECK(contains(r.out, "skipped layers    0-2, 4-6, 8-10,"));
}

TEST_CASE("validate: a mismatch exits 1 with the seed's text on stderr", "[cli]") {
  const Result r = run("validate " + data("smollm3-3b"));
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "fkv-jit: error: RoPE config mismatch across layers for fused KV path: expected "
        "(rotary_dim=128, neox=True), got (rotary_dim=0, neox=True) at layer 3.\n");

  // A synthetic model in the explicit schema, mismatch at a random layer.
  std::mt19937 gen(std::random_device{}());
  const int n = std::uniform_int_distribution<int>(2, 30)(gen);
  const int at = std::uniform_int_distribution<int>(1, n - 1)(gen);
  INFO("n=" << n << " at=" << at);
  json doc = {{"fkv", {{"layers", json::array()}}}};
  for (int i = 0; i < n; ++i)
    doc["fkv"]["layers"].push_back({{"num_kv_heads", i == at ? 2 : 8}, {"head_dim", 128}});
  const Result s = run("validate " + write("mismatch.json", doc.dump()));
  CHECK(s.code == 1);
  CHECK(s.err ==
        "fkv-jit: error: num_kv_heads mismatch across layers for fused KV path: "
        "expected 8, got 2 at layer " +
            std::to_string(at) + ".\n");
}

TEST_CASE("validate: unsupported layers exit 9 (unsupported) naming the layer", "[cli]") {
  const Result r = run("validate " + data("kimi-k2"));
  CHECK(r.code == 9);
  CHECK(contains(r.err, "fkv-jit: error: "));
  CHECK(contains(r.err, "layer 0:"));
}

TEST_CASE("validate: unreadable or malformed input exits 2", "[cli]") {
  SECTION("missing file") {
    const Result r = run("validate '" + (scratch() / "no-such-config.json").string() + "'");
    CHECK(r.code == 2);
    CHECK(r.err.rfind("fkv-jit: error: ", 0) == 0);
    CHECK(contains(r.err, "no-such-config.json"));
  }
  SECTION("malformed JSON") {
    const Result r =
        run("validate " + write("broken.json", "{\"num_hidden_layers\": 4,\n  \"head_dim\": }"));
    CHECK(r.code == 2);
    CHECK(r.err.rfind("fkv-jit: error: ", 0) == 0);
    CHECK(contains(r.err, "broken.json"));
    CHECK(contains(r.err, "line 2"));
  }
  SECTION("a bad value") {
    const Result r =
        run("validate " +
            write("negative.json", R"({"layers": [{"num_kv_heads": -8, "head_dim": 128}]})"));
    CHECK(r.code == 2);
    CHECK(contains(r.err, "num_kv_heads"));
  }
}

TEST_CASE("usage errors exit 3", "[cli]") {
  for (const std::string args : {"", "validate", "frobnicate", "validate x.json --frob",
                                 "--log-level loud validate x.json", "plan"}) {
    INFO("args: " << args);
    const Result r = run(args);
    CHECK(r.code == 3);
    CHECK(r.err.rfind("fkv-jit: error: ", 0) == 0);
  }
  // A malformed environment variable is bad input (2), not a usage error: no option was given.
  CHECK(run("validate " + data("qwen3-8b"), "FKV_LOG_LEVEL=loud").code == 2);
  CHECK(run("--log-level debug validate " + data("qwen3-8b")).code == 0);
}

TEST_CASE("--help and --version exit 0", "[cli]") {
  const Result help = run("--help");
  CHECK(help.code == 0);
  CHECK(contains(help.out, "validate"));
  CHECK(contains(help.out, "plan"));
  const Result version = run("--version");
  CHECK(version.code == 0);
  CHECK(contains(version.out, std::string("fkv-jit ") + fkv::kVersion));
}

TEST_CASE("validate --json prints one parseable object", "[cli]") {
  SECTION("valid") {
    const Result r = run("validate --json " + data("qwen3.5-9b"));
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == true);
    CHECK(j["spec"]["num_kv_heads"] == 4);
    CHECK(j["spec"]["head_dim"] == 256);
    CHECK(j["spec"]["rotary_dim"] == 64);
    CHECK(j["spec"]["is_neox_style"] == true);
    CHECK(j["spec"]["k_norm"] == "rms_one_plus");
    CHECK(j["spec"]["rope"]["theta"] == 10000000.0);
    CHECK(j["attention_layers"] == json({3, 7, 11, 15, 19, 23, 27, 31}));
    CHECK(j["skipped_layers"].size() == 24);
    REQUIRE(j["layers"].size() == 32);
    CHECK(j["layers"][3]["head_dim"]["value"] == 256);
    CHECK_FALSE(j["layers"][3]["head_dim"]["source"].get<std::string>().empty());
    CHECK(j["layers"][0]["kind"]["value"] == "none");
  }
  SECTION("mismatch") {
    const Result r = run("validate --json " + data("gemma3-4b-it"));
    CHECK(r.code == 1);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == false);
    CHECK(j["error_kind"] == "config_mismatch");
    CHECK(j["error"] ==
          "RoPE frequency mismatch across layers for fused KV path: expected (theta=10000.0, "
          "scaling=default), got (theta=1000000.0, scaling=linear(factor=8.0)) at layer 5.");
  }
  SECTION("malformed") {
    const Result r = run("validate --json " + write("trunc.json", "{\"layers\": ["));
    CHECK(r.code == 2);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == false);
    CHECK(j["error_kind"] == "bad_input");
    CHECK(contains(j["error"].get<std::string>(), "trunc.json"));
  }
  SECTION("grouped") {
    const Result r = run("validate --json --grouped " + data("smollm3-3b"));
    CHECK(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == true);
    REQUIRE(j["groups"].size() == 2);
    CHECK(j["groups"][1]["spec"]["rotary_dim"] == 0);
    CHECK(j["groups"][1]["spec"]["rope"].is_null());
  }
}

TEST_CASE("validate --explain shows each layer's values and sources", "[cli]") {
  const Result r = run("validate --explain " + data("qwen3-8b"));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "layer 0: full_attention"));
  CHECK(contains(r.out, "layer 35: full_attention"));
  CHECK(contains(r.out, "[num_key_value_heads]"));
  CHECK(contains(r.out, "[head_dim]"));
  CHECK(contains(r.out, "valid for the fused KV path"));

  // On a mismatch the per-layer values are still printed, then the error.
  const Result m = run("validate --explain " + data("smollm3-3b"));
  CHECK(m.code == 1);
  CHECK(contains(m.out, "layer 3: full_attention"));
  CHECK(contains(m.out, "no_rope_layers"));
  CHECK(contains(m.err, "at layer 3."));
}

TEST_CASE("validate --grouped accepts what grouped mode can serve", "[cli]") {
  const Result r = run("validate --grouped " + data("gemma3-4b-it"));
  CHECK(r.code == 0);
  CHECK(contains(r.out, "grouped mode (2 groups)"));
}

TEST_CASE("plan prints the groups", "[cli]") {
  SECTION("smollm3: NoPE layers form their own group") {
    const Result r = run("plan " + data("smollm3-3b"));
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(contains(r.out, "2 groups (grouped mode), 36 attention layers, 0 skipped"));
    CHECK(contains(r.out, "group 0: 27 layers: 0-2, 4-6,"));
    CHECK(contains(r.out, "group 1: 9 layers: 3, 7, 11, 15, 19, 23, 27, 31, 35\n"));
    CHECK(contains(r.out, "num_kv_heads=4  head_dim=128  rotary_dim=0  neox=True  k_norm=none"));
    CHECK(contains(r.out, "rope: theta=5000000.0, scaling=default"));
    CHECK(contains(r.out, "rope: none (NoPE)"));
  }
  SECTION("--strict fails like validate") {
    const Result r = run("plan --strict " + data("smollm3-3b"));
    CHECK(r.code == 1);
    CHECK(contains(r.err, "RoPE config mismatch across layers for fused KV path"));
    CHECK(run("plan --strict " + data("qwen3-8b")).code == 0);
  }
  SECTION("--json") {
    const Result r = run("plan --json " + data("gemma3-4b-it"));
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    REQUIRE(j["groups"].size() == 2);
    CHECK(j["groups"][1]["layers"] == json({5, 11, 17, 23, 29}));
    CHECK(j["groups"][1]["spec"]["rope"]["theta"] == 1000000.0);
    CHECK(j["groups"][1]["spec"]["rope"]["scaling_type"] == "linear");
    CHECK(j["groups"][0]["spec"]["rope"]["theta"] == 10000.0);
  }
  SECTION("skipped layers") {
    const Result r = run("plan " + data("qwen3.5-9b"));
    CHECK(r.code == 0);
    CHECK(contains(r.out, "1 group (grouped mode), 8 attention layers, 24 skipped"));
    CHECK(contains(r.out, "skipped layers: 0-2, 4-6, 8-10,"));
  }
  SECTION("missing file") { CHECK(run("plan /nonexistent/config.json").code == 2); }
}

// ---- precompile, cache verify --config (issue 15 item 1, issue 13 items 5, 7, 8) ------------

namespace {

// A fresh private directory under scratch() (mode 0700, as the cache requires).
std::string fresh_dir(const std::string& name) {
  const fs::path p = scratch() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  fs::permissions(p, fs::perms::owner_all);
  return p.string();
}

std::size_t count_files(const std::string& dir, const std::string& ext) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

const std::string kDraft = "dflash-qwen3-4b-draft";  // one group: 2 kernels (stacked, pool)

}  // namespace

TEST_CASE("precompile --arch sm_90a builds what Hopper loads; cache verify --config finds it",
          "[cli][nvrtc]") {
  const std::string dir = fresh_dir("baked");
  const Result p = run("precompile " + data(kDraft) + " --arch sm_90a --cache-dir '" + dir + "'");
  INFO(p.out << p.err);
  REQUIRE(p.code == 0);
  CHECK(contains(p.err, "note: --arch sm_90a"));
  CHECK(contains(p.err, "sm_90"));
  CHECK(contains(p.out, "2 kernels (2 compiled, 0 cache hits)"));
  CHECK(!contains(p.out, "sm_90a"));
  CHECK(fs::is_directory(fs::path(dir) / "v1"));
  CHECK(count_files(dir, ".cubin") == 2);

  const Result ok =
      run("cache verify --config " + data(kDraft) + " --arch sm_90 --cache-dir '" + dir + "'");
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK(contains(ok.out, "2 kernels needed, 2 present and valid, 0 missing or bad"));

  // Kernels for another device, or another variant option, are not there: exit 8.
  const Result other =
      run("cache verify --config " + data(kDraft) + " --arch sm_80 --cache-dir '" + dir + "'");
  CHECK(other.code == 8);
  CHECK(contains(other.out, "MISSING"));
  const Result int32 = run("cache verify --config " + data(kDraft) +
                           " --arch sm_90 --index-dtype int32 --cache-dir '" + dir + "'");
  CHECK(int32.code == 8);

  // A removed image is caught.
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".cubin" && contains(e.path().filename().string(), "_pool")) {
      fs::remove(e.path());
      break;
    }
  const Result gone =
      run("cache verify --config " + data(kDraft) + " --arch sm_90 --cache-dir '" + dir + "'");
  CHECK(gone.code == 8);
  CHECK(contains(gone.out, "1 missing or bad"));
  CHECK(contains(gone.err, "fkv-jit: error: 1 of 2 kernels"));

  // --config without --arch is a usage error.
  CHECK(run("cache verify --config " + data(kDraft) + " --cache-dir '" + dir + "'").code == 3);
}

TEST_CASE("precompile exits 8 naming the kernels it could not save", "[cli][nvrtc]") {
  // A root writable by others is refused by the cache (docs/cache.md): memory only.
  const std::string dir = fresh_dir("unsafe-root");
  fs::permissions(dir, fs::perms::all);
  const Result r =
      run("precompile " + data(kDraft) + " --arch sm_80 --mode stacked --cache-dir '" + dir + "'");
  INFO(r.out << r.err);
  CHECK(r.code == 8);
  CHECK(contains(r.out, "NOT SAVED"));
  CHECK(contains(r.err, "nothing was saved: 1 of 1 kernels"));
  CHECK(contains(r.err, "fkv_h8_d128_r128_neox_kn_bf16_bf16_stacked (sm_80)"));
  CHECK(!fs::exists(fs::path(dir) / "v1"));

  const Result j = run("precompile --json " + data(kDraft) +
                       " --arch sm_80 --mode stacked --cache-dir '" + dir + "'");
  CHECK(j.code == 8);
  const json out = json::parse(j.out);  // stdout stays one JSON object; the warning is on stderr
  CHECK(out["ok"] == false);
  CHECK(out["exit_code"] == 8);
  CHECK(out["not_persisted"] == 1);
  CHECK(out["kernels"][0]["persisted"] == false);
  CHECK(contains(j.err, "refusing cache root"));
}

TEST_CASE("precompile --decode H200 adds the decode-size kernels FusedKVMaterializer loads there",
          "[cli][nvrtc]") {
  const std::string dir = fresh_dir("decode");
  const Result r =
      run("precompile " + data(kDraft) + " --arch sm_90 --decode h200 --cache-dir '" + dir + "'");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // The two epilogue kernels, and the 8-token bucket (the H200's crossover) stacked and pool.
  CHECK(contains(r.out, "4 kernels (4 compiled, 0 cache hits)"));
  CHECK(contains(r.out, "fkvdec_h8_d128_r128_neox_kn_bf16_bf16_stacked_L5_x2560_tb8"));
  CHECK(contains(r.out, "fkvdec_h8_d128_r128_neox_kn_bf16_bf16_pool_L5_x2560_tb8"));
  CHECK(count_files(dir, ".cubin") == 4);

  // cache verify and source take the same option: all four present; without the decode kernels
  // the baked cache is incomplete (exit 8); source prints the decode kernels after the others.
  const Result ok = run("cache verify --config " + data(kDraft) +
                        " --arch sm_90 --decode H200 --cache-dir '" + dir + "'");
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK(contains(ok.out, "4 kernels needed, 4 present and valid, 0 missing or bad"));
  const std::string plain = fresh_dir("decode-plain");
  CHECK(run("precompile " + data(kDraft) + " --arch sm_90 --cache-dir '" + plain + "'").code == 0);
  const Result lacking = run("cache verify --config " + data(kDraft) +
                             " --arch sm_90 --decode H200 --cache-dir '" + plain + "'");
  CHECK(lacking.code == 8);
  CHECK(contains(lacking.out, "2 missing or bad"));
  const Result src = run("source " + data(kDraft) + " --decode H200 --index 3");
  CHECK(src.code == 0);
  CHECK(contains(src.out, "fkvdec_h8_d128_r128_neox_kn_bf16_bf16_pool_L5_x2560_tb8"));
  CHECK(contains(src.out, "fkv_kernels::fused_proj_kv<2560, 5, 8, 128, 128"));

  // A GPU with no measured crossover is a usage error that lists the measured ones.
  const Result unknown =
      run("precompile " + data(kDraft) + " --arch sm_90 --decode A100 --cache-dir '" + dir + "'");
  CHECK(unknown.code == 3);
  CHECK(contains(unknown.err, "no measured crossover for that GPU; measured: H200 (132 SMs)"));

  // A model the decode kernel cannot take (36 layers, more than one launch covers) gets a note
  // and its epilogue kernels only.
  const Result big = run("precompile " + data("qwen3-8b") + " --arch sm_90 --decode H200 " +
                         "--cache-dir '" + dir + "'");
  INFO(big.out << big.err);
  CHECK(big.code == 0);
  CHECK(contains(big.err, "this plan takes no decode-size kernel"));
  CHECK(contains(big.out, "2 kernels"));
}

TEST_CASE("precompile --weights adds the kernels a materializer builds for quantized weights",
          "[cli][nvrtc]") {
  const std::string dir = fresh_dir("weights");
  // Block-scaled FP8, pool only: the pool epilogue, the decode kernels over the stored bytes
  // for every bucket (the crossover of quantized weights is 32 or 64 tokens), the dequantize
  // kernel and the FP8 GEMM's activation quantizer (per token and 128 columns).
  const Result r =
      run("precompile " + data(kDraft) +
          " --arch sm_90 --mode pool --decode H200 --weights fp8_block --cache-dir '" + dir + "'");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "7 kernels (7 compiled, 0 cache hits)"));
  for (const char* tb : {"tb8", "tb16", "tb32", "tb64"})
    CHECK(contains(r.out, std::string("fkvdec_h8_d128_r128_neox_kn_bf16_bf16_pool_L5_x2560_") + tb +
                              "_fp8_block"));
  CHECK(contains(r.out, "fkvdeq_fp8_block_bf16_x2560"));
  CHECK(contains(r.out, "fkvqact_bf16_x2560_g128"));
  // cache verify takes the same options: all present; a cache baked without --weights lacks
  // the six quantized kernels.
  const Result ok =
      run("cache verify --config " + data(kDraft) +
          " --arch sm_90 --mode pool --decode H200 --weights fp8_block --cache-dir '" + dir + "'");
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  const std::string plain = fresh_dir("weights-plain");
  CHECK(run("precompile " + data(kDraft) + " --arch sm_90 --mode pool --cache-dir '" + plain + "'")
            .code == 0);
  const Result lacking = run("cache verify --config " + data(kDraft) +
                             " --arch sm_90 --mode pool --decode H200 --weights fp8_block " +
                             "--cache-dir '" + plain + "'");
  CHECK(lacking.code == 8);
  CHECK(contains(lacking.out, "6 missing or bad"));
  // Without --decode, INT8 weights add the dequantize kernel and the INT8 GEMM's activation
  // split and combine, in that order, after the epilogue kernels.
  const Result src = run("source " + data(kDraft) + " --mode pool --weights int8");
  INFO(src.out << src.err);
  CHECK(src.code == 0);
  const std::size_t deq = src.out.find("fkvdeq_int8_channel_bf16_x2560");
  const std::size_t split = src.out.find("fkvsplit8_bf16_x2560");
  const std::size_t combine = src.out.find("fkvcombine8_bf16");
  CHECK(deq != std::string::npos);
  CHECK(split != std::string::npos);
  CHECK(combine != std::string::npos);
  CHECK((deq < split && split < combine));

  // A packed 4-bit scheme is refused by name (exit 9); a name that is no format is a usage
  // error listing the formats (exit 3).
  auto with_weights = [&](const std::string& name) {
    return run("precompile " + data(kDraft) + " --arch sm_90 --weights " + name + " --cache-dir '" +
               dir + "'");
  };
  const Result awq = with_weights("awq");
  CHECK(awq.code == 9);
  CHECK(contains(awq.err, "--weights: "));
  CHECK(contains(awq.err, "awq"));
  const Result bad = with_weights("fp9");
  CHECK(bad.code == 3);
  CHECK(contains(bad.err, "fp8_tensor"));
}

TEST_CASE("precompile --json: one object on stdout, progress and logs on stderr", "[cli][nvrtc]") {
  const std::string dir = fresh_dir("json-root");
  const Result r = run("--log-level trace precompile --json " + data(kDraft) +
                       " --arch 8.0 --mode pool --cache-dir '" + dir + "'");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  const json out = json::parse(r.out);
  REQUIRE(out["ok"] == true);
  CHECK(out["compiled"] == 1);
  CHECK(out["kernels"][0]["arch"] == "sm_80");
  CHECK(out["kernels"][0]["persisted"] == true);
  CHECK(contains(r.err, "[debug]"));  // the library's log lines, not in stdout
  CHECK(contains(r.err, "[1/1]"));
}

TEST_CASE("--json output is valid JSON for every error, bad UTF-8 included", "[cli]") {
  SECTION("a usage error") {
    const Result r = run("validate --json --frob " + data("qwen3-8b"));
    CHECK(r.code == 3);
    const json j = json::parse(r.out);
    CHECK(j["ok"] == false);
    CHECK(j["exit_code"] == 3);
    CHECK(contains(j["error"].get<std::string>(), "--frob"));
  }
  SECTION("malformed UTF-8 in the config") {
    const Result r =
        run("validate --json " + write("latin1.json", "{\"model_type\": \"caf\xe9\", \"x\": }"));
    CHECK(r.code == 2);
    const json j = json::parse(r.out);
    CHECK(j["ok"] == false);
    CHECK(j["exit_code"] == 2);
  }
  SECTION("malformed UTF-8 in the path") {
    const Result r = run("validate --json " + write("caf\xe9.json", "{}"));
    CHECK(r.code != 0);
    const json j = json::parse(r.out);
    CHECK(j["ok"] == false);
    CHECK(contains(j["config"].get<std::string>(), "caf\xef\xbf\xbd.json"));  // U+FFFD
  }
  SECTION("an error of a command without its own JSON error form") {
    const Result r = run("precompile --json " + data(kDraft) + " --arch compute_90");
    CHECK(r.code == 3);
    const json j = json::parse(r.out);
    CHECK(j["exit_code"] == 3);
  }
}

TEST_CASE("control characters from a config are escaped on the terminal", "[cli]") {
  const Result r = run(
      "validate " +
      write("esc.json", R"({"model_type": "x\u001b]0;owned\u0007\r", "num_hidden_layers": 2})"));
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  CHECK(r.err.find('\a') == std::string::npos);
  CHECK(contains(r.err, "\\x1b]0;owned\\x07\\x0d"));
}

TEST_CASE("CLI edges: empty paths, arch names, job counts, indices, unknown commands", "[cli]") {
  const std::string cfg = data(kDraft);
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"precompile " + cfg + " --arch sm_90 --cache-dir ''", "--cache-dir"},
           {"cache ls --cache-dir ''", "--cache-dir"},
           {"precompile " + cfg + " --arch compute_90", "sm_90"},
           {"precompile " + cfg + " --arch sm_1", "'sm_1' is not a GPU arch"},
           {"precompile " + cfg + " --arch hopper", "'hopper' is not a GPU arch"},
           {"precompile " + cfg + " --arch sm_90 -j 0", "-j"},
           {"precompile " + cfg + " --arch sm_90 -j -1", "-j"},
           {"source " + cfg + " --index -1", "--index"},
           {"source " + cfg + " --index 2", "out of range"},
           {"frobnicate", "unknown subcommand 'frobnicate' (commands: validate, plan, precompile"},
           {"cache frob",
            "unknown subcommand 'frob' for 'cache' (commands: ls, verify, prune, clear)"},
       }) {
    INFO("args: " << c.args);
    const Result r = run(c.args);
    INFO(r.err);
    CHECK(r.code == 3);
    CHECK(contains(r.err, c.says));
    CHECK(!contains(r.err, "sm_01"));
  }
  // An arch older than sm_80 is a compile error (exit 4) naming what is supported.
  const Result old = run("precompile " + cfg + " --arch sm_75");
  CHECK(old.code == 4);
  CHECK(contains(old.err, "compute capability 7.5"));
}

TEST_CASE("a bad environment value is bad input (exit 2) for every command", "[cli]") {
  for (const std::string& args :
       std::vector<std::string>{"validate " + data(kDraft), "cache ls --cache-dir /tmp"}) {
    INFO(args);
    const Result r = run(args, "FKV_CACHE_MAX_BYTES=0");
    CHECK(r.code == 2);
    CHECK(contains(r.err, "FKV_CACHE_MAX_BYTES"));
    CHECK(r.out.empty());
  }
}

// ---- cache, files and the CLI (issue 23, part B) ----------------------------------------------

namespace {

// `n` committed entries with fake images in `root`, written through the library, as a
// precompile would leave them; returns their image paths.
std::vector<fs::path> fake_entries(const std::string& root, int n = 2) {
  fkv::CacheOptions o;
  o.root = root;
  fkv::KernelCache cache(o);
  std::vector<fs::path> out;
  for (int i = 0; i < n; ++i) {
    const std::string v = "fake" + std::to_string(i);
    const fkv::CacheKey key = fkv::CacheKey::from_fields({{"schema", "1"},
                                                          {"nvrtc", "12.8"},
                                                          {"arch", "sm_90"},
                                                          {"output", "cubin"},
                                                          {"kernel", "fused_kv<" + v + ">"}});
    out.push_back(cache
                      .get(key, "fused_kv_" + v,
                           [&] {
                             fkv::CompiledKernel k;
                             k.image = std::string(600, 'a' + static_cast<char>(i));
                             k.lowered_name = "_Z8fused_kv" + v;
                             return k;
                           })
                      .path);
    REQUIRE(!out.back().empty());
  }
  return out;
}

fs::path meta_path(const fs::path& image) {
  fs::path m = image;
  return m.replace_extension(".meta.json");
}

}  // namespace

TEST_CASE("a FIFO at an entry path hangs no cache command", "[cli][fifo]") {
  // Before: open() of the FIFO waited for a writer forever. `timeout` turns a hang into 124.
  const std::string dir = fresh_dir("fifo");
  const std::vector<fs::path> images = fake_entries(dir);
  fs::remove(meta_path(images[0]));
  REQUIRE(::mkfifo(meta_path(images[0]).c_str(), 0600) == 0);
  fs::remove(images[1]);
  REQUIRE(::mkfifo(images[1].c_str(), 0600) == 0);
  const Result ls = run("cache ls --cache-dir '" + dir + "'", "timeout 60");
  INFO(ls.out << ls.err);
  CHECK(ls.code == 0);
  CHECK(contains(ls.out, "it is a FIFO, not a regular file"));
  CHECK(contains(ls.out, "2 entries"));
  const Result verify = run("cache verify --cache-dir '" + dir + "'", "timeout 60");
  INFO(verify.out << verify.err);
  CHECK(verify.code == 6);  // bad entries, removed
  CHECK(contains(verify.out, "2 bad (2 removed"));
  CHECK(run("cache verify --cache-dir '" + dir + "'", "timeout 60").code == 0);
}

TEST_CASE("a FIFO in a precompiled cache hangs neither precompile nor verify --config",
          "[cli][fifo][nvrtc]") {
  const std::string dir = fresh_dir("fifo-precompile");
  const std::string args = data(kDraft) + " --arch sm_90 --cache-dir '" + dir + "'";
  REQUIRE(run("precompile " + args).code == 0);
  fs::path meta;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (contains(e.path().filename().string(), "_pool") &&
        contains(e.path().filename().string(), ".meta.json"))
      meta = e.path();
  REQUIRE(!meta.empty());
  fs::remove(meta);
  REQUIRE(::mkfifo(meta.c_str(), 0600) == 0);
  const Result check = run("cache verify --config " + args, "timeout 60");
  INFO(check.out << check.err);
  CHECK(check.code == 8);
  CHECK(contains(check.out, "BAD"));
  const Result again = run("precompile " + args, "timeout 120");
  INFO(again.out << again.err);
  CHECK(again.code == 0);
  CHECK(contains(again.out, "2 kernels (1 compiled, 1 cache hits)"));
  CHECK(run("cache verify --config " + args, "timeout 60").code == 0);
}

TEST_CASE("precompile under a size cap smaller than its kernels keeps them all and exits 8",
          "[cli][nvrtc]") {
  // Before: exit 0 with every kernel "persisted", while the run's own prune had evicted some;
  // `cache verify --config` then reported them MISSING.
  const std::string dir = fresh_dir("cap");
  const std::string args = data(kDraft) + " --arch sm_90 --cache-dir '" + dir + "'";
  const Result r = run("precompile " + args, "FKV_CACHE_MAX_BYTES=1K");
  INFO(r.out << r.err);
  CHECK(r.code == 8);
  CHECK(contains(r.err, "more than the cache's size cap of 1024 bytes (FKV_CACHE_MAX_BYTES)"));
  CHECK(count_files(dir, ".cubin") == 2);
  const Result v = run("cache verify --config " + args);
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  const Result j = run("precompile --json " + args, "FKV_CACHE_MAX_BYTES=1K");
  CHECK(j.code == 8);
  const json out = json::parse(j.out);
  CHECK(out["ok"] == false);
  CHECK(out["not_persisted"] == 0);
  CHECK(contains(out["error"].get<std::string>(), "FKV_CACHE_MAX_BYTES=1024"));
  CHECK(run("precompile " + args, "FKV_CACHE_MAX_BYTES=1G").code == 0);
}

TEST_CASE("precompile --cache-dir writes every kernel there, read-only roots or not",
          "[cli][nvrtc]") {
  // Before: `FKV_CACHE_READONLY_DIRS=old precompile --cache-dir NEW` reported "2 cache hits",
  // exited 0 and left NEW empty.
  const std::string old_dir = fresh_dir("ro-old"), new_dir = fresh_dir("ro-new");
  REQUIRE(run("precompile " + data(kDraft) + " --arch sm_90 --cache-dir '" + old_dir + "'").code ==
          0);
  const Result r = run("precompile " + data(kDraft) + " --arch sm_90 --cache-dir '" + new_dir + "'",
                       "FKV_CACHE_READONLY_DIRS='" + old_dir + "'");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "2 kernels (0 compiled, 2 cache hits)"));  // copied, not rebuilt
  CHECK(count_files(new_dir, ".cubin") == 2);
  CHECK(contains(r.out, new_dir));
  const Result v =
      run("cache verify --config " + data(kDraft) + " --arch sm_90 --cache-dir '" + new_dir + "'",
          "FKV_CACHE_READONLY_DIRS=");
  INFO(v.out << v.err);
  CHECK(v.code == 0);
}

TEST_CASE("cache clear and prune count only real removals and exit 6 naming each failure",
          "[cli]") {
  SECTION("a directory at an entry's meta path") {
    // Before: "removed 2 entries", exit 0.
    const std::string dir = fresh_dir("clear-eisdir");
    const std::vector<fs::path> images = fake_entries(dir);
    fs::remove(meta_path(images[0]));
    fs::create_directory(meta_path(images[0]));
    const Result clear = run("cache clear --cache-dir '" + dir + "'");
    INFO(clear.out << clear.err);
    CHECK(clear.code == 6);
    CHECK(contains(clear.out, "removed 1 entries"));
    CHECK(
        contains(clear.err, "cannot remove " + meta_path(images[0]).string() + ": Is a directory"));
    CHECK(!contains(clear.err, "disk full"));
    const Result prune = run("cache prune --max-bytes 0 --cache-dir '" + dir + "'");
    INFO(prune.out << prune.err);
    CHECK(prune.code == 6);
    CHECK(contains(prune.out, "removed 0 B"));
    CHECK(contains(prune.err, "Is a directory"));
    fs::remove(meta_path(images[0]));
    CHECK(run("cache clear --cache-dir '" + dir + "'").code == 0);
  }
  SECTION("an entry directory this user cannot write") {
    if (::geteuid() != 0 || std::system("command -v setpriv >/dev/null") != 0) {
      WARN("needs root and setpriv to run the CLI as uid 65534: skipped");
      return;
    }
    // A directory uid 65534 can reach, holding a cache of uid 65534 with one read-only entry
    // directory (root ignores directory modes, so the command runs as 65534).
    std::string tmpl = "/tmp/fkv-cli-nobody-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    const fs::path base = tmpl;
    fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const std::string dir = (base / "cache").string();
    fs::create_directory(dir);
    fs::permissions(dir, fs::perms::owner_all);
    const std::vector<fs::path> images = fake_entries(dir);
    for (const auto& e : fs::recursive_directory_iterator(dir))
      REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
    REQUIRE(::lchown(dir.c_str(), 65534, 65534) == 0);
    fs::permissions(images[0].parent_path(), fs::perms::owner_read | fs::perms::owner_exec);
    const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    const Result clear = run("cache clear --cache-dir '" + dir + "'", as_nobody);
    INFO(clear.out << clear.err);
    CHECK(clear.code == 6);
    CHECK(contains(clear.out, "removed 0 entries"));
    CHECK(contains(clear.err, "Permission denied"));
    const Result prune = run("cache prune --max-bytes 0 --cache-dir '" + dir + "'", as_nobody);
    INFO(prune.out << prune.err);
    CHECK(prune.code == 6);
    CHECK(contains(prune.out, "removed 0 B"));
    CHECK(fs::exists(images[0]));
    CHECK(fs::exists(images[1]));
    fs::permissions(images[0].parent_path(), fs::perms::owner_all);
    fs::remove_all(base);
  }
}

TEST_CASE("cache verify reports unusable entry directories (exit 6)", "[cli]") {
  // Before: "0 entries checked", exit 0, while every lookup for those kernels ran memory-only.
  const std::string dir = fresh_dir("unusable");
  fake_entries(dir, 1);
  const fs::path elsewhere = fresh_dir("unusable-target");
  fs::create_directory_symlink(elsewhere, fs::path(dir) / "v1" / "nvrtc-13.0");
  const Result v = run("cache verify --cache-dir '" + dir + "'");
  INFO(v.out << v.err);
  CHECK(v.code == 6);
  CHECK(contains(v.out, "unusable directory: " + dir + "/v1/nvrtc-13.0 is a symbolic link"));
  CHECK(contains(v.out, "1 unusable directories"));
  CHECK(contains(v.err, "unusable cache directories"));
  const Result ls = run("cache ls --cache-dir '" + dir + "'");
  CHECK(ls.code == 0);
  CHECK(contains(ls.out, "unusable directory"));
  fs::remove(fs::path(dir) / "v1" / "nvrtc-13.0");
  if (::geteuid() == 0) {  // an arch directory of another user
    const fs::path other = fs::path(dir) / "v1" / "nvrtc-12.8" / "sm_80";
    fs::create_directory(other);
    fs::permissions(other, fs::perms::owner_all);
    REQUIRE(::lchown(other.c_str(), 65534, 65534) == 0);
    const Result o = run("cache verify --cache-dir '" + dir + "'");
    INFO(o.out << o.err);
    CHECK(o.code == 6);
    CHECK(contains(o.out, "owned by uid 65534"));
    fs::remove(other);
  }
  CHECK(run("cache verify --cache-dir '" + dir + "'").code == 0);
}

TEST_CASE("cache verify skips a publish in progress", "[cli]") {
  // Before: another process's uncommitted image (between its two renames) made verify exit 6.
  const std::string dir = fresh_dir("in-progress");
  const std::vector<fs::path> images = fake_entries(dir, 1);
  const fs::path d = images[0].parent_path();
  std::ofstream(d / ("fused_kv_next-" + std::string(32, 'a') + ".cubin")) << "half a publish";
  std::ofstream(d / ("fused_kv_next-" + std::string(32, 'a') + ".meta.json.tmp.7.0.ff")) << "{";
  const Result v = run("cache verify --cache-dir '" + dir + "'");
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(contains(v.out, "1 entries checked, 0 bad"));
  const Result ls = run("cache ls --cache-dir '" + dir + "'");
  CHECK(contains(ls.out, "writing"));
}

TEST_CASE("control characters in cache paths are escaped on the terminal", "[cli][security]") {
  // Before: `cache ls` printed raw ESC from file names, and the library's warnings printed the
  // cache root raw.
  const std::string dir = fresh_dir("escape");
  const std::vector<fs::path> images = fake_entries(dir, 1);
  std::ofstream(images[0].parent_path() /
                ("evil\x1b]0;owned\x07-" + std::string(32, 'b') + ".meta.json"))
      << "{}";
  const Result ls = run("cache ls --cache-dir '" + dir + "'");
  INFO(ls.out << ls.err);
  CHECK(ls.code == 0);
  CHECK(ls.out.find('\x1b') == std::string::npos);
  CHECK(ls.out.find('\x07') == std::string::npos);
  CHECK(contains(ls.out, "evil\\x1b]0;owned\\x07"));

  const std::string open_root = fresh_dir("root\x1b[31m");
  fs::permissions(open_root, fs::perms::all);  // refused with a warning naming it
  const Result w = run("cache ls --cache-dir '" + open_root + "'");
  INFO(w.err);
  CHECK(w.err.find('\x1b') == std::string::npos);
  CHECK(contains(w.err, "root\\x1b[31m"));
  CHECK(contains(w.err, "refusing cache root"));
}

TEST_CASE("precompile names the real cause when an entry path is a directory", "[cli][nvrtc]") {
  // Before: the summary guessed "disk full, quota, read-only file system".
  const std::string dir = fresh_dir("dir-at-entry");
  const std::string args = data(kDraft) + " --arch sm_80 --mode stacked --cache-dir '" + dir + "'";
  REQUIRE(run("precompile " + args).code == 0);
  fs::path image;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".cubin") image = e.path();
  REQUIRE(!image.empty());
  fs::remove(image);
  fs::remove(meta_path(image));
  fs::create_directory(image);
  const Result r = run("precompile " + args);
  INFO(r.out << r.err);
  CHECK(r.code == 8);
  CHECK(contains(r.err, "Is a directory"));
  CHECK(!contains(r.err, "disk full"));
  const Result clear = run("cache clear --cache-dir '" + dir + "'");
  INFO(clear.out << clear.err);
  CHECK(clear.code == 6);
  CHECK(contains(clear.err, image.string() + ": Is a directory"));
}

TEST_CASE("round-3 edges: --tp 0, FKV_DECODE_CROSSOVER's range, a relative HOME", "[cli]") {
  const Result tp = run("precompile " + data(kDraft) + " --arch sm_90 --tp 0");
  INFO(tp.err);
  CHECK(tp.code == 3);  // a usage error, as -j 0 is (before: 2)
  CHECK(contains(tp.err, "--tp"));
  const Result big = run("validate " + data(kDraft), "FKV_DECODE_CROSSOVER=1073741824");
  INFO(big.err);
  CHECK(big.code == 2);
  CHECK(contains(big.err, "from 0 (never) to 999999999"));
  const Result home = run("cache ls", "env -u FKV_CACHE_DIR -u XDG_CACHE_HOME HOME=relative-home");
  INFO(home.err);
  CHECK(home.code == 6);
  CHECK(contains(home.err, "absolute XDG_CACHE_HOME or HOME"));
}

TEST_CASE("config refusals exit 9, broken files 2, Python-JSON literals 0 (issue 24)", "[cli]") {
  SECTION("an unknown model_type: three lines at most, no family list") {
    const Result r =
        run("validate " + write("unknown.json",
                                R"({"model_type": "qwen3_mystery", "num_hidden_layers": 2,
                                                 "hidden_size": 512, "num_attention_heads": 4})"));
    CHECK(r.code == 9);
    CHECK(contains(r.err, "\"qwen3_mystery\""));
    CHECK(contains(r.err, "Nearest supported model_types"));
    size_t lines = 0;
    for (char c : r.err) lines += c == '\n';
    CHECK(lines <= 3);
  }
  SECTION("a refused model_type, also beside the explicit schema") {
    const Result r = run("validate " + write("mamba.json",
                                             R"({"model_type": "mamba", "num_hidden_layers": 1,
                                                 "fkv": {"layers": [{"num_kv_heads": 1, "head_dim": 64}]}})"));
    CHECK(r.code == 9);
    CHECK(contains(r.err, "not supported"));
  }
  SECTION("MLA keys beside the explicit schema") {
    const Result r =
        run("validate " +
            write("mla.json",
                  R"({"model_type": "mystery", "num_hidden_layers": 1, "kv_lora_rank": 512,
                                                 "fkv": {"layers": [{"num_kv_heads": 1, "head_dim": 64}]}})"));
    CHECK(r.code == 9);
    CHECK(contains(r.err, "kv_lora_rank"));
  }
  SECTION("a redundant key that contradicts the layout") {
    const Result r = run(
        "validate " + write("contra.json",
                            R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 512,
                                                 "num_attention_heads": 4, "rotary_pct": 0.5})"));
    CHECK(r.code == 9);
    CHECK(contains(r.err, "contradicts"));
  }
  SECTION("Python-JSON literals are read") {
    const Result r = run(
        "validate " + write("pyjson.json",
                            R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 512,
                                                 "num_attention_heads": 4, "time_step_limit": [0.0, Infinity]})"));
    CHECK(r.code == 0);
  }
  SECTION("a non-finite value where a number is needed is bad input") {
    const Result r = run(
        "validate " + write("inf.json",
                            R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 512,
                                                 "num_attention_heads": 4, "rope_theta": Infinity})"));
    CHECK(r.code == 2);
  }
}

TEST_CASE("probe A: numbers, FKV_LOG_LEVEL, missing and read-only cache roots", "[cli]") {
  SECTION("plan --tp below 1 is a usage error, said plainly") {
    // Before: plan exited 2; precompile said "Value 0 not in range 0.000000 to 1797...".
    for (const std::string& args :
         {"plan " + data(kDraft) + " --tp 0", "plan " + data(kDraft) + " --tp -1",
          "precompile " + data(kDraft) + " --arch sm_90 --tp 0"}) {
      INFO(args);
      const Result r = run(args);
      CHECK(r.code == 3);
      CHECK(contains(r.err, "--tp: must be a positive integer, got '"));
      CHECK(!contains(r.err, "not in range"));
    }
    const Result index = run("source " + data(kDraft) + " --index -1");
    CHECK(index.code == 3);
    CHECK(contains(index.err, "--index: must be 0 or a positive integer, got '-1'"));
  }
  SECTION("a malformed FKV_LOG_LEVEL is bad input naming the variable; any case is read") {
    // Before: exit 3 naming --log-level, and DEBUG was refused.
    const Result bad = run("validate " + data(kDraft), "FKV_LOG_LEVEL=bogus");
    INFO(bad.err);
    CHECK(bad.code == 2);
    CHECK(contains(bad.err, "FKV_LOG_LEVEL"));
    CHECK(!contains(bad.err, "--log-level"));
    CHECK(run("validate " + data(kDraft), "FKV_LOG_LEVEL=DEBUG").code == 0);
    CHECK(run("--log-level Info validate " + data(kDraft)).code == 0);
    CHECK(run("--log-level bogus validate " + data(kDraft)).code == 3);
  }
  SECTION("a cache root that does not exist is reported, never created") {
    // Before: every command created it and exited 0 ("0 entries checked, 0 bad").
    const fs::path typo = fs::path(fresh_dir("typo")) / "x" / "y";
    for (const std::string cmd : {"ls", "verify", "prune --max-bytes 1G", "clear"}) {
      INFO(cmd);
      const Result r = run("cache " + cmd + " --cache-dir '" + typo.string() + "'");
      CHECK(r.code ==
            (cmd == "verify" ? 6 : 0));  // an absent cache is an empty one, not a good one
      CHECK(contains(r.err, "no cache at " + typo.string() + ": the directory does not exist"));
      CHECK(!fs::exists(typo.parent_path()));
    }
    CHECK(run("cache prune --max-bytes 1.5G --cache-dir '" + typo.string() + "'").code == 3);
    // With read-only roots, ls and verify still check those (a host with a baked cache only).
    const std::string baked = fresh_dir("typo-baked");
    fake_entries(baked, 1);
    const Result ls = run("cache ls --cache-dir '" + typo.string() + "'",
                          "FKV_CACHE_READONLY_DIRS='" + baked + "'");
    INFO(ls.out << ls.err);
    CHECK(ls.code == 0);
    CHECK(contains(ls.out, "1 entries"));
    CHECK(contains(ls.err, "no cache at"));
    CHECK(!fs::exists(typo.parent_path()));
  }
  SECTION("a root on a read-only file system is listed and verified read-only") {
    // Before: ls showed 0 entries, verify exited 6, and the refusal said "chmod 700".
    const std::string mnt = fresh_dir("ro-mount");
    if (::geteuid() != 0 ||
        std::system(
            ("mount -t tmpfs -o size=1m,mode=700 tmpfs '" + mnt + "' 2>/dev/null").c_str()) != 0) {
      WARN("needs root and mount: skipped");
      return;
    }
    fake_entries(mnt, 2);
    REQUIRE(std::system(("mount -o remount,ro '" + mnt + "'").c_str()) == 0);
    const Result ls = run("cache ls --cache-dir '" + mnt + "'");
    const Result verify = run("cache verify --cache-dir '" + mnt + "'");
    const Result clear = run("cache clear --cache-dir '" + mnt + "'");
    const int unmounted = std::system(("umount '" + mnt + "'").c_str());
    CHECK(unmounted == 0);
    INFO(ls.out << ls.err << verify.out << verify.err << clear.err);
    CHECK(ls.code == 0);
    CHECK(contains(ls.out, "2 entries, 2.2 KiB, 0 bad, in " + mnt + " (read-only)"));
    CHECK(contains(ls.err, "checked read-only"));
    CHECK(verify.code == 0);
    CHECK(contains(verify.out, "2 entries checked, 0 bad"));
    CHECK(clear.code == 6);
    CHECK(contains(clear.err, "read-only file system: to read a cache there"));
    CHECK(!contains(clear.err, "chmod 700"));
  }
  SECTION("an entry whose image is missing shows the meta file's age") {
    // Before: "last used 20000d ago" (the mtime of a missing file).
    const std::string dir = fresh_dir("no-image");
    const std::vector<fs::path> images = fake_entries(dir, 1);
    fs::remove(images[0]);
    const Result ls = run("cache ls --cache-dir '" + dir + "'");
    INFO(ls.out);
    CHECK(contains(ls.out, "image file is missing"));
    CHECK(contains(ls.out, "s ago"));
    CHECK(!contains(ls.out, "d ago"));
  }
}

namespace {

// The DFlash Qwen3-4B draft with `block` (JSON text) as its quantization_config, written to NAME.
std::string draft_declaring(const std::string& name, const std::string& block) {
  json doc = json::parse(slurp(std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json"));
  doc["quantization_config"] = json::parse(block);
  return write(name, doc.dump());
}

}  // namespace

TEST_CASE("quantization_config: validate reports it, precompile takes it as --weights' default",
          "[cli][quant]") {
  const std::string plain = data("dflash-qwen3-4b-draft");
  // deepseek-ai/DeepSeek-V3's (and Qwen/Qwen3-8B-FP8's) block.
  const std::string fp8 = draft_declaring(
      "quant-fp8.json", R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]})");
  // Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4's block.
  const std::string gptq =
      draft_declaring("quant-gptq.json", R"({"bits": 4, "damp_percent": 0.01, "desc_act": false,
                             "group_size": 128, "quant_method": "gptq", "sym": true})");
  const std::string cache = "--cache-dir '" + (scratch() / "quant-cache").string() + "'";

  SECTION("without the key nothing changes") {
    const Result v = run("validate " + plain);
    CHECK(v.code == 0);
    CHECK_FALSE(contains(v.out, "weights"));
    const Result j = run("validate --json " + plain);
    CHECK_FALSE(json::parse(j.out).contains("weights"));
    const Result s = run("source " + plain);
    CHECK(s.code == 0);
    CHECK(s.err.empty());
    CHECK_FALSE(contains(s.out, "fkvdeq"));
  }
  SECTION("a declared FP8 format is reported and is precompile's default") {
    const Result v = run("validate " + fp8);
    INFO(v.out << v.err);
    CHECK(v.code == 0);
    CHECK(contains(v.out,
                   "  weights           fp8_block  [quantization_config.weight_block_size "
                   "= [128, 128] (quant_method \"fp8\")]\n"));
    const Result e = run("validate --explain " + fp8);
    CHECK(contains(e.out, "weights (K/V projections): fp8_block  [quantization_config."));
    const json j = json::parse(run("validate --json " + fp8).out);
    CHECK(j["weights"]["value"] == "fp8_block");
    CHECK(j["weights"]["source"] ==
          "quantization_config.weight_block_size = [128, 128] (quant_method \"fp8\")");
    const Result s = run("source " + fp8);
    INFO(s.err);
    CHECK(s.code == 0);
    CHECK(contains(s.err, "fkv-jit: note: "));
    CHECK(
        contains(s.err, "the K/V weights are fp8_block, as quantization_config.weight_block_size"));
    CHECK(contains(s.out, "// ---- variant 2: fkvdeq_fp8_block_bf16_x2560\n"));
    CHECK(contains(s.out, "// ---- variant 3: fkvqact_bf16_x2560_g128\n"));
    // An explicit --weights wins; a warning says it differs. The same one says nothing.
    const Result o = run("source " + fp8 + " --weights int8_channel");
    CHECK(o.code == 0);
    CHECK(contains(o.err, "fkv-jit: warning: "));
    CHECK(contains(o.err, "--weights int8_channel differs from the fp8_block"));
    CHECK(contains(o.out, "fkvdeq_int8_channel_bf16_x2560"));
    CHECK_FALSE(contains(o.out, "fkvdeq_fp8_block"));
    const Result same = run("source " + fp8 + " --weights fp8_block128");
    CHECK(same.code == 0);
    CHECK(same.err.empty());
    const Result vo = run("validate " + fp8 + " --weights dense");
    CHECK(vo.code == 0);
    CHECK(contains(vo.err, "--weights dense differs from the fp8_block"));
    CHECK(contains(vo.out,
                   "  weights           dense  [--weights (quantization_config."
                   "weight_block_size = [128, 128] (quant_method \"fp8\") declares "
                   "fp8_block)]\n"));
  }
  SECTION("precompile --json builds the declared format's kernels and says why") {
    const Result p = run("precompile " + fp8 + " --arch sm_90 --json " + cache);
    INFO(p.out << p.err);
    REQUIRE(p.code == 0);
    const json j = json::parse(p.out);
    std::vector<std::string> names;
    for (const json& k : j["kernels"]) names.push_back(k["variant"]);
    CHECK(std::find(names.begin(), names.end(), "fkvdeq_fp8_block_bf16_x2560") != names.end());
    REQUIRE(j["notes"].size() == 1);
    CHECK(contains(j["notes"][0].get<std::string>(), "the K/V weights are fp8_block"));
  }
  SECTION("a packed 4-bit declaration fails unless --weights states the format") {
    const Result v = run("validate " + gptq);
    INFO(v.out << v.err);
    CHECK(v.code == 9);
    CHECK(contains(v.err, "fkv-jit: error: "));
    CHECK(contains(v.err,
                   "quant-gptq.json: key 'quantization_config.quant_method': \"gptq\" "
                   "(bits 4) packs 4-bit integer weights"));
    CHECK(contains(v.err, "--weights FORMAT"));
    const json j = json::parse(run("validate --json " + gptq).out);
    CHECK(j["error_kind"] == "unsupported");
    CHECK(j["exit_code"] == 9);
    CHECK(run("precompile " + gptq + " --arch sm_90 " + cache).code == 9);
    CHECK(run("source " + gptq).code == 9);
    CHECK(run("cache verify --config " + gptq + " --arch sm_90 " + cache).code == 9);
    const Result d = run("validate " + gptq + " --weights dense");
    CHECK(d.code == 0);
    CHECK(contains(d.err, "fkv-jit: warning: "));
    CHECK(contains(d.err,
                   "--weights dense is taken as given over the declaration at "
                   "quantization_config.quant_method"));
    CHECK(contains(d.out,
                   "  weights           dense  [--weights (over "
                   "quantization_config.quant_method, which fkv-jit does not read)]\n"));
    const Result s = run("source " + gptq + " --weights dense");
    CHECK(s.code == 0);
    CHECK(contains(s.out, "// ---- variant 1: "));
    CHECK_FALSE(contains(s.out, "// ---- variant 2: "));
    // plan judges the declaration as validate does.
    const Result p = run("plan " + gptq);
    CHECK(p.code == 9);
    CHECK(contains(p.err, "(bits 4) packs 4-bit integer weights"));
    CHECK(json::parse(run("plan --json " + gptq).out)["error_kind"] == "unsupported");
    CHECK(run("plan --strict " + gptq).code == 9);
    const Result pd = run("plan " + gptq + " --weights dense");
    CHECK(pd.code == 0);
    CHECK(contains(pd.err, "--weights dense is taken as given over the declaration"));
    CHECK(contains(pd.out,
                   "\nweights: dense  [--weights (over quantization_config.quant_method, "
                   "which fkv-jit does not read)]\n"));
  }
  SECTION("plan reports the declared format") {
    const Result p = run("plan " + fp8);
    INFO(p.out << p.err);
    CHECK(p.code == 0);
    CHECK(contains(p.out,
                   "skipped layers: none\nweights: fp8_block  "
                   "[quantization_config.weight_block_size = [128, 128] (quant_method "
                   "\"fp8\")]\n"));
    const json j = json::parse(run("plan --json " + fp8).out);
    CHECK(j["weights"]["value"] == "fp8_block");
    CHECK(run("plan --tp 2 " + fp8 + " --weights int8_channel").code == 0);
    const Result none = run("plan " + plain);
    CHECK(none.code == 0);
    CHECK_FALSE(contains(none.out, "weights"));
    CHECK_FALSE(json::parse(run("plan --json " + plain).out).contains("weights"));
  }
  SECTION("malformed declarations are bad input; --weights names are checked") {
    const Result m = run("validate " + draft_declaring("quant-str.json", R"("fp8")"));
    CHECK(m.code == 2);
    CHECK(contains(m.err, "key 'quantization_config': expected an object"));
    const Result w = run("validate " + fp8 + " --weights gptq");
    CHECK(w.code == 9);
    CHECK(contains(w.err, "--weights: weight format 'gptq' packs 4-bit weights"));
    CHECK(run("validate " + fp8 + " --weights bogus").code == 3);
  }
}
