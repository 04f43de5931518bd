// codegen + compiler: every kind of variant compiles for sm_80, sm_90 and the newest arch.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "log_capture.hpp"
#include "nvrtc_loader.hpp"
#include "temp_dir.hpp"

using namespace fkv;

namespace {
KernelSpec base() {
  KernelSpec s;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.k_norm = KNormKind::Rms;
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
    s.k_norm = KNormKind::None;
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
  CHECK(k.name_expression.rfind("fkv_kernels::fused_kv_materialize<8, 128, 128, true, 1,", 0) == 0);
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

namespace {
// Runs `check` in a forked child under a 30 s alarm (and, outside ASan, which reserves terabytes
// of address space, a 4 GiB address-space limit), so that a regression that blocks on a FIFO or
// reads /dev/zero without end fails this test instead of hanging CI. True when `check` returned
// true.
template <class F>
bool in_child(F check) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(30);
#ifndef __SANITIZE_ADDRESS__
    const rlimit as{rlim_t{4} << 30, rlim_t{4} << 30};
    ::setrlimit(RLIMIT_AS, &as);
#endif
    int rc = 3;
    try {
      rc = check() ? 0 : 1;
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO("child status " << status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// True when `f` throws a ConfigError whose message contains `text`.
template <class F>
bool throws_config_error(F f, const std::string& text) {
  try {
    f();
  } catch (const fkv::ConfigError& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}
}  // namespace

TEST_CASE("FKV_TEMPLATE_DIR: a FIFO, /dev/zero or a huge file is refused without reading it",
          "[codegen][security]") {
  // Issue 23 item 4: a FIFO named fused_kv.cu hung every compile; /dev/zero grew to 2 GB.
  fkv_test::TempDir tmp;
  namespace fs = std::filesystem;
  fkv::JitOptions jit;
  jit.template_dir = tmp.path;
  REQUIRE(::mkfifo((tmp.path / "fused_kv.cu").c_str(), 0600) == 0);
  CHECK(in_child([&] {
    return throws_config_error([&] { template_text("fused_kv.cu", jit); }, "not a regular file");
  }));
  fs::remove(tmp.path / "fused_kv.cu");
  fs::create_symlink("/dev/zero", tmp.path / "fkv_types.cuh");
  CHECK(in_child([&] {
    return throws_config_error([&] { generate(base(), jit); }, "FKV_TEMPLATE_DIR: cannot use");
  }));
  fs::remove(tmp.path / "fkv_types.cuh");
  fs::create_directory(tmp.path / "fused_kv.cu");
  CHECK(throws_config_error([&] { template_text("fused_kv.cu", jit); }, "not a regular file"));
  fs::remove(tmp.path / "fused_kv.cu");
  { std::ofstream big(tmp.path / "fused_kv.cu"); }
  fs::resize_file(tmp.path / "fused_kv.cu", kMaxTemplateBytes + 1);  // sparse
  CHECK(throws_config_error([&] { template_text("fused_kv.cu", jit); }, "larger than 4 MiB"));
  // A missing file still means the embedded copy (in a directory holding another template).
  fs::remove(tmp.path / "fused_kv.cu");
  std::ofstream(tmp.path / "fused_proj_kv.cu") << "// a decode kernel under development\n";
  CHECK(template_text("fused_kv.cu", jit) == template_text("fused_kv.cu", fkv::JitOptions{}));
}

TEST_CASE(
    "FKV_TEMPLATE_DIR: a directory that is missing, no directory or holds no template is "
    "an error; each file's origin is logged",
    "[codegen]") {
  // Before: all three fell back to the embedded templates silently (exit 0), so a typo in the
  // variable tested the embedded copies while the developer believed their own were compiled.
  namespace fs = std::filesystem;
  fkv_test::TempDir tmp;
  fkv::JitOptions jit;
  auto refused = [&](const fs::path& dir, const std::string& why) {
    jit.template_dir = dir;
    INFO(dir);
    CHECK(throws_config_error([&] { generate(base(), jit); },
                              "FKV_TEMPLATE_DIR=" + dir.string() + ": " + why));
  };
  refused(tmp.path / "typo", "the directory does not exist");
  std::ofstream(tmp.path / "a-file") << "not a directory\n";
  refused(tmp.path / "a-file", "it is not a directory");
  fs::create_directory(tmp.path / "empty");
  refused(tmp.path / "empty", "the directory holds none of the kernel templates or headers");
  std::ofstream(tmp.path / "empty" / "README") << "templates are elsewhere\n";
  refused(tmp.path / "empty", "the directory holds none of the kernel templates");
  // A link to a working copy that is gone is not an absent file.
  fs::create_directory(tmp.path / "linked");
  fs::create_symlink(tmp.path / "moved.cu", tmp.path / "linked" / "fused_kv.cu");
  jit.template_dir = tmp.path / "linked";
  CHECK(throws_config_error([&] { template_text("fused_kv.cu", jit); },
                            "a symbolic link to a file that does not exist"));

  // One template of the directory: taken, the others embedded, and the log says which (info).
  const fs::path dev = tmp.path / "dev";
  fs::create_directory(dev);
  std::ofstream(dev / "fused_kv.cu")
      << template_text("fused_kv.cu", fkv::JitOptions{}) << "// edited\n";
  jit.template_dir = dev;
  fkv_test::LogCapture log;
  spdlog::default_logger()->set_level(spdlog::level::info);
  const KernelSource k = generate(base(), jit);
  CHECK(k.source.find("// edited") != std::string::npos);
  generate(base(), jit);  // logged once per process and file
  INFO(log.text());
  CHECK(log.count("FKV_TEMPLATE_DIR: fused_kv.cu is read from " + (dev / "fused_kv.cu").string()) ==
        1);
  CHECK(log.count("FKV_TEMPLATE_DIR: no fkv_types.cuh in " + dev.string() +
                  "; the embedded copy is used") == 1);
  CHECK(log.count("no kernel_params.h in " + dev.string()) == 1);

  // Through the CLI: bad input (exit 2), naming the variable and the path.
  const auto r =
      fkv_test::run_cli(tmp.path, "source '" FKV_TEST_DATA_DIR "/dflash-qwen3-4b-draft.json'",
                        "FKV_TEMPLATE_DIR='" + (tmp.path / "typo").string() + "'");
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("FKV_TEMPLATE_DIR=" + (tmp.path / "typo").string() +
                                    ": the directory does not exist"));
}

TEST_CASE("FKV_NVRTC_LIBRARY: a FIFO or /dev/zero is never handed to dlopen",
          "[compiler][security]") {
  fkv_test::TempDir tmp;
  const std::string fifo = (tmp.path / "libnvrtc.so.13").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(in_child([&] { return check_library_file(fifo).find("not a regular file") == 0; }));
  CHECK(in_child([&] { return check_library_file("/dev/zero").find("not a regular file") == 0; }));
  CHECK(check_library_file(tmp.path.string()).find("not a regular file") == 0);
  CHECK_THAT(check_library_file((tmp.path / "missing.so").string()),
             Catch::Contains("No such file"));
  const std::string real = (tmp.path / "plain.so").string();
  std::ofstream(real) << "not ELF";
  CHECK(check_library_file(real).empty());  // a regular file: dlopen decides
  // Through the CLI, which loads NVRTC at the first compile: an error naming the variable, and
  // no hang (timeout's 124 would mean it blocked).
  const std::string cmd = "FKV_NVRTC_LIBRARY='" + fifo + "' FKV_CACHE_DIR='" +
                          (tmp.path / "cache").string() +
                          "' timeout 60 '" FKV_CLI_PATH "' precompile '" FKV_TEST_DATA_DIR
                          "/dflash-qwen3-4b-draft.json' --arch sm_90 > '" +
                          (tmp.path / "out.txt").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(tmp.path / "out.txt");
  const std::string out((std::istreambuf_iterator<char>(in)), {});
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(WEXITSTATUS(status) != 124);
  CHECK_THAT(out,
             Catch::Contains("FKV_NVRTC_LIBRARY=" + fifo) && Catch::Contains("not a regular file"));
}

TEST_CASE("an image without the kernel is neither returned nor cached", "[compiler]") {
  // Issue 23 item 9: -fdevice-syntax-only in FKV_NVRTC_OPTIONS published a 1.7 KB CUBIN with no
  // kernel, and `cache verify` called it ok.
  const KernelSource src = generate(base());
  const CompiledKernel cubin = compile(src, {Arch::parse("sm_90")});
  const CompiledKernel ptx = compile(src, {Arch::parse("sm_90"), true});
  CHECK(image_has_kernel(cubin.image, cubin.lowered_name, false));
  CHECK(image_has_kernel(ptx.image, ptx.lowered_name, true));
  CHECK_FALSE(image_has_kernel(cubin.image, cubin.lowered_name + "x", false));
  CHECK_FALSE(image_has_kernel(cubin.image, "", false));
  std::string renamed = cubin.image;
  for (std::size_t at = 0;
       (at = renamed.find(".text." + cubin.lowered_name, at)) != std::string::npos;)
    renamed[at + 1] = 'T';
  CHECK_FALSE(image_has_kernel(renamed, cubin.lowered_name, false));
  // What NVRTC itself returns under -fdevice-syntax-only: success, an image, no kernel.
  const Nvrtc& api = nvrtc();
  std::vector<const char*> names, texts;
  for (const auto& [name, text] : src.headers) {
    names.push_back(name.c_str());
    texts.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  REQUIRE(api.nvrtcCreateProgram(&prog, src.source.c_str(), src.template_name.c_str(),
                                 static_cast<int>(names.size()), texts.data(),
                                 names.data()) == NVRTC_SUCCESS);
  REQUIRE(api.nvrtcAddNameExpression(prog, src.name_expression.c_str()) == NVRTC_SUCCESS);
  const char* opts[] = {"--gpu-architecture=sm_90", "-std=c++17", "-default-device",
                        "-fdevice-syntax-only"};
  REQUIRE(api.nvrtcCompileProgram(prog, 4, opts) == NVRTC_SUCCESS);
  std::size_t size = 0;
  REQUIRE(api.nvrtcGetCUBINSize(prog, &size) == NVRTC_SUCCESS);
  std::string empty(size, '\0');
  REQUIRE(api.nvrtcGetCUBIN(prog, empty.data()) == NVRTC_SUCCESS);
  const char* lowered = nullptr;
  REQUIRE(api.nvrtcGetLoweredName(prog, src.name_expression.c_str(), &lowered) == NVRTC_SUCCESS);
  CHECK_FALSE(image_has_kernel(empty, lowered, false));
  api.nvrtcDestroyProgram(&prog);
  // And the option cannot get there through FKV_NVRTC_OPTIONS or a JitOptions.
  fkv::JitOptions jit;
  jit.nvrtc_options = {"-fdevice-syntax-only"};
  CHECK_THROWS_WITH(compile(src, {Arch::parse("sm_90")}, jit),
                    Catch::Contains("'-fdevice-syntax-only' is not allowed"));
}

TEST_CASE("an integer overflow in a constant expression fails the compile", "[compiler]") {
  // Issue 23 item 12: constexpr int KV = H * D wrapped for H = 16777216, D = 128, and NVRTC's
  // warning #61 was discarded. KernelSpec::check refuses that spec now; the compiler refuses the
  // overflow by itself too (here the name expression is edited past the check).
  KernelSource src = generate(base());
  const std::string from = "fused_kv_materialize<8, 128,";
  const std::string to = "fused_kv_materialize<16777216, 128,";
  REQUIRE(src.name_expression.find(from) != std::string::npos);
  src.name_expression.replace(src.name_expression.find(from), from.size(), to);
  for (std::size_t at; (at = src.source.find(from)) != std::string::npos;)
    src.source.replace(at, from.size(), to);
  try {
    compile(src, {Arch::parse("sm_90")});
    FAIL("a kernel whose KV = H * D overflowed was compiled");
  } catch (const CompileError& e) {
    CHECK_THAT(e.what(), Catch::Contains("integer overflow"));
    CHECK_THAT(e.log, Catch::Contains("integer operation result is out of range"));
  }
  // The unedited kernel compiles without that warning.
  CHECK(compile(generate(base()), {Arch::parse("sm_90")}).log.find("out of range") ==
        std::string::npos);
}
