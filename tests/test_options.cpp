// Tests of JitOptions (include/fkv/options.hpp): every knob read from the environment in one
// place, malformed values refused with the variable's name, and the development knobs that
// could escape the cache key (FKV_NVRTC_OPTIONS, FKV_TEMPLATE_DIR, FKV_DUMP_SOURCE) fenced in.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "env_guard.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using fkv::ConfigError;
using fkv::JitOptions;

namespace {

using fkv_test::EnvGuard;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spill(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

fkv::KernelSpec small_spec() {
  fkv::KernelSpec s;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.rotary_dim = 64;
  return s;
}

}  // namespace

TEST_CASE("tuning knobs: defaults, good values, garbage refused", "[options]") {
  EnvGuard env;
  for (const char* v :
       {"FKV_BLOCK_WARPS", "FKV_LAYERS_PER_BLOCK", "FKV_NVRTC_OPTIONS", "FKV_LOG_LEVEL"})
    env.set(v, std::nullopt);
  JitOptions d = JitOptions::from_env();
  CHECK(d.block_warps == 0);
  CHECK(d.layers_per_block == 0);
  CHECK(d.nvrtc_options.empty());

  env.set("FKV_BLOCK_WARPS", "4");
  env.set("FKV_LAYERS_PER_BLOCK", "3");
  env.set("FKV_NVRTC_OPTIONS", "  --maxrregcount=64   -lineinfo ");
  JitOptions o = JitOptions::from_env();
  CHECK(o.block_warps == 4);
  CHECK(o.layers_per_block == 3);
  CHECK(o.nvrtc_options == std::vector<std::string>{"--maxrregcount=64", "-lineinfo"});

  // Before JitOptions, FKV_BLOCK_WARPS=abc was silently ignored (issue 13 item 8).
  for (const char* bad : {"abc", "0", "33", "-1", "4x", " 4", "99999999999"}) {
    INFO(bad);
    env.set("FKV_BLOCK_WARPS", bad);
    CHECK_THROWS_WITH(JitOptions::from_env(),
                      Catch::Contains("FKV_BLOCK_WARPS='" + std::string(bad) + "'") &&
                          Catch::Contains("1 to 32"));
  }
  env.set("FKV_BLOCK_WARPS", std::nullopt);
  for (const char* bad : {"0", "many", "-2"}) {
    env.set("FKV_LAYERS_PER_BLOCK", bad);
    CHECK_THROWS_AS(JitOptions::from_env(), ConfigError);
  }
  env.set("FKV_LAYERS_PER_BLOCK", std::nullopt);
  env.set("FKV_LOADS_PER_LANE", std::nullopt);
  CHECK(JitOptions::from_env().loads_per_lane == 0);
  env.set("FKV_LOADS_PER_LANE", "2");
  CHECK(JitOptions::from_env().loads_per_lane == 2);
  for (const char* bad : {"0", "9", "two"}) {
    env.set("FKV_LOADS_PER_LANE", bad);
    CHECK_THROWS_WITH(JitOptions::from_env(),
                      Catch::Contains("FKV_LOADS_PER_LANE='" + std::string(bad) + "'") &&
                          Catch::Contains("1 to 8"));
  }
  env.set("FKV_LOADS_PER_LANE", std::nullopt);
  env.set("FKV_LOG_LEVEL", "loud");
  CHECK_THROWS_WITH(JitOptions::from_env(), Catch::Contains("FKV_LOG_LEVEL='loud'"));
  env.set("FKV_LOG_LEVEL", "debug");
  CHECK(JitOptions::from_env().log_level == "debug");
}

TEST_CASE("generate() tiles with the JitOptions it is given, not the process's",
          "[options][codegen]") {
  JitOptions jit;
  jit.block_warps = 4;  // as FKV_BLOCK_WARPS=4
  const fkv::KernelSource four = fkv::generate(small_spec(), jit);
  const fkv::KernelSource two = fkv::generate(small_spec(), JitOptions{});
  // The last template argument is the warps per block; the tiling comment says the threads.
  CHECK_THAT(four.name_expression, Catch::EndsWith(", 4>"));
  CHECK_THAT(four.source, Catch::Contains("128 threads per block"));
  CHECK_THAT(two.name_expression, Catch::EndsWith(", 2>"));
  CHECK(four.specialization == two.specialization);  // the block size is in the name, not the spec
}

TEST_CASE("FKV_LOADS_PER_LANE pins the loads per lane where they tile the head",
          "[options][spec]") {
  fkv::KernelSpec s = small_spec();
  s.num_kv_heads = 4;
  s.head_dim = 256;
  s.rotary_dim = 256;
  JitOptions jit;
  const fkv::Tiling rule = s.tiling(jit);
  CHECK(rule.loads == 1);  // the rule: 16-byte loads, one head of 32 lanes per warp
  CHECK(rule.heads_per_warp == 1);
  jit.loads_per_lane = 2;  // as FKV_LOADS_PER_LANE=2: two heads of 16 lanes per warp
  fkv::Tiling t = s.tiling(jit);
  CHECK(t.vec == 8);
  CHECK(t.loads == 2);
  CHECK(t.lanes_per_head == 16);
  CHECK(t.heads_per_warp == 2);
  CHECK(t.heads_per_block == 2 * t.warps_per_block);
  const fkv::KernelSource two = fkv::generate(s, jit);
  CHECK_THAT(two.name_expression, Catch::EndsWith(", 8, 2, 2>"));  // VEC, LOADS, WARPS
  CHECK(two.name_expression != fkv::generate(s, JitOptions{}).name_expression);
  // Every pinned value gives a valid tiling: the widest load that tiles the head with it, else
  // the rule's (head_dim 80 cannot take 3 loads of any width).
  for (int D : {64, 80, 96, 128, 256}) {
    for (int loads = 1; loads <= 8; ++loads) {
      s.head_dim = s.rotary_dim = D;
      jit.loads_per_lane = loads;
      t = s.tiling(jit);
      INFO("head_dim " << D << ", loads " << loads);
      REQUIRE(t.vec >= 1);
      CHECK(t.lanes_per_head * t.elems_per_thread == D);
      CHECK(t.lanes_per_head <= 32);
      bool fits = false;  // some load width v tiles the head: v * loads divides D in <= 32 lanes
      for (int v = 16 / fkv::dtype_size(s.act); v >= 1; v /= 2)
        fits = fits || (D % (v * loads) == 0 && D / (v * loads) <= 32);
      if (fits) CHECK(t.loads == loads);
      if (!fits) CHECK(t.loads == s.tiling(JitOptions{}).loads);
    }
  }
  // NVRTC compiles the pinned tilings (GPT-J pairs stay in a lane: 16 elements per lane).
  fkv::KernelCache cache(fkv::CacheOptions{});  // memory only
  fkv::CompileOptions co;
  co.arch = fkv::Arch{9, 0, false};
  jit.loads_per_lane = 2;
  s.head_dim = 256;
  s.rotary_dim = 64;
  for (bool neox : {true, false}) {
    s.neox = neox;
    INFO("neox " << neox);
    CHECK(cache.get(fkv::generate(s, jit), co, jit).outcome == fkv::CacheOutcome::Compiled);
  }
}

TEST_CASE("a cache lookup keys and compiles with the JitOptions it is given",
          "[options][cache][nvrtc]") {
  fkv::KernelCache cache(fkv::CacheOptions{});  // memory only
  JitOptions plain;
  JitOptions tuned;
  tuned.nvrtc_options = {"--maxrregcount=64"};  // as FKV_NVRTC_OPTIONS=--maxrregcount=64
  fkv::CompileOptions co;
  co.arch = fkv::Arch{8, 0, false};
  const fkv::KernelSource src = fkv::generate(small_spec(), plain);
  const fkv::CacheKey a = fkv::CacheKey::make(src, co, plain);
  const fkv::CacheKey b = fkv::CacheKey::make(src, co, tuned);
  CHECK(a.digest != b.digest);
  CHECK_THAT(b.field("options"), Catch::Contains("--maxrregcount=64"));
  CHECK_THAT(a.field("options"), !Catch::Contains("--maxrregcount"));
  CHECK(cache.get(src, co, plain).outcome == fkv::CacheOutcome::Compiled);
  CHECK(cache.get(src, co, tuned).outcome ==
        fkv::CacheOutcome::Compiled);  // another key: built again
  CHECK(cache.get(src, co, tuned).outcome == fkv::CacheOutcome::MemoryHit);
}

TEST_CASE("FKV_DECODE_CROSSOVER and FKV_NVRTC_LIBRARY are read here, not where they are used",
          "[options]") {
  EnvGuard env;
  env.set("FKV_DECODE_CROSSOVER", std::nullopt);
  env.set("FKV_NVRTC_LIBRARY", std::nullopt);
  JitOptions d = JitOptions::from_env();
  CHECK(d.decode_crossover == -1);  // unset: the measured value for the device
  CHECK(d.nvrtc_library.empty());   // unset: searched

  env.set("FKV_DECODE_CROSSOVER", "0");
  CHECK(JitOptions::from_env().decode_crossover == 0);  // the decode path off
  env.set("FKV_DECODE_CROSSOVER", "48");
  CHECK(JitOptions::from_env().decode_crossover == 48);
  for (const char* bad : {"-1", "many", "8 ", "1e3"}) {
    INFO(bad);
    env.set("FKV_DECODE_CROSSOVER", bad);
    CHECK_THROWS_WITH(JitOptions::from_env(),
                      Catch::Contains("FKV_DECODE_CROSSOVER='" + std::string(bad) + "'") &&
                          Catch::Contains("token count"));
  }
  env.set("FKV_DECODE_CROSSOVER", std::nullopt);
  env.set("FKV_NVRTC_LIBRARY", "/opt/cuda/lib64/libnvrtc.so.13");
  CHECK(JitOptions::from_env().nvrtc_library == "/opt/cuda/lib64/libnvrtc.so.13");
}

TEST_CASE("FKV_DECODE_CROSSOVER's message states the range it accepts", "[options]") {
  // Before: 1073741824 was refused by a message that asked only for ">= 0".
  EnvGuard env;
  env.set("FKV_DECODE_CROSSOVER", "999999999");
  CHECK(JitOptions::from_env().decode_crossover == 999999999);
  for (const char* bad : {"1000000000", "1073741824", "-1"}) {
    INFO(bad);
    env.set("FKV_DECODE_CROSSOVER", bad);
    CHECK_THROWS_WITH(JitOptions::from_env(), Catch::Contains("from 0 (never) to 999999999"));
  }
}

TEST_CASE("the cache root: XDG_CACHE_HOME and HOME count only when absolute", "[options]") {
  // Before: a relative XDG_CACHE_HOME was skipped but a relative HOME was used, putting the
  // cache below whatever directory the process ran in.
  EnvGuard env;
  env.set("FKV_CACHE_DIR", std::nullopt);
  env.set("XDG_CACHE_HOME", "relative/xdg");
  env.set("HOME", "/home/me");
  CHECK(JitOptions::from_env().cache_dir == "/home/me/.cache/fkv-jit");
  env.set("HOME", "relative-home");
  CHECK(JitOptions::from_env().cache_dir.empty());
  env.set("XDG_CACHE_HOME", "/xdg");
  CHECK(JitOptions::from_env().cache_dir == "/xdg/fkv-jit");
  env.set("XDG_CACHE_HOME", std::nullopt);
  env.set("FKV_CACHE_DIR", "explicit/relative");  // an explicit choice is taken as given
  CHECK(JitOptions::from_env().cache_dir == "explicit/relative");
  env.set("FKV_CACHE_DIR", std::nullopt);
  fkv_test::LogCapture log;
  fkv::KernelCache cache(fkv::CacheOptions::from_env());
  CHECK(cache.memory_only());
  CHECK(log.has("absolute XDG_CACHE_HOME or HOME: relative ones are ignored"));
}

TEST_CASE("FKV_NVRTC_OPTIONS: only the allow-list passes", "[options][security]") {
  EnvGuard env;
  // Each of these escaped the cache key or the cache before (issue 13 item 6).
  // Issue 23 item 9: the deny-list let through -fdevice-syntax-only (an image with no kernel,
  // which `cache verify` called ok) and every undocumented option; now only an allow-list passes.
  for (const char* bad : {"-include /tmp/evil.h",
                          "--pre-include=/tmp/evil.h",
                          "-I/tmp",
                          "-I /tmp",
                          "--include-path=/tmp",
                          "--time=/tmp/t.csv",
                          "--time /tmp/t.csv",
                          "--gpu-architecture=sm_80",
                          "-arch=compute_80",
                          "-arch sm_80",
                          "-dlto",
                          "--fdevice-time-trace=/tmp/trace.json",
                          "--pch-dir=/tmp",
                          "--create-pch=/tmp/x.pch",
                          "-fdevice-syntax-only",
                          "--fdevice-syntax-only",
                          "--preinclude=/tmp/evil.h",
                          "-w",
                          "--disable-warnings",
                          "--diag-suppress=61",
                          "-std=c++20",
                          "--minimal",
                          "--device-c",
                          "-rdc=true",
                          "--ptxas-options=--output-file=/tmp/x",
                          "-Xptxas",
                          "-Xptxas=-O0",
                          "--maxrregcount=0",
                          "--maxrregcount=abc",
                          "--maxrregcount=9999",
                          "--ftz=yes",
                          "--fmad",
                          "-D",
                          "-D 'X'",
                          "-D1X",
                          "--define-macro=",
                          "-lineinfo=1",
                          "--split-compile=0",
                          "-Ofast-compile=max",
                          "--restrict"}) {
    INFO(bad);
    env.set("FKV_NVRTC_OPTIONS", std::string("--maxrregcount=64 ") + bad);
    CHECK_THROWS_WITH(JitOptions::from_env(), Catch::Contains("FKV_NVRTC_OPTIONS: NVRTC option") &&
                                                  Catch::Contains("is not allowed"));
  }
  // The message names the option and lists the allowed ones.
  env.set("FKV_NVRTC_OPTIONS", "-fdevice-syntax-only");
  CHECK_THROWS_WITH(JitOptions::from_env(),
                    Catch::Contains("'-fdevice-syntax-only' is not allowed") &&
                        Catch::Contains("Allowed: -lineinfo, --use_fast_math"));
  // Every option on the allow-list passes, in each spelling.
  env.set("FKV_NVRTC_OPTIONS",
          "-lineinfo --generate-line-info --use_fast_math -use_fast_math "
          "--extra-device-vectorization -extra-device-vectorization -G --device-debug "
          "--maxrregcount=64 -maxrregcount=255 --ftz=true -ftz=false --prec-div=false "
          "--prec-sqrt=true --fmad=false -fmad=true -DFKV_TUNE -DFKV_TUNE=3 "
          "--define-macro=FKV_X=1 --ptxas-options=-v -Xptxas=-v");
  CHECK(JitOptions::from_env().nvrtc_options.size() == 21);
  // A JitOptions filled in by hand is checked where the options are used.
  JitOptions jit;
  jit.nvrtc_options = {"--include-path=/tmp"};
  fkv::CompileOptions co;
  co.arch = fkv::Arch{9, 0, false};
  CHECK_THROWS_AS(fkv::nvrtc_options(co, jit), ConfigError);
  jit.nvrtc_options = {"--maxrregcount=64"};
  const auto opts = fkv::nvrtc_options(co, jit);
  CHECK(opts.back() == "--maxrregcount=64");
  CHECK(opts.front() ==
        "--gpu-architecture=sm_90");  // fkv-jit's own arch option stays first and alone
}

TEST_CASE("FKV_TEMPLATE_DIR templates may include only the embedded headers",
          "[options][security]") {
  fkv_test::TempDir tmp;
  const fs::path dir = tmp.path / "templates";
  fs::create_directories(dir);
  JitOptions jit;
  jit.template_dir = dir;
  const std::string good = fkv::template_text("fused_kv.cu", JitOptions{});  // the embedded one
  spill(dir / "fused_kv.cu", good);
  CHECK(fkv::template_text("fused_kv.cu", jit) == good);  // its includes are the embedded headers

  spill(dir / "fused_kv.cu", "#include \"secret.h\"\n" + good);
  CHECK_THROWS_WITH(
      fkv::template_text("fused_kv.cu", jit),
      Catch::Contains("fused_kv.cu:1: #include 'secret.h'") && Catch::Contains("cache key"));
  spill(dir / "fused_kv.cu", good + "\n  #  include </etc/passwd>\n");
  CHECK_THROWS_AS(fkv::template_text("fused_kv.cu", jit), fkv::CompileError);
  spill(dir / "fused_kv.cu", "#include \"fused_kv.cu\"\n");  // a template is not a header
  CHECK_THROWS_AS(fkv::template_text("fused_kv.cu", jit), fkv::CompileError);
  // A header copy is checked too.
  fs::remove(dir / "fused_kv.cu");
  spill(dir / "fkv_types.cuh", "#pragma once\n#include \"../../outside.h\"\n");
  CHECK_THROWS_AS(fkv::template_text("fkv_types.cuh", jit), fkv::CompileError);
}

TEST_CASE("FKV_TEMPLATE_DIR: no spelling of #include reaches a file outside the key",
          "[options][security]") {
  // Issue 23 item 11: the line-based check missed these spellings, and NVRTC read the outside
  // file; after it changed, the old image was served as a hit. Each is refused before NVRTC runs.
  fkv_test::TempDir tmp;
  const fs::path dir = tmp.path / "templates";
  fs::create_directories(dir);
  const std::string out = (tmp.path / "outside.h").string();
  spill(out, "#define FKV_OUTSIDE 1\n");
  JitOptions jit;
  jit.template_dir = dir;
  const std::string good = fkv::template_text("fused_kv.cu", JitOptions{});
  const std::string q = "\"" + out + "\"";
  const std::vector<std::pair<std::string, std::string>> bypasses = {
      {"line splice", "#inc\\\nlude " + q + "\n"},
      {"splice after #", "#\\\ninclude " + q + "\n"},
      {"CRLF splice", "#inc\\\r\nlude " + q + "\r\n"},
      {"comment after #", "#/**/include " + q + "\n"},
      {"digraph", "%:include " + q + "\n"},
      {"digraph and comment", "%:/* x */include <" + out + ">\n"},
      {"comment before #", "/**/ #include " + q + "\n"},
      {"multi-line comment before #", "/* a\n */ #include " + q + "\n"},
      {"computed include", "#define FKV_H " + q + "\n#include FKV_H\n"},
      {"include_next", "#include_next " + q + "\n"},
      {"import", "#import " + q + "\n"},
      {"embed", "#embed " + q + "\n"},
      {"__has_include", "#if __has_include(" + q + ")\n#endif\n"},
      {"pragma", "#pragma include_alias(\"fkv_types.cuh\", " + q + ")\n"},
      {"digit separator hiding a comment", "int x = 1'0 + '/*';\n#include " + q + "\n// */\n"},
      {"string hiding a comment", "const char* s = \"/*\";\n#include " + q + "\n// */\n"},
      {"raw string", "const char* s = R\"(\n)\";\n#include " + q + "\n"},
      {"backslash and spaces", "// x \\ \n#include " + q + "\n"},
      {"lone carriage return", "int x;\r#include " + q + "\n"},
      {"tokens after the name", "#include \"fkv_types.cuh\" " + q + "\n"},
      {"angle brackets", "  #  include <" + out + ">\n"},
      {"byte-order mark before #", "\xEF\xBB\xBF#include " + q + "\n"},
  };
  for (const auto& [what, text] : bypasses) {
    INFO(what);
    spill(dir / "fused_kv.cu", good + "\n" + text);
    CHECK_THROWS_AS(fkv::template_text("fused_kv.cu", jit), fkv::CompileError);
    CHECK_THROWS_WITH(fkv::generate(small_spec(), jit), Catch::Contains("cache key"));
    spill(dir / "fkv_types.cuh", text);  // a header copy is read the same way
    CHECK_THROWS_AS(fkv::template_text("fkv_types.cuh", jit), fkv::CompileError);
    fs::remove(dir / "fkv_types.cuh");
  }
  // What is not a directive passes: text in comments and strings, a '#' inside a line.
  const std::string fine =
      "// #include \"/etc/passwd\" in a comment\n/* #include <x> */\n"
      "#include \"fkv_types.cuh\"  // the embedded header, with a comment\n"
      "%:include <fkv/kernel_params.h>\n#define FKV_STR(x) #x\nconst char* s = \"#include <x>\";\n"
      "int n = 1'000'000;\n";
  spill(dir / "fused_kv.cu", good + "\n" + fine);
  CHECK_NOTHROW(fkv::template_text("fused_kv.cu", jit));
  // Every template and header of the source tree passes the check, so a copy of it in
  // FKV_TEMPLATE_DIR is usable.
  const fs::path src = FKV_SOURCE_DIR;
  std::vector<fs::path> files = {src / "include/fkv/kernel_params.h",
                                 src / "include/fkv/decode_params.h"};
  for (const auto& e : fs::directory_iterator(src / "templates")) files.push_back(e.path());
  CHECK(files.size() >= 5);
  for (const fs::path& f : files) {
    INFO(f.string());
    CHECK_NOTHROW(fkv::check_template_includes(f.string(), slurp(f)));
  }
}

TEST_CASE("FKV_DUMP_SOURCE never writes through a planted symlink", "[options][security][nvrtc]") {
  fkv_test::TempDir tmp;
  const fs::path dump = tmp.path / "dump";
  JitOptions jit;  // FKV_DUMP_SOURCE=dump
  jit.dump_source = dump;
  fs::create_directories(dump);
  const fkv::KernelSource src = fkv::generate(small_spec(), jit);
  fkv::CompileOptions co;
  co.arch = fkv::Arch{8, 0, false};
  const fs::path target = dump / (src.short_name + "-sm_80.cu");
  const fs::path victim = tmp.path / "victim.txt";
  spill(victim, "precious\n");
  fs::create_symlink(victim, target);

  fkv_test::LogCapture log;
  CHECK_NOTHROW(fkv::compile(src, co, jit));  // a dump that cannot be written never fails a compile
  CHECK(slurp(victim) == "precious\n");       // before: overwritten with the kernel source
  CHECK(fs::is_symlink(target));
  CHECK(log.count("FKV_DUMP_SOURCE") == 1);

  // An earlier dump of our own is replaced.
  fs::remove(target);
  spill(target, "old dump");
  fkv::compile(src, co, jit);
  CHECK(slurp(target) == src.source);
}

// The library, not only the CLI, honours FKV_LOG_LEVEL. Run in a fresh process by the test
// below, since JitOptions::global() is read once per process: the host installed no logger, and
// the first library call (the process-wide cache; a stub build instead of NVRTC, the cache
// disabled) logs its debug line "compiled <name>" through the logger the library set up.
TEST_CASE("FKV_LOG_LEVEL child: a stub build through the process-wide cache",
          "[.fkv_log_level_child]") {
  fkv::CacheKey::Fields fields = {
      {"schema", "1"}, {"arch", "sm_90"}, {"nvrtc", "13.0"}, {"output", "cubin"}};
  const fkv::CacheKey key = fkv::CacheKey::from_fields(fields);
  const fkv::CacheResult r = fkv::KernelCache::global().get(key, "log_probe", [] {
    fkv::CompiledKernel k;
    k.image = "stub image";
    k.lowered_name = "stub";
    return k;
  });
  CHECK(r.outcome == fkv::CacheOutcome::Compiled);
}

TEST_CASE("the library logs to stderr at FKV_LOG_LEVEL without a host logger (stub build)",
          "[options][logging]") {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  // stderr only: the library's messages; the test runner's report goes to stdout, dropped.
  auto stderr_of = [&](const std::string& level) {
    const std::string cmd = "env -u FKV_LOG_LEVEL FKV_DISABLE_CACHE=1 " +
                            (level.empty() ? std::string() : "FKV_LOG_LEVEL=" + level + " ") + "'" +
                            self + "' '[.fkv_log_level_child]' 2>&1 1>/dev/null";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buf[512];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    const int status = ::pclose(pipe);
    INFO(cmd << "\n" << out);
    CHECK(status == 0);
    return out;
  };
  CHECK_THAT(stderr_of("debug"), Catch::Contains("fkv-jit cache: compiled log_probe"));
  CHECK_THAT(stderr_of(""), !Catch::Contains("compiled log_probe"));  // the default level is warn
  CHECK_THAT(stderr_of("info"), !Catch::Contains("compiled log_probe"));
}
