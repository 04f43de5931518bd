// `fkv-jit selftest` on the GPU, on the shapes where it once reported lost pool writes.
//
// Regression (pool mode, 24 layers x 32 heads x 1000 tokens): selftest poisoned its output
// buffers with cuMemsetD8 on the legacy stream and launched on a non-blocking stream, which
// does not wait for it; at large sizes the fill of the last layers' pool buffers was still
// running and overwrote rows the kernel had written, so they read back as poison. Stacked mode
// was poisoned first and escaped. selftest now issues every upload and fill on the launch
// stream. This test runs the CLI itself, so the harness is what it checks.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fkv/driver.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Run {
  int code = -1;
  std::string out;
  double seconds = 0;
};

Run run(const std::string& args) {
  const auto t0 = std::chrono::steady_clock::now();
  Run r;
  FILE* p = popen((std::string(FKV_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.out += buf;
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

fs::path write_config(const std::string& name, const json& j) {
  const fs::path dir = fs::temp_directory_path() / "fkv-test-selftest";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << j.dump(2);
  return p;
}

json read_json(const std::string& name) {
  std::ifstream in(std::string(FKV_TEST_DATA_DIR) + "/" + name);
  return json::parse(in);
}

}  // namespace

TEST_CASE("selftest passes the 24-layer x 32-head phi shape in both modes at 1000 and 4096 tokens",
          "[gpu][selftest]") {
  if (!fkv::Driver::available())
    FAIL("no CUDA driver or device: this test carries the `gpu` label");
  json cfg = read_json("phi-phi-2.json");  // phi: neox, no K norm, partial rotary
  cfg["hidden_size"] = 2048;
  cfg["num_attention_heads"] = 32;
  cfg["num_key_value_heads"] = 32;
  cfg["num_hidden_layers"] = 24;
  cfg["partial_rotary_factor"] = 0.5;  // head_dim 64, rotary 32
  cfg["torch_dtype"] = "float32";
  const fs::path path = write_config("phi-24l-32h.json", cfg);
  for (const char* dtype : {"fp32", "bf16"}) {
    const Run r =
        run("selftest " + path.string() + " --dtype " + dtype + " --tokens 1000,4096 --seed 1");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("4 of 4 checks passed") != std::string::npos);
    CHECK(r.out.find("FAIL") == std::string::npos);
  }
}

TEST_CASE("selftest of a 62-layer config at the default token counts", "[gpu][selftest]") {
  if (!fkv::Driver::available())
    FAIL("no CUDA driver or device: this test carries the `gpu` label");
  json cfg = read_json("gemma3-4b-it.json");  // Gemma-3-27B text shape: 62 layers, 16 KV heads
  json& t = cfg["text_config"];
  t["num_hidden_layers"] = 62;
  t["hidden_size"] = 5376;
  t["num_attention_heads"] = 32;
  t["num_key_value_heads"] = 16;
  t["head_dim"] = 128;
  const fs::path path = write_config("gemma3-27b-shape.json", cfg);
  const Run r = run("selftest " + path.string());
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("rows compared element by element") != std::string::npos);
  std::printf("selftest of a 62-layer config (2 groups x 2 modes x T = 1, 77, 1000): %.1f s\n",
              r.seconds);
}
