// A serving image's start-up with FP8 draft weights: the kernels `fkv-jit precompile --weights
// fp8_tensor --decode H200` baked into a directory are exactly those a FusedKVMaterializer over
// such weights builds (epilogue, decode kernels over the stored bytes, dequantize, the FP8
// GEMM's activation quantizer and scale expansion). With that directory as the only read-only
// root and NVRTC unloadable (FKV_NVRTC_LIBRARY names no library), the materializer is built, its
// decode path and FP8 GEMM are on, calls on both run, and nothing is written to the writable
// root (no kernel was compiled). Its own process: the environment is set before the library
// first reads it (the CLI that bakes the cache runs without it). Results are checked elsewhere
// (test_decode_gpu); here only that the calls run.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "cli_runner.hpp"
#include "fkv/config.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "temp_dir.hpp"

namespace {

std::size_t files_under(const std::filesystem::path& dir, const std::string& ext) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ext) ++n;
  return n;
}

}  // namespace

TEST_CASE("FP8 weights: a materializer starts from a precompiled read-only cache without NVRTC",
          "[gpu]") {
  fkv_test::TempDir dir("fkv-test-precompiled-q");
  const std::filesystem::path baked = dir.path / "baked", rw = dir.path / "rw";
  std::filesystem::create_directories(rw);
  ::setenv("FKV_CACHE_READONLY_DIRS", baked.c_str(), 1);
  ::setenv("FKV_CACHE_DIR", rw.c_str(), 1);
  ::setenv("FKV_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13", 1);

  CUdevice dev = fkv::device_handle(0);
  char name[256] = {};
  FKV_CU(cuDeviceGetName, name, sizeof name - 1, dev);
  if (std::string(name).find("H200") == std::string::npos) {
    WARN("the precompiled decode kernels are the H200's (--decode H200); this is " << name
                                                                                   << ": skipped");
    return;
  }
  int major = 0, minor = 0;
  FKV_CU(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  FKV_CU(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  const std::string config = std::string(FKV_TEST_DATA_DIR) + "/dflash-qwen3-4b-draft.json";
  const fkv_test::CliResult pre = fkv_test::run_cli(
      dir.path,
      "precompile '" + config + "' --arch sm_" + std::to_string(major * 10 + minor) +
          " --decode H200 --weights fp8_tensor --cache-dir '" + baked.string() + "'",
      "env -u FKV_CACHE_READONLY_DIRS -u FKV_CACHE_DIR -u FKV_NVRTC_LIBRARY");
  INFO(pre.out << pre.err);
  REQUIRE(pre.code == 0);
  // 2 epilogue kernels, 8 decode kernels (4 buckets, stacked and pool), dequantize, quantize
  // activations (per token; per token and 128 columns), expand scales.
  REQUIRE(files_under(baked, ".cubin") == 14);

  const fkv::ModelConfig cfg = fkv::ModelConfig::from_file(config);
  const int hidden = cfg.hidden_size.value, layers = 5, D = 128;
  const std::int64_t rows = 2 * 8 * D;  // K then V rows of a layer
  // Random e4m3 bytes (never 0x7f / 0xff, the NaNs), per-layer scales.
  std::vector<std::uint8_t> w(static_cast<std::size_t>(layers * rows * hidden));
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (std::uint8_t& b : w) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::uint8_t>((state >> 33) & 0x7e) |
        static_cast<std::uint8_t>((state >> 60) & 0x80);
  }
  const std::vector<float> scales(static_cast<std::size_t>(layers), 0.01f);
  fkv::ensure_context(0);
  fkv::DeviceBuffer d_w(w.size()), d_scales(scales.size() * sizeof(float));
  FKV_CU(cuMemcpyHtoD, d_w.get(), w.data(), w.size());
  FKV_CU(cuMemcpyHtoD, d_scales.get(), scales.data(), scales.size() * sizeof(float));
  fkv::MaterializerWeights mw;
  mw.format = fkv::WeightFormat::Fp8Tensor;
  for (int l = 0; l < layers; ++l) {
    mw.w_kv.push_back(static_cast<const char*>(d_w.ptr()) + l * rows * hidden);
    mw.w_scale.push_back(static_cast<const float*>(d_scales.ptr()) + l);
    mw.k_norm.emplace_back(static_cast<std::size_t>(D), 1.0f);
  }
  fkv::MaterializerOptions o;
  o.max_tokens = 128;
  o.max_position = 4096;
  fkv::FusedKVMaterializer mat(cfg, hidden, mw, o);
  CHECK(mat.decode_crossover() == 32);  // 0 when the decode kernels could not be built
  CHECK(mat.fp8_gemm());

  // One stacked call on each path: 3 tokens (decode kernel), 40 (FP8 GEMM with the scales as
  // blocks) and 100 (FP8 GEMM with per-row scales), then the epilogue.
  const std::int64_t T = 100, kv = 8 * D;
  std::vector<std::uint16_t> x(static_cast<std::size_t>(T * hidden), 0x3c00);  // bf16 1.0
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint16_t>(0x3c00 + (i % 97));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = t;
  fkv::DeviceBuffer d_x(x.size() * 2), d_pos(pos.size() * 8);
  FKV_CU(cuMemcpyHtoD, d_x.get(), x.data(), x.size() * 2);
  FKV_CU(cuMemcpyHtoD, d_pos.get(), pos.data(), pos.size() * 8);
  const std::size_t out_bytes = static_cast<std::size_t>(layers * T * kv * 2);
  fkv::DeviceBuffer k(out_bytes), v(out_bytes);
  void* kp = k.ptr();
  void* vp = v.ptr();
  fkv::Stream stream;
  for (std::int64_t n : {std::int64_t{3}, std::int64_t{40}, T}) {
    INFO(n << " tokens");
    FKV_CU(cuMemsetD8Async, k.get(), 0xff, out_bytes, stream.get());
    mat.materialize_stacked(fkv::MaterializerInput{d_x.ptr(), n, 0, d_pos.ptr()},
                            std::span<void* const>(&kp, 1), std::span<void* const>(&vp, 1),
                            stream.get());
    CHECK(mat.take_error_flag(stream.get()) == 0u);
    std::uint16_t first = 0;
    FKV_CU(cuMemcpyDtoH, &first, k.get(), sizeof first);
    CHECK(first != 0xffff);  // written
  }
  CHECK(files_under(rw, ".cubin") == 0);  // nothing compiled
}
