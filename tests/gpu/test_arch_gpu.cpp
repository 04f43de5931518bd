// On a real GPU: a cache precompiled for the device (by the name a user writes in a Dockerfile,
// `sm_90a` on Hopper included) is what the runtime loads: every kernel a disk hit from the
// read-only root, nothing compiled; the decode-size kernels precompiled for this GPU's SM count
// too, looked up as DecodeKV looks them up. The CPU twin is tests/test_arch.cpp.
#include <catch2/catch.hpp>
#include <string>

#include "fkv/arch.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/precompile.hpp"
#include "fkv/runtime.hpp"
#include "temp_dir.hpp"

namespace {

// GPU tests run only where a GPU is expected: a driver that does not load is a failure.
void require_gpu() {
  try {
    fkv::Driver::get();
  } catch (const fkv::CudaError& e) {
    FAIL("GPU test without a usable CUDA driver: " << e.what());
  }
}

}  // namespace

TEST_CASE("a cache precompiled for this device's name is what the runtime loads", "[arch][gpu]") {
  require_gpu();
  int major = 0, minor = 0;
  const CUdevice dev = fkv::device_handle(0);
  FKV_CU(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  FKV_CU(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  const std::string plain = "sm_" + std::to_string(major * 10 + minor);
  int sms = 0;
  FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  const fkv::DecodePrecompile decode{sms, 8, 2560};  // the draft's hidden size
  // Hopper and Blackwell users were told to write the arch-specific name; both must work.
  for (const std::string& name : {plain, plain + "a"}) {
    INFO("precompile --arch " << name);
    const fkv::ArchRequest request = fkv::resolve_arch(name);
    CHECK(request.target.arch == fkv::Runtime::device_arch(0));

    const fkv::Plan plan = fkv::make_plan(
        fkv::ModelConfig::from_file(std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json"),
        fkv::ValidationMode::Grouped);
    fkv::VariantOptions options;
    fkv_test::TempDir baked("fkv-test-arch-gpu");
    {
      fkv::CacheOptions o;
      o.root = baked.path;
      fkv::KernelCache cache(o);
      const auto r = fkv::precompile(plan, options, {request.target}, cache, 0, {}, decode);
      REQUIRE(r.not_persisted() == 0);
      REQUIRE(r.kernels.size() == 4);  // stacked, pool, and the decode kernels' 8-token bucket
    }
    // The image's view: the baked directory as a read-only root, no writable root.
    fkv::CacheOptions ro;
    ro.readonly_roots = {baked.path};
    fkv::KernelCache cache(ro);
    fkv::Runtime runtime(cache);
    for (const fkv::KernelSpec& spec : fkv::kernel_specs_for(plan, options)) {
      const fkv::LoadedKernel& k = runtime.prepare(spec, 0);
      CHECK(k.outcome == fkv::CacheOutcome::ReadOnlyHit);
      CHECK(k.arch == request.target.arch);
    }
    const fkv::ArchTarget device = fkv::Runtime::device_target(0);  // what DecodeKV compiles for
    for (const fkv::DecodeSpec& spec : fkv::decode_specs_for(plan, options, decode)) {
      INFO(spec.canonical());
      const fkv::CacheResult r =
          cache.get(fkv::generate_decode(spec), fkv::CompileOptions{device.arch, device.ptx});
      CHECK(r.outcome == fkv::CacheOutcome::ReadOnlyHit);
    }
  }
}
