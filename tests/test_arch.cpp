// The arch rule (include/fkv/arch.hpp) and its contract with precompile: a kernel
// precompiled for the runtime's choice on a device is a disk hit when looked up the way the
// runtime looks it up. No GPU: the compute capability is given, as the driver would report it.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/codegen.hpp"
#include "fkv/errors.hpp"
#include "fkv/precompile.hpp"
#include "temp_dir.hpp"

using Catch::Matchers::Contains;
using fkv::Arch;
using fkv::ArchTarget;

namespace {

std::vector<Arch> archs(const std::vector<int>& numbers) {
  std::vector<Arch> out;
  for (int n : numbers) out.push_back(Arch{n / 10, n % 10, false});
  return out;
}

// What NVRTC 13.0 and 12.4 report (nvrtcGetSupportedArchs, from sm_80 on).
const std::vector<Arch> kNvrtc13 = archs({80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121});
const std::vector<Arch> kNvrtc124 = archs({80, 86, 87, 89, 90});

std::string target(int major, int minor, const std::vector<Arch>& supported) {
  return fkv::arch_for_compute_capability(major, minor, supported).name();
}

fkv::CacheOptions cache_at(const std::filesystem::path& root) {
  fkv::CacheOptions o;
  o.root = root;
  return o;
}

}  // namespace

TEST_CASE("arch rule: the device's own arch, else the newest of its major, else PTX", "[arch]") {
  CHECK(target(8, 0, kNvrtc13) == "sm_80");
  CHECK(target(8, 6, kNvrtc13) == "sm_86");
  CHECK(target(8, 9, kNvrtc13) == "sm_89");
  CHECK(target(9, 0, kNvrtc13) == "sm_90");  // H100/H200: never sm_90a
  CHECK(target(10, 0, kNvrtc13) == "sm_100");
  CHECK(target(12, 0, kNvrtc13) == "sm_120");
  CHECK(target(12, 1, kNvrtc13) == "sm_121");
  CHECK(target(10, 1, kNvrtc13) == "sm_100");        // same major, below it
  CHECK(target(13, 0, kNvrtc13) == "sm_121 (PTX)");  // newer than this NVRTC

  CHECK(target(8, 8, kNvrtc124) == "sm_87");
  CHECK(target(10, 0, kNvrtc124) == "sm_90 (PTX)");
  CHECK(target(12, 0, kNvrtc124) == "sm_90 (PTX)");

  // An arch-specific entry in the list is never chosen, even when it is the only 9.x one.
  CHECK(target(9, 0, {Arch{8, 0, false}, Arch{9, 0, true}}) == "sm_80 (PTX)");

  CHECK_THROWS_AS(fkv::arch_for_compute_capability(7, 5, kNvrtc13), fkv::CompileError);
  CHECK_THROWS_WITH(fkv::arch_for_compute_capability(7, 5, kNvrtc13),
                    Contains("compute capability 7.5") && Contains("sm_80"));
}

TEST_CASE("resolve_arch: strict names; a-/f-targets map to the runtime's arch with a note",
          "[arch]") {
  const fkv::ArchRequest plain = fkv::resolve_arch("sm_90", kNvrtc13);
  CHECK(plain.target.name() == "sm_90");
  CHECK(plain.note.empty());
  CHECK(fkv::resolve_arch("90", kNvrtc13).target.name() == "sm_90");
  CHECK(fkv::resolve_arch("9.0", kNvrtc13).target.name() == "sm_90");
  CHECK(fkv::resolve_arch("12.0", kNvrtc13).target.name() == "sm_120");
  CHECK(fkv::resolve_arch("sm_120", kNvrtc13).target.name() == "sm_120");

  const fkv::ArchRequest hopper = fkv::resolve_arch("sm_90a", kNvrtc13);
  CHECK(hopper.target.name() == "sm_90");
  CHECK(!hopper.target.arch.arch_specific);
  CHECK_THAT(hopper.note, Contains("sm_90a") && Contains("sm_90") && Contains("never loads"));
  CHECK(fkv::resolve_arch("sm_100a", kNvrtc13).target.name() == "sm_100");
  CHECK(fkv::resolve_arch("sm_100f", kNvrtc13).target.name() == "sm_100");

  const fkv::ArchRequest newer = fkv::resolve_arch("sm_100", kNvrtc124);
  CHECK(newer.target.name() == "sm_90 (PTX)");
  CHECK_THAT(newer.note, Contains("cannot build sm_100"));

  for (const char* bad : {"compute_90", "sm_1", "sm_9", "sm_090", "sm_9.0", "hopper", "", "sm_",
                          "sm_90b", "1234", "9.10", "sm_90aa"}) {
    INFO(bad);
    CHECK_THROWS_AS(fkv::resolve_arch(bad, kNvrtc13), fkv::ArgumentError);
  }
  CHECK_THROWS_WITH(fkv::resolve_arch("compute_90", kNvrtc13), Contains("sm_90"));
  CHECK_THROWS_WITH(fkv::resolve_arch("sm_1", kNvrtc13), Contains("one digit"));
  CHECK_THROWS_AS(fkv::resolve_arch("sm_10", kNvrtc13), fkv::CompileError);  // cc 1.0
  CHECK_THROWS_AS(fkv::resolve_arch("sm_75", kNvrtc13), fkv::CompileError);
}

TEST_CASE("one arch syntax: Arch::parse reads names as resolve_arch does", "[arch][compiler]") {
  const fkv::ArchName hopper = fkv::parse_arch_name("sm_90a");
  CHECK((hopper.major == 9 && hopper.minor == 0 && hopper.suffix == 'a'));
  const fkv::ArchName blackwell = fkv::parse_arch_name("sm_120");
  CHECK((blackwell.major == 12 && blackwell.minor == 0 && blackwell.suffix == 0));
  CHECK(fkv::parse_arch_name("12.0").major == 12);
  CHECK(fkv::parse_arch_name("100f").suffix == 'f');
  // Each of these was read by Arch::parse before (as sm_90, sm_90, sm_90, sm_90) while
  // resolve_arch refused them; a syntax error is an ArgumentError saying what is accepted.
  for (const char* bad : {"compute_90", "sm_9.0", "90.", "9.0a", "sm_90x", "sm_1", "sm_090",
                          "hopper", "", "sm_", "sm_90aa", "1234", "9.10", "compute_90a"}) {
    INFO(bad);
    CHECK_THROWS_WITH(fkv::parse_arch_name(bad),
                      Contains("is not a GPU arch") && Contains("sm_<major><minor>"));
    CHECK_THROWS_AS(Arch::parse(bad), fkv::ArgumentError);
    CHECK_THROWS_AS(fkv::resolve_arch(bad, kNvrtc13), fkv::ArgumentError);
  }
  CHECK_THROWS_WITH(Arch::parse("compute_90"), Contains("virtual arch") && Contains("sm_90"));
  CHECK_THROWS_WITH(Arch::parse("sm_1"), Contains("one digit"));
  // A family target is not one arch to compile for; resolve_arch maps it, Arch::parse refuses.
  CHECK_THROWS_WITH(Arch::parse("sm_100f"), Contains("arch-family") && Contains("sm_100"));
  // Well-formed but not buildable: CompileError listing what this NVRTC builds.
  CHECK_THROWS_WITH(Arch::parse("sm_75"), Contains("not supported") && Contains("sm_80"));
  CHECK_THROWS_AS(Arch::parse("sm_80a"), fkv::CompileError);  // 'a' targets start at sm_90
  CHECK(Arch::parse("sm_90a").arch_specific);
  CHECK(Arch::parse("9.0") == Arch::parse("sm_90"));
}

// The deployment bug this guards against: a cache baked for an arch the runtime never loads
// (sm_90a on Hopper) never hits. For each device, precompile what the runtime picks there,
// then look it up the runtime's way (KernelCache::get with the target's arch and output kind)
// from a fresh cache over the same directory, as a new process would.
TEST_CASE("precompiling the runtime's arch choice gives a disk hit on every device",
          "[arch][nvrtc]") {
  const auto supported = fkv::supported_archs();
  REQUIRE(!supported.empty());
  const fkv::Plan plan = fkv::make_plan(
      fkv::ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json"),
      fkv::ValidationMode::Grouped);
  fkv::VariantOptions options;
  options.pool = false;  // one kernel per device keeps the NVRTC time down
  const fkv::KernelSpec spec = fkv::kernel_specs_for(plan, options).at(0);

  int newest_major = 0;
  for (const Arch& a : supported) newest_major = std::max(newest_major, a.major);
  std::vector<std::pair<int, int>> devices = {{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};
  devices.emplace_back(newest_major + 1, 0);  // newer than this NVRTC: PTX

  fkv_test::TempDir dir("fkv-test-arch");
  for (const auto& [major, minor] : devices) {
    const ArchTarget t = fkv::arch_for_compute_capability(major, minor);
    INFO("compute capability " << major << "." << minor << " -> " << t.name());
    {
      fkv::KernelCache cache(cache_at(dir.path));
      const fkv::PrecompileResult r = fkv::precompile(plan, options, {t}, cache, 1);
      REQUIRE(r.kernels.size() == 1);
      CHECK(r.kernels[0].persisted());
      CHECK(r.not_persisted() == 0);
    }
    fkv::KernelCache runtime_cache(cache_at(dir.path));
    const fkv::CacheResult hit =
        runtime_cache.get(fkv::generate(spec), fkv::CompileOptions{t.arch, t.ptx});
    CHECK(hit.outcome == fkv::CacheOutcome::DiskHit);
  }

  // The old instruction, `precompile --arch sm_90a`, now bakes what an H100/H200 loads.
  fkv_test::TempDir baked("fkv-test-arch-a");
  {
    fkv::KernelCache cache(cache_at(baked.path));
    fkv::precompile(plan, options, {fkv::resolve_arch("sm_90a").target}, cache, 1);
  }
  const ArchTarget hopper = fkv::arch_for_compute_capability(9, 0);
  fkv::KernelCache runtime_cache(cache_at(baked.path));
  CHECK(runtime_cache.get(fkv::generate(spec), fkv::CompileOptions{hopper.arch, hopper.ptx})
            .outcome == fkv::CacheOutcome::DiskHit);
}

TEST_CASE("precompile reports progress once per kernel and counts what it compiled",
          "[arch][nvrtc]") {
  const fkv::Plan plan = fkv::make_plan(
      fkv::ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/smollm3-3b.json"),
      fkv::ValidationMode::Grouped);
  REQUIRE(plan.groups.size() == 2);  // RoPE and NoPE layers: two kernel specializations
  fkv::VariantOptions options;       // both modes: 2 groups x 2 modes
  fkv_test::TempDir dir("fkv-test-precompile");
  fkv::KernelCache cache(cache_at(dir.path));
  const std::vector<ArchTarget> targets = {fkv::resolve_arch("sm_80").target,
                                           fkv::resolve_arch("sm_90").target};
  std::vector<std::size_t> seen;
  const auto first =
      fkv::precompile(plan, options, targets, cache, 3,
                      [&](const fkv::PrecompiledKernel&, std::size_t done, std::size_t total) {
                        CHECK(total == 8);
                        seen.push_back(done);
                      });
  CHECK(first.kernels.size() == 8);
  CHECK(first.compiled() == 8);
  CHECK(first.not_persisted() == 0);
  CHECK(seen == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(first.kernels[0].target.name() == "sm_80");
  CHECK(first.kernels[4].target.name() == "sm_90");

  fkv::KernelCache again(cache_at(dir.path));
  const auto second = fkv::precompile(plan, options, targets, again);
  CHECK(second.compiled() == 0);
  for (const auto& k : second.kernels) CHECK(k.outcome == fkv::CacheOutcome::DiskHit);
}

TEST_CASE("precompile into a memory-only cache persists nothing and says so", "[arch][nvrtc]") {
  const fkv::Plan plan = fkv::make_plan(
      fkv::ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json"),
      fkv::ValidationMode::Grouped);
  fkv::VariantOptions options;
  options.pool = false;
  fkv::KernelCache cache(fkv::CacheOptions{});  // no root: memory only
  const auto r = fkv::precompile(plan, options, {fkv::resolve_arch("sm_80").target}, cache);
  CHECK(r.kernels.size() == 1);
  CHECK(r.not_persisted() == 1);
  CHECK(!r.kernels[0].persisted());
}
