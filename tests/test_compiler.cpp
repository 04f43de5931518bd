// codegen + compiler: every kind of variant compiles for sm_80, sm_90 and the newest arch.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"

using namespace fkv;

namespace {
KernelSpec base() {
  KernelSpec s;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.k_norm = true;
  return s;
}

// A covering set: every value of every axis appears at least once, and both tiling paths.
std::vector<KernelSpec> covering_set() {
  std::vector<KernelSpec> out;
  auto add = [&](auto&& edit) {
    KernelSpec s = base();
    edit(s);
    out.push_back(s);
  };
  add([](KernelSpec&) {});
  add([](KernelSpec& s) {
    s.head_dim = 64;
    s.rotary_dim = 64;
    s.k_norm = false;
  });
  add([](KernelSpec& s) {
    s.num_kv_heads = 32;
    s.head_dim = 80;
    s.rotary_dim = 32;
  });
  add([](KernelSpec& s) {
    s.head_dim = 96;
    s.rotary_dim = 96;
    s.act = s.cache = s.cos_sin = DType::FP16;
  });
  add([](KernelSpec& s) {
    s.num_kv_heads = 4;
    s.head_dim = 256;
    s.rotary_dim = 64;
    s.neox = false;
  });
  add([](KernelSpec& s) {
    s.rotary_dim = 0;
    s.mode = OutputMode::Pool;
    s.slots = IndexType::I32;
  });
  add([](KernelSpec& s) {
    s.cache = DType::FP8_E4M3;
    s.mode = OutputMode::Pool;
    s.debug_checks = true;
  });
  add([](KernelSpec& s) {
    s.cache = DType::FP8_E4M3;
    s.mode = OutputMode::Pool;
    s.paged = true;
    s.kv_bias = true;
  });
  add([](KernelSpec& s) {
    s.head_dim = 80;
    s.rotary_dim = 80;
    s.mode = OutputMode::Pool;
    s.paged = true;
    s.slots = IndexType::I32;
  });
  add([](KernelSpec& s) {
    s.act = s.cache = DType::FP16;
    s.kv_bias = true;
    s.neox = false;
  });
  add([](KernelSpec& s) {
    s.act = DType::FP32;
    s.cache = DType::FP8_E5M2;
    s.positions = IndexType::I32;
  });
  add([](KernelSpec& s) {
    s.act = s.cache = DType::FP32;
    s.neox = false;
    s.rotary_dim = 64;
  });
  add([](KernelSpec& s) {
    s.cos_sin = DType::BF16;
    s.neox = false;
    s.mode = OutputMode::Pool;
  });
  return out;
}
}  // namespace

TEST_CASE("arch parsing accepts NVRTC's archs and lists them on error", "[compiler]") {
  const auto archs = supported_archs();
  REQUIRE_FALSE(archs.empty());
  CHECK(archs.front().number() >= 80);
  CHECK(Arch::parse("sm_90").name() == "sm_90");
  CHECK(Arch::parse("90").name() == "sm_90");
  CHECK(Arch::parse("9.0").name() == "sm_90");
  CHECK(Arch::parse("sm_90a").arch_specific);
  CHECK_THROWS_WITH(Arch::parse("sm_50"),
                    Catch::Contains("not supported") && Catch::Contains("sm_80"));
  CHECK_THROWS_WITH(Arch::parse("hopper"), Catch::Contains("sm_90"));
  CHECK_THROWS_AS(Arch::parse("compute_90"),
                  ArgumentError);  // one syntax with resolve_arch (test_arch)
  CHECK_FALSE(nvrtc_version().empty());
}

TEST_CASE("name expression and specialized source", "[codegen]") {
  const KernelSource k = generate(base());
  CHECK(k.name_expression.rfind("fkv_kernels::fused_kv_materialize<8, 128, 128, true, true,", 0) ==
        0);
  CHECK(k.source.find("// fkv spec: " + base().canonical()) == 0);
  CHECK(k.source.find("template __global__ void " + k.name_expression) != std::string::npos);
  CHECK(k.template_hash.size() == 32);
  REQUIRE(k.headers.size() == 2);
  CHECK(generate(base()).template_hash == k.template_hash);
  KernelSpec other = base();
  other.neox = false;
  CHECK(generate(other).name_expression != k.name_expression);
}

TEST_CASE("every kind of variant compiles for sm_80, sm_90 and the newest arch", "[compiler]") {
  const auto archs = supported_archs();
  for (const Arch& arch : {Arch::parse("sm_80"), Arch::parse("sm_90"), archs.back()})
    for (const KernelSpec& s : covering_set()) {
      INFO(arch.name() << " " << s.canonical());
      const CompiledKernel c = compile(generate(s), {arch});
      REQUIRE(c.image.size() > 1000);
      CHECK(c.image.compare(0, 4,
                            "\x7f"
                            "ELF") == 0);
      CHECK(c.lowered_name.rfind("_ZN11fkv_kernels20fused_kv_materialize", 0) == 0);
      CHECK_FALSE(c.is_ptx);
    }
}

TEST_CASE("PTX on request", "[compiler]") {
  const CompiledKernel c = compile(generate(base()), {Arch::parse("sm_90"), true});
  CHECK(c.is_ptx);
  CHECK(c.image.find(".entry " + c.lowered_name) != std::string::npos);
  CHECK(c.image.find("ld.global.v4") != std::string::npos);  // 16-byte loads
}

TEST_CASE("a broken template gives a CompileError with the log and the source", "[compiler]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fkv-broken-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "fused_kv.cu") << "this is not CUDA;\n";
  fkv::JitOptions jit;  // FKV_TEMPLATE_DIR=dir
  jit.template_dir = dir;
  const KernelSource k = generate(base(), jit);
  CHECK(k.source.find("this is not CUDA") != std::string::npos);
  CHECK(k.template_hash != "");
  try {
    compile(k, {Arch::parse("sm_90")}, jit);
    FAIL("compile should have failed");
  } catch (const CompileError& e) {
    CHECK_FALSE(e.log.empty());
    CHECK(e.source.find("this is not CUDA") != std::string::npos);
    CHECK(std::string(e.what()).find("sm_90") != std::string::npos);
  }
  CHECK(generate(base(), fkv::JitOptions{}).template_hash != k.template_hash);
  fs::remove_all(dir);
}

TEST_CASE("FKV_DUMP_SOURCE keeps the specialized source", "[compiler]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fkv-dump-" + std::to_string(::getpid()));
  fkv::JitOptions jit;  // FKV_DUMP_SOURCE=dir
  jit.dump_source = dir;
  compile(generate(base()), {Arch::parse("sm_90")}, jit);
  CHECK(fs::exists(dir / (base().short_name() + "-sm_90.cu")));
  fs::remove_all(dir);
}
